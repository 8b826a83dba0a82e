/* fsq.cu: FSQ quantize + indices on the device (vqc/fsq.h); the CPU twin is
 * vqc_fsq_quantize (lib/src/quant/fsq.c). Every float operation is the
 * CPU's, in the CPU's order, written with the _rn intrinsics (never
 * contracted into a fused multiply-add, whatever the flags), and tanh is the
 * CPU's too: vqc_tanh_exact (lib/src/quant/tanh_exact.h, correctly rounded,
 * the same source compiled for the device), so the codes are the CPU's bit for bit. The
 * exact tanh costs about 40 double operations, so most elements are
 * screened with CUDA's tanhf first:
 *
 *   t = tanhf(x)                  CUDA's, error <= 2 ulp (fast screen)
 *   b = t * half_l - offset       (default mode; the bracket value in
 *                                  preserve_symmetry mode)
 *   if b lies within MARGIN of a rounding boundary (a .5 for rintf, an
 *   integer for floorf), recompute t = vqc_tanh_exact(x) and b from it
 *
 * Why the screen gives the exact tanh's code. Let t* be tanh correctly
 * rounded to float (vqc_tanh_exact). |t - t*| <= 2.5 ulp(t) <= 2.5 * 2^-24
 * (|t| <= 1). In default mode b = round(round(t * h) - off) moves by at most
 * h * 2.5 * 2^-24 + ulp(t * h) + ulp(b) <= 2^-21 * (h + 1) when t moves to t*
 * (ulp(y) <= 2^-23 |y|, |t * h| <= h, |b| <= h + 1). So if the fast b is
 * farther than that from the boundary, the b of t* rounds the same way.
 * In preserve_symmetry mode v = (L-1) * (t + 1) / 2 + 0.5 moves by at most
 * 2^-21 * (L - 1 + 1) likewise. MARGIN is 8x those bounds: 2^-18 * (h + 1)
 * and 2^-18 * L. The same margin guards the sign of b when it rounds to 0:
 * rintf(-tiny) is -0, so the sign of a zero code is a decision too (b near
 * 0 happens for z = 0 with even L, where t * h is close to offset = 0.5).
 * Random inputs take the exact path about 2^-17 of the time per boundary
 * crossed ("refined"); the tests build inputs that take it on purpose.
 * The screen's 2-ulp bound is CUDA's documented tanhf accuracy without
 * fast math, which kernels/CMakeLists.txt forbids for these files.
 *
 * Layout: z (M, C*d) row-major, so element e belongs to dimension e % d and
 * group e / d. A block takes a tile of whole groups (at most TILE elements),
 * loads it with coalesced reads (all of a thread's loads issued before any
 * store, since out may equal z), writes the codes, keeps them in shared
 * memory, and then one thread per group forms the group's index from the
 * codes exactly as the CPU's group_index does. The per-dimension constants
 * come from vqc_fsq (computed once on the host by vqc_fsq_init, so they are
 * the CPU's floats) into shared memory.
 *
 * Errors: a NaN in z, or a group whose index is not an int32 (impossible for
 * codes made here, checked as the CPU checks it), set the smallest offending
 * element / group number with an integer atomicMin; the wrapper turns it
 * into the CPU's VQC_EINVAL message. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gpu_internal.h"
#include "vqc/fsq.h"
#include "vqc/gpu.h"

/* The kernels themselves (device code only; kernels/emu runs the same
 * source on the CPU). */
#include "fsq_kernels.cuh"

vqc_status vqc_gpu_fsq_quantize(const vqc_fsq *q, const float *z, int64_t M,
                                float *out, int32_t *indices,
                                int64_t *refined) {
  VQC_TRY(vqc_gpu_require("gpu fsq quantize"));
  if (q == NULL) return vqc_error(VQC_EINVAL, "gpu fsq quantize: q is NULL");
  if (M < 0)
    return vqc_error(VQC_EINVAL, "gpu fsq quantize: M is %lld", (long long)M);
  if (refined) *refined = 0;
  if (M == 0) return VQC_OK;
  const int d = q->d;
  const int64_t groups = M * q->num_codebooks;
  const size_t width_bytes = (size_t)M * (size_t)vqc_fsq_width(q) * 4;
  VQC_TRY(vqc_gpu_check_device_ptr("gpu fsq quantize", "z", z, width_bytes));
  VQC_TRY(vqc_gpu_check_device_ptr("gpu fsq quantize", "out", out,
                                   width_bytes));
  if (indices)
    VQC_TRY(vqc_gpu_check_device_ptr("gpu fsq quantize", "indices", indices,
                                     (size_t)groups * 4));
  const int gpt = FSQ_TILE / d; /* whole groups per tile (d <= 30) */

  if ((groups + gpt - 1) / gpt > 2147483647)
    return vqc_error(VQC_EINVAL, "gpu fsq quantize: %lld rows exceed one "
                     "launch", (long long)M);

  fsq_flags init = {~0ULL, ~0ULL, 0}, got;
  fsq_flags *flags = NULL; /* one small device struct, freed below */
  VQC_TRY(GPU_SCRATCH(&flags, sizeof *flags));
  vqc_status s = GPU_CHECK(cudaMemcpyAsync(flags, &init, sizeof init,
                                           cudaMemcpyHostToDevice, 0));
  if (s == VQC_OK) {
    fsq_quantize_kernel<<<vqc_gpu_blocks(groups, gpt), FSQ_THREADS>>>(
        z, out, indices, groups, gpt, fsq_consts_of(q), flags);
    s = GPU_LAUNCH_CHECK("fsq_quantize_kernel");
  }
  if (s == VQC_OK)
    s = GPU_CHECK(cudaMemcpyAsync(&got, flags, sizeof got,
                                  cudaMemcpyDeviceToHost, 0));
  if (s == VQC_OK) s = GPU_SYNC("fsq_quantize_kernel");
  vqc_gpu_scratch_free(flags);
  if (s != VQC_OK) return s;

  if (refined) *refined = (int64_t)got.refined;
  const int width = vqc_fsq_width(q);
  if (got.first_nan != ~0ULL)
    return vqc_error(VQC_EINVAL, "fsq quantize: z[%lld][%d] is NaN",
                     (long long)(got.first_nan / (unsigned long long)width),
                     (int)(got.first_nan % (unsigned long long)width));
  if (got.first_bad_group != ~0ULL)
    return vqc_error(VQC_EINVAL,
                     "fsq: the codes of group %lld (row %lld, codebook %d) do "
                     "not give an int32 index; are they FSQ codes?",
                     (long long)got.first_bad_group,
                     (long long)(got.first_bad_group /
                                 (unsigned long long)q->num_codebooks),
                     (int)(got.first_bad_group %
                           (unsigned long long)q->num_codebooks));
  return VQC_OK;
}
