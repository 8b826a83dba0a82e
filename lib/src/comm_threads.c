/* comm_threads.c: the threads backend: N ranks as threads of one process.
 *
 * A world holds two rendezvous "channels": one for the data comms and one for
 * their side channels. They share nothing (own mutex, condvar, slots, abort
 * and broken flags), so a data collective that hangs or times out never
 * blocks the digest exchange on the side channel.
 *
 * One collective on a channel is a round in two phases, both under the
 * channel's mutex and condvar (a CLOCK_MONOTONIC condvar, so deadlines from
 * vqc_comm_deadline_ns can be used directly):
 *
 *   1. arrive: each rank writes its descriptor (op, dtype, count, redop,
 *      root, buffers, counts) into its own slot; the last to arrive bumps
 *      `round` and wakes everyone. Waiting here honours the deadline and the
 *      abort / broken flags.
 *   2. every rank compares the descriptors the same way, so either all of
 *      them see a mismatch (and move no data) or none does; then each rank
 *      builds its OWN result by reading its peers' send buffers (reductions
 *      in rank order 0..N-1, so every rank gets identical bits) and writes
 *      only its own recv buffer.
 *   3. leave: each rank counts itself done reading; the last bumps
 *      `done_round`. Nobody returns (and so lets its send buffer go, or
 *      writes its next descriptor into its slot) before everyone has read.
 *
 * In place (recv overlapping the rank's own send) the result is built in a
 * per-comm scratch buffer and copied into recv after phase 3, because peers
 * read our send buffer until then.
 *
 * A timeout in phase 1 marks the channel broken: no round can complete any
 * more, the other waiters wake and return VQC_EABORTED, and later calls fail
 * at once. Phase 3 does not honour abort: every rank that passed phase 1 is
 * inside this file's copy loop and will arrive, and leaving early would let
 * a peer still read a buffer its owner has freed. It keeps a deadline (a
 * fresh full timeout from the start of phase 3) as a last resort. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_internal.h"
#include "vqc/comm.h"

/* One rank's descriptor of the collective it entered. */
typedef struct slot {
  vqc_coll_op op;
  vqc_dtype dt;
  size_t count;          /* elements: sendcount for all_gatherv */
  vqc_redop redop;       /* all_reduce only */
  int root;              /* broadcast only; -1 otherwise */
  const void *send;
  void *recv;
  const size_t *counts;  /* all_gatherv only (size entries) */
  uint64_t round;        /* the round this slot was posted for */
} slot;

/* One rendezvous domain (the data comms, or the side channels). */
typedef struct channel {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  const char *name;      /* "data" | "side", for messages */
  int size;
  slot *slots;           /* size entries; slot r written only by rank r */
  int arrived;           /* ranks arrived in the current round */
  uint64_t round;        /* rounds whose phase 1 completed */
  int done;              /* ranks done reading in the current round */
  uint64_t done_round;   /* rounds whose phase 3 completed */
  bool aborted;          /* vqc_comm_abort or a failed rank body */
  bool broken;           /* a rank timed out: no round can complete */
  char why[512];         /* what aborted or broke it, for messages */
} channel;

/* Per-comm backend state (c->impl). */
typedef struct rank_impl {
  channel *ch;
  void *scratch;         /* in-place results; grown on demand, owned here */
  size_t scratch_cap;    /* bytes */
} rank_impl;

struct vqc_threads_world {
  int size;
  channel data;
  channel side;
  vqc_comm *comms;       /* size data comms */
  vqc_comm *sides;       /* size side channels (comms[r].side = &sides[r]) */
  rank_impl *impls;      /* 2 * size: data comms first, then side channels */
  int ninit;             /* comms initialised (data and side), for unwinding */
};

/* ---- channels */

static vqc_status channel_init(channel *ch, const char *name, int size) {
  memset(ch, 0, sizeof *ch);
  ch->name = name;
  ch->size = size;
  ch->slots = calloc((size_t)size, sizeof *ch->slots);
  if (!ch->slots) return vqc_error(VQC_ENOMEM, "threads world: no memory");
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  /* Deadlines are CLOCK_MONOTONIC (vqc_now_ns); a wall-clock jump must not
   * stretch or cut a wait. */
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&ch->cv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_init(&ch->mu, NULL);
  return VQC_OK;
}

static void channel_fini(channel *ch) {
  if (!ch->slots) return;
  pthread_mutex_destroy(&ch->mu);
  pthread_cond_destroy(&ch->cv);
  free(ch->slots);
  ch->slots = NULL;
}

/* Sets the aborted flag (first reason wins) and wakes every waiter. */
static void channel_abort(channel *ch, const char *why) {
  pthread_mutex_lock(&ch->mu);
  if (!ch->aborted && !ch->broken)
    snprintf(ch->why, sizeof ch->why, "%s", why);
  ch->aborted = true;
  pthread_cond_broadcast(&ch->cv);
  pthread_mutex_unlock(&ch->mu);
}

/* ---- descriptors */

static void describe(const slot *s, int size, char *buf, size_t n) {
  const char *op = vqc_coll_name(s->op);
  const char *dt = vqc_dtype_name(s->dt);
  switch (s->op) {
    case VQC_COLL_ALL_REDUCE:
      snprintf(buf, n, "%s(%s, count=%zu, op=%s)", op, dt, s->count,
               vqc_redop_name(s->redop));
      break;
    case VQC_COLL_ALL_GATHER:
      snprintf(buf, n, "%s(%s, count=%zu)", op, dt, s->count);
      break;
    case VQC_COLL_ALL_GATHERV: {
      int k = snprintf(buf, n, "%s(%s, sendcount=%zu, counts=[", op, dt,
                       s->count);
      /* At most 8 counts: enough to see the difference, bounded length. */
      for (int r = 0; r < size && r < 8 && k > 0 && (size_t)k < n; r++)
        k += snprintf(buf + k, n - (size_t)k, "%s%zu", r ? "," : "",
                      s->counts[r]);
      if (k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "%s])", size > 8 ? ",..." : "");
      break;
    }
    case VQC_COLL_BROADCAST:
      snprintf(buf, n, "%s(%s, count=%zu, root=%d)", op, dt, s->count,
               s->root);
      break;
    default:
      snprintf(buf, n, "%s()", op);
      break;
  }
}

/* Whether rank r's descriptor b is compatible with rank 0's a. */
static bool compatible(const slot *a, const slot *b, int r, int size) {
  if (a->op != b->op) return false;
  switch (a->op) {
    case VQC_COLL_ALL_REDUCE:
      return a->dt == b->dt && a->count == b->count && a->redop == b->redop;
    case VQC_COLL_ALL_GATHER:
      return a->dt == b->dt && a->count == b->count;
    case VQC_COLL_ALL_GATHERV:
      if (a->dt != b->dt || b->count != b->counts[r]) return false;
      for (int k = 0; k < size; k++)
        if (a->counts[k] != b->counts[k]) return false;
      return true;
    case VQC_COLL_BROADCAST:
      return a->dt == b->dt && a->count == b->count && a->root == b->root;
    default:
      return true;
  }
}

/* ---- waiting */

/* Waits (ch->mu held) until *counter differs from `start`. With
 * honour_abort, an aborted or broken channel ends the wait. Returns VQC_OK,
 * VQC_ETIMEOUT or VQC_EABORTED (no message: the caller knows the context). */
static vqc_status wait_for(channel *ch, const uint64_t *counter,
                           uint64_t start, uint64_t deadline_ns,
                           bool honour_abort) {
  struct timespec ts = {(time_t)(deadline_ns / 1000000000u),
                        (long)(deadline_ns % 1000000000u)};
  while (*counter == start) {
    if (honour_abort && (ch->aborted || ch->broken)) return VQC_EABORTED;
    int rc = pthread_cond_timedwait(&ch->cv, &ch->mu, &ts);
    if (rc == ETIMEDOUT && *counter == start) return VQC_ETIMEOUT;
  }
  return VQC_OK;
}

static vqc_status aborted_error(const vqc_comm *c, const channel *ch,
                                const slot *mine) {
  char d[256];
  describe(mine, ch->size, d, sizeof d);
  return vqc_error(VQC_EABORTED, "rank %d: %s on the %s channel: %s",
                   c->rank, d, ch->name,
                   ch->why[0] ? ch->why : "the channel was aborted");
}

/* Lists the ranks that have not posted for the current round (mu held). */
static void missing_ranks(const channel *ch, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = '\0';
  for (int r = 0; r < ch->size && k + 16 < n; r++) {
    /* A rank that arrived for this round wrote round + 1 into its slot. */
    if (ch->slots[r].round != ch->round + 1) {
      int w = snprintf(buf + k, n - k, "%s%d", k ? "," : "", r);
      if (w > 0) k += (size_t)w;
    }
  }
}

/* ---- data movement (after phase 1; reads peers' send buffers) */

static bool ranges_overlap(const void *a, size_t an, const void *b,
                           size_t bn) {
  const char *pa = a, *pb = b;
  return an > 0 && bn > 0 && pa < pb + bn && pb < pa + an;
}

/* Bytes of this rank's result and whether it overlaps its own send buffer,
 * so the result must go through scratch. */
static size_t result_bytes(const vqc_comm *c, const slot *mine,
                           bool *via_scratch) {
  size_t esz = vqc_dtype_size(mine->dt);
  size_t n = 0;
  switch (mine->op) {
    case VQC_COLL_ALL_REDUCE: n = mine->count * esz; break;
    case VQC_COLL_ALL_GATHER: n = (size_t)c->size * mine->count * esz; break;
    case VQC_COLL_ALL_GATHERV:
      for (int r = 0; r < c->size; r++) n += mine->counts[r] * esz;
      break;
    default: n = 0; break; /* broadcast and barrier need no scratch */
  }
  size_t send_bytes = mine->op == VQC_COLL_ALL_REDUCE ? n : mine->count * esz;
  *via_scratch = ranges_overlap(mine->send, send_bytes, mine->recv, n);
  return n;
}

static void move_data(const vqc_comm *c, const slot *slots, void *dst) {
  const slot *mine = &slots[c->rank];
  size_t esz = vqc_dtype_size(mine->dt);
  char *out = dst;
  switch (mine->op) {
    case VQC_COLL_ALL_REDUCE:
      if (mine->count == 0) break;
      memcpy(out, slots[0].send, mine->count * esz);
      for (int r = 1; r < c->size; r++)
        vqc_reduce_into(out, slots[r].send, mine->count, mine->dt,
                        mine->redop);
      break;
    case VQC_COLL_ALL_GATHER:
      if (mine->count == 0) break;
      for (int r = 0; r < c->size; r++)
        memcpy(out + (size_t)r * mine->count * esz, slots[r].send,
               mine->count * esz);
      break;
    case VQC_COLL_ALL_GATHERV: {
      size_t off = 0;
      for (int r = 0; r < c->size; r++) {
        size_t n = mine->counts[r] * esz;
        if (n > 0) memcpy(out + off, slots[r].send, n);
        off += n;
      }
      break;
    }
    case VQC_COLL_BROADCAST:
      if (c->rank != mine->root && mine->count > 0)
        memcpy(mine->recv, slots[mine->root].send, mine->count * esz);
      break;
    default:
      break;
  }
}

/* ---- one collective */

static vqc_status ensure_scratch(rank_impl *ri, size_t bytes) {
  if (bytes <= ri->scratch_cap) return VQC_OK;
  void *p = realloc(ri->scratch, bytes);
  if (!p) return VQC_ENOMEM;
  ri->scratch = p;
  ri->scratch_cap = bytes;
  return VQC_OK;
}

static vqc_status collective(vqc_comm *c, slot mine) {
  rank_impl *ri = c->impl;
  channel *ch = ri->ch;
  uint64_t t0 = vqc_now_ns();
  uint64_t deadline = vqc_comm_deadline_ns(c);
  char desc[256];

  bool via_scratch = false;
  size_t nbytes = result_bytes(c, &mine, &via_scratch);
  if (via_scratch && ensure_scratch(ri, nbytes) != VQC_OK) {
    /* Break the channel so the peers do not wait out their deadline. */
    describe(&mine, c->size, desc, sizeof desc);
    char why[384];
    snprintf(why, sizeof why, "rank %d could not allocate %zu bytes for %s",
             c->rank, nbytes, desc);
    channel_abort(ch, why);
    return vqc_error(VQC_ENOMEM, "%s", why);
  }

  /* Phase 1: arrive. */
  pthread_mutex_lock(&ch->mu);
  if (ch->aborted || ch->broken) {
    vqc_status s = aborted_error(c, ch, &mine);
    pthread_mutex_unlock(&ch->mu);
    return s;
  }
  uint64_t round = ch->round;
  mine.round = round + 1;
  ch->slots[c->rank] = mine;
  if (++ch->arrived == ch->size) {
    ch->arrived = 0;
    ch->round++;
    pthread_cond_broadcast(&ch->cv);
  } else {
    vqc_status s = wait_for(ch, &ch->round, round, deadline, true);
    if (s == VQC_EABORTED) {
      s = aborted_error(c, ch, &mine);
      pthread_mutex_unlock(&ch->mu);
      return s;
    }
    if (s == VQC_ETIMEOUT) {
      char missing[128];
      missing_ranks(ch, missing, sizeof missing);
      describe(&mine, c->size, desc, sizeof desc);
      int arrived = ch->arrived;
      double waited = (double)(vqc_now_ns() - t0) / 1e9;
      snprintf(ch->why, sizeof ch->why,
               "rank %d timed out after %.3f s in %s (%d of %d ranks arrived; "
               "missing: %s)",
               c->rank, waited, desc, arrived, ch->size, missing);
      ch->broken = true;
      pthread_cond_broadcast(&ch->cv);
      pthread_mutex_unlock(&ch->mu);
      return vqc_error(VQC_ETIMEOUT, "rank %d timed out after %.3f s in %s "
                       "on the %s channel: %d of %d ranks arrived (missing: "
                       "%s)",
                       c->rank, waited, desc, ch->name, arrived, ch->size,
                       missing);
    }
  }
  pthread_mutex_unlock(&ch->mu);

  /* Phase 2: slots are stable until phase 3 completes (each rank rewrites
   * its slot only on its next arrival). Everyone checks against rank 0 in
   * the same order, so everyone finds the same mismatch, or none. */
  const slot *slots = ch->slots;
  int bad = -1;
  for (int r = 1; r < c->size && bad < 0; r++)
    if (!compatible(&slots[0], &slots[r], r, c->size)) bad = r;
  char d0[256], d1[256];
  if (bad >= 0) {
    /* Described now: after phase 3 the peers may rewrite their slots. */
    describe(&slots[0], c->size, d0, sizeof d0);
    describe(&slots[bad], c->size, d1, sizeof d1);
  } else {
    move_data(c, slots, via_scratch ? ri->scratch : mine.recv);
  }

  /* Phase 3: leave once everyone has read. The deadline restarts here: the
   * peers are only copying, and phase 1 may have used up the first one. */
  uint64_t late = vqc_now_ns() + (uint64_t)(c->timeout_s * 1e9);
  pthread_mutex_lock(&ch->mu);
  uint64_t done_round = ch->done_round;
  vqc_status s = VQC_OK;
  if (++ch->done == ch->size) {
    ch->done = 0;
    ch->done_round++;
    pthread_cond_broadcast(&ch->cv);
  } else {
    s = wait_for(ch, &ch->done_round, done_round,
                 late > deadline ? late : deadline, false);
  }
  if (s == VQC_ETIMEOUT) {
    describe(&mine, c->size, desc, sizeof desc);
    snprintf(ch->why, sizeof ch->why,
             "rank %d timed out leaving %s: a peer stalled while copying",
             c->rank, desc);
    ch->broken = true;
    pthread_cond_broadcast(&ch->cv);
  }
  pthread_mutex_unlock(&ch->mu);
  if (s != VQC_OK)
    return vqc_error(s, "rank %d: %s on the %s channel: a peer stalled while "
                     "copying",
                     c->rank, desc, ch->name);

  if (bad >= 0)
    return vqc_error(VQC_EMISMATCH,
                     "rank %d: ranks called different collectives on the %s "
                     "channel: rank 0 called %s but rank %d called %s",
                     c->rank, ch->name, d0, bad, d1);
  if (via_scratch) memcpy(mine.recv, ri->scratch, nbytes);
  return VQC_OK;
}

/* ---- the ops table */

static vqc_status threads_all_reduce(vqc_comm *c, const void *send,
                                     void *recv, size_t count, vqc_dtype dt,
                                     vqc_redop op) {
  slot s = {.op = VQC_COLL_ALL_REDUCE, .dt = dt, .count = count, .redop = op,
            .root = -1, .send = send, .recv = recv};
  return collective(c, s);
}

static vqc_status threads_all_gather(vqc_comm *c, const void *send,
                                     void *recv, size_t count, vqc_dtype dt) {
  slot s = {.op = VQC_COLL_ALL_GATHER, .dt = dt, .count = count, .root = -1,
            .send = send, .recv = recv};
  return collective(c, s);
}

static vqc_status threads_all_gatherv(vqc_comm *c, const void *send,
                                      size_t sendcount, void *recv,
                                      const size_t *counts, vqc_dtype dt) {
  slot s = {.op = VQC_COLL_ALL_GATHERV, .dt = dt, .count = sendcount,
            .root = -1, .send = send, .recv = recv, .counts = counts};
  return collective(c, s);
}

static vqc_status threads_broadcast(vqc_comm *c, void *buf, size_t count,
                                    vqc_dtype dt, int root) {
  slot s = {.op = VQC_COLL_BROADCAST, .dt = dt, .count = count, .root = root,
            .send = buf, .recv = buf};
  return collective(c, s);
}

static vqc_status threads_barrier(vqc_comm *c) {
  slot s = {.op = VQC_COLL_BARRIER, .dt = VQC_U8, .root = -1};
  return collective(c, s);
}

/* Aborts this comm's channel only (the side channel is its own comm and
 * stays usable for checkers' reports). */
static void threads_abort(vqc_comm *c) {
  rank_impl *ri = c->impl;
  char why[128];
  snprintf(why, sizeof why, "aborted by vqc_comm_abort on rank %d", c->rank);
  channel_abort(ri->ch, why);
}

static const vqc_comm_ops threads_ops = {
    .all_reduce = threads_all_reduce,
    .all_gather = threads_all_gather,
    .all_gatherv = threads_all_gatherv,
    .broadcast = threads_broadcast,
    .barrier = threads_barrier,
    .abort = threads_abort,
};

/* ---- worlds */

vqc_status vqc_threads_world_create(int size, vqc_threads_world **out) {
  if (!out) return vqc_error(VQC_EINVAL, "threads world: out is NULL");
  *out = NULL;
  if (size < 1)
    return vqc_error(VQC_EINVAL, "threads world: size %d must be >= 1", size);
  vqc_status s = VQC_ENOMEM;
  vqc_threads_world *w = calloc(1, sizeof *w);
  if (!w) return vqc_error(VQC_ENOMEM, "threads world: no memory");
  w->size = size;
  w->comms = calloc((size_t)size, sizeof *w->comms);
  w->sides = calloc((size_t)size, sizeof *w->sides);
  w->impls = calloc(2 * (size_t)size, sizeof *w->impls);
  if (!w->comms || !w->sides || !w->impls) {
    s = vqc_error(VQC_ENOMEM, "threads world: no memory for %d ranks", size);
    goto fail;
  }
  if ((s = channel_init(&w->data, "data", size)) != VQC_OK) goto fail;
  if ((s = channel_init(&w->side, "side", size)) != VQC_OK) goto fail;
  for (int r = 0; r < size; r++) {
    rank_impl *di = &w->impls[r], *si = &w->impls[size + r];
    di->ch = &w->data;
    si->ch = &w->side;
    s = vqc_comm_init_common(&w->comms[r], &threads_ops, VQC_BACKEND_THREADS,
                             r, size, di, false);
    if (s != VQC_OK) goto fail;
    w->ninit++;
    s = vqc_comm_init_common(&w->sides[r], &threads_ops, VQC_BACKEND_THREADS,
                             r, size, si, true);
    if (s != VQC_OK) goto fail;
    w->comms[r].side = &w->sides[r];
  }
  *out = w;
  return VQC_OK;
fail:
  vqc_threads_world_destroy(w);
  return s;
}

vqc_comm *vqc_threads_world_comm(vqc_threads_world *w, int rank) {
  if (!w || rank < 0 || rank >= w->size) return NULL;
  return &w->comms[rank];
}

void vqc_threads_world_destroy(vqc_threads_world *w) {
  if (!w) return;
  for (int r = 0; r < w->ninit; r++) {
    vqc_comm_fini_common(&w->comms[r]);
    vqc_comm_fini_common(&w->sides[r]);
  }
  if (w->impls)
    for (int i = 0; i < 2 * w->size; i++) free(w->impls[i].scratch);
  channel_fini(&w->data);
  channel_fini(&w->side);
  free(w->impls);
  free(w->sides);
  free(w->comms);
  free(w);
}

/* ---- vqc_threads_run */

typedef struct run_shared {
  pthread_mutex_t mu;
  int first_failed;      /* the rank that failed first in time; -1 if none */
  int first_cause;       /* the first whose status is not VQC_EABORTED */
  vqc_threads_world *w;
  vqc_rank_fn fn;
  void *arg;
} run_shared;

typedef struct run_rank {
  run_shared *sh;
  int rank;
  vqc_status status;
  char msg[1024];        /* the rank thread's vqc_last_error on failure */
} run_rank;

static void *run_rank_main(void *p) {
  run_rank *rr = p;
  run_shared *sh = rr->sh;
  rr->status = sh->fn(&sh->w->comms[rr->rank], sh->arg);
  if (rr->status == VQC_OK) return NULL;
  /* The message is thread-local: keep a copy for the caller's thread. */
  snprintf(rr->msg, sizeof rr->msg, "%s", vqc_last_error());
  pthread_mutex_lock(&sh->mu);
  if (sh->first_failed < 0) sh->first_failed = rr->rank;
  if (sh->first_cause < 0 && rr->status != VQC_EABORTED)
    sh->first_cause = rr->rank;
  pthread_mutex_unlock(&sh->mu);
  /* Both channels: a peer may be waiting in either for this rank. */
  char why[128];
  snprintf(why, sizeof why, "rank %d's body returned %s", rr->rank,
           vqc_status_name(rr->status));
  channel_abort(&sh->w->data, why);
  channel_abort(&sh->w->side, why);
  return NULL;
}

vqc_status vqc_threads_run(int size, double timeout, vqc_rank_fn fn, void *arg,
                           vqc_status *statuses) {
  if (!fn) return vqc_error(VQC_EINVAL, "vqc_threads_run: fn is NULL");
  if (size < 1)
    return vqc_error(VQC_EINVAL, "vqc_threads_run: size %d must be >= 1",
                     size);
  vqc_threads_world *w = NULL;
  VQC_TRY(vqc_threads_world_create(size, &w));
  for (int r = 0; r < size; r++) vqc_comm_set_timeout(&w->comms[r], timeout);

  run_shared sh = {
      .first_failed = -1, .first_cause = -1, .w = w, .fn = fn, .arg = arg};
  pthread_mutex_init(&sh.mu, NULL);
  run_rank *ranks = calloc((size_t)size, sizeof *ranks);
  pthread_t *tids = calloc((size_t)size, sizeof *tids);
  if (!ranks || !tids) {
    free(ranks);
    free(tids);
    pthread_mutex_destroy(&sh.mu);
    vqc_threads_world_destroy(w);
    return vqc_error(VQC_ENOMEM, "vqc_threads_run: no memory for %d ranks",
                     size);
  }

  vqc_status result = VQC_OK;
  int started = 0;
  for (; started < size; started++) {
    ranks[started] = (run_rank){.sh = &sh, .rank = started};
    int rc = pthread_create(&tids[started], NULL, run_rank_main,
                            &ranks[started]);
    if (rc != 0) {
      result = vqc_error(VQC_EINTERNAL,
                         "vqc_threads_run: cannot start rank %d: %s", started,
                         strerror(rc));
      channel_abort(&w->data, "a rank thread could not be started");
      channel_abort(&w->side, "a rank thread could not be started");
      break;
    }
  }
  for (int r = 0; r < started; r++) pthread_join(tids[r], NULL);
  for (int r = started; r < size; r++) ranks[r].status = result;

  /* Report the cause, not a victim: a peer that timed out breaks the
   * channel and wakes the others with VQC_EABORTED, and they may return
   * before it does. */
  int report = sh.first_cause >= 0 ? sh.first_cause : sh.first_failed;
  if (result == VQC_OK && report >= 0) {
    const run_rank *f = &ranks[report];
    result = vqc_error(f->status, "rank %d: %s", f->rank,
                       f->msg[0] ? f->msg : "(no message)");
  }
  if (statuses)
    for (int r = 0; r < size; r++) statuses[r] = ranks[r].status;

  free(ranks);
  free(tids);
  pthread_mutex_destroy(&sh.mu);
  vqc_threads_world_destroy(w);
  return result;
}
