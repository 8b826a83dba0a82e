/* test_gpu_ema.c: codebook statistics, EMA, smoothing, gather and the
 * device VQ forward (kernels/vq_ema.cu) against their CPU twins, label gpu.
 * Outputs are poisoned before every run.
 *
 * Tolerance: none. The statistics sum each code's rows in the fixed order
 * vqc_vq_batch_stats defines (double sums over chunks of
 * VQC_VQ_STATS_CHUNK rows in row order, the chunks added in order; rows
 * grouped by a stable sort, no float atomics), and the EMA and smoothing
 * are the CPU's float operations in the CPU's order, so every output is
 * compared bit for bit:
 *  - vqc_gpu_vq_stats against vqc_vq_batch_stats (vq_ema.c's step 1), on a
 *    skewed assignment (a few codes take most rows, many take none), and
 *    twice on the same input (same bits: determinism); and on a collapsed
 *    codebook (one code takes nearly every row: the many-chunk path);
 *  - vqc_gpu_lerp against vqc_lerp_f32 for weights on both branches;
 *  - vqc_gpu_vq_renormalize against vq_renormalize;
 *  - vqc_gpu_vq_ema_update and vqc_gpu_vq_forward (train and eval) against
 *    vqc_vq_ema_update / vqc_vq_forward, single process: cluster_size,
 *    embed_avg, embed, indices and quantized all equal. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test_util.h"
#include "quant/vq_internal.h" /* lib/src: vq_renormalize, the CPU twin */
#include "vqc/vq.h"

/* vq_ema.c step 1, the definition: counts (C) and sums (C, D) row-major. */
static void cpu_stats(const float *x, int64_t M, int64_t D,
                      const int64_t *idx, int64_t C, float *counts,
                      float *sums) {
  cr_assert_eq(vqc_vq_batch_stats(x, M, D, idx, C, counts, sums, D, 1),
               VQC_OK, "%s", vqc_last_error());
}

/* Indices skewed toward a few codes: code = floor(C * u^3). */
static void skewed_indices(int64_t *idx, int64_t M, int64_t C, uint64_t *s) {
  for (int64_t i = 0; i < M; i++) {
    double u = (double)(test_splitmix(s) >> 11) / 9007199254740992.0;
    idx[i] = (int64_t)(C * u * u * u);
    if (idx[i] >= C) idx[i] = C - 1;
  }
}

static void expect_same_floats(const float *got, const float *want, size_t n,
                               const char *what) {
  for (size_t k = 0; k < n; k++)
    cr_assert_eq(test_bits(got[k]), test_bits(want[k]),
                 "%s[%zu]: device %a, CPU %a", what, k, (double)got[k],
                 (double)want[k]);
}

Test(gpu_ema, stats_bit_identical_and_deterministic) {
  gpu_require();
  const int64_t M = 200003, C = 1000, D = 33;
  float *x = malloc((size_t)(M * D) * 4);
  int64_t *idx = malloc((size_t)M * 8);
  float *wc = malloc((size_t)C * 4), *ws = malloc((size_t)(C * D) * 4);
  float *gc = malloc((size_t)C * 4), *gs = malloc((size_t)(C * D) * 4);
  float *gc2 = malloc((size_t)C * 4), *gs2 = malloc((size_t)(C * D) * 4);
  cr_assert(x && idx && wc && ws && gc && gs && gc2 && gs2);
  uint64_t seed = 301;
  for (int64_t k = 0; k < M * D; k++) x[k] = 10.0f * test_normal(&seed);
  skewed_indices(idx, M, C, &seed);
  cpu_stats(x, M, D, idx, C, wc, ws);

  vqc_tensor dx = gpu_upload(x, (size_t)(M * D) * 4),
             di = gpu_upload(idx, (size_t)M * 8),
             dc = gpu_alloc((size_t)C * 4), ds = gpu_alloc((size_t)(C * D) * 4);
  for (int run = 0; run < 2; run++) {
    gpu_poison(gpu_ptr(&dc), (size_t)C);
    gpu_poison(gpu_ptr(&ds), (size_t)(C * D));
    cr_assert_eq(vqc_gpu_vq_stats(gpu_ptr(&dx), M, D, gpu_ptr(&di), C,
                                  gpu_ptr(&dc), gpu_ptr(&ds)),
                 VQC_OK, "%s", vqc_last_error());
    gpu_download(run ? gc2 : gc, gpu_ptr(&dc), (size_t)C * 4);
    gpu_download(run ? gs2 : gs, gpu_ptr(&ds), (size_t)(C * D) * 4);
  }
  expect_same_floats(gc, wc, (size_t)C, "counts");
  expect_same_floats(gs, ws, (size_t)(C * D), "sums");
  cr_expect_eq(memcmp(gc, gc2, (size_t)C * 4), 0, "counts differ run to run");
  cr_expect_eq(memcmp(gs, gs2, (size_t)(C * D) * 4), 0,
               "sums differ run to run");

  /* A bad index is refused naming its row. */
  int64_t bad = C + 5;
  gpu_copy_in((int64_t *)gpu_ptr(&di) + 1234, &bad, 8);
  cr_expect_eq(vqc_gpu_vq_stats(gpu_ptr(&dx), M, D, gpu_ptr(&di), C,
                                gpu_ptr(&dc), gpu_ptr(&ds)),
               VQC_EINVAL);
  cr_expect_not_null(strstr(vqc_last_error(), "row 1234"), "%s",
                     vqc_last_error());

  vqc_tensor_free(&dx), vqc_tensor_free(&di), vqc_tensor_free(&dc),
      vqc_tensor_free(&ds);
  free(x), free(idx), free(wc), free(ws), free(gc), free(gs), free(gc2),
      free(gs2);
}

/* A collapsed codebook: one code takes 99% of a million rows (the usual way
 * a VQ codebook fails), the rest spread thin. The chunked order makes this
 * the many-tile path; the bits stay the CPU's. */
Test(gpu_ema, stats_collapsed_codebook) {
  gpu_require();
  const int64_t M = 1 << 20, C = 8192, D = 64;
  float *x = malloc((size_t)(M * D) * 4);
  int64_t *idx = malloc((size_t)M * 8);
  float *wc = malloc((size_t)C * 4), *ws = malloc((size_t)(C * D) * 4);
  float *gc = malloc((size_t)C * 4), *gs = malloc((size_t)(C * D) * 4);
  cr_assert(x && idx && wc && ws && gc && gs);
  uint64_t seed = 311;
  for (int64_t k = 0; k < M * D; k++) x[k] = test_normal(&seed);
  for (int64_t i = 0; i < M; i++)
    idx[i] = test_splitmix(&seed) % 100 ? 7 : (int64_t)(test_splitmix(&seed) % C);
  cpu_stats(x, M, D, idx, C, wc, ws);
  vqc_tensor dx = gpu_upload(x, (size_t)(M * D) * 4),
             di = gpu_upload(idx, (size_t)M * 8),
             dc = gpu_alloc((size_t)C * 4), ds = gpu_alloc((size_t)(C * D) * 4);
  gpu_poison(gpu_ptr(&dc), (size_t)C);
  gpu_poison(gpu_ptr(&ds), (size_t)(C * D));
  cr_assert_eq(vqc_gpu_vq_stats(gpu_ptr(&dx), M, D, gpu_ptr(&di), C,
                                gpu_ptr(&dc), gpu_ptr(&ds)),
               VQC_OK, "%s", vqc_last_error());
  gpu_download(gc, gpu_ptr(&dc), (size_t)C * 4);
  gpu_download(gs, gpu_ptr(&ds), (size_t)(C * D) * 4);
  expect_same_floats(gc, wc, (size_t)C, "counts");
  expect_same_floats(gs, ws, (size_t)(C * D), "sums");
  vqc_tensor_free(&dx), vqc_tensor_free(&di), vqc_tensor_free(&dc),
      vqc_tensor_free(&ds);
  free(x), free(idx), free(wc), free(ws), free(gc), free(gs);
}

Test(gpu_ema, lerp_is_torch_lerp_bit_for_bit) {
  gpu_require();
  const size_t n = 100003;
  float *a = malloc(n * 4), *b = malloc(n * 4), *got = malloc(n * 4),
        *want = malloc(n * 4);
  cr_assert(a && b && got && want);
  uint64_t seed = 302;
  for (size_t k = 0; k < n; k++) {
    a[k] = 100.0f * test_normal(&seed);
    b[k] = 100.0f * test_normal(&seed);
  }
  const float weights[] = {0.0f, 0.2f, 0.49999997f, 0.5f, 0.8f, 1.0f};
  for (size_t w = 0; w < sizeof weights / sizeof weights[0]; w++) {
    vqc_tensor da = gpu_upload(a, n * 4), db = gpu_upload(b, n * 4);
    cr_assert_eq(vqc_gpu_lerp(gpu_ptr(&da), gpu_ptr(&db), n, weights[w]),
                 VQC_OK, "%s", vqc_last_error());
    gpu_download(got, gpu_ptr(&da), n * 4);
    for (size_t k = 0; k < n; k++)
      want[k] = vqc_lerp_f32(a[k], b[k], weights[w]);
    expect_same_floats(got, want, n, "lerp");
    vqc_tensor_free(&da), vqc_tensor_free(&db);
  }
  free(a), free(b), free(got), free(want);
}

/* A CPU codebook (C, D) with some EMA history and its device copies. */
typedef struct {
  vqc_vq vq;
  vqc_tensor embed, cs, avg; /* device copies of the state */
} twin_codebook;

static void twin_init(twin_codebook *t, int64_t C, int64_t D, uint64_t seed) {
  vqc_vq_params p;
  vqc_vq_params_default(&p, D, C);
  p.seed = seed;
  cr_assert_eq(vqc_vq_init(&t->vq, &p, NULL), VQC_OK, "%s", vqc_last_error());
  /* uneven counts, some near zero, so the smoothing matters */
  float *cs = vqc_vq_cluster_size(&t->vq);
  for (int64_t c = 0; c < C; c++)
    cs[c] = c % 7 == 0 ? 1e-6f : (float)(c % 13) + 0.25f;
  t->embed = gpu_upload(vqc_vq_embed(&t->vq), (size_t)(C * D) * 4);
  t->cs = gpu_upload(cs, (size_t)C * 4);
  t->avg = gpu_upload(vqc_vq_embed_avg(&t->vq), (size_t)(C * D) * 4);
}

static void twin_expect_equal(twin_codebook *t, const char *when) {
  const int64_t C = t->vq.p.codebook_size, D = t->vq.p.dim;
  float *buf = malloc((size_t)(C * D) * 4);
  cr_assert_not_null(buf);
  gpu_download(buf, gpu_ptr(&t->cs), (size_t)C * 4);
  expect_same_floats(buf, vqc_vq_cluster_size(&t->vq), (size_t)C, when);
  gpu_download(buf, gpu_ptr(&t->avg), (size_t)(C * D) * 4);
  expect_same_floats(buf, vqc_vq_embed_avg(&t->vq), (size_t)(C * D), when);
  gpu_download(buf, gpu_ptr(&t->embed), (size_t)(C * D) * 4);
  expect_same_floats(buf, vqc_vq_embed(&t->vq), (size_t)(C * D), when);
  free(buf);
}

static void twin_free(twin_codebook *t) {
  vqc_vq_free(&t->vq);
  vqc_tensor_free(&t->embed), vqc_tensor_free(&t->cs),
      vqc_tensor_free(&t->avg);
}

Test(gpu_ema, renormalize_matches_cpu) {
  gpu_require();
  twin_codebook t;
  twin_init(&t, 1000, 24, 303);
  gpu_poison(gpu_ptr(&t.embed), 1000 * 24);
  vq_renormalize(&t.vq);
  cr_assert_eq(vqc_gpu_vq_renormalize(gpu_ptr(&t.cs), gpu_ptr(&t.avg), 1000,
                                      24, t.vq.p.eps, gpu_ptr(&t.embed)),
               VQC_OK, "%s", vqc_last_error());
  twin_expect_equal(&t, "renormalize");
  twin_free(&t);
}

Test(gpu_ema, ema_update_and_forward_match_cpu_over_steps) {
  gpu_require();
  const int64_t C = 512, D = 40, M = 5000;
  twin_codebook t;
  twin_init(&t, C, D, 304);
  float *x = malloc((size_t)(M * D) * 4), *q_cpu = malloc((size_t)(M * D) * 4),
        *q_gpu = malloc((size_t)(M * D) * 4);
  int64_t *i_cpu = malloc((size_t)M * 8), *i_gpu = malloc((size_t)M * 8);
  cr_assert(x && q_cpu && q_gpu && i_cpu && i_gpu);
  vqc_tensor dx = gpu_alloc((size_t)(M * D) * 4), di = gpu_alloc((size_t)M * 8),
             dq = gpu_alloc((size_t)(M * D) * 4);
  uint64_t seed = 305;
  for (int step = 0; step < 4; step++) {
    for (int64_t k = 0; k < M * D; k++) x[k] = 0.5f * test_normal(&seed);
    gpu_copy_in(gpu_ptr(&dx), x, (size_t)(M * D) * 4);
    gpu_poison(gpu_ptr(&di), (size_t)M * 2);
    gpu_poison(gpu_ptr(&dq), (size_t)(M * D));
    const bool train = step != 2; /* one eval step: no state change */
    cr_assert_eq(vqc_vq_forward(&t.vq, NULL, x, M, train, i_cpu, q_cpu, NULL),
                 VQC_OK, "%s", vqc_last_error());
    cr_assert_eq(vqc_gpu_vq_forward(NULL, &t.vq.p, gpu_ptr(&t.embed),
                                    gpu_ptr(&t.cs), gpu_ptr(&t.avg),
                                    gpu_ptr(&dx), M, train, gpu_ptr(&di),
                                    gpu_ptr(&dq)),
                 VQC_OK, "%s", vqc_last_error());
    gpu_download(i_gpu, gpu_ptr(&di), (size_t)M * 8);
    gpu_download(q_gpu, gpu_ptr(&dq), (size_t)(M * D) * 4);
    cr_assert_eq(memcmp(i_gpu, i_cpu, (size_t)M * 8), 0,
                 "step %d: indices differ", step);
    expect_same_floats(q_gpu, q_cpu, (size_t)(M * D), "quantized");
    twin_expect_equal(&t, train ? "after a train step" : "after an eval step");
  }
  vqc_tensor_free(&dx), vqc_tensor_free(&di), vqc_tensor_free(&dq);
  twin_free(&t);
  free(x), free(q_cpu), free(q_gpu), free(i_cpu), free(i_gpu);
}
