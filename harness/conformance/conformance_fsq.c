/* conformance_fsq.c: the conformance handler for kind "fsq".
 *
 * Replays z through our FSQ (lib/src/quant/fsq.c) with the case's params and
 * compares, exactly as the fixture contract asks, every FSQ output: out,
 * indices, codes_from_indices, level_indices, implicit_codebook and basis.
 * Shapes come from case.json, laid out as the library lays them out, with
 * d = len(levels), C = params.num_codebooks (1 when absent), W = C*d:
 *   channel last (the fixtures' (batch, seq, dim)): z, out,
 *     codes_from_indices (B, S..., W); indices (B, S...) for C == 1 and
 *     (B, S..., C) otherwise; level_indices (indices..., d);
 *   channel first (z of 4 or more dims, image/video, or params.channel_first
 *     true): z, out, codes_from_indices (B, W, S...); indices and
 *     level_indices as above (channel last).
 * The library moves channel-first inputs to channel last before quantizing
 * and back afterwards; so does the replay. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "vqc/fsq.h"

/* Everything the replay allocates, freed in one place. */
typedef struct fsq_replay {
  int64_t *levels64;     /* (d,) from params */
  float *z_last;         /* (M, C*d) z moved to channel last, if needed */
  float *out;            /* (M, C*d) */
  float *out_first;      /* out moved back to channel first, if needed */
  int32_t *indices;      /* (M*C,) */
  float *codes;          /* (M, C*d) decoded from our indices */
  int32_t *level_idx;    /* (M*C, d) */
  float *codebook;       /* (K, d) */
  int64_t *wide;         /* int64 copy for comparisons; max(M*C*d, K*d, d) */
} fsq_replay;

static void replay_free(fsq_replay *p) {
  free(p->levels64);
  free(p->z_last);
  free(p->out);
  free(p->out_first);
  free(p->indices);
  free(p->codes);
  free(p->level_idx);
  free(p->codebook);
  free(p->wide);
}

/* Widens n int32 values into p->wide (the fixtures store int64). */
static const int64_t *widen(fsq_replay *p, const int32_t *v, int64_t n) {
  for (int64_t i = 0; i < n; i++) p->wide[i] = v[i];
  return p->wide;
}

/* Builds the FSQ from params; fails with the field named. */
static vqc_status fsq_from_params(const vqc_fixture *fx, fsq_replay *p,
                                  vqc_fsq *q) {
  const char *jp = vqc_fixture_json_path(fx);
  int64_t d = 0, C = 1;
  bool symmetric = false;
  double eps = 1e-3; /* the library's default bound_eps */
  VQC_TRY(vqc_fixture_param_int_list(fx, "levels", &p->levels64, &d));
  VQC_TRY(vqc_fixture_param_bool_or(fx, "preserve_symmetry", false,
                                    &symmetric));
  VQC_TRY(vqc_fixture_param_double_or(fx, "bound_eps", 1e-3, &eps));
  VQC_TRY(vqc_fixture_param_int_or(fx, "num_codebooks", 1, &C));
  if (d < 1 || d > VQC_FSQ_MAX_DIMS)
    return vqc_error(VQC_EPARSE, "%s: params.levels: %lld entries, expected "
                     "1..%d",
                     jp, (long long)d, VQC_FSQ_MAX_DIMS);
  if (C < 1 || C > 4096)
    return vqc_error(VQC_EPARSE, "%s: params.num_codebooks: %lld, expected "
                     "1..4096",
                     jp, (long long)C);
  int32_t levels[VQC_FSQ_MAX_DIMS];
  for (int64_t i = 0; i < d; i++) {
    if (p->levels64[i] < 2 || p->levels64[i] > INT32_MAX)
      return vqc_error(VQC_EPARSE, "%s: params.levels[%lld]: %lld, expected "
                       "an integer >= 2",
                       jp, (long long)i, (long long)p->levels64[i]);
    levels[i] = (int32_t)p->levels64[i];
  }
  vqc_status s = vqc_fsq_init(q, levels, (int)d, (int)C, symmetric, eps);
  if (s != VQC_OK) {
    char why[512]; /* copy: vqc_error reuses the last-error buffer */
    snprintf(why, sizeof why, "%s", vqc_last_error());
    return vqc_error(s, "%s: params: %s", jp, why);
  }
  return VQC_OK;
}

/* Channel first <-> channel last for B blocks of (W, S) <-> (S, W):
 * to_last: dst[b][s][w] = src[b][w][s]; else the inverse. */
static void move_channel(const float *src, float *dst, int64_t B, int64_t W,
                         int64_t S, bool to_last) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t w = 0; w < W; w++)
      for (int64_t s = 0; s < S; s++) {
        const int64_t first = (b * W + w) * S + s, last = (b * S + s) * W + w;
        if (to_last) dst[last] = src[first];
        else dst[first] = src[last];
      }
}

static vqc_status handle_fsq(const vqc_fixture *fx, vqc_conformance_result *r) {
  fsq_replay p = {0};
  vqc_fsq q;
  vqc_status s = fsq_from_params(fx, &p, &q);
  if (s != VQC_OK) goto done;
  const int d = q.d, C = q.num_codebooks, width = vqc_fsq_width(&q);
  const int64_t K = q.codebook_size;

  /* Input z: channel last (B, S..., W) or channel first (B, W, S...). */
  const vqc_fixture_array *z;
  s = vqc_fixture_f32(fx, "z", 0, NULL, &z);
  if (s != VQC_OK) goto done;
  bool channel_first = false;
  s = vqc_fixture_param_bool_or(fx, "channel_first", false, &channel_first);
  if (s != VQC_OK) goto done;
  channel_first = channel_first || z->ndim >= 4; /* image/video, as upstream */
  const int channel_axis = channel_first ? 1 : z->ndim - 1;
  if (z->ndim < 2 || z->shape[channel_axis] != width) {
    s = vqc_error(VQC_ESHAPE,
                  "%s: arrays.z: expected at least 2 dimensions with "
                  "num_codebooks * len(levels) = %d features in dimension %d "
                  "(%s; input projections are not part of the reference)",
                  vqc_fixture_json_path(fx), width, channel_axis,
                  channel_first ? "channel first" : "channel last");
    goto done;
  }
  const int64_t M = z->numel / width;     /* rows of W features */
  const int64_t B = z->shape[0], S = M / (B ? B : 1); /* channel first */
  if (vqc_fixture_has_param(fx, "codebook_size")) {
    int64_t want_K;
    s = vqc_fixture_param_int(fx, "codebook_size", &want_K);
    if (s != VQC_OK) goto done;
    r->compared++;
    if (want_K != K)
      vqc_conf_fail(r, "params.codebook_size is %lld but prod(levels) is "
                    "%lld",
                    (long long)want_K, (long long)K);
  }

  /* Expected shapes of the outputs. "lead" is z's shape without the
   * feature dimension: (B, S...) either way. */
  int64_t lead[VQC_FIXTURE_MAX_DIMS];
  int nlead = 0;
  for (int i = 0; i < z->ndim; i++)
    if (i != channel_axis) lead[nlead++] = z->shape[i];
  int64_t shape[VQC_FIXTURE_MAX_DIMS + 1];
  for (int i = 0; i < z->ndim; i++) shape[i] = z->shape[i];
  const int idx_ndim = C == 1 ? nlead : nlead + 1;
  int64_t idx_shape[VQC_FIXTURE_MAX_DIMS + 1];
  for (int i = 0; i < nlead; i++) idx_shape[i] = lead[i];
  if (C > 1) idx_shape[nlead] = C;
  int64_t lvl_shape[VQC_FIXTURE_MAX_DIMS + 1];
  for (int i = 0; i < idx_ndim; i++) lvl_shape[i] = idx_shape[i];
  lvl_shape[idx_ndim] = d;
  const int64_t cb_shape[2] = {K, d}, basis_shape[1] = {d};

  const struct {
    const char *name;
    int ndim;
    const int64_t *shape;
  } outputs[] = {
      {"out", z->ndim, shape},
      {"indices", idx_ndim, idx_shape},
      {"codes_from_indices", z->ndim, shape},
      {"level_indices", idx_ndim + 1, lvl_shape},
      {"implicit_codebook", 2, cb_shape},
      {"basis", 1, basis_shape},
  };
  for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
    const vqc_fixture_array *a = vqc_fixture_find(fx, outputs[i].name);
    if (!a) {
      s = vqc_error(VQC_EPARSE, "%s: arrays.%s: missing, every fsq case has "
                    "it",
                    vqc_fixture_json_path(fx), outputs[i].name);
      goto done;
    }
    s = vqc_fixture_check_shape(fx, a, outputs[i].ndim, outputs[i].shape);
    if (s != VQC_OK) goto done;
  }

  const size_t n_out = (size_t)M * (size_t)width;
  const size_t n_idx = (size_t)M * (size_t)C;
  size_t n_wide = n_out > (size_t)K * d ? n_out : (size_t)K * d;
  p.out = malloc((n_out + 1) * sizeof *p.out);
  if (channel_first) {
    p.z_last = malloc((n_out + 1) * sizeof *p.z_last);
    p.out_first = malloc((n_out + 1) * sizeof *p.out_first);
    if (!p.z_last || !p.out_first) {
      s = vqc_error(VQC_ENOMEM, "fsq replay: out of memory");
      goto done;
    }
  }
  p.indices = malloc((n_idx + 1) * sizeof *p.indices);
  p.codes = malloc((n_out + 1) * sizeof *p.codes);
  p.level_idx = malloc((n_out + 1) * sizeof *p.level_idx);
  p.codebook = malloc(((size_t)K * d + 1) * sizeof *p.codebook);
  p.wide = malloc((n_wide + 1) * sizeof *p.wide);
  if (!p.out || !p.indices || !p.codes || !p.level_idx || !p.codebook ||
      !p.wide) {
    s = vqc_error(VQC_ENOMEM, "fsq replay: out of memory (K = %lld)",
                  (long long)K);
    goto done;
  }

  /* The replay: forward, then decode our own indices (channel last). */
  const float *z_rows = z->data;
  if (channel_first) {
    move_channel(z->data, p.z_last, B, width, S, true);
    z_rows = p.z_last;
  }
  s = vqc_fsq_quantize(&q, z_rows, M, p.out, p.indices);
  if (s == VQC_OK) s = vqc_fsq_indices_to_codes(&q, p.indices, M, p.codes);
  if (s == VQC_OK && channel_first) {
    /* out and codes_from_indices go back to z's layout. */
    move_channel(p.out, p.out_first, B, width, S, false);
    memcpy(p.out, p.out_first, n_out * sizeof *p.out);
    move_channel(p.codes, p.out_first, B, width, S, false);
    memcpy(p.codes, p.out_first, n_out * sizeof *p.codes);
  }
  if (s == VQC_OK)
    s = vqc_fsq_level_indices(&q, p.indices, (int64_t)n_idx, p.level_idx);
  if (s == VQC_OK) s = vqc_fsq_implicit_codebook(&q, p.codebook);
  if (s != VQC_OK) goto done;

  /* All FSQ outputs are compared exactly (fixture contract). */
  s = vqc_conf_expect_f32_exact(r, fx, "out", p.out, (int64_t)n_out);
  if (s == VQC_OK)
    s = vqc_conf_expect_i64(r, fx, "indices",
                            widen(&p, p.indices, (int64_t)n_idx),
                            (int64_t)n_idx);
  if (s == VQC_OK)
    s = vqc_conf_expect_f32_exact(r, fx, "codes_from_indices", p.codes,
                                  (int64_t)n_out);
  if (s == VQC_OK)
    s = vqc_conf_expect_i64(r, fx, "level_indices",
                            widen(&p, p.level_idx, (int64_t)n_out),
                            (int64_t)n_out);
  if (s == VQC_OK)
    s = vqc_conf_expect_f32_exact(r, fx, "implicit_codebook", p.codebook,
                                  K * d);
  if (s == VQC_OK)
    s = vqc_conf_expect_i64(r, fx, "basis", widen(&p, q.basis, d), d);
done:
  replay_free(&p);
  return s;
}

const vqc_conformance_kind vqc_conformance_fsq_kinds[] = {
    {"fsq", handle_fsq},
};
const int vqc_conformance_fsq_nkinds =
    (int)(sizeof vqc_conformance_fsq_kinds /
          sizeof vqc_conformance_fsq_kinds[0]);
