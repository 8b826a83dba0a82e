/* checkers.h: the constructors of every checker (see checker.h for the
 * interface they fill in).
 *
 * Each constructor fills *out with a checker whose impl is NULL until
 * attach; the runner calls attach once per rank, step_end after every step,
 * finish at the end, then destroy. One instance per rank: on the threads
 * backend every rank thread builds its own. */
#ifndef VQC_CHECKERS_H
#define VQC_CHECKERS_H

#include "checker.h"

/* divergence.c: digests every replicated tensor at step end (every
 * opts.interval steps and at finish), writes rank-<r>.trace.jsonl, compares
 * digests across ranks over the side channel and localises the first
 * differing tensor (`divergence`); NaN/Inf in float state -> `nonfinite`. */
vqc_status vqc_checker_divergence(vqc_checker *out);

/* equivalence.c: every opts.interval steps compares each rank's averaged
 * gradients with ctx->reference_grads (`gradient_mismatch`). */
vqc_status vqc_checker_equivalence(vqc_checker *out);

/* lost_inplace.c: collectives on a temporary copy whose result never reaches
 * the tensor it came from; out-of-place results never read (`lost_inplace`). */
vqc_status vqc_checker_lost_inplace(vqc_checker *out);

/* collective.c: watchdog over the ledger (`deadlock`, `rank_failure`) and,
 * in strict mode, fingerprint exchange before each collective
 * (`collective_mismatch`). */
vqc_status vqc_checker_collective(vqc_checker *out);

/* shape.c: dead-code replacement counts locally and across ranks
 * (`shape_mismatch`). */
vqc_status vqc_checker_shape(vqc_checker *out);

#endif /* VQC_CHECKERS_H */
