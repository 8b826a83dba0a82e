/* test_fsq.c: unit tests for vqc/fsq.h, the FSQ reference.
 *
 * Checks the worked examples of spec/quantizers.md, round half to even on
 * exact ties (the golden cases have no ties, so only these tests tell rintf
 * from roundf), index <-> code round trips over whole implicit codebooks,
 * several codebooks, the straight-through gradient against finite
 * differences, argument validation, and that every kernel this CPU has
 * (fsq_internal.h: scalar, AVX2) gives the scalar reference's bits, errors
 * included. Expected codes and indices are exact (codes are k/(L/2) or
 * 2k/(L-1)-1 in float32, indices integers). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/fsq_internal.h"
#include "quant/tanh_exact.h"
#include "vqc/fsq.h"
#include "vqc/status.h"

static vqc_fsq make(const int32_t *levels, int d, bool symmetric) {
  vqc_fsq q;
  vqc_status s = vqc_fsq_init(&q, levels, d, 1, symmetric, 1e-3);
  cr_assert_eq(s, VQC_OK, "init: %s", vqc_last_error());
  return q;
}

/* ---- spec/quantizers.md worked examples, levels [8,5,5,5] */

static const int32_t L8555[4] = {8, 5, 5, 5};

Test(fsq, basis_and_codebook_size) {
  vqc_fsq q = make(L8555, 4, false);
  cr_assert_eq(q.codebook_size, 1000);
  const int32_t want[4] = {1, 8, 40, 200};
  for (int i = 0; i < 4; i++) cr_assert_eq(q.basis[i], want[i]);
  cr_assert_eq(vqc_fsq_width(&q), 4);
}

Test(fsq, worked_examples_default_mode) {
  vqc_fsq q = make(L8555, 4, false);
  const float z[3][4] = {{0, 0, 0, 0}, {1, -1, 0.3f, 2}, {0.2f, 0.6f, -0.6f, -2}};
  const float codes[3][4] = {
      {0, 0, 0, 0}, {0.5f, -1, 0.5f, 1}, {0.25f, 0.5f, -0.5f, -1}};
  const int32_t want[3] = {500, 926, 69};
  float out[3][4];
  int32_t idx[3];
  cr_assert_eq(vqc_fsq_quantize(&q, &z[0][0], 3, &out[0][0], idx), VQC_OK);
  for (int r = 0; r < 3; r++) {
    cr_expect_eq(idx[r], want[r], "row %d: index %d, want %d", r, idx[r],
                 want[r]);
    for (int i = 0; i < 4; i++)
      cr_expect_eq(out[r][i], codes[r][i], "row %d dim %d: %g, want %g", r,
                   i, out[r][i], codes[r][i]);
  }
}

Test(fsq, worked_example_symmetric_mode) {
  vqc_fsq q = make(L8555, 4, true);
  const float z[4] = {0.2f, 0.6f, -0.6f, -2};
  float out[4], back[4];
  int32_t idx;
  cr_assert_eq(vqc_fsq_quantize(&q, z, 1, out, &idx), VQC_OK);
  cr_assert_eq(idx, 68);
  /* Level indices 4, 3, 1, 0: codes 2k/(L-1) - 1 in float32. */
  const float want[4] = {(2.0f / 7.0f) * 4.0f - 1.0f, 0.5f, -0.5f, -1.0f};
  for (int i = 0; i < 4; i++) cr_expect_eq(out[i], want[i], "dim %d", i);
  cr_assert_eq(vqc_fsq_indices_to_codes(&q, &idx, 1, back), VQC_OK);
  cr_assert_eq(memcmp(back, out, sizeof out), 0);
}

/* ---- round half to even on exact ties
 *
 * Ties are built from values tanh returns exactly: tanh(0) = 0, and the
 * correctly rounded tanh(z) = 1 for z >= 10 (1 - tanh(10) ~ 4e-9 is below
 * half a float32 ulp of 1). */

/* The library's bounded value for dimension i, in fsq.c's operation order. */
static float bounded(const vqc_fsq *q, int i, float z) {
  return vqc_tanh_exact(z + q->shift[i]) * q->half_l[i] - q->offset[i];
}

/* A single-level FSQ with the given eps; z must give bounded == tie exactly,
 * and the code must be want_k / (L/2) (round half to even), not what roundf
 * (half away from zero) would give. */
static void expect_tie(int32_t L, double eps, float z, float tie,
                       float want_k) {
  vqc_fsq q;
  cr_assert_eq(vqc_fsq_init(&q, &L, 1, 1, false, eps), VQC_OK, "%s",
               vqc_last_error());
  cr_assert_eq(bounded(&q, 0, z), tie, "L=%d eps=%g z=%g: bounded %.9g", L,
               eps, z, bounded(&q, 0, z));
  float out;
  int32_t idx;
  cr_assert_eq(vqc_fsq_quantize(&q, &z, 1, &out, &idx), VQC_OK);
  const float hw = (float)(L / 2);
  cr_expect_eq(out, want_k / hw, "L=%d: bounded %g gave code %g, want %g", L,
               tie, out, want_k / hw);
  cr_expect_neq(roundf(tie), want_k, "not a tie that separates rint/roundf");
  cr_expect_eq(idx, (int32_t)want_k + L / 2);
}

Test(fsq, round_half_to_even_on_ties) {
  /* Even L: z = -shift makes tanh(0) = 0, so bounded = -0.5 exactly:
   * rint gives -0 (level L/2), roundf would give -1. */
  for (int32_t L = 4; L <= 16; L += 2) {
    vqc_fsq q;
    cr_assert_eq(vqc_fsq_init(&q, &L, 1, 1, false, 1e-3), VQC_OK);
    expect_tie(L, 1e-3, -q.shift[0], -0.5f, 0.0f);
  }
  /* Odd L at saturation (tanh = +-1): eps chosen so that half_l =
   * (L-1)/2 * (1 + eps) is exactly k + 0.5: L=5, eps 0.25 -> 2.5; L=9,
   * eps 0.125 -> 4.5. rint goes to the even neighbour, 2 and 4. */
  expect_tie(5, 0.25, 20.0f, 2.5f, 2.0f);
  expect_tie(5, 0.25, -20.0f, -2.5f, -2.0f);
  expect_tie(9, 0.125, 20.0f, 4.5f, 4.0f);
  expect_tie(9, 0.125, -20.0f, -4.5f, -4.0f);
}

Test(fsq, symmetric_mode_rounds_half_up) {
  /* preserve_symmetry uses floor(x + 0.5), not round half to even: at z = 0
   * x = (L-1)/2, a tie for even L, and the level is L/2 (rint would give
   * L/2 - 1 for L = 6). */
  for (int32_t L = 2; L <= 12; L += 2) {
    vqc_fsq q = make(&L, 1, true);
    const float z = 0.0f;
    float out;
    int32_t idx;
    cr_assert_eq(vqc_fsq_quantize(&q, &z, 1, &out, &idx), VQC_OK);
    cr_expect_eq(idx, L / 2, "L=%d: level %d, want %d", L, idx, L / 2);
    cr_expect_eq(out, (2.0f / (float)(L - 1)) * (float)(L / 2) - 1.0f);
  }
}

/* ---- round trips over the whole implicit codebook */

/* A z whose code is `code` (dimension i), away from rounding boundaries:
 * the real-valued inverse of the bound, aimed at the middle of the bin. */
static float z_for_code(const vqc_fsq *q, int i, float code) {
  const int L = q->levels[i];
  if (q->preserve_symmetry) {
    const double k = ((double)code + 1.0) * (L - 1) / 2.0;
    double t = 2.0 * k / (L - 1) - 1.0; /* bracket argument at k + 0.5 */
    const double edge = 1.0 - 0.5 / (L - 1); /* keep atanh finite */
    if (t > edge) t = edge;
    if (t < -edge) t = -edge;
    return (float)atanh(t);
  }
  const double target = (double)code * (L / 2); /* an integer */
  return (float)(atanh((target + q->offset[i]) / q->half_l[i]) - q->shift[i]);
}

static void round_trip(const int32_t *levels, int d, bool symmetric) {
  vqc_fsq q = make(levels, d, symmetric);
  const int64_t K = q.codebook_size;
  float *cb = malloc(sizeof(float) * (size_t)(K * d));
  float *codes = malloc(sizeof(float) * (size_t)(K * d));
  float *z = malloc(sizeof(float) * (size_t)(K * d));
  float *out = malloc(sizeof(float) * (size_t)(K * d));
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)K);
  int32_t *all = malloc(sizeof(int32_t) * (size_t)K);
  int32_t *lvl = malloc(sizeof(int32_t) * (size_t)(K * d));
  cr_assert(cb && codes && z && out && idx && all && lvl);
  for (int64_t k = 0; k < K; k++) all[k] = (int32_t)k;

  cr_assert_eq(vqc_fsq_implicit_codebook(&q, cb), VQC_OK);
  /* codes -> indices gives every index back, in order. */
  cr_assert_eq(vqc_fsq_codes_to_indices(&q, cb, K, idx), VQC_OK);
  for (int64_t k = 0; k < K; k++)
    cr_assert_eq(idx[k], k, "levels d=%d sym=%d: row %lld -> index %d", d,
                 symmetric, (long long)k, idx[k]);
  /* indices -> codes is the implicit codebook, bit for bit. */
  cr_assert_eq(vqc_fsq_indices_to_codes(&q, all, K, codes), VQC_OK);
  cr_assert_eq(memcmp(codes, cb, sizeof(float) * (size_t)(K * d)), 0);
  /* Level indices: in range and they rebuild the index. */
  cr_assert_eq(vqc_fsq_level_indices(&q, all, K, lvl), VQC_OK);
  for (int64_t k = 0; k < K; k++) {
    int64_t back = 0;
    for (int i = 0; i < d; i++) {
      const int32_t li = lvl[k * d + i];
      cr_assert(li >= 0 && li < levels[i]);
      back += (int64_t)li * q.basis[i];
    }
    cr_assert_eq(back, k);
  }
  /* Every code is reachable: quantizing a z aimed at code k gives k. */
  for (int64_t k = 0; k < K; k++)
    for (int i = 0; i < d; i++) {
      const float c = cb[k * d + i];
      cr_assert(c >= -1.0f && c <= 1.0f);
      z[k * d + i] = z_for_code(&q, i, c);
    }
  cr_assert_eq(vqc_fsq_quantize(&q, z, K, out, idx), VQC_OK);
  for (int64_t k = 0; k < K; k++)
    cr_assert_eq(idx[k], k, "levels d=%d sym=%d: z for code %lld -> %d", d,
                 symmetric, (long long)k, idx[k]);
  /* Equal values: the forward may give -0.0 (rint of a small negative, as
   * torch.round does) where the decoded codebook has +0.0. */
  for (int64_t e = 0; e < K * d; e++)
    cr_assert_eq(out[e], cb[e], "element %lld: %g vs %g", (long long)e,
                 out[e], cb[e]);
  free(cb);
  free(codes);
  free(z);
  free(out);
  free(idx);
  free(all);
  free(lvl);
}

Test(fsq, index_code_round_trip_default) {
  round_trip(L8555, 4, false);
  round_trip((const int32_t[]){8, 6, 5}, 3, false);
  round_trip((const int32_t[]){7, 5, 5, 5, 5}, 5, false);
  round_trip((const int32_t[]){3}, 1, false);
  round_trip((const int32_t[]){4, 16, 3}, 3, false);
}

Test(fsq, index_code_round_trip_symmetric) {
  round_trip(L8555, 4, true);
  round_trip((const int32_t[]){2, 2, 2, 2}, 4, true);
  round_trip((const int32_t[]){8, 6, 5}, 3, true);
  round_trip((const int32_t[]){16, 3}, 2, true);
}

Test(fsq, default_even_levels_are_asymmetric) {
  /* Even L in default mode: codes -1 .. (L/2-1)/(L/2), zero included. */
  vqc_fsq q = make((const int32_t[]){4}, 1, false);
  float cb[4];
  cr_assert_eq(vqc_fsq_implicit_codebook(&q, cb), VQC_OK);
  const float want[4] = {-1.0f, -0.5f, 0.0f, 0.5f};
  for (int k = 0; k < 4; k++) cr_expect_eq(cb[k], want[k], "code %d", k);
  /* Saturation: huge inputs land on the end codes, inf included. */
  const float z[4] = {-1e30f, 1e30f, -INFINITY, INFINITY};
  float out[4];
  cr_assert_eq(vqc_fsq_quantize(&q, z, 4, out, NULL), VQC_OK);
  cr_expect_eq(out[0], -1.0f);
  cr_expect_eq(out[1], 0.5f);
  cr_expect_eq(out[2], -1.0f);
  cr_expect_eq(out[3], 0.5f);
}

/* ---- several codebooks */

Test(fsq, num_codebooks_split_the_feature_dim) {
  const int32_t levels[3] = {8, 6, 5};
  vqc_fsq one, three;
  cr_assert_eq(vqc_fsq_init(&one, levels, 3, 1, false, 1e-3), VQC_OK);
  cr_assert_eq(vqc_fsq_init(&three, levels, 3, 3, false, 1e-3), VQC_OK);
  cr_assert_eq(vqc_fsq_width(&three), 9);
  enum { M = 5 };
  float z[M * 9], out3[M * 9], out1[M * 9], back[M * 9];
  for (int e = 0; e < M * 9; e++) z[e] = sinf(0.7f * (float)e) * 2.5f;
  int32_t idx3[M * 3], idx1[M * 3];
  cr_assert_eq(vqc_fsq_quantize(&three, z, M, out3, idx3), VQC_OK);
  /* The same numbers as 3*M rows of a single codebook: group c of row m is
   * columns 3c..3c+2, i.e. single-codebook row 3m + c. */
  cr_assert_eq(vqc_fsq_quantize(&one, z, 3 * M, out1, idx1), VQC_OK);
  cr_assert_eq(memcmp(out3, out1, sizeof out3), 0);
  cr_assert_eq(memcmp(idx3, idx1, sizeof idx3), 0);
  /* Some groups differ, so the test would notice groups being mixed up. */
  bool differ = false;
  for (int g = 1; g < M * 3; g++) differ |= idx3[g] != idx3[0];
  cr_assert(differ);
  cr_assert_eq(vqc_fsq_indices_to_codes(&three, idx3, M, back), VQC_OK);
  cr_assert_eq(memcmp(back, out3, sizeof back), 0);
  int32_t again[M * 3];
  cr_assert_eq(vqc_fsq_codes_to_indices(&three, out3, M, again), VQC_OK);
  cr_assert_eq(memcmp(again, idx3, sizeof again), 0);
}

/* ---- straight-through gradient */

/* The function whose gradient the straight-through estimator passes: the
 * code before rounding, in double. */
static double surrogate(const vqc_fsq *q, int i, double z) {
  const int L = q->levels[i];
  if (q->preserve_symmetry) {
    const double bracket = (L - 1) * (tanh(z) + 1.0) / 2.0 + 0.5;
    return (2.0 / (L - 1)) * bracket - 1.0;
  }
  return (tanh(z + q->shift[i]) * q->half_l[i] - q->offset[i]) / (L / 2);
}

static void check_gradient(bool symmetric) {
  const int32_t levels[4] = {8, 5, 6, 3};
  vqc_fsq q;
  cr_assert_eq(vqc_fsq_init(&q, levels, 4, 2, symmetric, 1e-3), VQC_OK);
  enum { M = 6, W = 8 };
  float z[M * W], g[M * W], gz[M * W];
  for (int e = 0; e < M * W; e++) {
    z[e] = 2.0f * sinf(1.3f * (float)e + 0.2f);
    g[e] = 0.5f + 0.25f * cosf((float)e); /* upstream gradient, != 1 */
  }
  cr_assert_eq(vqc_fsq_backward(&q, z, g, M, gz), VQC_OK);
  const double h = 1e-3;
  for (int e = 0; e < M * W; e++) {
    const int i = e % 4;
    const double fd = (surrogate(&q, i, z[e] + h) - surrogate(&q, i, z[e] - h)) /
                      (2 * h);
    const double want = g[e] * fd;
    /* Budget: central differences err by h^2 f'''/6 ~ 1e-7 here; the
     * float32 chain has a few ulps of relative error (~1e-6). */
    cr_expect(fabs(gz[e] - want) <= 1e-5 + 1e-4 * fabs(want),
              "sym=%d e=%d z=%g: grad %.9g, finite difference %.9g",
              symmetric, e, z[e], gz[e], want);
  }
  /* Saturated inputs pass (almost) no gradient. */
  const float big = 30.0f, one = 1.0f;
  float gb;
  cr_assert_eq(vqc_fsq_backward(&q, (const float[8]){big, big, big, big, big,
                                                     big, big, big},
                                (const float[8]){one, one, one, one, one, one,
                                                 one, one},
                                1, gz),
               VQC_OK);
  gb = gz[0];
  cr_expect(fabsf(gb) < 1e-6f, "grad at z=30: %g", gb);
}

Test(fsq, gradient_matches_finite_differences_default) {
  check_gradient(false);
}

Test(fsq, gradient_matches_finite_differences_symmetric) {
  check_gradient(true);
}

Test(fsq, backward_in_place) {
  vqc_fsq q = make(L8555, 4, false);
  const float z[4] = {0.1f, -0.3f, 0.7f, 1.1f};
  float g[4] = {1, 2, 3, 4}, sep[4];
  cr_assert_eq(vqc_fsq_backward(&q, z, g, 1, sep), VQC_OK);
  cr_assert_eq(vqc_fsq_backward(&q, z, g, 1, g), VQC_OK);
  cr_assert_eq(memcmp(g, sep, sizeof g), 0);
}

/* ---- every kernel equals the scalar reference */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
static float normal(uint64_t *s) {
  const double u1 = ((double)(splitmix(s) >> 11) + 1.0) * 0x1p-53;
  const double u2 = (double)(splitmix(s) >> 11) * 0x1p-53;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* An input of dimension i near a rounding boundary: within a few ulp of the
 * z whose bounded value is a .5 (default mode) or whose bracket argument
 * is an integer (symmetric mode), or of the z where bounded crosses 0. */
static float near_boundary(const vqc_fsq *q, int i, uint64_t *s) {
  const int L = q->levels[i];
  const int64_t r = (int64_t)(splitmix(s) % (uint64_t)(L + 1));
  double z;
  if (q->preserve_symmetry) {
    /* (L-1)(t+1)/2 + 0.5 = j  <=>  t = 2(j - 0.5)/(L-1) - 1 */
    const double t = 2.0 * ((double)r - 0.5) / (L - 1) - 1.0;
    z = atanh(fmax(-0.999, fmin(0.999, t)));
  } else {
    const double b = (r == (int64_t)L) ? 0.0 : (double)r - L / 2 + 0.5;
    z = atanh(fmax(-0.999, fmin(0.999, (b + q->offset[i]) / q->half_l[i]))) -
        q->shift[i];
  }
  float f = (float)z;
  const int steps = (int)(splitmix(s) % 9) - 4;
  for (int k = 0; k < abs(steps); k++)
    f = nextafterf(f, steps > 0 ? INFINITY : -INFINITY);
  return f;
}

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static void kernels_case(const int32_t *levels, int d, int C, bool sym,
                         int64_t M, uint64_t seed) {
  vqc_fsq q;
  cr_assert_eq(vqc_fsq_init(&q, levels, d, C, sym, 1e-3), VQC_OK, "%s",
               vqc_last_error());
  const int64_t groups = M * C;
  const size_t n = (size_t)groups * (size_t)d;
  float *z = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float)),
        *got = malloc(n * sizeof(float));
  int32_t *want_idx = malloc((size_t)groups * sizeof(int32_t)),
          *got_idx = malloc((size_t)groups * sizeof(int32_t));
  cr_assert(z && want && got && want_idx && got_idx);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, 1e30f, -1e30f,
                            0x1p-149f, -0x1p-140f, 1.1355606f, 9.5f};
  for (size_t e = 0; e < n; e++) {
    const int i = (int)(e % (size_t)d);
    switch (splitmix(&seed) % 4) {
    case 0: z[e] = 3.0f * normal(&seed); break;
    case 1: z[e] = near_boundary(&q, i, &seed); break;
    case 2: z[e] = specials[splitmix(&seed) % 10]; break;
    default: z[e] = 0.3f * normal(&seed); break;
    }
  }
  cr_assert_eq(fsq_quantize_with(FSQ_KERNEL_SCALAR, &q, z, M, want, want_idx),
               VQC_OK, "%s", vqc_last_error());
  for (int k = 0; k < FSQ_KERNEL_COUNT; k++) {
    if (!fsq_kernel_available((fsq_kernel)k)) {
      cr_expect_eq(fsq_quantize_with((fsq_kernel)k, &q, z, M, got, got_idx),
                   VQC_EUNSUPPORTED);
      continue;
    }
    const char *name = fsq_kernel_name((fsq_kernel)k);
    memset(got, 0xA5, n * sizeof(float));
    memset(got_idx, 0xA5, (size_t)groups * sizeof(int32_t));
    cr_assert_eq(fsq_quantize_with((fsq_kernel)k, &q, z, M, got, got_idx),
                 VQC_OK, "%s: %s", name, vqc_last_error());
    for (size_t e = 0; e < n; e++)
      cr_assert_eq(fbits(got[e]), fbits(want[e]),
                   "kernel %s, levels[0]=%d d=%d C=%d sym=%d: element %zu "
                   "(z = %a): %a vs %a", name, (int)levels[0], d, C, (int)sym,
                   e, (double)z[e], (double)got[e], (double)want[e]);
    cr_assert_eq(memcmp(got_idx, want_idx, (size_t)groups * sizeof(int32_t)),
                 0, "kernel %s: indices differ", name);
    /* codes only, and in place (out == z) */
    memcpy(got, z, n * sizeof(float));
    cr_assert_eq(fsq_quantize_with((fsq_kernel)k, &q, got, M, got, NULL),
                 VQC_OK);
    cr_assert_eq(memcmp(got, want, n * sizeof(float)), 0,
                 "kernel %s in place", name);
  }
  /* vqc_fsq_quantize is the best kernel */
  cr_assert_eq(vqc_fsq_quantize(&q, z, M, got, got_idx), VQC_OK);
  cr_assert_eq(memcmp(got, want, n * sizeof(float)), 0);
  cr_assert_eq(memcmp(got_idx, want_idx, (size_t)groups * sizeof(int32_t)), 0);
  free(z);
  free(want);
  free(got);
  free(want_idx);
  free(got_idx);
}

Test(fsq, kernels_equal_the_scalar_reference) {
  /* whole blocks of 8 groups and tails; d from 1 to 30 (every lane/dimension
   * pattern of the 8-wide kernel); several codebooks; both modes */
  kernels_case(L8555, 4, 1, false, 4099, 1);
  kernels_case(L8555, 4, 1, true, 4099, 2);
  kernels_case((const int32_t[]){8, 6, 5}, 3, 2, false, 1001, 3);
  kernels_case((const int32_t[]){7, 5, 5, 5, 5}, 5, 1, false, 803, 4);
  kernels_case((const int32_t[]){16}, 1, 3, false, 1000, 5);
  kernels_case((const int32_t[]){2, 2, 2, 2, 2, 2}, 6, 1, true, 517, 6);
  kernels_case((const int32_t[]){4, 16, 3}, 3, 1, true, 999, 7);
  int32_t many[30];
  for (int i = 0; i < 30; i++) many[i] = 2;
  for (int d = 1; d <= 30; d++) {
    kernels_case(many, d, 1, true, 67, 100 + (uint64_t)d);
    int32_t odd[30];
    for (int i = 0; i < d; i++) odd[i] = 3;
    if (d <= 19) kernels_case(odd, d, 2, false, 45, 200 + (uint64_t)d);
  }
  printf("fsq kernels checked against the scalar reference; best here: %s\n",
         fsq_kernel_name(fsq_kernel_best()));
}

/* A NaN in a later block: every kernel reports the same element and writes
 * the same outputs before it (the groups before the NaN's are done). */
Test(fsq, kernels_report_nan_alike) {
  vqc_fsq q = make(L8555, 4, false);
  enum { M = 100 };
  float z[M * 4], want[M * 4], got[M * 4];
  int32_t want_idx[M], got_idx[M];
  for (int e = 0; e < M * 4; e++) z[e] = 1.5f * sinf(0.37f * (float)e);
  z[4 * 53 + 2] = NAN;
  memset(want, 0, sizeof want);
  memset(want_idx, 0, sizeof want_idx);
  cr_assert_eq(fsq_quantize_with(FSQ_KERNEL_SCALAR, &q, z, M, want, want_idx),
               VQC_EINVAL);
  char msg[256];
  snprintf(msg, sizeof msg, "%s", vqc_last_error());
  cr_expect(strstr(msg, "z[53][2] is NaN") != NULL, "%s", msg);
  for (int k = 0; k < FSQ_KERNEL_COUNT; k++) {
    if (!fsq_kernel_available((fsq_kernel)k)) continue;
    memset(got, 0, sizeof got);
    memset(got_idx, 0, sizeof got_idx);
    cr_assert_eq(fsq_quantize_with((fsq_kernel)k, &q, z, M, got, got_idx),
                 VQC_EINVAL);
    cr_expect_str_eq(vqc_last_error(), msg);
    cr_expect_eq(memcmp(got, want, sizeof got), 0, "kernel %s",
                 fsq_kernel_name((fsq_kernel)k));
    cr_expect_eq(memcmp(got_idx, want_idx, sizeof got_idx), 0);
  }
}

/* Codes whose float32 index sum rounds to 2^31: one level of 2^31 - 1
 * (the largest codebook; half_width rounds to 2^30 in float32, so the top
 * code's level is 2^31). Every kernel names the same group. */
Test(fsq, kernels_report_a_bad_index_alike) {
  const int32_t L = 2147483647;
  vqc_fsq q;
  cr_assert_eq(vqc_fsq_init(&q, &L, 1, 1, false, 0.0), VQC_OK, "%s",
               vqc_last_error());
  enum { M = 20 };
  float z[M], got[M];
  int32_t idx[M];
  for (int m = 0; m < M; m++) z[m] = m == 11 ? 50.0f : 0.0f;
  cr_assert_eq(fsq_quantize_with(FSQ_KERNEL_SCALAR, &q, z, M, got, idx),
               VQC_EINVAL);
  char msg[256];
  snprintf(msg, sizeof msg, "%s", vqc_last_error());
  cr_expect(strstr(msg, "group 11") != NULL, "%s", msg);
  for (int k = 0; k < FSQ_KERNEL_COUNT; k++) {
    if (!fsq_kernel_available((fsq_kernel)k)) continue;
    cr_assert_eq(fsq_quantize_with((fsq_kernel)k, &q, z, M, got, idx),
                 VQC_EINVAL);
    cr_expect_str_eq(vqc_last_error(), msg);
    for (int m = 0; m < 11; m++) cr_expect_eq(idx[m], 1073741824, "group %d", m);
  }
}

/* The backward's tanh comes from the fastest tanh kernel a chunk at a
 * time: the result must be the element-wise chain with the scalar
 * definition, bit for bit, across chunk boundaries and tails. */
static void backward_exact(bool symmetric) {
  const int32_t levels[3] = {8, 5, 6};
  vqc_fsq q;
  cr_assert_eq(vqc_fsq_init(&q, levels, 3, 2, symmetric, 1e-3), VQC_OK);
  enum { M = 700, W = 6, N = M * W }; /* 4200 elements: 4 chunks + a tail */
  static float z[N], g[N], got[N];
  uint64_t seed = symmetric ? 9 : 8;
  for (int e = 0; e < N; e++) {
    z[e] = 3.0f * normal(&seed);
    g[e] = normal(&seed);
  }
  z[5] = 1.1355606f;
  z[6] = INFINITY;
  z[7] = -0.0f;
  cr_assert_eq(vqc_fsq_backward(&q, z, g, M, got), VQC_OK);
  for (int e = 0; e < N; e++) {
    const int i = e % 3;
    float grad_tanh, t;
    if (symmetric) {
      t = vqc_tanh_exact(z[e]);
      grad_tanh = g[e] * q.sym_scale[i] * (float)(q.levels[i] - 1) / 2.0f;
    } else {
      t = vqc_tanh_exact(z[e] + q.shift[i]);
      grad_tanh = g[e] / q.half_width[i] * q.half_l[i];
    }
    const float want = grad_tanh * (1.0f - t * t);
    cr_assert_eq(fbits(got[e]), fbits(want), "sym=%d e=%d z=%a: %a vs %a",
                 (int)symmetric, e, (double)z[e], (double)got[e],
                 (double)want);
  }
  static float in_place[N];
  memcpy(in_place, g, sizeof in_place);
  cr_assert_eq(vqc_fsq_backward(&q, z, in_place, M, in_place), VQC_OK);
  cr_assert_eq(memcmp(in_place, got, sizeof got), 0, "in place");
}

Test(fsq, backward_is_the_elementwise_chain_with_the_exact_tanh) {
  backward_exact(false);
  backward_exact(true);
}

/* ---- argument validation: errors, with a message, never a crash */

Test(fsq, rejects_bad_arguments) {
  vqc_fsq q;
  cr_expect_eq(vqc_fsq_init(&q, (const int32_t[]){8, 1}, 2, 1, false, 1e-3),
               VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "level 1 is 1") != NULL, "%s",
            vqc_last_error());
  /* L = 2 only with preserve_symmetry, as in the library. */
  cr_expect_eq(vqc_fsq_init(&q, (const int32_t[]){2, 5}, 2, 1, false, 1e-3),
               VQC_EINVAL);
  cr_expect_eq(vqc_fsq_init(&q, (const int32_t[]){2, 5}, 2, 1, true, 1e-3),
               VQC_OK);
  cr_expect_eq(vqc_fsq_init(&q, (const int32_t[]){8}, 0, 1, false, 1e-3),
               VQC_EINVAL);
  cr_expect_eq(vqc_fsq_init(&q, (const int32_t[]){8}, 1, 0, false, 1e-3),
               VQC_EINVAL);
  cr_expect_eq(vqc_fsq_init(&q, (const int32_t[]){8}, 1, 1, false, NAN),
               VQC_EINVAL);
  /* An eps so large that codes would leave [-1, 1]. */
  cr_expect_eq(vqc_fsq_init(&q, (const int32_t[]){5}, 1, 1, false, 0.5),
               VQC_EINVAL);
  /* 2^31 codes do not fit an int32 index; 2^30 do. */
  int32_t big[31];
  for (int i = 0; i < 31; i++) big[i] = 2;
  cr_expect_eq(vqc_fsq_init(&q, big, 31, 1, true, 1e-3), VQC_EINVAL);
  /* With eps = 1e-3, tanh's ends round outside the levels once L is above
   * about 1000 (the library would return codes beyond +-1). */
  cr_expect_eq(vqc_fsq_init(&q, (const int32_t[]){1024}, 1, 1, false, 1e-3),
               VQC_EINVAL);
  cr_expect_eq(vqc_fsq_init(&q, (const int32_t[]){1024}, 1, 1, false, 0.0),
               VQC_OK);
  cr_expect_eq(vqc_fsq_init(&q, (const int32_t[]){1 << 15, 1 << 15, 2}, 3, 1,
                            true, 1e-3),
               VQC_EINVAL);
  cr_expect_eq(vqc_fsq_init(&q, (const int32_t[]){1 << 15, 1 << 15}, 2, 1,
                            true, 1e-3),
               VQC_OK);

  q = make(L8555, 4, false);
  float codes[4];
  int32_t bad[2] = {17, 1000};
  cr_expect_eq(vqc_fsq_indices_to_codes(&q, bad, 2, NULL), VQC_EINVAL);
  float two[8];
  cr_expect_eq(vqc_fsq_indices_to_codes(&q, bad, 2, two), VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "index 1000") != NULL, "%s",
            vqc_last_error());
  int32_t neg = -1, lv[4];
  cr_expect_eq(vqc_fsq_level_indices(&q, &neg, 1, lv), VQC_EINVAL);
  const float nan_z[4] = {0, NAN, 0, 0};
  cr_expect_eq(vqc_fsq_quantize(&q, nan_z, 1, codes, NULL), VQC_EINVAL);
  const float junk[4] = {0, 0, 0, 1e30f};
  int32_t idx;
  cr_expect_eq(vqc_fsq_codes_to_indices(&q, junk, 1, &idx), VQC_EINVAL);
  cr_expect_eq(vqc_fsq_quantize(&q, NULL, 1, codes, NULL), VQC_EINVAL);
  cr_expect_eq(vqc_fsq_quantize(&q, nan_z, -1, codes, NULL), VQC_EINVAL);
  /* M == 0 is a valid empty batch. */
  cr_expect_eq(vqc_fsq_quantize(&q, NULL, 0, NULL, NULL), VQC_OK);
}
