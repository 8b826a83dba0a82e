/* test_threads_scale.c: the threads backend at 1024 ranks
 * (lib/src/comm/comm_threads.c), where a thousand rank threads share two cores.
 *
 *   all_reduce_bits_*      the reduction is done once (each rank reduces a
 *                          slice of the elements over every rank), yet every
 *                          rank gets exactly the bits of the rank-order
 *                          reduction send_0 + send_1 + ... + send_1023,
 *                          computed here serially; inputs span 40 binades so
 *                          any other order would change bits; in place too;
 *                          counts from 1 (rank 0 reduces it all) to uneven;
 *   mismatch_*             one rank of 1024 differs: every rank fails with
 *                          the same message naming it, the channel stays
 *                          usable;
 *   timeout_*              ranks that never arrive are named as ranges
 *                          ("2 missing: 1022, 1023", "1-1023 (step 2)");
 *   thread_start_failure_* pthread_create refusing rank thread 517 (as at a
 *                          thread limit: EAGAIN) gives an error naming the
 *                          rank and the limit to raise, and the 517 threads
 *                          already running are stopped at once, not at their
 *                          deadline;
 *   deadlock_*             ranks 1022 and 1023 skip a collective with the
 *                          collective checker on every rank: the deadlock
 *                          finding reads "entered by ranks 0-1021 but never
 *                          by ranks 1022, 1023";
 *   rank_stacks_*          every rank thread has the documented stack
 *                          (harness/run/run_memory.h VQC_RUN_RANK_STACK), and
 *                          the deepest stack a rank uses running real
 *                          scenarios through the runner (deadlock analysis,
 *                          strict-mode mismatch, divergence, equivalence)
 *                          stays under a quarter of it.
 *
 * pthread_create is wrapped (-Wl,--wrap=pthread_create, tests/
 * CMakeLists.txt): the wrapper can refuse the n-th thread, and can give
 * each thread a stack of the size it asked for, painted, to read back how
 * deep the rank went. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "checkers.h"
#include "collective.h"
#include "run_memory.h"
#include "runner.h"
#include "scenario.h"
#include "test_paths.h"
#include "vqc/comm.h"

#define P 1024

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the pthread_create wrapper */

int __real_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                          void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                          void *(*fn)(void *), void *arg);

#define PAINT 0xA5
#define MAX_PAINTED 64

static _Atomic int created;         /* threads asked for since reset */
static int fail_at = -1;            /* refuse this one (0-based); -1 none */
static bool paint;                  /* give threads painted stacks */
static _Atomic size_t stack_seen;   /* a stack size asked for (0: none) */
static _Atomic size_t high_water;   /* deepest use of a painted stack */

typedef struct painted {
  void *(*fn)(void *);
  void *arg;
  unsigned char *lo;
  size_t size;
} painted;
static painted stacks[MAX_PAINTED];
static _Atomic int npainted;

static void *painted_main(void *p) {
  painted *w = p;
  void *ret = w->fn(w->arg);
  /* The stack grows down from lo + size: the first byte still painted,
   * from the bottom, is where the rank never reached. */
  size_t untouched = 0;
  while (untouched < w->size && w->lo[untouched] == PAINT) untouched++;
  size_t used = w->size - untouched;
  size_t cur = atomic_load(&high_water);
  while (used > cur && !atomic_compare_exchange_weak(&high_water, &cur, used)) {
  }
  return ret;
}

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                          void *(*fn)(void *), void *arg) {
  const int n = atomic_fetch_add(&created, 1);
  if (n == fail_at) return EAGAIN;
  size_t size = 0;
  if (attr && pthread_attr_getstacksize(attr, &size) == 0)
    atomic_store(&stack_seen, size);
  const int k = paint && attr ? atomic_fetch_add(&npainted, 1) : MAX_PAINTED;
  if (k >= MAX_PAINTED) return __real_pthread_create(t, attr, fn, arg);
  painted *w = &stacks[k];
  w->fn = fn;
  w->arg = arg;
  w->size = size;
  w->lo = mmap(NULL, size, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (w->lo == MAP_FAILED) return EAGAIN;
  memset(w->lo, PAINT, size);
  pthread_attr_t a;
  pthread_attr_init(&a);
  /* glibc puts the thread descriptor and static TLS at the top of a stack
   * it is given, as it does with one it allocates of this size. */
  pthread_attr_setstack(&a, w->lo, size);
  int rc = __real_pthread_create(t, &a, painted_main, w);
  pthread_attr_destroy(&a);
  return rc;
}

static void wrapper_reset(void) {
  atomic_store(&created, 0);
  fail_at = -1;
  paint = false;
  atomic_store(&stack_seen, 0);
  atomic_store(&high_water, 0);
  /* Painted stacks are unmapped once their threads are joined. */
  for (int k = 0; k < atomic_load(&npainted) && k < MAX_PAINTED; k++)
    if (stacks[k].lo && stacks[k].lo != MAP_FAILED)
      munmap(stacks[k].lo, stacks[k].size);
  memset(stacks, 0, sizeof stacks);
  atomic_store(&npainted, 0);
}

TestSuite(threads_scale, .init = wrapper_reset, .fini = wrapper_reset,
          .timeout = 120);

/* ---- all_reduce: one reduction, the rank-order bits */

#define N_MAX 4099

/* Rank r's element i: magnitudes across 2^-20..2^19, so that float sums
 * depend on their order. */
static float input(int r, int i) {
  const int e = (r * 7 + i * 13) % 40 - 20;
  return ldexpf(1.0f + (float)((r * 31 + i) % 97) / 97.0f, e) *
         ((r + i) % 3 == 0 ? -1.0f : 1.0f);
}

typedef struct ar_case {
  size_t n;
  bool in_place;
  float want[N_MAX];   /* the serial rank-order sum */
  int64_t want_max;    /* max over ranks of an int64 per rank */
  _Atomic int wrong;   /* ranks whose float result differs in any bit */
  _Atomic int wrong_i; /* ranks whose int64 max differs */
} ar_case;

static vqc_status ar_rank(vqc_comm *c, void *arg) {
  ar_case *t = arg;
  const int r = vqc_comm_rank(c);
  float *send = malloc(t->n * sizeof *send);
  float *recv = t->in_place ? send : malloc(t->n * sizeof *recv);
  if (!send || !recv) return vqc_error(VQC_ENOMEM, "test: rank %d", r);
  for (size_t i = 0; i < t->n; i++) send[i] = input(r, (int)i);
  vqc_status s = vqc_all_reduce(c, send, recv, t->n, VQC_F32, VQC_SUM);
  if (s == VQC_OK && memcmp(recv, t->want, t->n * sizeof *recv) != 0)
    atomic_fetch_add(&t->wrong, 1);
  /* An integer MAX, which the slices must also get right. */
  int64_t mine = (int64_t)((r * 7919) % 1024) - 500, all = 0;
  if (s == VQC_OK) s = vqc_all_reduce(c, &mine, &all, 1, VQC_I64, VQC_MAX);
  if (s == VQC_OK && all != t->want_max) atomic_fetch_add(&t->wrong_i, 1);
  if (recv != send) free(recv);
  free(send);
  return s;
}

static void all_reduce_case(size_t n, bool in_place) {
  ar_case *t = calloc(1, sizeof *t);
  cr_assert_not_null(t);
  t->n = n;
  t->in_place = in_place;
  t->want_max = INT64_MIN;
  for (size_t i = 0; i < n; i++) {
    float acc = input(0, (int)i);
    for (int r = 1; r < P; r++) acc += input(r, (int)i);
    t->want[i] = acc;
  }
  for (int r = 0; r < P; r++) {
    int64_t v = (int64_t)((r * 7919) % 1024) - 500;
    if (v > t->want_max) t->want_max = v;
  }
  /* The inputs make the order matter: reduced backwards, some element
   * differs. */
  int order_matters = 0;
  for (size_t i = 0; i < n; i++) {
    float back = input(P - 1, (int)i);
    for (int r = P - 2; r >= 0; r--) back += input(r, (int)i);
    order_matters += back != t->want[i];
  }
  cr_assert(n < 4 || order_matters > 0, "the inputs do not test the order");
  const double t0 = now_s();
  vqc_status s = vqc_threads_run(P, 60.0, ar_rank, t, NULL);
  cr_log_info("all_reduce of %zu floats%s on %d ranks: %.2f s", n,
              in_place ? " in place" : "", P, now_s() - t0);
  cr_assert_eq(s, VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(atomic_load(&t->wrong), 0, "%d ranks got other bits",
               atomic_load(&t->wrong));
  cr_expect_eq(atomic_load(&t->wrong_i), 0);
  free(t);
}

Test(threads_scale, all_reduce_bits_match_rank_order_uneven_count) {
  all_reduce_case(N_MAX, false); /* not a multiple of any slice */
}

Test(threads_scale, all_reduce_bits_match_rank_order_in_place) {
  all_reduce_case(1000, true);
}

Test(threads_scale, all_reduce_bits_one_element) {
  all_reduce_case(1, false); /* rank 0 reduces it over all 1024 */
}

/* ---- one rank of 1024 calls something else */

typedef struct mm_case {
  _Atomic int mismatched;  /* ranks that got VQC_EMISMATCH */
  _Atomic int named;       /* ... whose message names rank 700 and both */
  _Atomic int after_ok;    /* ranks whose next, matching call worked */
} mm_case;

static vqc_status mm_rank(vqc_comm *c, void *arg) {
  mm_case *t = arg;
  const int r = vqc_comm_rank(c);
  float send[8] = {1, 1, 1, 1, 1, 1, 1, 1}, recv[8];
  const size_t n = r == 700 ? 8 : 4;
  vqc_status s = vqc_all_reduce(c, send, recv, n, VQC_F32, VQC_SUM);
  if (s == VQC_EMISMATCH) {
    atomic_fetch_add(&t->mismatched, 1);
    const char *m = vqc_last_error();
    if (strstr(m, "rank 700 called all_reduce(float32, count=8") &&
        strstr(m, "rank 0 called all_reduce(float32, count=4"))
      atomic_fetch_add(&t->named, 1);
  }
  s = vqc_all_reduce(c, send, recv, 4, VQC_F32, VQC_SUM);
  if (s == VQC_OK && recv[3] == (float)P) atomic_fetch_add(&t->after_ok, 1);
  return VQC_OK;
}

Test(threads_scale, mismatch_is_judged_once_for_every_rank) {
  mm_case t = {0};
  cr_assert_eq(vqc_threads_run(P, 60.0, mm_rank, &t, NULL), VQC_OK, "%s",
               vqc_last_error());
  cr_expect_eq(atomic_load(&t.mismatched), P);
  cr_expect_eq(atomic_load(&t.named), P);
  cr_expect_eq(atomic_load(&t.after_ok), P);
}

/* ---- ranks that never come */

typedef struct skip_case {
  int mode; /* 0: ranks 1022 and 1023 skip; 1: the odd ranks skip */
} skip_case;

static vqc_status skip_rank(vqc_comm *c, void *arg) {
  const skip_case *t = arg;
  const int r = vqc_comm_rank(c);
  /* Every rank running first (starting 1024 threads on a busy machine can
   * take longer than the deadline below), on the side channel. */
  VQC_TRY(vqc_barrier(vqc_comm_side(c)));
  const bool skip = t->mode == 0 ? r >= P - 2 : r % 2 == 1;
  if (skip) return VQC_OK;
  vqc_comm_set_timeout(c, 1.0);
  int64_t x = 1, y = 0;
  return vqc_all_reduce(c, &x, &y, 1, VQC_I64, VQC_SUM);
}

static void expect_timeout_names(int mode, const char *arrived,
                                 const char *missing) {
  skip_case t = {mode};
  const double t0 = now_s();
  vqc_status s = vqc_threads_run(P, 60.0, skip_rank, &t, NULL);
  const double dt = now_s() - t0;
  cr_assert_eq(s, VQC_ETIMEOUT, "%s", vqc_status_name(s));
  const char *m = vqc_last_error();
  cr_expect(strstr(m, arrived) != NULL, "'%s' lacks '%s'", m, arrived);
  cr_expect(strstr(m, missing) != NULL, "'%s' lacks '%s'", m, missing);
  /* One line, not a list of ranks. */
  cr_expect_lt(strlen(m), 400, "%s", m);
  /* The others are woken when the first times out, not after their own
   * deadlines one after the other. */
  cr_expect_lt(dt, 20.0, "took %.1f s", dt);
}

Test(threads_scale, timeout_names_the_two_missing_ranks) {
  expect_timeout_names(0, "1022 of 1024 ranks arrived",
                       "(2 missing: 1022, 1023)");
}

Test(threads_scale, timeout_folds_the_odd_ranks) {
  expect_timeout_names(1, "512 of 1024 ranks arrived",
                       "(512 missing: 1-1023 (step 2))");
}

/* ---- thread start failure */

static _Atomic int started_bodies;

static vqc_status barrier_rank(vqc_comm *c, void *arg) {
  (void)arg;
  atomic_fetch_add(&started_bodies, 1);
  return vqc_barrier(c);
}

Test(threads_scale, thread_start_failure_names_the_rank_and_the_limit) {
  fail_at = 517;
  atomic_store(&started_bodies, 0);
  const double t0 = now_s();
  vqc_status st[P];
  /* A long deadline: the started ranks must be stopped, not time out. */
  vqc_status s = vqc_threads_run(P, 120.0, barrier_rank, NULL, st);
  const double dt = now_s() - t0;
  cr_expect_eq(s, VQC_ENOMEM, "%s", vqc_status_name(s));
  const char *m = vqc_last_error();
  cr_expect(strstr(m, "could not start rank thread 517 of 1024") != NULL,
            "%s", m);
  cr_expect(strstr(m, strerror(EAGAIN)) != NULL, "%s", m);
  cr_expect(strstr(m, "ulimit -u") != NULL, "%s", m);
  cr_expect(strstr(m, "lower --ranks") != NULL, "%s", m);
  cr_expect_lt(dt, 30.0, "the started ranks waited %.1f s", dt);
  cr_expect_eq(atomic_load(&started_bodies), 517);
  for (int r = 0; r < 517; r++)
    cr_expect_eq(st[r], VQC_EABORTED, "rank %d: %s", r,
                 vqc_status_name(st[r]));
  for (int r = 517; r < P; r++) cr_expect_eq(st[r], VQC_ENOMEM, "rank %d", r);
}

/* ---- stacks */

static vqc_status noop_rank(vqc_comm *c, void *arg) {
  (void)arg;
  return vqc_barrier(c);
}

Test(threads_scale, rank_stacks_have_the_documented_size) {
  cr_assert_eq(vqc_threads_run(4, 10.0, noop_rank, NULL, NULL), VQC_OK);
  cr_expect_eq(atomic_load(&stack_seen), (size_t)VQC_RUN_RANK_STACK,
               "rank threads asked for %zu bytes of stack, run_memory.h "
               "counts %zu", atomic_load(&stack_seen),
               (size_t)VQC_RUN_RANK_STACK);
}

/* A scenario of scenarios/ on `ranks` ranks through the runner. */
static void run_scenario(const char *name, int ranks, double timeout) {
  char path[1024], dir[128], out[256];
  snprintf(path, sizeof path, "%s/scenarios/%s.yaml", vqc_test_source_dir(),
           name);
  vqc_scenario *sc = malloc(sizeof *sc);
  cr_assert_not_null(sc);
  cr_assert_eq(vqc_scenario_load(path, sc), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(vqc_scenario_override(sc, ranks, -1, -1, timeout), VQC_OK,
               "%s", vqc_last_error());
  cr_assert_not_null(vqc_test_temp_dir(dir, sizeof dir,
                                       "/tmp/vqc-scale-stack-XXXXXX"));
  snprintf(out, sizeof out, "%s/run", dir);
  vqc_run_options o = {out, NULL};
  vqc_run_result r;
  vqc_status s = vqc_run_threads(sc, &o, &r);
  cr_expect_eq(s, VQC_OK, "%s: %s", name, vqc_last_error());
  cr_expect_gt(vqc_findings_count(&r.findings), 0, "%s found nothing", name);
  vqc_run_result_free(&r);
  vqc_test_remove_dir(dir);
  free(sc);
}

Test(threads_scale, rank_stacks_keep_a_4x_margin_on_real_scenarios) {
  paint = true;
  /* Each fault drives a different deep path: the deadlock analysis on
   * rank 0 (every rank's dump read), the strict-mode mismatch report, the
   * divergence and equivalence reports, the dead-code sampler. */
  static const struct {
    const char *name;
    int ranks;
  } runs[] = {{"seed_sync_some_ranks", 4}, {"mismatched_collective", 4},
              {"skip_weight_sync", 4},     {"nograd_all_gather", 4},
              {"sampler_float_split", 4}};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    const int before = atomic_load(&npainted);
    run_scenario(runs[i].name, runs[i].ranks, 2.0);
    cr_assert_eq(atomic_load(&npainted) - before, runs[i].ranks,
                 "%s: the rank threads were not painted", runs[i].name);
  }
  const size_t hw = atomic_load(&high_water);
  cr_log_info("deepest rank stack: %zu bytes (%.1f KiB) of %zu", hw,
              hw / 1024.0, (size_t)VQC_RUN_RANK_STACK);
  cr_expect_gt(hw, 0u, "nothing was measured");
  /* The margin is the release build's (36-43 KiB measured). AddressSanitizer
   * puts redzones around every stack object, which here takes the same
   * paths to ~64 KiB: under it the check is that the stack still holds
   * twice what a rank uses (the sanitizer pass, scripts/test.sh). */
#if defined(__SANITIZE_ADDRESS__)
  const size_t margin = 2;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  const size_t margin = 2;
#else
  const size_t margin = 4;
#endif
#else
  const size_t margin = 4;
#endif
  cr_expect_lt(hw, (size_t)VQC_RUN_RANK_STACK / margin,
               "a rank used %zu bytes of its %zu-byte stack: less than the "
               "documented %zux margin (lib/src/comm/comm_threads.c)",
               hw, (size_t)VQC_RUN_RANK_STACK, margin);
}

/* ---- a deadlock at 1024 ranks: two ranks skip a collective
 *
 * The catalogue's bug #3 (docs/spec/bugs.md) in its plainest form, with
 * the collective checker attached to every rank as the runner attaches it:
 * each step calls ema_update (all_reduce float32 x 16) then sync_seed
 * (all_reduce int64 x 1); at step 1 ranks 1022 and 1023 skip ema_update and
 * call sync_seed instead. The threads backend sees different collectives
 * in one round (VQC_EMISMATCH on every rank); the analysis of the 1024
 * dumps must say who entered and who did not, as ranges. */

typedef struct dl_case {
  char run_dir[128];
  vqc_findings findings;
  _Atomic int finished;   /* ranks whose finish returned VQC_OK */
} dl_case;

static vqc_status dl_ema(vqc_comm *c, const float *send, float *recv) {
  return vqc_all_reduce(c, send, recv, 16, VQC_F32, VQC_SUM);
}

static vqc_status dl_seed(vqc_comm *c) {
  int64_t seed = 1234, out = 0;
  return vqc_all_reduce(c, &seed, &out, 1, VQC_I64, VQC_SUM);
}

static vqc_status dl_rank(vqc_comm *c, void *arg) {
  dl_case *t = arg;
  const int r = vqc_comm_rank(c);
  vqc_check_ctx ctx = {.comm = c,
                       .rank = r,
                       .size = vqc_comm_size(c),
                       .findings = &t->findings,
                       .opts = {.interval = 1, .timeout_s = 10.0},
                       .run_dir = t->run_dir};
  vqc_checker chk;
  VQC_TRY(vqc_checker_collective(&chk));
  VQC_TRY(chk.attach(&chk, &ctx));
  float send[16], recv[16];
  for (int i = 0; i < 16; i++) send[i] = 1.0f;
  vqc_status s = VQC_OK;
  for (int step = 0; step < 3 && s == VQC_OK; step++) {
    if (!(step == 1 && r >= P - 2)) s = dl_ema(c, send, recv);
    if (s == VQC_OK) s = dl_seed(c);
    if (s == VQC_OK) s = chk.step_end(&chk, &ctx, step);
  }
  vqc_status f = chk.finish(&chk, &ctx, s);
  if (f == VQC_OK) atomic_fetch_add(&t->finished, 1);
  chk.destroy(&chk, &ctx);
  return VQC_OK;
}

Test(threads_scale, deadlock_of_two_skipping_ranks_is_told_in_ranges) {
  dl_case *t = calloc(1, sizeof *t);
  cr_assert_not_null(t);
  cr_assert_not_null(vqc_test_temp_dir(t->run_dir, sizeof t->run_dir,
                                       "/tmp/vqc-scale-dl-XXXXXX"));
  vqc_findings_init(&t->findings);
  const double t0 = now_s();
  cr_assert_eq(vqc_threads_run(P, 10.0, dl_rank, t, NULL), VQC_OK, "%s",
               vqc_last_error());
  cr_log_info("1024-rank deadlock run and analysis: %.2f s", now_s() - t0);
  cr_expect_eq(atomic_load(&t->finished), P);
  cr_assert_eq(t->findings.count, 1, "%d findings", t->findings.count);
  const vqc_finding *x = &t->findings.items[0];
  cr_log_info("%s", x->message);
  cr_expect_eq(x->kind, VQC_FINDING_DEADLOCK, "%s",
               vqc_finding_kind_name(x->kind));
  cr_expect_eq(x->step, 1);
  cr_assert_eq(x->nranks, 2);
  cr_expect(x->ranks[0] == P - 2 && x->ranks[1] == P - 1);
  cr_expect(strstr(x->message, "was entered by ranks 0-1021 but never by "
                               "ranks 1022, 1023") != NULL,
            "%s", x->message);
  /* The two missing ranks are in one place: one clause, not two. */
  cr_expect(strstr(x->message, "(waiting in all_reduce(int64, count 1)") !=
                NULL, "%s", x->message);
  cr_expect_str_eq(json_string_value(json_object_get(x->detail,
                                                     "entered_ranges")),
                   "0-1021");
  cr_expect_str_eq(json_string_value(json_object_get(x->detail,
                                                     "missing_ranges")),
                   "1022, 1023");
  cr_expect_eq(json_array_size(json_object_get(x->detail, "entered")),
               (size_t)P - 2);
  vqc_findings_free(&t->findings);
  const double t1 = now_s();
  vqc_test_remove_dir(t->run_dir);
  cr_log_info("removing the run directory: %.2f s", now_s() - t1);
  free(t);
}
