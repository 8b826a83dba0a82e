/* test_rng.c: unit tests for vqc/rng.h: Philox known answers, the stream
 * layout, seek/replay, the exact bit construction of every distribution, and
 * statistical sanity checks.
 *
 * Every statistical test uses a fixed seed, so its outcome is fixed: the
 * bounds are loose (about 5 standard errors or more) only so that a future
 * change of seed would not need new bounds, never to absorb flakiness. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/rng.h"
#include "vqc/status.h"

/* ---- Philox-4x32-10 known answers ---- */

/* The three "philox4x32 10" lines of Random123's tests/kat_vectors
 * (D. E. Shaw Research, https://github.com/DEShawResearch/random123), also
 * repeated as the philox4x32_prf<10> cases of its C++ known-answer test.
 * Format there: counter words 0-3, key words 0-1, expected output 0-3. */
static const struct {
  uint32_t ctr[4], key[2], out[4];
} KAT[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

Test(rng, philox_known_answers) {
  for (size_t v = 0; v < sizeof KAT / sizeof KAT[0]; v++) {
    uint32_t out[4];
    vqc_philox4x32_10(KAT[v].ctr, KAT[v].key, out);
    for (int i = 0; i < 4; i++)
      cr_assert_eq(out[i], KAT[v].out[i], "vector %zu word %d: %08x != %08x",
                   v, i, out[i], KAT[v].out[i]);
  }
}

/* ---- layout: word n = lane n % 4 of block n / 4 ---- */

static uint32_t expected_word(uint64_t seed, uint64_t stream, uint64_t n) {
  uint64_t block = n / 4;
  const uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32),
                           (uint32_t)stream, (uint32_t)(stream >> 32)};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t out[4];
  vqc_philox4x32_10(ctr, key, out);
  return out[n % 4];
}

Test(rng, stream_layout_matches_philox_blocks) {
  const uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull;
  vqc_rng r;
  vqc_rng_init(&r, seed, stream);
  cr_assert_eq(r.position, 0);
  for (uint64_t n = 0; n < 13; n++)
    cr_assert_eq(vqc_rng_u32(&r), expected_word(seed, stream, n), "word %llu",
                 (unsigned long long)n);
  cr_assert_eq(r.position, 13);
  /* A block number above 2^32 exercises the counter's high word. */
  const uint64_t far = (1ull << 34) + 5; /* block 2^32 + 1, lane 1 */
  vqc_rng_seek(&r, far);
  cr_assert_eq(vqc_rng_u32(&r), expected_word(seed, stream, far));
  cr_assert_eq(vqc_rng_u32(&r), expected_word(seed, stream, far + 1));
}

Test(rng, u64_is_low_word_then_high_word) {
  vqc_rng r;
  vqc_rng_init(&r, 7, 9);
  vqc_rng_seek(&r, 3); /* straddles a block boundary */
  uint64_t x = vqc_rng_u64(&r);
  cr_assert_eq(r.position, 5);
  uint64_t want = (uint64_t)expected_word(7, 9, 3) |
                  ((uint64_t)expected_word(7, 9, 4) << 32);
  cr_assert_eq(x, want);
}

/* ---- seek and replay ---- */

Test(rng, copy_reinit_and_seek_replay) {
  enum { N = 100 };
  uint32_t ref[N];
  vqc_rng r;
  vqc_rng_init(&r, 42, 5);
  for (int i = 0; i < N; i++) ref[i] = vqc_rng_u32(&r);

  vqc_rng again;
  vqc_rng_init(&again, 42, 5);
  for (int i = 0; i < 10; i++) cr_assert_eq(vqc_rng_u32(&again), ref[i]);
  vqc_rng fork = again; /* a copy continues the same sequence */
  for (int i = 10; i < N; i++) {
    cr_assert_eq(vqc_rng_u32(&fork), ref[i]);
    cr_assert_eq(vqc_rng_u32(&again), ref[i]);
  }

  const uint64_t starts[] = {0, 1, 3, 4, 5, 37, 99};
  for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
    vqc_rng t;
    vqc_rng_init(&t, 42, 5);
    vqc_rng_seek(&t, starts[s]);
    for (uint64_t i = starts[s]; i < N; i++)
      cr_assert_eq(vqc_rng_u32(&t), ref[i], "seek %llu, word %llu",
                   (unsigned long long)starts[s], (unsigned long long)i);
  }
}

Test(rng, seek_replays_distribution_fills) {
  vqc_rng r;
  vqc_rng_init(&r, 1234, vqc_rng_stream_for(3, VQC_RNG_TEST, 1));
  float a[37], b[37];
  vqc_rng_seek(&r, 1000);
  vqc_rng_normal(&r, a, 37, 0.0f, 1.0f);
  vqc_rng_seek(&r, 1000);
  vqc_rng_normal(&r, b, 37, 0.0f, 1.0f);
  cr_assert(memcmp(a, b, sizeof a) == 0);
  vqc_rng_seek(&r, 77);
  vqc_rng_uniform(&r, a, 37, -2.0f, 3.0f);
  vqc_rng_seek(&r, 77);
  vqc_rng_uniform(&r, b, 37, -2.0f, 3.0f);
  cr_assert(memcmp(a, b, sizeof a) == 0);
}

Test(rng, words_consumed_per_draw) {
  vqc_rng r;
  vqc_rng_init(&r, 1, 2);
  float buf[9];
  int64_t k;
  vqc_rng_u32(&r);
  cr_assert_eq(r.position, 1);
  vqc_rng_u64(&r);
  cr_assert_eq(r.position, 3);
  vqc_rng_uniform_f32(&r);
  cr_assert_eq(r.position, 4);
  vqc_rng_uniform_f64(&r);
  cr_assert_eq(r.position, 6);
  vqc_rng_uniform(&r, buf, 9, 0.0f, 1.0f);
  cr_assert_eq(r.position, 15);
  vqc_rng_normal(&r, buf, 9, 0.0f, 1.0f); /* 5 pairs, 4 words each */
  cr_assert_eq(r.position, 35);
  vqc_rng_normal(&r, buf, 8, 0.0f, 1.0f);
  cr_assert_eq(r.position, 51);
  cr_assert_eq(vqc_rng_binomial(&r, 0, 0.5, &k), VQC_OK);
  cr_assert_eq(vqc_rng_binomial(&r, 10, 0.0, &k), VQC_OK);
  cr_assert_eq(vqc_rng_binomial(&r, 10, 1.0, &k), VQC_OK);
  cr_assert_eq(r.position, 51, "degenerate binomials draw nothing");
}

/* ---- streams ---- */

Test(rng, distinct_streams_and_seeds_differ) {
  vqc_rng a, b, c;
  vqc_rng_init(&a, 100, 0);
  vqc_rng_init(&b, 100, 1);
  vqc_rng_init(&c, 101, 0);
  int same_ab = 0, same_ac = 0;
  for (int i = 0; i < 64; i++) {
    uint32_t x = vqc_rng_u32(&a);
    same_ab += x == vqc_rng_u32(&b);
    same_ac += x == vqc_rng_u32(&c);
  }
  /* Equal words happen with chance 2^-32 each; these fixed seeds have none. */
  cr_assert_eq(same_ab, 0);
  cr_assert_eq(same_ac, 0);
}

Test(rng, stream_for_differs_in_each_argument) {
  const uint64_t base = vqc_rng_stream_for(10, VQC_RNG_DATA, 2);
  cr_assert_neq(base, vqc_rng_stream_for(11, VQC_RNG_DATA, 2));
  cr_assert_neq(base, vqc_rng_stream_for(10, VQC_RNG_INIT, 2));
  cr_assert_neq(base, vqc_rng_stream_for(10, VQC_RNG_DATA, 3));
  cr_assert_neq(base, vqc_rng_stream_for(10, VQC_RNG_DATA, -1));
  cr_assert_neq(vqc_rng_stream_for(0, VQC_RNG_TEST, -1),
                vqc_rng_stream_for(0, VQC_RNG_TEST, 0));
  cr_assert_eq(base, vqc_rng_stream_for(10, VQC_RNG_DATA, 2), "pure function");
  /* Pinned values (computed independently in Python from the formula in
   * rng.c): stream ids define recorded runs, so they must never change. */
  cr_assert_eq(vqc_rng_stream_for(0, VQC_RNG_TEST, -1), 0x054cb424c0915551ull);
  cr_assert_eq(vqc_rng_stream_for(12345, VQC_RNG_DEAD_CODE, 3),
               0x7423645ed445a074ull);
  /* No collisions across a small grid of triples. */
  enum { STEPS = 8, PURPOSES = 7, RANKS = 5 };
  static uint64_t ids[STEPS * PURPOSES * RANKS];
  int n = 0;
  for (uint64_t s = 0; s < STEPS; s++)
    for (int p = 1; p <= PURPOSES; p++)
      for (int k = -1; k < RANKS - 1; k++)
        ids[n++] = vqc_rng_stream_for(s, (vqc_rng_purpose)p, k);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) cr_assert_neq(ids[i], ids[j]);
}

/* ---- uniform ---- */

Test(rng, uniform_exact_bit_construction) {
  vqc_rng r, w;
  vqc_rng_init(&r, 99, 3);
  for (int i = 0; i < 200; i++) {
    w = r;
    uint32_t word = vqc_rng_u32(&w);
    float f = vqc_rng_uniform_f32(&r);
    cr_assert_eq(f, (float)(word >> 8) / 16777216.0f);
    cr_assert(f >= 0.0f && f < 1.0f);

    w = r;
    uint32_t lo = vqc_rng_u32(&w), hi = vqc_rng_u32(&w);
    double d = vqc_rng_uniform_f64(&r);
    uint64_t bits53 = (((uint64_t)hi << 32) | lo) >> 11;
    cr_assert_eq(d, (double)bits53 / 9007199254740992.0);
    cr_assert(d >= 0.0 && d < 1.0);
  }
}

Test(rng, uniform_fill_range_and_values) {
  vqc_rng r, w;
  vqc_rng_init(&r, 5, 6);
  w = r;
  float out[1000];
  vqc_rng_uniform(&r, out, 1000, -3.0f, 5.0f);
  for (int i = 0; i < 1000; i++) {
    double u = (double)(vqc_rng_u32(&w) >> 8) / 16777216.0;
    cr_assert_eq(out[i], (float)(-3.0 + 8.0 * u));
    cr_assert(out[i] >= -3.0f && out[i] < 5.0f);
  }
  /* [1, next float after 1): half of the draws would round up to hi, so
   * every output must be exactly 1 for the interval to stay half-open. */
  const float hi = nextafterf(1.0f, 2.0f);
  vqc_rng_uniform(&r, out, 1000, 1.0f, hi);
  for (int i = 0; i < 1000; i++) cr_assert_eq(out[i], 1.0f, "index %d", i);
}

/* Pearson chi-square of `count` draws in [0, 1) over 100 equal bins.
 * 99 degrees of freedom: mean 99, sd 14; the bound 99 + 6 sd = 183. */
static double chi_square_100_bins(const double *x, int count) {
  int bins[100] = {0};
  for (int i = 0; i < count; i++) bins[(int)(x[i] * 100.0)]++;
  double expected = count / 100.0, chi2 = 0.0;
  for (int b = 0; b < 100; b++)
    chi2 += (bins[b] - expected) * (bins[b] - expected) / expected;
  return chi2;
}

Test(rng, uniform_chi_square) {
  enum { N = 100000 };
  static double x[N];
  static float f[N];
  vqc_rng r;
  vqc_rng_init(&r, 2024, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  for (int i = 0; i < N; i++) x[i] = vqc_rng_uniform_f32(&r);
  double c32 = chi_square_100_bins(x, N);
  for (int i = 0; i < N; i++) x[i] = vqc_rng_uniform_f64(&r);
  double c64 = chi_square_100_bins(x, N);
  vqc_rng_uniform(&r, f, N, 0.0f, 1.0f);
  for (int i = 0; i < N; i++) x[i] = f[i];
  double cfill = chi_square_100_bins(x, N);
  cr_assert(c32 < 183.0, "f32 chi2 %g", c32);
  cr_assert(c64 < 183.0, "f64 chi2 %g", c64);
  cr_assert(cfill < 183.0, "fill chi2 %g", cfill);
}

/* ---- normal ---- */

Test(rng, normal_is_box_muller_pairs_in_order) {
  vqc_rng r, w;
  vqc_rng_init(&r, 31, 4);
  w = r;
  float out[6];
  vqc_rng_normal(&r, out, 6, 1.5f, 2.0f);
  for (int pair = 0; pair < 3; pair++) {
    double u1 = vqc_rng_uniform_f64(&w), u2 = vqc_rng_uniform_f64(&w);
    double radius = sqrt(-2.0 * log(1.0 - u1));
    double theta = 6.283185307179586 * u2;
    cr_assert_eq(out[2 * pair], (float)(1.5 + 2.0 * (radius * cos(theta))));
    cr_assert_eq(out[2 * pair + 1], (float)(1.5 + 2.0 * (radius * sin(theta))));
  }

  /* A fill of 2m values equals m fills of 2 from the same position, and an
   * odd fill is the prefix of the next even one. */
  float whole[10], pieces[10], odd[9];
  vqc_rng_seek(&r, 400);
  vqc_rng_normal(&r, whole, 10, 0.0f, 1.0f);
  vqc_rng_seek(&r, 400);
  for (int i = 0; i < 10; i += 2) vqc_rng_normal(&r, pieces + i, 2, 0.0f, 1.0f);
  cr_assert(memcmp(whole, pieces, sizeof whole) == 0);
  vqc_rng_seek(&r, 400);
  vqc_rng_normal(&r, odd, 9, 0.0f, 1.0f);
  cr_assert(memcmp(whole, odd, sizeof odd) == 0);
}

Test(rng, normal_moments) {
  enum { N = 200000 };
  static float x[N];
  vqc_rng r;
  vqc_rng_init(&r, 777, vqc_rng_stream_for(1, VQC_RNG_TEST, -1));
  vqc_rng_normal(&r, x, N, 3.0f, 2.0f);
  double sum = 0.0, sq = 0.0;
  int beyond_4sd = 0;
  for (int i = 0; i < N; i++) {
    sum += x[i];
    sq += (x[i] - 3.0) * (x[i] - 3.0);
    beyond_4sd += fabs(x[i] - 3.0) > 8.0;
  }
  double mean = sum / N, sd = sqrt(sq / N);
  /* Standard errors: mean 2/sqrt(N) = 0.0045, sd 2/sqrt(2N) = 0.0032. */
  cr_assert(fabs(mean - 3.0) < 0.03, "mean %g", mean);
  cr_assert(fabs(sd - 2.0) < 0.02, "sd %g", sd);
  /* P(|z| > 4) = 6.3e-5, about 13 of 200000: tails exist but are rare. */
  cr_assert(beyond_4sd >= 1 && beyond_4sd < 40, "beyond 4 sd: %d", beyond_4sd);
}

/* ---- randint and randperm ---- */

Test(rng, randint_is_mask_and_reject) {
  vqc_rng r, w;
  vqc_rng_init(&r, 8, 8);
  w = r;
  /* Range 5 -> mask 7; accepted words are those with (word & 7) < 5. */
  for (int i = 0; i < 500; i++) {
    int64_t got = vqc_rng_randint(&r, -10, -5);
    uint32_t x;
    do x = vqc_rng_u32(&w) & 7u; while (x >= 5);
    cr_assert_eq(got, -10 + (int64_t)x);
    cr_assert_eq(r.position, w.position);
  }
  /* Range 3 * 2^32 > 2^32: two words per attempt, mask 2^34 - 1. */
  const uint64_t range = 3ull << 32;
  for (int i = 0; i < 200; i++) {
    int64_t got = vqc_rng_randint(&r, 1000, 1000 + (int64_t)range);
    uint64_t x;
    do x = vqc_rng_u64(&w) & ((1ull << 34) - 1); while (x >= range);
    cr_assert_eq(got, 1000 + (int64_t)x);
  }
}

Test(rng, randint_ranges) {
  vqc_rng r;
  vqc_rng_init(&r, 3, 1);
  cr_assert_eq(vqc_rng_randint(&r, 7, 7), 7);
  cr_assert_eq(vqc_rng_randint(&r, 7, 3), 7);
  cr_assert_eq(r.position, 0, "empty ranges draw nothing");
  for (int i = 0; i < 1000; i++) cr_assert_eq(vqc_rng_randint(&r, 4, 5), 4);
  int negatives = 0;
  for (int i = 0; i < 1000; i++) {
    int64_t x = vqc_rng_randint(&r, INT64_MIN, INT64_MAX);
    cr_assert(x < INT64_MAX);
    negatives += x < 0;
  }
  /* Binomial(1000, 1/2): mean 500, sd 16. */
  cr_assert(negatives > 400 && negatives < 600, "negatives %d", negatives);
  for (int i = 0; i < 1000; i++) {
    int64_t x = vqc_rng_randint(&r, -1000000007, 999999999999);
    cr_assert(x >= -1000000007 && x < 999999999999);
  }
}

Test(rng, randint_unbiased_small_range) {
  /* Range 3 is the worst case for a plain modulo (2^32 mod 3 = 1). 60000
   * draws: each count has mean 20000 and sd 115; bound 5 sd. */
  vqc_rng r;
  vqc_rng_init(&r, 11, vqc_rng_stream_for(2, VQC_RNG_TEST, -1));
  int counts[3] = {0};
  for (int i = 0; i < 60000; i++) counts[vqc_rng_randint(&r, 0, 3)]++;
  for (int v = 0; v < 3; v++)
    cr_assert(abs(counts[v] - 20000) < 580, "value %d: %d", v, counts[v]);
}

Test(rng, randperm_is_fisher_yates_permutation) {
  enum { N = 1000 };
  static int64_t perm[N];
  static int seen[N];
  vqc_rng r, w;
  vqc_rng_init(&r, 21, 22);
  w = r;
  vqc_rng_randperm(&r, N, perm);
  for (int i = 0; i < N; i++) {
    cr_assert(perm[i] >= 0 && perm[i] < N);
    cr_assert_eq(seen[perm[i]]++, 0, "duplicate %lld", (long long)perm[i]);
  }
  /* Replays Fisher-Yates from the back with randint on a copy. */
  static int64_t want[N];
  for (int i = 0; i < N; i++) want[i] = i;
  for (int i = N - 1; i > 0; i--) {
    int64_t j = vqc_rng_randint(&w, 0, i + 1), t = want[i];
    want[i] = want[j];
    want[j] = t;
  }
  cr_assert(memcmp(perm, want, sizeof perm) == 0);
  cr_assert_eq(r.position, w.position);

  int64_t one = -5;
  vqc_rng_randperm(&r, 1, &one);
  cr_assert_eq(one, 0);
  vqc_rng_randperm(&r, 0, NULL); /* nothing to do, must not crash */
}

Test(rng, randperm_uniform_over_small_n) {
  /* 6 permutations of 3, 6000 draws: mean 1000 each, sd 29; bound 6 sd. */
  vqc_rng r;
  vqc_rng_init(&r, 5150, vqc_rng_stream_for(3, VQC_RNG_TEST, -1));
  int counts[27] = {0};
  for (int i = 0; i < 6000; i++) {
    int64_t p[3];
    vqc_rng_randperm(&r, 3, p);
    counts[p[0] * 9 + p[1] * 3 + p[2]]++;
  }
  const int valid[6] = {0 * 9 + 1 * 3 + 2, 0 * 9 + 2 * 3 + 1,
                        1 * 9 + 0 * 3 + 2, 1 * 9 + 2 * 3 + 0,
                        2 * 9 + 0 * 3 + 1, 2 * 9 + 1 * 3 + 0};
  int total = 0;
  for (int v = 0; v < 6; v++) {
    cr_assert(abs(counts[valid[v]] - 1000) < 175, "perm %d: %d", valid[v],
              counts[valid[v]]);
    total += counts[valid[v]];
  }
  cr_assert_eq(total, 6000);
}

/* ---- binomial ---- */

Test(rng, binomial_edge_cases_and_errors) {
  vqc_rng r;
  vqc_rng_init(&r, 1, 1);
  int64_t k = -1;
  cr_assert_eq(vqc_rng_binomial(&r, 0, 0.3, &k), VQC_OK);
  cr_assert_eq(k, 0);
  cr_assert_eq(vqc_rng_binomial(&r, 50, 0.0, &k), VQC_OK);
  cr_assert_eq(k, 0);
  cr_assert_eq(vqc_rng_binomial(&r, 50, 1.0, &k), VQC_OK);
  cr_assert_eq(k, 50);
  cr_assert_eq(vqc_rng_binomial(&r, 1, 0.5, &k), VQC_OK);
  cr_assert(k == 0 || k == 1);

  vqc_clear_error();
  k = 1234;
  cr_assert_eq(vqc_rng_binomial(&r, -1, 0.5, &k), VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "binomial") != NULL, "%s",
            vqc_last_error());
  cr_assert_eq(vqc_rng_binomial(&r, 10, -0.1, &k), VQC_EINVAL);
  cr_assert_eq(vqc_rng_binomial(&r, 10, 1.5, &k), VQC_EINVAL);
  cr_assert_eq(vqc_rng_binomial(&r, 10, NAN, &k), VQC_EINVAL);
  cr_assert_eq(vqc_rng_binomial(&r, 10, 0.5, NULL), VQC_EINVAL);
  cr_assert_eq(vqc_rng_binomial(NULL, 10, 0.5, &k), VQC_EINVAL);
  cr_assert_eq(k, 1234, "out untouched on error");
}

Test(rng, binomial_symmetry_is_exact) {
  /* p = 0.75 is drawn as n - Binomial(n, 0.25) from the same words, for both
   * algorithms (n p' = 5 uses inversion, 2500 uses BTRD). */
  const int64_t ns[2] = {20, 10000};
  for (int c = 0; c < 2; c++) {
    vqc_rng a, b;
    vqc_rng_init(&a, 606, 1);
    b = a;
    for (int i = 0; i < 200; i++) {
      int64_t x, y;
      cr_assert_eq(vqc_rng_binomial(&a, ns[c], 0.75, &x), VQC_OK);
      cr_assert_eq(vqc_rng_binomial(&b, ns[c], 0.25, &y), VQC_OK);
      cr_assert_eq(x, ns[c] - y);
    }
  }
}

/* Draws `count` samples of Binomial(n, p) with a fixed seed and checks the
 * sample mean and variance against n p and n p q, within 6 standard errors
 * (mean: sqrt(npq / count); variance: about npq sqrt(2 / count)). */
static void check_binomial_moments(int64_t n, double p, int count) {
  vqc_rng r;
  vqc_rng_init(&r, 4242, vqc_rng_stream_for((uint64_t)n, VQC_RNG_TEST, -1));
  double sum = 0.0, sq = 0.0;
  for (int i = 0; i < count; i++) {
    int64_t k;
    cr_assert_eq(vqc_rng_binomial(&r, n, p, &k), VQC_OK);
    cr_assert(k >= 0 && k <= n, "n %lld p %g: k %lld", (long long)n, p,
              (long long)k);
    sum += (double)k;
    sq += (double)k * (double)k;
  }
  const double mean = sum / count, var = sq / count - mean * mean;
  const double npq = (double)n * p * (1.0 - p);
  const double mean_se = sqrt(npq / count), var_se = npq * sqrt(2.0 / count);
  cr_assert(fabs(mean - (double)n * p) < 6.0 * mean_se + 1e-9,
            "n %lld p %g: mean %.6g, want %.6g", (long long)n, p, mean,
            (double)n * p);
  cr_assert(fabs(var - npq) < 6.0 * var_se + 1e-9,
            "n %lld p %g: variance %.6g, want %.6g", (long long)n, p, var, npq);
}

Test(rng, binomial_moments_inversion) {
  check_binomial_moments(20, 0.3, 20000);            /* n p = 6 */
  check_binomial_moments(1000, 0.01, 20000);         /* n p = 10 */
  check_binomial_moments(59, 0.5, 20000);            /* n p = 29.5 */
  check_binomial_moments(50, 0.9, 20000);            /* flipped, 5 */
  check_binomial_moments(1000000000000, 1e-11, 20000); /* huge n, n p = 10 */
}

Test(rng, binomial_moments_btrd) {
  check_binomial_moments(60, 0.5, 20000);         /* n p = 30 */
  check_binomial_moments(1000, 0.4, 20000);       /* n p = 400 */
  check_binomial_moments(100, 0.7, 20000);        /* flipped, 30 */
  check_binomial_moments(1000000000, 0.5, 20000); /* sd 15811 */
}

/* ln of the Binomial(n, p) pmf at k, in double through lgamma. */
static double log_pmf(int64_t n, double p, int64_t k) {
  return lgamma((double)n + 1.0) - lgamma((double)k + 1.0) -
         lgamma((double)(n - k) + 1.0) + (double)k * log(p) +
         (double)(n - k) * log1p(-p);
}

/* Pearson chi-square of `count` fixed-seed samples against the exact pmf.
 * Consecutive k are pooled into bins of expected count >= 20 (tails
 * included), so the statistic is close to chi-square with bins - 1 degrees
 * of freedom; the bound dof + 6 sqrt(2 dof) + 10 is far in its tail.
 * Checked by mutation: a wrong recurrence, squeeze or inversion step, or the
 * wrong algorithm for the regime, gives chi2 from ~90 to 10^5; an acceptance
 * test off by under 1% (e.g. one dropped Stirling term) is below what 400000
 * samples can see. */
static void check_binomial_pmf(int64_t n, double p, int count) {
  int64_t *hist = calloc((size_t)n + 1, sizeof *hist);
  double *tail = calloc((size_t)n + 2, sizeof *tail); /* expected at >= k */
  cr_assert(hist != NULL && tail != NULL);
  vqc_rng r;
  vqc_rng_init(&r, 90210, vqc_rng_stream_for((uint64_t)n, VQC_RNG_TEST, 7));
  for (int i = 0; i < count; i++) {
    int64_t k;
    cr_assert_eq(vqc_rng_binomial(&r, n, p, &k), VQC_OK);
    hist[k]++;
  }
  for (int64_t k = n; k >= 0; k--)
    tail[k] = tail[k + 1] + count * exp(log_pmf(n, p, k));
  double chi2 = 0.0, expected = 0.0, observed = 0.0;
  int bins = 0;
  for (int64_t k = 0; k <= n; k++) {
    expected += tail[k] - tail[k + 1];
    observed += (double)hist[k];
    /* Close the bin when it is big enough and what is left can still make
     * one; otherwise the rest joins this bin. */
    if (k == n || (expected >= 20.0 && tail[k + 1] >= 20.0)) {
      chi2 += (observed - expected) * (observed - expected) / expected;
      bins++;
      expected = observed = 0.0;
    }
  }
  free(hist);
  free(tail);
  const double dof = bins - 1;
  cr_assert(bins >= 5, "too few bins (%d) for n %lld", bins, (long long)n);
  cr_assert(chi2 < dof + 6.0 * sqrt(2.0 * dof) + 10.0,
            "n %lld p %g: chi2 %.1f with %d bins", (long long)n, p, chi2, bins);
}

Test(rng, binomial_matches_exact_pmf) {
  check_binomial_pmf(40, 0.5, 400000);     /* inversion, n p = 20 */
  check_binomial_pmf(1000, 0.002, 400000); /* inversion, n p = 2 */
  check_binomial_pmf(25, 0.8, 400000);     /* inversion through symmetry */
  check_binomial_pmf(60, 0.5, 400000);     /* BTRD, mostly |k - m| <= 15 */
  check_binomial_pmf(200, 0.35, 400000);   /* BTRD, sd 6.7 */
  check_binomial_pmf(5000, 0.3, 400000);   /* BTRD, sd 32: squeeze and 3.4 */
  check_binomial_pmf(1000, 0.97, 400000);  /* BTRD through symmetry */
}
