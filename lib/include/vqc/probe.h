/* probe.h: named facts that library code reports to checkers mid-step.
 *
 * Collective events (ledger.h) show checkers what moves between ranks; some
 * bugs only show in what the code is about to do with it. A probe is a small
 * record of integer facts (up to 8 key/value pairs) raised at the exact
 * place the decision is made, e.g. dead-code replacement just before it
 * writes sampled rows into the codebook:
 *
 *   vqc_probe p = {.name = "dead_code", .step = step, .layer = layer};
 *   vqc_probe_set(&p, "expired", k);
 *   vqc_probe_set(&p, "sampled", rows);
 *   VQC_TRY(vqc_probe_emit(comm, &p));
 *
 * Handlers subscribed on the rank's data comm run on the emitting thread, in
 * subscription order; the first non-OK status stops the rest and is returned
 * to the emitter, which must then skip the action the probe guarded (this is
 * how the shape checker turns a corrupting write into a clean VQC_ESHAPE). A
 * handler may use the comm's side channel, so every rank must emit the same
 * probes in the same order, like a collective. Without subscribers (or with
 * a NULL comm) emitting costs a compare and returns VQC_OK. */
#ifndef VQC_PROBE_H
#define VQC_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "vqc/comm.h"
#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VQC_PROBE_MAX_KEYS 8

typedef struct vqc_probe {
  const char *name;   /* "dead_code", "kmeans_init": what is about to happen */
  int64_t step;       /* the training step the code was told (ctx->step) */
  int layer;          /* RVQ layer, 0 when none applies */
  int n;              /* keys used */
  const char *keys[VQC_PROBE_MAX_KEYS];  /* static strings */
  int64_t values[VQC_PROBE_MAX_KEYS];
  vqc_site site;      /* where it was emitted (vqc_probe_emit fills it) */
} vqc_probe;

/* A handler: `c` is the comm the probe was emitted on (use
 * vqc_comm_side(c) to talk to the other ranks). */
typedef vqc_status (*vqc_probe_fn)(vqc_comm *c, const vqc_probe *p,
                                   void *user);

#define VQC_MAX_PROBE_SUBSCRIBERS 8
/* Handlers run in subscription order. VQC_EINVAL for a NULL handler or a
 * side channel (probes are raised on data comms only), VQC_ENOMEM when the
 * table is full. */
vqc_status vqc_probe_subscribe(vqc_comm *c, vqc_probe_fn fn, void *user);
/* Removes the (fn, user) pair; no-op if absent (or c is NULL). */
void vqc_probe_unsubscribe(vqc_comm *c, vqc_probe_fn fn, void *user);

/* Sets key to value (overwriting an existing key). VQC_ENOMEM when all
 * VQC_PROBE_MAX_KEYS are used. `key` must outlive the probe. */
vqc_status vqc_probe_set(vqc_probe *p, const char *key, int64_t value);
/* The value of key, or false when the probe has no such key. */
bool vqc_probe_get(const vqc_probe *p, const char *key, int64_t *value);

/* Calls every handler subscribed on c with p (p->site as given). A NULL
 * comm, or one without probe subscribers, returns VQC_OK at once. */
vqc_status vqc_probe_emit_at(vqc_comm *c, const vqc_probe *p);
/* Same, with p->site replaced by `site` (p itself is left unchanged). */
vqc_status vqc_probe_emit_site(vqc_comm *c, const vqc_probe *p, vqc_site site);
#define vqc_probe_emit(c, p) vqc_probe_emit_site((c), (p), VQC_SITE)

#ifdef __cplusplus
}
#endif
#endif /* VQC_PROBE_H */
