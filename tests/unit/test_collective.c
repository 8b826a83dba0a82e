/* test_collective.c: the collective checker (checkers/collective.c) and the
 * ledger analysis (checkers/ledger_analysis.c and the files beside it) on
 * the threads backend.
 *
 * Every run trains a tiny loop of collectives with distinct call sites:
 *   each step: ema_update  all_reduce(float32, count 16)   seq 2*step
 *              sync_seed   all_reduce(int64, count 1)      seq 2*step + 1
 * and one rank (or group) misbehaves at one step. The checker is attached to
 * every rank as the runner would, finish gets the rank's training status,
 * and the test reads the findings and the dump files.
 *
 *   clean, clean_strict    no finding, no dump, exact sums;
 *   skip_then_next         a rank skips ema_update and calls sync_seed next
 *                          (threads: VQC_EMISMATCH everywhere): deadlock at
 *                          seq 2, entered 0,1,3, missing 2 "waiting in
 *                          all_reduce(int64, count 1) at ... sync_seed";
 *   skip_tie_uses_history  ranks 0 and 2 of four skip: the history (after
 *                          sync_seed comes ema_update) names the skippers;
 *   skip_same_shape        the skipped and the next collective have the
 *                          same shape, so the backend pairs them silently:
 *                          the call site exposes it (seq 2, "instead");
 *   different_collectives  ranks call all_reduce vs all_gather at seq 0;
 *   early_exit             a rank leaves its loop: the others time out, its
 *                          status file says VQC_OK, it is "missing" with its
 *                          last completed seq; with its ledger dump deleted
 *                          the analysis says rank_failure instead;
 *   rank_dies              a rank's body fails without finish: rank_failure;
 *   strict_count, strict_op  collective_mismatch before data moves (recv
 *                          untouched on every rank), ranks = the minority;
 *   strict_seed_skip       seed_sync_some_ranks: ranks 0 and 2 of four skip
 *                          the seed all_reduce: collective_mismatch naming
 *                          them (the history breaks the tie);
 *   strict_early_exit      the peers of a rank that left are told at once
 *                          (well before the 5 s timeout);
 *   blocking_watchdog      VQC_WAIT_BLOCKING: the watchdog dumps, rank 0
 *                          analyses before its hang hook runs;
 *   garbage_dump           malformed dumps are errors naming file:line. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checkers.h"
#include "collective.h"
#include "ledger_analysis.h"
#include "vqc/comm.h"
#include "vqc/ledger.h"

#define MAX_RANKS 8
#define N_EMA 16
/* Short, but long enough that 4 rank threads on 2 busy cores meet in time. */
#define TIMEOUT_S 0.4

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- what a run does */

typedef enum {
  ACT_NORMAL,
  ACT_SKIP_EMA,       /* at odd_step: skip ema_update, go on */
  ACT_SKIP_SEED,      /* at odd_step: skip sync_seed, go on */
  ACT_EXIT,           /* at odd_step: leave the loop (return VQC_OK) */
  ACT_DIE,            /* at odd_step: return VQC_EINTERNAL without finish */
  ACT_ALL_GATHER,     /* at odd_step: all_gather instead of ema_update */
  ACT_COUNT_8,        /* at odd_step: ema_update with count 8 */
} action;

typedef struct test_run {
  int size, steps;
  bool strict, blocking;
  bool same_shape;    /* sync_seed becomes all_reduce(float32, 16) */
  double comm_timeout, check_timeout;
  int odd_step;
  action act[MAX_RANKS];
  char run_dir[64];
  vqc_findings findings;
  /* per rank, after the run */
  vqc_status train[MAX_RANKS], finish[MAX_RANKS];
  bool recv_untouched[MAX_RANKS]; /* the odd step's recv kept its sentinel */
  float last_sum[MAX_RANKS];
  /* hang hook calls (blocking_watchdog) */
  pthread_mutex_t mu;
  int hooks[MAX_RANKS];
  bool hook_analysed[MAX_RANKS];
  bool deadlock_at_hook;
  vqc_comm *comms[MAX_RANKS];
} test_run;

/* Call sites, recorded by the functions that own them. */
static int line_ema, line_seed, line_gather;

static vqc_status ema_update(vqc_comm *c, const float *send, float *recv,
                             size_t count) {
  line_ema = __LINE__ + 1;
  return vqc_all_reduce(c, send, recv, count, VQC_F32, VQC_SUM);
}

static vqc_status sync_seed(vqc_comm *c, bool same_shape) {
  int64_t seed = 1234, out = 0;
  float f[N_EMA] = {0}, g[N_EMA];
  /* One call site, whichever shape. */
  vqc_site site = VQC_SITE;
  line_seed = site.line;
  if (same_shape)
    return vqc_all_reduce_at(c, f, g, N_EMA, VQC_F32, VQC_SUM, site);
  return vqc_all_reduce_at(c, &seed, &out, 1, VQC_I64, VQC_SUM, site);
}

static vqc_status gather_stats(vqc_comm *c, const float *send, float *recv) {
  line_gather = __LINE__ + 1;
  return vqc_all_gather(c, send, recv, N_EMA, VQC_F32);
}

#define SENTINEL (-7.0f)

static vqc_status train(vqc_comm *c, test_run *t, vqc_checker *chk,
                        vqc_check_ctx *ctx) {
  int rank = vqc_comm_rank(c);
  float send[N_EMA], recv[N_EMA * MAX_RANKS];
  for (int i = 0; i < N_EMA; i++) send[i] = (float)(rank + 1);
  for (int step = 0; step < t->steps; step++) {
    action a = step == t->odd_step ? t->act[rank] : ACT_NORMAL;
    if (a == ACT_EXIT) return VQC_OK;
    if (a == ACT_DIE) return VQC_EINTERNAL;
    for (int i = 0; i < N_EMA * MAX_RANKS; i++) recv[i] = SENTINEL;
    vqc_status s = VQC_OK;
    if (a == ACT_ALL_GATHER) s = gather_stats(c, send, recv);
    else if (a == ACT_COUNT_8) s = ema_update(c, send, recv, 8);
    else if (a != ACT_SKIP_EMA) s = ema_update(c, send, recv, N_EMA);
    if (step == t->odd_step) {
      bool untouched = true;
      for (int i = 0; i < N_EMA * MAX_RANKS; i++)
        if (recv[i] != SENTINEL) untouched = false;
      t->recv_untouched[rank] = untouched;
    }
    if (s != VQC_OK) return s;
    t->last_sum[rank] = recv[0];
    if (a != ACT_SKIP_SEED) s = sync_seed(c, t->same_shape);
    if (s != VQC_OK) return s;
    VQC_TRY(chk->step_end(chk, ctx, step));
  }
  return VQC_OK;
}

static void on_hang(const vqc_ledger_record *stuck, bool analysed,
                    void *user) {
  test_run *t = user;
  int rank = stuck->rank;
  pthread_mutex_lock(&t->mu);
  t->hooks[rank]++;
  t->hook_analysed[rank] = analysed;
  if (rank == 0)
    t->deadlock_at_hook = vqc_findings_has(&t->findings, VQC_FINDING_DEADLOCK);
  pthread_mutex_unlock(&t->mu);
  /* Rank 0 releases everyone once it has analysed (what a CLI's MPI_Abort
   * would do). */
  if (rank == 0) vqc_comm_abort(t->comms[0]);
}

static vqc_status rank_body(vqc_comm *c, void *arg) {
  test_run *t = arg;
  int rank = vqc_comm_rank(c);
  t->comms[rank] = c;
  if (t->blocking) VQC_TRY(vqc_comm_set_wait_mode(c, VQC_WAIT_BLOCKING));
  vqc_check_ctx ctx = {.comm = c,
                       .rank = rank,
                       .size = vqc_comm_size(c),
                       .findings = &t->findings,
                       .opts = {.interval = 1,
                                .timeout_s = t->check_timeout,
                                .strict = t->strict},
                       .run_dir = t->run_dir};
  vqc_checker chk;
  VQC_TRY(vqc_checker_collective(&chk));
  VQC_TRY(chk.attach(&chk, &ctx));
  if (t->blocking) VQC_TRY(vqc_collective_on_hang(&chk, on_hang, t));
  vqc_status s = t->train[rank] = train(c, t, &chk, &ctx);
  if (s == VQC_EINTERNAL) { /* ACT_DIE: gone without a word */
    chk.destroy(&chk, &ctx);
    return s;
  }
  t->finish[rank] = chk.finish(&chk, &ctx, s);
  chk.destroy(&chk, &ctx);
  return s != VQC_OK ? s : t->finish[rank];
}

static void run_init(test_run *t, int size, int steps) {
  memset(t, 0, sizeof *t);
  t->size = size;
  t->steps = steps;
  t->comm_timeout = TIMEOUT_S;
  t->check_timeout = TIMEOUT_S;
  t->odd_step = -1;
  snprintf(t->run_dir, sizeof t->run_dir, "/tmp/vqc-coll-XXXXXX");
  cr_assert_not_null(mkdtemp(t->run_dir));
  vqc_findings_init(&t->findings);
  pthread_mutex_init(&t->mu, NULL);
}

/* Runs the ranks; returns vqc_threads_run's status. */
static vqc_status run(test_run *t) {
  return vqc_threads_run(t->size, t->comm_timeout, rank_body, t, NULL);
}

static void run_fini(test_run *t) {
  DIR *d = opendir(t->run_dir);
  if (d) {
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      snprintf(path, sizeof path, "%s/%s", t->run_dir, e->d_name);
      remove(path);
    }
    closedir(d);
    rmdir(t->run_dir);
  }
  vqc_findings_free(&t->findings);
  pthread_mutex_destroy(&t->mu);
}

/* ---- looking at results */

static int count_kind(vqc_findings *f, vqc_finding_kind k) {
  int n = 0;
  for (int i = 0; i < f->count; i++) n += f->items[i].kind == k;
  return n;
}

static const vqc_finding *the_finding(vqc_findings *f, vqc_finding_kind k) {
  cr_assert_eq(count_kind(f, k), 1, "expected one %s finding, got %d (of %d)",
               vqc_finding_kind_name(k), count_kind(f, k), f->count);
  for (int i = 0; i < f->count; i++)
    if (f->items[i].kind == k) return &f->items[i];
  return NULL;
}

static void expect_ranks(const vqc_finding *x, const int *want, int n) {
  cr_assert_eq(x->nranks, n, "finding names %d ranks, expected %d: %s",
               x->nranks, n, x->message);
  for (int i = 0; i < n; i++)
    cr_expect_eq(x->ranks[i], want[i], "ranks[%d] = %d, expected %d", i,
                 x->ranks[i], want[i]);
}

/* The ranks listed in detail[key] (array of {rank, ...}). */
static void expect_detail_ranks(const vqc_finding *x, const char *key,
                                const int *want, int n) {
  json_t *arr = json_object_get(x->detail, key);
  cr_assert(json_is_array(arr), "detail has no array '%s'", key);
  cr_assert_eq((int)json_array_size(arr), n, "detail.%s has %zu entries, "
               "expected %d", key, json_array_size(arr), n);
  for (int i = 0; i < n; i++) {
    json_t *r = json_object_get(json_array_get(arr, (size_t)i), "rank");
    cr_expect_eq(json_integer_value(r), want[i], "detail.%s[%d].rank = %lld",
                 key, i, (long long)json_integer_value(r));
  }
}

static const char *missing_where(const vqc_finding *x, int i) {
  json_t *arr = json_object_get(x->detail, "missing");
  const char *w = json_string_value(
      json_object_get(json_array_get(arr, (size_t)i), "where"));
  cr_assert_not_null(w, "detail.missing[%d] has no 'where'", i);
  return w;
}

static int64_t detail_int(const vqc_finding *x, const char *key) {
  json_t *v = json_object_get(x->detail, key);
  cr_assert(json_is_integer(v), "detail has no integer '%s'", key);
  return json_integer_value(v);
}

/* "test_collective.c:<line> <func>" is in s. */
static void expect_site(const char *s, int line, const char *func) {
  char want[128];
  snprintf(want, sizeof want, "test_collective.c:%d %s", line, func);
  cr_expect(strstr(s, want) != NULL, "'%s' does not name %s", s, want);
}

static bool file_exists(const test_run *t, const char *name) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", t->run_dir, name);
  return access(path, F_OK) == 0;
}

static json_t *status_file(const test_run *t, int rank) {
  char path[256];
  cr_assert_eq(vqc_status_dump_path(t->run_dir, rank, path, sizeof path),
               VQC_OK);
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  cr_assert_not_null(j, "%s: %s", path, err.text);
  return j;
}

/* ---- clean runs */

static void clean_run(bool strict) {
  test_run t;
  run_init(&t, 4, 3);
  t.strict = strict;
  vqc_status s = run(&t);
  cr_assert_eq(s, VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(t.findings.count, 0, "a clean run has %d findings: %s",
               t.findings.count,
               t.findings.count ? t.findings.items[0].message : "");
  for (int r = 0; r < 4; r++) {
    cr_expect_eq(t.last_sum[r], 10.0f, "rank %d sum %g", r, t.last_sum[r]);
    char name[64];
    snprintf(name, sizeof name, "rank-%d.ledger.jsonl", r);
    cr_expect(!file_exists(&t, name), "a clean run dumped %s", name);
  }
  run_fini(&t);
}

Test(collective, clean, .timeout = 60) { clean_run(false); }
Test(collective, clean_strict, .timeout = 60) { clean_run(true); }

/* ---- deadlocks */

Test(collective, skip_then_next, .timeout = 60) {
  test_run t;
  run_init(&t, 4, 3);
  t.odd_step = 1;
  t.act[2] = ACT_SKIP_EMA;
  vqc_status s = run(&t);
  cr_assert_eq(s, VQC_EMISMATCH, "run: %s", vqc_status_name(s));
  for (int r = 0; r < 4; r++)
    cr_expect_eq(t.finish[r], VQC_OK, "rank %d finish: %s", r,
                 vqc_status_name(t.finish[r]));
  const vqc_finding *x = the_finding(&t.findings, VQC_FINDING_DEADLOCK);
  cr_expect_eq(t.findings.count, 1);
  cr_expect_eq(x->step, 1, "step %lld", (long long)x->step);
  cr_expect_eq(detail_int(x, "seq"), 2);
  expect_site(x->site, line_ema, "ema_update");
  expect_ranks(x, (int[]){2}, 1);
  expect_detail_ranks(x, "entered", (int[]){0, 1, 3}, 3);
  expect_detail_ranks(x, "missing", (int[]){2}, 1);
  const char *w = missing_where(x, 0);
  cr_expect(strstr(w, "waiting in all_reduce(int64, count 1) at ") == w,
            "where: %s", w);
  expect_site(w, line_seed, "sync_seed");
  cr_expect(strstr(x->message, "collective #2 all_reduce(float32, count 16)")
                && strstr(x->message, "entered by ranks 0, 1, 3 but never "
                                      "by rank 2"),
            "message: %s", x->message);
  /* Every rank dumped, with its status. */
  for (int r = 0; r < 4; r++) {
    json_t *j = status_file(&t, r);
    cr_expect_str_eq(json_string_value(json_object_get(j, "status")),
                     "VQC_EMISMATCH");
    cr_expect_eq(json_integer_value(json_object_get(j, "last_seq")), 2);
    json_decref(j);
  }
  run_fini(&t);
}

Test(collective, skip_tie_uses_history, .timeout = 60) {
  test_run t;
  run_init(&t, 4, 3);
  t.odd_step = 2;
  t.act[0] = t.act[2] = ACT_SKIP_EMA;
  (void)run(&t);
  const vqc_finding *x = the_finding(&t.findings, VQC_FINDING_DEADLOCK);
  /* 2 against 2, and the skippers hold rank 0: only the history says
   * ema_update was the one skipped. */
  cr_expect_eq(detail_int(x, "seq"), 4);
  cr_expect_eq(x->step, 2);
  expect_site(x->site, line_ema, "ema_update");
  expect_ranks(x, (int[]){0, 2}, 2);
  expect_detail_ranks(x, "entered", (int[]){1, 3}, 2);
  for (int i = 0; i < 2; i++)
    expect_site(missing_where(x, i), line_seed, "sync_seed");
  run_fini(&t);
}

Test(collective, skip_same_shape, .timeout = 60) {
  test_run t;
  run_init(&t, 3, 3);
  t.same_shape = true;
  t.odd_step = 1;
  t.act[1] = ACT_SKIP_EMA;
  vqc_status s = run(&t);
  /* Paired silently; rank 1 is one collective ahead from then on, and the
   * others wait for it in their last sync_seed. */
  cr_assert_eq(s, VQC_ETIMEOUT, "run: %s", vqc_status_name(s));
  const vqc_finding *x = the_finding(&t.findings, VQC_FINDING_DEADLOCK);
  cr_expect_eq(detail_int(x, "seq"), 2);
  cr_expect(json_is_true(json_object_get(x->detail, "misaligned")));
  expect_site(x->site, line_ema, "ema_update");
  expect_ranks(x, (int[]){1}, 1);
  const char *w = missing_where(x, 0);
  cr_expect(strstr(w, "called all_reduce(float32, count 16) at ") == w &&
                strstr(w, "instead"),
            "where: %s", w);
  expect_site(w, line_seed, "sync_seed");
  run_fini(&t);
}

Test(collective, different_collectives, .timeout = 60) {
  test_run t;
  run_init(&t, 3, 2);
  t.odd_step = 0;
  t.act[2] = ACT_ALL_GATHER;
  vqc_status s = run(&t);
  cr_assert_eq(s, VQC_EMISMATCH, "run: %s", vqc_status_name(s));
  const vqc_finding *x = the_finding(&t.findings, VQC_FINDING_DEADLOCK);
  cr_expect_eq(detail_int(x, "seq"), 0);
  cr_expect_eq(x->step, 0);
  expect_ranks(x, (int[]){2}, 1);
  expect_detail_ranks(x, "entered", (int[]){0, 1}, 2);
  const char *w = missing_where(x, 0);
  cr_expect(strstr(w, "waiting in all_gather(float32, count 16) at ") == w,
            "where: %s", w);
  expect_site(w, line_gather, "gather_stats");
  run_fini(&t);
}

/* ---- a rank that leaves, a rank that dies */

Test(collective, early_exit, .timeout = 60) {
  test_run t;
  run_init(&t, 3, 3);
  t.odd_step = 1;
  t.act[2] = ACT_EXIT;
  double t0 = now_s();
  vqc_status s = run(&t);
  double took = now_s() - t0;
  cr_assert_eq(s, VQC_ETIMEOUT, "run: %s", vqc_status_name(s));
  cr_expect_lt(took, 10.0, "the run took %.2f s", took);
  cr_expect_eq(t.train[2], VQC_OK);
  const vqc_finding *x = the_finding(&t.findings, VQC_FINDING_DEADLOCK);
  cr_expect_eq(count_kind(&t.findings, VQC_FINDING_RANK_FAILURE), 0);
  cr_expect_eq(detail_int(x, "seq"), 2);
  cr_expect_eq(x->step, 1);
  expect_site(x->site, line_ema, "ema_update");
  expect_ranks(x, (int[]){2}, 1);
  expect_detail_ranks(x, "entered", (int[]){0, 1}, 2);
  const char *w = missing_where(x, 0);
  cr_expect(strstr(w, "last completed seq 1 all_reduce(int64, count 1) at ")
                == w && strstr(w, "left its training loop (VQC_OK)"),
            "where: %s", w);
  json_t *j = status_file(&t, 2);
  cr_expect_str_eq(json_string_value(json_object_get(j, "status")), "VQC_OK");
  cr_expect_eq(json_integer_value(json_object_get(j, "last_seq")), 1);
  cr_expect(json_is_null(json_object_get(j, "in_flight")));
  json_decref(j);

  /* Without rank 2's ledger dump, it is a failed rank, and the others
   * waiting in seq 2 are explained by it. */
  char path[256];
  cr_assert_eq(vqc_ledger_dump_path(t.run_dir, 2, path, sizeof path), VQC_OK);
  cr_assert_eq(remove(path), 0);
  vqc_findings again;
  vqc_findings_init(&again);
  int n = 0;
  cr_assert_eq(vqc_ledger_analyze(t.run_dir, 0, -1, &again, &n), VQC_OK,
               "%s", vqc_last_error());
  cr_expect_eq(n, 1);
  cr_expect_eq(count_kind(&again, VQC_FINDING_DEADLOCK), 0);
  const vqc_finding *f = the_finding(&again, VQC_FINDING_RANK_FAILURE);
  expect_ranks(f, (int[]){2}, 1);
  cr_expect_eq(detail_int(f, "last_completed_seq"), 1);
  cr_expect_eq(f->step, 1);
  expect_site(f->site, line_ema, "ema_update");
  vqc_findings_free(&again);
  run_fini(&t);
}

Test(collective, rank_dies, .timeout = 60) {
  test_run t;
  run_init(&t, 3, 3);
  t.odd_step = 1;
  t.act[1] = ACT_DIE;
  vqc_status s = run(&t);
  cr_assert_eq(s, VQC_EINTERNAL, "run: %s", vqc_status_name(s));
  cr_expect(!file_exists(&t, "rank-1.ledger.jsonl"));
  const vqc_finding *f = the_finding(&t.findings, VQC_FINDING_RANK_FAILURE);
  cr_expect_eq(count_kind(&t.findings, VQC_FINDING_DEADLOCK), 0);
  expect_ranks(f, (int[]){1}, 1);
  cr_expect_eq(detail_int(f, "last_completed_seq"), 1);
  cr_expect(strstr(f->message, "rank 1 left no ledger dump"), "%s",
            f->message);
  run_fini(&t);
}

/* ---- strict mode */

/* *line is read after the run: the call site records it when called. */
static void strict_mismatch(int size, int odd, action a, const int *line,
                            const char *func) {
  test_run t;
  run_init(&t, size, 3);
  t.strict = true;
  t.odd_step = 1;
  t.act[odd] = a;
  vqc_status s = run(&t);
  cr_assert_eq(s, VQC_EMISMATCH, "run: %s", vqc_status_name(s));
  for (int r = 0; r < size; r++) {
    cr_expect_eq(t.train[r], VQC_EMISMATCH, "rank %d: %s", r,
                 vqc_status_name(t.train[r]));
    cr_expect(t.recv_untouched[r], "rank %d's recv buffer was written", r);
  }
  const vqc_finding *x =
      the_finding(&t.findings, VQC_FINDING_COLLECTIVE_MISMATCH);
  cr_expect_eq(t.findings.count, 1, "%d findings", t.findings.count);
  cr_expect_eq(x->step, 1);
  cr_expect_eq(detail_int(x, "seq"), 2);
  expect_ranks(x, (int[]){odd}, 1);
  expect_site(x->site, line_ema, "ema_update");
  json_t *fps = json_object_get(x->detail, "fingerprints");
  cr_assert_eq(json_array_size(fps), (size_t)size);
  json_t *mine = json_array_get(fps, (size_t)odd);
  expect_site(json_string_value(json_object_get(mine, "site")), *line, func);
  cr_expect(strstr(x->message, "vetoed before any data moved"), "%s",
            x->message);
  run_fini(&t);
}

Test(collective, strict_count, .timeout = 60) {
  strict_mismatch(3, 1, ACT_COUNT_8, &line_ema, "ema_update");
}

Test(collective, strict_op, .timeout = 60) {
  strict_mismatch(4, 3, ACT_ALL_GATHER, &line_gather, "gather_stats");
}

Test(collective, strict_seed_skip, .timeout = 60) {
  test_run t;
  run_init(&t, 4, 3);
  t.strict = true;
  t.odd_step = 1;
  t.act[0] = t.act[2] = ACT_SKIP_SEED;
  vqc_status s = run(&t);
  cr_assert_eq(s, VQC_EMISMATCH, "run: %s", vqc_status_name(s));
  const vqc_finding *x =
      the_finding(&t.findings, VQC_FINDING_COLLECTIVE_MISMATCH);
  cr_expect_eq(count_kind(&t.findings, VQC_FINDING_DEADLOCK), 0);
  /* Two against two: the history names the seed all_reduce as skipped. */
  cr_expect_eq(detail_int(x, "seq"), 3);
  expect_site(x->site, line_seed, "sync_seed");
  expect_ranks(x, (int[]){0, 2}, 2);
  run_fini(&t);
}

Test(collective, strict_early_exit, .timeout = 60) {
  test_run t;
  run_init(&t, 3, 3);
  t.strict = true;
  t.comm_timeout = t.check_timeout = 5.0;
  t.odd_step = 1;
  t.act[2] = ACT_EXIT;
  double t0 = now_s();
  vqc_status s = run(&t);
  double took = now_s() - t0;
  cr_assert_eq(s, VQC_EABORTED, "run: %s", vqc_status_name(s));
  /* Told by rank 2's FINISH message, not by the 5 s deadline. */
  cr_expect_lt(took, 5.0, "the run took %.2f s", took);
  const vqc_finding *x = the_finding(&t.findings, VQC_FINDING_DEADLOCK);
  cr_expect_eq(detail_int(x, "seq"), 2);
  expect_ranks(x, (int[]){2}, 1);
  run_fini(&t);
}

/* ---- VQC_WAIT_BLOCKING: the watchdog does the work */

Test(collective, blocking_watchdog, .timeout = 60) {
  test_run t;
  run_init(&t, 3, 3);
  t.blocking = true;
  t.comm_timeout = 20.0; /* what ends the wait must be the watchdog */
  t.check_timeout = 0.3;
  t.odd_step = 1;
  t.act[1] = ACT_EXIT;
  double t0 = now_s();
  vqc_status s = run(&t);
  double took = now_s() - t0;
  cr_assert_eq(s, VQC_EABORTED, "run: %s", vqc_status_name(s));
  cr_expect_lt(took, 15.0, "the run took %.2f s", took);
  cr_expect_eq(t.hooks[0], 1, "rank 0's hook ran %d times", t.hooks[0]);
  cr_expect_eq(t.hooks[2], 1, "rank 2's hook ran %d times", t.hooks[2]);
  cr_expect_eq(t.hooks[1], 0, "rank 1 was never stuck");
  cr_expect(t.hook_analysed[0] && t.deadlock_at_hook,
            "rank 0's hook ran before the analysis");
  const vqc_finding *x = the_finding(&t.findings, VQC_FINDING_DEADLOCK);
  cr_expect_eq(detail_int(x, "seq"), 2);
  expect_ranks(x, (int[]){1}, 1);
  expect_detail_ranks(x, "entered", (int[]){0, 2}, 2);
  run_fini(&t);
}

/* ---- malformed dumps */

static void write_file(const char *dir, const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

#define GOOD_LINE(rank, seq)                                                 \
  "{\"seq\":" #seq ",\"rank\":" #rank ",\"op\":\"all_reduce\",\"redop\":"    \
  "\"sum\",\"dtype\":\"float32\",\"count\":4,\"root\":-1,\"file\":\"a.c\","  \
  "\"line\":3,\"func\":\"f\",\"t_enter_ns\":1,\"t_exit_ns\":2,\"state\":"    \
  "\"done\",\"status\":\"VQC_OK\"}\n"

static void expect_parse_error(const char *rank1_text, const char *where,
                               const char *what) {
  test_run t;
  run_init(&t, 2, 0);
  write_file(t.run_dir, "rank-0.ledger.jsonl", GOOD_LINE(0, 0) GOOD_LINE(0, 1));
  write_file(t.run_dir, "rank-1.ledger.jsonl", rank1_text);
  int n = -1;
  vqc_status s = vqc_ledger_analyze(t.run_dir, 2, -1, &t.findings, &n);
  cr_expect_eq(s, VQC_EPARSE, "status %s", vqc_status_name(s));
  cr_expect_eq(n, 0);
  cr_expect_eq(t.findings.count, 0);
  const char *msg = vqc_last_error();
  cr_expect(strstr(msg, where) && strstr(msg, what),
            "error '%s' should name '%s' and '%s'", msg, where, what);
  run_fini(&t);
}

Test(collective, garbage_dump) {
  expect_parse_error(GOOD_LINE(1, 0) "this is not json\n",
                     "rank-1.ledger.jsonl:2:", "not a JSON object");
  expect_parse_error(GOOD_LINE(1, 0) "{\"seq\":1}\n",
                     "rank-1.ledger.jsonl:2:", "field 'rank'");
  expect_parse_error("{\"seq\":0,\"rank\":1,\"op\":\"all_reduce\",\"redop\":"
                     "\"sum\",\"dtype\":\"float32\",\"count\":4,\"root\":-1,"
                     "\"file\":\"a.c\",\"line\":3,\"func\":\"f\",\"state\":"
                     "\"done\",\"status\":\"VQC_OK\",\"op\":\"x\"}\n",
                     "rank-1.ledger.jsonl:1:", "not a JSON object");
  expect_parse_error(GOOD_LINE(1, 1) GOOD_LINE(1, 0),
                     "rank-1.ledger.jsonl:2:", "field 'seq'");
  expect_parse_error("{\"seq\":0,\"rank\":1,\"op\":\"all_scatter\",\"redop\":"
                     "\"sum\",\"dtype\":\"float32\",\"count\":4,\"root\":-1,"
                     "\"file\":\"a.c\",\"line\":3,\"func\":\"f\",\"state\":"
                     "\"done\",\"status\":\"VQC_OK\"}\n",
                     "rank-1.ledger.jsonl:1:", "field 'op'");
}

/* Consistent dumps analyse to nothing; an empty run directory is an error. */
Test(collective, analysis_of_consistent_dumps) {
  test_run t;
  run_init(&t, 2, 0);
  int n = -1;
  cr_expect_eq(vqc_ledger_analyze(t.run_dir, 0, -1, &t.findings, &n),
               VQC_EINVAL);
  write_file(t.run_dir, "rank-0.ledger.jsonl", GOOD_LINE(0, 0) GOOD_LINE(0, 1));
  write_file(t.run_dir, "rank-1.ledger.jsonl", GOOD_LINE(1, 0) GOOD_LINE(1, 1));
  cr_expect_eq(vqc_ledger_analyze(t.run_dir, 0, -1, &t.findings, &n), VQC_OK,
               "%s", vqc_last_error());
  cr_expect_eq(n, 0);
  cr_expect_eq(t.findings.count, 0);
  /* One more record on rank 1 only: rank 0 is missing from seq 2. */
  write_file(t.run_dir, "rank-1.ledger.jsonl",
             GOOD_LINE(1, 0) GOOD_LINE(1, 1) GOOD_LINE(1, 2));
  cr_expect_eq(vqc_ledger_analyze(t.run_dir, 2, 7, &t.findings, &n), VQC_OK);
  cr_expect_eq(n, 1);
  const vqc_finding *x = the_finding(&t.findings, VQC_FINDING_DEADLOCK);
  cr_expect_eq(x->step, 7);
  expect_ranks(x, (int[]){0}, 1);
  cr_expect_str_eq(missing_where(x, 0),
                   "last completed seq 1 all_reduce(float32, count 4) at a.c:3 "
                   "f");
  run_fini(&t);
}

/* ---- the Python bridge's records: torch.distributed's collectives */

#define TORCH_LINE(rank, seq, op, redop, dtype, count, root, line)           \
  "{\"seq\":" #seq ",\"rank\":" #rank ",\"op\":\"" op "\",\"redop\":\""      \
  redop "\",\"dtype\":\"" dtype "\",\"count\":" #count ",\"root\":" #root    \
  ",\"file\":\"/home/u/train.py\",\"line\":" #line ",\"func\":\"step\","     \
  "\"t_enter_ns\":1,\"t_exit_ns\":2,\"state\":\"done\",\"status\":"          \
  "\"VQC_OK\"}\n"

/* torch's collectives, dtypes and reductions are read like vqcheck's own;
 * a reduction that differs is a collective_mismatch described in them. */
Test(collective, torch_records) {
  test_run t;
  run_init(&t, 2, 0);
  write_file(t.run_dir, "rank-0.ledger.jsonl",
             TORCH_LINE(0, 1, "reduce_scatter_tensor", "avg", "bfloat16", 8,
                        -1, 10)
             TORCH_LINE(0, 2, "all_gather_object", "", "", 0, -1, 11)
             TORCH_LINE(0, 3, "reduce", "product", "float16", 4, 1, 12));
  write_file(t.run_dir, "rank-1.ledger.jsonl",
             TORCH_LINE(1, 1, "reduce_scatter_tensor", "avg", "bfloat16", 8,
                        -1, 10)
             TORCH_LINE(1, 2, "all_gather_object", "", "", 0, -1, 11)
             TORCH_LINE(1, 3, "reduce", "product", "float16", 4, 1, 12));
  int n = -1;
  cr_expect_eq(vqc_ledger_analyze(t.run_dir, 2, -1, &t.findings, &n), VQC_OK,
               "%s", vqc_last_error());
  cr_expect_eq(n, 0);
  /* Rank 1 reduces to another root: the same line, another collective. */
  write_file(t.run_dir, "rank-1.ledger.jsonl",
             TORCH_LINE(1, 1, "reduce_scatter_tensor", "avg", "bfloat16", 8,
                        -1, 10)
             TORCH_LINE(1, 2, "all_gather_object", "", "", 0, -1, 11)
             TORCH_LINE(1, 3, "reduce", "product", "float16", 4, 0, 12));
  cr_expect_eq(vqc_ledger_analyze(t.run_dir, 2, -1, &t.findings, &n), VQC_OK,
               "%s", vqc_last_error());
  cr_expect_eq(n, 1);
  const vqc_finding *x =
      the_finding(&t.findings, VQC_FINDING_COLLECTIVE_MISMATCH);
  cr_expect(strstr(x->message, "reduce(float16, count 4, root 0, product)") &&
                strstr(x->message, "reduce(float16, count 4, root 1, "
                                   "product)"),
            "%s", x->message);
  run_fini(&t);
}

Test(collective, torch_garbage) {
  expect_parse_error(TORCH_LINE(1, 0, "all_reduce", "mean", "float32", 4, -1,
                                3),
                     "rank-1.ledger.jsonl:1:", "field 'redop'");
  expect_parse_error(TORCH_LINE(1, 0, "all_reduce", "sum", "float128", 4, -1,
                                3),
                     "rank-1.ledger.jsonl:1:", "field 'dtype'");
}
