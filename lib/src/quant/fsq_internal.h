/* fsq_internal.h: the kernels behind vqc_fsq_quantize (vqc/fsq.h), internal
 * to the library and visible to the unit tests and benchmarks, which compare
 * the SIMD kernel with the scalar reference and time them.
 *
 * Every kernel computes the same function, bit for bit: the codes of
 * vqc/fsq.h with tanh = vqc_tanh_exact (tanh_exact.h, correctly rounded),
 * every other float operation the library's, in its order, unfused, and the
 * indices as the float32 sum in dimension order, rounded half to even. The
 * AVX2 kernel runs the same operations lane by lane (x86 vector operations
 * round each lane as the scalar operation does), so it may vectorise
 * across elements without changing a bit. AVX-512 is not used: the CPUs
 * this was tuned on (AMD Zen 3) have none, and the AVX2 kernel is not
 * limited by vector width alone (bench/bench_quantizers.c). */
#ifndef VQC_FSQ_INTERNAL_H
#define VQC_FSQ_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vqc/fsq.h"
#include "vqc/status.h"

typedef enum fsq_kernel {
  FSQ_KERNEL_SCALAR, /* the reference loop (fsq.c); runs anywhere */
  FSQ_KERNEL_AVX2,   /* x86 AVX2 + FMA: 8 groups per block (fsq_avx2.c) */
  FSQ_KERNEL_COUNT
} fsq_kernel;

/* Whether this CPU (and build) can run kernel k. */
bool fsq_kernel_available(fsq_kernel k);
/* The fastest available kernel: the one vqc_fsq_quantize uses. */
fsq_kernel fsq_kernel_best(void);
/* "scalar", "avx2" ("?" outside the enum). */
const char *fsq_kernel_name(fsq_kernel k);

/* vqc_fsq_quantize with a chosen kernel: same arguments, same checks, same
 * results (and, on a NaN, the same error and the same outputs written
 * before it). VQC_EUNSUPPORTED when k is not available here. */
vqc_status fsq_quantize_with(fsq_kernel k, const vqc_fsq *q, const float *z,
                             int64_t M, float *out, int32_t *indices);

/* y[i] = vqc_tanh_exact(x[i]) for i < n with kernel k (y may equal x).
 * Returns how many elements took the slow (double-double) path, or -1 when
 * k is not available here. */
int64_t fsq_tanh_with(fsq_kernel k, const float *x, float *y, size_t n);

/* ---- the AVX2 kernel (fsq_avx2.c); call only where
 * fsq_kernel_available(FSQ_KERNEL_AVX2). */

/* The tanh loop of fsq_tanh_with. */
int64_t fsq_avx2_tanh(const float *x, float *y, size_t n);

/* How fsq_avx2_quantize stopped. */
typedef enum fsq_avx2_stop {
  FSQ_AVX2_DONE,     /* every whole block done */
  FSQ_AVX2_NAN,      /* the next block holds a NaN; nothing of it written */
  FSQ_AVX2_BAD_INDEX /* the group after the done ones has no int32 index;
                      * its codes (and its block's) are written to out */
} fsq_avx2_stop;

/* Codes (and indices when not NULL) of the first groups of z, in blocks of
 * 8 groups: groups (M * num_codebooks) is the total; whole blocks only.
 * *done receives how many groups are finished (codes and indices). The
 * caller finishes the rest with the scalar loop (fsq.c). */
fsq_avx2_stop fsq_avx2_quantize(const vqc_fsq *q, const float *z,
                                int64_t groups, float *out, int32_t *indices,
                                int64_t *done);

#endif /* VQC_FSQ_INTERNAL_H */
