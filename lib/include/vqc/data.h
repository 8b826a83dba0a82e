/* data.h: synthetic training data for the scenarios, keyed by
 * (seed, step, rank) so any shard of any step regenerates on its own:
 *
 *   rank r's shard of step s is drawn from
 *   vqc_rng_init(seed, vqc_rng_stream_for(s, VQC_RNG_DATA, r)), row by row,
 *
 * so it depends on nothing but (seed, step, rank, its row count). The global
 * batch of a step is the ranks' shards concatenated in rank order: that is
 * the batch a single-process run must train on to be comparable.
 *
 * Two generators: clustered vectors (so a VQ codebook has structure to find)
 * and paired image/text features for a CLIP-style loss. */
#ifndef VQC_DATA_H
#define VQC_DATA_H

#include <stdint.h>

#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- splitting a global batch across ranks ---- */

typedef enum {
  VQC_SPLIT_EVEN = 0, /* floor(N/W) each, the first N mod W ranks one more
                         (numpy.array_split) */
  VQC_SPLIT_FILL = 1, /* ceil(N/W) each until the rows run out, so the last
                         ranks get fewer, possibly 0 (a final partial batch) */
  VQC_SPLIT_RAMP = 2, /* rank r's share grows with r + 1: strongly uneven,
                         size_r = floor(N c_{r+1} / T) - floor(N c_r / T) with
                         c_r = r (r + 1) / 2, T = W (W + 1) / 2 */
} vqc_split_rule;

const char *vqc_split_rule_name(vqc_split_rule rule); /* "even", "fill", "ramp" */
vqc_status vqc_split_rule_from_name(const char *name, vqc_split_rule *out);

/* sizes[r] (world entries) = rows of rank r; they sum to global_rows. */
vqc_status vqc_shard_sizes(int64_t global_rows, int world, vqc_split_rule rule,
                           int64_t *sizes);
/* Rank r's first row in the global batch and its row count. */
vqc_status vqc_shard_range(int64_t global_rows, int world, int rank,
                           vqc_split_rule rule, int64_t *offset, int64_t *rows);

/* ---- clustered vectors ---- */

typedef struct vqc_cluster_data_config {
  uint64_t seed;
  int64_t dim;      /* D */
  int64_t clusters; /* K >= 1 */
  float centre_std; /* centres ~ normal(0, centre_std) */
  float noise_std;  /* row = centre + normal(0, noise_std) */
} vqc_cluster_data_config;

typedef struct vqc_cluster_data {
  vqc_cluster_data_config cfg;
  /* (K, D), owned; drawn from stream vqc_rng_stream_for(0, VQC_RNG_DATA, -1),
   * the same on every rank. */
  float *centres;
} vqc_cluster_data;

vqc_status vqc_cluster_data_init(vqc_cluster_data *d,
                                 const vqc_cluster_data_config *cfg);
void vqc_cluster_data_free(vqc_cluster_data *d); /* accepts NULL */

/* Rank `rank`'s shard of `step`: x (rows, D); labels (rows), each row's
 * cluster, may be NULL. Row i draws its cluster (uniform integer) then its D
 * noise values, so a shard of n rows is a prefix of one of n + 1 rows. */
vqc_status vqc_cluster_data_shard(const vqc_cluster_data *d, uint64_t step,
                                  int rank, int64_t rows, float *x,
                                  int32_t *labels);
/* The global batch of `step`: the shards of ranks 0..world-1 with sizes[r]
 * rows, concatenated: x (sum sizes, D), labels likewise (may be NULL). */
vqc_status vqc_cluster_data_global(const vqc_cluster_data *d, uint64_t step,
                                   int world, const int64_t *sizes, float *x,
                                   int32_t *labels);

/* ---- paired features for a contrastive loss ---- */

typedef struct vqc_pair_data_config {
  uint64_t seed;
  int64_t dim;     /* D of both modalities */
  float noise_std; /* img = s + n1, txt = s + n2, s ~ normal(0, 1),
                      n1, n2 ~ normal(0, noise_std) */
} vqc_pair_data_config;

/* Rank `rank`'s shard of `step`: img, txt (rows, D). Row i draws s, then n1,
 * then n2 (D values each). */
vqc_status vqc_pair_data_shard(const vqc_pair_data_config *cfg, uint64_t step,
                               int rank, int64_t rows, float *img, float *txt);
/* The global batch: shards of ranks 0..world-1 concatenated in rank order. */
vqc_status vqc_pair_data_global(const vqc_pair_data_config *cfg, uint64_t step,
                                int world, const int64_t *sizes, float *img,
                                float *txt);

#ifdef __cplusplus
}
#endif
#endif /* VQC_DATA_H */
