/* watchdog.c: a thread per watched comm that reports collectives stuck in
 * flight (see vqc/watchdog.h).
 *
 * The thread sleeps on a condition variable with a CLOCK_MONOTONIC timeout
 * (one poll interval), so it costs nothing between polls and
 * vqc_watchdog_stop wakes it at once instead of waiting out the interval.
 * Each poll is one lock-free read of the ledger (vqc_ledger_in_flight): the
 * watched rank never waits for the watchdog. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm_internal.h"
#include "vqc/watchdog.h"

/* The poll interval is min(timeout / 10, 50 ms): fn comes at most 10% (and
 * at most 50 ms) after the deadline, and a rank with a 60 s timeout costs 20
 * wake-ups a second. Never below 1 ms, so a tiny timeout cannot turn the
 * thread into a busy loop. */
#define POLL_MAX_NS 50000000u
#define POLL_MIN_NS 1000000u

struct vqc_watchdog {
  vqc_ledger *ledger;   /* the watched comm's (owned by the comm) */
  uint64_t timeout_ns;
  uint64_t poll_ns;
  vqc_watchdog_fn fn;
  void *user;
  pthread_t thread;
  pthread_mutex_t mu;   /* guards stop; cv waits on it */
  pthread_cond_t cv;    /* CLOCK_MONOTONIC, signalled by stop */
  bool stop;
};

static struct timespec to_timespec(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  return ts;
}

static void *watch(void *p) {
  vqc_watchdog *w = p;
  bool fired = false;      /* whether fn was called for fired_seq */
  uint64_t fired_seq = 0;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    struct timespec until = to_timespec(vqc_now_ns() + w->poll_ns);
    while (!w->stop &&
           pthread_cond_timedwait(&w->cv, &w->mu, &until) != ETIMEDOUT) {
    }
    if (w->stop) break;
    pthread_mutex_unlock(&w->mu); /* fn may take long; stop must not wait */
    vqc_ledger_record r;
    if (vqc_ledger_in_flight(w->ledger, &r) && !(fired && r.seq == fired_seq)
        && vqc_now_ns() - r.t_enter_ns > w->timeout_ns) {
      /* Sequence numbers only grow, so remembering the last one reported
       * is enough to report each stuck record once. */
      fired = true;
      fired_seq = r.seq;
      w->fn(&r, w->user);
    }
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

vqc_status vqc_watchdog_start(vqc_comm *c, double timeout_s,
                              vqc_watchdog_fn fn, void *user,
                              vqc_watchdog **out) {
  if (!out) return vqc_error(VQC_EINVAL, "vqc_watchdog_start: out is NULL");
  *out = NULL;
  if (!c || !fn)
    return vqc_error(VQC_EINVAL, "vqc_watchdog_start: %s is NULL",
                     c ? "fn" : "comm");
  if (!c->ledger)
    return vqc_error(VQC_EINVAL, "vqc_watchdog_start: a side channel has no "
                     "ledger to watch; watch its data comm");
  if (timeout_s <= 0) timeout_s = c->timeout_s;

  vqc_watchdog *w = calloc(1, sizeof *w);
  if (!w) return vqc_error(VQC_ENOMEM, "vqc_watchdog_start: no memory");
  w->ledger = c->ledger;
  w->timeout_ns = (uint64_t)(timeout_s * 1e9);
  w->poll_ns = w->timeout_ns / 10;
  if (w->poll_ns > POLL_MAX_NS) w->poll_ns = POLL_MAX_NS;
  if (w->poll_ns < POLL_MIN_NS) w->poll_ns = POLL_MIN_NS;
  w->fn = fn;
  w->user = user;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* vqc_now_ns's clock */
  pthread_cond_init(&w->cv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_init(&w->mu, NULL);
  int rc = pthread_create(&w->thread, NULL, watch, w);
  if (rc != 0) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return vqc_error(VQC_EINTERNAL, "vqc_watchdog_start: cannot start the "
                     "thread: %s", strerror(rc));
  }
  *out = w;
  return VQC_OK;
}

void vqc_watchdog_stop(vqc_watchdog *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w);
}
