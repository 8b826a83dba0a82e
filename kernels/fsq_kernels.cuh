/* fsq_kernels.cuh: the device half of fsq.cu (read that file's top comment
 * first): the per-dimension constants, the code of one element with its
 * exact-tanh refinement near rounding boundaries, and fsq_quantize_kernel.
 * Kept apart from the host wrapper so that kernels/emu can compile this
 * very code for the CPU (tests without a GPU). */
#ifndef VQC_KERNELS_FSQ_KERNELS_CUH
#define VQC_KERNELS_FSQ_KERNELS_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>

/* lib/src: the CPU's tanh, compiled for the device */
#include "quant/tanh_exact.h"
#include "vqc/fsq.h"

#define FSQ_THREADS 256
#define FSQ_PER_THREAD 8
#define FSQ_TILE (FSQ_THREADS * FSQ_PER_THREAD) /* elements per block, max */

/* The per-dimension constants of a vqc_fsq, as a kernel argument. */
typedef struct fsq_consts {
  int d;
  int sym; /* preserve_symmetry */
  float half_l[VQC_FSQ_MAX_DIMS];
  float offset[VQC_FSQ_MAX_DIMS];
  float shift[VQC_FSQ_MAX_DIMS];
  float half_width[VQC_FSQ_MAX_DIMS];
  float sym_scale[VQC_FSQ_MAX_DIMS];
  float lm1[VQC_FSQ_MAX_DIMS];    /* float(L - 1) */
  float basis[VQC_FSQ_MAX_DIMS];  /* float(basis_i), as the CPU converts it */
  float margin[VQC_FSQ_MAX_DIMS]; /* see the top of the file */
} fsq_consts;

/* Error words, one integer each, reset to UINT64_MAX before the launch. */
typedef struct fsq_flags {
  unsigned long long first_nan;       /* element index */
  unsigned long long first_bad_group; /* group index */
  unsigned long long refined;         /* count of exact-tanh elements */
} fsq_flags;

/* Distance from v to the nearest x.5 (for rintf), and to the nearest
 * integer (for floorf). v - floorf(v) is exact for |v| < 2^23. */
__device__ __forceinline__ float dist_to_half(float v) {
  return fabsf(__fsub_rn(__fsub_rn(v, floorf(v)), 0.5f));
}
__device__ __forceinline__ float dist_to_integer(float v) {
  float f = __fsub_rn(v, floorf(v));
  return fminf(f, __fsub_rn(1.0f, f));
}

/* The code of one element of dimension i (constants in shared memory). */
__device__ __forceinline__ float fsq_code(const fsq_consts &k, int i, float z,
                                          unsigned *refined) {
  if (k.sym) {
    /* floorf(Lm1 * (tanhf(z) + 1) / 2 + 0.5), then scale * bracket - 1 */
    float t = tanhf(z);
    float v = __fadd_rn(
        __fdiv_rn(__fmul_rn(k.lm1[i], __fadd_rn(t, 1.0f)), 2.0f), 0.5f);
    if (dist_to_integer(v) <= k.margin[i]) {
      t = vqc_tanh_exact(z);
      v = __fadd_rn(__fdiv_rn(__fmul_rn(k.lm1[i], __fadd_rn(t, 1.0f)), 2.0f),
                    0.5f);
      (*refined)++;
    }
    return __fsub_rn(__fmul_rn(k.sym_scale[i], floorf(v)), 1.0f);
  }
  /* rintf(tanhf(z + shift) * half_l - offset) / half_width */
  float x = __fadd_rn(z, k.shift[i]);
  float t = tanhf(x);
  float b = __fsub_rn(__fmul_rn(t, k.half_l[i]), k.offset[i]);
  /* Two decisions hang on b: which side of a .5 it lies (the level) and,
   * when it rounds to 0, its sign (rintf keeps it: a code of -0 or +0). */
  if (dist_to_half(b) <= k.margin[i] || fabsf(b) <= k.margin[i]) {
    t = vqc_tanh_exact(x);
    b = __fsub_rn(__fmul_rn(t, k.half_l[i]), k.offset[i]);
    (*refined)++;
  }
  return __fdiv_rn(rintf(b), k.half_width[i]);
}

/* Level index of a code, as float32 (the CPU's code_to_level). */
__device__ __forceinline__ float code_to_level(const fsq_consts &k, int i,
                                               float code) {
  if (k.sym) return __fdiv_rn(__fadd_rn(code, 1.0f), k.sym_scale[i]);
  return __fadd_rn(__fmul_rn(code, k.half_width[i]), k.half_width[i]);
}

/* One tile of `gpt` groups per block. z and out are (groups * d); indices
 * (groups) or NULL. */
__global__ static void __launch_bounds__(FSQ_THREADS)
    fsq_quantize_kernel(const float *z, float *out, int32_t *indices,
                        int64_t groups, int gpt,
                        const __grid_constant__ fsq_consts consts,
                        fsq_flags *flags) {
  __shared__ fsq_consts k;
  __shared__ float codes[FSQ_TILE];
  /* The constants into shared memory, a word per thread: dimension i
   * differs from lane to lane, which constant memory would serialise. */
  {
    const uint32_t *src = reinterpret_cast<const uint32_t *>(&consts);
    uint32_t *dst = reinterpret_cast<uint32_t *>(&k);
    for (unsigned j = threadIdx.x; j < sizeof(fsq_consts) / 4; j += blockDim.x)
      dst[j] = src[j];
  }
  __syncthreads();

  const int d = k.d;
  const int64_t g0 = (int64_t)blockIdx.x * gpt;
  const int64_t ng = groups - g0 < gpt ? groups - g0 : gpt;
  if (ng <= 0) return; /* the whole block: before any other barrier */
  const int n = (int)ng * d;             /* elements of this tile */
  const int64_t e0 = g0 * d;             /* its first element */
  unsigned refined = 0;
  /* Dimension of this thread's j-th element, (tid + j * FSQ_THREADS) % d,
   * stepped instead of divided (e0 is a multiple of d). */
  const int dim_step = FSQ_THREADS % d;
  int dim = (int)threadIdx.x % d;

  /* All loads first (out may alias z), then codes. */
  float v[FSQ_PER_THREAD];
#pragma unroll
  for (int j = 0; j < FSQ_PER_THREAD; j++) {
    int e = (int)threadIdx.x + j * FSQ_THREADS;
    v[j] = e < n ? __ldcs(z + e0 + e) : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < FSQ_PER_THREAD; j++) {
    int e = (int)threadIdx.x + j * FSQ_THREADS;
    if (e >= n) break;
    if (isnan(v[j]))
      atomicMin(&flags->first_nan, (unsigned long long)(e0 + e));
    float c = fsq_code(k, dim, v[j], &refined);
    codes[e] = c;
    __stcs(out + e0 + e, c);
    dim += dim_step;
    if (dim >= d) dim -= d;
  }
  if (refined) atomicAdd(&flags->refined, (unsigned long long)refined);
  if (indices == NULL) return; /* uniform: no barrier below is skipped */
  __syncthreads();

  /* One thread per group: sum in dimension order, round half to even. */
  for (int g = threadIdx.x; g < (int)ng; g += FSQ_THREADS) {
    float sum = 0.0f;
    for (int i = 0; i < d; i++)
      sum = __fadd_rn(sum, __fmul_rn(code_to_level(k, i, codes[g * d + i]),
                                     k.basis[i]));
    float r = rintf(sum);
    if (!(r == r && r >= 0.0f && r < 2147483648.0f)) {
      atomicMin(&flags->first_bad_group, (unsigned long long)(g0 + g));
      r = -1.0f;
    }
    indices[g0 + g] = (int32_t)r;
  }
}

/* The constants of q, as the kernel reads them (host code). */
static inline fsq_consts fsq_consts_of(const vqc_fsq *q) {
  fsq_consts k;
  memset(&k, 0, sizeof k);
  k.d = q->d;
  k.sym = q->preserve_symmetry ? 1 : 0;
  for (int i = 0; i < q->d; i++) {
    k.half_l[i] = q->half_l[i];
    k.offset[i] = q->offset[i];
    k.shift[i] = q->shift[i];
    k.half_width[i] = q->half_width[i];
    k.sym_scale[i] = q->sym_scale[i];
    k.lm1[i] = (float)(q->levels[i] - 1);
    k.basis[i] = (float)q->basis[i];
    /* 2^-18 * (h + 1) and 2^-18 * L: see the top of the file. */
    k.margin[i] = q->preserve_symmetry
                      ? ldexpf((float)q->levels[i], -18)
                      : ldexpf(q->half_l[i] + 1.0f, -18);
  }
  return k;
}

#endif /* VQC_KERNELS_FSQ_KERNELS_CUH */
