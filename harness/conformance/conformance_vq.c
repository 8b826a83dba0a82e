/* conformance_vq.c: conformance handlers for the VQ and RVQ kinds of the
 * golden cases (tests/fixtures/vqpt/README.md): vq_eval, vq_ema,
 * vq_dead_code, vq_kmeans_init, rvq_eval, rvq_dropout_train.
 *
 * Each handler builds our reference quantizer (lib vq.h / rvq.h) from the
 * case's params and initial state, replays the inputs step by step carrying
 * OUR state forward (the recorded *_before_<s> for s > 0 are not read back),
 * injects the recorded random draws through a vqc_draws table, and compares
 * every output the README names for the kind. Every shape and parameter
 * comes from case.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "vqc/py_random.h"
#include "vqc/rvq.h"
#include "vqc/vq.h"

/* ---- small helpers */

/* "<base>_<s>" into buf (the per-step array and scalar names). */
static const char *step_name(char *buf, size_t cap, const char *base, int s) {
  snprintf(buf, cap, "%s_%d", base, s);
  return buf;
}

/* The constructor params every VQ/RVQ kind shares, with upstream defaults
 * where a case leaves one out. */
static vqc_status read_vq_params(const vqc_fixture *fx, vqc_vq_params *p) {
  const char *jp = vqc_fixture_json_path(fx);
  int64_t dim = 0, K = 0, iters = 10;
  VQC_TRY(vqc_fixture_param_int(fx, "dim", &dim));
  VQC_TRY(vqc_fixture_param_int(fx, "codebook_size", &K));
  if (dim < 1 || K < 1 || dim > (1 << 20) || K > (1 << 24))
    return vqc_error(VQC_EPARSE, "%s: params.dim %lld / codebook_size %lld "
                     "out of range", jp, (long long)dim, (long long)K);
  vqc_vq_params_default(p, dim, K);
  VQC_TRY(vqc_fixture_param_double_or(fx, "decay", 0.8, &p->decay));
  VQC_TRY(vqc_fixture_param_double_or(fx, "eps", 1e-5, &p->eps));
  VQC_TRY(vqc_fixture_param_double_or(fx, "threshold_ema_dead_code", 0.0,
                                      &p->threshold_ema_dead_code));
  /* Upstream: reset_cluster_size defaults to the threshold (-1 here). */
  VQC_TRY(vqc_fixture_param_double_or(fx, "reset_cluster_size", -1.0,
                                      &p->reset_cluster_size));
  VQC_TRY(vqc_fixture_param_bool_or(fx, "kmeans_init", false, &p->kmeans_init));
  VQC_TRY(vqc_fixture_param_int_or(fx, "kmeans_iters", 10, &iters));
  if (iters < 0 || iters > 100000)
    return vqc_error(VQC_EPARSE, "%s: params.kmeans_iters %lld out of range",
                     jp, (long long)iters);
  p->kmeans_iters = (int)iters;
  VQC_TRY(vqc_fixture_param_double_or(fx, "commitment_weight", 1.0,
                                      &p->commitment_weight));
  return VQC_OK;
}

/* A float32 input of shape (..., d): *M = numel / d rows. */
static vqc_status read_rows(const vqc_fixture *fx, const char *name, int64_t d,
                            const vqc_fixture_array **a, int64_t *M) {
  VQC_TRY(vqc_fixture_f32(fx, name, 0, NULL, a));
  if ((*a)->ndim < 1 || (*a)->shape[(*a)->ndim - 1] != d)
    return vqc_error(VQC_ESHAPE, "%s: arrays.%s: last dimension must be "
                     "params.dim = %lld", vqc_fixture_json_path(fx), name,
                     (long long)d);
  *M = (*a)->numel / d;
  return VQC_OK;
}

/* A float32 array of exactly n elements (state given as input). */
static vqc_status read_f32_n(const vqc_fixture *fx, const char *name,
                             int64_t n, const float **out) {
  const vqc_fixture_array *a;
  VQC_TRY(vqc_fixture_f32(fx, name, 0, NULL, &a));
  if (a->numel != n)
    return vqc_error(VQC_ESHAPE, "%s: arrays.%s: %lld elements, expected %lld",
                     vqc_fixture_json_path(fx), name, (long long)a->numel,
                     (long long)n);
  *out = a->data;
  return VQC_OK;
}

static vqc_status read_steps(const vqc_fixture *fx, int *T) {
  int64_t steps = 0;
  VQC_TRY(vqc_fixture_param_int(fx, "steps", &steps));
  if (steps < 1 || steps > 100000)
    return vqc_error(VQC_EPARSE, "%s: params.steps %lld out of range",
                     vqc_fixture_json_path(fx), (long long)steps);
  *T = (int)steps;
  return VQC_OK;
}

/* Compares a VQ's whole state against `<prefix>codebook<suffix>` etc. */
static vqc_status expect_state(vqc_conformance_result *r, const vqc_fixture *fx,
                               vqc_vq *vq, const char *suffix) {
  const int64_t K = vq->p.codebook_size, d = vq->p.dim;
  char name[96];
  snprintf(name, sizeof name, "codebook%s", suffix);
  VQC_TRY(vqc_conf_expect_f32(r, fx, name, vqc_vq_embed(vq), K * d));
  snprintf(name, sizeof name, "cluster_size%s", suffix);
  VQC_TRY(vqc_conf_expect_f32(r, fx, name, vqc_vq_cluster_size(vq), K));
  snprintf(name, sizeof name, "embed_avg%s", suffix);
  return vqc_conf_expect_f32(r, fx, name, vqc_vq_embed_avg(vq), K * d);
}

/* ---- recorded draws, served through vqc_draws */

typedef struct recorded {
  const char *case_json;
  const char *rows_name;  /* array the rows come from, NULL: none recorded */
  const int64_t *rows;    /* (nrows,) */
  int64_t nrows;
  bool has_seed;          /* dropout: seed_<s> recorded */
  int64_t seed;
  bool has_cutoff;        /* dropout: dropout_cutoff_<s> recorded */
  int64_t cutoff;
  int64_t derived_cutoff; /* out: randrange from the seed, -1 if not run */
} recorded;

static vqc_status recorded_rows(void *user, vqc_draw_at at, int64_t n,
                                int64_t k, int64_t *rows) {
  const recorded *rec = user;
  if (!rec->rows_name)
    return vqc_error(VQC_EPARSE, "%s: the replay needs %lld %s rows at "
                     "step %llu but the case records none", rec->case_json,
                     (long long)k,
                     at.purpose == VQC_RNG_KMEANS ? "k-means initial"
                                                  : "dead-code replacement",
                     (unsigned long long)at.step);
  if (k != rec->nrows)
    return vqc_error(VQC_ESHAPE, "%s: we draw %lld rows at step %llu but "
                     "arrays.%s holds %lld (our expired/initial code count "
                     "differs from the library's)", rec->case_json,
                     (long long)k, (unsigned long long)at.step, rec->rows_name,
                     (long long)rec->nrows);
  for (int64_t j = 0; j < k; j++) {
    if (rec->rows[j] < 0 || rec->rows[j] >= n)
      return vqc_error(VQC_EPARSE, "%s: arrays.%s[%lld] = %lld is not a row "
                       "of a batch of %lld", rec->case_json, rec->rows_name,
                       (long long)j, (long long)rec->rows[j], (long long)n);
    rows[j] = rec->rows[j];
  }
  return VQC_OK;
}

static vqc_status recorded_seed(void *user, vqc_draw_at at, int64_t *seed) {
  const recorded *rec = user;
  *seed = rec->has_seed ? rec->seed : 0;
  return VQC_OK;
}

/* The cutoff: CPython's random.Random(seed).randrange(lo, hi + 1) when the
 * seed is recorded (compared with the recorded cutoff afterwards), else the
 * recorded cutoff itself. */
static vqc_status recorded_cutoff(void *user, vqc_draw_at at,
                                  int64_t synced_seed, int lo, int hi,
                                  int *cutoff) {
  recorded *rec = user;
  if (rec->has_seed) {
    vqc_py_random g;
    vqc_py_random_seed(&g, synced_seed);
    rec->derived_cutoff = vqc_py_random_randrange(&g, lo, (int64_t)hi + 1);
    *cutoff = (int)rec->derived_cutoff;
    return VQC_OK;
  }
  if (!rec->has_cutoff)
    return vqc_error(VQC_EPARSE, "%s: step %llu records neither seed_%llu nor "
                     "dropout_cutoff_%llu", rec->case_json,
                     (unsigned long long)at.step, (unsigned long long)at.step,
                     (unsigned long long)at.step);
  if (rec->cutoff < lo || rec->cutoff > hi)
    return vqc_error(VQC_EPARSE, "%s: dropout_cutoff_%llu = %lld outside "
                     "[%d, %d]", rec->case_json, (unsigned long long)at.step,
                     (long long)rec->cutoff, lo, hi);
  *cutoff = (int)rec->cutoff;
  return VQC_OK;
}

static vqc_draws recorded_draws_table(recorded *rec) {
  vqc_draws d = {rec, recorded_rows, NULL, recorded_seed, recorded_cutoff};
  return d;
}

/* ---- vq_eval */

static vqc_status handle_vq_eval(const vqc_fixture *fx,
                                 vqc_conformance_result *r) {
  vqc_vq_params p;
  VQC_TRY(read_vq_params(fx, &p));
  const int64_t K = p.codebook_size, d = p.dim;
  const vqc_fixture_array *x;
  const float *codebook;
  int64_t M;
  VQC_TRY(read_rows(fx, "x", d, &x, &M));
  VQC_TRY(read_f32_n(fx, "codebook", K * d, &codebook));

  vqc_vq vq = {0};
  int64_t *idx = malloc((size_t)(M + 1) * sizeof(int64_t));    /* (M,) */
  float *q = malloc((size_t)(M * d + 1) * sizeof(float));      /* (M, d) */
  float *negd = malloc((size_t)(M * K + 1) * sizeof(float));   /* (M, K) */
  vqc_status s = VQC_OK;
  if (!idx || !q || !negd) {
    s = vqc_error(VQC_ENOMEM, "vq_eval replay: %lld rows", (long long)M);
    goto done;
  }
  if ((s = vqc_vq_init(&vq, &p, codebook))) goto done;

  float eval_loss = -1.0f, frozen_loss = -1.0f;
  if ((s = vqc_vq_forward(&vq, NULL, x->data, M, false, idx, q, &eval_loss)))
    goto done;
  if ((s = vqc_vq_nearest(x->data, M, codebook, K, d, idx, negd))) goto done;
  if ((s = vqc_conf_expect_i64(r, fx, "indices", idx, M)) ||
      (s = vqc_conf_expect_f32(r, fx, "quantized", q, M * d)) ||
      (s = vqc_conf_expect_f32(r, fx, "neg_distance", negd, M * K)) ||
      (s = vqc_conf_expect_scalar(r, fx, "eval_loss", eval_loss)))
    goto done;

  /* Train mode with a frozen codebook: the commitment loss, no update. */
  vq.p.freeze_codebook = true;
  if ((s = vqc_vq_forward(&vq, NULL, x->data, M, true, idx, q, &frozen_loss)))
    goto done;
  if ((s = vqc_conf_expect_scalar(r, fx, "train_frozen_loss", frozen_loss)) ||
      (s = vqc_conf_expect_scalar(r, fx, "train_frozen_commitment_loss",
                                  frozen_loss)))
    goto done;
  vqc_conf_compare_f32_exact(r, "codebook (unchanged by eval and frozen "
                             "train forwards)", vqc_vq_embed(&vq), codebook,
                             K * d);
done:
  vqc_vq_free(&vq);
  free(idx);
  free(q);
  free(negd);
  return s;
}

/* ---- vq_ema and vq_dead_code */

/* The initial state: codebook_before_0, and cluster_size_before_0 /
 * embed_avg_before_0 when recorded (else the fresh values). */
static vqc_status init_vq_from_case(const vqc_fixture *fx,
                                    const vqc_vq_params *p, vqc_vq *vq) {
  const int64_t K = p->codebook_size, d = p->dim;
  const float *cb;
  VQC_TRY(read_f32_n(fx, "codebook_before_0", K * d, &cb));
  VQC_TRY(vqc_vq_init(vq, p, cb));
  const float *v;
  if (vqc_fixture_find(fx, "cluster_size_before_0")) {
    VQC_TRY(read_f32_n(fx, "cluster_size_before_0", K, &v));
    memcpy(vqc_vq_cluster_size(vq), v, (size_t)K * sizeof(float));
  }
  if (vqc_fixture_find(fx, "embed_avg_before_0")) {
    VQC_TRY(read_f32_n(fx, "embed_avg_before_0", K * d, &v));
    memcpy(vqc_vq_embed_avg(vq), v, (size_t)(K * d) * sizeof(float));
  }
  return VQC_OK;
}

/* One step of vq_dead_code, through the same building blocks, in the same
 * order, as vqc_vq_forward (which cannot expose the after-EMA state). */
static vqc_status dead_code_step(const vqc_fixture *fx,
                                 vqc_conformance_result *r, vqc_vq *vq,
                                 const vqc_vq_ctx *ctx, recorded *rec, int st,
                                 const float *x, int64_t M, int64_t *idx,
                                 float *q) {
  const int64_t K = vq->p.codebook_size, d = vq->p.dim;
  char name[96], suffix[32];
  const float *E = vqc_vq_embed(vq);
  VQC_TRY(vqc_vq_nearest(x, M, E, K, d, idx, NULL));
  for (int64_t i = 0; i < M; i++)
    memcpy(q + i * d, E + idx[i] * d, (size_t)d * sizeof(float));
  const float loss =
      vqc_vq_commitment_loss(x, q, M, d, vq->p.commitment_weight);
  VQC_TRY(vqc_vq_ema_update(vq, ctx, x, M, idx));
  snprintf(suffix, sizeof suffix, "_after_ema_%d", st);
  VQC_TRY(expect_state(r, fx, vq, suffix));

  /* The recorded replacement rows for this step (a step without the array
   * may not expire anything: recorded_rows reports it if it does). */
  if (vqc_fixture_find(fx, step_name(name, sizeof name, "sampled_rows", st))) {
    const vqc_fixture_array *rows;
    VQC_TRY(vqc_fixture_i64(fx, name, 0, NULL, &rows));
    rec->rows_name = rows->name;
    rec->rows = rows->data;
    rec->nrows = rows->numel;
  }

  uint8_t *mask = malloc((size_t)K);
  int64_t *mask64 = malloc((size_t)K * sizeof(int64_t));
  int64_t *codes = malloc((size_t)(K + 1) * sizeof(int64_t));
  int64_t *want_codes = NULL, n_want = 0, nexp = 0;
  vqc_status s = VQC_OK;
  if (!mask || !mask64 || !codes) {
    s = vqc_error(VQC_ENOMEM, "vq_dead_code replay: %lld codes", (long long)K);
    goto done;
  }
  if ((s = vqc_vq_expire_codes(vq, ctx, x, M, mask, &nexp))) goto done;
  int64_t nc = 0;
  for (int64_t c = 0; c < K; c++) {
    mask64[c] = mask[c];
    if (mask[c]) codes[nc++] = c;
  }
  if ((s = vqc_conf_expect_i64(r, fx, step_name(name, sizeof name, "expired",
                                                st), mask64, K)) ||
      (s = vqc_conf_expect_scalar_exact(
           r, fx, step_name(name, sizeof name, "num_expired", st),
           (double)nexp)))
    goto done;
  if ((s = vqc_fixture_scalar_int_list(
           fx, step_name(name, sizeof name, "expired_codes", st), &want_codes,
           &n_want)))
    goto done;
  r->compared++;
  if (n_want != nc)
    vqc_conf_fail(r, "%s: %lld expired codes, the library expired %lld", name,
                  (long long)nc, (long long)n_want);
  else
    vqc_conf_compare_i64(r, name, codes, want_codes, nc);

  snprintf(suffix, sizeof suffix, "_after_%d", st);
  if ((s = expect_state(r, fx, vq, suffix)) ||
      (s = vqc_conf_expect_i64(r, fx, step_name(name, sizeof name, "indices",
                                                st), idx, M)) ||
      (s = vqc_conf_expect_scalar(r, fx, step_name(name, sizeof name, "loss",
                                                   st), loss)))
    goto done;
  /* Not stored by the shipped cases; compared when a case has it. */
  if (vqc_fixture_find(fx, step_name(name, sizeof name, "quantized", st)))
    s = vqc_conf_expect_f32(r, fx, name, q, M * d);
done:
  free(mask);
  free(mask64);
  free(codes);
  free(want_codes);
  return s;
}

static vqc_status run_vq_steps(const vqc_fixture *fx, vqc_conformance_result *r,
                               bool dead_code) {
  vqc_vq_params p;
  VQC_TRY(read_vq_params(fx, &p));
  int T;
  VQC_TRY(read_steps(fx, &T));
  if (dead_code && !(p.threshold_ema_dead_code > 0.0))
    return vqc_error(VQC_EPARSE, "%s: vq_dead_code needs "
                     "params.threshold_ema_dead_code > 0",
                     vqc_fixture_json_path(fx));
  const int64_t d = p.dim;
  vqc_vq vq = {0};
  int64_t *idx = NULL;
  float *q = NULL;
  recorded rec = {.case_json = vqc_fixture_json_path(fx)};
  const vqc_draws draws = recorded_draws_table(&rec);
  vqc_status s = init_vq_from_case(fx, &p, &vq);
  for (int st = 0; s == VQC_OK && st < T; st++) {
    char name[96];
    const vqc_fixture_array *x;
    int64_t M;
    if ((s = read_rows(fx, step_name(name, sizeof name, "x", st), d, &x, &M)))
      break;
    free(idx);
    free(q);
    idx = malloc((size_t)(M + 1) * sizeof(int64_t)); /* (M,) */
    q = malloc((size_t)(M * d + 1) * sizeof(float)); /* (M, d) */
    if (!idx || !q) {
      s = vqc_error(VQC_ENOMEM, "vq replay: %lld rows", (long long)M);
      break;
    }
    rec.rows_name = NULL; /* a draw without recorded rows is an error */
    const vqc_vq_ctx ctx = {NULL, (uint64_t)st, &draws, 0};
    if (dead_code) {
      s = dead_code_step(fx, r, &vq, &ctx, &rec, st, x->data, M, idx, q);
      continue;
    }
    float loss = 0.0f;
    char suffix[32];
    snprintf(suffix, sizeof suffix, "_after_%d", st);
    if ((s = vqc_vq_forward(&vq, &ctx, x->data, M, true, idx, q, &loss)) ||
        (s = vqc_conf_expect_i64(r, fx, step_name(name, sizeof name, "indices",
                                                  st), idx, M)) ||
        (s = vqc_conf_expect_f32(r, fx, step_name(name, sizeof name,
                                                  "quantized", st), q, M * d)) ||
        (s = vqc_conf_expect_scalar(r, fx, step_name(name, sizeof name, "loss",
                                                     st), loss)) ||
        (s = expect_state(r, fx, &vq, suffix)))
      break;
  }
  vqc_vq_free(&vq);
  free(idx);
  free(q);
  return s;
}

static vqc_status handle_vq_ema(const vqc_fixture *fx,
                                vqc_conformance_result *r) {
  return run_vq_steps(fx, r, false);
}

static vqc_status handle_vq_dead_code(const vqc_fixture *fx,
                                      vqc_conformance_result *r) {
  return run_vq_steps(fx, r, true);
}

/* ---- vq_kmeans_init */

static vqc_status handle_vq_kmeans_init(const vqc_fixture *fx,
                                        vqc_conformance_result *r) {
  vqc_vq_params p;
  VQC_TRY(read_vq_params(fx, &p));
  p.kmeans_init = true;
  const int64_t K = p.codebook_size, d = p.dim;
  const int I = p.kmeans_iters;
  if (I < 1)
    return vqc_error(VQC_EPARSE, "%s: params.kmeans_iters must be >= 1 (the "
                     "library crashes with 0)", vqc_fixture_json_path(fx));
  const vqc_fixture_array *x, *init_rows, *mtraj, *btraj;
  int64_t M;
  VQC_TRY(read_rows(fx, "x", d, &x, &M));
  VQC_TRY(vqc_fixture_i64(fx, "init_rows", 1, (int64_t[]){K}, &init_rows));
  VQC_TRY(vqc_fixture_f32(fx, "kmeans_means_trajectory", 3,
                          (int64_t[]){I + 1, K, d}, &mtraj));
  VQC_TRY(vqc_fixture_i64(fx, "kmeans_bins_trajectory", 2,
                          (int64_t[]){I + 1, K}, &btraj));
  const float *xs = x->data;
  const int64_t *rows = init_rows->data;
  for (int64_t j = 0; j < K; j++)
    if (rows[j] < 0 || rows[j] >= M)
      return vqc_error(VQC_EPARSE, "%s: init_rows[%lld] = %lld is not a row "
                       "of x (%lld rows)", vqc_fixture_json_path(fx),
                       (long long)j, (long long)rows[j], (long long)M);

  vqc_vq vq = {0};
  float *means = malloc((size_t)(K * d) * sizeof(float)); /* (K, d) */
  int64_t *bins = malloc((size_t)K * sizeof(int64_t));     /* (K,) */
  int64_t *idx = malloc((size_t)(M + 1) * sizeof(int64_t));
  float *q = malloc((size_t)(M * d + 1) * sizeof(float));
  vqc_status s = VQC_OK;
  if (!means || !bins || !idx || !q) {
    s = vqc_error(VQC_ENOMEM, "vq_kmeans_init replay: %lld codes",
                  (long long)K);
    goto done;
  }

  /* The trajectory, one iteration at a time from the recorded rows. */
  for (int64_t j = 0; j < K; j++)
    memcpy(means + j * d, xs + rows[j] * d, (size_t)d * sizeof(float));
  vqc_conf_compare_f32(r, "kmeans_means_trajectory[0]", means,
                       (const float *)mtraj->data, K * d);
  for (int t = 1; t <= I; t++) {
    char name[64];
    if ((s = vqc_vq_kmeans(NULL, xs, M, d, K, 1, means, bins))) goto done;
    snprintf(name, sizeof name, "kmeans_means_trajectory[%d]", t);
    vqc_conf_compare_f32(r, name, means,
                         (const float *)mtraj->data + (int64_t)t * K * d, K * d);
    snprintf(name, sizeof name, "kmeans_bins_trajectory[%d]", t);
    vqc_conf_compare_i64(r, name, bins,
                         (const int64_t *)btraj->data + (int64_t)t * K, K);
  }
  if ((s = vqc_conf_expect_f32(r, fx, "kmeans_means", means, K * d)) ||
      (s = vqc_conf_expect_i64(r, fx, "kmeans_bins", bins, K)))
    goto done;

  /* The module path: an eval forward on a fresh kmeans_init codebook runs
   * the whole init (recorded rows injected), then quantizes. */
  recorded rec = {.case_json = vqc_fixture_json_path(fx),
                  .rows_name = init_rows->name, .rows = rows, .nrows = K};
  const vqc_draws draws = recorded_draws_table(&rec);
  const vqc_vq_ctx ctx = {NULL, 0, &draws, 0};
  if ((s = vqc_vq_init(&vq, &p, NULL)) ||
      (s = vqc_vq_forward(&vq, &ctx, xs, M, false, idx, q, NULL)) ||
      (s = expect_state(r, fx, &vq, "")) ||
      (s = vqc_conf_expect_i64(r, fx, "indices", idx, M)) ||
      (s = vqc_conf_expect_f32(r, fx, "quantized", q, M * d)))
    goto done;
done:
  vqc_vq_free(&vq);
  free(means);
  free(bins);
  free(idx);
  free(q);
  return s;
}

/* ---- rvq_eval and rvq_dropout_train */

static vqc_status read_rvq_params(const vqc_fixture *fx, vqc_rvq_params *p) {
  vqc_vq_params layer;
  VQC_TRY(read_vq_params(fx, &layer));
  int64_t Q = 0, cut = 0, mult = 1;
  VQC_TRY(vqc_fixture_param_int(fx, "num_quantizers", &Q));
  if (Q < 1 || Q > 4096)
    return vqc_error(VQC_EPARSE, "%s: params.num_quantizers %lld out of range",
                     vqc_fixture_json_path(fx), (long long)Q);
  vqc_rvq_params_default(p, (int)Q, layer.dim, layer.codebook_size);
  p->layer = layer;
  VQC_TRY(vqc_fixture_param_bool_or(fx, "quantize_dropout", false,
                                    &p->quantize_dropout));
  VQC_TRY(vqc_fixture_param_int_or(fx, "quantize_dropout_cutoff_index", 0,
                                   &cut));
  VQC_TRY(vqc_fixture_param_int_or(fx, "quantize_dropout_multiple_of", 1,
                                   &mult));
  if (cut < 0 || cut >= Q || mult < 1 || mult > 4096)
    return vqc_error(VQC_EPARSE, "%s: params.quantize_dropout_cutoff_index "
                     "%lld / multiple_of %lld out of range",
                     vqc_fixture_json_path(fx), (long long)cut,
                     (long long)mult);
  p->dropout_cutoff_index = (int)cut;
  p->dropout_multiple_of = (int)mult;
  return VQC_OK;
}

/* Decodes an indices array of the case (..., q_given) and compares the codes
 * (Q, M, d) and, when out_name is given, their sum (M, d). */
static vqc_status expect_decode(vqc_conformance_result *r,
                                const vqc_fixture *fx, const vqc_rvq *rvq,
                                const int64_t *indices, int64_t M, int q_given,
                                const char *codes_name, const char *out_name,
                                float *codes, float *out) {
  const int Q = rvq->p.num_quantizers;
  const int64_t d = rvq->p.layer.dim;
  VQC_TRY(vqc_rvq_codes_from_indices(rvq, indices, M, q_given, codes));
  VQC_TRY(vqc_conf_expect_f32(r, fx, codes_name, codes, (int64_t)Q * M * d));
  if (!out_name) return VQC_OK;
  VQC_TRY(vqc_rvq_output_from_indices(rvq, indices, M, q_given, out));
  return vqc_conf_expect_f32(r, fx, out_name, out, M * d);
}

static vqc_status handle_rvq_eval(const vqc_fixture *fx,
                                  vqc_conformance_result *r) {
  vqc_rvq_params p;
  VQC_TRY(read_rvq_params(fx, &p));
  const int Q = p.num_quantizers;
  const int64_t K = p.layer.codebook_size, d = p.layer.dim;
  const vqc_fixture_array *x, *dropped, *trunc;
  const float *codebooks;
  int64_t M;
  VQC_TRY(read_rows(fx, "x", d, &x, &M));
  VQC_TRY(read_f32_n(fx, "codebooks", (int64_t)Q * K * d, &codebooks));
  VQC_TRY(vqc_fixture_i64(fx, "dropped_indices", 0, NULL, &dropped));
  VQC_TRY(vqc_fixture_i64(fx, "truncated_indices", 0, NULL, &trunc));
  const int q_trunc = trunc->ndim ? (int)trunc->shape[trunc->ndim - 1] : 0;
  if (dropped->numel != M * Q || trunc->numel != M * q_trunc)
    return vqc_error(VQC_ESHAPE, "%s: dropped_indices / truncated_indices "
                     "must be (..., %d) and (..., Q') over x's %lld rows",
                     vqc_fixture_json_path(fx), Q, (long long)M);

  vqc_rvq rvq = {0};
  const size_t md = (size_t)(M * d + 1);
  int64_t *idx = malloc((size_t)(M * Q + 1) * sizeof(int64_t)); /* (M, Q) */
  float *quant = malloc(md * sizeof(float));                     /* (M, d) */
  float *out = malloc(md * sizeof(float));                       /* (M, d) */
  float *codes = malloc(md * (size_t)Q * sizeof(float));         /* (Q, M, d) */
  float *losses = malloc((size_t)Q * sizeof(float));             /* (Q,) */
  vqc_status s = VQC_OK;
  if (!idx || !quant || !out || !codes || !losses) {
    s = vqc_error(VQC_ENOMEM, "rvq_eval replay: %lld rows", (long long)M);
    goto done;
  }
  if ((s = vqc_rvq_init(&rvq, &p, codebooks)) ||
      (s = vqc_rvq_forward(&rvq, NULL, x->data, M, false, idx, quant, losses,
                           NULL)) ||
      (s = vqc_conf_expect_i64(r, fx, "indices", idx, M * Q)) ||
      (s = vqc_conf_expect_f32(r, fx, "quantized", quant, M * d)) ||
      (s = vqc_conf_expect_f32(r, fx, "losses", losses, Q)) ||
      (s = expect_decode(r, fx, &rvq, idx, M, Q, "all_codes", NULL, codes,
                         out)) ||
      (s = expect_decode(r, fx, &rvq, idx, M, Q, "codes_from_indices",
                         "output_from_indices", codes, out)) ||
      (s = expect_decode(r, fx, &rvq, dropped->data, M, Q,
                         "codes_from_dropped_indices",
                         "output_from_dropped_indices", codes, out)) ||
      (s = expect_decode(r, fx, &rvq, trunc->data, M, q_trunc,
                         "codes_from_truncated_indices", NULL, codes, out)))
    goto done;
done:
  vqc_rvq_free(&rvq);
  free(idx);
  free(quant);
  free(out);
  free(codes);
  free(losses);
  return s;
}

/* Compares the Q layers' state with codebooks/cluster_size/embed_avg_after_<st>. */
static vqc_status expect_rvq_state(vqc_conformance_result *r,
                                   const vqc_fixture *fx, vqc_rvq *rvq, int st,
                                   float *buf) {
  const int Q = rvq->p.num_quantizers;
  const int64_t K = rvq->p.layer.codebook_size, d = rvq->p.layer.dim;
  char name[96];
  for (int l = 0; l < Q; l++)
    memcpy(buf + l * K * d, vqc_vq_embed(&rvq->layers[l]),
           (size_t)(K * d) * sizeof(float));
  VQC_TRY(vqc_conf_expect_f32(r, fx, step_name(name, sizeof name,
                                               "codebooks_after", st),
                              buf, Q * K * d));
  for (int l = 0; l < Q; l++)
    memcpy(buf + l * K, vqc_vq_cluster_size(&rvq->layers[l]),
           (size_t)K * sizeof(float));
  VQC_TRY(vqc_conf_expect_f32(r, fx, step_name(name, sizeof name,
                                               "cluster_size_after", st),
                              buf, Q * K));
  for (int l = 0; l < Q; l++)
    memcpy(buf + l * K * d, vqc_vq_embed_avg(&rvq->layers[l]),
           (size_t)(K * d) * sizeof(float));
  return vqc_conf_expect_f32(r, fx, step_name(name, sizeof name,
                                              "embed_avg_after", st),
                             buf, Q * K * d);
}

/* Reads seed_<st> / dropout_cutoff_<st> into rec. */
static vqc_status read_dropout_draws(const vqc_fixture *fx, int st,
                                     recorded *rec) {
  char name[64];
  rec->has_seed = vqc_fixture_has_scalar(fx, step_name(name, sizeof name,
                                                       "seed", st));
  if (rec->has_seed) VQC_TRY(vqc_fixture_scalar_int(fx, name, &rec->seed));
  rec->has_cutoff = vqc_fixture_has_scalar(
      fx, step_name(name, sizeof name, "dropout_cutoff", st));
  if (rec->has_cutoff) VQC_TRY(vqc_fixture_scalar_int(fx, name, &rec->cutoff));
  rec->derived_cutoff = -1;
  return VQC_OK;
}

static vqc_status handle_rvq_dropout_train(const vqc_fixture *fx,
                                           vqc_conformance_result *r) {
  vqc_rvq_params p;
  VQC_TRY(read_rvq_params(fx, &p));
  int T;
  VQC_TRY(read_steps(fx, &T));
  const int Q = p.num_quantizers;
  const int64_t K = p.layer.codebook_size, d = p.layer.dim;
  const float *codebooks;
  VQC_TRY(read_f32_n(fx, "codebooks_before_0", (int64_t)Q * K * d, &codebooks));

  vqc_rvq rvq = {0};
  int64_t *idx = NULL;
  float *quant = NULL;
  float *losses = malloc((size_t)Q * sizeof(float));             /* (Q,) */
  float *state = malloc((size_t)(Q * K * d) * sizeof(float));    /* (Q, K, d) */
  recorded rec = {.case_json = vqc_fixture_json_path(fx)};
  const vqc_draws draws = recorded_draws_table(&rec);
  vqc_status s = VQC_OK;
  if (!losses || !state) {
    s = vqc_error(VQC_ENOMEM, "rvq replay: %d layers", Q);
    goto done;
  }
  if ((s = vqc_rvq_init(&rvq, &p, codebooks))) goto done;
  for (int st = 0; st < T; st++) {
    char name[96];
    const vqc_fixture_array *x;
    int64_t M;
    if ((s = read_rows(fx, step_name(name, sizeof name, "x", st), d, &x, &M)))
      goto done;
    free(idx);
    free(quant);
    idx = malloc((size_t)(M * Q + 1) * sizeof(int64_t)); /* (M, Q) */
    quant = malloc((size_t)(M * d + 1) * sizeof(float)); /* (M, d) */
    if (!idx || !quant) {
      s = vqc_error(VQC_ENOMEM, "rvq replay: %lld rows", (long long)M);
      goto done;
    }
    if ((s = read_dropout_draws(fx, st, &rec))) goto done;
    rec.rows_name = NULL;
    const vqc_vq_ctx ctx = {NULL, (uint64_t)st, &draws, 0};
    int last = -1;
    if ((s = vqc_rvq_forward(&rvq, &ctx, x->data, M, true, idx, quant, losses,
                             &last)))
      goto done;

    /* The cutoff: derived from the seed must equal the recorded one (either
     * before or after rounding up to multiple_of, which the README leaves
     * open; identical when multiple_of is 1). */
    if (rec.has_seed && rec.has_cutoff) {
      r->compared++;
      if (rec.derived_cutoff != rec.cutoff && last != rec.cutoff)
        vqc_conf_fail(r, "dropout_cutoff_%d: random.Random(%lld).randrange "
                      "gives %lld, the case records %lld", st,
                      (long long)rec.seed, (long long)rec.derived_cutoff,
                      (long long)rec.cutoff);
    }
    const int ran = last + 1 < Q ? last + 1 : Q;
    if (vqc_fixture_has_scalar(fx, step_name(name, sizeof name,
                                             "num_quantizers_run", st)) &&
        (s = vqc_conf_expect_scalar_exact(r, fx, name, ran)))
      goto done;
    if ((s = vqc_conf_expect_i64(r, fx, step_name(name, sizeof name, "indices",
                                                  st), idx, M * Q)) ||
        (s = vqc_conf_expect_f32(r, fx, step_name(name, sizeof name, "losses",
                                                  st), losses, Q)) ||
        (s = vqc_conf_expect_f32(r, fx, step_name(name, sizeof name,
                                                  "quantized", st),
                                 quant, M * d)) ||
        (s = expect_rvq_state(r, fx, &rvq, st, state)))
      goto done;
  }
done:
  vqc_rvq_free(&rvq);
  free(idx);
  free(quant);
  free(losses);
  free(state);
  return s;
}

const vqc_conformance_kind vqc_conformance_vq_kinds[] = {
    {"vq_eval", handle_vq_eval},
    {"vq_ema", handle_vq_ema},
    {"vq_dead_code", handle_vq_dead_code},
    {"vq_kmeans_init", handle_vq_kmeans_init},
    {"rvq_eval", handle_rvq_eval},
    {"rvq_dropout_train", handle_rvq_dropout_train},
};
const int vqc_conformance_vq_nkinds =
    (int)(sizeof vqc_conformance_vq_kinds / sizeof vqc_conformance_vq_kinds[0]);
