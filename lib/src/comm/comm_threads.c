/* comm_threads.c: the threads backend: N ranks as threads of one process.
 *
 * A world holds two rendezvous "channels": one for the data comms and one for
 * their side channels. They share nothing (own mutex, wait word, slots,
 * abort and broken flags, shared result), so a data collective that hangs or
 * times out never blocks the digest exchange on the side channel.
 *
 * One collective on a channel is a round in four phases:
 *
 *   1. arrive (under the channel's mutex): each rank writes its descriptor
 *      (op, dtype, count, redop, root, buffers, counts) into its own slot.
 *      The last to arrive judges the round once for everyone: it compares
 *      every descriptor with rank 0's (the verdict: the first rank that
 *      differs, or none) and, for an all_reduce, sizes the channel's shared
 *      result buffer; then it bumps `round` and wakes everyone. Waiting here
 *      honours the deadline and the abort / broken flags.
 *   2. move (no lock): with a mismatch verdict nobody moves data. Otherwise
 *      an all_reduce is reduced ONCE, in parallel: rank k reduces its slice
 *      of the elements (see slice_of) over every rank's send buffer, in rank
 *      order 0, 1, ..., N-1, into the shared result. Each element is still
 *      send_0[i] op send_1[i] op ... op send_{N-1}[i], evaluated left to
 *      right, so the bits are the same as when every rank reduced
 *      everything itself (which cost N times the work: O(N^2 n) in total,
 *      3 s per 16 KiB all_reduce at 1024 ranks); now the total is O(N n).
 *      all_gather(v) and broadcast copy from the peers' send buffers into
 *      the rank's own result (all_gather's output is N blocks per rank:
 *      O(N^2 n) in total is its size, not a choice).
 *   3. leave: each rank counts itself done reading; the last bumps
 *      `done_round` and wakes everyone. Nobody returns (and so lets its send
 *      buffer go, or writes its next descriptor into its slot) before
 *      everyone has read.
 *   4. copy (no lock): an all_reduce copies the shared result into its recv
 *      buffer. The result stays valid until everyone has copied: the next
 *      round's judge, who may grow it, is the last rank to arrive in that
 *      round, and every rank arrives only after its copy. For the same
 *      reason the verdict stays readable until then.
 *
 * In place: an all_reduce needs nothing more (recv is written in phase 4,
 * when no peer reads send any more). An all_gather(v) whose recv overlaps
 * the rank's own send builds its result in a per-comm scratch buffer and
 * copies it into recv after phase 3.
 *
 * Waiting. 1024 ranks on 2 cores: a condvar broadcast wakes every waiter,
 * and each must then take the mutex back one after the other, a convoy of
 * context switches per round (28 ms per barrier at 1024 ranks). Here the
 * waiters sleep on a futex "event count" (`events`, bumped after every
 * change a waiter may be waiting for: a round completed, a round left, an
 * abort) and re-check their condition without any lock, so the woken ranks
 * run in parallel. Off Linux (or with VQC_THREADS_CONDVAR_WAIT) the same
 * event count is waited on with a condvar.
 *
 * A timeout in phase 1 marks the channel broken: no round can complete any
 * more, the other waiters wake and return VQC_EABORTED, and later calls fail
 * at once. Phase 3 does not honour abort: every rank that passed phase 1 is
 * inside this file's copy loop and will arrive, and leaving early would let
 * a peer still read a buffer its owner has freed. It keeps a deadline (a
 * fresh full timeout from the start of phase 3) as a last resort.
 *
 * Rank threads get an explicit stack of VQC_THREADS_RANK_STACK bytes (see
 * there: what a rank measured, and the margin), so 1024 ranks reserve
 * 256 MiB of address space instead of 8 GiB. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__linux__) && !defined(VQC_THREADS_CONDVAR_WAIT)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define USE_FUTEX 1
#else
#define USE_FUTEX 0
#endif

#include "comm/comm_internal.h"
#include "vqc/comm.h"

/* The stack of each rank thread. Measured high-water mark of a rank,
 * glibc's thread descriptor and static TLS included (they are carved from
 * the same allocation; ~21 KiB of it for a thread that does nothing): 36-43
 * KiB for every scenario in scenarios/ and tests/data/scenarios/ (vq, rvq,
 * fsq, clip, autoencoder; the deadlock analysis on rank 0, the strict-mode
 * mismatch report, the divergence, equivalence and dead-code paths),
 * surveyed with a stack-painting LD_PRELOAD shim and kept checked by
 * tests/unit/test_threads_scale.c (rank_stacks_keep_a_4x_margin, which
 * paints the rank threads' stacks and fails past a quarter of this).
 * 256 KiB is 6x the measure: room for a sanitizer build's redzones (2-3x)
 * and for library code we do not control (CUDA runtime calls from a rank
 * thread on --device cuda). Address space, not memory: only the touched
 * pages become resident. harness/run/run_memory.c counts the same figure
 * (VQC_RUN_RANK_STACK; the same test checks the two agree). */
#define VQC_THREADS_RANK_STACK ((size_t)256 * 1024)

/* An all_reduce slice is a multiple of this many elements (64 to 512
 * bytes), so neighbouring ranks rarely write the same cache line. */
#define SLICE_ALIGN 64

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

/* The judge's findings about one round (written by the last rank to arrive,
 * read by every rank until it has copied its result). */
typedef struct verdict {
  int bad;               /* first rank whose descriptor differs from rank
                            0's; -1 when they all match */
  bool nomem;            /* the shared result could not be grown */
  size_t nomem_bytes;
  char d0[256], d1[256]; /* rank 0's and rank `bad`'s descriptors */
} verdict;

/* One rendezvous domain (the data comms, or the side channels). */
typedef struct channel {
  pthread_mutex_t mu;    /* arrivals, timeouts, aborts, why */
  const char *name;      /* "data" | "side", for messages */
  int size;
  slot *slots;           /* size entries; slot r written only by rank r */
  int arrived;           /* ranks arrived in the current round (mu) */
  _Atomic uint64_t round;      /* rounds whose phase 1 completed */
  _Atomic int done;            /* ranks done reading in the current round */
  _Atomic uint64_t done_round; /* rounds whose phase 3 completed */
  _Atomic bool aborted;  /* vqc_comm_abort or a failed rank body */
  _Atomic bool broken;   /* a rank timed out: no round can complete */
  _Atomic uint32_t events; /* the event count waiters sleep on */
#if !USE_FUTEX
  pthread_mutex_t wmu;   /* guards the condvar wait on events */
  pthread_cond_t wcv;
#endif
  char why[512];         /* what aborted or broke it, for messages (mu) */
  verdict v;             /* the current round's (see verdict) */
  void *result;          /* all_reduce's shared result, owned here */
  size_t result_cap;     /* bytes */
} channel;

/* Per-comm backend state (c->impl). */
typedef struct rank_impl {
  channel *ch;
  void *scratch;         /* in-place all_gather(v) results; owned here */
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

/* ---- the event count */

/* Wakes every waiter of ch: call after changing what they wait for. */
static void notify(channel *ch) {
#if USE_FUTEX
  atomic_fetch_add(&ch->events, 1);
  syscall(SYS_futex, (uint32_t *)&ch->events,
          FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
#else
  pthread_mutex_lock(&ch->wmu);
  atomic_fetch_add(&ch->events, 1);
  pthread_cond_broadcast(&ch->wcv);
  pthread_mutex_unlock(&ch->wmu);
#endif
}

/* Sleeps until ch->events differs from `seen` (a notify since the caller
 * read it), the deadline passes or a spurious wakeup; the caller re-checks
 * its own condition. */
static void sleep_on(channel *ch, uint32_t seen, uint64_t deadline_ns) {
  struct timespec ts = {(time_t)(deadline_ns / 1000000000u),
                        (long)(deadline_ns % 1000000000u)};
#if USE_FUTEX
  /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time (the clock of
   * vqc_now_ns): a wall-clock jump neither stretches nor cuts a wait. */
  syscall(SYS_futex, (uint32_t *)&ch->events,
          FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, seen, &ts, NULL,
          FUTEX_BITSET_MATCH_ANY);
#else
  pthread_mutex_lock(&ch->wmu);
  if (atomic_load(&ch->events) == seen)
    pthread_cond_timedwait(&ch->wcv, &ch->wmu, &ts);
  pthread_mutex_unlock(&ch->wmu);
#endif
}

/* Waits (no lock held) until *counter differs from `start`. With
 * honour_abort, an aborted or broken channel ends the wait. Returns VQC_OK,
 * VQC_ETIMEOUT or VQC_EABORTED (no message: the caller knows the context).
 * A timeout is only a hint: the caller re-checks under the mutex. */
static vqc_status wait_for(channel *ch, const _Atomic uint64_t *counter,
                           uint64_t start, uint64_t deadline_ns,
                           bool honour_abort) {
  for (;;) {
    /* Read the event count first: a notify after this read makes the
     * sleep below return at once, so no wakeup is lost. */
    const uint32_t seen = atomic_load(&ch->events);
    if (atomic_load(counter) != start) return VQC_OK;
    if (honour_abort && (atomic_load(&ch->aborted) || atomic_load(&ch->broken)))
      return VQC_EABORTED;
    if (vqc_now_ns() >= deadline_ns) return VQC_ETIMEOUT;
    sleep_on(ch, seen, deadline_ns);
  }
}

/* ---- channels */

static vqc_status channel_init(channel *ch, const char *name, int size) {
  memset(ch, 0, sizeof *ch);
  ch->name = name;
  ch->size = size;
  ch->slots = calloc((size_t)size, sizeof *ch->slots);
  if (!ch->slots) return vqc_error(VQC_ENOMEM, "threads world: no memory");
  atomic_init(&ch->round, 0);
  atomic_init(&ch->done, 0);
  atomic_init(&ch->done_round, 0);
  atomic_init(&ch->aborted, false);
  atomic_init(&ch->broken, false);
  atomic_init(&ch->events, 0);
  pthread_mutex_init(&ch->mu, NULL);
#if !USE_FUTEX
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  /* Deadlines are CLOCK_MONOTONIC (vqc_now_ns). */
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&ch->wcv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_init(&ch->wmu, NULL);
#endif
  return VQC_OK;
}

static void channel_fini(channel *ch) {
  if (!ch->slots) return;
  pthread_mutex_destroy(&ch->mu);
#if !USE_FUTEX
  pthread_mutex_destroy(&ch->wmu);
  pthread_cond_destroy(&ch->wcv);
#endif
  free(ch->slots);
  free(ch->result);
  ch->slots = NULL;
  ch->result = NULL;
}

/* Sets the aborted flag (first reason wins) and wakes every waiter. */
static void channel_abort(channel *ch, const char *why) {
  pthread_mutex_lock(&ch->mu);
  if (!atomic_load(&ch->aborted) && !atomic_load(&ch->broken))
    snprintf(ch->why, sizeof ch->why, "%s", why);
  atomic_store(&ch->aborted, true);
  pthread_mutex_unlock(&ch->mu);
  notify(ch);
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

/* The last rank to arrive (mu held, every slot posted): the round's verdict
 * and, for an all_reduce, a shared result large enough. O(size) compares
 * (O(size^2) for all_gatherv's count lists), once per round instead of
 * once per rank. */
static void judge(channel *ch) {
  verdict *v = &ch->v;
  const slot *s0 = &ch->slots[0];
  v->bad = -1;
  v->nomem = false;
  for (int r = 1; r < ch->size && v->bad < 0; r++)
    if (!compatible(s0, &ch->slots[r], r, ch->size)) v->bad = r;
  if (v->bad >= 0) {
    /* Described now, for every rank: the slots change next round. */
    describe(s0, ch->size, v->d0, sizeof v->d0);
    describe(&ch->slots[v->bad], ch->size, v->d1, sizeof v->d1);
    return;
  }
  if (s0->op != VQC_COLL_ALL_REDUCE) return;
  const size_t bytes = s0->count * vqc_dtype_size(s0->dt);
  if (bytes <= ch->result_cap) return;
  void *p = realloc(ch->result, bytes);
  if (!p) {
    v->nomem = true;
    v->nomem_bytes = bytes;
    return;
  }
  ch->result = p;
  ch->result_cap = bytes;
}

static vqc_status aborted_error(const vqc_comm *c, const channel *ch,
                                const slot *mine) {
  char d[256];
  describe(mine, ch->size, d, sizeof d);
  return vqc_error(VQC_EABORTED, "rank %d: %s on the %s channel: %s",
                   c->rank, d, ch->name,
                   ch->why[0] ? ch->why : "the channel was aborted");
}

/* Ascending ranks v[0..n) as folded ranges into buf: "3-517, 900",
 * "1-1023 (step 2)", ending ", ... (N ranks)" when cut. The rules of the
 * checkers' vqc_rank_ranges_text (checkers/findings.h), which lib/ cannot
 * call: a timeout at 1024 ranks must still name its missing ranks in a
 * line. */
static void fold_ranks(const int *v, int n, char *buf, size_t cap) {
  char tail[48];
  snprintf(tail, sizeof tail, ", ... (%d ranks)", n);
  const size_t reserve = strlen(tail) + 1;
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n;) {
    int j = i;
    const long stride = i + 1 < n ? (long)v[i + 1] - v[i] : 0;
    while (j + 1 < n && (long)v[j + 1] - v[j] == stride) j++;
    char piece[48];
    const char *sep = i ? ", " : "";
    if (stride == 1 && j - i >= 2) {
      snprintf(piece, sizeof piece, "%s%d-%d", sep, v[i], v[j]);
      i = j + 1;
    } else if (stride > 1 && j - i >= 3) {
      snprintf(piece, sizeof piece, "%s%d-%d (step %ld)", sep, v[i], v[j],
               stride);
      i = j + 1;
    } else {
      snprintf(piece, sizeof piece, "%s%d", sep, v[i]);
      i++;
    }
    const size_t len = strlen(piece);
    if (used + len + (i < n ? reserve : 1) > cap) {
      const char *t = used ? tail : tail + 2;
      if (used + strlen(t) + 1 <= cap)
        snprintf(buf + used, cap - used, "%s", t);
      return;
    }
    memcpy(buf + used, piece, len + 1);
    used += len;
  }
}

/* The ranks that have not posted for the current round (mu held), folded
 * into ranges; *nmissing gets how many. */
static void missing_ranks(const channel *ch, char *buf, size_t n,
                          int *nmissing) {
  const uint64_t want = atomic_load(&ch->round) + 1;
  int *v = malloc((size_t)ch->size * sizeof *v);
  int count = 0;
  buf[0] = '\0';
  for (int r = 0; r < ch->size; r++) {
    /* A rank that arrived for this round wrote round + 1 into its slot. */
    if (ch->slots[r].round == want) continue;
    if (v) v[count] = r;
    count++;
  }
  if (v) fold_ranks(v, count, buf, n);
  else snprintf(buf, n, "(no memory to list them)");
  free(v);
  *nmissing = count;
}

/* ---- data movement (phase 2; reads peers' send buffers) */

static bool ranges_overlap(const void *a, size_t an, const void *b,
                           size_t bn) {
  const char *pa = a, *pb = b;
  return an > 0 && bn > 0 && pa < pb + bn && pb < pa + an;
}

/* Bytes of this rank's all_gather(v) result and whether it overlaps its own
 * send buffer, so the result must go through scratch. 0 for the others
 * (all_reduce goes through the shared result, broadcast copies once). */
static size_t gather_bytes(const vqc_comm *c, const slot *mine,
                           bool *via_scratch) {
  size_t esz = vqc_dtype_size(mine->dt);
  size_t n = 0;
  *via_scratch = false;
  switch (mine->op) {
    case VQC_COLL_ALL_GATHER: n = (size_t)c->size * mine->count * esz; break;
    case VQC_COLL_ALL_GATHERV:
      for (int r = 0; r < c->size; r++) n += mine->counts[r] * esz;
      break;
    default: return 0;
  }
  *via_scratch = ranges_overlap(mine->send, mine->count * esz, mine->recv, n);
  return n;
}

/* Rank k's slice of an n-element all_reduce: [*lo, *hi). Slices are
 * SLICE_ALIGN-element multiples, so with few elements the low ranks do all
 * of it (n = 1: rank 0 reduces it over every rank) and the others none. */
static void slice_of(size_t n, int k, int size, size_t *lo, size_t *hi) {
  size_t chunk = (n + (size_t)size - 1) / (size_t)size;
  chunk = (chunk + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
  const size_t a = (size_t)k * chunk;
  *lo = a < n ? a : n;
  *hi = a + chunk < n ? a + chunk : n;
}

static void move_data(const vqc_comm *c, const channel *ch, void *dst) {
  const slot *slots = ch->slots;
  const slot *mine = &slots[c->rank];
  size_t esz = vqc_dtype_size(mine->dt);
  char *out = dst;
  switch (mine->op) {
    case VQC_COLL_ALL_REDUCE: {
      size_t lo, hi;
      slice_of(mine->count, c->rank, c->size, &lo, &hi);
      if (lo == hi) break;
      /* Element i: send_0[i] op send_1[i] op ... in rank order, exactly as
       * when each rank reduced every element itself. */
      char *res = (char *)ch->result + lo * esz;
      memcpy(res, (const char *)slots[0].send + lo * esz, (hi - lo) * esz);
      for (int r = 1; r < c->size; r++)
        vqc_reduce_into(res, (const char *)slots[r].send + lo * esz, hi - lo,
                        mine->dt, mine->redop);
      break;
    }
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
  size_t nbytes = gather_bytes(c, &mine, &via_scratch);
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
  if (atomic_load(&ch->aborted) || atomic_load(&ch->broken)) {
    vqc_status s = aborted_error(c, ch, &mine);
    pthread_mutex_unlock(&ch->mu);
    return s;
  }
  const uint64_t round = atomic_load(&ch->round);
  mine.round = round + 1;
  ch->slots[c->rank] = mine;
  if (++ch->arrived == ch->size) {
    ch->arrived = 0;
    judge(ch);
    atomic_store(&ch->round, round + 1);
    pthread_mutex_unlock(&ch->mu);
    notify(ch);
  } else {
    pthread_mutex_unlock(&ch->mu);
    vqc_status s = wait_for(ch, &ch->round, round, deadline, true);
    if (s != VQC_OK) {
      pthread_mutex_lock(&ch->mu);
      if (atomic_load(&ch->round) != round) {
        s = VQC_OK; /* the round completed as the deadline passed */
      } else if (atomic_load(&ch->aborted) || atomic_load(&ch->broken)) {
        s = aborted_error(c, ch, &mine);
      } else {
        char missing[160];
        int nmissing = 0;
        missing_ranks(ch, missing, sizeof missing, &nmissing);
        describe(&mine, c->size, desc, sizeof desc);
        int arrived = ch->arrived;
        double waited = (double)(vqc_now_ns() - t0) / 1e9;
        snprintf(ch->why, sizeof ch->why,
                 "rank %d timed out after %.3f s in %s (%d of %d ranks "
                 "arrived; %d missing: %s)",
                 c->rank, waited, desc, arrived, ch->size, nmissing, missing);
        atomic_store(&ch->broken, true);
        s = vqc_error(VQC_ETIMEOUT, "rank %d timed out after %.3f s in %s "
                      "on the %s channel: %d of %d ranks arrived (%d "
                      "missing: %s)",
                      c->rank, waited, desc, ch->name, arrived, ch->size,
                      nmissing, missing);
        pthread_mutex_unlock(&ch->mu);
        notify(ch);
        return s;
      }
      pthread_mutex_unlock(&ch->mu);
      if (s != VQC_OK) return s;
    }
  }

  /* Phase 2: slots and the verdict are stable until this rank arrives in
   * the next round (see the top of the file). */
  const verdict *v = &ch->v;
  const bool move = v->bad < 0 && !v->nomem;
  if (move) move_data(c, ch, via_scratch ? ri->scratch : mine.recv);

  /* Phase 3: leave once everyone has read. The deadline restarts here: the
   * peers are only copying, and phase 1 may have used up the first one.
   * done_round is read before counting ourselves: it cannot move until we
   * have. */
  uint64_t late = vqc_now_ns() + (uint64_t)(c->timeout_s * 1e9);
  const uint64_t done_round = atomic_load(&ch->done_round);
  vqc_status s = VQC_OK;
  if (atomic_fetch_add(&ch->done, 1) + 1 == ch->size) {
    atomic_store(&ch->done, 0);
    atomic_store(&ch->done_round, done_round + 1);
    notify(ch);
  } else {
    s = wait_for(ch, &ch->done_round, done_round,
                 late > deadline ? late : deadline, false);
    if (s == VQC_ETIMEOUT) {
      pthread_mutex_lock(&ch->mu);
      if (atomic_load(&ch->done_round) != done_round) {
        s = VQC_OK;
      } else {
        describe(&mine, c->size, desc, sizeof desc);
        snprintf(ch->why, sizeof ch->why,
                 "rank %d timed out leaving %s: a peer stalled while copying",
                 c->rank, desc);
        atomic_store(&ch->broken, true);
      }
      pthread_mutex_unlock(&ch->mu);
      if (s != VQC_OK) notify(ch);
    }
  }
  if (s != VQC_OK) {
    describe(&mine, c->size, desc, sizeof desc);
    return vqc_error(s, "rank %d: %s on the %s channel: a peer stalled while "
                     "copying",
                     c->rank, desc, ch->name);
  }

  /* Phase 4: our own result. */
  if (v->bad >= 0)
    return vqc_error(VQC_EMISMATCH,
                     "rank %d: ranks called different collectives on the %s "
                     "channel: rank 0 called %s but rank %d called %s",
                     c->rank, ch->name, v->d0, v->bad, v->d1);
  if (v->nomem) {
    describe(&mine, c->size, desc, sizeof desc);
    return vqc_error(VQC_ENOMEM, "rank %d: %s on the %s channel: no memory "
                     "for its %zu-byte result",
                     c->rank, desc, ch->name, v->nomem_bytes);
  }
  if (mine.op == VQC_COLL_ALL_REDUCE && mine.count > 0)
    memcpy(mine.recv, ch->result, mine.count * vqc_dtype_size(mine.dt));
  else if (via_scratch)
    memcpy(mine.recv, ri->scratch, nbytes);
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

/* The error for a rank thread pthread_create refused (rc), naming the
 * limits a user can change. */
static vqc_status start_error(int rank, int size, int rc) {
  if (rc == EAGAIN || rc == ENOMEM)
    return vqc_error(VQC_ENOMEM, "could not start rank thread %d of %d: %s "
                     "(each rank is a thread with a %zu KiB stack: the "
                     "user's or the system's thread limit, or memory, ran "
                     "out; see ulimit -u, ulimit -v, "
                     "/proc/sys/kernel/threads-max and a container's "
                     "pids.max): lower --ranks or raise ulimit -u",
                     rank, size, strerror(rc), VQC_THREADS_RANK_STACK / 1024);
  return vqc_error(VQC_EINTERNAL, "could not start rank thread %d of %d: %s",
                   rank, size, strerror(rc));
}

vqc_status vqc_threads_run(int size, double timeout, vqc_rank_fn fn, void *arg,
                           vqc_status *statuses) {
  if (!fn) return vqc_error(VQC_EINVAL, "vqc_threads_run: fn is NULL");
  if (size < 1)
    return vqc_error(VQC_EINVAL, "vqc_threads_run: size %d must be >= 1",
                     size);
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc == 0) rc = pthread_attr_setstacksize(&attr, VQC_THREADS_RANK_STACK);
  if (rc != 0)
    return vqc_error(VQC_EINTERNAL, "vqc_threads_run: cannot set a %zu-byte "
                     "thread stack: %s", VQC_THREADS_RANK_STACK, strerror(rc));
  vqc_threads_world *w = NULL;
  vqc_status ws = vqc_threads_world_create(size, &w);
  if (ws != VQC_OK) {
    pthread_attr_destroy(&attr);
    return ws;
  }
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
    pthread_attr_destroy(&attr);
    vqc_threads_world_destroy(w);
    return vqc_error(VQC_ENOMEM, "vqc_threads_run: no memory for %d ranks",
                     size);
  }

  vqc_status result = VQC_OK;
  int started = 0;
  for (; started < size; started++) {
    ranks[started] = (run_rank){.sh = &sh, .rank = started};
    rc = pthread_create(&tids[started], &attr, run_rank_main,
                        &ranks[started]);
    if (rc != 0) {
      result = start_error(started, size, rc);
      /* The ranks already running wait for this one in their first
       * collective: stop them now rather than at their deadline. */
      char why[128];
      snprintf(why, sizeof why, "rank thread %d of %d could not be started",
               started, size);
      channel_abort(&w->data, why);
      channel_abort(&w->side, why);
      break;
    }
  }
  pthread_attr_destroy(&attr);
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
  /* Otherwise a start failure is the cause, and vqc_last_error (this
   * thread's) still holds start_error's text. */
  if (statuses)
    for (int r = 0; r < size; r++) statuses[r] = ranks[r].status;

  free(ranks);
  free(tids);
  pthread_mutex_destroy(&sh.mu);
  vqc_threads_world_destroy(w);
  return result;
}
