/* test_comm_threads.c: the threads comm backend.
 *
 * The shared collective cases (tests/common/coll_cases.c) on 1..5 ranks, then
 * what only the threads backend can be asked directly: a rank that never
 * arrives ends in VQC_ETIMEOUT / VQC_EABORTED, not a hang; mismatched calls
 * fail on every rank with VQC_EMISMATCH and move no data; the side channel
 * keeps working while a data collective is pending or has timed out; an abort
 * from another thread wakes a waiter; reductions are bit-identical on every
 * rank (rank order); long runs of small collectives stay in step.
 *
 * Assertions run on the test's main thread: rank threads record what they
 * saw into arrays that the test checks after vqc_threads_run joins them. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "coll_cases.h"
#include "comm/comm_internal.h" /* vqc_comm_dtype_size */
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/status.h"

#define MAX_RANKS 8

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* Polls until comm's ledger shows a collective in flight (at most 5 s). */
static bool wait_in_flight(vqc_comm *c) {
  vqc_ledger_record r;
  for (int i = 0; i < 5000; i++) {
    if (vqc_ledger_in_flight(vqc_comm_ledger(c), &r)) return true;
    sleep_ms(1);
  }
  return false;
}

/* ---- the shared cases */

static vqc_status cases_rank(vqc_comm *c, void *arg) {
  int *failed = arg;
  int r = vqc_comm_rank(c);
  failed[r] = vqc_run_coll_cases(c);
  return failed[r] ? vqc_error(VQC_EINTERNAL, "%d collective cases failed",
                               failed[r])
                   : VQC_OK;
}

static void run_cases_on(int size) {
  int failed[MAX_RANKS] = {0};
  vqc_status st[MAX_RANKS];
  vqc_status s = vqc_threads_run(size, 30.0, cases_rank, failed, st);
  cr_assert_eq(s, VQC_OK, "%d ranks: %s", size, vqc_last_error());
  for (int r = 0; r < size; r++) {
    cr_expect_eq(failed[r], 0, "rank %d: %d cases failed", r, failed[r]);
    cr_expect_eq(st[r], VQC_OK);
  }
}

Test(comm_threads, coll_cases_1_rank, .timeout = 120) { run_cases_on(1); }
Test(comm_threads, coll_cases_2_ranks, .timeout = 120) { run_cases_on(2); }
Test(comm_threads, coll_cases_3_ranks, .timeout = 120) { run_cases_on(3); }
Test(comm_threads, coll_cases_4_ranks, .timeout = 120) { run_cases_on(4); }
Test(comm_threads, coll_cases_5_ranks, .timeout = 120) { run_cases_on(5); }

/* ---- worlds */

Test(comm_threads, world_basics) {
  vqc_threads_world *w = NULL;
  cr_assert_eq(vqc_threads_world_create(0, &w), VQC_EINVAL);
  cr_assert_null(w);
  cr_assert_eq(vqc_threads_world_create(3, &w), VQC_OK);
  for (int r = 0; r < 3; r++) {
    vqc_comm *c = vqc_threads_world_comm(w, r);
    cr_assert_not_null(c);
    cr_expect_eq(vqc_comm_rank(c), r);
    cr_expect_eq(vqc_comm_size(c), 3);
    cr_expect_eq(vqc_comm_backend(c), VQC_BACKEND_THREADS);
    cr_expect_not_null(vqc_comm_ledger(c));
    cr_expect_not_null(vqc_comm_side(c));
    cr_expect_neq(vqc_comm_side(c), c);
  }
  cr_expect_null(vqc_threads_world_comm(w, 3));
  cr_expect_null(vqc_threads_world_comm(w, -1));
  vqc_threads_world_destroy(w);
  vqc_threads_world_destroy(NULL);
  cr_expect_eq(vqc_threads_run(0, 1.0, cases_rank, NULL, NULL), VQC_EINVAL);
}

/* ---- a rank that never enters */

typedef struct hang_arg {
  double elapsed[MAX_RANKS];
  vqc_status coll[MAX_RANKS];
  vqc_status late;       /* the absent rank's collective, once it comes */
  double late_elapsed;
} hang_arg;

#define HANG_TIMEOUT_S 0.3
#define ABSENT_SLEEP_MS 1000

static vqc_status hang_rank(vqc_comm *c, void *arg) {
  hang_arg *a = arg;
  int r = vqc_comm_rank(c), n = vqc_comm_size(c);
  float v = 1, out = 0;
  /* Align all ranks first, so both waiting ranks surely arrive long before
   * the first deadline and the message's "missing" list is exact. */
  vqc_status s = vqc_barrier(vqc_comm_side(c));
  if (s != VQC_OK) return s;
  if (r == n - 1) {
    /* Absent until well past the others' deadline; then the broken
     * channel must refuse at once. */
    sleep_ms(ABSENT_SLEEP_MS);
    double t0 = now_s();
    a->late = vqc_all_reduce(c, &v, &out, 1, VQC_F32, VQC_SUM);
    a->late_elapsed = now_s() - t0;
    return VQC_OK;
  }
  double t0 = now_s();
  s = vqc_all_reduce(c, &v, &out, 1, VQC_F32, VQC_SUM);
  a->elapsed[r] = now_s() - t0;
  a->coll[r] = s;
  return s;
}

Test(comm_threads, absent_rank_times_out, .timeout = 30) {
  hang_arg a = {0};
  vqc_status st[3];
  double t0 = now_s();
  vqc_status s = vqc_threads_run(3, HANG_TIMEOUT_S, hang_rank, &a, st);
  double total = now_s() - t0;
  cr_assert_lt(total, 5.0, "vqc_threads_run took %.3f s", total);
  cr_assert_eq(s, VQC_ETIMEOUT, "run returned %s: %s", vqc_status_name(s),
               vqc_last_error());
  /* The message names the timed-out rank, what it waited in, and who was
   * missing. */
  const char *msg = vqc_last_error();
  cr_expect(strstr(msg, "timed out") && strstr(msg, "all_reduce") &&
                strstr(msg, "2 of 3 ranks arrived") &&
                strstr(msg, "missing: 2"),
            "message: %s", msg);
  cr_expect(strstr(msg, "VQC_ETIMEOUT: rank 0: ") ||
                strstr(msg, "VQC_ETIMEOUT: rank 1: "),
            "message does not name the failing rank first: %s", msg);
  int timeouts = 0;
  for (int r = 0; r < 2; r++) {
    cr_expect(a.coll[r] == VQC_ETIMEOUT || a.coll[r] == VQC_EABORTED,
              "rank %d got %s", r, vqc_status_name(a.coll[r]));
    cr_expect_eq(st[r], a.coll[r]);
    if (a.coll[r] == VQC_ETIMEOUT) {
      timeouts++;
      cr_expect(a.elapsed[r] >= HANG_TIMEOUT_S - 0.01,
                "rank %d timed out after only %.3f s", r, a.elapsed[r]);
    }
    cr_expect_lt(a.elapsed[r], 5.0, "rank %d waited %.3f s", r, a.elapsed[r]);
  }
  cr_expect_geq(timeouts, 1, "no rank reported the timeout");
  cr_expect_eq(st[2], VQC_OK);
  cr_expect_eq(a.late, VQC_EABORTED, "late rank got %s",
               vqc_status_name(a.late));
  cr_expect_lt(a.late_elapsed, 0.1, "late rank waited %.3f s", a.late_elapsed);
}

/* ---- a failing rank body aborts the others */

static vqc_status fail_rank(vqc_comm *c, void *arg) {
  double *elapsed = arg;
  int r = vqc_comm_rank(c);
  if (r == 2) return vqc_error(VQC_EIO, "boom %d", 42);
  double t0 = now_s();
  vqc_status s = vqc_barrier(c);
  elapsed[r] = now_s() - t0;
  return s;
}

Test(comm_threads, failing_rank_aborts_world, .timeout = 30) {
  double elapsed[3] = {0};
  vqc_status st[3];
  vqc_status s = vqc_threads_run(3, 30.0, fail_rank, elapsed, st);
  cr_assert_eq(s, VQC_EIO, "run returned %s", vqc_status_name(s));
  cr_expect(strstr(vqc_last_error(), "rank 2: ") &&
                strstr(vqc_last_error(), "boom 42"),
            "message: %s", vqc_last_error());
  cr_expect_eq(st[2], VQC_EIO);
  for (int r = 0; r < 2; r++) {
    cr_expect_eq(st[r], VQC_EABORTED, "rank %d got %s", r,
                 vqc_status_name(st[r]));
    cr_expect_lt(elapsed[r], 5.0, "rank %d waited %.3f s for a dead rank", r,
                 elapsed[r]);
  }
}

/* ---- mismatches */

enum { MM_COUNT, MM_OP, MM_REDOP, MM_DTYPE, MM_ROOT, MM_GATHERV, MM_N };
static const char *const MM_NAMES[] = {"count", "op",   "redop",
                                       "dtype", "root", "gatherv counts"};

typedef struct mm_arg {
  int variant;
  vqc_status st[MAX_RANKS];
  bool untouched[MAX_RANKS];   /* recv kept its sentinel */
  vqc_status after[MAX_RANKS]; /* a matching all_reduce afterwards */
  double after_sum[MAX_RANKS];
  char msg[MAX_RANKS][512];
} mm_arg;

static vqc_status mismatch_rank(vqc_comm *c, void *arg) {
  mm_arg *a = arg;
  int r = vqc_comm_rank(c), n = vqc_comm_size(c);
  bool odd = r == n - 1; /* the last rank calls something different */
  double send[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  double recv[64];
  for (int i = 0; i < 64; i++) recv[i] = -5;
  size_t counts[MAX_RANKS] = {0};
  vqc_status s = VQC_OK;
  switch (a->variant) {
    case MM_COUNT:
      s = vqc_all_reduce(c, send, recv, odd ? 5 : 4, VQC_F64, VQC_SUM);
      break;
    case MM_OP:
      s = odd ? vqc_broadcast(c, recv, 4, VQC_F64, 0)
              : vqc_all_reduce(c, send, recv, 4, VQC_F64, VQC_SUM);
      break;
    case MM_REDOP:
      s = vqc_all_reduce(c, send, recv, 4, VQC_F64, odd ? VQC_MAX : VQC_SUM);
      break;
    case MM_DTYPE:
      s = vqc_all_reduce(c, send, recv, 4, odd ? VQC_I64 : VQC_F64, VQC_SUM);
      break;
    case MM_ROOT:
      /* Non-root ranks pass the sentinel buffer: it must not change. */
      s = vqc_broadcast(c, recv, 4, VQC_F64, odd ? 1 : 0);
      break;
    case MM_GATHERV:
      for (int k = 0; k < n; k++) counts[k] = 1;
      if (odd) counts[0] = 2; /* disagrees about rank 0's count */
      s = vqc_all_gatherv(c, send, counts[r], recv, counts, VQC_F64);
      break;
  }
  a->st[r] = s;
  snprintf(a->msg[r], sizeof a->msg[r], "%s", vqc_last_error());
  a->untouched[r] = true;
  for (int i = 0; i < 64; i++)
    if (recv[i] != -5) a->untouched[r] = false;
  /* Everyone saw the same mismatch, so the channel is still in step. */
  double one = 1, sum = 0;
  a->after[r] = vqc_all_reduce(c, &one, &sum, 1, VQC_F64, VQC_SUM);
  a->after_sum[r] = sum;
  return VQC_OK;
}

static void check_mismatch(int variant, int size) {
  mm_arg a = {.variant = variant};
  vqc_status s = vqc_threads_run(size, 10.0, mismatch_rank, &a, NULL);
  cr_assert_eq(s, VQC_OK, "%s", vqc_last_error());
  for (int r = 0; r < size; r++) {
    cr_expect_eq(a.st[r], VQC_EMISMATCH, "%s mismatch on %d ranks: rank %d "
                 "got %s", MM_NAMES[variant], size, r,
                 vqc_status_name(a.st[r]));
    cr_expect(a.untouched[r], "%s mismatch: rank %d's buffer changed",
              MM_NAMES[variant], r);
    char want[64];
    snprintf(want, sizeof want, "but rank %d called", size - 1);
    cr_expect(strstr(a.msg[r], "rank 0 called") && strstr(a.msg[r], want),
              "%s mismatch: rank %d message: %s", MM_NAMES[variant], r,
              a.msg[r]);
    cr_expect_eq(a.after[r], VQC_OK, "rank %d: all_reduce after mismatch: %s",
                 r, vqc_status_name(a.after[r]));
    cr_expect_eq(a.after_sum[r], size);
  }
}

Test(comm_threads, mismatched_counts) {
  check_mismatch(MM_COUNT, 2);
  check_mismatch(MM_COUNT, 3);
  /* The message names both descriptors. */
  mm_arg a = {.variant = MM_COUNT};
  cr_assert_eq(vqc_threads_run(2, 10.0, mismatch_rank, &a, NULL), VQC_OK);
  cr_expect(strstr(a.msg[0], "all_reduce(float64, count=4, op=sum)") &&
                strstr(a.msg[0], "all_reduce(float64, count=5, op=sum)"),
            "message: %s", a.msg[0]);
}

Test(comm_threads, mismatched_ops) {
  check_mismatch(MM_OP, 2);
  check_mismatch(MM_OP, 4);
}

Test(comm_threads, mismatched_redop_dtype_root_counts) {
  for (int v = MM_REDOP; v < MM_N; v++) {
    check_mismatch(v, 2);
    check_mismatch(v, 3);
  }
}

/* ---- side channel */

typedef struct side_arg {
  vqc_comm *c[2];
  vqc_status data[2];
  double data_sum[2];
  vqc_status side[2];
  int64_t side_sum[2];
  bool rank0_pending_after_side; /* rank 0's data collective still open */
} side_arg;

static void *side_rank0_data(void *p) {
  side_arg *a = p;
  double v = 1, sum = 0;
  a->data[0] = vqc_all_reduce(a->c[0], &v, &sum, 1, VQC_F64, VQC_SUM);
  a->data_sum[0] = sum;
  return NULL;
}

static void *side_rank1(void *p) {
  side_arg *a = p;
  if (!wait_in_flight(a->c[0])) return NULL;
  int64_t v = 20, sum = 0;
  a->side[1] = vqc_all_reduce(vqc_comm_side(a->c[1]), &v, &sum, 1, VQC_I64,
                              VQC_SUM);
  a->side_sum[1] = sum;
  vqc_ledger_record r;
  a->rank0_pending_after_side =
      vqc_ledger_in_flight(vqc_comm_ledger(a->c[0]), &r);
  double dv = 2, dsum = 0;
  a->data[1] = vqc_all_reduce(a->c[1], &dv, &dsum, 1, VQC_F64, VQC_SUM);
  a->data_sum[1] = dsum;
  return NULL;
}

/* Rank 0's thread waits in a data all_reduce that rank 1 enters only after
 * both ranks have exchanged on the side channel (rank 0 through a second,
 * watchdog-like thread). Ordered by the ledger, not by sleeps. */
Test(comm_threads, side_channel_while_data_pending, .timeout = 30) {
  vqc_threads_world *w;
  cr_assert_eq(vqc_threads_world_create(2, &w), VQC_OK);
  side_arg a = {.c = {vqc_threads_world_comm(w, 0),
                      vqc_threads_world_comm(w, 1)}};
  for (int r = 0; r < 2; r++) vqc_comm_set_timeout(a.c[r], 10.0);
  pthread_t t0, t1;
  cr_assert_eq(pthread_create(&t0, NULL, side_rank0_data, &a), 0);
  cr_assert_eq(pthread_create(&t1, NULL, side_rank1, &a), 0);
  bool pending = wait_in_flight(a.c[0]);
  int64_t v = 1, sum = 0;
  a.side[0] = vqc_all_reduce(vqc_comm_side(a.c[0]), &v, &sum, 1, VQC_I64,
                             VQC_SUM);
  a.side_sum[0] = sum;
  pthread_join(t0, NULL);
  pthread_join(t1, NULL);
  vqc_threads_world_destroy(w);

  cr_assert(pending, "rank 0 never entered its data all_reduce");
  for (int r = 0; r < 2; r++) {
    cr_expect_eq(a.side[r], VQC_OK, "rank %d side: %s", r,
                 vqc_status_name(a.side[r]));
    cr_expect_eq(a.side_sum[r], 21);
    cr_expect_eq(a.data[r], VQC_OK, "rank %d data: %s", r,
                 vqc_status_name(a.data[r]));
    cr_expect_eq(a.data_sum[r], 3.0);
  }
  cr_expect(a.rank0_pending_after_side,
            "rank 0's data all_reduce finished before the side exchange");
}

typedef struct after_timeout_arg {
  vqc_status data[2];
  vqc_status side[2];
  int64_t side_sum[2];
} after_timeout_arg;

static vqc_status after_timeout_rank(vqc_comm *c, void *arg) {
  after_timeout_arg *a = arg;
  int r = vqc_comm_rank(c);
  /* The side channel gets a long deadline: rank 1 waits there while rank 0
   * times out on the data channel. */
  vqc_comm_set_timeout(vqc_comm_side(c), 10.0);
  double v = 1, out = 0;
  int64_t s = r + 1, sum = 0;
  if (r == 0)
    a->data[0] = vqc_all_reduce(c, &v, &out, 1, VQC_F64, VQC_SUM);
  a->side[r] = vqc_all_reduce(vqc_comm_side(c), &s, &sum, 1, VQC_I64, VQC_SUM);
  a->side_sum[r] = sum;
  if (r == 1)
    a->data[1] = vqc_all_reduce(c, &v, &out, 1, VQC_F64, VQC_SUM);
  return VQC_OK;
}

Test(comm_threads, side_channel_survives_data_timeout, .timeout = 30) {
  after_timeout_arg a = {0};
  cr_assert_eq(vqc_threads_run(2, 0.3, after_timeout_rank, &a, NULL), VQC_OK,
               "%s", vqc_last_error());
  cr_expect_eq(a.data[0], VQC_ETIMEOUT, "rank 0 data: %s",
               vqc_status_name(a.data[0]));
  cr_expect_eq(a.data[1], VQC_EABORTED, "rank 1 data on a broken channel: %s",
               vqc_status_name(a.data[1]));
  for (int r = 0; r < 2; r++) {
    cr_expect_eq(a.side[r], VQC_OK, "rank %d side: %s", r,
                 vqc_status_name(a.side[r]));
    cr_expect_eq(a.side_sum[r], 3);
  }
}

/* ---- abort from another thread */

typedef struct abort_arg {
  vqc_comm *c;
  vqc_status st;
  double elapsed;
  char msg[512];
} abort_arg;

static void *abort_waiter(void *p) {
  abort_arg *a = p;
  float v = 1, out = 0;
  double t0 = now_s();
  a->st = vqc_all_reduce(a->c, &v, &out, 1, VQC_F32, VQC_SUM);
  a->elapsed = now_s() - t0;
  snprintf(a->msg, sizeof a->msg, "%s", vqc_last_error());
  return NULL;
}

typedef struct side_barrier_arg {
  vqc_comm *c;
  vqc_status st;
} side_barrier_arg;

static void *side_barrier_thread(void *p) {
  side_barrier_arg *a = p;
  a->st = vqc_barrier(a->c);
  return NULL;
}

Test(comm_threads, abort_wakes_waiter, .timeout = 30) {
  vqc_threads_world *w;
  cr_assert_eq(vqc_threads_world_create(2, &w), VQC_OK);
  vqc_comm *c0 = vqc_threads_world_comm(w, 0);
  vqc_comm *c1 = vqc_threads_world_comm(w, 1);
  vqc_comm_set_timeout(c0, 30.0);
  vqc_comm_set_timeout(c1, 30.0);
  abort_arg a = {.c = c0};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, abort_waiter, &a), 0);
  cr_assert(wait_in_flight(c0));
  sleep_ms(50); /* let it reach the condvar wait (either way it must wake) */
  vqc_comm_abort(c0);
  pthread_join(t, NULL);
  cr_expect_eq(a.st, VQC_EABORTED, "waiter got %s", vqc_status_name(a.st));
  cr_expect_lt(a.elapsed, 5.0, "waiter took %.3f s to wake", a.elapsed);
  cr_expect(strstr(a.msg, "vqc_comm_abort on rank 0") != NULL, "message: %s",
            a.msg);
  /* Later data calls on either rank fail at once. */
  float v = 1, out = 0;
  double t0 = now_s();
  cr_expect_eq(vqc_all_reduce(c1, &v, &out, 1, VQC_F32, VQC_SUM),
               VQC_EABORTED);
  cr_expect_lt(now_s() - t0, 1.0);
  /* The side channel is a separate comm: it still works, so checkers can
   * exchange reports after the data collectives were given up. */
  side_barrier_arg sb = {.c = vqc_comm_side(c1)};
  pthread_t t1;
  cr_assert_eq(pthread_create(&t1, NULL, side_barrier_thread, &sb), 0);
  vqc_status s0 = vqc_barrier(vqc_comm_side(c0));
  pthread_join(t1, NULL);
  cr_expect_eq(s0, VQC_OK, "side barrier rank 0: %s", vqc_last_error());
  cr_expect_eq(sb.st, VQC_OK, "side barrier rank 1 after abort");
  vqc_threads_world_destroy(w);
}

/* ---- bit-identical reductions in rank order */

#define BITS_N 4096

typedef struct bits_arg {
  float out[MAX_RANKS][BITS_N];
  vqc_status st[MAX_RANKS];
} bits_arg;

/* Values whose float sum depends on the order of addition. */
static float bits_input(int r, int i) {
  return (float)((r + 1) * 0.1 + i * 1e-3) * (i % 2 ? 1e4f : 1e-4f);
}

static vqc_status bits_rank(vqc_comm *c, void *arg) {
  bits_arg *a = arg;
  int r = vqc_comm_rank(c);
  for (int i = 0; i < BITS_N; i++) a->out[r][i] = bits_input(r, i);
  a->st[r] = vqc_all_reduce(c, a->out[r], a->out[r], BITS_N, VQC_F32, VQC_SUM);
  return a->st[r];
}

Test(comm_threads, float_sums_bit_identical_in_rank_order) {
  static bits_arg a;
  const int n = 5;
  cr_assert_eq(vqc_threads_run(n, 10.0, bits_rank, &a, NULL), VQC_OK, "%s",
               vqc_last_error());
  int wrong = 0;
  for (int i = 0; i < BITS_N; i++) {
    float want = bits_input(0, i);
    for (int r = 1; r < n; r++) want += bits_input(r, i);
    for (int r = 0; r < n; r++)
      if (memcmp(&a.out[r][i], &want, sizeof want) != 0) wrong++;
  }
  cr_expect_eq(wrong, 0, "%d elements differ from the rank-order sum", wrong);
}

/* ---- many small collectives */

#define BACK_TO_BACK 2000

typedef struct b2b_arg {
  int bad[MAX_RANKS];
  vqc_status st[MAX_RANKS];
  uint64_t ledger_count[MAX_RANKS];
} b2b_arg;

static vqc_status b2b_rank(vqc_comm *c, void *arg) {
  b2b_arg *a = arg;
  int r = vqc_comm_rank(c), n = vqc_comm_size(c);
  for (int k = 0; k < BACK_TO_BACK; k++) {
    /* Round k's input names the round: a rank out of step sums the wrong
     * rounds. Alternating in place and out of place. */
    int64_t v[2] = {(int64_t)k * (r + 1), -(int64_t)k}, out[2];
    int64_t *dst = k % 2 ? v : out;
    vqc_status s = vqc_all_reduce(c, v, dst, 2, VQC_I64, VQC_SUM);
    if (s != VQC_OK) {
      a->st[r] = s;
      return s;
    }
    if (dst[0] != (int64_t)k * n * (n + 1) / 2 || dst[1] != -(int64_t)k * n)
      a->bad[r]++;
  }
  a->ledger_count[r] = vqc_ledger_count(vqc_comm_ledger(c));
  return VQC_OK;
}

Test(comm_threads, back_to_back_small_all_reduces, .timeout = 60) {
  b2b_arg a = {0};
  cr_assert_eq(vqc_threads_run(4, 10.0, b2b_rank, &a, NULL), VQC_OK, "%s",
               vqc_last_error());
  for (int r = 0; r < 4; r++) {
    cr_expect_eq(a.bad[r], 0, "rank %d: %d wrong rounds", r, a.bad[r]);
    cr_expect_eq(a.ledger_count[r], BACK_TO_BACK);
  }
}

/* The hot path's inline dtype size (comm_internal.h) is vqc_dtype_size for
 * every dtype, and 0 past the list. */
Test(comm_internal, dtype_size_matches_the_core_one) {
  for (int dt = 0; dt < VQC_DTYPE_COUNT; dt++)
    cr_expect_eq(vqc_comm_dtype_size((vqc_dtype)dt),
                 vqc_dtype_size((vqc_dtype)dt), "dtype %d (%s)", dt,
                 vqc_dtype_name((vqc_dtype)dt));
  cr_expect_eq(vqc_comm_dtype_size(VQC_DTYPE_COUNT), 0);
  cr_expect_eq(vqc_comm_dtype_size((vqc_dtype)-1), 0);
}
