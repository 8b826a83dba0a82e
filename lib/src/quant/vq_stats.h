/* vq_stats.h: the kernels behind vqc_vq_batch_stats (vq.h), internal to the
 * library and visible to the unit tests and benchmarks, which hold every
 * kernel to the definition bit for bit and time them.
 *
 * The kernels are those of vq_nearest.h (scalar = plain C, AVX2, AVX-512,
 * which here runs the AVX2 loop: vq_stats.c says why), chosen the same way:
 * vqc_vq_batch_stats runs vq_kernel_best(). Each adds the same doubles in
 * the same order (vq.h), so they differ only in speed. */
#ifndef VQC_VQ_STATS_H
#define VQC_VQ_STATS_H

#include <stdint.h>

#include "quant/vq_nearest.h"
#include "vqc/status.h"

/* vqc_vq_batch_stats with a chosen kernel: same arguments, same checks,
 * same results. VQC_EUNSUPPORTED when k is not available here. */
vqc_status vq_batch_stats_with(vq_kernel k, const float *x, int64_t M,
                               int64_t D, const int64_t *indices, int64_t C,
                               float *counts, float *sums, int64_t stride_c,
                               int64_t stride_d);

#endif /* VQC_VQ_STATS_H */
