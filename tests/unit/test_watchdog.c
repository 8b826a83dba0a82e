/* test_watchdog.c: the watchdog that reports collectives stuck in flight
 * (vqc/watchdog.h), on the threads backend.
 *
 *   fires_once_per_stuck_record  a rank whose peer does not come: the
 *       watchdog fires once, with that record (seq, op, site), between the
 *       timeout and the timeout plus a poll interval (plus scheduling slack),
 *       and not again while the same record stays stuck; a second stuck
 *       record fires again; the collectives then complete normally;
 *   no_false_fire  many collectives, some with a late (but in time) peer:
 *       no fire; then one rank comes late beyond the timeout, and only the
 *       ranks that waited fire (so the watchdogs were really watching);
 *   default_timeout  timeout <= 0 takes the comm's timeout at start;
 *   stop_is_prompt  stop does not wait out the 50 ms poll interval;
 *   bad_arguments  NULL comm / fn / out and side channels are refused.
 *
 * The comms' own timeouts are long (30 s) wherever a collective is meant to
 * stay stuck, so what ends the wait is the test, not the backend's
 * deadline. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "comm/comm_internal.h" /* vqc_now_ns */
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/status.h"
#include "vqc/watchdog.h"

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* ---- what a watchdog reported (written on the watchdog thread) */

#define MAX_FIRES 8

typedef struct fire_log {
  pthread_mutex_t mu;
  int n;                                /* calls of fn (may exceed MAX) */
  vqc_ledger_record rec[MAX_FIRES];
  uint64_t at_ns[MAX_FIRES];            /* vqc_now_ns when fn ran */
} fire_log;

static void on_stuck(const vqc_ledger_record *stuck, void *user) {
  fire_log *log = user;
  uint64_t now = vqc_now_ns();
  pthread_mutex_lock(&log->mu);
  if (log->n < MAX_FIRES) {
    log->rec[log->n] = *stuck;
    log->at_ns[log->n] = now;
  }
  log->n++;
  pthread_mutex_unlock(&log->mu);
}

static int fires(fire_log *log) {
  pthread_mutex_lock(&log->mu);
  int n = log->n;
  pthread_mutex_unlock(&log->mu);
  return n;
}

/* Polls until the log has at least n fires (at most 5 s). */
static bool wait_fires(fire_log *log, int n) {
  for (int i = 0; i < 5000; i++) {
    if (fires(log) >= n) return true;
    sleep_ms(1);
  }
  return false;
}

/* ---- a rank whose peer does not come */

#define WD_TIMEOUT_S 0.2
#define WD_POLL_S 0.02 /* min(timeout / 10, 50 ms) */
/* Scheduling slack on top of timeout + poll: two busy shared cores can
 * delay a thread's wake-up by tens of milliseconds. */
#define SLACK_S 0.25

typedef struct stuck_rank {
  vqc_comm *c;
  int line_reduce, line_barrier;
  vqc_status reduce, barrier;
  float sum;
} stuck_rank;

static void *rank0_body(void *p) {
  stuck_rank *a = p;
  float one = 1.0f;
  a->line_reduce = __LINE__ + 1;
  a->reduce = vqc_all_reduce(a->c, &one, &a->sum, 1, VQC_F32, VQC_SUM);
  a->line_barrier = __LINE__ + 1;
  a->barrier = vqc_barrier(a->c);
  return NULL;
}

static void expect_fire_in_window(const fire_log *log, int i) {
  double delay = (double)(log->at_ns[i] - log->rec[i].t_enter_ns) / 1e9;
  cr_expect(delay >= WD_TIMEOUT_S &&
                delay <= WD_TIMEOUT_S + WD_POLL_S + SLACK_S,
            "fire %d came %.3f s after the record was entered (timeout %.3f "
            "s, poll %.3f s)", i, delay, WD_TIMEOUT_S, WD_POLL_S);
}

Test(watchdog, fires_once_per_stuck_record, .timeout = 30) {
  vqc_threads_world *w = NULL;
  cr_assert_eq(vqc_threads_world_create(2, &w), VQC_OK);
  vqc_comm *c0 = vqc_threads_world_comm(w, 0);
  vqc_comm *c1 = vqc_threads_world_comm(w, 1);
  vqc_comm_set_timeout(c0, 30.0);
  vqc_comm_set_timeout(c1, 30.0);
  fire_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
  vqc_watchdog *wd = NULL;
  cr_assert_eq(vqc_watchdog_start(c0, WD_TIMEOUT_S, on_stuck, &log, &wd),
               VQC_OK, "%s", vqc_last_error());

  stuck_rank a = {.c = c0};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, rank0_body, &a), 0);

  /* Rank 1 (this thread) stays away from the all_reduce: one fire... */
  bool first = wait_fires(&log, 1);
  /* ...and no second one for the same record over ten more polls. */
  sleep_ms((int)(10 * WD_POLL_S * 1000));
  int after_wait = fires(&log);
  float one = 1.0f, sum = 0;
  vqc_status s1 = vqc_all_reduce(c1, &one, &sum, 1, VQC_F32, VQC_SUM);
  /* Rank 0 goes on into the barrier: a new stuck record, a new fire. */
  bool second = wait_fires(&log, 2);
  vqc_status s2 = vqc_barrier(c1);
  pthread_join(t, NULL);

  uint64_t t0 = vqc_now_ns();
  vqc_watchdog_stop(wd);
  double stop_s = (double)(vqc_now_ns() - t0) / 1e9;
  int total = fires(&log);
  vqc_threads_world_destroy(w);

  cr_assert(first, "the watchdog never fired for the stuck all_reduce");
  cr_expect_eq(after_wait, 1, "%d fires for one stuck record", after_wait);
  cr_assert(second, "the watchdog never fired for the stuck barrier");
  cr_expect_eq(total, 2, "%d fires for two stuck records", total);

  const vqc_ledger_record *r = &log.rec[0];
  cr_expect_eq(r->seq, 0);
  cr_expect_eq(r->rank, 0);
  cr_expect_eq(r->op, VQC_COLL_ALL_REDUCE, "op %s", vqc_coll_name(r->op));
  cr_expect_eq(r->dtype, VQC_F32);
  cr_expect_eq(r->count, 1);
  cr_expect_eq(r->state, VQC_REC_ENTERED);
  cr_expect_str_eq(r->site.file, __FILE__);
  cr_expect_eq(r->site.line, a.line_reduce);
  cr_expect_str_eq(r->site.func, "rank0_body");
  expect_fire_in_window(&log, 0);

  r = &log.rec[1];
  cr_expect_eq(r->seq, 1);
  cr_expect_eq(r->op, VQC_COLL_BARRIER, "op %s", vqc_coll_name(r->op));
  cr_expect_eq(r->site.line, a.line_barrier);
  cr_expect_eq(r->state, VQC_REC_ENTERED);
  expect_fire_in_window(&log, 1);

  /* The watchdog only reports: both collectives completed normally. */
  cr_expect_eq(a.reduce, VQC_OK, "%s", vqc_status_name(a.reduce));
  cr_expect_eq(s1, VQC_OK, "%s", vqc_status_name(s1));
  cr_expect_eq(a.barrier, VQC_OK, "%s", vqc_status_name(a.barrier));
  cr_expect_eq(s2, VQC_OK, "%s", vqc_status_name(s2));
  cr_expect_eq(a.sum, 2.0f);
  cr_expect_eq(sum, 2.0f);
  cr_expect_lt(stop_s, 0.5, "stop took %.3f s", stop_s);
}

/* ---- no false fire */

#define NF_RANKS 3
#define NF_ROUNDS 300
#define NF_TIMEOUT_S 0.3

typedef struct nf_arg {
  fire_log log[NF_RANKS];
  vqc_status st[NF_RANKS];
  int fires_in_time[NF_RANKS]; /* fires before the late barrier */
  int wrong[NF_RANKS];
} nf_arg;

static vqc_status nf_rank(vqc_comm *c, void *p) {
  nf_arg *a = p;
  int r = vqc_comm_rank(c), n = vqc_comm_size(c);
  vqc_watchdog *wd = NULL;
  VQC_TRY(vqc_watchdog_start(c, NF_TIMEOUT_S, on_stuck, &a->log[r], &wd));
  vqc_status s = VQC_OK;
  for (int k = 0; k < NF_ROUNDS && s == VQC_OK; k++) {
    /* Every 100th round the last rank comes 100 ms late: a third of the
     * watchdog's timeout, so the others wait but are not stuck. */
    if (k % 100 == 99 && r == n - 1) sleep_ms(100);
    int64_t v = (int64_t)(k + 1) * (r + 1), sum = 0;
    s = vqc_all_reduce(c, &v, &sum, 1, VQC_I64, VQC_SUM);
    if (s == VQC_OK && sum != (int64_t)(k + 1) * n * (n + 1) / 2)
      a->wrong[r]++;
  }
  a->fires_in_time[r] = fires(&a->log[r]);
  /* Now rank 0 comes twice the timeout late: the others must fire once. */
  if (s == VQC_OK) {
    if (r == 0) sleep_ms((int)(2 * NF_TIMEOUT_S * 1000));
    s = vqc_barrier(c);
  }
  vqc_watchdog_stop(wd);
  a->st[r] = s;
  return s;
}

Test(watchdog, no_false_fire, .timeout = 60) {
  static nf_arg a;
  memset(&a, 0, sizeof a);
  for (int r = 0; r < NF_RANKS; r++) pthread_mutex_init(&a.log[r].mu, NULL);
  vqc_status s = vqc_threads_run(NF_RANKS, 30.0, nf_rank, &a, NULL);
  cr_assert_eq(s, VQC_OK, "%s", vqc_last_error());
  for (int r = 0; r < NF_RANKS; r++) {
    cr_expect_eq(a.wrong[r], 0, "rank %d: %d wrong sums", r, a.wrong[r]);
    cr_expect_eq(a.fires_in_time[r], 0,
                 "rank %d: %d fires for collectives that completed in time",
                 r, a.fires_in_time[r]);
    int want = r == 0 ? 0 : 1; /* rank 0 was the late one, never stuck */
    cr_expect_eq(a.log[r].n, want, "rank %d: %d fires, expected %d", r,
                 a.log[r].n, want);
    if (r > 0 && a.log[r].n >= 1)
      cr_expect_eq(a.log[r].rec[0].op, VQC_COLL_BARRIER, "rank %d fired for %s",
                   r, vqc_coll_name(a.log[r].rec[0].op));
  }
}

/* ---- timeout <= 0: the comm's timeout when the watchdog starts */

static void *stuck_all_reduce(void *p) {
  vqc_comm *c = p;
  float one = 1.0f, sum = 0;
  vqc_all_reduce(c, &one, &sum, 1, VQC_F32, VQC_SUM);
  return NULL;
}

Test(watchdog, default_timeout, .timeout = 30) {
  vqc_threads_world *w = NULL;
  cr_assert_eq(vqc_threads_world_create(2, &w), VQC_OK);
  vqc_comm *c0 = vqc_threads_world_comm(w, 0);
  vqc_comm *c1 = vqc_threads_world_comm(w, 1);
  fire_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
  vqc_comm_set_timeout(c0, WD_TIMEOUT_S);
  vqc_watchdog *wd = NULL;
  cr_assert_eq(vqc_watchdog_start(c0, 0, on_stuck, &log, &wd), VQC_OK);
  /* Later changes of the comm's timeout do not move the watchdog's. */
  vqc_comm_set_timeout(c0, 30.0);
  vqc_comm_set_timeout(c1, 30.0);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, stuck_all_reduce, c0), 0);
  bool fired = wait_fires(&log, 1);
  float one = 1.0f, sum = 0;
  vqc_status s = vqc_all_reduce(c1, &one, &sum, 1, VQC_F32, VQC_SUM);
  pthread_join(t, NULL);
  vqc_watchdog_stop(wd);
  vqc_threads_world_destroy(w);
  cr_assert(fired, "no fire with the comm's 0.2 s timeout");
  expect_fire_in_window(&log, 0);
  cr_expect_eq(s, VQC_OK);
}

/* ---- stop */

Test(watchdog, stop_is_prompt) {
  vqc_threads_world *w = NULL;
  cr_assert_eq(vqc_threads_world_create(1, &w), VQC_OK);
  fire_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
  /* 10 s timeout: a 50 ms poll interval. The fastest of five stops must be
   * well under it (a stop that waited out the interval takes >= 50 ms on
   * average; the minimum keeps a busy machine from failing the test). */
  double best = 1e9;
  for (int i = 0; i < 5; i++) {
    vqc_watchdog *wd = NULL;
    cr_assert_eq(vqc_watchdog_start(vqc_threads_world_comm(w, 0), 10.0,
                                    on_stuck, &log, &wd), VQC_OK);
    sleep_ms(5); /* let the thread reach its wait */
    uint64_t t0 = vqc_now_ns();
    vqc_watchdog_stop(wd);
    double dt = (double)(vqc_now_ns() - t0) / 1e9;
    if (dt < best) best = dt;
  }
  vqc_watchdog_stop(NULL); /* accepted */
  vqc_threads_world_destroy(w);
  cr_expect_lt(best, 0.02, "fastest stop took %.3f s", best);
  cr_expect_eq(log.n, 0);
}

Test(watchdog, bad_arguments) {
  vqc_threads_world *w = NULL;
  cr_assert_eq(vqc_threads_world_create(1, &w), VQC_OK);
  vqc_comm *c = vqc_threads_world_comm(w, 0);
  fire_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
  vqc_watchdog *wd = (vqc_watchdog *)&log; /* must be reset to NULL */
  cr_expect_eq(vqc_watchdog_start(NULL, 1.0, on_stuck, &log, &wd), VQC_EINVAL);
  cr_expect_null(wd);
  cr_expect_eq(vqc_watchdog_start(c, 1.0, NULL, &log, &wd), VQC_EINVAL);
  cr_expect_null(wd);
  cr_expect_eq(vqc_watchdog_start(vqc_comm_side(c), 1.0, on_stuck, &log, &wd),
               VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "side channel") != NULL, "message: %s",
            vqc_last_error());
  cr_expect_null(wd);
  cr_expect_eq(vqc_watchdog_start(c, 1.0, on_stuck, &log, NULL), VQC_EINVAL);
  vqc_threads_world_destroy(w);
}
