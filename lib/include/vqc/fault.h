/* fault.h: the named faults of the bug catalogue (docs/spec/bugs.md).
 *
 * A fault is real code at the exact place the real bug lived (the comment at
 * each `if (fault == ...)` names the upstream issue), off by default. A run
 * selects at most one; library code receives it through its parameters (e.g.
 * vqc_vq_params.fault) and never through global state. The checkers are never
 * told which fault is on: they must notice it from what the code does. */
#ifndef VQC_FAULT_H
#define VQC_FAULT_H

#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(ENUM, "scenario name", "where the real bug lived") */
#define VQC_FAULT_LIST(X)                                                     \
  X(NONE, "none", "no fault")                                                 \
  X(LOST_INPLACE_CONTIGUOUS, "lost_inplace_contiguous",                       \
    "vector-quantize-pytorch #101: all_reduce(embed_sum.contiguous())")       \
  X(DISCARDED_OUT_OF_PLACE_RESULT, "discarded_out_of_place_result",           \
    "Megatron-LM #5337 / LFQ maybe_distributed_mean: result never used")      \
  X(SAMPLER_FLOAT_SPLIT, "sampler_float_split",                               \
    "vector-quantize-pytorch #142 (a): float32 binomial split, no remainder") \
  X(UNSYNCED_DROPOUT_SEED, "unsynced_dropout_seed",                           \
    "vector-quantize-pytorch #142 (b): per-rank quantize-dropout cutoff")     \
  X(SEED_SYNC_SOME_RANKS, "seed_sync_some_ranks",                             \
    "vector-quantize-pytorch #198: seed all_reduce skipped on some ranks")    \
  X(SKIP_WEIGHT_SYNC, "skip_weight_sync",                                     \
    "PyTorch/XLA DDP: gradients not averaged on some ranks")                  \
  X(NOGRAD_ALL_GATHER, "nograd_all_gather",                                   \
    "OpenCLIP: contrastive loss gathers features without gradient")           \
  X(MISMATCHED_COLLECTIVE, "mismatched_collective",                           \
    "ranks call the same collective with different counts or ops")

typedef enum {
#define VQC_FAULT_ENUM(e, name, where) VQC_FAULT_##e,
  VQC_FAULT_LIST(VQC_FAULT_ENUM)
#undef VQC_FAULT_ENUM
  VQC_FAULT_COUNT
} vqc_fault;

const char *vqc_fault_name(vqc_fault f);   /* "lost_inplace_contiguous" */
const char *vqc_fault_origin(vqc_fault f); /* where the real bug lived */
/* Parses a scenario name; VQC_EINVAL (message lists the names) otherwise. */
vqc_status vqc_fault_from_name(const char *name, vqc_fault *out);

#ifdef __cplusplus
}
#endif
#endif /* VQC_FAULT_H */
