/* rank_sum_kernels.cuh: the device half of rank_sum.cu: the nccl backend's
 * floating-point SUM in rank order. Kept apart from the host wrapper so
 * that kernels/emu can compile this very code for the CPU. */
#ifndef VQC_KERNELS_RANK_SUM_KERNELS_CUH
#define VQC_KERNELS_RANK_SUM_KERNELS_CUH

#include <stddef.h>

#define RANK_SUM_THREADS 256

/* One rounded add of the element type (no contraction: these are the
 * threads backend's `res += src` in float or double). */
__device__ __forceinline__ float rank_sum_add(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ double rank_sum_add(double a, double b) {
  return __dadd_rn(a, b);
}

/* out[i] = ((g[0][i] + g[1][i]) + g[2][i]) + ... + g[nranks-1][i], where
 * g (nranks, count) holds every rank's block in rank order (an all_gather's
 * output). One thread per element, grid-stride. out may be any buffer that
 * does not overlap g. */
template <class T>
__global__ static void rank_sum_kernel(const T *__restrict__ g, int nranks,
                                       size_t count, T *__restrict__ out) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    T acc = g[i];
    for (int r = 1; r < nranks; r++)
      acc = rank_sum_add(acc, g[(size_t)r * count + i]);
    out[i] = acc;
  }
}

#endif /* VQC_KERNELS_RANK_SUM_KERNELS_CUH */
