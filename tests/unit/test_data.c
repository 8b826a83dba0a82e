/* test_data.c: unit tests for vqc/data.h: the split rules (exact sizes),
 * determinism of every shard in (seed, step, rank), independence of a
 * shard from the world size and the other ranks, the global batch as the
 * rank-order concatenation, and the structure the generators promise
 * (clusters a VQ can find, positives closer than negatives). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/data.h"

static void expect_sizes(int64_t n, int w, vqc_split_rule rule,
                         const int64_t *want) {
  int64_t got[16];
  cr_assert_eq(vqc_shard_sizes(n, w, rule, got), VQC_OK);
  for (int r = 0; r < w; r++)
    cr_assert_eq(got[r], want[r], "%s n=%lld w=%d rank %d: %lld != %lld",
                 vqc_split_rule_name(rule), (long long)n, w, r,
                 (long long)got[r], (long long)want[r]);
}

Test(data, split_rules_exact) {
  expect_sizes(10, 4, VQC_SPLIT_EVEN, (const int64_t[]){3, 3, 2, 2});
  expect_sizes(10, 4, VQC_SPLIT_FILL, (const int64_t[]){3, 3, 3, 1});
  expect_sizes(9, 4, VQC_SPLIT_FILL, (const int64_t[]){3, 3, 3, 0});
  /* T = 10, cut points 10 * {0, 1, 3, 6, 10} / 10 */
  expect_sizes(10, 4, VQC_SPLIT_RAMP, (const int64_t[]){1, 2, 3, 4});
  /* T = 6, cut points floor(7 * {0, 1, 3, 6} / 6) = 0, 1, 3, 7 */
  expect_sizes(7, 3, VQC_SPLIT_RAMP, (const int64_t[]){1, 2, 4});
  expect_sizes(5, 1, VQC_SPLIT_RAMP, (const int64_t[]){5});
  expect_sizes(0, 3, VQC_SPLIT_EVEN, (const int64_t[]){0, 0, 0});
}

Test(data, split_sizes_sum_and_ranges_tile_the_batch) {
  const vqc_split_rule rules[3] = {VQC_SPLIT_EVEN, VQC_SPLIT_FILL,
                                   VQC_SPLIT_RAMP};
  for (int ri = 0; ri < 3; ri++)
    for (int w = 1; w <= 9; w++)
      for (int64_t n = 0; n <= 50; n++) {
        int64_t sizes[9], sum = 0;
        cr_assert_eq(vqc_shard_sizes(n, w, rules[ri], sizes), VQC_OK);
        for (int r = 0; r < w; r++) {
          cr_assert_geq(sizes[r], 0);
          int64_t off, rows;
          cr_assert_eq(vqc_shard_range(n, w, r, rules[ri], &off, &rows), VQC_OK);
          cr_assert_eq(off, sum);
          cr_assert_eq(rows, sizes[r]);
          sum += sizes[r];
        }
        cr_assert_eq(sum, n, "%s n=%lld w=%d", vqc_split_rule_name(rules[ri]),
                     (long long)n, w);
      }
  int64_t s[2], off, rows;
  cr_assert_eq(vqc_shard_sizes(4, 0, VQC_SPLIT_EVEN, s), VQC_EINVAL);
  cr_assert_eq(vqc_shard_range(4, 2, 2, VQC_SPLIT_EVEN, &off, &rows), VQC_EINVAL);
  vqc_split_rule rule;
  cr_assert_eq(vqc_split_rule_from_name("ramp", &rule), VQC_OK);
  cr_assert_eq(rule, VQC_SPLIT_RAMP);
  cr_assert_eq(vqc_split_rule_from_name("random", &rule), VQC_EINVAL);
}

static const vqc_cluster_data_config CLUSTERS = {
    .seed = 1234, .dim = 8, .clusters = 5, .centre_std = 3.0f,
    .noise_std = 0.1f};

Test(data, cluster_shards_are_deterministic_and_keyed) {
  enum { ROWS = 6, D = 8 };
  vqc_cluster_data a, b;
  cr_assert_eq(vqc_cluster_data_init(&a, &CLUSTERS), VQC_OK);
  cr_assert_eq(vqc_cluster_data_init(&b, &CLUSTERS), VQC_OK);
  cr_assert_eq(memcmp(a.centres, b.centres, 5 * D * sizeof(float)), 0);

  float x[ROWS * D], y[ROWS * D];
  int32_t la[ROWS], lb[ROWS];
  cr_assert_eq(vqc_cluster_data_shard(&a, 3, 1, ROWS, x, la), VQC_OK);
  cr_assert_eq(vqc_cluster_data_shard(&b, 3, 1, ROWS, y, lb), VQC_OK);
  cr_assert_eq(memcmp(x, y, sizeof x), 0, "same (seed, step, rank): same bytes");
  cr_assert_eq(memcmp(la, lb, sizeof la), 0);
  /* Each key component changes the shard. */
  cr_assert_eq(vqc_cluster_data_shard(&a, 4, 1, ROWS, y, NULL), VQC_OK);
  cr_assert_neq(memcmp(x, y, sizeof x), 0, "step must matter");
  cr_assert_eq(vqc_cluster_data_shard(&a, 3, 2, ROWS, y, NULL), VQC_OK);
  cr_assert_neq(memcmp(x, y, sizeof x), 0, "rank must matter");
  vqc_cluster_data_config other = CLUSTERS;
  other.seed = 1235;
  vqc_cluster_data c;
  cr_assert_eq(vqc_cluster_data_init(&c, &other), VQC_OK);
  cr_assert_neq(memcmp(a.centres, c.centres, 5 * D * sizeof(float)), 0);
  cr_assert_eq(vqc_cluster_data_shard(&c, 3, 1, ROWS, y, NULL), VQC_OK);
  cr_assert_neq(memcmp(x, y, sizeof x), 0, "seed must matter");
  /* A shorter shard is a prefix of a longer one. */
  cr_assert_eq(vqc_cluster_data_shard(&a, 3, 1, ROWS - 2, y, lb), VQC_OK);
  cr_assert_eq(memcmp(x, y, (ROWS - 2) * D * sizeof(float)), 0);
  cr_assert_eq(memcmp(la, lb, (ROWS - 2) * sizeof(int32_t)), 0);
  vqc_cluster_data_free(&a);
  vqc_cluster_data_free(&b);
  vqc_cluster_data_free(&c);
  vqc_cluster_data_free(NULL);
}

/* The global batch is the shards in rank order, and rank r's block is the
 * same whatever the world size or the other ranks' sizes. */
Test(data, global_batch_concatenates_independent_shards) {
  enum { N = 13, D = 8 };
  vqc_cluster_data g;
  cr_assert_eq(vqc_cluster_data_init(&g, &CLUSTERS), VQC_OK);
  int64_t sizes[4];
  cr_assert_eq(vqc_shard_sizes(N, 4, VQC_SPLIT_RAMP, sizes), VQC_OK);
  float all[N * D], shard[N * D];
  int32_t labels[N], shard_labels[N];
  cr_assert_eq(vqc_cluster_data_global(&g, 7, 4, sizes, all, labels), VQC_OK);
  int64_t off = 0;
  for (int r = 0; r < 4; r++) {
    cr_assert_eq(vqc_cluster_data_shard(&g, 7, r, sizes[r], shard, shard_labels),
                 VQC_OK);
    cr_assert_eq(memcmp(all + off * D, shard, (size_t)(sizes[r] * D) * sizeof(float)),
                 0, "rank %d block", r);
    cr_assert_eq(memcmp(labels + off, shard_labels, (size_t)sizes[r] * sizeof(int32_t)),
                 0);
    off += sizes[r];
  }
  /* Rank 1 of a 2-rank even split (6 rows) starts with the same rows as
   * rank 1 of the 4-rank ramp above (2 rows): a shard depends on (seed, step,
   * rank) and its own length only, not on the world or the other ranks. */
  int64_t sizes2[2];
  cr_assert_eq(vqc_shard_sizes(N, 2, VQC_SPLIT_EVEN, sizes2), VQC_OK);
  float all2[N * D];
  cr_assert_eq(vqc_cluster_data_global(&g, 7, 2, sizes2, all2, NULL), VQC_OK);
  int64_t common = sizes[1] < sizes2[1] ? sizes[1] : sizes2[1];
  cr_assert_gt(common, 0);
  cr_assert_eq(memcmp(all2 + sizes2[0] * D, all + sizes[0] * D,
                      (size_t)(common * D) * sizeof(float)), 0);
  vqc_cluster_data_free(&g);
}

/* Structure: with centres ~ N(0, 3^2) and noise 0.1 in 8 dims, every row is
 * nearest to its own centre (the seed is fixed, so this is a fixed fact
 * about these rows, and a broken label/centre pairing fails it). */
Test(data, clusters_have_structure) {
  enum { ROWS = 200, D = 8, K = 5 };
  vqc_cluster_data g;
  cr_assert_eq(vqc_cluster_data_init(&g, &CLUSTERS), VQC_OK);
  float *x = malloc(ROWS * D * sizeof(float));
  int32_t labels[ROWS];
  int counts[K] = {0};
  cr_assert_eq(vqc_cluster_data_shard(&g, 0, 0, ROWS, x, labels), VQC_OK);
  for (int i = 0; i < ROWS; i++) {
    cr_assert(labels[i] >= 0 && labels[i] < K);
    counts[labels[i]]++;
    int best = -1;
    double best_d = INFINITY;
    for (int k = 0; k < K; k++) {
      double d2 = 0;
      for (int j = 0; j < D; j++) {
        double e = x[i * D + j] - g.centres[k * D + j];
        d2 += e * e;
      }
      if (d2 < best_d) {
        best_d = d2;
        best = k;
      }
    }
    cr_assert_eq(best, labels[i], "row %d", i);
    /* noise 0.1 in 8 dims: |noise|^2 ~ 0.08; 1.0 is far in the tail */
    cr_assert_lt(best_d, 1.0, "row %d is %.3g from its centre", i, best_d);
  }
  for (int k = 0; k < K; k++)
    cr_assert_gt(counts[k], 10, "cluster %d drawn only %d times", k, counts[k]);
  free(x);
  vqc_cluster_data_free(&g);
}

Test(data, pairs_are_deterministic_and_positives_are_nearest) {
  enum { ROWS = 12, D = 16 };
  vqc_pair_data_config cfg = {.seed = 99, .dim = D, .noise_std = 0.2f};
  float img[ROWS * D], txt[ROWS * D], img2[ROWS * D], txt2[ROWS * D];
  cr_assert_eq(vqc_pair_data_shard(&cfg, 2, 1, ROWS, img, txt), VQC_OK);
  cr_assert_eq(vqc_pair_data_shard(&cfg, 2, 1, ROWS, img2, txt2), VQC_OK);
  cr_assert_eq(memcmp(img, img2, sizeof img), 0);
  cr_assert_eq(memcmp(txt, txt2, sizeof txt), 0);
  cr_assert_neq(memcmp(img, txt, sizeof img), 0, "the two views differ");
  cr_assert_eq(vqc_pair_data_shard(&cfg, 2, 0, ROWS, img2, txt2), VQC_OK);
  cr_assert_neq(memcmp(img, img2, sizeof img), 0, "rank must matter");

  for (int i = 0; i < ROWS; i++) {
    int best = -1;
    double best_cos = -2;
    for (int j = 0; j < ROWS; j++) {
      double dot = 0, na = 0, nb = 0;
      for (int k = 0; k < D; k++) {
        dot += (double)img[i * D + k] * txt[j * D + k];
        na += (double)img[i * D + k] * img[i * D + k];
        nb += (double)txt[j * D + k] * txt[j * D + k];
      }
      double c = dot / sqrt(na * nb);
      if (c > best_cos) {
        best_cos = c;
        best = j;
      }
    }
    cr_assert_eq(best, i, "image %d's nearest text is %d", i, best);
  }

  /* global = rank-order concatenation */
  int64_t sizes[3] = {5, 0, 7};
  float gi[ROWS * D], gt[ROWS * D];
  cr_assert_eq(vqc_pair_data_global(&cfg, 2, 3, sizes, gi, gt), VQC_OK);
  cr_assert_eq(vqc_pair_data_shard(&cfg, 2, 2, 7, img2, txt2), VQC_OK);
  cr_assert_eq(memcmp(gi + 5 * D, img2, 7 * D * sizeof(float)), 0);
  cr_assert_eq(memcmp(gt + 5 * D, txt2, 7 * D * sizeof(float)), 0);
  cr_assert_eq(vqc_pair_data_shard(&cfg, 2, -1, 1, img2, txt2), VQC_EINVAL);
}
