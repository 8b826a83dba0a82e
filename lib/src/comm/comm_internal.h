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
  const vqc_comm_ops *ops;
  vqc_backend backend;
  int rank;
  int size;
  double timeout_s;
  uint64_t until_ns;   /* overall deadline (vqc_now_ns units); 0: none */
  vqc_wait_mode wait_mode; /* POLL unless set; backends read it per call */
  void *impl;          /* backend state, owned by the backend */
  vqc_comm *side;      /* side channel; NULL when this comm is one */
  vqc_ledger *ledger;  /* NULL for side channels: no records, no events */
  vqc_subscriber subs[VQC_MAX_SUBSCRIBERS];
  int nsubs;
  /* probe handlers (probe.c), data comms only */
  struct { vqc_probe_fn fn; void *user; } probes[VQC_MAX_PROBE_SUBSCRIBERS];
  int nprobes;
  vqc_comm_stats stats; /* this rank's traffic on this comm, comm.c counts */
  vqc_comm_hook_fn before_collective; /* side channels only; NULL: none */
  void *before_collective_user;
};

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

/* Element-wise dst[i] = op(dst[i], src[i]) for i < count. */
void vqc_reduce_into(void *dst, const void *src, size_t count, vqc_dtype dt,
                     vqc_redop op);

#endif /* VQC_COMM_INTERNAL_H */
