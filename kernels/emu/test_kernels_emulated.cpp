/* test_kernels_emulated.cpp: every kernel's own source, built for the CPU
 * with cuda_emu.h and run thread by thread, against its CPU twin in
 * libvqcheck. Needs no GPU: this is what CI (no GPU) checks of the device
 * code beyond "it compiles". ctest: unit.kernels_emulated (labels unit, gpu).
 *
 * What it can and cannot show. It runs the kernels' indexing, tiling,
 * shared-memory staging, barriers, warp shuffles and float operation order
 * exactly as written, so a wrong index, a missed barrier in the pipeline
 * order, a wrong tie rule or a wrong XXH3 lane layout fails here. It cannot
 * show races that only real concurrency exposes (the emulated threads do run
 * concurrently, but the schedule differs), CUDA libm accuracy (tanhf is
 * glibc's here), or speed. tests/gpu checks those on a device.
 *
 * Tolerances: none except FSQ's double-rounding hard cases (see
 * tests/gpu/test_gpu_fsq.c), counted and required to be 0 here. */
#include "cuda_emu.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <numeric>
#include <vector>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "vqc/comm.h"
#include "vqc/digest.h"
#include "vqc/fsq.h"
#include "vqc/vq.h"
extern "C" {
#include "quant/vq_internal.h" /* lib/src: vq_renormalize, a CPU twin */
}
#include "gpu_internal.h" /* the wrappers' pointer classification */

/* The kernels under test: their own source. */
#include "digest_kernels.cuh"
#include "fsq_kernels.cuh"
#include "rank_sum_kernels.cuh"
#include "vq_ema_kernels.cuh"
#include "vq_nearest_kernels.cuh"

/* The emulator's launch state (declared in cuda_emu.h). */
thread_local uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim, gridDim;
emu_block *emu_current;

/* ---- inputs */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
static float normal(uint64_t *s) {
  double u1 = ((double)(splitmix(s) >> 11) + 1.0) / 9007199254740993.0;
  double u2 = (double)(splitmix(s) >> 11) / 9007199254740992.0;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static unsigned blocks_for(int64_t n, int64_t per) {
  return (unsigned)std::max<int64_t>(1, (n + per - 1) / per);
}

/* ---- digest */

Test(kernels_emulated, digest_leaves_equal_xxh3) {
  const size_t max = 3 * VQC_DIGEST_CHUNK + 777 + 16;
  /* 16-byte aligned storage, so offset 0 takes the aligned load path and
   * offset 3 the unaligned one. */
  /* aligned_alloc needs a size that is a multiple of the alignment. */
  const size_t alloc = (max + 64 + 63) & ~(size_t)63;
  uint8_t *buf = static_cast<uint8_t *>(aligned_alloc(64, alloc));
  cr_assert_not_null(buf);
  uint64_t s = 1;
  for (size_t i = 0; i < max + 64; i++) buf[i] = (uint8_t)splitmix(&s);
  xxh3_secret secret;
  uint8_t sec[SECRET_SIZE];
  XXH3_generateSecret_fromSeed(sec, 0);
  memcpy(secret.w, sec, SECRET_SIZE);

  const size_t sizes[] = {1, 7, 16, 100, 240, 241, 1024, 1025, 5000,
                          VQC_DIGEST_CHUNK, VQC_DIGEST_CHUNK + 1,
                          VQC_DIGEST_CHUNK + 200, VQC_DIGEST_CHUNK + 300,
                          3 * VQC_DIGEST_CHUNK + 777};
  for (size_t off : {(size_t)0, (size_t)3}) {
    for (size_t n : sizes) {
      const uint64_t nleaves = (n - 1) / VQC_DIGEST_CHUNK + 1;
      std::vector<uint64_t> leaves(nleaves, 0xA5A5A5A5A5A5A5A5ULL);
      const uint8_t *data = buf + off;
      uint64_t *out = leaves.data();
      emu_launch(blocks_for((int64_t)nleaves, WARPS_PER_BLOCK),
                 WARPS_PER_BLOCK * 32, [&] {
                   digest_leaves_kernel(data, n, nleaves, secret, out);
                 });
      for (uint64_t l = 0; l < nleaves; l++) {
        size_t begin = l * VQC_DIGEST_CHUNK;
        size_t len = std::min(n - begin, (size_t)VQC_DIGEST_CHUNK);
        cr_assert_eq(leaves[l], vqc_xxh3_64(data + begin, len),
                     "size %zu offset %zu leaf %llu", n, off,
                     (unsigned long long)l);
      }
    }
  }
  free(buf);
}

/* ---- FSQ */

/* The definition (vqc/gpu.h): correctly rounded tanh, the CPU's float ops;
 * *hard when the double tanh is too near a float midpoint to be sure. */
static float tanh_cr(float x, int *hard) {
  double t = tanh((double)x);
  float f = (float)t;
  float g = nextafterf(f, t > (double)f ? INFINITY : -INFINITY);
  double mid = ((double)f + (double)g) / 2.0;
  if (t != 0.0 && fabs(t - mid) < ldexp(fabs(t), -50)) *hard = 1;
  return f;
}
static float code_def(const vqc_fsq *q, int i, float z, int *hard) {
  if (q->preserve_symmetry) {
    const float Lm1 = (float)(q->levels[i] - 1);
    return q->sym_scale[i] * floorf(Lm1 * (tanh_cr(z, hard) + 1.0f) / 2.0f +
                                    0.5f) -
           1.0f;
  }
  const float b = tanh_cr(z + q->shift[i], hard) * q->half_l[i] - q->offset[i];
  return rintf(b) / q->half_width[i];
}

static void fsq_case(const int32_t *levels, int d, int C, bool sym, int64_t M,
                     uint64_t seed) {
  vqc_fsq q;
  cr_assert_eq(vqc_fsq_init(&q, levels, d, C, sym, 1e-3), VQC_OK);
  const int64_t groups = M * C, n = groups * d;
  std::vector<float> z(n), out(n, NAN);
  std::vector<int32_t> idx(groups, -7), want_idx(groups);
  for (int64_t e = 0; e < n; e++) {
    /* normals, exact zeros (the sign-of-zero decision) and infinities */
    uint64_t r = splitmix(&seed) % 16;
    z[e] = r == 0 ? 0.0f : r == 1 ? -INFINITY : r == 2 ? 1e-40f
                                              : 3.0f * normal(&seed);
  }
  fsq_flags flags = {~0ULL, ~0ULL, 0};
  const fsq_consts k = fsq_consts_of(&q);
  const int gpt = FSQ_TILE / d;
  const float *zp = z.data();
  float *op = out.data();
  int32_t *ip = idx.data();
  fsq_flags *fp = &flags;
  emu_launch(blocks_for(groups, gpt), FSQ_THREADS, [&] {
    fsq_quantize_kernel(zp, op, ip, groups, gpt, k, fp);
  });
  cr_expect_eq(flags.first_nan, ~0ULL);
  cr_expect_eq(flags.first_bad_group, ~0ULL);
  int hard_total = 0;
  for (int64_t e = 0; e < n; e++) {
    int hard = 0;
    const float want = code_def(&q, (int)(e % d), z[e], &hard);
    hard_total += hard;
    if (!hard)
      cr_assert_eq(bits(out[e]), bits(want), "element %lld (z = %a): %a vs %a",
                   (long long)e, (double)z[e], (double)out[e], (double)want);
  }
  cr_expect_eq(hard_total, 0);
  cr_assert_eq(vqc_fsq_codes_to_indices(&q, out.data(), M, want_idx.data()),
               VQC_OK);
  cr_assert(idx == want_idx, "indices differ from the CPU's of these codes");
}

Test(kernels_emulated, fsq_codes_and_indices) {
  const int32_t a[] = {8, 5, 5, 5};
  fsq_case(a, 4, 1, false, 1500, 11);
  const int32_t b[] = {7, 5, 3, 2};
  fsq_case(b, 4, 1, true, 1500, 12);
  const int32_t c[] = {8, 6, 5};
  fsq_case(c, 3, 2, false, 1001, 13);
  const int32_t e[] = {16};
  fsq_case(e, 1, 3, false, 1000, 14);
}

Test(kernels_emulated, fsq_nan_is_flagged_at_the_first_one) {
  const int32_t a[] = {8, 5, 5};
  vqc_fsq q;
  cr_assert_eq(vqc_fsq_init(&q, a, 3, 1, false, 1e-3), VQC_OK);
  const int64_t M = 900, n = M * 3;
  std::vector<float> z(n, 0.25f), out(n);
  z[1000] = NAN;
  z[2000] = NAN;
  fsq_flags flags = {~0ULL, ~0ULL, 0};
  const fsq_consts k = fsq_consts_of(&q);
  const int gpt = FSQ_TILE / 3;
  const float *zp = z.data();
  float *op = out.data();
  fsq_flags *fp = &flags;
  emu_launch(blocks_for(M, gpt), FSQ_THREADS, [&] {
    fsq_quantize_kernel(zp, op, nullptr, M, gpt, k, fp);
  });
  cr_expect_eq(flags.first_nan, 1000ULL);
}

/* ---- nearest code */

static void nearest_case(int64_t M, int64_t C, int64_t D, uint64_t seed) {
  std::vector<float> x(M * D), E(C * D);
  for (auto &v : E) v = normal(&seed);
  for (int64_t c = 1; c < C; c += 5) /* duplicated codes: exact ties */
    std::copy(E.begin() + (c - 1) * D, E.begin() + c * D, E.begin() + c * D);
  for (auto &v : x) v = normal(&seed);
  for (int64_t m = 0; m < M; m += 7) /* rows equal to codes */
    std::copy(E.begin() + (m % C) * D, E.begin() + (m % C + 1) * D,
              x.begin() + m * D);
  std::vector<int64_t> want(M);
  std::vector<float> want_d(M * C);
  cr_assert_eq(vqc_vq_nearest(x.data(), M, E.data(), C, D, want.data(),
                              want_d.data()),
               VQC_OK);

  std::vector<float> x2(M), e2(C);
  const float *xp = x.data(), *ep = E.data();
  float *x2p = x2.data(), *e2p = e2.data();
  emu_launch(blocks_for(M, SQ_ROWS), SQ_ROWS,
             [&] { vq_sqnorms_kernel(xp, M, D, x2p); });
  emu_launch(blocks_for(C, SQ_ROWS), SQ_ROWS,
             [&] { vq_sqnorms_kernel(ep, C, D, e2p); });

  for (int variant = 0; variant < 3; variant++) {
    std::vector<int64_t> got(M, -5);
    std::vector<float> got_d(M * C, NAN);
    int64_t *gp = got.data();
    float *dp = got_d.data();
    unsigned grid = blocks_for(M, BM);
    if (variant == 0) /* scalar loads, distances written */
      emu_launch(grid, NT, [&] {
        vq_nearest_kernel<false, true>(xp, M, ep, (int)C, (int)D, x2p, e2p,
                                       gp, dp);
      });
    else if (variant == 1 && D % 4 == 0) /* float4 loads */
      emu_launch(grid, NT, [&] {
        vq_nearest_kernel<true, true>(xp, M, ep, (int)C, (int)D, x2p, e2p, gp,
                                      dp);
      });
    else if (variant == 2) /* indices only */
      emu_launch(grid, NT, [&] {
        vq_nearest_kernel<false, false>(xp, M, ep, (int)C, (int)D, x2p, e2p,
                                        gp, nullptr);
      });
    else
      continue;
    cr_assert(got == want, "(M %lld, C %lld, D %lld) variant %d: indices "
              "differ", (long long)M, (long long)C, (long long)D, variant);
    if (variant < 2)
      for (int64_t k = 0; k < M * C; k++)
        cr_assert_eq(bits(got_d[k]), bits(want_d[k]),
                     "variant %d: distance (%lld, %lld): %a vs %a", variant,
                     (long long)(k / C), (long long)(k % C), (double)got_d[k],
                     (double)want_d[k]);
  }
}

Test(kernels_emulated, nearest_matches_cpu_bit_for_bit) {
  nearest_case(300, 200, 12, 21);  /* partial tiles; D % 4 == 0 */
  nearest_case(130, 129, 20, 22);  /* D not a multiple of 8 */
  nearest_case(77, 300, 13, 23);   /* D % 4 != 0 */
  nearest_case(5, 1, 3, 24);       /* one code */
  nearest_case(129, 257, 40, 25);  /* several code tiles, 5 k steps each */
}

Test(kernels_emulated, nearest_all_ties_and_inf_rows) {
  const int64_t M = 140, C = 150, D = 8;
  std::vector<float> x(M * D), E(C * D, 0.0f);
  uint64_t s = 26;
  for (auto &v : x) v = normal(&s);
  x[5 * D + 2] = INFINITY;
  std::vector<int64_t> want(M), got(M, -1);
  cr_assert_eq(vqc_vq_nearest(x.data(), M, E.data(), C, D, want.data(),
                              nullptr),
               VQC_OK);
  std::vector<float> x2(M), e2(C, 0.0f);
  const float *xp = x.data(), *ep = E.data();
  float *x2p = x2.data(), *e2p = e2.data();
  int64_t *gp = got.data();
  emu_launch(blocks_for(M, SQ_ROWS), SQ_ROWS,
             [&] { vq_sqnorms_kernel(xp, M, D, x2p); });
  emu_launch(blocks_for(M, BM), NT, [&] {
    vq_nearest_kernel<true, false>(xp, M, ep, (int)C, (int)D, x2p, e2p, gp,
                                   nullptr);
  });
  cr_assert(got == want);
}

/* ---- statistics, EMA, smoothing, gather */

/* The device statistics pipeline of vqc_gpu_vq_stats (vq_ema.cu), with the
 * CUB sort and scans done on the host (std::stable_sort, running sums) and
 * every kernel run by the emulator with `threads` per block: counts (C)
 * and sums (C, D) row-major. */
static void emulated_stats(const std::vector<float> &x, int64_t M, int64_t D,
                           const std::vector<int64_t> &idx, int64_t C,
                           unsigned threads, std::vector<float> &counts,
                           std::vector<float> &sums) {
  std::vector<uint32_t> keys(M);
  std::vector<int32_t> rows(M);
  std::vector<unsigned> ncount(C, 0), offsets(C), ntiles(C + 1),
      nparts(C + 1), tile_off(C + 1), part_off(C + 1);
  unsigned long long bad = ~0ULL;
  const int64_t *ip = idx.data();
  uint32_t *kp = keys.data();
  int32_t *rp = rows.data();
  unsigned *np = ncount.data();
  unsigned long long *bp = &bad;
  emu_launch(4, EW_THREADS,
             [&] { stats_keys_kernel(ip, M, C, kp, rp, np, bp); });
  cr_assert_eq(bad, ~0ULL);
  std::vector<int32_t> order(rows);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return keys[a] < keys[b]; });
  std::exclusive_scan(ncount.begin(), ncount.end(), offsets.begin(), 0u);
  unsigned *ntp = ntiles.data(), *npp = nparts.data();
  emu_launch(blocks_for(C + 1, 64), 64,
             [&] { stats_tiles_kernel(np, C, ntp, npp); });
  std::exclusive_scan(ntiles.begin(), ntiles.end(), tile_off.begin(), 0u);
  std::exclusive_scan(nparts.begin(), nparts.end(), part_off.begin(), 0u);
  /* the wrapper's bounds: tiles and partial tiles */
  const int64_t tiles_max =
      (M + STATS_CHUNK - 1) / STATS_CHUNK + std::min<int64_t>(C, M);
  cr_assert_leq((int64_t)tile_off[C], tiles_max);
  cr_assert_leq((int64_t)part_off[C], 2 * M / STATS_CHUNK + 1);
  std::vector<double> parts((size_t)(2 * M / STATS_CHUNK + 1) * D, NAN);
  counts.assign(C, NAN);
  sums.assign(C * D, NAN);
  const float *xp = x.data();
  const int32_t *op = order.data();
  const unsigned *offp = offsets.data(), *cnp = ncount.data(),
                 *top = tile_off.data(), *pop = part_off.data();
  double *pp = parts.data();
  float *cp = counts.data(), *sp = sums.data();
  emu_launch((unsigned)tiles_max, threads, [&] {
    stats_tile_sums_kernel(xp, D, C, op, offp, cnp, top, pop, pp, cp, sp);
  });
  emu_launch((unsigned)C, threads, [&] {
    stats_combine_kernel(D, cnp, pop, pp, cp, sp);
  });
}

/* Codes of 0, 1, CHUNK, CHUNK + 1 and many chunks of rows (one code takes
 * most rows: the collapsed codebook the tiles exist for), values of very
 * different magnitudes so that a different summation order would show: the
 * device pipeline equals vqc_vq_batch_stats bit for bit, whatever the
 * block size. */
Test(kernels_emulated, stats_chunked_order_equals_cpu) {
  const int64_t C = 9, D = 5, R = STATS_CHUNK;
  const int64_t sizes[9] = {0, 1, R, R + 1, 2 * R, 3 * R + 7, 0, 2, 9 * R + 3};
  std::vector<int64_t> idx;
  for (int64_t c = 0; c < C; c++)
    for (int64_t k = 0; k < sizes[c]; k++) idx.push_back(c);
  uint64_t s = 77;
  for (size_t i = idx.size() - 1; i > 0; i--) /* shuffled rows */
    std::swap(idx[i], idx[splitmix(&s) % (i + 1)]);
  const int64_t M = (int64_t)idx.size();
  std::vector<float> x(M * D);
  for (auto &v : x)
    v = normal(&s) * ldexpf(1.0f, (int)(splitmix(&s) % 40) - 20);
  /* Dimension 0 of the big code: 2^60, then ones, then -2^60 (row order).
   * In one row-order chain every 1 is lost next to 2^60 (its double ulp is
   * 256); chunk sums of 256 ones survive. So the orders give different
   * bits, and a device that summed in another order would fail here. */
  {
    int64_t first = -1, last = -1;
    for (int64_t i = 0; i < M; i++)
      if (idx[i] == 8) {
        if (first < 0) first = i;
        last = i;
        x[i * D] = 1.0f;
      }
    x[first * D] = ldexpf(1.0f, 60);
    x[last * D] = -ldexpf(1.0f, 60);
  }
  std::vector<float> want_c(C), want_s(C * D);
  cr_assert_eq(vqc_vq_batch_stats(x.data(), M, D, idx.data(), C,
                                  want_c.data(), want_s.data(), D, 1),
               VQC_OK, "%s", vqc_last_error());
  /* the order matters here: the plain row-order double sum differs */
  std::vector<double> plain(C * D, 0.0);
  for (int64_t i = 0; i < M; i++)
    for (int64_t d = 0; d < D; d++) plain[idx[i] * D + d] += x[i * D + d];
  int differ = 0;
  for (int64_t k = 0; k < C * D; k++)
    differ += bits((float)plain[k]) != bits(want_s[k]);
  cr_assert_gt(differ, 0, "the inputs must tell the orders apart");
  cr_expect_eq(want_s[8 * D], (float)(8 * R),
               "code 8, dim 0: the ones of chunks 1-8 survive, the 255 "
               "of chunk 0 and the 2 of chunk 9 are lost next to 2^60");
  for (unsigned threads : {32u, 64u}) {
    std::vector<float> counts, sums;
    emulated_stats(x, M, D, idx, C, threads, counts, sums);
    for (int64_t c = 0; c < C; c++)
      cr_assert_eq(bits(counts[c]), bits(want_c[c]), "count %lld",
                   (long long)c);
    for (int64_t k = 0; k < C * D; k++)
      cr_assert_eq(bits(sums[k]), bits(want_s[k]),
                   "sum of code %lld dim %lld (%d threads)",
                   (long long)(k / D), (long long)(k % D), threads);
  }
}

Test(kernels_emulated, stats_sums_lerp_renorm_gather) {
  const int64_t M = 3000, C = 70, D = 37;
  uint64_t s = 31;
  std::vector<float> x(M * D);
  for (auto &v : x) v = 10.0f * normal(&s);
  std::vector<int64_t> idx(M);
  for (auto &v : idx) {
    double u = (double)(splitmix(&s) >> 11) / 9007199254740992.0;
    v = std::min<int64_t>(C - 1, (int64_t)(C * u * u * u)); /* skewed */
  }
  const int64_t *ip = idx.data();
  unsigned long long bad = ~0ULL, *bp = &bad;

  /* the statistics, against vq_ema.c step 1 (vqc_vq_batch_stats) */
  std::vector<float> counts, sums;
  emulated_stats(x, M, D, idx, C, 64, counts, sums);
  std::vector<float> wc(C), ws(C * D);
  cr_assert_eq(vqc_vq_batch_stats(x.data(), M, D, idx.data(), C, wc.data(),
                                  ws.data(), D, 1), VQC_OK);
  for (int64_t c = 0; c < C; c++) cr_assert_eq(bits(counts[c]), bits(wc[c]));
  for (int64_t k = 0; k < C * D; k++)
    cr_assert_eq(bits(sums[k]), bits(ws[k]), "sum %lld", (long long)k);
  float *sp = sums.data();

  /* lerp of a codebook state toward the statistics, both weights' branches */
  vqc_vq_params p;
  vqc_vq_params_default(&p, D, C);
  vqc_vq vq;
  cr_assert_eq(vqc_vq_init(&vq, &p, nullptr), VQC_OK);
  std::vector<float> cs(vqc_vq_cluster_size(&vq), vqc_vq_cluster_size(&vq) + C);
  std::vector<float> avg(vqc_vq_embed_avg(&vq), vqc_vq_embed_avg(&vq) + C * D);
  for (float w : {0.2f, 0.7f}) {
    std::vector<float> a(avg);
    float *ap = a.data();
    emu_launch(2, EW_THREADS,
               [&] { lerp_kernel(ap, sp, (size_t)(C * D), w); });
    for (int64_t k = 0; k < C * D; k++)
      cr_assert_eq(bits(a[k]), bits(vqc_lerp_f32(avg[k], sums[k], w)));
  }

  /* renormalisation: total (one thread, in order) and the division */
  for (int64_t c = 0; c < C; c++) cs[c] = c % 3 ? (float)c + 0.5f : 1e-7f;
  memcpy(vqc_vq_cluster_size(&vq), cs.data(), C * 4);
  float tot = NAN;
  const float *csp = cs.data();
  float *tp = &tot;
  emu_launch(1, TOT_STAGE, [&] { total_kernel(csp, C, tp); });
  std::vector<float> embed(C * D, NAN);
  const float eps = (float)p.eps, c_eps = (float)((double)C * p.eps);
  const float *avgp = avg.data();
  float *embp = embed.data();
  emu_launch(3, EW_THREADS, [&] {
    renorm_kernel(csp, avgp, C, D, eps, c_eps, tp, embp);
  });
  vq_renormalize(&vq);
  for (int64_t k = 0; k < C * D; k++)
    cr_assert_eq(bits(embed[k]), bits(vqc_vq_embed(&vq)[k]), "embed %lld",
                 (long long)k);

  /* gather */
  std::vector<float> quant(M * D, NAN);
  const float *Ep = vqc_vq_embed(&vq);
  float *qp = quant.data();
  bad = ~0ULL;
  emu_launch(5, EW_THREADS,
             [&] { gather_kernel(Ep, C, D, ip, M, qp, bp); });
  cr_assert_eq(bad, ~0ULL);
  for (int64_t k = 0; k < M * D; k++)
    cr_assert_eq(bits(quant[k]), bits(Ep[idx[k / D] * D + k % D]));
  vqc_vq_free(&vq);
}

/* ---- the nccl backend's float sums in rank order */

/* Each rank's block is its row of `blocks`; the threads backend reduces it
 * in rank order, which is the definition comm.h gives. */
struct rank_sum_case {
  const std::vector<float> *blocks; /* (P, n) */
  size_t n;
  std::vector<float> *out; /* (P, n): what each rank received */
};
static vqc_status rank_sum_body(vqc_comm *c, void *arg) {
  rank_sum_case *k = (rank_sum_case *)arg;
  const int r = vqc_comm_rank(c);
  const float *mine = k->blocks->data() + (size_t)r * k->n;
  float *got = k->out->data() + (size_t)r * k->n;
  return vqc_all_reduce(c, mine, got, k->n, VQC_F32, VQC_SUM);
}

/* For 1-4 ranks: the kernel's sum of gathered blocks equals, bit for bit,
 * what every rank of a threads world gets from all_reduce(SUM) of the same
 * blocks; values of mixed magnitude and sign, so another order would round
 * differently (checked: the reverse order differs somewhere for P >= 3). */
Test(kernels_emulated, rank_sum_equals_threads_backend) {
  const size_t n = 777;
  uint64_t s = 5;
  for (int P = 1; P <= 4; P++) {
    std::vector<float> blocks((size_t)P * n);
    for (auto &v : blocks)
      v = normal(&s) * ldexpf(1.0f, (int)(splitmix(&s) % 48) - 24);
    std::vector<float> threads_out((size_t)P * n, NAN);
    rank_sum_case k = {&blocks, n, &threads_out};
    cr_assert_eq(vqc_threads_run(P, 10.0, rank_sum_body, &k, NULL), VQC_OK,
                 "%s", vqc_last_error());
    std::vector<float> got(n, NAN);
    const float *gp = blocks.data();
    float *op = got.data();
    emu_launch(2, RANK_SUM_THREADS,
               [&] { rank_sum_kernel<float>(gp, P, n, op); });
    int reverse_differs = 0;
    for (size_t i = 0; i < n; i++) {
      for (int r = 0; r < P; r++)
        cr_assert_eq(bits(got[i]), bits(threads_out[(size_t)r * n + i]),
                     "P %d, element %zu, rank %d", P, i, r);
      float rev = blocks[(size_t)(P - 1) * n + i];
      for (int r = P - 2; r >= 0; r--) rev += blocks[(size_t)r * n + i];
      reverse_differs += bits(rev) != bits(got[i]);
    }
    if (P >= 3) cr_expect_gt(reverse_differs, 0, "P %d: inputs too tame", P);
  }
  /* double: the same order */
  std::vector<double> g = {1e16, 1.0, -1e16, 1.0}, out(1, NAN);
  const double *gdp = g.data();
  double *odp = out.data();
  emu_launch(1, 32, [&] { rank_sum_kernel<double>(gdp, 4, 1, odp); });
  cr_expect_eq(out[0], 1.0, "((1e16 + 1) - 1e16) + 1 in rank order is 1");
}

/* ---- pointer checks of the wrappers (gpu_internal.h) */

/* A stand-in for cudaPointerGetAttributes: [dev_lo, dev_hi) is "device"
 * memory, [man_lo, man_hi) "managed", anything else host memory that CUDA
 * does not know (cudaMemoryTypeUnregistered, as CUDA 11+ answers). */
static const char *dev_lo, *dev_hi, *man_lo, *man_hi;
static cudaError_t fake_attrs(cudaPointerAttributes *a, const void *p) {
  const char *c = (const char *)p;
  memset(a, 0, sizeof *a);
  if (c >= dev_lo && c < dev_hi) a->type = cudaMemoryTypeDevice;
  else if (c >= man_lo && c < man_hi) a->type = cudaMemoryTypeManaged;
  else a->type = cudaMemoryTypeUnregistered;
  return cudaSuccess;
}
static cudaError_t failing_attrs(cudaPointerAttributes *a, const void *p) {
  (void)a, (void)p;
  return cudaErrorInvalidValue;
}

Test(kernels_emulated, pointer_checks_name_the_argument) {
  /* Heap blocks: the "past the allocation" case points beyond one. */
  std::vector<char> dev_block(4096), man_block(64), host_block(64);
  char *device = dev_block.data(), *managed = man_block.data(),
       *host = host_block.data();
  dev_lo = device, dev_hi = device + dev_block.size();
  man_lo = managed, man_hi = managed + man_block.size();
  cr_expect_eq(vqc_gpu_classify_ptr(fake_attrs, "f", "x", device, 4096),
               VQC_OK);
  cr_expect_eq(vqc_gpu_classify_ptr(fake_attrs, "f", "x", managed, 64),
               VQC_OK);
  cr_expect_eq(vqc_gpu_classify_ptr(fake_attrs, "f", "x", NULL, 0), VQC_OK,
               "no bytes: nothing to check");
  cr_expect_eq(vqc_gpu_classify_ptr(fake_attrs, "gpu lerp", "b", host, 16),
               VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "gpu lerp: b") &&
                strstr(vqc_last_error(), "host memory"),
            "message: %s", vqc_last_error());
  cr_expect_eq(vqc_gpu_classify_ptr(fake_attrs, "f", "E", NULL, 8),
               VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "f: E is NULL"), "message: %s",
            vqc_last_error());
  /* a device buffer whose size runs past the allocation */
  cr_expect_eq(vqc_gpu_classify_ptr(fake_attrs, "f", "sums", device + 4000,
                                    200),
               VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "sums") &&
                strstr(vqc_last_error(), "past the allocation"),
            "message: %s", vqc_last_error());
  cr_expect_eq(vqc_gpu_classify_ptr(failing_attrs, "f", "z", device, 4),
               VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "f: z") &&
                strstr(vqc_last_error(), "not CUDA memory"),
            "message: %s", vqc_last_error());
}
