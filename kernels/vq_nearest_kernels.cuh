/* vq_nearest_kernels.cuh: the device half of vq_nearest.cu (read that
 * file's top comment first): the squared-norm kernel and the fused
 * distance + argmin kernel. Kept apart from the host wrappers so that
 * kernels/emu can compile this very code for the CPU and run it thread by
 * thread (tests without a GPU). */
#ifndef VQC_KERNELS_VQ_NEAREST_KERNELS_CUH
#define VQC_KERNELS_VQ_NEAREST_KERNELS_CUH

#include <math.h>
#include <stdint.h>

#include "vqc/vq.h"

#define BM 128
#define BN 128
#define BK 8
#define NT 256  /* threads per block */
/* Row padding: keeps the transposed stores free of bank conflicts and the
 * float4 reads 16-byte aligned. */
#define PAD 4

/* ---- squared norms: out[i] = chain over d of A[i][d]^2 */

#define SQ_ROWS 128 /* rows per block, one per thread */
#define SQ_K 32     /* dims staged per step */

__global__ static void __launch_bounds__(SQ_ROWS)
    vq_sqnorms_kernel(const float *__restrict__ A, int64_t n, int64_t D,
                      float *__restrict__ out) {
  __shared__ float tile[SQ_ROWS][SQ_K + 1];
  const int64_t r0 = (int64_t)blockIdx.x * SQ_ROWS;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < D; k0 += SQ_K) {
    const int kw = D - k0 < SQ_K ? (int)(D - k0) : SQ_K;
    /* Coalesced: consecutive threads read consecutive floats of a row. */
    for (int e = threadIdx.x; e < SQ_ROWS * SQ_K; e += SQ_ROWS) {
      int r = e / SQ_K, k = e % SQ_K;
      float v = 0.0f;
      if (r0 + r < n && k < kw) v = A[(r0 + r) * D + k0 + k];
      tile[r][k] = v;
    }
    __syncthreads();
    for (int k = 0; k < kw; k++)
      acc = __fmaf_rn(tile[threadIdx.x][k], tile[threadIdx.x][k], acc);
    __syncthreads();
  }
  if (r0 + threadIdx.x < n) out[r0 + threadIdx.x] = acc;
}

/* ---- the fused search */

/* Loads this thread's share of one BK step of the x tile or of the code
 * tile: dims k .. k + 3 of the row at `row` (NULL past the last row), as
 * one float4 when kVec (D % 4 == 0 and 16-byte aligned bases: a float4 is
 * then wholly inside or outside D), else four bounds-checked scalars.
 * Outside the matrix: zeros. */
template <bool kVec>
__device__ __forceinline__ float4 load_quad(const float *__restrict__ row,
                                            int k, int D) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (row == nullptr) return v;
  if (kVec) {
    if (k < D) v = __ldg(reinterpret_cast<const float4 *>(row + k));
  } else {
    if (k + 0 < D) v.x = __ldg(row + k + 0);
    if (k + 1 < D) v.y = __ldg(row + k + 1);
    if (k + 2 < D) v.z = __ldg(row + k + 2);
    if (k + 3 < D) v.w = __ldg(row + k + 3);
  }
  return v;
}

/* Stores a loaded quad transposed: dims k .. k + 3 of tile row `lr`. */
__device__ __forceinline__ void store_quad(float (*tile)[BM + PAD], int k,
                                           int lr, float4 v) {
  tile[k + 0][lr] = v.x;
  tile[k + 1][lr] = v.y;
  tile[k + 2][lr] = v.z;
  tile[k + 3][lr] = v.w;
}

/* Row (or code) offset of register index r in 0..7 for thread coordinate
 * t in 0..15. */
__device__ __forceinline__ int tile_off(int t, int r) {
  return (r < 4 ? 0 : 64) + t * 4 + (r & 3);
}

/* D and C fit int here (the wrapper checks); row counts and element offsets
 * are int64.
 *
 * Registers (ptxas for sm_90, CUDA 13; bench/ptxas_sm90.md has the table and
 * scripts/ptxas-report.sh regenerates it): __launch_bounds__(NT, 2) caps a
 * thread at 65536 / (2 * 256) = 128 registers, so two blocks (16 warps, 25%
 * of the 64 an SM holds) share an SM and one block's epilogue or barrier
 * wait overlaps the other's FMAs; their shared memory (2 x 41.5 KB) fits
 * easily. The 8 x 8 accumulator tile is 64 of the 128; the two 8-float
 * fragments, the 8 prefetch floats and the addressing take most of the
 * rest. Every variant fits with no spill and keeps 8 registers of headroom
 * (it still fits when capped at 120). The epilogue's row checks decide
 * it: with int64 compares (m0 + r < M, 64-bit values beside the 64
 * accumulators) the four variants spilled 32-144 bytes per thread; with
 * int rows of the block against mn = min(M - m0, BM) none spills. The
 * alternatives cost more: __launch_bounds__(NT, 1) lets ptxas take 155-159
 * registers (no spill, but one block = 8 warps per SM), and a smaller
 * register tile (8 x 4) needs 12 shared-memory floats per 32 FMAs instead
 * of 16 per 64. */
template <bool kVec, bool kWriteDist>
__global__ static void __launch_bounds__(NT, 2)
    vq_nearest_kernel(const float *__restrict__ x, int64_t M,
                      const float *__restrict__ E, int C, int D,
                      const float *__restrict__ x2,
                      const float *__restrict__ e2,
                      int64_t *__restrict__ indices,
                      float *__restrict__ neg_dist) {
  __shared__ __align__(16) float As[2][BK][BM + PAD];
  __shared__ __align__(16) float Bs[2][BK][BN + PAD];
  /* Per thread and row: smallest q seen, best distance, its code. Read and
   * written only in the epilogues, so they live here, not in registers
   * (the 64 accumulators need those). [r][tid]: conflict-free. */
  __shared__ float s_bq[8][NT], s_bd[8][NT];
  __shared__ int s_bi[8][NT];

  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = (int64_t)blockIdx.x * BM;
  const int lr = tid / 2, lk = (tid % 2) * 4; /* this thread's loads */
  const int nkt = (D + BK - 1) / BK;           /* BK steps per code tile */
  const int nct = (C + BN - 1) / BN;           /* code tiles */

#pragma unroll
  for (int r = 0; r < 8; r++) {
    s_bq[r][tid] = INFINITY;
    s_bd[r][tid] = INFINITY;
    s_bi[r][tid] = 0x7FFFFFFF;
  }

  /* The rows this thread loads: its x row for the whole kernel, its code
   * row for the current code tile (NULL past the end). */
  const float *xrow = m0 + lr < M ? x + (m0 + lr) * (int64_t)D : nullptr;
  auto code_row = [&](int ct) -> const float * {
    const int code = ct * BN + lr;
    return code < C ? E + (int64_t)code * D : nullptr;
  };
  const float *erow = code_row(0);

  float acc[8][8];
  float4 ra = load_quad<kVec>(xrow, lk, D);
  float4 rb = load_quad<kVec>(erow, lk, D);
  store_quad(As[0], lk, lr, ra);
  store_quad(Bs[0], lk, lr, rb);
  __syncthreads();

  /* Step (ct, kt): code tile ct, dims kt * BK .. + BK - 1, from buffer buf. */
  int ct = 0, kt = 0, buf = 0;
  for (;;) {
    int next_kt = kt + 1, next_ct = ct;
    if (next_kt == nkt) {
      next_kt = 0;
      next_ct++;
      erow = code_row(next_ct);
    }
    const bool has_next = next_ct < nct;
    if (has_next) { /* next step's loads, in flight during the FMAs */
      ra = load_quad<kVec>(xrow, next_kt * BK + lk, D);
      rb = load_quad<kVec>(erow, next_kt * BK + lk, D);
    }
    if (kt == 0) {
#pragma unroll
      for (int r = 0; r < 8; r++)
#pragma unroll
        for (int c = 0; c < 8; c++) acc[r][c] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < BK; k++) {
      const float4 a0 = *reinterpret_cast<const float4 *>(&As[buf][k][ty * 4]);
      const float4 a1 =
          *reinterpret_cast<const float4 *>(&As[buf][k][64 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4 *>(&Bs[buf][k][tx * 4]);
      const float4 b1 =
          *reinterpret_cast<const float4 *>(&Bs[buf][k][64 + tx * 4]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int r = 0; r < 8; r++)
#pragma unroll
        for (int c = 0; c < 8; c++)
          acc[r][c] = __fmaf_rn(a[r], b[c], acc[r][c]);
    }

    if (kt == nkt - 1) { /* epilogue of code tile ct */
      const int c0 = ct * BN;
      /* Rows of this block that exist: an int, so the per-row checks below
       * are 32-bit (see the register note above the kernel). */
      const int mn = M - m0 < BM ? (int)(M - m0) : BM;
      float e2c[8];
#pragma unroll
      for (int c = 0; c < 8; c++) {
        const int code = c0 + tile_off(tx, c);
        e2c[c] = code < C ? __ldg(e2 + code) : 0.0f;
      }
#pragma unroll
      for (int r = 0; r < 8; r++) {
        const int lrow = tile_off(ty, r);
        const int64_t row = m0 + lrow;
        const float x2r = lrow < mn ? __ldg(x2 + row) : 0.0f;
        float bq = s_bq[r][tid], bd = s_bd[r][tid];
        int bi = s_bi[r][tid];
#pragma unroll
        for (int c = 0; c < 8; c++) {
          const int code = c0 + tile_off(tx, c);
          if (code >= C) continue;
          const float q =
              fmaxf(__fadd_rn(__fadd_rn(x2r, e2c[c]),
                              __fmul_rn(-2.0f, acc[r][c])),
                    VQC_VQ_DIST_CLAMP);
          if (kWriteDist && lrow < mn)
            neg_dist[row * C + code] = -__fsqrt_rn(q);
          if (q < bq) { /* rare: only q < bq can beat bd */
            const float sq = __fsqrt_rn(q);
            if (sq < bd) {
              bd = sq;
              bi = code;
            }
            bq = q;
          }
        }
        s_bq[r][tid] = bq;
        s_bd[r][tid] = bd;
        s_bi[r][tid] = bi;
      }
    }

    if (has_next) { /* buffer buf ^ 1 was last read before the last barrier */
      store_quad(As[buf ^ 1], lk, lr, ra);
      store_quad(Bs[buf ^ 1], lk, lr, rb);
    }
    __syncthreads();
    if (!has_next) break;
    ct = next_ct;
    kt = next_kt;
    buf ^= 1;
  }

  /* Combine the 16 threads of each row group: lanes differing in tx are one
   * half-warp (tid = ty * 16 + tx), so xor-shuffles 8, 4, 2, 1 stay in it. */
#pragma unroll
  for (int r = 0; r < 8; r++) {
    float d = s_bd[r][tid];
    int i = s_bi[r][tid];
#pragma unroll
    for (int o = 8; o >= 1; o >>= 1) {
      const float od = __shfl_xor_sync(0xFFFFFFFFu, d, o);
      const int oi = __shfl_xor_sync(0xFFFFFFFFu, i, o);
      if (od < d || (od == d && oi < i)) {
        d = od;
        i = oi;
      }
    }
    const int64_t row = m0 + tile_off(ty, r);
    if (tx == 0 && row < M) indices[row] = d < INFINITY ? (int64_t)i : 0;
  }
}

#endif /* VQC_KERNELS_VQ_NEAREST_KERNELS_CUH */
