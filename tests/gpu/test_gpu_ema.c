/* test_gpu_ema.c: codebook statistics, EMA, smoothing and gather
 * (kernels/vq_ema.cu) and the device VQ step built on them
 * (vqc_vq_device_forward, lib/src/quant/vq_device.c) against their CPU
 * twins, label gpu. Outputs are poisoned before every run.
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
 *  - vqc_vq_device_forward against vqc_vq_forward over several steps
 *    (train and eval, a batch of another size, a frozen codebook; plain
 *    EMA, and k-means init with dead-code expiry), single process: the
 *    indices, quantized rows, loss, and the state (cluster_size,
 *    embed_avg, embed) on the device and in its host copy all equal the
 *    CPU's. The same function runs `vqcheck run --device cuda` (vq model);
 *    test_gpu_runner.c checks it distributed, through the harness. */
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

/* The CPU codebook and the device one (vqc_vq_device_forward's host copy
 * and device state) from the same parameters and the same EMA history. */
typedef struct {
  vqc_vq cpu;          /* vqc_vq_forward's */
  vqc_vq host;         /* vqc_vq_device_forward's host copy */
  vqc_vq_device dev;   /* and its device state */
} device_twin;

static void device_twin_init(device_twin *t, const vqc_vq_params *p,
                             int64_t rows) {
  cr_assert_eq(vqc_vq_init(&t->cpu, p, NULL), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(vqc_vq_init(&t->host, p, NULL), VQC_OK, "%s",
               vqc_last_error());
  /* uneven counts, some near zero, so the smoothing (and, with a
   * threshold, the expiry) matters */
  const int64_t C = p->codebook_size;
  float *a = vqc_vq_cluster_size(&t->cpu), *b = vqc_vq_cluster_size(&t->host);
  for (int64_t c = 0; c < C; c++)
    a[c] = b[c] = c % 7 == 0 ? 1e-6f : (float)(c % 13) + 0.25f;
  cr_assert_eq(vqc_vq_device_init(&t->dev, &t->host, rows), VQC_OK, "%s",
               vqc_last_error());
}

/* The CPU state equals the device state and its host copy, bit for bit. */
static void device_twin_expect_equal(device_twin *t, const char *when) {
  const int64_t C = t->cpu.p.codebook_size, D = t->cpu.p.dim;
  float *buf = malloc((size_t)(C * D) * 4);
  cr_assert_not_null(buf);
  const struct {
    const vqc_tensor *dev;
    float *cpu, *host;
    size_t n;
  } entries[3] = {
      {&t->dev.cluster_size, vqc_vq_cluster_size(&t->cpu),
       vqc_vq_cluster_size(&t->host), (size_t)C},
      {&t->dev.embed_avg, vqc_vq_embed_avg(&t->cpu),
       vqc_vq_embed_avg(&t->host), (size_t)(C * D)},
      {&t->dev.embed, vqc_vq_embed(&t->cpu), vqc_vq_embed(&t->host),
       (size_t)(C * D)},
  };
  for (int k = 0; k < 3; k++) {
    gpu_download(buf, gpu_ptr(entries[k].dev), entries[k].n * 4);
    expect_same_floats(buf, entries[k].cpu, entries[k].n, when);
    expect_same_floats(entries[k].host, entries[k].cpu, entries[k].n, when);
  }
  cr_expect_eq(t->host.initted, t->cpu.initted, "%s: initted", when);
  free(buf);
}

static void device_twin_free(device_twin *t) {
  vqc_vq_free(&t->cpu);
  vqc_vq_free(&t->host);
  vqc_vq_device_free(&t->dev);
}

/* Steps both codebooks on the same batches: train, train, eval, train on a
 * batch of M - 17 rows (the device buffers are resized), train. */
static void device_forward_over_steps(const vqc_vq_params *p, int64_t M,
                                      uint64_t seed) {
  const int64_t D = p->dim;
  device_twin t;
  device_twin_init(&t, p, M);
  float *x = malloc((size_t)(M * D) * 4), *q_cpu = malloc((size_t)(M * D) * 4),
        *q_gpu = malloc((size_t)(M * D) * 4);
  int64_t *i_cpu = malloc((size_t)M * 8), *i_gpu = malloc((size_t)M * 8);
  cr_assert(x && q_cpu && q_gpu && i_cpu && i_gpu);
  for (int step = 0; step < 5; step++) {
    const int64_t rows = step == 3 ? M - 17 : M;
    for (int64_t k = 0; k < rows * D; k++) x[k] = 0.5f * test_normal(&seed);
    memset(i_gpu, 0xA5, (size_t)M * 8);
    memset(q_gpu, 0xFF, (size_t)(M * D) * 4);
    const bool train = step != 2; /* one eval step: no state change */
    const vqc_vq_ctx ctx = {NULL, (uint64_t)step, NULL, 0};
    float l_cpu = -1.0f, l_gpu = -2.0f;
    cr_assert_eq(vqc_vq_forward(&t.cpu, &ctx, x, rows, train, i_cpu, q_cpu,
                                &l_cpu),
                 VQC_OK, "%s", vqc_last_error());
    cr_assert_eq(vqc_vq_device_forward(&t.host, &t.dev, &ctx, x, rows, train,
                                       i_gpu, q_gpu, &l_gpu),
                 VQC_OK, "%s", vqc_last_error());
    cr_assert_eq(memcmp(i_gpu, i_cpu, (size_t)rows * 8), 0,
                 "step %d: indices differ", step);
    expect_same_floats(q_gpu, q_cpu, (size_t)(rows * D), "quantized");
    cr_assert_eq(test_bits(l_gpu), test_bits(l_cpu),
                 "step %d: loss device %a, CPU %a", step, (double)l_gpu,
                 (double)l_cpu);
    device_twin_expect_equal(&t, train ? "after a train step"
                                       : "after an eval step");
  }
  device_twin_free(&t);
  free(x), free(q_cpu), free(q_gpu), free(i_cpu), free(i_gpu);
}

Test(gpu_ema, device_forward_matches_cpu_over_steps) {
  gpu_require();
  vqc_vq_params p;
  vqc_vq_params_default(&p, 40, 512);
  p.seed = 304;
  device_forward_over_steps(&p, 5000, 305);
}

/* k-means init on the first batch and dead-code expiry after every EMA:
 * the host functions inside the device step, their draws keyed by the
 * step as on the CPU. */
Test(gpu_ema, device_forward_with_kmeans_and_dead_codes_matches_cpu) {
  gpu_require();
  vqc_vq_params p;
  vqc_vq_params_default(&p, 24, 256);
  p.seed = 306;
  p.kmeans_init = true;
  p.kmeans_iters = 3;
  p.threshold_ema_dead_code = 2.0;
  device_forward_over_steps(&p, 3000, 307);
}

Test(gpu_ema, device_forward_frozen_codebook_changes_nothing) {
  gpu_require();
  vqc_vq_params p;
  vqc_vq_params_default(&p, 16, 128);
  p.seed = 308;
  p.freeze_codebook = true;
  device_forward_over_steps(&p, 1000, 309);
}
