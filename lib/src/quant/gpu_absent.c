/* gpu_absent.c: the FSQ and VQ kernels of vqc/gpu.h in a build without CUDA
 * (VQC_WITH_CUDA 0; vqc/gpu_base.h's are in core/gpu_base_absent.c). Every
 * entry point exists, so callers compile and link the same way in every
 * build, and says how to get the kernels instead of failing to link. With
 * CUDA the real wrappers live in the .cu files of kernels/ and this file is
 * empty. */
#include "core/gpu_absent.h"
#include "vqc/gpu.h"
#include "vqc/version.h"

#if !VQC_WITH_CUDA


vqc_status vqc_gpu_fsq_quantize(const vqc_fsq *q, const float *z, int64_t M,
                                float *out, int32_t *indices,
                                int64_t *refined) {
  (void)q, (void)z, (void)M, (void)out, (void)indices, (void)refined;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_vq_sqnorms(const float *A, int64_t n, int64_t D,
                              float *out) {
  (void)A, (void)n, (void)D, (void)out;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_vq_nearest(const float *x, int64_t M, const float *E,
                              int64_t C, int64_t D, int64_t *indices,
                              float *neg_dist) {
  (void)x, (void)M, (void)E, (void)C, (void)D, (void)indices, (void)neg_dist;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_vq_gather(const float *E, int64_t C, int64_t D,
                             const int64_t *indices, int64_t M,
                             float *quantized) {
  (void)E, (void)C, (void)D, (void)indices, (void)M, (void)quantized;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_vq_stats(const float *x, int64_t M, int64_t D,
                            const int64_t *indices, int64_t C, float *counts,
                            float *sums) {
  (void)x, (void)M, (void)D, (void)indices, (void)C, (void)counts, (void)sums;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_lerp(float *a, const float *b, size_t n, float w) {
  (void)a, (void)b, (void)n, (void)w;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_vq_renormalize(const float *cluster_size,
                                  const float *embed_avg, int64_t C,
                                  int64_t D, double eps, float *embed) {
  (void)cluster_size, (void)embed_avg, (void)C, (void)D, (void)eps,
      (void)embed;
  return vqc_gpu_absent(__func__);
}

#endif /* !VQC_WITH_CUDA */
