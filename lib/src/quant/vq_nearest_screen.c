/* vq_nearest_screen.c: the nearest-code search with a bfloat16 screen, the
 * kernel VQ_KERNEL_AVX512_BF16 (AVX-512F + AVX512_BF16). Same answers as
 * vq_nearest_ref, bit for bit (vq_nearest.h), from about half the
 * multiply-add work of the exact AVX-512 kernel (vq_nearest.c).
 *
 * The idea. The answer for row x is decided by float32 chains of D fused
 * multiply-adds per code, and no one of them can be skipped or reordered.
 * But most codes are nowhere near the answer, and a cheaper, approximate
 * distance with a proven error bound tells which: VDPBF16PS multiplies
 * pairs of bfloat16 values (8-bit significands) and adds them into float32
 * lanes, 32 products per instruction where an FMA does 16. So:
 *   1. the screen: for every code c, a(c) ~ the reference's squared
 *      distance q(c), from the bfloat16 roundings x^ and e^ of the row and
 *      the code; |a(c) - q(c)| <= G for a bound G of the row (below);
 *   2. the candidates: the codes with a(c) <= thr(a_min) (below), which
 *      include the reference's answer;
 *   3. the exact step: the reference's own float32 chains for those codes
 *      only (usually one or two per row), in increasing code order, the
 *      lowest code of smallest sqrt(max(q, 1e-8)) winning as in the
 *      reference.
 * A row whose candidates do not fit CAND_CAP (codes at nearly equal
 * distances), or whose values are not finite or too large for the bound,
 * is answered by the exact AVX-512 kernel instead: slower, never wrong.
 * When most of the first rows are (data the screen cannot decide), the
 * rest of the call goes to the exact kernel without screening.
 *
 * The bound. The reference computes q = fl(s + (-2 dot)) with
 * s = fl(x2 + e2) and dot the chain of D fmaf; the screen computes
 * a = fl(s + (-2) dbf) (one FMA) with the same s and dbf the bfloat16 dot
 * product. So |q - a| <= 2 |dot - dbf| + u |s - 2 dot| + u |s - 2 dbf|
 * (u = 2^-24, one rounding each), and with X = |x|, X^ = |x^|, rx =
 * |x - x^|, and per code Ec = |e|, Ec^ = |e^|, rc = |e - e^| (Euclidean
 * norms; Cauchy-Schwarz throughout):
 *   |dot - x.e|     <= gD X Ec                 (gD = D u / (1 - D u))
 *   |dbf - x^.e^|   <= g2 X^ Ec^ + 4 D 2^-126  (D roundings of at most 2u,
 *                      and inputs and outputs below 2^-126 flushed to zero)
 *   |x^.e^ - x.e|   <= rx Ec + X^ rc
 * and |s|, |dot|, |dbf| are bounded by the same norms. G takes each code
 * term at its largest over the codebook and adds 1% (bound_of_row). The
 * values must be finite and the norms at most 1e17, so that nothing on
 * either side overflows; other rows go to the exact kernel. So does a call
 * made while the thread rounds other than to nearest (fegetround). Flushing
 * subnormals to zero (FTZ/DAZ, as torch.set_flush_denormal sets) moves a
 * result by less than 2^-126, which the absolute terms cover.
 *
 * The threshold. Let m be the code of smallest a, and c* the reference's
 * answer. q(m) <= a(m) + G, and the reference's final distances satisfy
 * fl(sqrt(Q(c*))) <= fl(sqrt(Q(m))) for Q = max(q, 1e-8), which allows
 * Q(c*) > Q(m) only when both round to the same float, i.e. by a factor of
 * at most (1 + u)^2 / (1 - u)^2 < 1 + 4.01 u. Hence
 *   a(c*) <= q(c*) + G <= max(a(m) + G, 1e-8) (1 + 4.01 u) + G,
 * and thr(m) = (max(m + G, 1e-8) + G) (1 + 2^-18) covers that and the
 * three roundings of computing it in float32. thr is non-decreasing in m
 * and above m, so a running minimum (never below the final one) gives a
 * threshold that admits c* whenever it is tested, and pruning a row's
 * candidates against a later, lower threshold never drops c*.
 *
 * The blocks are the exact kernel's: 12 rows x 32 codes, 24 accumulators,
 * codes packed once per call D-major as bfloat16 pairs (one 32-bit word per
 * two dimensions), rows packed per block. The screen compares each panel
 * against a threshold one panel old (a superset, as in the exact kernel)
 * and takes the panel's admissions while the next panel's products run.
 * tests/unit/test_vq_nearest.c runs this kernel through the same cases as
 * the others, and cases that reach its candidate limit and its fallbacks;
 * bench/bench_quantizers.c times it against sgemm and the exact kernel. */
#include <fenv.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/vq_nearest.h"
#include "vqc/vq.h"

#if VQ_HAVE_BF16_KERNEL
#include <immintrin.h>

enum {
  SV = 16,        /* float32 lanes in a vector */
  SW = 32,        /* codes per panel: two vectors */
  SR = 12,        /* rows per block */
  CAND_CAP = 64,  /* candidates a row may hold before it falls back */
  SCREEN_TRIAL_BLOCKS = 8, /* blocks screened before giving up on a call */
};

/* Largest norm of a row or code that the screen takes: every quantity of
 * either side stays below (2e17)^2 = 4e34, far from float32's 3.4e38. */
#define SCREEN_NORM_MAX 1e17

/* ---- bfloat16 */

/* v rounded to the nearest bfloat16 (ties to even), with values below
 * 2^-126 (zeros, subnormals) made +-0, as VDPBF16PS reads its inputs.
 * v finite and |v| <= 1e17: no overflow. */
static uint16_t to_bf16(float v) {
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  if ((b & 0x7f800000u) == 0) return (uint16_t)((b >> 16) & 0x8000u);
  b += 0x7fffu + ((b >> 16) & 1u);
  return (uint16_t)(b >> 16);
}

static float from_bf16(uint16_t h) {
  const uint32_t b = (uint32_t)h << 16;
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

/* ---- the codebook, packed once per call */

typedef struct screen_codes {
  int64_t C, D, D2, nblocks; /* D2 = ceil(D / 2) bfloat16 pairs per vector */
  uint32_t *panels; /* (nblocks, D2, 32): word (j, k, l) = e^[j*32 + l] at
                       dimensions 2k (low half) and 2k + 1 (high half) */
  float *e2;        /* (nblocks * 32): the reference's e2 chain; NaN past C */
  double e_max;     /* max over codes of |e| */
  double eh_max;    /* max over codes of |e^| */
  double r_max;     /* max over codes of |e - e^| */
} screen_codes;

/* n floats or words, 64-byte aligned; free with free(). */
static void *alloc_aligned(int64_t n) {
  const size_t bytes = ((size_t)(n > 0 ? n : 1) * 4 + 63) & ~(size_t)63;
  return aligned_alloc(64, bytes);
}

/* Fills sc from E (C, D). 1 when the codebook suits the screen (finite,
 * norms <= SCREEN_NORM_MAX), 0 when it does not, -1 out of memory. */
static int pack_screen_codes(const float *E, int64_t C, int64_t D,
                             screen_codes *sc) {
  sc->C = C;
  sc->D = D;
  sc->D2 = (D + 1) / 2;
  sc->nblocks = (C + SW - 1) / SW;
  sc->panels = alloc_aligned(sc->nblocks * sc->D2 * SW);
  sc->e2 = alloc_aligned(sc->nblocks * SW);
  if (!sc->panels || !sc->e2) return -1;
  sc->e_max = sc->eh_max = sc->r_max = 0.0;
  for (int64_t c = 0; c < sc->nblocks * SW; c++) {
    uint32_t *p = sc->panels + (c / SW) * sc->D2 * SW + c % SW;
    if (c >= C) {
      for (int64_t k = 0; k < sc->D2; k++) p[k * SW] = 0;
      sc->e2[c] = NAN; /* a = NaN: never <= a threshold */
      continue;
    }
    const float *e = E + c * D;
    float e2 = 0.0f;
    double n = 0.0, nh = 0.0, r = 0.0;
    for (int64_t d = 0; d < D; d++) {
      if (!isfinite(e[d])) return 0;
      e2 = fmaf(e[d], e[d], e2);
      const float h = from_bf16(to_bf16(e[d]));
      n += (double)e[d] * e[d];
      nh += (double)h * h;
      r += ((double)e[d] - h) * ((double)e[d] - h);
    }
    if (!(n <= SCREEN_NORM_MAX * SCREEN_NORM_MAX)) return 0;
    for (int64_t k = 0; k < sc->D2; k++) {
      const uint32_t lo = to_bf16(e[2 * k]);
      const uint32_t hi = 2 * k + 1 < D ? to_bf16(e[2 * k + 1]) : 0;
      p[k * SW] = lo | hi << 16;
    }
    sc->e2[c] = e2;
    sc->e_max = fmax(sc->e_max, sqrt(n));
    sc->eh_max = fmax(sc->eh_max, sqrt(nh));
    sc->r_max = fmax(sc->r_max, sqrt(r));
  }
  return 1;
}

/* ---- one row's bound and threshold */

/* G for a row of norms X, X^ and rx (the top of the file), rounded up to a
 * float. */
static float bound_of_row(const screen_codes *sc, double X, double Xh,
                          double rx) {
  const double u = 0x1p-24, D = (double)sc->D;
  const double gD = D * u / (1.0 - D * u);
  const double g2 = D * 2.0 * u / (1.0 - D * 2.0 * u);
  const double E = sc->e_max, Eh = sc->eh_max;
  const double dots = gD * X * E + g2 * Xh * Eh + rx * E + Xh * sc->r_max +
                      4.0 * D * 0x1p-126;
  /* u |s - 2 dot| + u |s - 2 dbf|, with |s| <= (X^2 + E^2)(1 + 2 gD) and
   * |dot|, |dbf| bounded by the products of norms (and their errors). */
  const double sums =
      u * (2.0 * (X * X + E * E) * (1.0 + 2.0 * gD) + 2.0 * X * E * (1.0 + gD) +
           2.0 * Xh * Eh * (1.0 + g2) + 2.0 * dots);
  const double G = 1.01 * (2.0 * dots + sums) + 0x1p-140;
  float g = (float)G;
  if ((double)g < G) g = nextafterf(g, INFINITY);
  return g;
}

/* thr(m) (the top of the file): codes with a <= thr(m) stay candidates. */
static inline float threshold(float m, float G) {
  const float low = m + G; /* NaN never: m and G are finite or m = +inf */
  return ((low > VQC_VQ_DIST_CLAMP ? low : VQC_VQ_DIST_CLAMP) + G) *
         (1.0f + 0x1p-18f);
}

/* ---- a block of rows */

typedef struct screen_block {
  /* Rows of the block (SR; rows past the batch are set apart). */
  float x2[SR];      /* the reference's x2 chain */
  float x2s[SR];     /* x2 as the screen uses it (0 for rows set apart) */
  float G[SR];       /* the row's bound */
  float row_min[SR]; /* smallest a admitted so far */
  float thr[SR];     /* threshold(row_min); -inf: the row takes nothing */
  int apart[SR];     /* 1: answered by the exact kernel */
  int ncand[SR];
  /* Candidates in increasing code order: code and a. CAND_CAP + 32 so that
   * a whole panel's lanes can be stored before they are counted. */
  int32_t cand_c[SR][CAND_CAP + SW];
  float cand_a[SR][CAND_CAP + SW];
  /* The last panel's a and the lanes that passed its screen. */
  __attribute__((aligned(64))) float pend_a[SR][2][SV];
  __mmask16 pend_m[SR][2];
} screen_block;

/* Packs rows xr (rows, D) as bfloat16 pairs into xw (D2, 16): xw[k*16 + r]
 * holds row r's dimensions 2k and 2k + 1, through xt (D, 16) scratch.
 * Sets each row's x2, bound and state; rows that are not finite, too
 * large or past `rows` are set apart (their words are zero). All 16 lanes
 * work at once, one row per lane: the reference's x2 chain, the roundings
 * and the two sums of squares of the bound. */
__attribute__((target("avx512f"))) static void
pack_screen_rows(const screen_codes *sc, const float *xr, int64_t rows,
                 float *xt, uint32_t *xw, screen_block *b) {
  const int64_t D = sc->D;
  for (int r = 0; r < SV; r++) {
    if (r < rows)
      for (int64_t d = 0; d < D; d++) xt[d * SV + r] = xr[r * D + d];
    else
      for (int64_t d = 0; d < D; d++) xt[d * SV + r] = 0.0f;
  }
  const __m512i expo = _mm512_set1_epi32(0x7f800000);
  const __m512i sign = _mm512_set1_epi32((int32_t)0x80000000u);
  const __m512i keep = _mm512_set1_epi32((int32_t)0xffff0000u);
  const __m512i half = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  __m512 x2 = _mm512_setzero_ps(), nh = _mm512_setzero_ps();
  __m512 rx = _mm512_setzero_ps();
  for (int64_t d = 0; d < D; d++) {
    const __m512 v = _mm512_load_ps(xt + d * SV);
    x2 = _mm512_fmadd_ps(v, v, x2); /* the reference's chain, per lane */
    /* to_bf16, 16 lanes: round to nearest even, then below 2^-126 -> +-0 */
    const __m512i bits = _mm512_castps_si512(v);
    __m512i h = _mm512_add_epi32(
        bits, _mm512_add_epi32(
                  half, _mm512_and_si512(_mm512_srli_epi32(bits, 16), one)));
    h = _mm512_and_si512(h, keep);
    const __mmask16 tiny =
        _mm512_testn_epi32_mask(bits, expo); /* exponent field zero */
    h = _mm512_mask_mov_epi32(h, tiny, _mm512_and_si512(bits, sign));
    const __m512 hf = _mm512_castsi512_ps(h);
    const __m512 diff = _mm512_sub_ps(v, hf); /* exact */
    nh = _mm512_fmadd_ps(hf, hf, nh);
    rx = _mm512_fmadd_ps(diff, diff, rx);
    _mm512_store_si512(xt + d * SV, h);
  }
  __attribute__((aligned(64))) float x2a[SV], nha[SV], rxa[SV];
  _mm512_store_ps(x2a, x2);
  _mm512_store_ps(nha, nh);
  _mm512_store_ps(rxa, rx);
  /* A float32 sum of D squares is within gD of the exact one, plus D
   * underflows of 2^-150 at most: these make upper bounds of the norms. */
  const double u = 0x1p-24, up = 1.0 + 2.0 * (double)D * u / (1.0 - D * u);
  const double tiny_sum = (double)D * 0x1p-150;
  __mmask16 ok_lanes = 0;
  for (int r = 0; r < SR; r++) {
    const int ok = r < rows && x2a[r] <= (float)(SCREEN_NORM_MAX *
                                                 SCREEN_NORM_MAX);
    ok_lanes |= (__mmask16)(ok << r);
    b->x2[r] = x2a[r];
    b->x2s[r] = ok ? x2a[r] : 0.0f;
    b->G[r] = ok ? bound_of_row(sc, sqrt(x2a[r] * up + tiny_sum),
                                sqrt(nha[r] * up + tiny_sum),
                                sqrt(rxa[r] * up + tiny_sum))
                 : 0.0f;
    b->row_min[r] = INFINITY;
    b->thr[r] = ok ? INFINITY : -INFINITY;
    b->apart[r] = !ok;
    b->ncand[r] = 0;
  }
  for (int64_t k = 0; k < sc->D2; k++) {
    const __m512i lo =
        _mm512_srli_epi32(_mm512_load_si512(xt + 2 * k * SV), 16);
    const __m512i hi = 2 * k + 1 < D ? _mm512_load_si512(xt + (2 * k + 1) * SV)
                                     : _mm512_setzero_si512();
    _mm512_store_si512(xw + k * SV,
                       _mm512_maskz_mov_epi32(ok_lanes, _mm512_or_si512(lo, hi)));
  }
}

/* Keeps row r's candidates with a <= its threshold. */
static void prune(screen_block *b, int r) {
  int n = 0;
  for (int k = 0; k < b->ncand[r]; k++)
    if (b->cand_a[r][k] <= b->thr[r]) {
      b->cand_c[r][n] = b->cand_c[r][k];
      b->cand_a[r][n] = b->cand_a[r][k];
      n++;
    }
  b->ncand[r] = n;
}

/* The admissions of the panel whose codes start at `first` (pend_a,
 * pend_m): for each row with lanes that passed, the row's minimum and
 * threshold first, then its lanes with a <= threshold appended, vector 0
 * before vector 1 (increasing codes). A row that cannot hold them is set
 * apart. */
__attribute__((target("avx512f"))) static void
admit_panel(screen_block *b, int64_t first) {
  int list[SR], n = 0;
  for (int r = 0; r < SR; r++) {
    list[n] = r;
    n += (b->pend_m[r][0] | b->pend_m[r][1]) != 0;
  }
  if (n == 0) return; /* the usual case */
  const __m512i c0 = _mm512_add_epi32(
      _mm512_set1_epi32((int32_t)first),
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m512i c1 = _mm512_add_epi32(c0, _mm512_set1_epi32(SV));
  for (int k = 0; k < n; k++) {
    const int r = list[k];
    const __m512 a0 = _mm512_load_ps(b->pend_a[r][0]);
    const __m512 a1 = _mm512_load_ps(b->pend_a[r][1]);
    const __mmask16 m0 = b->pend_m[r][0], m1 = b->pend_m[r][1];
    const float lo0 = _mm512_mask_reduce_min_ps(m0, a0);
    const float lo1 = _mm512_mask_reduce_min_ps(m1, a1);
    const float lo = lo1 < lo0 ? lo1 : lo0;
    if (lo < b->row_min[r]) { /* else the lanes are within thr: admitted */
      b->row_min[r] = lo;
      b->thr[r] = threshold(lo, b->G[r]);
    }
    const __m512 t = _mm512_set1_ps(b->thr[r]);
    const __mmask16 k0 = _mm512_mask_cmp_ps_mask(m0, a0, t, _CMP_LE_OQ);
    const __mmask16 k1 = _mm512_mask_cmp_ps_mask(m1, a1, t, _CMP_LE_OQ);
    const int add = __builtin_popcount(k0) + __builtin_popcount(k1);
    if (b->ncand[r] + add > CAND_CAP) prune(b, r);
    if (b->ncand[r] + add > CAND_CAP) { /* too many codes this close */
      b->apart[r] = 1;
      b->thr[r] = -INFINITY;
      continue;
    }
    /* Compressed in registers, then plain stores (a compressing store to
     * memory is slow on some cores); the slack past ncand takes them. */
    int at = b->ncand[r];
    _mm512_storeu_si512(b->cand_c[r] + at, _mm512_maskz_compress_epi32(k0, c0));
    _mm512_storeu_ps(b->cand_a[r] + at, _mm512_maskz_compress_ps(k0, a0));
    at += __builtin_popcount(k0);
    _mm512_storeu_si512(b->cand_c[r] + at, _mm512_maskz_compress_epi32(k1, c1));
    _mm512_storeu_ps(b->cand_a[r] + at, _mm512_maskz_compress_ps(k1, a1));
    b->ncand[r] = at + __builtin_popcount(k1);
  }
}

/* The screen of one block against every panel: after it, each row that is
 * not set apart holds its candidates (a superset of those with a <= its
 * final threshold) and that threshold. Panel j's lanes are compared with
 * the threshold as it was before panel j - 1's admissions (never lower
 * than the current one), and admitted after panel j + 1's products. */
__attribute__((target("avx512f,avx512bf16"))) static void
screen_block_run(const screen_codes *sc, const uint32_t *xw, screen_block *b) {
  const int64_t D2 = sc->D2;
  const __m512 m2 = _mm512_set1_ps(-2.0f);
  for (int64_t j = 0; j < sc->nblocks; j++) {
    const uint32_t *p = sc->panels + j * D2 * SW;
    __m512 acc[SR][2];
#pragma GCC unroll 12
    for (int r = 0; r < SR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < D2; k++) {
      const __m512bh e0 = (__m512bh)_mm512_load_si512(p + k * SW);
      const __m512bh e1 = (__m512bh)_mm512_load_si512(p + k * SW + SV);
      const uint32_t *xk = xw + k * SV;
#pragma GCC unroll 12
      for (int r = 0; r < SR; r++) {
        const __m512bh xb = (__m512bh)_mm512_set1_epi32((int32_t)xk[r]);
        acc[r][0] = _mm512_dpbf16_ps(acc[r][0], xb, e0);
        acc[r][1] = _mm512_dpbf16_ps(acc[r][1], xb, e1);
      }
    }
    if (j > 0) admit_panel(b, (j - 1) * SW);
    const __m512 e2v0 = _mm512_load_ps(sc->e2 + j * SW);
    const __m512 e2v1 = _mm512_load_ps(sc->e2 + j * SW + SV);
#pragma GCC unroll 12
    for (int r = 0; r < SR; r++) {
      const __m512 x2b = _mm512_set1_ps(b->x2s[r]);
      const __m512 a0 = _mm512_fmadd_ps(m2, acc[r][0], _mm512_add_ps(x2b, e2v0));
      const __m512 a1 = _mm512_fmadd_ps(m2, acc[r][1], _mm512_add_ps(x2b, e2v1));
      const __m512 t = _mm512_set1_ps(b->thr[r]);
      b->pend_m[r][0] = _mm512_cmp_ps_mask(a0, t, _CMP_LE_OQ);
      b->pend_m[r][1] = _mm512_cmp_ps_mask(a1, t, _CMP_LE_OQ);
      _mm512_store_ps(b->pend_a[r][0], a0);
      _mm512_store_ps(b->pend_a[r][1], a1);
    }
  }
  admit_panel(b, (sc->nblocks - 1) * SW);
}

/* ---- the exact step */

/* Answers the block's rows that are not set apart from their candidates:
 * the reference's distance for each candidate with a <= the row's final
 * threshold, in increasing code order, strict < (the lowest code keeps a
 * tie). The (row, code) pairs of the whole block go through the chains
 * eight at a time, so that the core overlaps their latencies (one chain
 * is D dependent multiply-adds; a row has one or two candidates). */
__attribute__((target("avx512f,fma"))) static void
answer_block(const screen_codes *sc, const float *E, const float *xr,
             int64_t rows, screen_block *b, int64_t *indices) {
  enum { LANES = 8 };
  const int64_t D = sc->D;
  int pr[SR * CAND_CAP];     /* the pairs' rows */
  int32_t pc[SR * CAND_CAP]; /* and codes, row by row, codes increasing */
  float best[SR];
  int n = 0;
  for (int r = 0; r < rows; r++) {
    best[r] = INFINITY;
    indices[r] = 0;
    if (b->apart[r]) continue;
    const int n0 = n;
    for (int k = 0; k < b->ncand[r]; k++)
      if (b->cand_a[r][k] <= b->thr[r]) {
        pr[n] = r;
        pc[n++] = b->cand_c[r][k];
      }
    if (n == n0) b->apart[r] = 1; /* cannot happen: the smallest a is one */
  }
  for (int k0 = 0; k0 < n; k0 += LANES) {
    const float *xp[LANES], *ep[LANES];
    for (int i = 0; i < LANES; i++) { /* past n: the last pair again */
      const int k = k0 + i < n ? k0 + i : n - 1;
      xp[i] = xr + pr[k] * D;
      ep[i] = E + (int64_t)pc[k] * D;
    }
    float dot[LANES] = {0};
    for (int64_t d = 0; d < D; d++)
#pragma GCC unroll 8
      for (int i = 0; i < LANES; i++) dot[i] = fmaf(xp[i][d], ep[i][d], dot[i]);
    for (int i = 0; i < LANES && k0 + i < n; i++) {
      const int r = pr[k0 + i];
      const int32_t c = pc[k0 + i];
      /* The reference's expression, operation for operation. */
      const float d2 = (b->x2[r] + sc->e2[c]) + (-2.0f * dot[i]);
      const float dist = sqrtf(fmaxf(d2, VQC_VQ_DIST_CLAMP));
      if (dist < best[r]) {
        best[r] = dist;
        indices[r] = c;
      }
    }
  }
}

/* ---- entry point */

vqc_status vq_nearest_screen(const float *x, int64_t M, const float *E,
                             int64_t C, int64_t D, int64_t *indices,
                             int64_t *n_apart) {
  screen_codes sc = {0};
  uint32_t *xw = NULL; /* (D2, 16): the block's rows in bfloat16 pairs */
  float *xt = NULL;    /* (D, 16): the block's rows, D-major (scratch) */
  screen_block *b = NULL;
  int64_t *apart = NULL; /* the rows set apart, in order (cap_apart) */
  int64_t cap_apart = 0;
  float *xa = NULL;      /* (n, D): those rows, for the exact kernel */
  int64_t *ia = NULL;    /* (n): their answers */
  int64_t n = 0;
  vqc_status s = VQC_OK;
  *n_apart = 0;
  /* The bound counts one rounding to nearest per operation; a thread set
   * to round another way gets the exact kernel (the same answers as the
   * reference in that mode, as always). */
  const int fit = fegetround() == FE_TONEAREST
                      ? pack_screen_codes(E, C, D, &sc)
                      : 0;
  if (fit == 0) { /* a codebook the bound does not cover: all rows exact */
    free(sc.panels);
    free(sc.e2);
    *n_apart = M;
    return vq_nearest_with(VQ_KERNEL_AVX512, x, M, E, C, D, indices, NULL);
  }
  xw = alloc_aligned(sc.D2 * SV);
  xt = alloc_aligned(sc.D2 * 2 * SV);
  b = aligned_alloc(64, (sizeof *b + 63) & ~(size_t)63);
  if (fit < 0 || !xw || !xt || !b) {
    s = vqc_error(VQC_ENOMEM, "vq_nearest: screening %lld rows against %lld "
                  "codes of %lld floats", (long long)M, (long long)C,
                  (long long)D);
    goto done;
  }
  int64_t i0 = 0;
  for (; i0 < M; i0 += SR) {
    /* Data the screen cannot decide (most rows set apart after the first
     * SCREEN_TRIAL_BLOCKS blocks, e.g. a codebook of near-copies): the rest
     * goes straight to the exact kernel, so that such a call costs little
     * more than the exact kernel alone. */
    if (i0 == SCREEN_TRIAL_BLOCKS * SR && 2 * n > i0) break;
    const int64_t rows = M - i0 < SR ? M - i0 : SR;
    pack_screen_rows(&sc, x + i0 * D, rows, xt, xw, b);
    /* The next block's rows, on their way from memory while this one is
     * screened (they are read once, by the packing, which waited on them). */
    const int64_t next = M - (i0 + SR) < SR ? M - (i0 + SR) : SR;
    for (int64_t o = 0; o < next * D; o += 64 / (int64_t)sizeof(float))
      __builtin_prefetch(x + (i0 + SR) * D + o);
    screen_block_run(&sc, xw, b);
    answer_block(&sc, E, x + i0 * D, rows, b, indices + i0);
    for (int r = 0; r < rows; r++) {
      if (!b->apart[r]) continue;
      if (n == cap_apart) { /* grows as rows are set apart: usually never */
        const int64_t cap = cap_apart ? 2 * cap_apart : 256;
        int64_t *more = realloc(apart, (size_t)cap * sizeof *apart);
        if (!more) {
          s = vqc_error(VQC_ENOMEM, "vq_nearest: %lld rows set apart",
                        (long long)cap);
          goto done;
        }
        apart = more;
        cap_apart = cap;
      }
      apart[n++] = i0 + r;
    }
  }
  if (i0 < M) {
    s = vq_nearest_with(VQ_KERNEL_AVX512, x + i0 * D, M - i0, E, C, D,
                        indices + i0, NULL);
    if (s != VQC_OK) goto done;
    *n_apart = M - i0;
  }
  if (n > 0) { /* the rows set apart, through the exact kernel */
    xa = malloc((size_t)(n * D) * sizeof *xa);
    ia = malloc((size_t)n * sizeof *ia);
    if (!xa || !ia) {
      s = vqc_error(VQC_ENOMEM, "vq_nearest: %lld rows of %lld floats",
                    (long long)n, (long long)D);
      goto done;
    }
    for (int64_t k = 0; k < n; k++)
      memcpy(xa + k * D, x + apart[k] * D, (size_t)D * sizeof *xa);
    s = vq_nearest_with(VQ_KERNEL_AVX512, xa, n, E, C, D, ia, NULL);
    if (s == VQC_OK)
      for (int64_t k = 0; k < n; k++) indices[apart[k]] = ia[k];
  }
  *n_apart += n;
done:
  free(sc.panels);
  free(sc.e2);
  free(xw);
  free(xt);
  free(b);
  free(apart);
  free(xa);
  free(ia);
  return s;
}

#endif /* VQ_HAVE_BF16_KERNEL */
