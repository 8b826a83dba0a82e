/* comm_internal.h: what every comm backend shares (not a public header).
 *
 * comm.c owns the public entry points: it validates arguments, writes the
 * ledger record, raises events, then calls the backend through the ops table.
 * A backend only moves data and honours the deadline: it must return within
 * about c->timeout_s seconds with VQC_ETIMEOUT (or VQC_EABORTED once the
 * world is aborted) instead of blocking forever. Arguments reaching the ops
 * are already validated (non-NULL buffers when count > 0, valid dtype/op,
 * 0 <= root < size). */
#ifndef VQC_COMM_INTERNAL_H
#define VQC_COMM_INTERNAL_H

#include <stddef.h> /* offsetof */
#include <stdint.h>

#include "comm/ledger_internal.h"
#include "vqc/clock.h" /* vqc_now_ns */
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/probe.h"

typedef struct vqc_comm_ops {
  vqc_status (*all_reduce)(vqc_comm *c, const void *send, void *recv,
                           size_t count, vqc_dtype dt, vqc_redop op);
  vqc_status (*all_gather)(vqc_comm *c, const void *send, void *recv,
                           size_t count, vqc_dtype dt);
  vqc_status (*all_gatherv)(vqc_comm *c, const void *send, size_t sendcount,
                            void *recv, const size_t *counts, vqc_dtype dt);
  vqc_status (*broadcast)(vqc_comm *c, void *buf, size_t count, vqc_dtype dt,
                          int root);
  vqc_status (*barrier)(vqc_comm *c);
  /* Make pending and future waits of this world return VQC_EABORTED. */
  void (*abort)(vqc_comm *c);
} vqc_comm_ops;

typedef struct vqc_subscriber {
  vqc_event_fn fn;
  void *user;
} vqc_subscriber;

struct vqc_comm {
  /* What every collective reads or writes, first and together: 64 bytes, one
   * cache line where the comm starts on one (the mpi backend allocates its
   * world so), at most two otherwise. Between two collectives the wrapped
   * library (MPI's copies, its progress loop, another process on the core)
   * evicts much of the cache, so each further line touched per call is a
   * miss; this keeps the common path to the fewest. */
  const vqc_comm_ops *ops;
  void *impl;          /* backend state, owned by the backend */
  vqc_ledger *ledger;  /* NULL for side channels: no records, no events */
  int rank;
  int size;
  vqc_wait_mode wait_mode; /* POLL unless set; backends read it per call */
  int nsubs;
  vqc_comm_stats stats; /* this rank's traffic on this comm, comm.c counts */
  /* The rest is read per call only in POLL mode, by a side channel, or with
   * subscribers. */
  vqc_backend backend;
  double timeout_s;
  uint64_t until_ns;   /* overall deadline (vqc_now_ns units); 0: none */
  vqc_comm *side;      /* side channel; NULL when this comm is one */
  vqc_subscriber subs[VQC_MAX_SUBSCRIBERS];
  /* probe handlers (probe.c), data comms only */
  struct { vqc_probe_fn fn; void *user; } probes[VQC_MAX_PROBE_SUBSCRIBERS];
  int nprobes;
  vqc_comm_hook_fn before_collective; /* side channels only; NULL: none */
  void *before_collective_user;
};
/* The first line above: 3 pointers, 4 ints, 3 counters. */
_Static_assert(offsetof(struct vqc_comm, backend) <= 64,
               "the fields every collective touches must fit in 64 bytes");


#define VQC_COMM_DEFAULT_TIMEOUT_S 60.0

/* Fills the common fields of a data comm (with a fresh ledger) or of a side
 * channel (ledger NULL). */
vqc_status vqc_comm_init_common(vqc_comm *c, const vqc_comm_ops *ops,
                                vqc_backend backend, int rank, int size,
                                void *impl, bool is_side);
/* Frees the ledger (the struct itself belongs to the backend). */
void vqc_comm_fini_common(vqc_comm *c);

/* now + c->timeout_s, or the overall deadline when that comes first
 * (vqc_comm_set_overall_deadline), in vqc_now_ns units. */
uint64_t vqc_comm_deadline_ns(const vqc_comm *c);

/* vqc_dtype_size for the collectives' hot path: the same list
 * (VQC_DTYPE_LIST), inline, so a call costs no jump into core/'s code
 * (often cold by the next collective). 0 if bad. */
static inline size_t vqc_comm_dtype_size(vqc_dtype dt) {
  switch (dt) {
#define X(name, ctype, size, code, str) case VQC_##name: return size;
    VQC_DTYPE_LIST(X)
#undef X
    default: return 0;
  }
}

/* Element-wise dst[i] = op(dst[i], src[i]) for i < count. */
void vqc_reduce_into(void *dst, const void *src, size_t count, vqc_dtype dt,
                     vqc_redop op);

#endif /* VQC_COMM_INTERNAL_H */
