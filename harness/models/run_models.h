/* harness/models/ owns: the models scenarios train: run_models.c
 *   dispatches through each model's ops table (model.h), one file per
 *   model (model_<name>.c).
 * May use: scenario/, checkers/ (findings), libvqcheck (never run/ or
 *   cli/).
 *
 * run_models.h: the models a scenario trains, as the runner sees them.
 *
 * One vqc_run_model per rank: the replicated state (built identically on
 * every rank from the scenario's seed), this rank's data shard of every step
 * (vqc/data.h, keyed by (seed, step, rank)), one training step, and, for the
 * models trained by gradient, a single-process twin that recomputes the
 * averaged gradient on the global batch (the equivalence checker's
 * reference).
 *
 *   vq           a VQ codebook trained by EMA, with dead-code expiry
 *   rvq          residual VQ with quantize dropout (on from step 1: step 0
 *                is a warm-up without dropout, so every rank agrees on a
 *                baseline before the dropout seed sync first runs)
 *   fsq          autoencoder with an FSQ bottleneck, DDP + Adam
 *   clip         two linear towers + a contrastive loss over the global
 *                batch, DDP + Adam
 *   autoencoder  autoencoder with a VQ bottleneck (EMA), DDP + Adam
 *
 * The scenario's fault is handed to the library code where the real bug
 * lived (vq params, rvq params, DDP options, CLIP gather mode); nothing here
 * decides what a checker finds.
 *
 * Device (`--device cuda`, vqc_run_model_create_device): the models whose hot
 * path has kernels (vqc/gpu.h) run it on the device; the others are refused
 * up front (vqc_run_check_device) rather than silently run on the CPU.
 *   vq   codebook state (embed, cluster_size, embed_avg) and the batch live
 *        in device tensors; nearest code, gather, EMA statistics, lerp and
 *        renormalize are the kernels. The two EMA all_reduces (counts, then
 *        sums, as vq_ema.c orders them) go through the comm on the device
 *        tensors with the nccl backend, and through host staging copies
 *        (device -> host, all_reduce, host -> device) with threads and mpi,
 *        whose collectives move host memory. k-means init and dead-code
 *        expiry have no kernels: they run on the host copy of the codebook
 *        (vq.h's functions, so their faults and collectives are the CPU
 *        path's) and the result is uploaded. The EMA faults of vq_ema.c
 *        (lost_inplace_contiguous, mismatched_collective) live in host code
 *        the device path does not run, so those scenarios are refused.
 *   fsq  the bottleneck's quantizer runs on the device
 *        (vqc_gpu_fsq_quantize; upload z, download q); the encoder, decoder,
 *        DDP and Adam stay on the host. The single-process twin uses the
 *        same device quantizer, so the equivalence checker compares one
 *        function with itself.
 * How the checkers see device state: they read vqc_param.data as host
 * memory (the divergence checker's digest and NaN scan, its localisation,
 * the shape checker), so the registry keeps pointing at HOST tensors and
 * every step ends by copying the device state into them (staging). The
 * copies are exact bytes, so their digests are the device tensors' digests
 * (vqc_digest_tensor of the device tensor gives the same value; the GPU
 * runner test checks that); a step costs one (C, D) download. */
#ifndef VQC_RUN_MODELS_H
#define VQC_RUN_MODELS_H

#include <stdbool.h>
#include <stdint.h>

#include "scenario.h"
#include "vqc/comm.h"
#include "vqc/nn.h"
#include "vqc/status.h"

typedef struct vqc_run_model vqc_run_model;

/* Whether sc's fault has a code path in sc's model (the fault lives in the
 * code the model runs, and the sizes let it act: sampler_float_split needs
 * dead-code expiry or k-means init, the dropout faults an RVQ of at least
 * two layers, the DDP faults a model trained by gradient, ...). VQC_EINVAL
 * naming the models that can carry it otherwise: a scenario whose fault
 * could never fire would pass or fail for the wrong reason. */
vqc_status vqc_run_check_fault(const vqc_scenario *sc);

/* Whether sc can run on `device` over `backend`: VQC_OK, or VQC_EINVAL
 * with a message saying what has no device path and what to run instead.
 * CPU: every model, on threads or mpi (nccl moves device buffers only).
 * CUDA: models vq and fsq (not rvq, clip, autoencoder), without the EMA
 * faults of vq_ema.c; with nccl only vq without dead-code expiry or
 * k-means init (their collectives move host buffers). Needs no device. */
vqc_status vqc_run_check_device(const vqc_scenario *sc, vqc_device device,
                                vqc_backend backend);

/* Whether this process can run --device cuda: the build has the kernels,
 * a device answers, and a small device tensor can be allocated and
 * written by a kernel. VQC_ENODEVICE otherwise, recorded as "no usable
 * CUDA device (<why>): run with --device cpu". */
vqc_status vqc_run_probe_device(void);

/* Builds rank `rank`'s model for scenario sc on comm c (the runner's data
 * comm; its size is the world). sc must outlive the model. VQC_EINVAL when
 * the scenario cannot be trained as given (e.g. an empty shard for a model
 * whose collectives need rows on every rank). Free with
 * vqc_run_model_destroy. vqc_run_model_create runs on the CPU; _device runs on
 * `device` (see "Device" above; vqc_run_check_device must accept it). */
vqc_status vqc_run_model_create(const vqc_scenario *sc, vqc_comm *c,
                                vqc_run_model **out);
vqc_status vqc_run_model_create_device(const vqc_scenario *sc, vqc_comm *c,
                                       vqc_device device,
                                       vqc_run_model **out);
void vqc_run_model_destroy(vqc_run_model *m); /* accepts NULL */

/* Every replicated tensor, by name, in a fixed order (weights and their
 * gradients, bottleneck or codebook state, optimizer state). Owned by m.
 * Host memory on every device (see "Device": after each step it holds the
 * device state's bytes). */
const vqc_param_list *vqc_run_model_state(const vqc_run_model *m);

/* The codes the last step chose for this rank's rows: vq (rows), rvq
 * (rows, Q); NULL for the other models. *rows (may be NULL) receives the
 * row count. Owned by m; rewritten by every step. */
const int64_t *vqc_run_model_indices(const vqc_run_model *m, int64_t *rows);

/* The tensor digest (digest.h) of state entry `name` where the model keeps
 * it: the device tensor for vq's codebook with --device cuda (digested on
 * the device), else the registered host entry. Equal to the digest of the
 * registered entry after every step (the staging copy is exact); lets a
 * test check that. VQC_EINVAL for an unknown name. */
vqc_status vqc_run_model_source_digest(const vqc_run_model *m,
                                       const char *name, uint64_t *out);

/* Called by vqc_run_model_step right before the step first writes the
 * replicated state (vqc_run_model_state), so the checkers can finish
 * reading it (checker.h settle). Where that is: vq and rvq (host) right
 * before a codebook's k-means init or EMA update inside vqc_vq_forward
 * (vqc_vq.before_update: the nearest-code search overlaps); vq on the
 * device and the autoencoder (its bottleneck updates in the forward)
 * before the forward; fsq and clip only in the optimizer step, so after
 * forward, backward and the gradient all_reduce. It may run more than once
 * in a step (once per codebook); later calls find nothing to settle.
 * A non-OK return stops the step with that status. fn NULL: none. */
typedef vqc_status (*vqc_run_before_update_fn)(void *user);
void vqc_run_model_set_before_update(vqc_run_model *m,
                                     vqc_run_before_update_fn fn, void *user);

/* One training step on this rank's shard of `step`: forward, loss,
 * backward, gradient all_reduce, optimizer step, codebook EMA and dead-code
 * expiry, as the model has them. *loss (may be NULL) receives this rank's
 * loss. A collective failure is returned as it came. */
vqc_status vqc_run_model_step(vqc_run_model *m, int64_t step, double *loss);

/* True for the models trained by gradient (fsq, clip, autoencoder). */
bool vqc_run_model_has_reference(const vqc_run_model *m);

/* The equivalence checker's reference (a vqc_reference_grads_fn with user =
 * the model): the gradient a single process computes on the global batch
 * of `step` (every rank's shard, in rank order) from the replicated state
 * as it was when `step` started, averaged as DDP averages. Fills the grads
 * entries by name. VQC_EINVAL for a step other than the last one trained. */
vqc_status vqc_run_model_reference_grads(void *model, int64_t step,
                                         vqc_param_list *grads);

#endif /* VQC_RUN_MODELS_H */
