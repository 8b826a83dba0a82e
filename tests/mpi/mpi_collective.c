/* mpi_collective.c: the collective checker across real processes (ctest runs
 * it under mpiexec -n 2, 3 and 4).
 *
 * Each case trains the loop of tests/unit/test_collective.c (per step:
 * ema_update = all_reduce(float32, count 16), then sync_seed =
 * all_reduce(int64, count 1)) on a comm of its own, with the collective
 * checker attached, and writes into a run directory of its own:
 *   clean            3 steps: exact sums, no finding, no dump file;
 *   clean_strict     the same with strict mode's fingerprint exchange;
 *   skip_deadlock    the last rank leaves its loop instead of entering
 *                    ema_update at step 1 (POLL mode, 1 s timeout): every
 *                    rank returns within a few seconds and dumps, and rank 0
 *                    reports one deadlock at seq 2 (ema_update), entered by
 *                    the other ranks, missing the last one with its last
 *                    completed seq. Then the skipping rank joins late, so
 *                    the others' timed-out request completes (with the
 *                    exact sum) and MPI is left clean;
 *   strict_mismatch  rank 1 calls ema_update with count 8: every rank's
 *                    collective is vetoed with VQC_EMISMATCH before data
 *                    moves (recv buffers untouched) and rank 0 reports one
 *                    collective_mismatch naming rank 1;
 *   strict_early_exit  strict mode, the last rank leaves at step 1: the
 *                    others learn it from its FINISH message in their next
 *                    fingerprint exchange (well before the 10 s timeout)
 *                    and rank 0 reports the deadlock.
 * After each case the ranks agree on the failure count over the main comm's
 * side channel; rank 0 prints "name: ok" or "name: FAILED", and finally
 * "N passed, M failed". Exit code 0 only when every case passed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkers.h"
#include "coll_cases.h"
#include "ledger_analysis.h"
#include "mpi_driver.h"
#include "vqc/comm.h"
#include "vqc/ledger.h"

/* Long enough for four ranks on two busy cores; short enough that a broken
 * case fails well inside ctest's 300 s. */
#define MAIN_TIMEOUT_S 30.0
#define N_EMA 16
#define SENTINEL (-7.0f)

static int world_size;
static char run_root[64];

/* ---- the training loop */

typedef enum { ACT_NORMAL, ACT_EXIT, ACT_COUNT_8 } action;

typedef struct case_run {
  const char *name;
  bool strict;
  double timeout_s;
  int odd_rank, odd_step;  /* who misbehaves, when (-1: nobody) */
  action act;
  int steps;
  char run_dir[128];
  vqc_findings findings;
  vqc_status train, finish;
  double took_s;           /* attach to the end of finish */
  bool recv_untouched;     /* at the odd step */
  float sum;               /* the last ema_update result, element 0 */
} case_run;

static int line_ema;

/* The buffers of the collective that may time out: MPI may still write
 * them until the late rank comes, so they outlive the case's frames. */
static float ema_send[N_EMA], ema_recv[N_EMA];

static vqc_status ema_update(vqc_comm *c, size_t count) {
  line_ema = __LINE__ + 1;
  return vqc_all_reduce(c, ema_send, ema_recv, count, VQC_F32, VQC_SUM);
}

static vqc_status sync_seed(vqc_comm *c) {
  int64_t seed = 1234, out = 0;
  return vqc_all_reduce(c, &seed, &out, 1, VQC_I64, VQC_SUM);
}

static vqc_status train(vqc_comm *c, case_run *k, vqc_checker *chk,
                        vqc_check_ctx *ctx) {
  for (int i = 0; i < N_EMA; i++) ema_send[i] = (float)(vqc_driver_rank + 1);
  for (int step = 0; step < k->steps; step++) {
    bool odd = vqc_driver_rank == k->odd_rank && step == k->odd_step;
    if (odd && k->act == ACT_EXIT) return VQC_OK;
    for (int i = 0; i < N_EMA; i++) ema_recv[i] = SENTINEL;
    vqc_status s = ema_update(c, odd && k->act == ACT_COUNT_8 ? 8 : N_EMA);
    if (step == k->odd_step) {
      k->recv_untouched = true;
      for (int i = 0; i < N_EMA; i++)
        if (ema_recv[i] != SENTINEL) k->recv_untouched = false;
    }
    if (s != VQC_OK) return s;
    k->sum = ema_recv[0];
    VQC_TRY(sync_seed(c));
    VQC_TRY(chk->step_end(chk, ctx, step));
  }
  return VQC_OK;
}

/* Makes the case's run directory (rank 0) and waits until it exists. */
static void make_run_dir(vqc_comm *main_comm, case_run *k) {
  snprintf(k->run_dir, sizeof k->run_dir, "%s/%s", run_root, k->name);
  if (vqc_driver_rank == 0)
    CHECK(mkdir(k->run_dir, 0700) == 0, "mkdir %s", k->run_dir);
  CHECK(vqc_barrier(vqc_comm_side(main_comm)) == VQC_OK, "side barrier: %s",
        vqc_last_error());
}

/* Runs one case on `c` (a comm of its own). */
static void run_case(vqc_comm *main_comm, vqc_comm *c, case_run *k) {
  make_run_dir(main_comm, k);
  vqc_findings_init(&k->findings);
  vqc_comm_set_timeout(c, k->timeout_s);
  vqc_check_ctx ctx = {
      .comm = c,
      .rank = vqc_driver_rank,
      .size = world_size,
      .findings = &k->findings,
      .opts = {.interval = 1, .timeout_s = k->timeout_s, .strict = k->strict},
      .run_dir = k->run_dir};
  vqc_checker chk;
  vqc_checker_collective(&chk);
  /* Start together, so the times measure the checker, not the launch. */
  CHECK(vqc_barrier(vqc_comm_side(main_comm)) == VQC_OK, "side barrier");
  double t0 = vqc_driver_now_s();
  vqc_status s = chk.attach(&chk, &ctx);
  CHECK(s == VQC_OK, "attach: %s", vqc_last_error());
  if (s != VQC_OK) return;
  k->train = train(c, k, &chk, &ctx);
  k->finish = chk.finish(&chk, &ctx, k->train);
  k->took_s = vqc_driver_now_s() - t0;
  chk.destroy(&chk, &ctx);
  CHECK(k->finish == VQC_OK, "finish: %s: %s", vqc_status_name(k->finish),
        vqc_last_error());
}

static bool dump_exists(const case_run *k, int rank) {
  char path[256];
  if (vqc_ledger_dump_path(k->run_dir, rank, path, sizeof path) != VQC_OK)
    return false;
  return access(path, F_OK) == 0;
}

static int count_kind(vqc_findings *f, vqc_finding_kind kind) {
  int n = 0;
  for (int i = 0; i < f->count; i++) n += f->items[i].kind == kind;
  return n;
}

static const vqc_finding *find_kind(vqc_findings *f, vqc_finding_kind kind) {
  for (int i = 0; i < f->count; i++)
    if (f->items[i].kind == kind) return &f->items[i];
  return NULL;
}

/* The rank numbers of detail[key] ([{rank, ...}]) equal want[0..n-1]. */
static void check_detail_ranks(const vqc_finding *x, const char *key,
                               const int *want, int n) {
  json_t *arr = json_object_get(x->detail, key);
  CHECK((int)json_array_size(arr) == n, "detail.%s has %zu entries, "
        "expected %d", key, json_array_size(arr), n);
  for (int i = 0; i < n && i < (int)json_array_size(arr); i++) {
    json_int_t r =
        json_integer_value(json_object_get(json_array_get(arr, i), "rank"));
    CHECK(r == want[i], "detail.%s[%d].rank %lld, expected %d", key, i,
          (long long)r, want[i]);
  }
}

static int64_t detail_seq(const vqc_finding *x) {
  return json_integer_value(json_object_get(x->detail, "seq"));
}

static void check_site(const char *s, int line, const char *func) {
  char want[128];
  snprintf(want, sizeof want, "mpi_collective.c:%d %s", line, func);
  CHECK(strstr(s, want) != NULL, "'%s' does not name %s", s, want);
}

/* ---- cases (each returns this rank's failed checks) */

static int clean_case(vqc_comm *main_comm, bool strict) {
  vqc_driver_failures = 0;
  vqc_comm *c = NULL;
  vqc_status s = vqc_mpi_comm_create(NULL, NULL, &c);
  CHECK(s == VQC_OK, "vqc_mpi_comm_create: %s", vqc_last_error());
  if (s != VQC_OK) return vqc_driver_failures;
  case_run k = {.name = strict ? "clean_strict" : "clean", .strict = strict,
                .timeout_s = MAIN_TIMEOUT_S, .odd_rank = -1, .odd_step = -1,
                .steps = 3};
  run_case(main_comm, c, &k);
  CHECK(k.train == VQC_OK, "train: %s", vqc_status_name(k.train));
  float want = (float)(world_size * (world_size + 1) / 2);
  CHECK(k.sum == want, "sum %g, expected %g", k.sum, want);
  CHECK(k.findings.count == 0, "%d findings: %s", k.findings.count,
        k.findings.count ? k.findings.items[0].message : "");
  CHECK(!dump_exists(&k, vqc_driver_rank),
        "a clean run dumped rank %d's ledger", vqc_driver_rank);
  vqc_findings_free(&k.findings);
  vqc_mpi_comm_destroy(c);
  return vqc_driver_failures;
}

static int case_clean(vqc_comm *main_comm) {
  return clean_case(main_comm, false);
}

static int case_clean_strict(vqc_comm *main_comm) {
  return clean_case(main_comm, true);
}

static int case_skip_deadlock(vqc_comm *main_comm) {
  vqc_driver_failures = 0;
  vqc_comm *c = NULL;
  vqc_status s = vqc_mpi_comm_create(NULL, NULL, &c);
  CHECK(s == VQC_OK, "vqc_mpi_comm_create: %s", vqc_last_error());
  if (s != VQC_OK) return vqc_driver_failures;
  int last = world_size - 1;
  case_run k = {.name = "skip_deadlock", .timeout_s = 1.0, .odd_rank = last,
                .odd_step = 1, .act = ACT_EXIT, .steps = 3};
  run_case(main_comm, c, &k);
  /* 1 s timeout, twice over at most for the final exchange, plus slack for
   * four processes on two cores. */
  CHECK(k.took_s < 8.0, "the run took %.2f s", k.took_s);
  if (vqc_driver_rank == last) {
    CHECK(k.train == VQC_OK, "the leaving rank's training: %s",
          vqc_status_name(k.train));
  } else {
    CHECK(k.train == VQC_ETIMEOUT, "training ended with %s",
          vqc_status_name(k.train));
    CHECK(k.took_s >= 1.0, "timed out after %.2f s (timeout 1 s)", k.took_s);
  }
  CHECK(dump_exists(&k, vqc_driver_rank), "rank %d wrote no dump",
        vqc_driver_rank);
  if (vqc_driver_rank == 0) {
    CHECK(k.findings.count == 1 &&
              count_kind(&k.findings, VQC_FINDING_DEADLOCK) == 1,
          "%d findings, expected one deadlock", k.findings.count);
    const vqc_finding *x = find_kind(&k.findings, VQC_FINDING_DEADLOCK);
    if (x) {
      CHECK(detail_seq(x) == 2, "seq %lld", (long long)detail_seq(x));
      CHECK(x->step == 1, "step %lld", (long long)x->step);
      check_site(x->site, line_ema, "ema_update");
      CHECK(x->nranks == 1 && x->ranks[0] == last, "names %d ranks (%d)",
            x->nranks, x->nranks ? x->ranks[0] : -1);
      int entered[8];
      for (int r = 0; r < last; r++) entered[r] = r;
      check_detail_ranks(x, "entered", entered, last);
      check_detail_ranks(x, "missing", &last, 1);
      const char *w = json_string_value(json_object_get(
          json_array_get(json_object_get(x->detail, "missing"), 0), "where"));
      CHECK(w && strstr(w, "last completed seq 1 all_reduce(int64, count 1)"),
            "where: %s", w ? w : "(none)");
      printf("   finding: %s\n", x->message);
    }
  }

  /* Leave MPI clean: the last rank enters the all_reduce it skipped, which
   * completes the others' timed-out request; their next collective (the
   * barrier) first waits for it. */
  vqc_comm_set_timeout(c, MAIN_TIMEOUT_S);
  if (vqc_driver_rank == last) {
    s = ema_update(c, N_EMA);
    CHECK(s == VQC_OK, "late all_reduce: %s", vqc_last_error());
  }
  s = vqc_barrier(c);
  CHECK(s == VQC_OK, "barrier after the late all_reduce: %s",
        vqc_last_error());
  float want = (float)(world_size * (world_size + 1) / 2);
  CHECK(ema_recv[0] == want && ema_recv[N_EMA - 1] == want,
        "the late all_reduce gave %g, expected %g", ema_recv[0], want);
  vqc_findings_free(&k.findings);
  vqc_mpi_comm_destroy(c);
  return vqc_driver_failures;
}

static int case_strict_mismatch(vqc_comm *main_comm) {
  vqc_driver_failures = 0;
  vqc_comm *c = NULL;
  vqc_status s = vqc_mpi_comm_create(NULL, NULL, &c);
  CHECK(s == VQC_OK, "vqc_mpi_comm_create: %s", vqc_last_error());
  if (s != VQC_OK) return vqc_driver_failures;
  case_run k = {.name = "strict_mismatch", .strict = true,
                .timeout_s = MAIN_TIMEOUT_S, .odd_rank = 1, .odd_step = 1,
                .act = ACT_COUNT_8, .steps = 3};
  run_case(main_comm, c, &k);
  CHECK(k.train == VQC_EMISMATCH, "training ended with %s",
        vqc_status_name(k.train));
  CHECK(k.recv_untouched, "data moved: recv[0] = %g", ema_recv[0]);
  if (vqc_driver_rank == 0) {
    CHECK(k.findings.count == 1 &&
              count_kind(&k.findings, VQC_FINDING_COLLECTIVE_MISMATCH) == 1,
          "%d findings, expected one collective_mismatch", k.findings.count);
    const vqc_finding *x =
        find_kind(&k.findings, VQC_FINDING_COLLECTIVE_MISMATCH);
    if (x) {
      CHECK(detail_seq(x) == 2, "seq %lld", (long long)detail_seq(x));
      CHECK(x->nranks == 1 && x->ranks[0] == 1, "names %d ranks", x->nranks);
      check_site(x->site, line_ema, "ema_update");
      printf("   finding: %s\n", x->message);
    }
  }
  /* Nothing is pending: the vetoed collective never reached MPI. */
  s = vqc_barrier(c);
  CHECK(s == VQC_OK, "barrier after the veto: %s", vqc_last_error());
  vqc_findings_free(&k.findings);
  vqc_mpi_comm_destroy(c);
  return vqc_driver_failures;
}

static int case_strict_early_exit(vqc_comm *main_comm) {
  vqc_driver_failures = 0;
  vqc_comm *c = NULL;
  vqc_status s = vqc_mpi_comm_create(NULL, NULL, &c);
  CHECK(s == VQC_OK, "vqc_mpi_comm_create: %s", vqc_last_error());
  if (s != VQC_OK) return vqc_driver_failures;
  int last = world_size - 1;
  case_run k = {.name = "strict_early_exit", .strict = true, .timeout_s = 10.0,
                .odd_rank = last, .odd_step = 1, .act = ACT_EXIT, .steps = 3};
  run_case(main_comm, c, &k);
  CHECK(k.took_s < 10.0, "the run took %.2f s: the peers waited out the "
        "timeout instead of reading the FINISH message", k.took_s);
  if (vqc_driver_rank != last)
    CHECK(k.train == VQC_EABORTED, "training ended with %s",
          vqc_status_name(k.train));
  if (vqc_driver_rank == 0) {
    const vqc_finding *x = find_kind(&k.findings, VQC_FINDING_DEADLOCK);
    CHECK(x && k.findings.count == 1, "%d findings, expected one deadlock",
          k.findings.count);
    if (x) {
      CHECK(detail_seq(x) == 2, "seq %lld", (long long)detail_seq(x));
      CHECK(x->nranks == 1 && x->ranks[0] == last, "names %d ranks",
            x->nranks);
    }
  }
  s = vqc_barrier(c);
  CHECK(s == VQC_OK, "barrier after the run: %s", vqc_last_error());
  vqc_findings_free(&k.findings);
  vqc_mpi_comm_destroy(c);
  return vqc_driver_failures;
}

/* ---- main */

static const vqc_coll_case cases[] = {
    {"clean", case_clean},
    {"clean_strict", case_clean_strict},
    {"skip_deadlock", case_skip_deadlock},
    {"strict_mismatch", case_strict_mismatch},
    {"strict_early_exit", case_strict_early_exit},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

/* Removes the run directories (rank 0, after every rank is done). */
static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[512];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(path);
    else remove(path);
  }
  closedir(d);
  rmdir(dir);
}

int main(int argc, char **argv) {
  vqc_comm *c =
      vqc_driver_start("mpi_collective", &argc, &argv, MAIN_TIMEOUT_S);
  if (!c) return 1;
  world_size = vqc_comm_size(c);

  /* One run directory for the whole job (all ranks share this node's /tmp;
   * on a cluster it would be a shared filesystem). */
  if (vqc_driver_rank == 0) {
    snprintf(run_root, sizeof run_root, "/tmp/vqc-mpi-coll-XXXXXX");
    if (!mkdtemp(run_root)) run_root[0] = '\0';
  }
  vqc_status s =
      vqc_broadcast(vqc_comm_side(c), run_root, sizeof run_root, VQC_U8, 0);
  if (s != VQC_OK || !run_root[0]) {
    fprintf(stderr, "mpi_collective: no run directory: %s\n",
            vqc_last_error());
    vqc_mpi_comm_destroy(c);
    return 1;
  }

  int failed = vqc_run_case_list(c, cases, N_CASES);
  vqc_barrier(vqc_comm_side(c));
  if (vqc_driver_rank == 0) remove_tree(run_root);
  int code = vqc_driver_summary(N_CASES - failed, failed);
  vqc_mpi_comm_destroy(c);
  return code;
}
