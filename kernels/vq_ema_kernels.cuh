/* vq_ema_kernels.cuh: the device half of vq_ema.cu (read that file's top
 * comment first): the statistics kernels (keys and counts, tiles, per-tile
 * ordered sums, their combination), the lerp, the ordered total, the
 * renormalisation and the gather.
 * The radix sort and scan between them are CUB's, called from vq_ema.cu.
 * Kept apart from the host wrappers so that kernels/emu can compile this
 * very code for the CPU (tests without a GPU). */
#ifndef VQC_KERNELS_VQ_EMA_KERNELS_CUH
#define VQC_KERNELS_VQ_EMA_KERNELS_CUH

#include <math.h>
#include <stdint.h>

#include "vqc/vq.h" /* VQC_VQ_STATS_CHUNK: the order the CPU defines */

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

/* The statistics' fixed order (vqc_vq_batch_stats, vq.h): code c's rows,
 * sorted by row, are cut into chunks of CHUNK rows; a "tile" is one chunk.
 * The grid has one block per tile, so a code that most rows fell into is
 * summed by many blocks at once instead of one thread walking all its rows.
 *
 * stats_tiles_kernel, one thread per code (plus one for the totals):
 *   ntiles[c] = ceil(n_c / CHUNK), nparts[c] = ntiles[c] if > 1 else 0;
 *   entry C of both is 0, so their exclusive scans (CUB) end in the totals. */
#define STATS_CHUNK VQC_VQ_STATS_CHUNK
__global__ static void stats_tiles_kernel(const unsigned *__restrict__ ncount,
                                          int64_t C,
                                          unsigned *__restrict__ ntiles,
                                          unsigned *__restrict__ nparts) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c > C) return;
  const unsigned t = c < C ? (ncount[c] + STATS_CHUNK - 1) / STATS_CHUNK : 0;
  ntiles[c] = t;
  nparts[c] = t > 1 ? t : 0;
}

/* The code whose tiles [tile_off[c], tile_off[c + 1]) hold tile t: the last
 * c with tile_off[c] <= t (t < tile_off[C], so it has rows). */
__device__ __forceinline__ int64_t stats_tile_code(
    const unsigned *__restrict__ tile_off, int64_t C, unsigned t) {
  int64_t lo = 0, hi = C - 1; /* the answer lies in [lo, hi] */
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (tile_off[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/* Block t sums tile t: rows sorted_rows[offsets[c] + j*CHUNK ..] of code c,
 * in order, in double from 0, one thread per dimension (strided over D).
 * A code with a single tile is finished here (sum rounded to float, count);
 * otherwise the tile's double sums go to parts[(part_off[c] + j) * D + d]
 * for stats_combine_kernel. Blocks past the last tile return at once. */
__global__ static void stats_tile_sums_kernel(
    const float *__restrict__ x, int64_t D, int64_t C,
    const int32_t *__restrict__ sorted_rows,
    const unsigned *__restrict__ offsets, const unsigned *__restrict__ ncount,
    const unsigned *__restrict__ tile_off,
    const unsigned *__restrict__ part_off, double *__restrict__ parts,
    float *__restrict__ counts, float *__restrict__ sums) {
  const unsigned t = blockIdx.x;
  if (t >= tile_off[C]) return;
  const int64_t c = stats_tile_code(tile_off, C, t);
  const unsigned j = t - tile_off[c], n_c = ncount[c];
  const unsigned first = j * STATS_CHUNK;
  const unsigned n = n_c - first < STATS_CHUNK ? n_c - first : STATS_CHUNK;
  const int32_t *rows = sorted_rows + offsets[c] + first;
  const bool single = n_c <= STATS_CHUNK;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    double acc = 0.0;
    unsigned i = 0;
    /* Four rows' loads go out together; the adds stay in row order. */
    for (; i + 4 <= n; i += 4) {
      const float v0 = __ldg(x + (int64_t)rows[i + 0] * D + d);
      const float v1 = __ldg(x + (int64_t)rows[i + 1] * D + d);
      const float v2 = __ldg(x + (int64_t)rows[i + 2] * D + d);
      const float v3 = __ldg(x + (int64_t)rows[i + 3] * D + d);
      acc = __dadd_rn(acc, (double)v0);
      acc = __dadd_rn(acc, (double)v1);
      acc = __dadd_rn(acc, (double)v2);
      acc = __dadd_rn(acc, (double)v3);
    }
    for (; i < n; i++)
      acc = __dadd_rn(acc, (double)__ldg(x + (int64_t)rows[i] * D + d));
    if (single) sums[c * D + d] = (float)__dadd_rn(0.0, acc);
    else parts[((int64_t)part_off[c] + j) * D + d] = acc;
  }
  if (single && threadIdx.x == 0) counts[c] = (float)n_c;
}

/* Block c finishes code c: nothing to do for a single tile (done above); an
 * empty code gets zeros; a code of several tiles adds its tiles' double
 * sums in tile order from 0 and rounds once. Counts saturate at 2^24 as
 * float += 1.0f does on the CPU. */
__global__ static void stats_combine_kernel(
    int64_t D, const unsigned *__restrict__ ncount,
    const unsigned *__restrict__ part_off, const double *__restrict__ parts,
    float *__restrict__ counts, float *__restrict__ sums) {
  const int64_t c = blockIdx.x;
  const unsigned n_c = ncount[c];
  if (n_c > 0 && n_c <= STATS_CHUNK) return;
  const unsigned ntiles = (n_c + STATS_CHUNK - 1) / STATS_CHUNK;
  const double *p = parts + (int64_t)part_off[c] * D;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    double acc = 0.0;
    for (unsigned j = 0; j < ntiles; j++) acc = __dadd_rn(acc, p[j * D + d]);
    sums[c * D + d] = (float)acc;
  }
  if (threadIdx.x == 0)
    counts[c] = n_c <= (1u << 24) ? (float)n_c : 16777216.0f;
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
