/* mpi_comm.c: the mpi comm backend, tested as real processes.
 *
 * ctest starts it as `mpiexec -n 2` and `mpiexec -n 4 --oversubscribe`. It
 * runs the backend-agnostic collective cases (tests/common/coll_cases.h),
 * then the cases only MPI has:
 *   launch_env       vqc_mpi_launched() is true, size and rank are mpiexec's
 *                    (OMPI_COMM_WORLD_SIZE / _RANK), and there are >= 2 ranks
 *                    (so the run really is several processes);
 *   side_separate    the side channel is its own communicator: a collective
 *                    on it never matches one on the data comm;
 *   ledger_sites     ledger records carry this file's call sites, the same
 *                    sequence numbers and sites on every rank;
 *   aliased_buffers  all_gather(v) with send == recv and all_reduce with
 *                    partly overlapping buffers give the exact results;
 *   count_overflow   counts above INT_MAX are refused with VQC_EINVAL before
 *                    anything reaches MPI, and the comm stays usable;
 *   abort            after vqc_comm_abort, collectives return VQC_EABORTED
 *                    at once; the side channel keeps working until it is
 *                    aborted itself;
 *   deadline         a collective that rank 0 skips returns VQC_ETIMEOUT on
 *                    the others after the 0.5 s timeout; rank 0 then enters
 *                    late, and the next collective completes the stale one
 *                    with the exact result, so the run ends cleanly;
 *   blocking_cases   the shared collective cases and aliased_buffers again,
 *                    with the comm in VQC_WAIT_BLOCKING mode (the blocking
 *                    MPI collectives, MPI_IN_PLACE where in place);
 *   blocking_watchdog  in BLOCKING mode, rank 0 skips an all_reduce: the
 *                    others' blocking call cannot time out, but their
 *                    watchdog (0.3 s) fires once, with that record's seq, op
 *                    and site, while it is stuck; rank 0's watchdog never
 *                    fires; rank 0 then joins late (after the comm's own
 *                    0.6 s timeout, which BLOCKING does not honour), the
 *                    blocking call completes with the exact sum and the run
 *                    ends cleanly.
 * After each case the ranks agree on the failure count over the side
 * channel; rank 0 prints "name: ok" or "name: FAILED" and finally
 * "N passed, M failed". Failed checks are printed to stderr by the rank that
 * saw them. Exit code 0 only when every case passed on every rank. */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_cases.h"
#include "mpi_driver.h"
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/watchdog.h"

/* Generous per-collective timeout for the main comm: long enough for four
 * ranks on two busy cores, short enough that a broken case fails well
 * inside ctest's 300 s. */
#define MAIN_TIMEOUT_S 30.0

/* ---- cases (each returns this rank's failed checks) */

static int case_launch_env(vqc_comm *c) {
  vqc_driver_failures = 0;
  CHECK(vqc_mpi_launched(), "not detected as launched by mpiexec");
  CHECK(vqc_backend_built(VQC_BACKEND_MPI), "mpi backend not built");
  CHECK(vqc_comm_backend(c) == VQC_BACKEND_MPI, "backend is %s",
        vqc_backend_name(vqc_comm_backend(c)));
  const char *env_size = getenv("OMPI_COMM_WORLD_SIZE");
  const char *env_rank = getenv("OMPI_COMM_WORLD_RANK");
  CHECK(env_size && env_rank, "OMPI_COMM_WORLD_SIZE/RANK not set");
  if (env_size && env_rank) {
    CHECK(vqc_comm_size(c) == atoi(env_size), "size %d, mpiexec says %s",
          vqc_comm_size(c), env_size);
    CHECK(vqc_comm_rank(c) == atoi(env_rank), "rank %d, mpiexec says %s",
          vqc_comm_rank(c), env_rank);
  }
  CHECK(vqc_comm_size(c) >= 2, "only %d process: the run is not multi-rank",
        vqc_comm_size(c));
  return vqc_driver_failures;
}

/* Rank 0 broadcasts 111 on the side channel and then 222 on the data comm;
 * the other ranks receive on the data comm first. Separate communicators
 * match each broadcast with its own kind (data 222, side 111); a shared one
 * would match rank 0's first broadcast with the others' first (data 111).
 * Rank 0 does not wait for the others: a root's 4-byte send completes
 * eagerly, so the crossed order cannot deadlock (if it ever did, the 10 s
 * timeout turns it into a failure, not a hang). */
static int case_side_separate(vqc_comm *c) {
  vqc_driver_failures = 0;
  vqc_comm *side = vqc_comm_side(c);
  vqc_comm_set_timeout(c, 10.0); /* sets the side channel's too */
  uint64_t n0 = vqc_ledger_count(vqc_comm_ledger(c));
  int32_t data = -1, aside = -1;
  vqc_status s1, s2;
  if (vqc_driver_rank == 0) {
    aside = 111;
    data = 222;
    s1 = vqc_broadcast(side, &aside, 1, VQC_I32, 0);
    s2 = vqc_broadcast(c, &data, 1, VQC_I32, 0);
  } else {
    s2 = vqc_broadcast(c, &data, 1, VQC_I32, 0);
    s1 = vqc_broadcast(side, &aside, 1, VQC_I32, 0);
  }
  CHECK_OK(s1, "side broadcast");
  CHECK_OK(s2, "data broadcast");
  CHECK(data == 222, "data broadcast gave %d (111: it matched the side one)",
        (int)data);
  CHECK(aside == 111, "side broadcast gave %d", (int)aside);
  /* Only the data broadcast is in the ledger. */
  CHECK(vqc_ledger_count(vqc_comm_ledger(c)) == n0 + 1,
        "ledger grew by %llu, expected 1",
        (unsigned long long)(vqc_ledger_count(vqc_comm_ledger(c)) - n0));
  vqc_comm_set_timeout(c, MAIN_TIMEOUT_S);
  return vqc_driver_failures;
}

static int case_ledger_sites(vqc_comm *c) {
  vqc_driver_failures = 0;
  vqc_ledger *l = vqc_comm_ledger(c);
  uint64_t n0 = vqc_ledger_count(l);
  double x = 1.0, y = 0.0;
  int line_reduce = __LINE__ + 1;
  vqc_status s = vqc_all_reduce(c, &x, &y, 1, VQC_F64, VQC_SUM);
  CHECK_OK(s, "all_reduce");
  int line_barrier = __LINE__ + 1;
  s = vqc_barrier(c);
  CHECK_OK(s, "barrier");
  CHECK(vqc_ledger_count(l) == n0 + 2, "ledger count %llu, expected %llu",
        (unsigned long long)vqc_ledger_count(l), (unsigned long long)n0 + 2);

  const int lines[2] = {line_reduce, line_barrier};
  const vqc_coll_op ops[2] = {VQC_COLL_ALL_REDUCE, VQC_COLL_BARRIER};
  for (int i = 0; i < 2; i++) {
    vqc_ledger_record r;
    if (!vqc_ledger_get(l, n0 + (uint64_t)i, &r)) {
      CHECK(false, "record %llu missing", (unsigned long long)n0 + (uint64_t)i);
      continue;
    }
    CHECK(r.seq == n0 + (uint64_t)i, "seq %llu", (unsigned long long)r.seq);
    CHECK(r.rank == vqc_driver_rank, "record rank %d", r.rank);
    CHECK(r.op == ops[i], "op %s", vqc_coll_name(r.op));
    CHECK(r.site.file && strcmp(r.site.file, __FILE__) == 0, "file %s",
          r.site.file ? r.site.file : "(null)");
    CHECK(r.site.line == lines[i], "line %d, expected %d", r.site.line,
          lines[i]);
    CHECK(r.site.func && strcmp(r.site.func, "case_ledger_sites") == 0,
          "func %s", r.site.func ? r.site.func : "(null)");
    CHECK(r.state == VQC_REC_DONE && r.status == VQC_OK, "state %s status %s",
          vqc_record_state_name(r.state), vqc_status_name(r.status));
    CHECK(r.t_exit_ns >= r.t_enter_ns && r.t_enter_ns > 0, "times %llu..%llu",
          (unsigned long long)r.t_enter_ns, (unsigned long long)r.t_exit_ns);
  }

  /* Every rank numbered the all_reduce alike and saw the same line. */
  int64_t mine[2] = {(int64_t)n0, line_reduce};
  int size = vqc_comm_size(c);
  int64_t *all = calloc((size_t)size * 2, sizeof *all);
  CHECK(all != NULL, "no memory");
  if (all) {
    s = vqc_all_gather(vqc_comm_side(c), mine, all, 2, VQC_I64);
    CHECK_OK(s, "side all_gather");
    for (int r = 0; s == VQC_OK && r < size; r++)
      CHECK(all[2 * r] == mine[0] && all[2 * r + 1] == mine[1],
            "rank %d has seq %lld line %lld, this rank %lld line %lld", r,
            (long long)all[2 * r], (long long)all[2 * r + 1],
            (long long)mine[0], (long long)mine[1]);
  }
  free(all);
  return vqc_driver_failures;
}

/* Buffers that overlap other than the in-place conventions coll_cases
 * tests: the result must be as if every send buffer were read before any
 * recv buffer was written (what the threads backend does too). */
static int case_aliased_buffers(vqc_comm *c) {
  vqc_driver_failures = 0;
  int size = vqc_comm_size(c);
  enum { N = 5 };
  int32_t *buf = calloc((size_t)size * N + 1, sizeof *buf);
  size_t *counts = calloc((size_t)size, sizeof *counts);
  CHECK(buf && counts, "no memory");
  if (!buf || !counts) goto done;

  /* all_gather with send == recv: this rank's input at the start of recv. */
  for (int i = 0; i < N; i++) buf[i] = 100 * vqc_driver_rank + i;
  vqc_status s = vqc_all_gather(c, buf, buf, N, VQC_I32);
  CHECK_OK(s, "all_gather send == recv");
  for (int r = 0; s == VQC_OK && r < size; r++)
    for (int i = 0; i < N; i++)
      CHECK(buf[r * N + i] == 100 * r + i, "all_gather [%d][%d] = %d", r, i,
            (int)buf[r * N + i]);

  /* all_gatherv with send == recv: rank r sends r + 1 elements. */
  size_t total = 0;
  for (int r = 0; r < size; r++) total += counts[r] = (size_t)r + 1;
  for (int i = 0; i <= vqc_driver_rank; i++)
    buf[i] = 1000 * vqc_driver_rank + i;
  s = vqc_all_gatherv(c, buf, counts[vqc_driver_rank], buf, counts, VQC_I32);
  CHECK_OK(s, "all_gatherv send == recv");
  for (int r = 0, k = 0; s == VQC_OK && r < size; r++)
    for (int i = 0; i <= r; i++, k++)
      CHECK(buf[k] == 1000 * r + i, "all_gatherv [%d] = %d, want %d", k,
            (int)buf[k], 1000 * r + i);
  CHECK(total == (size_t)size * (size + 1) / 2, "total %zu", total);

  /* all_reduce with recv one element past send (partial overlap). */
  for (int i = 0; i < N; i++) buf[i] = (vqc_driver_rank + 1) * (i + 1);
  s = vqc_all_reduce(c, buf, buf + 1, N, VQC_I32, VQC_SUM);
  CHECK_OK(s, "all_reduce with overlapping buffers");
  for (int i = 0; s == VQC_OK && i < N; i++)
    CHECK(buf[i + 1] == (i + 1) * size * (size + 1) / 2,
          "all_reduce [%d] = %d", i, (int)buf[i + 1]);
done:
  free(buf);
  free(counts);
  return vqc_driver_failures;
}

/* MPI counts are int. The buffers are one element: the backend must refuse
 * the count before MPI (or anything) touches them. */
static int case_count_overflow(vqc_comm *c) {
  vqc_driver_failures = 0;
  int size = vqc_comm_size(c);
  float one = 1.0f, out[1] = {0};
  size_t big = (size_t)INT_MAX + 1;
  vqc_status s = vqc_all_reduce(c, &one, out, big, VQC_F32, VQC_SUM);
  CHECK(s == VQC_EINVAL, "all_reduce of %zu: %s", big, vqc_status_name(s));
  CHECK(strstr(vqc_last_error(), "INT_MAX") != NULL, "message: %s",
        vqc_last_error());
  vqc_ledger *l = vqc_comm_ledger(c);
  vqc_ledger_record r;
  CHECK(vqc_ledger_get(l, vqc_ledger_count(l) - 1, &r) &&
            r.state == VQC_REC_FAILED && r.status == VQC_EINVAL,
        "the refused call is not a FAILED/EINVAL record");

  /* all_gatherv: each count fits, their sum (the displacements) does not. */
  size_t *counts = calloc((size_t)size, sizeof *counts);
  CHECK(counts != NULL, "no memory");
  if (counts) {
    for (int i = 0; i < size; i++) counts[i] = (size_t)INT_MAX / 2 + 1;
    s = vqc_all_gatherv(c, &one, counts[vqc_driver_rank], out, counts, VQC_F32);
    CHECK(s == VQC_EINVAL, "all_gatherv with total > INT_MAX: %s",
          vqc_status_name(s));
  }
  free(counts);

  /* Nothing was started, so the comm still works. */
  int32_t v = vqc_driver_rank + 1, sum = 0;
  s = vqc_all_reduce(c, &v, &sum, 1, VQC_I32, VQC_SUM);
  CHECK_OK(s, "all_reduce after the refused ones");
  CHECK(sum == size * (size + 1) / 2, "sum %d", (int)sum);
  return vqc_driver_failures;
}

/* On a comm of its own (aborting the main one would end the run). */
static int case_abort(vqc_comm *c) {
  vqc_driver_failures = 0;
  int size = vqc_comm_size(c);
  vqc_comm *ab = NULL;
  vqc_status s = vqc_mpi_comm_create(NULL, NULL, &ab);
  CHECK_OK(s, "second vqc_mpi_comm_create");
  if (s != VQC_OK) return vqc_driver_failures;
  vqc_comm *side = vqc_comm_side(ab);
  vqc_comm_abort(ab);
  double t0 = vqc_driver_now_s();
  s = vqc_barrier(ab);
  double dt = vqc_driver_now_s() - t0;
  CHECK(s == VQC_EABORTED, "barrier after abort: %s", vqc_status_name(s));
  CHECK(dt < 0.5, "the aborted barrier took %.3f s", dt); /* no waiting */

  /* The side channel does not share the data comm's fate... */
  int32_t v = vqc_driver_rank + 1, w = 0;
  s = vqc_all_reduce(side, &v, &w, 1, VQC_I32, VQC_SUM);
  CHECK_OK(s, "side all_reduce after aborting the data comm");
  CHECK(w == size * (size + 1) / 2, "side all_reduce gave %d", (int)w);
  /* ...until it is aborted itself. */
  vqc_comm_abort(side);
  s = vqc_all_reduce(side, &v, &w, 1, VQC_I32, VQC_SUM);
  CHECK(s == VQC_EABORTED, "side all_reduce after its abort: %s",
        vqc_status_name(s));
  vqc_mpi_comm_destroy(ab);
  return vqc_driver_failures;
}

/* Rank 0 skips an all_reduce that the others enter. They must time out
 * (after the 0.5 s deadline, well within 5 s). Then, so that MPI is left
 * clean, rank 0 enters the same all_reduce late: the others' next
 * collective first completes their stale request, which must then hold the
 * exact sum. Runs on a comm of its own so the main one is never stale. */
static int case_deadline(vqc_comm *c) {
  vqc_driver_failures = 0;
  int size = vqc_comm_size(c);
  vqc_comm *dl = NULL;
  vqc_status s = vqc_mpi_comm_create(NULL, NULL, &dl);
  CHECK_OK(s, "second vqc_mpi_comm_create");
  if (s != VQC_OK) return vqc_driver_failures;
  vqc_comm_set_timeout(dl, 0.5);

  /* Must outlive the timed-out call: MPI writes it when the request ends. */
  int32_t mine = vqc_driver_rank + 1, sum = -1;
  const int32_t want = size * (size + 1) / 2;
  if (vqc_driver_rank != 0) {
    double t0 = vqc_driver_now_s();
    s = vqc_all_reduce(dl, &mine, &sum, 1, VQC_I32, VQC_SUM);
    double dt = vqc_driver_now_s() - t0;
    CHECK(s == VQC_ETIMEOUT, "skipped all_reduce returned %s: %s",
          vqc_status_name(s), vqc_last_error());
    CHECK(dt >= 0.5 && dt < 5.0, "timed out after %.3f s (timeout 0.5 s)",
          dt);
    vqc_ledger_record r;
    CHECK(vqc_ledger_in_flight(vqc_comm_ledger(dl), &r) == false,
          "a record is still ENTERED after the timeout");
    CHECK(vqc_ledger_get(vqc_comm_ledger(dl), 0, &r) &&
              r.state == VQC_REC_FAILED && r.status == VQC_ETIMEOUT,
          "the timed-out call is not a FAILED/ETIMEOUT record");
  }

  /* Rank 0 waits here (main side channel) until the others have timed out. */
  int32_t token = 0, tokens = 0;
  s = vqc_all_reduce(vqc_comm_side(c), &token, &tokens, 1, VQC_I32, VQC_SUM);
  CHECK_OK(s, "side all_reduce after the timeout");

  vqc_comm_set_timeout(dl, MAIN_TIMEOUT_S);
  if (vqc_driver_rank == 0) {
    s = vqc_all_reduce(dl, &mine, &sum, 1, VQC_I32, VQC_SUM);
    CHECK_OK(s, "late all_reduce on rank 0");
  }
  s = vqc_barrier(dl); /* on ranks != 0, first completes the stale request */
  CHECK_OK(s, "barrier after the late all_reduce");
  CHECK(sum == want, "all_reduce result %d, expected %d", (int)sum,
        (int)want);
  vqc_mpi_comm_destroy(dl);
  return vqc_driver_failures;
}

/* The shared cases and aliased_buffers in BLOCKING mode (rank 0 prints
 * their lines under a heading). */
static int case_blocking_cases(vqc_comm *c) {
  vqc_driver_failures = 0;
  vqc_status s = vqc_comm_set_wait_mode(c, VQC_WAIT_BLOCKING);
  CHECK_OK(s, "set_wait_mode BLOCKING");
  CHECK(vqc_comm_wait_mode(c) == VQC_WAIT_BLOCKING, "mode not BLOCKING");
  CHECK(vqc_comm_set_wait_mode(vqc_comm_side(c), VQC_WAIT_BLOCKING) ==
            VQC_EINVAL,
        "a side channel accepted BLOCKING");
  if (vqc_driver_rank == 0) printf("-- the shared cases in BLOCKING mode:\n");
  int failed_cases = vqc_run_coll_cases(c);
  CHECK(failed_cases == 0, "%d shared cases failed in BLOCKING mode",
        failed_cases);
  int mine = vqc_driver_failures;
  int aliased = case_aliased_buffers(c); /* resets vqc_driver_failures */
  vqc_driver_failures = mine + aliased;
  if (vqc_driver_rank == 0) printf("-- end of BLOCKING mode\n");
  CHECK_OK(vqc_comm_set_wait_mode(c, VQC_WAIT_POLL), "set_wait_mode POLL");
  return vqc_driver_failures;
}

/* What a watchdog reported (written on its thread). */
typedef struct fire_log {
  pthread_mutex_t mu;
  int n;
  vqc_ledger_record rec; /* the first fire's record */
  double at_s;           /* vqc_driver_now_s() at the first fire */
} fire_log;

static void on_stuck(const vqc_ledger_record *stuck, void *user) {
  fire_log *log = user;
  double t = vqc_driver_now_s();
  pthread_mutex_lock(&log->mu);
  if (log->n++ == 0) {
    log->rec = *stuck;
    log->at_s = t;
  }
  pthread_mutex_unlock(&log->mu);
}

#define WD_TIMEOUT_S 0.3
/* Rank 0 joins this late: the watchdogs (0.3 s, polling every 30 ms) have
 * fired long before, even with four ranks spinning on two busy cores. */
#define WD_LATE_S 2.0
/* How late after the timeout a fire may come: a poll interval plus what
 * two oversubscribed, shared cores can add to a thread's wake-up. */
#define WD_SLACK_S 1.0

static int case_blocking_watchdog(vqc_comm *c) {
  vqc_driver_failures = 0;
  int size = vqc_comm_size(c);
  vqc_comm *dl = NULL;
  vqc_status s = vqc_mpi_comm_create(NULL, NULL, &dl);
  CHECK_OK(s, "second vqc_mpi_comm_create");
  if (s != VQC_OK) return vqc_driver_failures;
  CHECK_OK(vqc_comm_set_wait_mode(dl, VQC_WAIT_BLOCKING), "set_wait_mode");
  /* Shorter than rank 0's lateness: a POLL wait would return VQC_ETIMEOUT,
   * a BLOCKING one ignores it and completes when rank 0 comes. */
  vqc_comm_set_timeout(dl, 2 * WD_TIMEOUT_S);
  fire_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
  vqc_watchdog *wd = NULL;
  s = vqc_watchdog_start(dl, WD_TIMEOUT_S, on_stuck, &log, &wd);
  CHECK_OK(s, "watchdog_start");
  if (s != VQC_OK) {
    vqc_mpi_comm_destroy(dl);
    return vqc_driver_failures;
  }

  /* Start together, so "late" is measured from the same moment. */
  CHECK_OK(vqc_barrier(vqc_comm_side(c)), "side barrier");
  int32_t mine = vqc_driver_rank + 1, sum = -1;
  const int32_t want = size * (size + 1) / 2;
  if (vqc_driver_rank == 0) {
    struct timespec late = {(time_t)WD_LATE_S,
                            (long)((WD_LATE_S - (int)WD_LATE_S) * 1e9)};
    nanosleep(&late, NULL);
  }
  double t0 = vqc_driver_now_s();
  int line = __LINE__ + 1;
  s = vqc_all_reduce(dl, &mine, &sum, 1, VQC_I32, VQC_SUM);
  double t1 = vqc_driver_now_s();
  CHECK_OK(s, "the late all_reduce (BLOCKING)");
  CHECK(sum == want, "all_reduce result %d, expected %d", (int)sum,
        (int)want);
  vqc_watchdog_stop(wd);

  /* The watchdog thread is joined: its writes are visible without the
   * lock now. */
  if (vqc_driver_rank == 0) {
    CHECK(log.n == 0, "rank 0 was never stuck but its watchdog fired %d "
          "times", log.n);
  } else {
    CHECK(log.n == 1, "watchdog fired %d times for one stuck all_reduce",
          log.n);
    if (log.n >= 1) {
      const vqc_ledger_record *r = &log.rec;
      CHECK(r->seq == 0 && r->op == VQC_COLL_ALL_REDUCE &&
                r->state == VQC_REC_ENTERED && r->rank == vqc_driver_rank,
            "fired for seq %llu op %s state %s rank %d",
            (unsigned long long)r->seq, vqc_coll_name(r->op),
            vqc_record_state_name(r->state), r->rank);
      CHECK(r->site.file && strcmp(r->site.file, __FILE__) == 0 &&
                r->site.line == line && r->site.func &&
                strcmp(r->site.func, "case_blocking_watchdog") == 0,
            "fired with site %s:%d %s, expected line %d",
            r->site.file ? r->site.file : "(null)", r->site.line,
            r->site.func ? r->site.func : "(null)", line);
      double after = log.at_s - t0;
      /* After the timeout, within the slack, and while the call was still
       * blocked. */
      CHECK(after >= WD_TIMEOUT_S - 0.01 &&
                after <= WD_TIMEOUT_S + WD_SLACK_S && log.at_s < t1,
            "fired %.3f s after the call (timeout %.1f s; the call took "
            "%.3f s)", after, WD_TIMEOUT_S, t1 - t0);
    }
  }
  vqc_ledger_record r;
  CHECK(vqc_ledger_get(vqc_comm_ledger(dl), 0, &r) &&
            r.state == VQC_REC_DONE && r.status == VQC_OK,
        "the completed call is not a DONE record");
  vqc_mpi_comm_destroy(dl);
  return vqc_driver_failures;
}

static const vqc_coll_case mpi_cases[] = {
    {"launch_env", case_launch_env},
    {"side_separate", case_side_separate},
    {"ledger_sites", case_ledger_sites},
    {"aliased_buffers", case_aliased_buffers},
    {"count_overflow", case_count_overflow},
    {"abort", case_abort},
    {"deadline", case_deadline},
    {"blocking_cases", case_blocking_cases},
    {"blocking_watchdog", case_blocking_watchdog},
};
#define N_MPI_CASES (int)(sizeof mpi_cases / sizeof mpi_cases[0])

int main(int argc, char **argv) {
  vqc_comm *c = vqc_driver_start("mpi_comm", &argc, &argv, MAIN_TIMEOUT_S);
  if (!c) return 1;
  int failed = vqc_run_coll_cases(c);
  failed += vqc_run_case_list(c, mpi_cases, N_MPI_CASES);
  int code =
      vqc_driver_summary(vqc_coll_case_count + N_MPI_CASES - failed, failed);
  vqc_mpi_comm_destroy(c);
  return code;
}
