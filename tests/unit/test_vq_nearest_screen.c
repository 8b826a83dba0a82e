/* test_vq_nearest_screen.c: the bfloat16 screen of the nearest-code search
 * (lib/src/quant/vq_nearest_screen.c, kernel avx512bf16) where it is most
 * likely to go wrong: codes whose exact distances nearly tie, codes that
 * bfloat16 cannot tell apart, rows with more candidates than it holds, and
 * values its bound does not cover. Every case expects the reference's
 * indices exactly (test_vq_nearest.c runs the shared cases), and says how
 * many rows the screen set apart for the exact kernel, so that a case
 * meant to exercise the screen cannot pass by never using it. The cases
 * skip where the CPU has no AVX512_BF16. */
#include <criterion/criterion.h>
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant/vq_nearest.h"
#include "vqc/rng.h"
#include "vqc/vq.h"

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  cr_assert_not_null(p, "out of memory (%zu bytes)", n);
  return p;
}

/* Rows x (M, D) and codes E (C, D), normal(mean, std) from seed, in
 * fresh buffers (the caller frees both). */
static void normal_problem(uint64_t seed, int64_t M, int64_t C, int64_t D,
                           float mean, float std, float **x, float **E) {
  *x = xmalloc((size_t)(M * D) * sizeof **x);
  *E = xmalloc((size_t)(C * D) * sizeof **E);
  vqc_rng r;
  vqc_rng_init(&r, seed, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_normal(&r, *E, C * D, mean, std);
  vqc_rng_normal(&r, *x, M * D, mean, std);
}

static void require_bf16(void) {
  if (!vq_kernel_available(VQ_KERNEL_AVX512_BF16))
    cr_skip_test("this CPU has no AVX512_BF16: the screen does not run here");
}

/* Screens x (M, D) against E (C, D), expects the reference's indices, and
 * returns how many rows were set apart. */
static int64_t screen_matches_ref(const float *x, int64_t M, const float *E,
                                  int64_t C, int64_t D, const char *what) {
  int64_t *want = xmalloc((size_t)M * sizeof *want);
  int64_t *got = xmalloc((size_t)M * sizeof *got);
  int64_t apart = -1;
  cr_assert_eq(vq_nearest_ref(x, M, E, C, D, want, NULL), VQC_OK);
  memset(got, 0xff, (size_t)M * sizeof *got); /* -1: an unwritten answer */
#if VQ_X86_KERNELS
  cr_assert_eq(vq_nearest_screen(x, M, E, C, D, got, &apart), VQC_OK, "%s: %s",
               what, vqc_last_error());
#endif
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < M; i++)
    if (got[i] != want[i] && bad++ == 0) first = i;
  cr_expect_eq(bad, 0,
               "%s (M %lld, D %lld, C %lld): %lld indices differ from the "
               "reference; first row %lld: ref %lld, screen %lld",
               what, (long long)M, (long long)D, (long long)C, (long long)bad,
               (long long)first, first >= 0 ? (long long)want[first] : -1LL,
               first >= 0 ? (long long)got[first] : -1LL);
  cr_expect(apart >= 0 && apart <= M, "%s: %lld rows set apart of %lld", what,
            (long long)apart, (long long)M);
  free(want);
  free(got);
  return apart;
}

/* v rounded to bfloat16 (nearest, ties to even), as a float. */
static float bf16_of(float v) {
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  memcpy(&v, &b, sizeof v);
  return v;
}

/* The index a search on bfloat16 values alone would give (double sums). */
static int64_t bf16_argmin(const float *x, const float *E, int64_t C,
                           int64_t D) {
  int64_t best = 0;
  double best_d = INFINITY;
  for (int64_t c = 0; c < C; c++) {
    double d2 = 0.0;
    for (int64_t d = 0; d < D; d++) {
      const double t = (double)bf16_of(x[d]) - bf16_of(E[c * D + d]);
      d2 += t * t;
    }
    if (d2 < best_d) {
      best_d = d2;
      best = c;
    }
  }
  return best;
}

/* Rows between two codes a and b: x = (a + b) / 2 + t (b - a), with t from
 * 1e-3 down to 1e-8 and 0 (exact ties up to rounding), either side. The
 * two exact distances differ by about 4 t |b - a|^2 / 2, far below what
 * bfloat16 can resolve for the smaller t, so the screen must pass both
 * codes and let the float32 chains decide. */
Test(vq_nearest_screen, near_ties_are_decided_by_the_exact_chains) {
  require_bf16();
  const int64_t C = 300, D = 64, M = 1500;
  const float ts[] = {0.0f, 1e-8f, 1e-7f, 3e-7f, 1e-6f, 1e-5f, 1e-4f, 1e-3f};
  const int nt = sizeof ts / sizeof ts[0];
  float *E = xmalloc((size_t)(C * D) * sizeof *E);
  float *x = xmalloc((size_t)(M * D) * sizeof *x);
  vqc_rng r;
  vqc_rng_init(&r, 11, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_normal(&r, E, C * D, 0.0f, 1.0f);
  int64_t *want = xmalloc((size_t)M * sizeof *want);
  for (int64_t i = 0; i < M; i++) {
    const int64_t a = vqc_rng_randint(&r, 0, C);
    int64_t b = vqc_rng_randint(&r, 0, C - 1);
    b += b >= a;
    const float t = (i % 2 ? 1.0f : -1.0f) * ts[(i / 2) % nt];
    for (int64_t d = 0; d < D; d++) {
      const float ea = E[a * D + d], eb = E[b * D + d];
      x[i * D + d] = 0.5f * (ea + eb) + t * (eb - ea);
    }
  }
  cr_assert_eq(vq_nearest_ref(x, M, E, C, D, want, NULL), VQC_OK);
  int64_t bf16_wrong = 0;
  for (int64_t i = 0; i < M; i++)
    bf16_wrong += bf16_argmin(x + i * D, E, C, D) != want[i];
  /* The case is only worth its name if bfloat16 alone gets rows wrong. */
  cr_expect_gt(bf16_wrong, M / 20, "only %lld rows where bfloat16 alone "
               "would answer differently", (long long)bf16_wrong);
  const int64_t apart = screen_matches_ref(x, M, E, C, D, "near ties");
  cr_expect_lt(apart, M / 10, "%lld of %lld rows set apart: the screen "
               "should decide near ties of two codes itself",
               (long long)apart, (long long)M);
  free(want);
  free(E);
  free(x);
}

/* Roundings aimed against the screen: every value of x and of code a is
 * moved from a bfloat16 value by 0.98 of half a bfloat16 step, with signs
 * chosen so that the screen underestimates x.a as much as such moves can
 * (the Cauchy-Schwarz terms of the bound nearly reached: the screened
 * squared distance of a too large), and code b is built the other way (its
 * screened distance too small). Of 20000 such trials, those where a and b
 * nearly tie (the reference's squared distances within 1.5 of each other)
 * are screened with the codebook [b, a]: a bound too small by a factor of
 * two would leave out the reference's answer in many of them. */
static float some_bf16(vqc_rng *r) { /* +-[1.01, 1.99], away from 1 and 2 */
  const float v = bf16_of(1.01f + 0.98f * vqc_rng_uniform_f32(r));
  return vqc_rng_uniform_f32(r) < 0.5f ? -v : v;
}

Test(vq_nearest_screen, roundings_aimed_against_it_stay_within_its_bound) {
  require_bf16();
  enum { D = 32 };
  const float move = 0.98f * 0x1p-8f; /* bfloat16 steps are 2^-7 here */
  float x[D], E[2 * D];
  vqc_rng r;
  vqc_rng_init(&r, 18, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  int64_t tried = 0, a_wins = 0, b_wins = 0;
  for (int trial = 0; trial < 20000; trial++) {
    float xh[D], a[D];
    for (int d = 0; d < D; d++) {
      xh[d] = some_bf16(&r);
      a[d] = some_bf16(&r);
    }
    for (int d = 0; d < D; d++) {
      x[d] = xh[d] + copysignf(move, a[d]);            /* (x - x^).a > 0 */
      E[D + d] = a[d] + copysignf(move, xh[d]);        /* x^.(a - a^) > 0 */
      const float b = -copysignf(fabsf(some_bf16(&r)), a[d]);
      E[d] = b - copysignf(move, xh[d]);               /* both < 0 for b */
      cr_assert(bf16_of(x[d]) == xh[d] && bf16_of(E[D + d]) == a[d] &&
                bf16_of(E[d]) == b);
    }
    double da = 0.0, db = 0.0; /* squared distances, near enough */
    for (int d = 0; d < D; d++) {
      da += ((double)x[d] - E[D + d]) * ((double)x[d] - E[D + d]);
      db += ((double)x[d] - E[d]) * ((double)x[d] - E[d]);
    }
    if (fabs(da - db) > 1.5) continue;
    int64_t want;
    cr_assert_eq(vq_nearest_ref(x, 1, E, 2, D, &want, NULL), VQC_OK);
    char what[64];
    snprintf(what, sizeof what, "aimed roundings, trial %d", trial);
    cr_assert_eq(screen_matches_ref(x, 1, E, 2, D, what), 0,
                 "%s: set apart", what);
    tried++;
    a_wins += want == 1;
    b_wins += want == 0;
  }
  cr_expect_gt(a_wins, 100, "%lld near ties (a %lld, b %lld): too few to "
               "say anything", (long long)tried, (long long)a_wins,
               (long long)b_wins);
}

/* Codes that differ from an earlier one only below bfloat16's precision
 * (each value moved by 0.9 * 2^-9 of itself, less than half a bfloat16
 * step, so both have the same bfloat16 values and the same screened
 * distances), with rows at the later copy: a screen that kept only the
 * lowest of equal screened distances would answer the earlier code. The
 * move is large enough for float32 (the two squared distances differ by
 * some 50 ulps of |x|^2), so the reference answers the later one. */
Test(vq_nearest_screen, codes_equal_in_bfloat16_are_told_apart) {
  require_bf16();
  const int64_t C = 64, D = 8, M = 400;
  float *E = xmalloc((size_t)(C * D) * sizeof *E);
  float *x = xmalloc((size_t)(M * D) * sizeof *x);
  vqc_rng r;
  vqc_rng_init(&r, 12, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  for (int64_t c = 0; c < C / 2; c++) /* codes 0..31: bfloat16 values */
    for (int64_t d = 0; d < D; d++)
      E[c * D + d] = bf16_of(vqc_rng_uniform_f32(&r) * 2.0f - 1.0f);
  for (int64_t c = C / 2; c < C; c++) /* 32..63: the same, nudged below */
    for (int64_t d = 0; d < D; d++) {
      const float v = E[(c - C / 2) * D + d];
      E[c * D + d] = v + v * (0.9f * 0x1p-9f) * (d % 2 ? 1.0f : -1.0f);
      cr_assert_eq(bf16_of(E[c * D + d]), v);
    }
  int64_t *want = xmalloc((size_t)M * sizeof *want);
  for (int64_t i = 0; i < M; i++) { /* a moved code, 0 to 10% further */
    const int64_t c = C / 2 + vqc_rng_randint(&r, 0, C / 2);
    const float f = 0.1f * vqc_rng_uniform_f32(&r);
    for (int64_t d = 0; d < D; d++) {
      const float v = E[c * D + d];
      x[i * D + d] = v + (v - E[(c - C / 2) * D + d]) * f;
    }
  }
  cr_assert_eq(vq_nearest_ref(x, M, E, C, D, want, NULL), VQC_OK);
  int64_t later = 0;
  for (int64_t i = 0; i < M; i++) later += want[i] >= C / 2;
  cr_expect_eq(later, M, "the reference answers the nudged code in %lld of "
               "%lld rows", (long long)later, (long long)M);
  const int64_t apart = screen_matches_ref(x, M, E, C, D, "bfloat16 twins");
  cr_expect_lt(apart, M, "every row set apart: the screen never decided");
  free(want);
  free(E);
  free(x);
}

/* 200 codes within 1e-6 of one another and rows next to them: every code
 * is a candidate, more than a row may hold, so each row is set apart and
 * answered by the exact kernel: one by one for the first 96 rows (8
 * blocks), then all the rest at once (the screen gives up on the call). */
Test(vq_nearest_screen, rows_with_too_many_candidates_go_to_the_exact_kernel) {
  require_bf16();
  const int64_t C = 200, D = 16, M = 250;
  float *E = xmalloc((size_t)(C * D) * sizeof *E);
  float *x = xmalloc((size_t)(M * D) * sizeof *x);
  float base[16];
  vqc_rng r;
  vqc_rng_init(&r, 13, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_normal(&r, base, D, 0.0f, 1.0f);
  vqc_rng_normal(&r, E, C * D, 0.0f, 1e-6f);
  vqc_rng_normal(&r, x, M * D, 0.0f, 1e-6f);
  for (int64_t c = 0; c < C; c++)
    for (int64_t d = 0; d < D; d++) E[c * D + d] += base[d];
  for (int64_t i = 0; i < M; i++)
    for (int64_t d = 0; d < D; d++) x[i * D + d] += base[d];
  const int64_t apart = screen_matches_ref(x, M, E, C, D, "a dense cluster");
  cr_expect_eq(apart, M, "%lld of %lld rows set apart", (long long)apart,
               (long long)M);
  free(E);
  free(x);
}

/* Values the bound does not cover: a codebook with a norm above 1e17 or a
 * NaN sends every row to the exact kernel; rows with inf, NaN or a norm
 * above 1e17 are set apart one by one, and the others are screened. */
Test(vq_nearest_screen, values_beyond_its_bound_go_to_the_exact_kernel) {
  require_bf16();
  const int64_t C = 40, D = 8, M = 30;
  float *x, *E;
  normal_problem(14, M, C, D, 0.0f, 1.0f, &x, &E);
  cr_expect_eq(screen_matches_ref(x, M, E, C, D, "plain"), 0);

  x[3 * D + 1] = INFINITY;
  x[7 * D + 0] = NAN;
  x[9 * D + 5] = -1e18f;
  x[20 * D + 2] = 3e38f; /* finite, but its square is not */
  cr_expect_eq(screen_matches_ref(x, M, E, C, D, "rows beyond the bound"), 4);

  E[17 * D + 3] = 2e17f;
  cr_expect_eq(screen_matches_ref(x, M, E, C, D, "a code beyond the bound"),
               M);
  E[17 * D + 3] = NAN; /* its distance is NaN, clamped to 1e-8: it wins */
  cr_expect_eq(screen_matches_ref(x, M, E, C, D, "a NaN code"), M);
  free(E);
  free(x);
}

/* A thread that rounds upward: the bound assumes rounding to nearest, so
 * every row goes to the exact kernel, which matches the reference computed
 * in the same mode. */
Test(vq_nearest_screen, another_rounding_mode_goes_to_the_exact_kernel) {
  require_bf16();
  const int64_t C = 50, D = 16, M = 40;
  float *x, *E;
  normal_problem(19, M, C, D, 0.0f, 1.0f, &x, &E);
  cr_assert_eq(fesetround(FE_UPWARD), 0);
  const int64_t apart = screen_matches_ref(x, M, E, C, D, "rounding upward");
  fesetround(FE_TONEAREST);
  cr_expect_eq(apart, M);
  cr_expect_eq(screen_matches_ref(x, M, E, C, D, "rounding to nearest"), 0);
  free(E);
  free(x);
}

/* The same random data at scales from subnormal products to 1e15, and with
 * a large common offset (norms far above the gaps between distances). */
Test(vq_nearest_screen, scales_and_offsets) {
  require_bf16();
  const int64_t C = 130, D = 24, M = 100;
  const float scales[] = {1e-30f, 1e-20f, 1e-3f, 1.0f, 1e3f, 1e15f};
  float *x, *E;
  for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
    normal_problem(15, M, C, D, 0.0f, scales[k], &x, &E);
    char what[64];
    snprintf(what, sizeof what, "normal, scale %g", (double)scales[k]);
    screen_matches_ref(x, M, E, C, D, what);
    free(E);
    free(x);
  }
  normal_problem(16, M, C, D, 100.0f, 0.01f, &x, &E);
  screen_matches_ref(x, M, E, C, D, "offset 100, spread 0.01");
  free(E);
  free(x);
}

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
/* Subnormals flushed to zero (MXCSR FTZ and DAZ, as torch.set_flush_denormal
 * sets): tiny values whose products and sums fall below 2^-126, and
 * ordinary ones, each against the reference run in the same mode. */
Test(vq_nearest_screen, flushing_subnormals_changes_nothing) {
  require_bf16();
  const int64_t C = 90, D = 20, M = 60;
  const float scales[] = {1e-19f, 1e-21f, 1.0f};
  const unsigned int csr = _mm_getcsr();
  for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
    float *x, *E;
    normal_problem(20, M, C, D, 0.0f, scales[k], &x, &E);
    _mm_setcsr(csr | 0x8040u); /* FTZ | DAZ */
    char what[64];
    snprintf(what, sizeof what, "FTZ and DAZ, scale %g", (double)scales[k]);
    screen_matches_ref(x, M, E, C, D, what);
    _mm_setcsr(csr);
    free(E);
    free(x);
  }
}
#endif

/* The benchmark's kind of data (uniform rows and codes, D 64, C 1024): the
 * screen decides every row itself. */
Test(vq_nearest_screen, decides_every_row_of_random_data) {
  require_bf16();
  const int64_t C = 1024, D = 64, M = 240;
  float *E = xmalloc((size_t)(C * D) * sizeof *E);
  float *x = xmalloc((size_t)(M * D) * sizeof *x);
  vqc_rng r;
  vqc_rng_init(&r, 17, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_uniform(&r, E, C * D, -1.0f, 1.0f);
  vqc_rng_uniform(&r, x, M * D, -1.0f, 1.0f);
  cr_expect_eq(screen_matches_ref(x, M, E, C, D, "uniform"), 0);
  free(E);
  free(x);
}
