/* test_rfsq.c: unit tests for vqc/rfsq.h, the residual FSQ reference.
 *
 * A 2-layer levels [5,5] example worked by hand (every code and output is a
 * multiple of 1/8, so exact), indices -> codes round trips that must give
 * the forward's output bit for bit, quantize dropout (-1 indices, zero
 * contribution, cutoff drawn exactly as rvq.c draws it), the straight-through
 * gradient, and argument validation. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vqc/rfsq.h"
#include "vqc/rvq.h"
#include "vqc/status.h"

static vqc_rfsq make(const int32_t *levels, int d, int Q, bool dropout) {
  vqc_rfsq_params p;
  vqc_rfsq_params_default(&p, levels, d, Q);
  p.quantize_dropout = dropout;
  vqc_rfsq r;
  vqc_status s = vqc_rfsq_init(&r, &p);
  cr_assert_eq(s, VQC_OK, "init: %s", vqc_last_error());
  return r;
}

/* ---- the hand-checked example: levels [5,5], Q = 2, scales 1 and 1/4.
 * L = 5: half_l = 2*1.001 = 2.002, no offset; code = rint(tanh(z)*2.002)/2;
 * k = 2*code + 2; index = k0 + 5*k1.
 * Row 0, x = [0.3, -0.6]:
 *   layer 0: tanh*2.002 = [0.583, -1.075] -> codes [0.5, -0.5], k [3,1],
 *            index 8; residual [-0.2, -0.1]
 *   layer 1: z = residual/0.25 = [-0.8, -0.4]; tanh*2.002 = [-1.329, -0.761]
 *            -> codes [-0.5, -0.5] * 0.25 = [-0.125, -0.125], k [1,1], index 6
 *   output [0.375, -0.625]
 * Row 1, x = [0, 2]:
 *   layer 0: [0, 1.930] -> codes [0, 1], k [2,4], index 22; residual [0, 1]
 *   layer 1: z = [0, 4]: [0, 2.0007] -> codes [0, 1] * 0.25, index 22
 *   output [0, 1.25] (the second layer reaches past the first's bound) */

static const int32_t L55[2] = {5, 5};
static const float X55[2][2] = {{0.3f, -0.6f}, {0.0f, 2.0f}};

Test(rfsq, scales) {
  const int32_t lv[3] = {8, 5, 3};
  vqc_rfsq r = make(lv, 3, 3, false);
  cr_assert_eq(r.scales[0][0], 1.0f);
  cr_assert_eq(r.scales[0][2], 1.0f);
  cr_assert_eq(r.scales[1][1], 0.25f);
  cr_assert_eq(r.scales[2][1], 0.0625f);
  cr_assert_eq(r.scales[2][2], 0.25f);
  cr_assert_eq(r.scales[1][0], 1.0f / 7.0f); /* correctly rounded 1/7 */
}

Test(rfsq, hand_checked_two_layers) {
  vqc_rfsq r = make(L55, 2, 2, false);
  int32_t idx[2][2];
  float out[2][2];
  cr_assert_eq(vqc_rfsq_forward(&r, &X55[0][0], 2, VQC_RFSQ_ALL, &idx[0][0],
                                &out[0][0]),
               VQC_OK, "%s", vqc_last_error());
  const int32_t want_idx[2][2] = {{8, 6}, {22, 22}};
  const float want_out[2][2] = {{0.375f, -0.625f}, {0.0f, 1.25f}};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      cr_expect_eq(idx[i][j], want_idx[i][j], "idx[%d][%d] = %d", i, j,
                   idx[i][j]);
      cr_expect_eq(out[i][j], want_out[i][j], "out[%d][%d] = %.9g", i, j,
                   (double)out[i][j]);
    }

  /* Layer codes, scaled: (Q, M, d). */
  float codes[2][2][2];
  cr_assert_eq(vqc_rfsq_codes_from_indices(&r, &idx[0][0], 2, 2,
                                           &codes[0][0][0]),
               VQC_OK);
  const float want_codes[2][2][2] = {{{0.5f, -0.5f}, {0.0f, 1.0f}},
                                     {{-0.125f, -0.125f}, {0.0f, 0.25f}}};
  cr_assert(memcmp(codes, want_codes, sizeof codes) == 0);
}

/* The gradient of the example: per element, sum over layers of
 * FSQ'(z_l) = 2.002 * (1 - tanh^2(z_l)) / 2 with z_1 = residual / 0.25 (the
 * scale cancels). Budget 1e-6 absolute: 1 - tanh^2 cancels, so float32's
 * error is absolute, a few ulps of 1 (1.2e-7 each) per layer. */
Test(rfsq, straight_through_gradient) {
  vqc_rfsq r = make(L55, 2, 2, true);
  const float ones[4] = {1, 1, 1, 1};
  float g[4];
  const double z1[2][2] = {{(0.3f - 0.5f) / 0.25, (-0.6f + 0.5f) / 0.25},
                           {0.0, 4.0}};
  const double half = (double)(4.0f * (float)1.001 / 2.0f) / 2.0;
  cr_assert_eq(vqc_rfsq_backward(&r, &X55[0][0], 2, VQC_RFSQ_ALL, ones, g),
               VQC_OK, "%s", vqc_last_error());
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 2; k++) {
      const double t0 = tanh((double)X55[i][k]), t1 = tanh(z1[i][k]);
      const double want = half * (1 - t0 * t0) + half * (1 - t1 * t1);
      cr_expect(fabs(g[i * 2 + k] - want) <= 1e-6, "g[%d][%d] %.9g "
                "want %.9g", i, k, (double)g[i * 2 + k], want);
    }
  /* Cutoff 0: only layer 0 contributes. */
  cr_assert_eq(vqc_rfsq_backward(&r, &X55[0][0], 2, 0, ones, g), VQC_OK);
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 2; k++) {
      const double t0 = tanh((double)X55[i][k]);
      const double want = half * (1 - t0 * t0);
      cr_expect(fabs(g[i * 2 + k] - want) <= 1e-6);
    }
}

/* Deterministic inputs spread over [-1, 1], the range FSQ layers can
 * represent (a simple LCG; the values only need to be varied). */
static void fill(float *x, int64_t n, uint32_t seed) {
  for (int64_t j = 0; j < n; j++) {
    seed = seed * 1664525u + 1013904223u;
    x[j] = (float)((double)(seed >> 8) / (double)(1u << 24) * 2.0 - 1.0);
  }
}

/* Levels [8,5,3]: scale 7^-l is not a power of two, so this also checks that
 * decoding multiplies by the same float32 scale the forward used. */
Test(rfsq, indices_round_trip_is_exact) {
  const int32_t lv[3] = {8, 5, 3};
  enum { M = 257, D = 3, Q = 4 };
  vqc_rfsq r = make(lv, D, Q, false);
  static float x[M * D], out[M * D], dec[M * D], codes[Q * M * D];
  static int32_t idx[M * Q];
  fill(x, M * D, 7);
  cr_assert_eq(vqc_rfsq_forward(&r, x, M, VQC_RFSQ_ALL, idx, out), VQC_OK,
               "%s", vqc_last_error());
  cr_assert_eq(vqc_rfsq_output_from_indices(&r, idx, M, Q, dec), VQC_OK);
  cr_assert(memcmp(out, dec, sizeof out) == 0);
  /* Per layer codes sum (l ascending) to the same output. */
  cr_assert_eq(vqc_rfsq_codes_from_indices(&r, idx, M, Q, codes), VQC_OK);
  for (int64_t j = 0; j < M * D; j++) {
    float acc = 0.0f;
    for (int l = 0; l < Q; l++) acc += codes[l * M * D + j];
    cr_assert_eq(acc, out[j]);
  }
  /* Each layer refines: the error after Q layers is far below layer 0's. */
  double err0 = 0, errQ = 0;
  for (int64_t j = 0; j < M * D; j++) {
    err0 += fabs((double)x[j] - codes[j]);
    errQ += fabs((double)x[j] - out[j]);
  }
  cr_expect(errQ < err0 / 4, "err0 %g errQ %g", err0, errQ);
}

Test(rfsq, dropout_gives_minus_one_and_adds_nothing) {
  const int32_t lv[3] = {8, 5, 5};
  enum { M = 31, D = 3, Q = 3 };
  vqc_rfsq r = make(lv, D, Q, true);
  static float x[M * D], out[M * D], fsq_out[M * D], codes[Q * M * D],
      dec[M * D], full[M * D];
  static int32_t idx[M * Q], fsq_idx[M], first[M];
  fill(x, M * D, 11);
  cr_assert_eq(vqc_rfsq_forward(&r, x, M, 0, idx, out), VQC_OK, "%s",
               vqc_last_error());
  /* Layer 0 alone is plain FSQ at scale 1. Compared with == since FSQ's
   * -0.0 codes come out as 0.0f + -0.0f = +0.0 (as upstream's 0. + q). */
  cr_assert_eq(vqc_fsq_quantize(&r.fsq, x, M, fsq_out, fsq_idx), VQC_OK);
  for (int64_t j = 0; j < M * D; j++) cr_assert_eq(out[j], fsq_out[j]);
  for (int i = 0; i < M; i++) {
    cr_assert_eq(idx[i * Q + 0], fsq_idx[i]);
    cr_assert_eq(idx[i * Q + 1], -1);
    cr_assert_eq(idx[i * Q + 2], -1);
    first[i] = fsq_idx[i];
  }
  /* -1 decodes to zero vectors; the sum is the forward's output. */
  cr_assert_eq(vqc_rfsq_codes_from_indices(&r, idx, M, Q, codes), VQC_OK);
  for (int64_t j = M * D; j < Q * M * D; j++) cr_assert_eq(codes[j], 0.0f);
  cr_assert_eq(vqc_rfsq_output_from_indices(&r, idx, M, Q, dec), VQC_OK);
  cr_assert(memcmp(out, dec, sizeof out) == 0);
  /* Missing trailing columns are padded with -1 (needs dropout). */
  cr_assert_eq(vqc_rfsq_output_from_indices(&r, first, M, 1, dec), VQC_OK);
  cr_assert(memcmp(out, dec, sizeof out) == 0);
  /* Cutoff 1 runs two layers: the first two index columns match the full
   * run's, the third is -1. */
  static int32_t idx_full[M * Q];
  cr_assert_eq(vqc_rfsq_forward(&r, x, M, Q - 1, idx_full, full), VQC_OK);
  cr_assert_eq(vqc_rfsq_forward(&r, x, M, 1, idx, out), VQC_OK);
  for (int i = 0; i < M; i++) {
    cr_assert_eq(idx[i * Q + 0], idx_full[i * Q + 0]);
    cr_assert_eq(idx[i * Q + 1], idx_full[i * Q + 1]);
    cr_assert_eq(idx[i * Q + 2], -1);
  }
}

/* rfsq draws the cutoff as rvq.c does: feed rvq the same seed through its
 * injectable draw and compare, for several dropout settings. */
static vqc_status fixed_seed(void *user, vqc_draw_at at, int64_t *seed) {
  (void)at;
  *seed = *(const int64_t *)user;
  return VQC_OK;
}

Test(rfsq, cutoff_matches_rvq) {
  const int settings[3][3] = {{4, 0, 1}, {4, 1, 1}, {5, 0, 2}}; /* Q,lo,m */
  for (int s = 0; s < 3; s++) {
    const int Q = settings[s][0];
    vqc_rfsq_params p;
    vqc_rfsq_params_default(&p, L55, 2, Q);
    p.quantize_dropout = true;
    p.dropout_cutoff_index = settings[s][1];
    p.dropout_multiple_of = settings[s][2];
    vqc_rfsq r;
    cr_assert_eq(vqc_rfsq_init(&r, &p), VQC_OK, "%s", vqc_last_error());
    vqc_rvq_params rp;
    vqc_rvq_params_default(&rp, Q, 2, 4);
    rp.quantize_dropout = true;
    rp.dropout_cutoff_index = p.dropout_cutoff_index;
    rp.dropout_multiple_of = p.dropout_multiple_of;
    vqc_rvq rv;
    cr_assert_eq(vqc_rvq_init(&rv, &rp, NULL), VQC_OK, "%s", vqc_last_error());
    int64_t seed = 0;
    vqc_draws draws = {.user = &seed, .dropout_seed = fixed_seed};
    vqc_vq_ctx ctx = {.draws = &draws};
    int seen[8] = {0};
    for (seed = 0; seed < 200; seed++) {
      int c = -1, want = -2;
      int64_t synced = -1;
      cr_assert_eq(vqc_rfsq_draw_cutoff(&r, NULL, seed, &c, &synced), VQC_OK);
      cr_assert_eq(synced, seed);
      cr_assert_eq(vqc_rvq_draw_cutoff(&rv, &ctx, &want, NULL), VQC_OK);
      cr_assert_eq(c, want, "seed %lld: %d vs rvq %d", (long long)seed, c,
                   want);
      cr_assert(c >= p.dropout_cutoff_index && c < 8);
      seen[c] = 1;
    }
    /* Every reachable cutoff occurs in 200 seeds. */
    for (int c = p.dropout_cutoff_index; c < Q; c++)
      if ((c + 1) % p.dropout_multiple_of == 0)
        cr_expect(seen[c], "setting %d: cutoff %d never drawn", s, c);
    vqc_rvq_free(&rv);
  }
}

Test(rfsq, bad_arguments) {
  vqc_rfsq_params p;
  vqc_rfsq r;
  vqc_rfsq_params_default(&p, L55, 2, 0);
  cr_expect_eq(vqc_rfsq_init(&r, &p), VQC_EINVAL); /* Q = 0 */
  vqc_rfsq_params_default(&p, L55, 2, VQC_RFSQ_MAX_QUANTIZERS + 1);
  cr_expect_eq(vqc_rfsq_init(&r, &p), VQC_EINVAL);
  vqc_rfsq_params_default(&p, L55, 2, 2);
  p.dropout_cutoff_index = 2;
  cr_expect_eq(vqc_rfsq_init(&r, &p), VQC_EINVAL);
  vqc_rfsq_params_default(&p, L55, 2, 2);
  p.dropout_multiple_of = 0;
  cr_expect_eq(vqc_rfsq_init(&r, &p), VQC_EINVAL);
  const int32_t bad_level[2] = {5, 1};
  vqc_rfsq_params_default(&p, bad_level, 2, 2);
  cr_expect_eq(vqc_rfsq_init(&r, &p), VQC_EINVAL);
  const int32_t big[1] = {65536}; /* 65535^-31 underflows float32 */
  vqc_rfsq_params_default(&p, big, 1, 31);
  cr_expect_eq(vqc_rfsq_init(&r, &p), VQC_EINVAL);
  cr_expect_eq(vqc_rfsq_init(NULL, &p), VQC_EINVAL);

  r = make(L55, 2, 3, false);
  float out[4];
  int32_t idx[6];
  /* Dropping layers without quantize_dropout. */
  cr_expect_eq(vqc_rfsq_forward(&r, &X55[0][0], 2, 1, idx, out), VQC_EINVAL);
  const float nan_x[2] = {NAN, 0.0f};
  cr_expect_eq(vqc_rfsq_forward(&r, nan_x, 1, VQC_RFSQ_ALL, idx, out),
               VQC_EINVAL);
  cr_expect_eq(vqc_rfsq_forward(&r, &X55[0][0], 2, VQC_RFSQ_ALL, NULL, out),
               VQC_EINVAL);
  cr_expect_eq(vqc_rfsq_forward(&r, &X55[0][0], -1, VQC_RFSQ_ALL, idx, out),
               VQC_EINVAL);
  /* Padding without quantize_dropout, too many columns, bad indices. */
  const int32_t one_col[1] = {0};
  cr_expect_eq(vqc_rfsq_output_from_indices(&r, one_col, 1, 1, out),
               VQC_ESHAPE);
  cr_expect_eq(vqc_rfsq_output_from_indices(&r, idx, 1, 4, out), VQC_ESHAPE);
  const int32_t too_big[3] = {0, 25, 0}, too_small[3] = {-2, 0, 0};
  cr_expect_eq(vqc_rfsq_output_from_indices(&r, too_big, 1, 3, out),
               VQC_EINVAL);
  cr_expect_eq(vqc_rfsq_output_from_indices(&r, too_small, 1, 3, out),
               VQC_EINVAL);

  /* With dropout: a cutoff below dropout_cutoff_index. */
  vqc_rfsq_params_default(&p, L55, 2, 3);
  p.quantize_dropout = true;
  p.dropout_cutoff_index = 1;
  cr_assert_eq(vqc_rfsq_init(&r, &p), VQC_OK);
  cr_expect_eq(vqc_rfsq_forward(&r, &X55[0][0], 2, 0, idx, out), VQC_EINVAL);
  cr_expect_eq(vqc_rfsq_forward(&r, &X55[0][0], 2, 1, idx, out), VQC_OK);
  int c;
  cr_expect_eq(vqc_rfsq_draw_cutoff(&r, NULL, 1, NULL, NULL), VQC_EINVAL);
  cr_expect_eq(vqc_rfsq_draw_cutoff(NULL, NULL, 1, &c, NULL), VQC_EINVAL);
}
