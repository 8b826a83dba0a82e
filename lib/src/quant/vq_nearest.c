/* vq_nearest.c: the fast nearest-code search behind vqc_vq_nearest: an
 * AVX-512 and an AVX2 kernel chosen at run time, each bit-identical to the
 * scalar reference vq_nearest_ref (below). vq_nearest.h states the
 * function all of them compute.
 *
 * The kernels are a register-blocked matrix product with the argmin folded
 * into its epilogue, so the (M, C) distance matrix never goes to memory:
 *   - the codebook is packed once per call into panels of W codes (two
 *     vectors: W = 32 for AVX-512, 16 for AVX2), D-major: panel j holds
 *     E[j*W + l][d] at [d*W + l]; codes past C are zero and masked out;
 *   - rows are taken R at a time (12 for AVX-512, 6 for AVX2) and packed
 *     D-major as well, so the inner loop broadcasts x[r][d] from fixed
 *     offsets; their squared norms are a vector chain across the rows;
 *   - for each panel the R x W dot products accumulate in 2R vector
 *     registers: lane l of accumulator (r, k) runs acc = fma(x[r][d],
 *     E[c][d], acc) over d = 0..D-1 for code c = j*W + k*V + l, which is the
 *     reference's fmaf chain, rounded the same way at every step;
 *   - the epilogue forms the clamped squared distance q = max((x2 + e2)
 *     + (-2 dot), 1e-8) exactly as the reference does, and the answer is
 *     the lowest code whose sqrt(q) is smallest.
 *
 * The argmin without a sqrt per distance. The reference compares the final
 * distances sqrt(q), and distinct q can have the same float32 sqrt, so
 * comparing q alone could pick a higher code than the reference. But a
 * sqrt for every distance made the whole search about 25% slower here
 * (the divider takes about 12 cycles per 16 lanes, against 32 cycles of
 * FMAs for one vector of distances at D = 64). So each row keeps row_min,
 * the smallest q seen so far, and a vector of distances goes further only
 * if some lane has q < row_min: a rare event (for random data about 4
 * panels per row at C = 1024). Those lanes then take the sqrt and update,
 * per lane, the smallest distance seen and its code with a strict <, in
 * increasing code order. Why skipping is exact: let c* be the reference's
 * answer, the lowest code with the smallest distance. Every code before c*
 * has a larger distance, hence a larger q (sqrt is monotonic), so when c*
 * comes, q(c*) < row_min and its lane sees it. Every skipped code has
 * q >= row_min >= the final minimum, so its distance is >= the smallest;
 * if equal, a code with a lower index already holds that distance. The
 * pass across lanes at the end takes the smallest distance and, among
 * equal ones, the lowest code: c*.
 *
 * The AVX2 kernel screens more loosely and later (see nearest_avx2): a
 * lane passes if its unclamped d2 < row_min or is NaN, against a row_min
 * one panel old, and admit_panel_avx2 applies the exact test above to the
 * lanes that pass. Admitting a superset keeps the argument: only the codes
 * that reach the exact test can change a lane's best.
 *
 * Cost, for the benchmark's shape (D = 64): per 16 distances the AVX-512
 * kernel issues 64 FMAs and 5 other vector operations (add, multiply, add,
 * max, compare) plus two stores; measured, it runs at about 80% of the
 * core's FMA peak. The AVX2 kernel's inner loop alone (6 x 16 block, no
 * epilogue) runs at 0.95-0.97 of the FMA peak on the AMD EPYC of the
 * README; with the epilogue, the admissions (about 6% of the run for
 * random data) and the packing it runs at 0.65-0.70 there under load.
 * bench/bench_quantizers.c times it against sgemm. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/vq_internal.h"
#include "quant/vq_nearest.h"

#if VQ_X86_KERNELS
#include <immintrin.h>
#endif

/* ---- kernel choice */

bool vq_kernel_available(vq_kernel k) {
  switch (k) {
  case VQ_KERNEL_SCALAR:
    return true;
#if VQ_X86_KERNELS
  case VQ_KERNEL_AVX2:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  case VQ_KERNEL_AVX512:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
  case VQ_KERNEL_AVX512_BF16:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bf16");
#endif
  default:
    return false;
  }
}

vq_kernel vq_kernel_best(void) {
  if (vq_kernel_available(VQ_KERNEL_AVX512_BF16)) return VQ_KERNEL_AVX512_BF16;
  if (vq_kernel_available(VQ_KERNEL_AVX512)) return VQ_KERNEL_AVX512;
  if (vq_kernel_available(VQ_KERNEL_AVX2)) return VQ_KERNEL_AVX2;
  return VQ_KERNEL_SCALAR;
}

const char *vq_kernel_name(vq_kernel k) {
  switch (k) {
  case VQ_KERNEL_SCALAR: return "scalar";
  case VQ_KERNEL_AVX2: return "avx2";
  case VQ_KERNEL_AVX512: return "avx512";
  case VQ_KERNEL_AVX512_BF16: return "avx512bf16";
  default: return "?";
  }
}

#if VQ_X86_KERNELS

/* ---- packing (plain C, shared by both kernels) */

/* E (C, D) -> panels (nblocks, D, W): panels[(j*D + d)*W + l] = E[j*W+l][d],
 * zero for codes >= C. */
static void pack_codes(const float *E, int64_t C, int64_t D, int W,
                       float *panels) {
  const int64_t nblocks = (C + W - 1) / W;
  for (int64_t j = 0; j < nblocks; j++) {
    float *p = panels + j * D * W;
    for (int l = 0; l < W; l++) {
      const int64_t c = j * W + l;
      for (int64_t d = 0; d < D; d++)
        p[d * W + l] = c < C ? E[c * D + d] : 0.0f;
    }
  }
}

/* Rows xr (rows, D) -> xpack (D, V): xpack[d*V + r] = xr[r][d], zero for
 * r >= rows (the lanes past the block and the missing rows of the last
 * block, whose results are computed and dropped). */
static void pack_rows(const float *xr, int64_t rows, int64_t D, int V,
                      float *xpack) {
  for (int r = 0; r < V; r++) {
    if (r < rows)
      for (int64_t d = 0; d < D; d++) xpack[d * V + r] = xr[r * D + d];
    else
      for (int64_t d = 0; d < D; d++) xpack[d * V + r] = 0.0f;
  }
}

/* ---- AVX-512F: 16 lanes, 12 rows x 32 codes per block */

enum { K512_V = 16, K512_W = 32, K512_R = 12 };

/* e2 (nblocks * 32): the squared norm of every packed code, one fma chain
 * per lane. */
__attribute__((target("avx512f"))) static void
e2_avx512(const float *panels, int64_t nblocks, int64_t D, float *e2) {
  for (int64_t j = 0; j < nblocks; j++) {
    const float *p = panels + j * D * K512_W;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d++) {
      const __m512 e0 = _mm512_load_ps(p + d * K512_W);
      const __m512 e1 = _mm512_load_ps(p + d * K512_W + K512_V);
      a0 = _mm512_fmadd_ps(e0, e0, a0);
      a1 = _mm512_fmadd_ps(e1, e1, a1);
    }
    _mm512_store_ps(e2 + j * K512_W, a0);
    _mm512_store_ps(e2 + j * K512_W + K512_V, a1);
  }
}

/* q = max((x2 + e2) + (-2 * dot), clamp): the reference's operations in its
 * order (maxps returns its second operand for a NaN, as fmaxf does). */
__attribute__((target("avx512f"), always_inline)) static inline __m512
dist2_avx512(__m512 x2, __m512 e2, __m512 dot) {
  const __m512 d2 = _mm512_add_ps(_mm512_add_ps(x2, e2),
                                  _mm512_mul_ps(_mm512_set1_ps(-2.0f), dot));
  return _mm512_max_ps(d2, _mm512_set1_ps(VQC_VQ_DIST_CLAMP));
}

/* -sqrt(q), the reference's -dist (the sign flipped by its bit). */
__attribute__((target("avx512f"), always_inline)) static inline __m512
neg_sqrt_avx512(__m512 q) {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(_mm512_sqrt_ps(q)),
                       _mm512_set1_epi32((int32_t)0x80000000u)));
}

/* The rare path (see the top of the file): lanes m of q (codes `codes`)
 * have q < row_min. Each of them replaces its lane's best on a strict <
 * of the final distance; row_min takes their smallest q. */
__attribute__((target("avx512f"), always_inline)) static inline void
admit_avx512(__m512 q, __mmask16 m, __m512i codes, __m512 *best,
             __m512i *best_c, float *row_min) {
  const __m512 s = _mm512_sqrt_ps(q);
  const __mmask16 better = _mm512_mask_cmp_ps_mask(m, s, *best, _CMP_LT_OQ);
  *best = _mm512_mask_mov_ps(*best, better, s);
  *best_c = _mm512_mask_mov_epi32(*best_c, better, codes);
  const float qmin = _mm512_mask_reduce_min_ps(m, q); /* +inf if m is empty */
  *row_min = qmin < *row_min ? qmin : *row_min;
}

/* The admissions of one panel, whose codes start at `first`: for each row
 * with admitted lanes (pm), the lane updates from the squared distances pq,
 * vector 0 before vector 1 so that each lane sees its codes in increasing
 * order. Called one panel late (see nearest_avx512). Which rows have
 * admissions varies with the data and cannot be predicted, so the rows are
 * listed without branches first; a branch per row would mispredict about
 * four times per row of x. */
__attribute__((target("avx512f"))) static void
admit_panel_avx512(const float (*pq)[2][K512_V], const __mmask16 (*pm)[2],
                   int64_t first, __m512 *best, __m512i *best_c,
                   float *row_min) {
  int list[K512_R], n = 0;
  for (int r = 0; r < K512_R; r++) {
    list[n] = r;
    n += (pm[r][0] | pm[r][1]) != 0;
  }
  if (n == 0) return; /* the usual case */
  const __m512i c0 = _mm512_add_epi32(
      _mm512_set1_epi32((int32_t)first),
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m512i c1 = _mm512_add_epi32(c0, _mm512_set1_epi32(K512_V));
  for (int k = 0; k < n; k++) {
    const int r = list[k]; /* an empty mask below changes nothing */
    admit_avx512(_mm512_load_ps(pq[r][0]), pm[r][0], c0, &best[r], &best_c[r],
                 &row_min[r]);
    admit_avx512(_mm512_load_ps(pq[r][1]), pm[r][1], c1, &best[r], &best_c[r],
                 &row_min[r]);
  }
}

/* x (M, D), panels (nblocks, D, 32) and e2 (nblocks * 32) from above;
 * xpack (D, 16) scratch; indices (M) out; neg_dist (M, C) out or NULL. */
__attribute__((target("avx512f"))) static void
nearest_avx512(const float *x, int64_t M, int64_t C, int64_t D,
               const float *panels, const float *e2, float *xpack,
               int64_t *indices, float *neg_dist) {
  const int64_t nblocks = (C + K512_W - 1) / K512_W;
  /* Codes in the last panel (1..32) and the lanes that hold them. */
  const int64_t tail = C - (nblocks - 1) * K512_W;
  const __mmask16 tail0 =
      tail >= 16 ? 0xFFFF : (__mmask16)((1u << tail) - 1u);
  const __mmask16 tail1 =
      tail <= 16   ? 0
      : tail >= 32 ? 0xFFFF
                   : (__mmask16)((1u << (tail - 16)) - 1u);
  __attribute__((aligned(64))) float x2[K512_V];
  float row_min[K512_R];  /* per row: the smallest q admitted so far */
  __m512 best[K512_R];    /* per row: each lane's smallest distance so far */
  __m512i best_c[K512_R]; /* per row: its code */
  /* The last panel's squared distances and admitted lanes, waiting. */
  __attribute__((aligned(64))) float pend_q[K512_R][2][K512_V];
  __mmask16 pend_m[K512_R][2];

  for (int64_t i0 = 0; i0 < M; i0 += K512_R) {
    const int64_t rows = M - i0 < K512_R ? M - i0 : K512_R;
    pack_rows(x + i0 * D, rows, D, K512_V, xpack);
    __m512 xx = _mm512_setzero_ps(); /* lane r: |x_r|^2, the same fma chain */
    for (int64_t d = 0; d < D; d++) {
      const __m512 v = _mm512_load_ps(xpack + d * K512_V);
      xx = _mm512_fmadd_ps(v, v, xx);
    }
    _mm512_store_ps(x2, xx);
    for (int r = 0; r < K512_R; r++) {
      row_min[r] = INFINITY; /* q is never NaN: every q < inf enters */
      best[r] = _mm512_set1_ps(INFINITY);
      best_c[r] = _mm512_setzero_si512();
    }

    for (int64_t j = 0; j < nblocks; j++) {
      const float *p = panels + j * D * K512_W;
      /* The 12 x 32 block of dot products: 24 accumulators, 2 code
       * vectors, one broadcast row value: 27 of 32 registers. */
      __m512 acc[K512_R][2];
#pragma GCC unroll 12
      for (int r = 0; r < K512_R; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
      for (int64_t d = 0; d < D; d++) {
        const __m512 e0 = _mm512_load_ps(p + d * K512_W);
        const __m512 e1 = _mm512_load_ps(p + d * K512_W + K512_V);
        const float *xd = xpack + d * K512_V;
#pragma GCC unroll 12
        for (int r = 0; r < K512_R; r++) {
          const __m512 xb = _mm512_set1_ps(xd[r]);
          acc[r][0] = _mm512_fmadd_ps(xb, e0, acc[r][0]);
          acc[r][1] = _mm512_fmadd_ps(xb, e1, acc[r][1]);
        }
      }

      /* The previous panel's admissions, one panel late: their masks were
       * computed long ago, so the branches resolve at once. Taken straight
       * after that panel's epilogue, they would wait for its FMA chains,
       * and each misprediction would throw away the next panel's work
       * already under way (measured: about 4% of the run). */
      if (j > 0)
        admit_panel_avx512(pend_q, pend_m, (j - 1) * K512_W, best, best_c,
                           row_min);

      /* Epilogue. Lanes past C (last panel only) are masked out of the
       * compares and the stores: their zero codes could otherwise win,
       * e.g. with an inf in x. */
      const bool last = j == nblocks - 1;
      const __mmask16 v0 = last ? tail0 : 0xFFFF, v1 = last ? tail1 : 0xFFFF;
      const __m512 e2v0 = _mm512_load_ps(e2 + j * K512_W);
      const __m512 e2v1 = _mm512_load_ps(e2 + j * K512_W + K512_V);
#pragma GCC unroll 12
      for (int r = 0; r < K512_R; r++) {
        const __m512 x2b = _mm512_set1_ps(x2[r]);
        const __m512 q0 = dist2_avx512(x2b, e2v0, acc[r][0]);
        const __m512 q1 = dist2_avx512(x2b, e2v1, acc[r][1]);
        if (neg_dist && r < rows) {
          float *out = neg_dist + (i0 + r) * C + j * K512_W;
          _mm512_mask_storeu_ps(out, v0, neg_sqrt_avx512(q0));
          _mm512_mask_storeu_ps(out + K512_V, v1, neg_sqrt_avx512(q1));
        }
        /* Against row_min over the panels before this one, whose
         * admissions have all been taken; the lanes that pass wait for the
         * next panel (pend_q, pend_m). */
        const __m512 lim = _mm512_set1_ps(row_min[r]);
        pend_m[r][0] = _mm512_mask_cmp_ps_mask(v0, q0, lim, _CMP_LT_OQ);
        pend_m[r][1] = _mm512_mask_cmp_ps_mask(v1, q1, lim, _CMP_LT_OQ);
        _mm512_store_ps(pend_q[r][0], q0);
        _mm512_store_ps(pend_q[r][1], q1);
      }
    }
    admit_panel_avx512(pend_q, pend_m, (nblocks - 1) * K512_W, best, best_c,
                       row_min);

    /* Across lanes: the smallest distance, then the lowest code among the
     * lanes holding it (without branches: which lane wins is random). A
     * lane that never took a code holds (inf, 0), the reference's answer
     * when every distance is inf. */
    for (int r = 0; r < rows; r++) {
      const __m512 lo = _mm512_set1_ps(_mm512_reduce_min_ps(best[r]));
      const __mmask16 at = _mm512_cmp_ps_mask(best[r], lo, _CMP_EQ_OQ);
      indices[i0 + r] = _mm512_mask_reduce_min_epi32(at, best_c[r]);
    }
  }
}

/* ---- AVX2 + FMA: 8 lanes, 6 rows x 16 codes per block (the same design
 * as the AVX-512 kernel, with vector masks instead of mask registers) */

enum { K256_V = 8, K256_W = 16, K256_R = 6 };

__attribute__((target("avx2,fma"))) static void
e2_avx2(const float *panels, int64_t nblocks, int64_t D, float *e2) {
  for (int64_t j = 0; j < nblocks; j++) {
    const float *p = panels + j * D * K256_W;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d++) {
      const __m256 e0 = _mm256_load_ps(p + d * K256_W);
      const __m256 e1 = _mm256_load_ps(p + d * K256_W + K256_V);
      a0 = _mm256_fmadd_ps(e0, e0, a0);
      a1 = _mm256_fmadd_ps(e1, e1, a1);
    }
    _mm256_store_ps(e2 + j * K256_W, a0);
    _mm256_store_ps(e2 + j * K256_W + K256_V, a1);
  }
}

/* The smallest of the 8 lanes (none is NaN here). */
__attribute__((target("avx2,fma"), always_inline)) static inline float
min_of_lanes_avx2(__m256 v) {
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  m = _mm_min_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

/* As admit_avx512 without the row_min update (the caller does it once for
 * both vectors of a row): m is a vector mask (all-ones lanes), codes the
 * lanes' code numbers. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
admit_lanes_avx2(__m256 q, __m256 m, __m256i codes, __m256 *best,
                 __m256i *best_c) {
  const __m256 s = _mm256_sqrt_ps(q);
  const __m256 better = _mm256_and_ps(_mm256_cmp_ps(s, *best, _CMP_LT_OQ), m);
  *best = _mm256_blendv_ps(*best, s, better);
  *best_c = _mm256_castps_si256(_mm256_blendv_ps(
      _mm256_castsi256_ps(*best_c), _mm256_castsi256_ps(codes), better));
}

/* The admissions of one panel, whose codes start at `first`: pd (6, 2, 8)
 * the unclamped squared distances d2 of the panel's codes, lim (6) each
 * row's row_min when the panel was screened. A lane is admitted when its
 * q = max(d2, clamp) < lim and its code is < C; rows without any are
 * skipped. Vector 0 before vector 1, so that each lane sees its codes in
 * increasing order. Called only for panels where the screen in
 * nearest_avx2 let some lane through (a superset of the admitted ones). */
__attribute__((target("avx2,fma"), noinline)) static void
admit_panel_avx2(const float (*pd)[2][K256_V], const float *lim, int64_t C,
                 int64_t first, __m256 *best, __m256i *best_c,
                 float *row_min) {
  const __m256i c0 =
      _mm256_add_epi32(_mm256_set1_epi32((int32_t)first),
                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i c1 = _mm256_add_epi32(c0, _mm256_set1_epi32(K256_V));
  const __m256i cv = _mm256_set1_epi32((int32_t)C);
  const __m256 v0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(cv, c0));
  const __m256 v1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(cv, c1));
  const __m256 clamp = _mm256_set1_ps(VQC_VQ_DIST_CLAMP);
  __m256 q[K256_R][2], m[K256_R][2];
  int list[K256_R], n = 0;
  for (int r = 0; r < K256_R; r++) {
    const __m256 l = _mm256_broadcast_ss(lim + r);
    q[r][0] = _mm256_max_ps(_mm256_load_ps(pd[r][0]), clamp);
    q[r][1] = _mm256_max_ps(_mm256_load_ps(pd[r][1]), clamp);
    m[r][0] = _mm256_and_ps(_mm256_cmp_ps(q[r][0], l, _CMP_LT_OQ), v0);
    m[r][1] = _mm256_and_ps(_mm256_cmp_ps(q[r][1], l, _CMP_LT_OQ), v1);
    /* The rows with admitted lanes, listed without a branch per row:
     * which rows they are is random, and a branch each would mispredict. */
    list[n] = r;
    n += _mm256_movemask_ps(_mm256_or_ps(m[r][0], m[r][1])) != 0;
  }
  const __m256 inf = _mm256_set1_ps(INFINITY);
  for (int k = 0; k < n; k++) {
    const int r = list[k];
    admit_lanes_avx2(q[r][0], m[r][0], c0, &best[r], &best_c[r]);
    admit_lanes_avx2(q[r][1], m[r][1], c1, &best[r], &best_c[r]);
    /* row_min: the smallest admitted q of the row, one pass across lanes
     * for both vectors (+inf where a lane was not admitted). */
    const float qmin = min_of_lanes_avx2(
        _mm256_min_ps(_mm256_blendv_ps(inf, q[r][0], m[r][0]),
                      _mm256_blendv_ps(inf, q[r][1], m[r][1])));
    row_min[r] = qmin < row_min[r] ? qmin : row_min[r];
  }
}

/* Same contract as nearest_avx512, with panels (nblocks, D, 16), e2
 * (nblocks * 16) and xpack (D, 8). One difference in the schedule: panel
 * j's distances are compared with row_min before panel j-1's admissions
 * are taken (they are taken just after, from the other half of a double
 * buffer). A row_min that lags by one panel is never smaller than the
 * current one, so it admits a superset of the lanes, which keeps the
 * argument at the top of the file; and the accumulators are dead by the
 * time admit_panel_avx2 is called, so the call (rare) costs no spills of
 * them in every panel, and its branch depends on values computed a whole
 * panel earlier. Measured against the order "admissions of j-1, then
 * panel j's epilogue": see the commit that made this change. */
__attribute__((target("avx2,fma"))) static void
nearest_avx2(const float *x, int64_t M, int64_t C, int64_t D,
             const float *panels, const float *e2, float *xpack,
             int64_t *indices, float *neg_dist) {
  const int64_t nblocks = (C + K256_W - 1) / K256_W;
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i cv = _mm256_set1_epi32((int32_t)C);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __attribute__((aligned(32))) float x2[K256_V];
  float row_min[K256_R];
  __m256 best[K256_R];
  __m256i best_c[K256_R];
  /* The last two panels (panel j in half j % 2): their unclamped squared
   * distances, each row's row_min they were screened against, and whether
   * any lane passed the screen. */
  __attribute__((aligned(32))) float pend_d[2][K256_R][2][K256_V];
  float pend_lim[2][K256_R];
  int pend_any[2];

  for (int64_t i0 = 0; i0 < M; i0 += K256_R) {
    const int64_t rows = M - i0 < K256_R ? M - i0 : K256_R;
    pack_rows(x + i0 * D, rows, D, K256_V, xpack);
    __m256 xx = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d++) {
      const __m256 v = _mm256_load_ps(xpack + d * K256_V);
      xx = _mm256_fmadd_ps(v, v, xx);
    }
    _mm256_store_ps(x2, xx);
    for (int r = 0; r < K256_R; r++) {
      row_min[r] = INFINITY;
      best[r] = _mm256_set1_ps(INFINITY);
      best_c[r] = _mm256_setzero_si256();
    }

    for (int64_t j = 0; j < nblocks; j++) {
      const float *p = panels + j * D * K256_W;
      /* 12 accumulators, 2 code vectors, 1 broadcast: 15 of 16 registers. */
      __m256 acc[K256_R][2];
#pragma GCC unroll 6
      for (int r = 0; r < K256_R; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
      for (int64_t d = 0; d < D; d++) {
        const __m256 e0 = _mm256_load_ps(p + d * K256_W);
        const __m256 e1 = _mm256_load_ps(p + d * K256_W + K256_V);
        const float *xd = xpack + d * K256_V;
#pragma GCC unroll 6
        for (int r = 0; r < K256_R; r++) {
          const __m256 xb = _mm256_broadcast_ss(xd + r);
          acc[r][0] = _mm256_fmadd_ps(xb, e0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(xb, e1, acc[r][1]);
        }
      }

      /* Epilogue: the screen. d2 = (x2 + e2) + (-2 dot), the reference's
       * operations; a lane passes if d2 < row_min or d2 is NaN (NGE_UQ),
       * which every lane with max(d2, clamp) < row_min does (a NaN d2
       * clamps to 1e-8 in the reference and can win). Lanes past C (last
       * panel) may pass too. admit_panel_avx2 applies the exact test, so
       * the screen only has to let through a superset; it leaves out the
       * clamp, the lane mask and the mask stores of the exact test, which
       * would run for every panel. */
      const int h = (int)(j & 1);
      const __m256 e2v0 = _mm256_load_ps(e2 + j * K256_W);
      const __m256 e2v1 = _mm256_load_ps(e2 + j * K256_W + K256_V);
      const __m256 m2 = _mm256_set1_ps(-2.0f);
      __m256 any = _mm256_setzero_ps();
#pragma GCC unroll 6
      for (int r = 0; r < K256_R; r++) {
        const __m256 x2b = _mm256_broadcast_ss(x2 + r);
        const __m256 d0 = _mm256_add_ps(_mm256_add_ps(x2b, e2v0),
                                        _mm256_mul_ps(m2, acc[r][0]));
        const __m256 d1 = _mm256_add_ps(_mm256_add_ps(x2b, e2v1),
                                        _mm256_mul_ps(m2, acc[r][1]));
        if (neg_dist && r < rows) {
          const __m256i c0 =
              _mm256_add_epi32(_mm256_set1_epi32((int32_t)(j * K256_W)), iota);
          const __m256i c1 = _mm256_add_epi32(c0, _mm256_set1_epi32(K256_V));
          const __m256 clamp = _mm256_set1_ps(VQC_VQ_DIST_CLAMP);
          float *out = neg_dist + (i0 + r) * C + j * K256_W;
          _mm256_maskstore_ps(
              out, _mm256_cmpgt_epi32(cv, c0),
              _mm256_xor_ps(_mm256_sqrt_ps(_mm256_max_ps(d0, clamp)), sign));
          _mm256_maskstore_ps(
              out + K256_V, _mm256_cmpgt_epi32(cv, c1),
              _mm256_xor_ps(_mm256_sqrt_ps(_mm256_max_ps(d1, clamp)), sign));
        }
        const __m256 lim = _mm256_broadcast_ss(row_min + r);
        pend_lim[h][r] = row_min[r];
        _mm256_store_ps(pend_d[h][r][0], d0);
        _mm256_store_ps(pend_d[h][r][1], d1);
        any = _mm256_or_ps(any, _mm256_or_ps(_mm256_cmp_ps(d0, lim, _CMP_NGE_UQ),
                                             _mm256_cmp_ps(d1, lim, _CMP_NGE_UQ)));
      }
      pend_any[h] = _mm256_movemask_ps(any);

      /* The previous panel's admissions, now that this one's distances
       * are out of the registers. */
      if (j > 0 && pend_any[h ^ 1])
        admit_panel_avx2(pend_d[h ^ 1], pend_lim[h ^ 1], C, (j - 1) * K256_W,
                         best, best_c, row_min);
    }
    const int hl = (int)((nblocks - 1) & 1);
    if (pend_any[hl])
      admit_panel_avx2(pend_d[hl], pend_lim[hl], C, (nblocks - 1) * K256_W,
                       best, best_c, row_min);

    /* Across lanes, as in the AVX-512 kernel: the lowest code among the
     * lanes holding the smallest distance. */
    for (int r = 0; r < rows; r++) {
      const __m256 lo = _mm256_set1_ps(min_of_lanes_avx2(best[r]));
      const __m256i at =
          _mm256_castps_si256(_mm256_cmp_ps(best[r], lo, _CMP_EQ_OQ));
      const __m256i c = _mm256_blendv_epi8(_mm256_set1_epi32(INT32_MAX),
                                           best_c[r], at);
      __m128i m = _mm_min_epi32(_mm256_castsi256_si128(c),
                                _mm256_extracti128_si256(c, 1));
      m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
      m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
      indices[i0 + r] = _mm_cvtsi128_si32(m);
    }
  }
}

/* Packs the codebook for kernel k (AVX2 or AVX-512) and runs it. */
static vqc_status nearest_simd(vq_kernel k, const float *x, int64_t M,
                               const float *E, int64_t C, int64_t D,
                               int64_t *indices, float *neg_dist) {
  const int W = k == VQ_KERNEL_AVX512 ? K512_W : K256_W;
  const int V = W / 2;
  const int64_t nblocks = (C + W - 1) / W;
  float *panels = vq_alloc_floats(nblocks * D * W); /* (nblocks, D, W) */
  float *e2 = vq_alloc_floats(nblocks * W);         /* (nblocks * W) */
  float *xpack = vq_alloc_floats(D * V);            /* (D, V) */
  vqc_status s = VQC_OK;
  if (!panels || !e2 || !xpack) {
    s = vqc_error(VQC_ENOMEM, "vq_nearest: packing %lld codes of %lld floats",
                  (long long)C, (long long)D);
    goto done;
  }
  pack_codes(E, C, D, W, panels);
  if (k == VQ_KERNEL_AVX512) {
    e2_avx512(panels, nblocks, D, e2);
    nearest_avx512(x, M, C, D, panels, e2, xpack, indices, neg_dist);
  } else {
    e2_avx2(panels, nblocks, D, e2);
    nearest_avx2(x, M, C, D, panels, e2, xpack, indices, neg_dist);
  }
done:
  free(panels);
  free(e2);
  free(xpack);
  return s;
}

#endif /* VQ_X86_KERNELS */

/* ---- entry point */

vqc_status vq_nearest_with(vq_kernel k, const float *x, int64_t M,
                           const float *E, int64_t C, int64_t D,
                           int64_t *indices, float *neg_dist) {
  VQC_TRY(vq_check_rows("vq_nearest", x, M));
  if (C <= 0 || D <= 0 || !E || (M > 0 && !indices))
    return vqc_error(VQC_EINVAL, "vq_nearest: C %lld, D %lld, E %p, indices %p",
                     (long long)C, (long long)D, (const void *)E,
                     (void *)indices);
  if (!vq_kernel_available(k))
    return vqc_error(VQC_EUNSUPPORTED,
                     "vq_nearest: the %s kernel does not run on this CPU",
                     vq_kernel_name(k));
#if VQ_X86_KERNELS
  /* The SIMD kernels hold code numbers in int32 lanes; a codebook of 2^31
   * codes (8 GiB per float of D) takes the reference, which computes the
   * same values. */
  if (k != VQ_KERNEL_SCALAR && C <= INT32_MAX - K512_W) {
    if (M == 0) return VQC_OK;
    if (k == VQ_KERNEL_AVX512_BF16 && !neg_dist) {
      int64_t apart;
      return vq_nearest_screen(x, M, E, C, D, indices, &apart);
    }
    /* Every distance asked for: nothing to screen out. */
    if (k == VQ_KERNEL_AVX512_BF16) k = VQ_KERNEL_AVX512;
    return nearest_simd(k, x, M, E, C, D, indices, neg_dist);
  }
#endif
  return vq_nearest_ref(x, M, E, C, D, indices, neg_dist);
}

/* ---- the reference and the public entry point */

/* Sequential fused multiply-add chain over d: acc = fmaf(a[d], b[d], acc)
 * from acc = 0. This is the definition of the dot products and squared
 * norms of the distance (see vq_nearest.h): fmaf rounds once per step
 * whatever -ffp-contract says, and the SIMD kernels (vq_nearest.c) run the
 * very same chain in each vector lane, so both give identical bits. */
static float dot_fma(const float *a, const float *b, int64_t D) {
  float acc = 0.0f;
  for (int64_t d = 0; d < D; d++) acc = fmaf(a[d], b[d], acc);
  return acc;
}

vqc_status vqc_vq_nearest(const float *x, int64_t M, const float *E,
                          int64_t C, int64_t D, int64_t *indices,
                          float *neg_dist) {
  /* The fastest kernel this CPU has; each one computes vq_nearest_ref's
   * function bit for bit (tests/unit/test_vq_nearest.c). */
  return vq_nearest_with(vq_kernel_best(), x, M, E, C, D, indices, neg_dist);
}

vqc_status vq_nearest_ref(const float *x, int64_t M, const float *E,
                          int64_t C, int64_t D, int64_t *indices,
                          float *neg_dist) {
  float *e2 = malloc((size_t)C * sizeof(float)); /* |E_c|^2, freed below */
  if (!e2) return vqc_error(VQC_ENOMEM, "vq_nearest: %lld codes", (long long)C);
  /* float32 chains in index order, as torch sums short rows: worst
   * difference from upstream on the golden cases 2.6e-7 (plain multiply-
   * then-add chains gave 2.3e-7, sums in double 4.8e-7). */
  for (int64_t c = 0; c < C; c++) e2[c] = dot_fma(E + c * D, E + c * D, D);
  for (int64_t i = 0; i < M; i++) {
    const float *xi = x + i * D;
    const float x2 = dot_fma(xi, xi, D);
    int64_t best = 0;
    float best_dist = INFINITY;
    for (int64_t c = 0; c < C; c++) {
      const float dot = dot_fma(xi, E + c * D, D);
      /* Expanded form, as upstream's cdist: (x2 + e2) + (-2 dot), then the
       * clamp and the sqrt. Ties are decided on this final value. */
      const float d2 = (x2 + e2[c]) + (-2.0f * dot);
      const float dist = sqrtf(fmaxf(d2, VQC_VQ_DIST_CLAMP));
      if (neg_dist) neg_dist[i * C + c] = -dist;
      if (dist < best_dist) { /* strict: the lowest index keeps a tie */
        best_dist = dist;
        best = c;
      }
    }
    indices[i] = best;
  }
  free(e2);
  return VQC_OK;
}
