/* test_vq_nearest.c: the nearest-code kernels (lib/src/quant/vq_nearest.c)
 * against the scalar reference (vq_nearest_ref), bit for bit: indices
 * exactly, every distance by its bits. No tolerance anywhere: the kernels
 * run the reference's fmaf chains lane by lane, so any difference is a bug.
 *
 * Inputs: random shapes that are not multiples of the block sizes (rows 12
 * and 6, codes 32 and 16, including D = 1, C = 1, M = 0), small-integer data
 * where exact ties and the 1e-8 clamp occur on purpose, duplicate codes,
 * two codes whose squared distances differ but whose float32 distances are
 * equal (ties are decided after the sqrt), and non-finite rows. Each SIMD
 * kernel's tests skip where the CPU lacks it. The reference itself is
 * checked against its definition written out here with fmaf. The
 * bfloat16 screen (avx512bf16) runs these cases too; without distances it
 * screens, with them it is the AVX-512 kernel. Its own cases (near ties,
 * rows it sets apart) are in test_vq_nearest_screen.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant/vq_nearest.h"
#include "vqc/rng.h"
#include "vqc/vq.h"

static uint32_t to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  cr_assert_not_null(p, "out of memory (%zu bytes)", n);
  return p;
}

static void require(vq_kernel k) {
  if (!vq_kernel_available(k))
    cr_skip_test("this CPU cannot run the %s kernel", vq_kernel_name(k));
}

/* Runs kernel k and the reference on x (M, D), E (C, D), with and without
 * the distance output, and expects identical indices and distance bits.
 * Returns the reference's indices (caller frees) for further checks. */
static int64_t *expect_same_as_ref(vq_kernel k, const float *x, int64_t M,
                                   const float *E, int64_t C, int64_t D,
                                   const char *what) {
  int64_t *iref = xmalloc((size_t)M * sizeof(int64_t));
  int64_t *ik = xmalloc((size_t)M * sizeof(int64_t));
  int64_t *ik2 = xmalloc((size_t)M * sizeof(int64_t));
  float *dref = xmalloc((size_t)(M * C) * sizeof(float));
  float *dk = xmalloc((size_t)(M * C) * sizeof(float));
  /* A NaN payload no kernel produces: an unwritten distance shows up. */
  for (int64_t j = 0; j < M * C; j++) {
    const uint32_t marker = 0x7fc0beefu;
    memcpy(dk + j, &marker, sizeof marker);
  }
  cr_assert_eq(vq_nearest_with(VQ_KERNEL_SCALAR, x, M, E, C, D, iref, dref),
               VQC_OK, "%s: reference failed", what);
  cr_assert_eq(vq_nearest_with(k, x, M, E, C, D, ik, dk), VQC_OK,
               "%s: %s kernel failed", what, vq_kernel_name(k));
  cr_assert_eq(vq_nearest_with(k, x, M, E, C, D, ik2, NULL), VQC_OK);

  int64_t bad_idx = 0, bad_dist = 0, first = -1;
  for (int64_t i = 0; i < M; i++) {
    if (iref[i] != ik[i] || iref[i] != ik2[i]) {
      if (bad_idx++ == 0) first = i;
    }
    cr_assert(ik[i] >= 0 && ik[i] < C, "%s: index %lld outside [0, %lld)",
              what, (long long)ik[i], (long long)C);
  }
  int64_t first_d = -1;
  for (int64_t j = 0; j < M * C; j++)
    if (to_bits(dref[j]) != to_bits(dk[j]) && bad_dist++ == 0) first_d = j;
  cr_expect_eq(bad_idx, 0,
               "%s (M %lld, D %lld, C %lld), %s kernel: %lld of %lld indices "
               "differ; first row %lld: ref %lld, kernel %lld / %lld", what,
               (long long)M, (long long)D, (long long)C, vq_kernel_name(k),
               (long long)bad_idx, (long long)M, (long long)first,
               first >= 0 ? (long long)iref[first] : -1LL,
               first >= 0 ? (long long)ik[first] : -1LL,
               first >= 0 ? (long long)ik2[first] : -1LL);
  cr_expect_eq(bad_dist, 0,
               "%s (M %lld, D %lld, C %lld), %s kernel: %lld of %lld "
               "distances differ in their bits; first at %lld: ref 0x%08x, "
               "kernel 0x%08x", what, (long long)M, (long long)D,
               (long long)C, vq_kernel_name(k), (long long)bad_dist,
               (long long)(M * C), (long long)first_d,
               first_d >= 0 ? to_bits(dref[first_d]) : 0u,
               first_d >= 0 ? to_bits(dk[first_d]) : 0u);
  free(ik);
  free(ik2);
  free(dref);
  free(dk);
  return iref;
}

/* ---- random shapes */

static void random_shapes(vq_kernel k) {
  /* Around and away from the block sizes (rows 6/12, codes 16/32). */
  const int64_t Ms[] = {1, 5, 6, 7, 12, 13, 30};
  const int64_t Ds[] = {1, 2, 3, 16, 17, 64};
  const int64_t Cs[] = {1, 2, 7, 15, 16, 17, 31, 32, 33, 100};
  uint64_t seed = 1;
  for (size_t a = 0; a < sizeof Ms / sizeof Ms[0]; a++)
    for (size_t b = 0; b < sizeof Ds / sizeof Ds[0]; b++)
      for (size_t c = 0; c < sizeof Cs / sizeof Cs[0]; c++) {
        const int64_t M = Ms[a], D = Ds[b], C = Cs[c];
        float *x = xmalloc((size_t)(M * D) * sizeof(float));
        float *E = xmalloc((size_t)(C * D) * sizeof(float));
        vqc_rng r;
        vqc_rng_init(&r, seed++, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
        vqc_rng_normal(&r, x, M * D, 0.0f, 1.0f);
        vqc_rng_normal(&r, E, C * D, 0.0f, 1.0f);
        free(expect_same_as_ref(k, x, M, E, C, D, "random normal"));
        free(x);
        free(E);
      }
  /* One shape of the benchmark's proportions, with several row blocks. */
  const int64_t M = 100, D = 64, C = 1000;
  float *x = xmalloc((size_t)(M * D) * sizeof(float));
  float *E = xmalloc((size_t)(C * D) * sizeof(float));
  vqc_rng r;
  vqc_rng_init(&r, 99, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_uniform(&r, x, M * D, -1.0f, 1.0f);
  vqc_rng_uniform(&r, E, C * D, -1.0f, 1.0f);
  free(expect_same_as_ref(k, x, M, E, C, D, "random uniform, D 64"));
  free(x);
  free(E);
}

Test(vq_nearest_avx2, matches_the_reference_on_random_shapes) {
  require(VQ_KERNEL_AVX2);
  random_shapes(VQ_KERNEL_AVX2);
}

Test(vq_nearest_avx512, matches_the_reference_on_random_shapes) {
  require(VQ_KERNEL_AVX512);
  random_shapes(VQ_KERNEL_AVX512);
}

Test(vq_nearest_avx512bf16, matches_the_reference_on_random_shapes) {
  require(VQ_KERNEL_AVX512_BF16);
  random_shapes(VQ_KERNEL_AVX512_BF16);
}

/* ---- exact ties, duplicate codes and the clamp */

/* Entries in {-1, -0.5, 0, 0.5, 1}: every product and sum is exact, so
 * many codes lie at exactly the same distance from a row, and rows equal to
 * a code give a squared distance of 0, clamped to 1e-8. Some codes are
 * copies of earlier ones. Counts the rows where the minimum is shared by
 * several codes and the rows that hit the clamp, so the test can insist
 * that both happened. */
static void ties_and_clamp(vq_kernel k) {
  const int64_t M = 97, D = 3, C = 70;
  float *x = xmalloc((size_t)(M * D) * sizeof(float));
  float *E = xmalloc((size_t)(C * D) * sizeof(float));
  vqc_rng r;
  vqc_rng_init(&r, 7, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  for (int64_t j = 0; j < M * D; j++)
    x[j] = 0.5f * (float)vqc_rng_randint(&r, -2, 3);
  for (int64_t j = 0; j < C * D; j++)
    E[j] = 0.5f * (float)vqc_rng_randint(&r, -2, 3);
  /* Duplicates across lanes and panels: 40 = 3, 66 = 3, 33 = 1, 17 = 16;
   * and in the same lane of both vectors of a panel: 13 = 21 = 5 (lane 5
   * of vectors 0 and 1 with 8 lanes, and with 16 lanes). */
  memcpy(E + 40 * D, E + 3 * D, (size_t)D * sizeof(float));
  memcpy(E + 66 * D, E + 3 * D, (size_t)D * sizeof(float));
  memcpy(E + 33 * D, E + 1 * D, (size_t)D * sizeof(float));
  memcpy(E + 17 * D, E + 16 * D, (size_t)D * sizeof(float));
  memcpy(E + 13 * D, E + 5 * D, (size_t)D * sizeof(float));
  memcpy(E + 21 * D, E + 5 * D, (size_t)D * sizeof(float));
  /* Rows equal to those codes: the clamp, tied between the copies. */
  memcpy(x + 0 * D, E + 3 * D, (size_t)D * sizeof(float));
  memcpy(x + 1 * D, E + 16 * D, (size_t)D * sizeof(float));
  memcpy(x + 2 * D, E + 1 * D, (size_t)D * sizeof(float));
  memcpy(x + 3 * D, E + 5 * D, (size_t)D * sizeof(float));

  int64_t *idx = expect_same_as_ref(k, x, M, E, C, D, "small integers");
  cr_expect_eq(idx[0], 3, "row equal to codes 3, 40, 66: got %lld",
               (long long)idx[0]);
  cr_expect_eq(idx[1], 16, "row equal to codes 16, 17: got %lld",
               (long long)idx[1]);
  cr_expect_eq(idx[2], 1, "row equal to codes 1, 33: got %lld",
               (long long)idx[2]);
  cr_expect_eq(idx[3], 5, "row equal to codes 5, 13, 21: got %lld",
               (long long)idx[3]);

  /* How many rows had a shared minimum or the clamp (reference's view). */
  float *nd = xmalloc((size_t)(M * C) * sizeof(float));
  cr_assert_eq(vq_nearest_with(VQ_KERNEL_SCALAR, x, M, E, C, D, idx, nd),
               VQC_OK);
  int shared = 0, clamped = 0;
  for (int64_t i = 0; i < M; i++) {
    const float best = nd[i * C + idx[i]];
    int n = 0;
    for (int64_t c = 0; c < C; c++) {
      n += nd[i * C + c] == best;
      /* the lowest index among the ties */
      if (nd[i * C + c] == best)
        cr_expect_geq(c, idx[i], "row %lld: code %lld ties with the chosen "
                      "%lld but has a lower index", (long long)i,
                      (long long)c, (long long)idx[i]);
    }
    shared += n > 1;
    clamped += best == -sqrtf(VQC_VQ_DIST_CLAMP);
  }
  cr_expect_geq(shared, 20, "only %d rows with tied minima: the test lost "
                "its point", shared);
  cr_expect_geq(clamped, 3, "only %d clamped rows", clamped);
  free(nd);
  free(idx);
  free(x);
  free(E);
}

Test(vq_nearest_scalar, ties_go_to_the_lowest_index_and_the_clamp_ties) {
  ties_and_clamp(VQ_KERNEL_SCALAR);
}

Test(vq_nearest_avx2, ties_go_to_the_lowest_index_and_the_clamp_ties) {
  require(VQ_KERNEL_AVX2);
  ties_and_clamp(VQ_KERNEL_AVX2);
}

Test(vq_nearest_avx512, ties_go_to_the_lowest_index_and_the_clamp_ties) {
  require(VQ_KERNEL_AVX512);
  ties_and_clamp(VQ_KERNEL_AVX512);
}

Test(vq_nearest_avx512bf16, ties_go_to_the_lowest_index_and_the_clamp_ties) {
  require(VQ_KERNEL_AVX512_BF16);
  ties_and_clamp(VQ_KERNEL_AVX512_BF16);
}

/* ---- ties after the sqrt */

/* D = 2, x = (0, 0). Code A = (1, 0) has squared distance 1; code B =
 * (1, b) with b*b close to 2^-23 has fmaf(b, b, 1) = 1 + 2^-23, a different
 * squared distance, yet sqrtf(1 + 2^-23) = 1 = sqrtf(1): the distances tie,
 * so the lower index wins even though its squared distance is larger. A
 * kernel that compared squared distances would pick A. B is put before A in
 * the same lane, in another lane, and in another panel. */
static void sqrt_ties(vq_kernel k) {
  const float b = 0.000345f;
  cr_assert_eq(fmaf(b, b, 1.0f), 1.0f + 0x1p-23f, "test set-up");
  cr_assert_eq(sqrtf(1.0f + 0x1p-23f), 1.0f, "test set-up");
  const int64_t D = 2, C = 70;
  const int64_t pairs[][2] = {{0, 1}, {2, 34}, {5, 9}, {20, 69}, {31, 32}};
  const float x[2] = {0.0f, 0.0f};
  float *E = xmalloc((size_t)(C * D) * sizeof(float));
  for (size_t t = 0; t < sizeof pairs / sizeof pairs[0]; t++) {
    const int64_t ib = pairs[t][0], ia = pairs[t][1];
    for (int64_t c = 0; c < C; c++) { /* the others: distance > 2 */
      E[c * D] = 2.0f + (float)c;
      E[c * D + 1] = -1.0f;
    }
    E[ib * D] = 1.0f;
    E[ib * D + 1] = b;
    E[ia * D] = 1.0f;
    E[ia * D + 1] = 0.0f;
    int64_t *idx = expect_same_as_ref(k, x, 1, E, C, D, "sqrt tie");
    cr_expect_eq(idx[0], ib, "B at %lld, A at %lld: got %lld", (long long)ib,
                 (long long)ia, (long long)idx[0]);
    free(idx);
  }
  free(E);
}

Test(vq_nearest_scalar, ties_are_decided_after_the_sqrt) {
  sqrt_ties(VQ_KERNEL_SCALAR);
}

Test(vq_nearest_avx2, ties_are_decided_after_the_sqrt) {
  require(VQ_KERNEL_AVX2);
  sqrt_ties(VQ_KERNEL_AVX2);
}

Test(vq_nearest_avx512, ties_are_decided_after_the_sqrt) {
  require(VQ_KERNEL_AVX512);
  sqrt_ties(VQ_KERNEL_AVX512);
}

Test(vq_nearest_avx512bf16, ties_are_decided_after_the_sqrt) {
  require(VQ_KERNEL_AVX512_BF16);
  sqrt_ties(VQ_KERNEL_AVX512_BF16);
}

/* ---- non-finite rows */

/* inf and NaN in x. Row (inf, 0) against codes whose first coordinate is
 * negative: every real distance is inf (x2 = inf, dot = -inf), so the
 * reference answers 0; the padding codes past C would give NaN -> clamp
 * -> a small distance, so a kernel that forgot to mask them would answer
 * an index >= C. C = 5, 17 and 33 leave padding in the last panel. */
static void non_finite(vq_kernel k) {
  const int64_t Cs[] = {5, 17, 33};
  const int64_t M = 4, D = 2;
  const float x[] = {INFINITY, 0.0f, -INFINITY, 1.0f, NAN, 0.0f, 1.0f, 2.0f};
  for (size_t t = 0; t < sizeof Cs / sizeof Cs[0]; t++) {
    const int64_t C = Cs[t];
    float *E = xmalloc((size_t)(C * D) * sizeof(float));
    for (int64_t c = 0; c < C; c++) {
      E[c * D] = -1.0f - (float)c;
      E[c * D + 1] = 0.5f * (float)c;
    }
    int64_t *idx = expect_same_as_ref(k, x, M, E, C, D, "non-finite x");
    cr_expect_eq(idx[0], 0, "row (inf, 0): got %lld", (long long)idx[0]);
    free(idx);
    free(E);
  }
}

Test(vq_nearest_scalar, non_finite_rows_give_the_reference_answer) {
  non_finite(VQ_KERNEL_SCALAR);
}

Test(vq_nearest_avx2, non_finite_rows_give_the_reference_answer) {
  require(VQ_KERNEL_AVX2);
  non_finite(VQ_KERNEL_AVX2);
}

Test(vq_nearest_avx512, non_finite_rows_give_the_reference_answer) {
  require(VQ_KERNEL_AVX512);
  non_finite(VQ_KERNEL_AVX512);
}

Test(vq_nearest_avx512bf16, non_finite_rows_give_the_reference_answer) {
  require(VQ_KERNEL_AVX512_BF16);
  non_finite(VQ_KERNEL_AVX512_BF16);
}

/* A NaN squared distance is clamped to 1e-8 by the reference (fmaxf
 * returns the number), so it can win. Row (inf, 0) against codes whose
 * first coordinate is -1 (distance inf), except code 40, whose first
 * coordinate is 0: inf * 0 makes its dot product NaN, its distance
 * sqrt(1e-8), and it is the answer. A kernel whose screen let only
 * d2 < row_min through would drop the NaN lane and answer 0. Code 40 is in
 * the third AVX2 panel and the second AVX-512 one; C = 70 pads the last. */
static void nan_distance_wins(vq_kernel k) {
  const int64_t M = 2, C = 70, D = 2;
  const float x[] = {INFINITY, 0.0f, 0.5f, 0.5f};
  float *E = xmalloc((size_t)(C * D) * sizeof(float));
  for (int64_t c = 0; c < C; c++) {
    E[c * D] = c == 40 ? 0.0f : -1.0f;
    E[c * D + 1] = 0.25f * (float)c;
  }
  int64_t *idx = expect_same_as_ref(k, x, M, E, C, D, "NaN distance");
  cr_expect_eq(idx[0], 40, "row (inf, 0): got %lld", (long long)idx[0]);
  free(idx);
  free(E);
}

Test(vq_nearest_scalar, a_nan_distance_is_clamped_and_wins) {
  nan_distance_wins(VQ_KERNEL_SCALAR);
}

Test(vq_nearest_avx2, a_nan_distance_is_clamped_and_wins) {
  require(VQ_KERNEL_AVX2);
  nan_distance_wins(VQ_KERNEL_AVX2);
}

Test(vq_nearest_avx512, a_nan_distance_is_clamped_and_wins) {
  require(VQ_KERNEL_AVX512);
  nan_distance_wins(VQ_KERNEL_AVX512);
}

Test(vq_nearest_avx512bf16, a_nan_distance_is_clamped_and_wins) {
  require(VQ_KERNEL_AVX512_BF16);
  nan_distance_wins(VQ_KERNEL_AVX512_BF16);
}

/* ---- empty batches and bad arguments */

Test(vq_nearest, empty_batch_is_ok_on_every_kernel) {
  const float E[] = {1.0f, 2.0f};
  for (int k = 0; k < VQ_KERNEL_COUNT; k++) {
    if (!vq_kernel_available((vq_kernel)k)) continue;
    cr_expect_eq(vq_nearest_with((vq_kernel)k, NULL, 0, E, 1, 2, NULL, NULL),
                 VQC_OK, "%s", vq_kernel_name((vq_kernel)k));
  }
  cr_expect_eq(vqc_vq_nearest(NULL, 0, E, 1, 2, NULL, NULL), VQC_OK);
  int64_t idx;
  cr_expect_eq(vqc_vq_nearest(E, 1, E, 0, 2, &idx, NULL), VQC_EINVAL);
  cr_expect_eq(vqc_vq_nearest(E, 1, E, 1, 0, &idx, NULL), VQC_EINVAL);
  cr_expect_eq(vqc_vq_nearest(E, -1, E, 1, 2, &idx, NULL), VQC_ESHAPE);
  cr_expect_eq(vq_nearest_with(VQ_KERNEL_COUNT, E, 1, E, 1, 2, &idx, NULL),
               VQC_EUNSUPPORTED);
}

/* ---- the reference's definition */

/* The reference must equal the formula written out with explicit fmaf
 * chains, bit for bit; the same data with plain float multiply-then-add
 * chains must differ somewhere (otherwise this test could not tell the two
 * definitions apart). vqc_vq_nearest (the best kernel) must agree too. */
Test(vq_nearest_scalar, distances_follow_the_fmaf_chain_definition) {
  const int64_t M = 8, D = 16, C = 40;
  float x[8 * 16], E[40 * 16], nd[8 * 40], nd_auto[8 * 40];
  int64_t idx[8], idx_auto[8];
  vqc_rng r;
  vqc_rng_init(&r, 3, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_normal(&r, x, M * D, 0.0f, 1.0f);
  vqc_rng_normal(&r, E, C * D, 0.0f, 1.0f);
  cr_assert_eq(vq_nearest_with(VQ_KERNEL_SCALAR, x, M, E, C, D, idx, nd),
               VQC_OK);
  cr_assert_eq(vqc_vq_nearest(x, M, E, C, D, idx_auto, nd_auto), VQC_OK);
  int differs_from_plain = 0;
  for (int64_t i = 0; i < M; i++) {
    float x2 = 0.0f, x2p = 0.0f;
    for (int64_t d = 0; d < D; d++) {
      x2 = fmaf(x[i * D + d], x[i * D + d], x2);
      x2p += x[i * D + d] * x[i * D + d];
    }
    for (int64_t c = 0; c < C; c++) {
      float e2 = 0.0f, dot = 0.0f, e2p = 0.0f, dotp = 0.0f;
      for (int64_t d = 0; d < D; d++) {
        e2 = fmaf(E[c * D + d], E[c * D + d], e2);
        dot = fmaf(x[i * D + d], E[c * D + d], dot);
        e2p += E[c * D + d] * E[c * D + d];
        dotp += x[i * D + d] * E[c * D + d];
      }
      const float want =
          -sqrtf(fmaxf((x2 + e2) + (-2.0f * dot), VQC_VQ_DIST_CLAMP));
      const float plain =
          -sqrtf(fmaxf((x2p + e2p) + (-2.0f * dotp), VQC_VQ_DIST_CLAMP));
      cr_expect_eq(to_bits(nd[i * C + c]), to_bits(want),
                   "(%lld, %lld): got %.9g want %.9g", (long long)i,
                   (long long)c, (double)nd[i * C + c], (double)want);
      cr_expect_eq(to_bits(nd_auto[i * C + c]), to_bits(want),
                   "%s kernel (%lld, %lld)", vq_kernel_name(vq_kernel_best()),
                   (long long)i, (long long)c);
      differs_from_plain += to_bits(plain) != to_bits(want);
    }
    cr_expect_eq(idx_auto[i], idx[i]);
  }
  cr_expect_gt(differs_from_plain, 0,
               "no distance tells the fmaf chain from plain sums");
}
