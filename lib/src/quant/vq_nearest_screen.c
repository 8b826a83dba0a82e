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
 * A row whose candidates do not fit SCREEN_CAP (codes at nearly equal
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
 * term at its largest over the codebook and adds 1% (screen_bound). The
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
 * The bound's common part, the candidates, the exact step and the loop
 * over blocks are shared with the AVX2 screen (vq_screen.c); this file
 * holds the bfloat16 packing and the screen itself.
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
#include "quant/vq_screen.h"
#include "vqc/vq.h"

#if VQ_X86_KERNELS
#include <immintrin.h>

enum {
  SV = 16, /* float32 lanes in a vector */
  SW = 32, /* codes per panel: two vectors */
  SR = 12, /* rows per block */
};

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

/* ---- the codebook, packed once per call, and the block state */

typedef struct bf16_screen {
  int64_t D, D2, nblocks; /* D2 = ceil(D / 2) bfloat16 pairs per vector */
  uint32_t *panels; /* (nblocks, D2, 32): word (j, k, l) = e^[j*32 + l] at
                       dimensions 2k (low half) and 2k + 1 (high half) */
  float *e2;        /* (nblocks * 32): the reference's e2 chain; NaN past C */
  screen_bound_terms terms; /* the codebook's part of the bound */
  /* Per block (scratch): */
  float *xt;        /* (D, 16): the block's rows, D-major */
  uint32_t *xw;     /* (D2, 16): the block's rows in bfloat16 pairs */
  float x2s[SR];    /* x2 as the screen uses it (0 for rows set apart) */
  /* The last panel's a and the lanes that passed its screen. */
  __attribute__((aligned(64))) float pend_a[SR][2 * SV];
  uint32_t pend_m[SR];
} bf16_screen;

/* Fills sc from E (C, D). 1 when the codebook suits the screen (finite,
 * norms <= SCREEN_NORM_MAX), 0 when it does not, -1 out of memory. */
static int pack_codes_bf16(const float *E, int64_t C, int64_t D,
                           bf16_screen *sc) {
  sc->D = D;
  sc->D2 = (D + 1) / 2;
  sc->nblocks = (C + SW - 1) / SW;
  sc->panels = (uint32_t *)vq_alloc_floats(sc->nblocks * sc->D2 * SW);
  sc->e2 = vq_alloc_floats(sc->nblocks * SW);
  sc->xt = vq_alloc_floats(sc->D2 * 2 * SV);
  sc->xw = (uint32_t *)vq_alloc_floats(sc->D2 * SV);
  if (!sc->panels || !sc->e2 || !sc->xt || !sc->xw) return -1;
  screen_bound_terms *t = &sc->terms;
  /* VDPBF16PS: D roundings of at most 2u (whatever order it adds in), and
   * products and sums below 2^-126 flushed to zero. */
  screen_terms_start(t, D,
                     (double)D * 2.0 * 0x1p-24 /
                         (1.0 - (double)D * 2.0 * 0x1p-24),
                     4.0 * (double)D * 0x1p-126);
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
    t->e_max = fmax(t->e_max, sqrt(n));
    t->eh_max = fmax(t->eh_max, sqrt(nh));
    t->r_max = fmax(t->r_max, sqrt(r));
  }
  return 1;
}

/* ---- a block of rows */

/* Packs rows xr (rows, D) as bfloat16 pairs into sc->xw (D2, 16): word
 * k*16 + r holds row r's dimensions 2k and 2k + 1. Starts each row's state
 * (row[0 .. SR)); rows that are not finite, too large or past `rows` are
 * set apart (their words are zero). All 16 lanes work at once, one row per
 * lane: the reference's x2 chain, the roundings and the two sums of
 * squares of the bound. */
__attribute__((target("avx512f"))) static void
pack_rows_bf16(bf16_screen *sc, const float *xr, int64_t rows,
               screen_row *row) {
  const int64_t D = sc->D;
  float *xt = sc->xt;
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
   * underflows of 2^-150 at most; with DAZ, values below 2^-126 count as
   * zero (sqrt(D) 2^-126 on a norm): these make upper bounds of the norms. */
  const double up = 1.0 + 2.0 * sc->terms.gD;
  const double tiny_sum = (double)D * 0x1p-150;
  const double tiny_norm = sqrt((double)D) * 0x1p-125;
  __mmask16 ok_lanes = 0;
  for (int r = 0; r < SR; r++) {
    const int ok = r < rows && x2a[r] <= (float)(SCREEN_NORM_MAX *
                                                 SCREEN_NORM_MAX);
    ok_lanes |= (__mmask16)(ok << r);
    sc->x2s[r] = ok ? x2a[r] : 0.0f;
    const float G =
        ok ? screen_bound(&sc->terms, sqrt(x2a[r] * up + tiny_sum) + tiny_norm,
                          sqrt(nha[r] * up + tiny_sum) + tiny_norm,
                          sqrt(rxa[r] * up + tiny_sum) + tiny_norm)
           : 0.0f;
    screen_row_start(&row[r], x2a[r], G, ok);
  }
  for (int64_t k = 0; k < sc->D2; k++) {
    const __m512i lo =
        _mm512_srli_epi32(_mm512_load_si512(xt + 2 * k * SV), 16);
    const __m512i hi = 2 * k + 1 < D ? _mm512_load_si512(xt + (2 * k + 1) * SV)
                                     : _mm512_setzero_si512();
    _mm512_store_si512(sc->xw + k * SV,
                       _mm512_maskz_mov_epi32(ok_lanes, _mm512_or_si512(lo, hi)));
  }
}

/* Admits the lanes of `lanes` (bit l: lane l of the panel, a[l], code
 * first + l) that passed the screen against an older, higher threshold:
 * the row's minimum and threshold first, then the lanes with a <= the
 * threshold appended in lane order (increasing codes); the row is set
 * apart when they do not fit. With AVX-512 (masked minimum, compressed
 * stores): in a profile of the whole search, a plain loop over the lanes'
 * bits took 10% of the time against 9% for this, its branches
 * mispredicting (rows take candidates at random panels). */
__attribute__((target("avx512f"))) static void
admit_lanes(screen_row *row, const float *a, uint32_t lanes, int32_t first) {
  if (row->apart) return;
  const __m512 a0 = _mm512_load_ps(a), a1 = _mm512_load_ps(a + SV);
  const __mmask16 m0 = (__mmask16)lanes, m1 = (__mmask16)(lanes >> SV);
  const float lo0 = _mm512_mask_reduce_min_ps(m0, a0);
  const float lo1 = _mm512_mask_reduce_min_ps(m1, a1);
  const float lo = lo1 < lo0 ? lo1 : lo0;
  if (lo < row->row_min) { /* else the lanes are within thr: admitted */
    row->row_min = lo;
    row->thr = screen_threshold(lo, row->G);
  }
  const __m512 t = _mm512_set1_ps(row->thr);
  const __mmask16 k0 = _mm512_mask_cmp_ps_mask(m0, a0, t, _CMP_LE_OQ);
  const __mmask16 k1 = _mm512_mask_cmp_ps_mask(m1, a1, t, _CMP_LE_OQ);
  const int add = __builtin_popcount(k0) + __builtin_popcount(k1);
  if (row->ncand + add > SCREEN_CAP) screen_prune(row);
  if (row->ncand + add > SCREEN_CAP) { /* too many codes this close */
    row->apart = 1;
    row->thr = -INFINITY;
    return;
  }
  const __m512i c0 = _mm512_add_epi32(
      _mm512_set1_epi32(first),
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m512i c1 = _mm512_add_epi32(c0, _mm512_set1_epi32(SV));
  /* Compressed in registers, then plain stores (a compressing store to
   * memory is slow on some cores) into the slack past ncand. */
  int at = row->ncand;
  _mm512_storeu_si512(row->cand_c + at, _mm512_maskz_compress_epi32(k0, c0));
  _mm512_storeu_ps(row->cand_a + at, _mm512_maskz_compress_ps(k0, a0));
  at += __builtin_popcount(k0);
  _mm512_storeu_si512(row->cand_c + at, _mm512_maskz_compress_epi32(k1, c1));
  _mm512_storeu_ps(row->cand_a + at, _mm512_maskz_compress_ps(k1, a1));
  row->ncand = at + __builtin_popcount(k1);
}

/* The admissions of the panel whose codes start at `first` (pend_a,
 * pend_m), row by row. Which rows have any varies with the data and cannot
 * be predicted, so they are listed without branches first; a branch per
 * row would mispredict about four times per row of x. */
static void admit_panel(bf16_screen *sc, screen_row *row, int64_t first) {
  int list[SR], n = 0;
  for (int r = 0; r < SR; r++) {
    list[n] = r;
    n += sc->pend_m[r] != 0;
  }
  for (int k = 0; k < n; k++)
    admit_lanes(&row[list[k]], sc->pend_a[list[k]], sc->pend_m[list[k]],
                (int32_t)first);
}

/* The screen of one block against every panel: after it, each row that is
 * not set apart holds its candidates (a superset of those with a <= its
 * final threshold) and that threshold. Panel j's lanes are compared with
 * the threshold as it was before panel j - 1's admissions (never lower
 * than the current one), and admitted after panel j + 1's products. */
__attribute__((target("avx512f,avx512bf16"))) static void
screen_panels_bf16(bf16_screen *sc, screen_row *row) {
  const int64_t D2 = sc->D2;
  const uint32_t *xw = sc->xw;
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
    if (j > 0) admit_panel(sc, row, (j - 1) * SW);
    const __m512 e2v0 = _mm512_load_ps(sc->e2 + j * SW);
    const __m512 e2v1 = _mm512_load_ps(sc->e2 + j * SW + SV);
#pragma GCC unroll 12
    for (int r = 0; r < SR; r++) {
      const __m512 x2b = _mm512_set1_ps(sc->x2s[r]);
      const __m512 a0 = _mm512_fmadd_ps(m2, acc[r][0], _mm512_add_ps(x2b, e2v0));
      const __m512 a1 = _mm512_fmadd_ps(m2, acc[r][1], _mm512_add_ps(x2b, e2v1));
      const __m512 t = _mm512_set1_ps(row[r].thr);
      sc->pend_m[r] = (uint32_t)_mm512_cmp_ps_mask(a0, t, _CMP_LE_OQ) |
                      (uint32_t)_mm512_cmp_ps_mask(a1, t, _CMP_LE_OQ) << SV;
      _mm512_store_ps(sc->pend_a[r], a0);
      _mm512_store_ps(sc->pend_a[r] + SV, a1);
    }
  }
  admit_panel(sc, row, (sc->nblocks - 1) * SW);
}

/* screen_kernel's screen_block: pack, then screen. */
static void screen_block_bf16(void *self, const float *xr, int64_t rows,
                              screen_row *row) {
  pack_rows_bf16(self, xr, rows, row);
  screen_panels_bf16(self, row);
}

/* ---- entry point */

vqc_status vq_nearest_screen(const float *x, int64_t M, const float *E,
                             int64_t C, int64_t D, int64_t *indices,
                             int64_t *n_apart) {
  bf16_screen *sc = aligned_alloc(64, (sizeof *sc + 63) & ~(size_t)63);
  vqc_status s = VQC_OK;
  if (!sc)
    return vqc_error(VQC_ENOMEM, "vq_nearest: screening %lld codes",
                     (long long)C);
  memset(sc, 0, sizeof *sc);
  /* The bound counts one rounding to nearest per operation; a thread set
   * to round another way gets the exact kernel (the same answers as the
   * reference in that mode, as always). */
  const int fit =
      fegetround() == FE_TONEAREST ? pack_codes_bf16(E, C, D, sc) : 0;
  if (fit < 0) {
    s = vqc_error(VQC_ENOMEM, "vq_nearest: screening %lld codes of %lld "
                  "floats", (long long)C, (long long)D);
  } else if (fit == 0) { /* a codebook the bound does not cover */
    *n_apart = M;
    s = vq_nearest_with(VQ_KERNEL_AVX512, x, M, E, C, D, indices, NULL);
  } else {
    const screen_kernel k = {SR, VQ_KERNEL_AVX512, sc->e2, screen_block_bf16,
                             sc};
    s = screen_run(&k, x, M, E, C, D, indices, n_apart);
  }
  free(sc->panels);
  free(sc->e2);
  free(sc->xt);
  free(sc->xw);
  free(sc);
  return s;
}

#endif /* VQ_X86_KERNELS */
