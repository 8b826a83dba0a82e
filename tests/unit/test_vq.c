/* test_vq.c: the reference VQ codebook and residual VQ (lib vq.h, rvq.h).
 *
 * Single-process behaviour on inputs whose answers are exact (ties, lerp
 * bits, a hand-computed EMA step, dead-code replacement, dropout, decoding),
 * the commitment-loss gradient against finite differences, then distributed
 * runs on the threads backend: W ranks on sharded batches must reproduce a
 * single-process run on the whole batch (indices exactly, state within
 * 1e-6 relative), and the sampler must refuse, without writing out of
 * bounds, when the ranks disagree on how many rows to sample.
 *
 * Rank threads record what they saw into shared structs; assertions run on
 * the test's main thread after vqc_threads_run joins them. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/vq_stats.h"
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/py_random.h"
#include "vqc/rng.h"
#include "vqc/rvq.h"
#include "vqc/vq.h"

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static uint32_t to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* ---- nearest code */

Test(vq_nearest, exact_ties_go_to_the_lowest_index) {
  /* D = 2. Codes 1 and 2 are identical; codes 1 and 3 are mirror images. */
  const float E[] = {2, 0, /* c0 */ 0, 1, /* c1 */ 0, 1, /* c2 */ 0, -1 /* c3 */};
  const float x[] = {0, 0.25f, /* 0.75 from c1 and c2: tie -> 1 */
                     0.5f, 0,  /* sqrt(1.25) from c1, c2, c3: tie -> 1 */
                     0, -0.5f, /* c3 alone */
                     1, 0};    /* sqrt(2) from c1..c3, 1 from c0 -> 0 */
  int64_t idx[4];
  float nd[16];
  cr_assert_eq(vqc_vq_nearest(x, 4, E, 4, 2, idx, nd), VQC_OK);
  cr_expect_eq(idx[0], 1);
  cr_expect_eq(idx[1], 1);
  cr_expect_eq(idx[2], 3);
  cr_expect_eq(idx[3], 0);
  /* Every term is exact: |x|^2 + |E|^2 - 2x.E in float32, then the sqrt. */
  cr_expect_eq(nd[0 * 4 + 1], -0.75f);
  cr_expect_eq(nd[0 * 4 + 2], -0.75f);
  cr_expect_eq(nd[2 * 4 + 3], -0.5f);
  cr_expect_eq(nd[3 * 4 + 0], -1.0f);
}

Test(vq_nearest, uses_the_expanded_form_with_the_clamp) {
  /* x equals c1, and c0 is 1e-5 away. |c0|^2 = 1 + 1e-10 rounds to 1 in
   * float32, so the expanded form gives 0 for both, the clamp makes both
   * sqrt(1e-8) = 1e-4, and the tie goes to c0, although c1 is exactly x.
   * A direct |x - E|^2 would pick c1: this is the upstream behaviour. */
  const float E[] = {1, 1e-5f, 1, 0};
  const float x[] = {1, 0};
  int64_t idx = -1;
  float nd[2];
  cr_assert_eq(vqc_vq_nearest(x, 1, E, 2, 2, &idx, nd), VQC_OK);
  cr_expect_eq(idx, 0);
  cr_expect_eq(nd[0], -sqrtf(1e-8f));
  cr_expect_eq(nd[1], -sqrtf(1e-8f));
}

/* ---- lerp */

Test(vq_lerp, bit_faithful_on_both_branches) {
  /* Expected bits computed in float32 (one rounding per operation); each
   * pair (a, b) is one where the two branches give different results, so
   * the test fails if the wrong branch is taken. */
  struct {
    uint32_t a, b;
    float w;
    uint32_t want;
  } cases[] = {
      /* w < 0.5: a + w (b - a) */
      {0xc0ea01c3u, 0x40de5b8bu, 0.25f, 0xc06fd4dfu},
      {0xbf8bcf0cu, 0x408dc91eu, 0.2f, 0x3c4a6d80u},
      /* w >= 0.5: b - (b - a)(1 - w) */
      {0x40a8d0d5u, 0xc09cc17eu, 0.75f, 0xc016b9d2u},
      {0x40d6e3c1u, 0xbfac1dc6u, 0.5f, 0x402bdc4fu},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const float got = vqc_lerp_f32(from_bits(cases[i].a), from_bits(cases[i].b),
                                   cases[i].w);
    cr_expect_eq(to_bits(got), cases[i].want, "case %zu: got 0x%08x want 0x%08x",
                 i, to_bits(got), cases[i].want);
  }
  /* The ends are exact: w = 1 gives b even where a + (b - a) != b. */
  cr_expect_eq(vqc_lerp_f32(3.0f, 1e-8f, 1.0f), 1e-8f);
  cr_expect_eq(vqc_lerp_f32(3.0f, 1e-8f, 0.0f), 3.0f);
}

/* ---- EMA */

Test(vq_ema, hand_computed_step) {
  /* C = 2, D = 2, decay 0.5 (w = 0.5: the second lerp branch), eps = 0 so
   * that every value below is exact. Codes at x = 0 and x = 8 (second
   * coordinate 1). Rows 1, 2, 3 go to code 0 and 7, 8, 12 to code 1:
   *   n = [3, 3], S = [(6, 3), (27, 3)]
   *   cluster_size = lerp([1, 1], n, .5)         = [2, 2]
   *   embed_avg    = lerp(E, S, .5)              = [(3, 2), (17.5, 2)]
   *   smoothed     = cs / 4 * 4                  = [2, 2]
   *   E            = [(1.5, 1), (8.75, 1)]                              */
  vqc_vq_params p;
  vqc_vq_params_default(&p, 2, 2);
  p.decay = 0.5;
  p.eps = 0.0;
  const float E0[] = {0, 1, 8, 1};
  const float x[] = {1, 1, 7, 1, 2, 1, 8, 1, 3, 1, 12, 1};
  vqc_vq vq;
  cr_assert_eq(vqc_vq_init(&vq, &p, E0), VQC_OK);
  int64_t idx[6];
  float q[12], loss = -1;
  cr_assert_eq(vqc_vq_forward(&vq, NULL, x, 6, true, idx, q, &loss), VQC_OK);
  const int64_t want_idx[] = {0, 1, 0, 1, 0, 1};
  for (int i = 0; i < 6; i++) cr_expect_eq(idx[i], want_idx[i], "row %d", i);
  /* quantized holds the codebook before the update. */
  for (int i = 0; i < 6; i++) cr_expect_eq(q[2 * i], E0[2 * want_idx[i]]);
  /* loss = mean((q - x)^2) = (1+4+9 + 1+0+16) / 12 */
  cr_expect_float_eq(loss, 31.0f / 12.0f, 1e-6f);
  const float *cs = vqc_vq_cluster_size(&vq), *avg = vqc_vq_embed_avg(&vq);
  const float *E = vqc_vq_embed(&vq);
  cr_expect_eq(cs[0], 2.0f);
  cr_expect_eq(cs[1], 2.0f);
  const float want_avg[] = {3, 2, 17.5f, 2}, want_E[] = {1.5f, 1, 8.75f, 1};
  for (int j = 0; j < 4; j++) {
    cr_expect_eq(avg[j], want_avg[j], "embed_avg[%d] = %g", j, avg[j]);
    cr_expect_eq(E[j], want_E[j], "embed[%d] = %g", j, E[j]);
  }
  vqc_vq_free(&vq);
}

/* vqc_vq_batch_stats against its definition (vq.h) written out here the
 * plain way, one row at a time into per-code double buffers: code c's rows
 * in row order, chunks of VQC_VQ_STATS_CHUNK rows summed from 0, the chunk
 * sums added from 0 in chunk order, rounded once. No tolerance: the same
 * additions in the same order give the same bits, and the device kernels
 * (test_gpu_ema.c, test_kernels_emulated) are held to these bits too.
 * sums_dc: the (D, C) layout vq_ema_update uses when transposed is set,
 * else (C, D). */
static void stats_definition(const float *x, int64_t M, int64_t D,
                             const int64_t *idx, int64_t C, float *counts,
                             float *sums, bool transposed) {
  double *total = calloc((size_t)(C * D), sizeof *total);
  double *chunk = calloc((size_t)(C * D), sizeof *chunk);
  int64_t *rows = calloc((size_t)C, sizeof *rows);
  cr_assert(total && chunk && rows);
  for (int64_t i = 0; i < M; i++) {
    const int64_t c = idx[i];
    if (rows[c] > 0 && rows[c] % VQC_VQ_STATS_CHUNK == 0)
      for (int64_t d = 0; d < D; d++) {
        total[c * D + d] += chunk[c * D + d];
        chunk[c * D + d] = 0.0;
      }
    for (int64_t d = 0; d < D; d++) chunk[c * D + d] += x[i * D + d];
    rows[c]++;
  }
  for (int64_t c = 0; c < C; c++) {
    counts[c] = (float)rows[c];
    for (int64_t d = 0; d < D; d++)
      sums[transposed ? d * C + c : c * D + d] =
          (float)(total[c * D + d] + chunk[c * D + d]);
  }
  free(total);
  free(chunk);
  free(rows);
}

/* Rows whose float sums depend on the order of the double additions:
 * normal values scaled by 2^e, e uniform in [-8, 8]; and in every column,
 * code 0's first row holds +b and its row 600 (in its third chunk) -b, with
 * b about 2^40. Between the two, the small values are added to a sum near
 * 2^40, where a double keeps only multiples of 2^-12; after b cancels, the
 * result is about 10, where a float resolves 2^-20, so where the rounding
 * happened (which the order decides) shows in the float sums.
 * Indices: code 0 takes every third row (M/3 rows: three chunks), the rest
 * spread over codes 1..C-2 unevenly, and code C-1 takes none. */
static void stats_inputs(vqc_rng *r, float *x, int64_t M, int64_t D,
                         int64_t *idx, int64_t C) {
  vqc_rng_normal(r, x, M * D, 0.0f, 1.0f);
  for (int64_t k = 0; k < M * D; k++)
    x[k] = ldexpf(x[k], (int)(vqc_rng_uniform_f32(r) * 17.0f) - 8);
  for (int64_t i = 0; i < M; i++) {
    const float u = vqc_rng_uniform_f32(r);
    idx[i] = i % 3 == 0 || C < 3 ? 0 : 1 + (int64_t)(u * u * (float)(C - 2));
    if (idx[i] > C - 2 && C >= 3) idx[i] = C - 2;
  }
  const int64_t last = 3 * 600; /* code 0's row 600 */
  cr_assert(M > last);
  for (int64_t d = 0; d < D; d++) {
    const float b = ldexpf(1.0f + vqc_rng_uniform_f32(r), 40);
    x[d] = b;
    x[last * D + d] = -b;
  }
}

Test(vq_ema, batch_stats_follow_the_definition_bit_for_bit) {
  /* D: below, at and past the 16-column blocks of the AVX2 kernel (their
   * tail columns take the plain loop), and the benchmark's 64 and 256. M
   * 2000 (code 0: 667 rows, three chunks) and 9000 (code 0: 3000 rows,
   * twelve chunks); C 40, and 3000 once (chunk sums past the L2 of most
   * cores). Every kernel this CPU has, and the one vqc_vq_batch_stats
   * picks. */
  const struct {
    int64_t D, M, C;
  } cases[] = {{1, 2000, 40},   {3, 2000, 40},   {16, 2000, 40},
               {17, 2000, 40},  {37, 2000, 40},  {64, 2000, 40},
               {100, 2000, 40}, {256, 2000, 40}, {64, 9000, 40},
               {100, 9000, 40}, {256, 9000, 40}, {64, 9000, 3000}};
  vqc_rng r;
  vqc_rng_init(&r, 77, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  int64_t differs_from_plain_sum = 0;
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    const int64_t D = cases[t].D, M = cases[t].M, C = cases[t].C;
    float *x = malloc((size_t)(M * D) * sizeof *x);
    int64_t *idx = malloc((size_t)M * sizeof *idx);
    float *wc = malloc((size_t)C * sizeof *wc), *gc = malloc((size_t)C * 4);
    float *ws = malloc((size_t)(C * D) * 4), *gs = malloc((size_t)(C * D) * 4);
    cr_assert(x && idx && wc && gc && ws && gs);
    stats_inputs(&r, x, M, D, idx, C);
    for (int layout = 0; layout < 2; layout++) {
      const bool tr = layout == 1;
      stats_definition(x, M, D, idx, C, wc, ws, tr);
      for (int kern = -1; kern < VQ_KERNEL_COUNT; kern++) {
        if (kern >= 0 && !vq_kernel_available((vq_kernel)kern)) continue;
        const char *name = kern < 0 ? "best" : vq_kernel_name((vq_kernel)kern);
        memset(gc, 0xff, (size_t)C * 4); /* NaN: an unwritten entry shows */
        memset(gs, 0xff, (size_t)(C * D) * 4);
        const int64_t sc = tr ? 1 : D, sd = tr ? C : 1;
        cr_assert_eq(kern < 0 ? vqc_vq_batch_stats(x, M, D, idx, C, gc, gs, sc,
                                                   sd)
                              : vq_batch_stats_with((vq_kernel)kern, x, M, D,
                                                    idx, C, gc, gs, sc, sd),
                     VQC_OK, "%s: %s", name, vqc_last_error());
        for (int64_t c = 0; c < C; c++)
          cr_assert_eq(to_bits(gc[c]), to_bits(wc[c]),
                       "%s, D %lld: counts[%lld]", name, (long long)D,
                       (long long)c);
        for (int64_t k = 0; k < C * D; k++)
          cr_assert_eq(to_bits(gs[k]), to_bits(ws[k]),
                       "%s, D %lld, %s layout: sums[%lld] = %a, want %a", name,
                       (long long)D, tr ? "(D, C)" : "(C, D)", (long long)k,
                       (double)gs[k], (double)ws[k]);
      }
    }
    /* The inputs can tell orders apart: code 0's plain row-order double
     * sum (no chunks) differs from the chunked one in some column. */
    for (int64_t d = 0; d < D; d++) {
      double plain = 0.0;
      for (int64_t i = 0; i < M; i++)
        if (idx[i] == 0) plain += x[i * D + d];
      differs_from_plain_sum += (float)plain != ws[d * C + 0];
    }
    free(x);
    free(idx);
    free(wc);
    free(gc);
    free(ws);
    free(gs);
  }
  cr_expect_gt(differs_from_plain_sum, 0,
               "the inputs do not distinguish the chunked order");
}

Test(vq_ema, batch_stats_name_the_first_bad_row_and_take_no_rows) {
  const float x[4 * 2] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t bad[4] = {0, 5, -1, 1}; /* row 1 is the first outside */
  float counts[2], sums[4];
  cr_assert_eq(vqc_vq_batch_stats(x, 4, 2, bad, 2, counts, sums, 2, 1),
               VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "index 5 of row 1") != NULL, "%s",
            vqc_last_error());
  /* A first bad row far into the batch, another bad one after it, with
   * every kernel: that row named, the sums untouched. */
  const int64_t M = 6000;
  float *xs = calloc((size_t)M * 2, sizeof *xs);
  int64_t *idx = calloc((size_t)M, sizeof *idx);
  cr_assert(xs && idx);
  idx[5000] = 2;
  idx[5500] = -3;
  for (int kern = 0; kern < VQ_KERNEL_COUNT; kern++) {
    if (!vq_kernel_available((vq_kernel)kern)) continue;
    memset(sums, 0xff, sizeof sums);
    cr_assert_eq(vq_batch_stats_with((vq_kernel)kern, xs, M, 2, idx, 2, counts,
                                     sums, 2, 1),
                 VQC_EINVAL);
    cr_expect(strstr(vqc_last_error(), "index 2 of row 5000") != NULL,
              "%s: %s", vq_kernel_name((vq_kernel)kern), vqc_last_error());
    for (int k = 0; k < 4; k++) cr_expect_eq(to_bits(sums[k]), 0xffffffffu);
  }
  free(xs);
  free(idx);
  /* M = 0: zero counts and sums. */
  memset(sums, 0xff, sizeof sums);
  cr_assert_eq(vqc_vq_batch_stats(x, 0, 2, NULL, 2, counts, sums, 2, 1),
               VQC_OK);
  for (int k = 0; k < 4; k++) cr_expect_eq(to_bits(sums[k]), 0u);
  cr_expect_eq(counts[0], 0.0f);
}

Test(vq_ema, eval_and_frozen_change_no_state) {
  vqc_vq_params p;
  vqc_vq_params_default(&p, 4, 8);
  p.seed = 11;
  p.threshold_ema_dead_code = 100.0; /* every code would expire in training */
  vqc_vq vq;
  cr_assert_eq(vqc_vq_init(&vq, &p, NULL), VQC_OK);
  float x[40];
  vqc_rng r;
  vqc_rng_init(&r, 5, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_normal(&r, x, 40, 0.0f, 1.0f);
  float E[32], cs[8], avg[32];
  memcpy(E, vqc_vq_embed(&vq), sizeof E);
  memcpy(cs, vqc_vq_cluster_size(&vq), sizeof cs);
  memcpy(avg, vqc_vq_embed_avg(&vq), sizeof avg);
  int64_t idx[10];
  float q[40], loss = -1;
  cr_assert_eq(vqc_vq_forward(&vq, NULL, x, 10, false, idx, q, &loss), VQC_OK);
  cr_expect_eq(loss, 0.0f);
  vq.p.freeze_codebook = true;
  cr_assert_eq(vqc_vq_forward(&vq, NULL, x, 10, true, idx, q, &loss), VQC_OK);
  cr_expect_gt(loss, 0.0f, "frozen training still returns the loss");
  cr_expect_eq(memcmp(E, vqc_vq_embed(&vq), sizeof E), 0);
  cr_expect_eq(memcmp(cs, vqc_vq_cluster_size(&vq), sizeof cs), 0);
  cr_expect_eq(memcmp(avg, vqc_vq_embed_avg(&vq), sizeof avg), 0);
  /* And training does change it (so the comparison above can fail). */
  vq.p.freeze_codebook = false;
  cr_assert_eq(vqc_vq_forward(&vq, NULL, x, 10, true, idx, q, &loss), VQC_OK);
  cr_expect_neq(memcmp(cs, vqc_vq_cluster_size(&vq), sizeof cs), 0);
  vqc_vq_free(&vq);
}

/* ---- dead codes */

/* Injected rows: hands out `rows` and counts the calls. */
typedef struct fixed_rows {
  const int64_t *rows;
  int64_t n;
  int calls;
} fixed_rows;

static vqc_status give_fixed_rows(void *user, vqc_draw_at at, int64_t n,
                                  int64_t k, int64_t *rows) {
  fixed_rows *f = user;
  f->calls++;
  if (k != f->n) return vqc_error(VQC_ESHAPE, "asked for %lld rows", (long long)k);
  memcpy(rows, f->rows, (size_t)k * sizeof(int64_t));
  return VQC_OK;
}

Test(vq_dead_code, injected_rows_in_ascending_code_order_with_reset_values) {
  vqc_vq_params p;
  vqc_vq_params_default(&p, 2, 4);
  p.threshold_ema_dead_code = 0.5;
  p.reset_cluster_size = 0.75;
  const float E0[] = {1, 1, 2, 2, 3, 3, 4, 4};
  vqc_vq vq;
  cr_assert_eq(vqc_vq_init(&vq, &p, E0), VQC_OK);
  /* Code 0 sits exactly at the threshold (kept: strict <), 1 and 3 expire. */
  const float cs0[] = {0.5f, 0.1f, 2.0f, 0.2f};
  memcpy(vqc_vq_cluster_size(&vq), cs0, sizeof cs0);
  const float x[] = {10, 11, 20, 21, 30, 31, 40, 41, 50, 51, 60, 61};
  const int64_t rows[] = {5, 2};
  fixed_rows f = {rows, 2, 0};
  const vqc_draws draws = {&f, give_fixed_rows, NULL, NULL, NULL};
  const vqc_vq_ctx ctx = {NULL, 3, &draws, 0};
  uint8_t mask[4];
  int64_t k = -1;
  cr_assert_eq(vqc_vq_expire_codes(&vq, &ctx, x, 6, mask, &k), VQC_OK);
  cr_expect_eq(k, 2);
  cr_expect_eq(f.calls, 1);
  const uint8_t want_mask[] = {0, 1, 0, 1};
  cr_expect_eq(memcmp(mask, want_mask, 4), 0);
  const float *E = vqc_vq_embed(&vq), *cs = vqc_vq_cluster_size(&vq);
  const float *avg = vqc_vq_embed_avg(&vq);
  /* code 1 <- row 5, code 3 <- row 2 */
  cr_expect_eq(E[2], 60.0f);
  cr_expect_eq(E[3], 61.0f);
  cr_expect_eq(E[6], 30.0f);
  cr_expect_eq(E[7], 31.0f);
  cr_expect_eq(cs[1], 0.75f);
  cr_expect_eq(cs[3], 0.75f);
  cr_expect_eq(avg[2], 60.0f * 0.75f);
  cr_expect_eq(avg[7], 31.0f * 0.75f);
  /* untouched */
  cr_expect_eq(cs[0], 0.5f);
  cr_expect_eq(cs[2], 2.0f);
  cr_expect_eq(E[0], 1.0f);
  cr_expect_eq(E[4], 3.0f);
  cr_expect_eq(avg[4], 3.0f);
  vqc_vq_free(&vq);
}

Test(vq_dead_code, default_draws_without_replacement_when_possible) {
  /* 6 expired codes, 6 rows: a permutation, so every row is used once. */
  vqc_vq_params p;
  vqc_vq_params_default(&p, 1, 6);
  p.threshold_ema_dead_code = 2.0;
  p.seed = 99;
  vqc_vq vq;
  cr_assert_eq(vqc_vq_init(&vq, &p, NULL), VQC_OK); /* cluster_size 1 < 2 */
  const float x[] = {10, 20, 30, 40, 50, 60};
  const vqc_vq_ctx ctx = {NULL, 7, NULL, 0};
  int64_t k = 0;
  cr_assert_eq(vqc_vq_expire_codes(&vq, &ctx, x, 6, NULL, &k), VQC_OK);
  cr_expect_eq(k, 6);
  int seen[6] = {0};
  for (int c = 0; c < 6; c++) {
    const int row = (int)(vqc_vq_embed(&vq)[c] / 10.0f) - 1;
    cr_assert(row >= 0 && row < 6);
    seen[row]++;
  }
  for (int i = 0; i < 6; i++) cr_expect_eq(seen[i], 1, "row %d used %d times", i, seen[i]);
  vqc_vq_free(&vq);
}

/* ---- the split of k draws across ranks */

Test(vq_sampler, split_sums_to_k_and_the_last_rank_takes_the_remainder) {
  const int64_t counts[] = {5, 0, 7, 3, 11};
  const int W = 5;
  for (uint64_t seed = 0; seed < 200; seed++) {
    const int64_t k = (int64_t)(seed * 37 % 9332); /* up to upstream's 9331 */
    vqc_rng r, replay;
    vqc_rng_init(&r, seed, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
    replay = r;
    int64_t shares[5];
    cr_assert_eq(vqc_vq_split_draws(&r, W, counts, k, shares), VQC_OK);
    /* The spec's algorithm, replayed: binomials for ranks 0..W-2 with
     * p = counts[i] / rows left, then the remainder. */
    int64_t left = k, rows_left = 26, sum = 0;
    for (int i = 0; i < W - 1; i++) {
      int64_t s = 0;
      if (left > 0 && rows_left > 0)
        cr_assert_eq(vqc_rng_binomial(&replay, left,
                                      (double)counts[i] / (double)rows_left, &s),
                     VQC_OK);
      cr_expect_eq(shares[i], s, "seed %llu rank %d", (unsigned long long)seed, i);
      left -= s;
      rows_left -= counts[i];
      sum += shares[i];
    }
    cr_expect_eq(shares[W - 1], left, "the last rank takes the remainder");
    cr_expect_eq(sum + shares[W - 1], k);
    cr_expect_eq(shares[1], 0, "a rank without rows gets no draws");
  }
  /* Only the last rank has rows: it takes everything without a draw. */
  const int64_t last_only[] = {0, 0, 4};
  int64_t shares[3];
  vqc_rng r;
  vqc_rng_init(&r, 1, 2);
  cr_assert_eq(vqc_vq_split_draws(&r, 3, last_only, 9, shares), VQC_OK);
  cr_expect(shares[0] == 0 && shares[1] == 0 && shares[2] == 9);
  /* Nothing to sample from. */
  const int64_t none[] = {0, 0};
  cr_expect_eq(vqc_vq_split_draws(&r, 2, none, 1, shares), VQC_ESHAPE);
}

/* ---- commitment loss gradient */

Test(vq_backward, commitment_gradient_matches_finite_differences) {
  const float x[] = {0.5f, -1.25f, 2.0f, 0.75f, -0.5f, 1.5f, 0.25f, -2.0f};
  const float q[] = {1.0f, -1.0f, 1.5f, 0.0f, 0.0f, 1.0f, 1.0f, -1.5f};
  const double w = 0.7;
  const float grad_loss = 1.5f;
  float g[8];
  vqc_vq_backward(x, q, 4, 2, w, NULL, grad_loss, g);
  const float h = 1.0f / 64.0f; /* exact steps; the loss is quadratic, so a
                                   central difference is exact up to the
                                   float32 rounding of the loss (~1e-7) */
  for (int i = 0; i < 8; i++) {
    float xp[8], xm[8];
    memcpy(xp, x, sizeof xp);
    memcpy(xm, x, sizeof xm);
    xp[i] += h;
    xm[i] -= h;
    const double fd = grad_loss *
                      ((double)vqc_vq_commitment_loss(xp, q, 4, 2, w) -
                       (double)vqc_vq_commitment_loss(xm, q, 4, 2, w)) /
                      (2.0 * h);
    cr_expect(fabs(fd - g[i]) < 1e-4, "element %d: fd %g analytic %g", i, fd, g[i]);
  }
  /* The straight-through part passes grad_out unchanged. */
  const float go[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  vqc_vq_backward(x, q, 4, 2, w, go, 0.0f, g);
  for (int i = 0; i < 8; i++) cr_expect_eq(g[i], go[i]);
}

/* ---- residual VQ */

static vqc_status inject_cutoff(void *user, vqc_draw_at at, int64_t synced,
                                int lo, int hi, int *cutoff) {
  *cutoff = *(const int *)user;
  return VQC_OK;
}

static void random_codebooks(float *cb, int64_t n, uint64_t seed) {
  vqc_rng r;
  vqc_rng_init(&r, seed, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_normal(&r, cb, n, 0.0f, 1.0f);
}

Test(rvq, dropout_gives_minus_one_zero_loss_and_leaves_dropped_layers_alone) {
  enum { Q = 4, C = 8, D = 3, M = 10 };
  vqc_rvq_params p;
  vqc_rvq_params_default(&p, Q, D, C);
  p.quantize_dropout = true;
  float cb[Q * C * D], x[M * D];
  random_codebooks(cb, Q * C * D, 1);
  random_codebooks(x, M * D, 2);
  vqc_rvq rvq;
  cr_assert_eq(vqc_rvq_init(&rvq, &p, cb), VQC_OK);
  int cut = 1;
  const vqc_draws draws = {&cut, NULL, NULL, NULL, inject_cutoff};
  const vqc_vq_ctx ctx = {NULL, 0, &draws, 0};
  int64_t idx[M * Q];
  float quant[M * D], losses[Q], before[Q][C], want[M * D];
  for (int l = 0; l < Q; l++)
    memcpy(before[l], vqc_vq_cluster_size(&rvq.layers[l]), sizeof before[l]);
  int last = -1;
  cr_assert_eq(vqc_rvq_forward(&rvq, &ctx, x, M, true, idx, quant, losses, &last),
               VQC_OK);
  cr_expect_eq(last, 1);
  for (int i = 0; i < M; i++) {
    cr_expect_geq(idx[i * Q + 0], 0);
    cr_expect_geq(idx[i * Q + 1], 0);
    cr_expect_eq(idx[i * Q + 2], -1);
    cr_expect_eq(idx[i * Q + 3], -1);
  }
  cr_expect_gt(losses[0], 0.0f);
  cr_expect_gt(losses[1], 0.0f);
  cr_expect_eq(losses[2], 0.0f);
  cr_expect_eq(losses[3], 0.0f);
  for (int l = 0; l < Q; l++) {
    const int same = memcmp(before[l], vqc_vq_cluster_size(&rvq.layers[l]),
                            sizeof before[l]) == 0;
    cr_expect_eq(same, l > 1, "layer %d: EMA ran %s", l, same ? "no" : "yes");
  }
  /* The output is the sum of the codes of the layers that ran, taken from
   * the codebooks before the update. */
  vqc_rvq ref;
  cr_assert_eq(vqc_rvq_init(&ref, &p, cb), VQC_OK);
  cr_assert_eq(vqc_rvq_output_from_indices(&ref, idx, M, Q, want), VQC_OK);
  for (int j = 0; j < M * D; j++) cr_expect_float_eq(quant[j], want[j], 1e-6f);
  vqc_rvq_free(&ref);

  /* multiple_of 2 rounds cutoff 0 up to 1: two layers run. */
  rvq.p.dropout_multiple_of = 2;
  cut = 0;
  cr_assert_eq(vqc_rvq_forward(&rvq, &ctx, x, M, true, idx, quant, losses, &last),
               VQC_OK);
  cr_expect_eq(last, 1);
  /* Eval mode never drops. */
  cr_assert_eq(vqc_rvq_forward(&rvq, &ctx, x, M, false, idx, quant, losses, &last),
               VQC_OK);
  cr_expect_eq(last, Q - 1);
  for (int i = 0; i < M * Q; i++) cr_expect_geq(idx[i], 0);
  vqc_rvq_free(&rvq);
}

static vqc_status fixed_seed(void *user, vqc_draw_at at, int64_t *seed) {
  *seed = *(const int64_t *)user;
  return VQC_OK;
}

Test(rvq, default_cutoff_is_cpython_randrange_of_the_seed) {
  /* Values from upstream's rvq_dropout_train case: seed -> cutoff (Q = 4). */
  const int64_t seeds[] = {2382, 1001, 2007, 3001, 4000};
  const int want[] = {3, 0, 1, 2, 3};
  vqc_rvq_params p;
  vqc_rvq_params_default(&p, 4, 2, 4);
  p.quantize_dropout = true;
  vqc_rvq rvq;
  cr_assert_eq(vqc_rvq_init(&rvq, &p, NULL), VQC_OK);
  for (int i = 0; i < 5; i++) {
    int64_t seed = seeds[i], synced = -1;
    const vqc_draws draws = {&seed, NULL, NULL, fixed_seed, NULL};
    const vqc_vq_ctx ctx = {NULL, (uint64_t)i, &draws, 0};
    int cut = -1;
    cr_assert_eq(vqc_rvq_draw_cutoff(&rvq, &ctx, &cut, &synced), VQC_OK);
    cr_expect_eq(synced, seed);
    cr_expect_eq(cut, want[i], "seed %lld: cutoff %d", (long long)seed, cut);
  }
  vqc_rvq_free(&rvq);
}

Test(rvq, codes_from_indices_pads_and_zeroes_minus_one) {
  enum { Q = 3, C = 4, D = 2, M = 2 };
  vqc_rvq_params p;
  vqc_rvq_params_default(&p, Q, D, C);
  p.quantize_dropout = true;
  float cb[Q * C * D];
  for (int j = 0; j < Q * C * D; j++) cb[j] = (float)(j + 1);
  vqc_rvq rvq;
  cr_assert_eq(vqc_rvq_init(&rvq, &p, cb), VQC_OK);
  /* Two index columns for three quantizers; row 1 has -1 in layer 0. */
  const int64_t idx[] = {2, 3, -1, 1};
  float codes[Q * M * D], out[M * D];
  cr_assert_eq(vqc_rvq_codes_from_indices(&rvq, idx, M, 2, codes), VQC_OK);
  /* layer 0: row 0 = code 2 = (5, 6); row 1 = zeros */
  cr_expect(codes[0] == 5 && codes[1] == 6 && codes[2] == 0 && codes[3] == 0);
  /* layer 1: row 0 = code 3 = 8 + (7, 8) = (15, 16); row 1 = code 1 = (11, 12) */
  cr_expect(codes[4] == 15 && codes[5] == 16 && codes[6] == 11 && codes[7] == 12);
  /* layer 2: padding, zeros */
  for (int j = 8; j < 12; j++) cr_expect_eq(codes[j], 0.0f);
  cr_assert_eq(vqc_rvq_output_from_indices(&rvq, idx, M, 2, out), VQC_OK);
  cr_expect(out[0] == 20 && out[1] == 22 && out[2] == 11 && out[3] == 12);
  /* Out-of-range index; padding without quantize_dropout (as upstream). */
  const int64_t bad[] = {4, 0, 0, 0};
  cr_expect_eq(vqc_rvq_codes_from_indices(&rvq, bad, M, 2, codes), VQC_EINVAL);
  rvq.p.quantize_dropout = false;
  cr_expect_eq(vqc_rvq_codes_from_indices(&rvq, idx, M, 2, codes), VQC_ESHAPE);
  vqc_rvq_free(&rvq);
}

/* ---- distributed runs on the threads backend */

#define MAX_W 4
#define DIST_N 37
#define DIST_D 4
#define DIST_C 8
#define DIST_STEPS 4

typedef struct dist_run {
  int W;
  int64_t shard[MAX_W], off[MAX_W];
  vqc_vq_params p;
  const float *x[DIST_STEPS]; /* (DIST_N, D) per step */
  /* Written by the ranks (each its own slice or row). */
  int64_t idx[DIST_STEPS][DIST_N];
  float E[MAX_W][DIST_C * DIST_D], cs[MAX_W][DIST_C], avg[MAX_W][DIST_C * DIST_D];
  vqc_status status[MAX_W];
  char err[MAX_W][256];
  /* Written by rank 0's split callback before its broadcast, read by the
   * others' row callbacks after it (the broadcast orders the two). */
  int64_t k_by_purpose[8];
  int dead_code_draws; /* single-process run: calls with purpose DEAD_CODE */
  bool default_draws;  /* distributed run with the library's own draws */
} dist_run;

/* The global rows that a sample of k takes: floor(j N / k), j < k (distinct,
 * ascending, so "rank order" and "global order" agree). */
static int64_t global_row(int64_t j, int64_t k) { return j * DIST_N / k; }

static vqc_status single_rows(void *user, vqc_draw_at at, int64_t n, int64_t k,
                              int64_t *rows) {
  dist_run *d = user;
  if (at.purpose == VQC_RNG_DEAD_CODE) d->dead_code_draws++;
  for (int64_t j = 0; j < k; j++) rows[j] = global_row(j, k);
  return VQC_OK;
}

static vqc_status dist_split(void *user, vqc_draw_at at, int size,
                             const int64_t *counts, int64_t k, int64_t *shares) {
  dist_run *d = user;
  d->k_by_purpose[at.purpose] = k;
  for (int r = 0; r < size; r++) shares[r] = 0;
  for (int64_t j = 0; j < k; j++) {
    const int64_t g = global_row(j, k);
    for (int r = 0; r < size; r++)
      if (g >= d->off[r] && g < d->off[r] + d->shard[r]) shares[r]++;
  }
  return VQC_OK;
}

static vqc_status dist_rows(void *user, vqc_draw_at at, int64_t n, int64_t k,
                            int64_t *rows) {
  dist_run *d = user;
  const int64_t kg = d->k_by_purpose[at.purpose];
  int64_t m = 0;
  for (int64_t j = 0; j < kg; j++) {
    const int64_t g = global_row(j, kg);
    if (g >= d->off[at.rank] && g < d->off[at.rank] + d->shard[at.rank]) {
      if (m == k) return vqc_error(VQC_ESHAPE, "more rows than the share");
      rows[m++] = g - d->off[at.rank];
    }
  }
  return m == k ? VQC_OK : vqc_error(VQC_ESHAPE, "fewer rows than the share");
}

/* Runs DIST_STEPS training forwards on this rank's shard (comm may be NULL:
 * then the whole batch in one process). */
static vqc_status dist_train(dist_run *d, vqc_comm *c, int rank) {
  const vqc_draws single = {d, single_rows, NULL, NULL, NULL};
  const vqc_draws multi = {d, dist_rows, dist_split, NULL, NULL};
  const int64_t off = c ? d->off[rank] : 0, M = c ? d->shard[rank] : DIST_N;
  vqc_vq vq;
  VQC_TRY(vqc_vq_init(&vq, &d->p, NULL));
  int64_t idx[DIST_N];
  float q[DIST_N * DIST_D], loss;
  vqc_status s = VQC_OK;
  for (int st = 0; st < DIST_STEPS && s == VQC_OK; st++) {
    const vqc_draws *draws = !c ? &single : d->default_draws ? NULL : &multi;
    const vqc_vq_ctx ctx = {c, (uint64_t)st, draws, 0};
    s = vqc_vq_forward(&vq, &ctx, d->x[st] + off * DIST_D, M, true, idx, q, &loss);
    for (int64_t i = 0; i < M; i++) d->idx[st][off + i] = idx[i];
  }
  memcpy(d->E[rank], vqc_vq_embed(&vq), sizeof d->E[rank]);
  memcpy(d->cs[rank], vqc_vq_cluster_size(&vq), sizeof d->cs[rank]);
  memcpy(d->avg[rank], vqc_vq_embed_avg(&vq), sizeof d->avg[rank]);
  vqc_vq_free(&vq);
  return s;
}

static vqc_status dist_rank(vqc_comm *c, void *arg) {
  dist_run *d = arg;
  const int r = vqc_comm_rank(c);
  d->status[r] = dist_train(d, c, r);
  if (d->status[r] != VQC_OK)
    snprintf(d->err[r], sizeof d->err[r], "%s", vqc_last_error());
  return d->status[r];
}

/* Three well separated blobs in D dims, with noise: k-means leaves some of
 * the 8 codes nearly empty, so dead codes expire. */
static void make_batches(float *buf) {
  vqc_rng r;
  vqc_rng_init(&r, 2024, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  float centers[3 * DIST_D];
  vqc_rng_normal(&r, centers, 3 * DIST_D, 0.0f, 4.0f);
  for (int64_t i = 0; i < DIST_STEPS * DIST_N; i++) {
    const int64_t b = vqc_rng_randint(&r, 0, 3);
    vqc_rng_normal(&r, buf + i * DIST_D, DIST_D, 0.0f, 0.5f);
    for (int j = 0; j < DIST_D; j++) buf[i * DIST_D + j] += centers[b * DIST_D + j];
  }
}

/* |a - b| <= 1e-6 max(1, |b|): only the reduction order differs. */
static void expect_close(const float *got, const float *want, int n,
                         const char *what, int W) {
  for (int i = 0; i < n; i++) {
    const double tol = 1e-6 * fmax(1.0, fabs((double)want[i]));
    cr_expect(fabs((double)got[i] - (double)want[i]) <= tol,
              "W=%d %s[%d]: %.9g vs single-process %.9g", W, what, i, got[i],
              want[i]);
  }
}

static void run_equivalence(int W, const int64_t *shards) {
  static float batches[DIST_STEPS * DIST_N * DIST_D];
  make_batches(batches);
  dist_run *single = calloc(1, sizeof *single), *multi = calloc(1, sizeof *multi);
  cr_assert(single && multi);
  vqc_vq_params p;
  vqc_vq_params_default(&p, DIST_D, DIST_C);
  p.kmeans_init = true;
  p.kmeans_iters = 5;
  p.threshold_ema_dead_code = 2.5;
  for (int st = 0; st < DIST_STEPS; st++)
    single->x[st] = multi->x[st] = batches + st * DIST_N * DIST_D;
  single->p = multi->p = p;
  multi->W = W;
  int64_t off = 0;
  for (int r = 0; r < W; r++) {
    multi->shard[r] = shards[r];
    multi->off[r] = off;
    off += shards[r];
  }
  cr_assert_eq(off, DIST_N);

  cr_assert_eq(dist_train(single, NULL, 0), VQC_OK, "%s", vqc_last_error());
  cr_assert_gt(single->dead_code_draws, 0, "the scenario must expire codes");
  vqc_status st = vqc_threads_run(W, 30.0, dist_rank, multi, NULL);
  for (int r = 0; r < W; r++)
    cr_assert_eq(multi->status[r], VQC_OK, "W=%d rank %d: %s", W, r, multi->err[r]);
  cr_assert_eq(st, VQC_OK);

  for (int s = 0; s < DIST_STEPS; s++)
    for (int i = 0; i < DIST_N; i++)
      cr_expect_eq(multi->idx[s][i], single->idx[s][i], "W=%d step %d row %d", W,
                   s, i);
  for (int r = 0; r < W; r++) {
    /* Replicated: bit-identical on every rank (rank-ordered reductions). */
    cr_expect_eq(memcmp(multi->E[r], multi->E[0], sizeof multi->E[0]), 0,
                 "W=%d rank %d codebook differs from rank 0", W, r);
    cr_expect_eq(memcmp(multi->cs[r], multi->cs[0], sizeof multi->cs[0]), 0);
    cr_expect_eq(memcmp(multi->avg[r], multi->avg[0], sizeof multi->avg[0]), 0);
  }
  expect_close(multi->E[0], single->E[0], DIST_C * DIST_D, "codebook", W);
  expect_close(multi->cs[0], single->cs[0], DIST_C, "cluster_size", W);
  expect_close(multi->avg[0], single->avg[0], DIST_C * DIST_D, "embed_avg", W);
  free(single);
  free(multi);
}

Test(vq_distributed, sharded_run_equals_single_process_w1) {
  const int64_t s[] = {DIST_N};
  run_equivalence(1, s);
}
Test(vq_distributed, sharded_run_equals_single_process_w2) {
  const int64_t s[] = {30, 7};
  run_equivalence(2, s);
}
Test(vq_distributed, sharded_run_equals_single_process_w3) {
  const int64_t s[] = {5, 17, 15};
  run_equivalence(3, s);
}
Test(vq_distributed, sharded_run_equals_single_process_w4_with_empty_shard) {
  const int64_t s[] = {10, 0, 20, 7};
  run_equivalence(4, s);
}

Test(vq_distributed, default_draws_keep_every_rank_identical) {
  /* The library's own draws (binomial split on rank 0, per-rank row
   * streams): different rows than the injected runs above, but the same on
   * every rank, so the replicated state stays bit-identical. */
  static float batches[DIST_STEPS * DIST_N * DIST_D];
  make_batches(batches);
  dist_run *d = calloc(1, sizeof *d);
  cr_assert(d);
  vqc_vq_params_default(&d->p, DIST_D, DIST_C);
  d->p.kmeans_init = true;
  d->p.threshold_ema_dead_code = 2.5;
  d->p.seed = 77;
  d->default_draws = true;
  d->W = 3;
  const int64_t shards[] = {12, 4, 21};
  for (int r = 0, off = 0; r < 3; off += (int)shards[r], r++) {
    d->shard[r] = shards[r];
    d->off[r] = off;
  }
  for (int st = 0; st < DIST_STEPS; st++) d->x[st] = batches + st * DIST_N * DIST_D;
  cr_assert_eq(vqc_threads_run(3, 30.0, dist_rank, d, NULL), VQC_OK, "%s %s %s",
               d->err[0], d->err[1], d->err[2]);
  for (int r = 1; r < 3; r++) {
    cr_expect_eq(memcmp(d->E[r], d->E[0], sizeof d->E[0]), 0, "rank %d", r);
    cr_expect_eq(memcmp(d->cs[r], d->cs[0], sizeof d->cs[0]), 0, "rank %d", r);
    cr_expect_eq(memcmp(d->avg[r], d->avg[0], sizeof d->avg[0]), 0, "rank %d", r);
  }
  free(d);
}

/* ---- the sampler's invariant when the ranks disagree on k */

typedef struct disagree {
  int64_t k[3];
  float out[3][6 * 2]; /* room for 6 rows of D = 2; rows >= k are guards */
  vqc_status status[3];
  char err[3][512];
} disagree;

static vqc_status disagree_rank(vqc_comm *c, void *arg) {
  disagree *d = arg;
  const int r = vqc_comm_rank(c);
  float x[8 * 2];
  for (int i = 0; i < 16; i++) x[i] = (float)(100 * r + i);
  const vqc_vq_ctx ctx = {c, 0, NULL, 0};
  d->status[r] = vqc_vq_sample_rows(&ctx, VQC_RNG_DEAD_CODE, 1, x, 8, 2,
                                    d->k[r], d->out[r]);
  snprintf(d->err[r], sizeof d->err[r], "%s", vqc_last_error());
  return VQC_OK; /* keep the world alive: results are checked by the test */
}

Test(vq_distributed, sampler_refuses_when_ranks_disagree_on_k) {
  disagree d = {.k = {4, 3, 5}};
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < 12; i++) d.out[r][i] = -1.0f;
  cr_assert_eq(vqc_threads_run(3, 30.0, disagree_rank, &d, NULL), VQC_OK);
  cr_expect_eq(d.status[0], VQC_OK, "%s", d.err[0]);
  for (int r = 1; r < 3; r++) {
    cr_expect_eq(d.status[r], VQC_ESHAPE, "rank %d", r);
    char four[32], mine[32];
    snprintf(four, sizeof four, "sampled 4 rows");
    snprintf(mine, sizeof mine, "for %lld codes", (long long)d.k[r]);
    cr_expect(strstr(d.err[r], four) && strstr(d.err[r], mine),
              "rank %d message: %s", r, d.err[r]);
    for (int i = 0; i < 12; i++)
      cr_expect_eq(d.out[r][i], -1.0f, "rank %d wrote out[%d]", r, i);
  }
  /* Rank 0 got 4 rows, each a row of some rank's batch. */
  for (int j = 0; j < 4; j++) cr_expect_neq(d.out[0][2 * j], -1.0f);
  cr_expect_eq(d.out[0][8], -1.0f);
}

/* ---- RVQ dropout across ranks */

typedef struct rvq_dist {
  int cutoff[MAX_W][3];
  uint64_t collectives[MAX_W][3];
  vqc_status status[MAX_W];
  int inject; /* -1: default cutoff from the synced seed */
} rvq_dist;

static vqc_status per_rank_seed(void *user, vqc_draw_at at, int64_t *seed) {
  *seed = 1000 * at.rank + 7 + (int64_t)at.step;
  return VQC_OK;
}

static vqc_status rvq_rank(vqc_comm *c, void *arg) {
  rvq_dist *d = arg;
  const int r = vqc_comm_rank(c);
  enum { Q = 4, C = 4, D = 2, M = 6 };
  vqc_rvq_params p;
  vqc_rvq_params_default(&p, Q, D, C);
  p.quantize_dropout = true;
  float cb[Q * C * D], x[M * D];
  random_codebooks(cb, Q * C * D, 3);
  random_codebooks(x, M * D, 10 + (uint64_t)r);
  vqc_rvq rvq;
  d->status[r] = vqc_rvq_init(&rvq, &p, cb);
  if (d->status[r] != VQC_OK) return VQC_OK;
  const vqc_draws draws = {&d->inject, NULL, NULL, per_rank_seed,
                           d->inject >= 0 ? inject_cutoff : NULL};
  int64_t idx[M * Q];
  float quant[M * D], losses[Q];
  for (int st = 0; st < 3 && d->status[r] == VQC_OK; st++) {
    const vqc_vq_ctx ctx = {c, (uint64_t)st, &draws, 0};
    const uint64_t before = vqc_ledger_count(vqc_comm_ledger(c));
    d->status[r] = vqc_rvq_forward(&rvq, &ctx, x, M, true, idx, quant, losses,
                                   &d->cutoff[r][st]);
    d->collectives[r][st] = vqc_ledger_count(vqc_comm_ledger(c)) - before;
  }
  vqc_rvq_free(&rvq);
  return VQC_OK;
}

Test(rvq_distributed, seed_is_synced_and_dropped_layers_issue_no_collectives) {
  rvq_dist d = {.inject = -1};
  cr_assert_eq(vqc_threads_run(3, 30.0, rvq_rank, &d, NULL), VQC_OK);
  for (int st = 0; st < 3; st++) {
    /* synced seed = sum over ranks of (1000 r + 7 + step) */
    const int64_t synced = 3 * (7 + st) + 1000 * (0 + 1 + 2);
    vqc_py_random g;
    vqc_py_random_seed(&g, synced);
    const int want = (int)vqc_py_random_randrange(&g, 0, 4);
    for (int r = 0; r < 3; r++) {
      cr_expect_eq(d.status[r], VQC_OK);
      cr_expect_eq(d.cutoff[r][st], want, "rank %d step %d", r, st);
      /* one seed all_reduce + two EMA all_reduces per layer that ran */
      cr_expect_eq(d.collectives[r][st], 1 + 2 * (uint64_t)(want + 1),
                   "rank %d step %d: %llu collectives", r, st,
                   (unsigned long long)d.collectives[r][st]);
    }
  }
}

/* ---- the EMA's reductions as the checkers see them */

typedef struct ema_events {
  int n;
  vqc_coll_op op[8];
  int ndim[8];
  int64_t shape0[8];
  bool has_tensor[8];
} ema_events;

static vqc_status record_event(const vqc_coll_event *ev, void *user) {
  ema_events *e = user;
  if (ev->phase != VQC_EVENT_BEFORE || e->n >= 8) return VQC_OK;
  e->op[e->n] = ev->record->op;
  e->has_tensor[e->n] = ev->tensor != NULL;
  e->ndim[e->n] = ev->tensor ? ev->tensor->ndim : -1;
  e->shape0[e->n] = ev->tensor ? ev->tensor->shape[0] : -1;
  e->n++;
  return VQC_OK;
}

static vqc_status ema_events_rank(vqc_comm *c, void *arg) {
  ema_events *e = arg;
  if (vqc_comm_rank(c) == 0) VQC_TRY(vqc_comm_subscribe(c, record_event, e));
  vqc_vq_params p;
  vqc_vq_params_default(&p, 2, 3);
  vqc_vq vq;
  VQC_TRY(vqc_vq_init(&vq, &p, NULL));
  const float x[] = {1, 2, 3, 4};
  int64_t idx[2];
  float q[4], loss;
  const vqc_vq_ctx ctx = {c, 0, NULL, 0};
  vqc_status s = vqc_vq_forward(&vq, &ctx, x, 2, true, idx, q, &loss);
  vqc_vq_free(&vq);
  return s;
}

Test(vq_distributed, ema_reduces_counts_then_sums_as_tensors) {
  ema_events e = {0};
  cr_assert_eq(vqc_threads_run(2, 30.0, ema_events_rank, &e, NULL), VQC_OK);
  cr_assert_eq(e.n, 2, "EMA without dead codes: exactly two collectives");
  cr_expect(e.op[0] == VQC_COLL_ALL_REDUCE && e.op[1] == VQC_COLL_ALL_REDUCE);
  cr_expect(e.has_tensor[0] && e.has_tensor[1]);
  cr_expect(e.ndim[0] == 1 && e.shape0[0] == 3, "counts (C,) first");
  cr_expect(e.ndim[1] == 2 && e.shape0[1] == 3, "sums (C, D) second");
}
