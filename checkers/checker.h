/* checker.h: the interface every checker implements, and what it sees.
 *
 * Checkers see the world through comm (ledger events on the rank's data comm,
 * exchanges on its side channel) and through step events raised by the
 * runner; never through model internals. The runner gives each rank a
 * vqc_check_ctx, attaches the enabled checkers, raises step_end after every
 * training step (the checker applies its own interval), and calls finish at
 * the end of the run or after a failure. One checker instance per rank. */
#ifndef VQC_CHECKER_H
#define VQC_CHECKER_H

#include <stdbool.h>
#include <stdint.h>

#include "findings.h"
#include "vqc/comm.h"
#include "vqc/nn.h" /* vqc_param_list: the named replicated tensors */
#include "vqc/status.h"

typedef struct vqc_check_options {
  int interval;        /* check every N steps (divergence, equivalence); >= 1 */
  double timeout_s;    /* collective watchdog deadline */
  double tolerance;    /* equivalence: relative tolerance on gradients */
  bool strict;         /* exchange collective fingerprints before each one */
  bool overlap;        /* divergence: digest the state on a helper thread
                          after step_end, while training goes on; the
                          caller then MUST raise settle(failed = false)
                          before the state is next written (the runner and
                          vqc_instr_state_will_change do) */
} vqc_check_options;

/* Single-process recomputation for the equivalence checker: fill `grads`
 * (same names, shapes and order as the ctx's trainable entries) with the
 * gradient of the global batch of `step`, averaged as DDP averages. Provided
 * by the scenario runner (it knows the model and the data); NULL disables the
 * equivalence checker. */
typedef vqc_status (*vqc_reference_grads_fn)(void *user, int64_t step,
                                             vqc_param_list *grads);

/* A rank's live record (ledger_analysis.h), opened by the collective
 * checker. */
typedef struct vqc_live vqc_live;

typedef struct vqc_check_ctx {
  vqc_comm *comm;               /* the rank's data comm (side: vqc_comm_side) */
  int rank, size;
  const vqc_param_list *state;  /* every replicated tensor, by name */
  vqc_findings *findings;       /* where findings go (shared by rank threads) */
  vqc_check_options opts;
  const char *run_dir;          /* existing directory for dumps and traces */
  vqc_reference_grads_fn reference_grads;
  void *reference_user;
  /* The rank's live record, where vqc_check_report puts each finding as it
   * is made. Set by the collective checker's attach (it opens the record)
   * and cleared by its destroy; NULL without one (the findings then live
   * only in the list, and in run.json if it is written). */
  vqc_live *live;
} vqc_check_ctx;

/* How every checker reports a finding: appends x to ctx->findings (as
 * vqc_findings_add; at >= 0: as vqc_findings_insert at `at`), and the same
 * finding to the rank's live record (ctx->live), so `vqcheck analyze`
 * rebuilds it when run.json was never written (findings_record.h). The
 * list takes x->detail, as vqc_findings_add does. (findings_record.c.) */
vqc_status vqc_check_report(const vqc_check_ctx *ctx, int at,
                            const vqc_finding *x);

typedef struct vqc_checker vqc_checker;
struct vqc_checker {
  const char *name;
  void *impl;
  /* Subscribe to comm events, allocate per-rank state. */
  vqc_status (*attach)(vqc_checker *self, vqc_check_ctx *ctx);
  /* After every training step on this rank (after the optimizer step and
   * codebook updates). A non-OK return stops the run (e.g. a divergence
   * found in strict mode need not stop it: return VQC_OK). */
  vqc_status (*step_end)(vqc_checker *self, vqc_check_ctx *ctx, int64_t step);
  /* Optional (NULL: nothing to settle). Finishes work the checker left
   * running after step_end, with its exchange: raised on every rank before
   * the rank next writes its replicated state (failed = false), and on a
   * rank whose training failed before it reports the failure (failed =
   * true), so the exchange pairs up with the other ranks' whatever each was
   * doing. Returns VQC_EABORTED when another rank settled with failed =
   * true (this rank must stop too), VQC_OK when there was nothing to do. */
  vqc_status (*settle)(vqc_checker *self, vqc_check_ctx *ctx, bool failed);
  /* End of the run; run_status is how the rank's training ended (VQC_OK, or
   * the error that stopped it, e.g. VQC_ETIMEOUT). */
  vqc_status (*finish)(vqc_checker *self, vqc_check_ctx *ctx,
                       vqc_status run_status);
  /* Unsubscribes and frees impl; accepts a zeroed checker. */
  void (*destroy)(vqc_checker *self, vqc_check_ctx *ctx);
};

#endif /* VQC_CHECKER_H */
