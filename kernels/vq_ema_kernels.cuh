/* vq_ema_kernels.cuh: the device half of vq_ema.cu (read that file's top
 * comment first): the statistics kernels (keys and counts, per-code ordered
 * sums), the lerp, the ordered total, the renormalisation and the gather.
 * The radix sort and scan between them are CUB's, called from vq_ema.cu.
 * Kept apart from the host wrappers so that kernels/emu can compile this
 * very code for the CPU (tests without a GPU). */
#ifndef VQC_KERNELS_VQ_EMA_KERNELS_CUH
#define VQC_KERNELS_VQ_EMA_KERNELS_CUH

#include <math.h>
#include <stdint.h>

#define EW_THREADS 256

/* keys[i] = indices[i] as uint32, rows[i] = i; counts[c] += 1 (integer).
 * A bad index sets *first_bad to the lowest such row. */
__global__ static void stats_keys_kernel(const int64_t *__restrict__ indices,
                                         int64_t M, int64_t C,
                                         uint32_t *__restrict__ keys,
                                         int32_t *__restrict__ rows,
                                         unsigned *__restrict__ counts,
                                         unsigned long long *first_bad) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < M;
       i += stride) {
    const int64_t c = indices[i];
    if (c < 0 || c >= C) {
      atomicMin(first_bad, (unsigned long long)i);
      keys[i] = 0; /* keeps the sort in range; the call fails anyway */
    } else {
      keys[i] = (uint32_t)c;
      atomicAdd(&counts[c], 1u);
    }
    rows[i] = (int32_t)i;
  }
}

/* Block c sums code c's rows (sorted_rows[offsets[c] .. offsets[c+1])) in
 * order, in double, one thread per dimension (strided over D). */
__global__ static void stats_sums_kernel(
    const float *__restrict__ x, int64_t D,
    const int32_t *__restrict__ sorted_rows,
    const unsigned *__restrict__ offsets, const unsigned *__restrict__ ncount,
    float *__restrict__ counts, float *__restrict__ sums) {
  const int64_t c = blockIdx.x;
  const unsigned begin = offsets[c], n = ncount[c];
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    double acc = 0.0;
    unsigned j = 0;
    /* Four rows' loads go out together; the adds stay in row order. */
    for (; j + 4 <= n; j += 4) {
      const float v0 = __ldg(x + (int64_t)sorted_rows[begin + j + 0] * D + d);
      const float v1 = __ldg(x + (int64_t)sorted_rows[begin + j + 1] * D + d);
      const float v2 = __ldg(x + (int64_t)sorted_rows[begin + j + 2] * D + d);
      const float v3 = __ldg(x + (int64_t)sorted_rows[begin + j + 3] * D + d);
      acc = __dadd_rn(acc, (double)v0);
      acc = __dadd_rn(acc, (double)v1);
      acc = __dadd_rn(acc, (double)v2);
      acc = __dadd_rn(acc, (double)v3);
    }
    for (; j < n; j++)
      acc = __dadd_rn(
          acc, (double)__ldg(x + (int64_t)sorted_rows[begin + j] * D + d));
    sums[c * D + d] = (float)acc;
  }
  /* float += 1.0f from 0 is exact up to 2^24 and then stays there. */
  if (threadIdx.x == 0) counts[c] = n <= (1u << 24) ? (float)n : 16777216.0f;
}

/* torch's CPU lerp (vqc_lerp_f32), operation by operation. */
__device__ __forceinline__ float lerp_f32(float a, float b, float w) {
  if (w < 0.5f) return __fadd_rn(a, __fmul_rn(w, __fsub_rn(b, a)));
  return __fsub_rn(b, __fmul_rn(__fsub_rn(b, a), __fsub_rn(1.0f, w)));
}

__global__ static void lerp_kernel(float *__restrict__ a,
                                   const float *__restrict__ b, size_t n,
                                   float w) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride)
    a[i] = lerp_f32(a[i], b[i], w);
}

/* *tot = (float)(sum over c of (double)cs[c]), in index order: one thread,
 * as the CPU sums. The block's other threads stage the values through
 * shared memory so thread 0 waits on adds, not on global loads. */
#define TOT_STAGE 1024
__global__ static void __launch_bounds__(TOT_STAGE)
    total_kernel(const float *__restrict__ cs, int64_t C, float *tot) {
  __shared__ float stage[TOT_STAGE];
  double acc = 0.0;
  for (int64_t c0 = 0; c0 < C; c0 += TOT_STAGE) {
    const int64_t n = C - c0 < TOT_STAGE ? C - c0 : TOT_STAGE;
    if (threadIdx.x < n) stage[threadIdx.x] = cs[c0 + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0)
      for (int64_t j = 0; j < n; j++) acc = __dadd_rn(acc, (double)stage[j]);
    __syncthreads();
  }
  if (threadIdx.x == 0) *tot = (float)acc;
}

/* embed[c][d] = avg[c][d] / ((cs[c] + eps) / (tot + c_eps) * tot). */
__global__ static void renorm_kernel(const float *__restrict__ cs,
                                     const float *__restrict__ avg, int64_t C,
                                     int64_t D, float eps, float c_eps,
                                     const float *__restrict__ tot_p,
                                     float *__restrict__ embed) {
  const float tot = *tot_p;
  const float denom = __fadd_rn(tot, c_eps);
  const int64_t n = C * D;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t c = i / D;
    const float smoothed =
        __fmul_rn(__fdiv_rn(__fadd_rn(cs[c], eps), denom), tot);
    embed[i] = __fdiv_rn(avg[i], smoothed);
  }
}

/* quantized[i] = E[indices[i]]: one thread per element. */
__global__ static void gather_kernel(const float *__restrict__ E, int64_t C,
                                     int64_t D,
                                     const int64_t *__restrict__ indices,
                                     int64_t M, float *__restrict__ out,
                                     unsigned long long *first_bad) {
  const int64_t n = M * D;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
       e += stride) {
    const int64_t i = e / D, c = indices[i];
    if (c < 0 || c >= C) {
      atomicMin(first_bad, (unsigned long long)i);
      out[e] = NAN;
    } else {
      out[e] = E[c * D + e % D];
    }
  }
}

#endif /* VQC_KERNELS_VQ_EMA_KERNELS_CUH */
