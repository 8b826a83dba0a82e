/* data.c: the synthetic data of data.h: batch splitting rules, clustered
 * vectors and paired features, each shard drawn from its own
 * (seed, step, rank) stream. */
#include <stdlib.h>
#include <string.h>

#include "vqc/data.h"
#include "vqc/rng.h"

/* ---- splitting ---- */

const char *vqc_split_rule_name(vqc_split_rule rule) {
  switch (rule) {
  case VQC_SPLIT_EVEN: return "even";
  case VQC_SPLIT_FILL: return "fill";
  case VQC_SPLIT_RAMP: return "ramp";
  }
  return "?";
}

vqc_status vqc_split_rule_from_name(const char *name, vqc_split_rule *out) {
  static const vqc_split_rule rules[] = {VQC_SPLIT_EVEN, VQC_SPLIT_FILL,
                                         VQC_SPLIT_RAMP};
  for (size_t i = 0; name != NULL && i < sizeof rules / sizeof rules[0]; i++)
    if (strcmp(name, vqc_split_rule_name(rules[i])) == 0) {
      *out = rules[i];
      return VQC_OK;
    }
  return vqc_error(VQC_EINVAL,
                   "unknown split rule '%s' (expected even, fill or ramp)",
                   name ? name : "(null)");
}

vqc_status vqc_shard_sizes(int64_t global_rows, int world, vqc_split_rule rule,
                           int64_t *sizes) {
  if (global_rows < 0 || world < 1 || sizes == NULL)
    return vqc_error(VQC_EINVAL, "shard_sizes: %lld rows over %d ranks",
                     (long long)global_rows, world);
  const int64_t n = global_rows, w = world;
  switch (rule) {
  case VQC_SPLIT_EVEN:
    for (int64_t r = 0; r < w; r++) sizes[r] = n / w + (r < n % w ? 1 : 0);
    return VQC_OK;
  case VQC_SPLIT_FILL: {
    int64_t per = (n + w - 1) / w, left = n;
    for (int64_t r = 0; r < w; r++) {
      sizes[r] = left < per ? left : per;
      left -= sizes[r];
    }
    return VQC_OK;
  }
  case VQC_SPLIT_RAMP: {
    /* Integer cut points floor(n c_r / T): exact, and they sum to n. */
    const int64_t total = w * (w + 1) / 2;
    for (int64_t r = 0; r < w; r++) {
      int64_t c0 = r * (r + 1) / 2, c1 = (r + 1) * (r + 2) / 2;
      sizes[r] = n * c1 / total - n * c0 / total;
    }
    return VQC_OK;
  }
  }
  return vqc_error(VQC_EINVAL, "shard_sizes: unknown rule %d", (int)rule);
}

vqc_status vqc_shard_range(int64_t global_rows, int world, int rank,
                           vqc_split_rule rule, int64_t *offset, int64_t *rows) {
  if (rank < 0 || rank >= world)
    return vqc_error(VQC_EINVAL, "shard_range: rank %d of %d", rank, world);
  int64_t *sizes = malloc((size_t)world * sizeof *sizes);
  if (sizes == NULL) return vqc_error(VQC_ENOMEM, "shard_range");
  vqc_status s = vqc_shard_sizes(global_rows, world, rule, sizes);
  if (s == VQC_OK) {
    int64_t off = 0;
    for (int r = 0; r < rank; r++) off += sizes[r];
    *offset = off;
    *rows = sizes[rank];
  }
  free(sizes);
  return s;
}

/* ---- clustered vectors ---- */

vqc_status vqc_cluster_data_init(vqc_cluster_data *d,
                                 const vqc_cluster_data_config *cfg) {
  memset(d, 0, sizeof *d);
  if (cfg == NULL || cfg->dim < 1 || cfg->clusters < 1 ||
      !(cfg->centre_std >= 0.0f) || !(cfg->noise_std >= 0.0f))
    return vqc_error(VQC_EINVAL, "cluster_data_init: bad config");
  d->cfg = *cfg;
  d->centres = malloc((size_t)(cfg->dim * cfg->clusters) * sizeof(float));
  if (d->centres == NULL)
    return vqc_error(VQC_ENOMEM, "cluster_data_init: (%lld, %lld) centres",
                     (long long)cfg->clusters, (long long)cfg->dim);
  /* Rank -1: the centres are shared by every rank and step. */
  vqc_rng r;
  vqc_rng_init(&r, cfg->seed, vqc_rng_stream_for(0, VQC_RNG_DATA, -1));
  vqc_rng_normal(&r, d->centres, cfg->dim * cfg->clusters, 0.0f,
                 cfg->centre_std);
  return VQC_OK;
}

void vqc_cluster_data_free(vqc_cluster_data *d) {
  if (d == NULL) return;
  free(d->centres);
  memset(d, 0, sizeof *d);
}

vqc_status vqc_cluster_data_shard(const vqc_cluster_data *d, uint64_t step,
                                  int rank, int64_t rows, float *x,
                                  int32_t *labels) {
  if (d == NULL || d->centres == NULL || rank < 0 || rows < 0 ||
      (rows > 0 && x == NULL))
    return vqc_error(VQC_EINVAL, "cluster_data_shard: bad arguments (rank %d, "
                                 "rows %lld)", rank, (long long)rows);
  const int64_t dim = d->cfg.dim;
  vqc_rng r;
  vqc_rng_init(&r, d->cfg.seed, vqc_rng_stream_for(step, VQC_RNG_DATA, rank));
  for (int64_t i = 0; i < rows; i++) {
    int64_t k = vqc_rng_randint(&r, 0, d->cfg.clusters);
    float *row = x + i * dim;
    vqc_rng_normal(&r, row, dim, 0.0f, d->cfg.noise_std);
    for (int64_t j = 0; j < dim; j++) row[j] += d->centres[k * dim + j];
    if (labels != NULL) labels[i] = (int32_t)k;
  }
  return VQC_OK;
}

vqc_status vqc_cluster_data_global(const vqc_cluster_data *d, uint64_t step,
                                   int world, const int64_t *sizes, float *x,
                                   int32_t *labels) {
  if (world < 1 || sizes == NULL)
    return vqc_error(VQC_EINVAL, "cluster_data_global: world %d", world);
  int64_t off = 0;
  for (int r = 0; r < world; r++) {
    VQC_TRY(vqc_cluster_data_shard(d, step, r, sizes[r], x + off * d->cfg.dim,
                                   labels != NULL ? labels + off : NULL));
    off += sizes[r];
  }
  return VQC_OK;
}

/* ---- paired features ---- */

vqc_status vqc_pair_data_shard(const vqc_pair_data_config *cfg, uint64_t step,
                               int rank, int64_t rows, float *img, float *txt) {
  if (cfg == NULL || cfg->dim < 1 || !(cfg->noise_std >= 0.0f) || rank < 0 ||
      rows < 0 || (rows > 0 && (img == NULL || txt == NULL)))
    return vqc_error(VQC_EINVAL, "pair_data_shard: bad arguments (rank %d, "
                                 "rows %lld)", rank, (long long)rows);
  const int64_t dim = cfg->dim;
  float *shared = malloc((size_t)dim * sizeof(float));
  if (shared == NULL) return vqc_error(VQC_ENOMEM, "pair_data_shard");
  vqc_rng r;
  vqc_rng_init(&r, cfg->seed, vqc_rng_stream_for(step, VQC_RNG_DATA, rank));
  for (int64_t i = 0; i < rows; i++) {
    float *a = img + i * dim, *b = txt + i * dim;
    vqc_rng_normal(&r, shared, dim, 0.0f, 1.0f);
    vqc_rng_normal(&r, a, dim, 0.0f, cfg->noise_std);
    vqc_rng_normal(&r, b, dim, 0.0f, cfg->noise_std);
    for (int64_t j = 0; j < dim; j++) {
      a[j] += shared[j];
      b[j] += shared[j];
    }
  }
  free(shared);
  return VQC_OK;
}

vqc_status vqc_pair_data_global(const vqc_pair_data_config *cfg, uint64_t step,
                                int world, const int64_t *sizes, float *img,
                                float *txt) {
  if (cfg == NULL || world < 1 || sizes == NULL)
    return vqc_error(VQC_EINVAL, "pair_data_global: world %d", world);
  int64_t off = 0;
  for (int r = 0; r < world; r++) {
    VQC_TRY(vqc_pair_data_shard(cfg, step, r, sizes[r], img + off * cfg->dim,
                                txt + off * cfg->dim));
    off += sizes[r];
  }
  return VQC_OK;
}
