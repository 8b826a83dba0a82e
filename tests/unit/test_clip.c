/* test_clip.c: unit tests for vqc/clip.h, the CLIP-style contrastive loss
 * over the global batch and its two gathers (spec/bugs.md #5).
 *
 * Single process: a known answer, the gradients (features and logit scale)
 * against central finite differences, and invariance to row scaling.
 * Threads backend, W = 2, 3, 4 with uneven shards (one rank may have none):
 * with VQC_GATHER_WITH_GRAD the DDP-averaged gradient (the rank's gradient
 * divided by W, as DDP's average of parameter gradients does) equals the
 * single-process gradient on the concatenated global batch; with
 * VQC_GATHER_NO_GRAD it does not. The same through a linear encoder per
 * modality whose parameter gradients go through vqc_ddp_average_grads.
 *
 * Tolerances. The loss is computed in double from float32 features, so a
 * finite difference with the float-representable step actually taken
 * ((float)(x + h) - x, exact in double) is accurate to ~h^2 |f'''| (1e-8
 * with h = 1e-4, logit scale 5) and the analytic gradient is only rounded to
 * float32 once (6e-8 relative): we allow 1e-5 of the largest |gradient|.
 * Distributed against single-process, the features and their double math
 * are bit-identical; what differs is float32 summation (the gather's
 * backward sums W gradients, DDP sums W parameter gradients, against one
 * sum over all rows): a few 1e-7 relative. We allow 1e-5 of the largest
 * |gradient| (measured: at most 2e-7). The no-grad gather must miss by at
 * least NO_GRAD_MARGIN = 0.05 of it: for the global loss it returns exactly
 * 1/W of the right gradient (missing by 1 - 1/W >= 0.5; checked as such), for
 * the local loss it also points the wrong way (measured misses 0.08 to 0.52
 * in these cases), so five orders of magnitude separate the two verdicts. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/clip.h"
#include "vqc/comm.h"
#include "vqc/data.h"
#include "vqc/ddp.h"
#include "vqc/nn.h"
#include "vqc/rng.h"

#define FD_H 1e-4
#define GRAD_REL_TOL 1e-5
#define NO_GRAD_MARGIN 0.05
#define MAX_WORLD 4

/* max |a - b| / max |b| over n values (b the reference). */
static double rel_err(const float *a, const float *b, int64_t n) {
  double worst = 0.0, scale = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - (double)b[i]);
    if (e > worst) worst = e;
    if (fabs(b[i]) > scale) scale = fabs(b[i]);
  }
  cr_assert_gt(scale, 0.0, "reference gradient is all zero");
  return worst / scale;
}

static double sp_loss(const vqc_clip_config *cfg, const float *img,
                      const float *txt, int64_t n, int64_t d) {
  float *gi = calloc((size_t)(n * d), sizeof(float));
  float *gt = calloc((size_t)(n * d), sizeof(float));
  double loss;
  cr_assert_eq(vqc_clip_loss(NULL, cfg, img, txt, n, d, &loss, gi, gt, NULL),
               VQC_OK);
  free(gi);
  free(gt);
  return loss;
}

/* ---- single process ---- */

/* img = txt = identity rows: cos = I, S = s I, and every anchor's
 * cross-entropy is log(e^s + N - 1) - s in both directions. */
Test(clip, known_answer_on_orthonormal_features) {
  enum { N = 4 };
  float eye[N * N] = {0};
  for (int i = 0; i < N; i++) eye[i * N + i] = 1.0f;
  vqc_clip_config cfg = {VQC_GATHER_WITH_GRAD, false, 2.0f};
  double want = log(exp(2.0) + N - 1) - 2.0;
  cr_assert_leq(fabs(sp_loss(&cfg, eye, eye, N, N) - want), 1e-12);
  cfg.local_loss = true; /* W = 1: the local loss is the global one */
  cr_assert_leq(fabs(sp_loss(&cfg, eye, eye, N, N) - want), 1e-12);
}

Test(clip, gradients_match_finite_differences) {
  enum { N = 6, D = 5 };
  float img[N * D], txt[N * D], gi[N * D] = {0}, gt[N * D] = {0}, gs = 0.0f;
  vqc_pair_data_config data = {.seed = 5, .dim = D, .noise_std = 0.7f};
  cr_assert_eq(vqc_pair_data_shard(&data, 0, 0, N, img, txt), VQC_OK);
  vqc_clip_config cfg = {VQC_GATHER_WITH_GRAD, false, 5.0f};
  double loss;
  cr_assert_eq(vqc_clip_loss(NULL, &cfg, img, txt, N, D, &loss, gi, gt, &gs),
               VQC_OK);
  cr_assert_gt(loss, 0.0);

  float *feats[2] = {img, txt}, *grads[2] = {gi, gt};
  for (int m = 0; m < 2; m++) {
    double fd[N * D];
    for (int k = 0; k < N * D; k++) {
      float keep = feats[m][k];
      float up = (float)(keep + FD_H), down = (float)(keep - FD_H);
      feats[m][k] = up;
      double lu = sp_loss(&cfg, img, txt, N, D);
      feats[m][k] = down;
      double ld = sp_loss(&cfg, img, txt, N, D);
      feats[m][k] = keep;
      fd[k] = (lu - ld) / ((double)up - (double)down);
    }
    float fdf[N * D];
    for (int k = 0; k < N * D; k++) fdf[k] = (float)fd[k];
    double e = rel_err(grads[m], fdf, N * D);
    cr_assert_leq(e, GRAD_REL_TOL, "%s gradient off by %.3g of its max",
                  m ? "text" : "image", e);
  }
  /* the logit scale */
  vqc_clip_config c2 = cfg;
  c2.logit_scale = (float)(cfg.logit_scale + FD_H);
  double lu = sp_loss(&c2, img, txt, N, D);
  double hu = (double)c2.logit_scale;
  c2.logit_scale = (float)(cfg.logit_scale - FD_H);
  double ld = sp_loss(&c2, img, txt, N, D);
  double fd_s = (lu - ld) / (hu - (double)c2.logit_scale);
  cr_assert_leq(fabs(gs - fd_s), GRAD_REL_TOL * fabs(fd_s) + 1e-9,
                "dscale %.9g vs %.9g", gs, fd_s);
}

/* Rows are normalised: scaling one row by 3 leaves the loss unchanged and
 * divides that row's gradient by 3. Gradients are added, not overwritten. */
Test(clip, row_scale_invariance_and_accumulation) {
  enum { N = 5, D = 4 };
  float img[N * D], txt[N * D], g1[N * D] = {0}, t1[N * D] = {0};
  float g2[N * D] = {0}, t2[N * D] = {0};
  vqc_pair_data_config data = {.seed = 8, .dim = D, .noise_std = 0.5f};
  cr_assert_eq(vqc_pair_data_shard(&data, 1, 0, N, img, txt), VQC_OK);
  vqc_clip_config cfg = {VQC_GATHER_NO_GRAD, false, 10.0f};
  double l1, l2;
  cr_assert_eq(vqc_clip_loss(NULL, &cfg, img, txt, N, D, &l1, g1, t1, NULL),
               VQC_OK);
  for (int k = 0; k < D; k++) img[2 * D + k] *= 4.0f; /* exact in float */
  cr_assert_eq(vqc_clip_loss(NULL, &cfg, img, txt, N, D, &l2, g2, t2, NULL),
               VQC_OK);
  cr_assert_leq(fabs(l1 - l2), 1e-12 * l1);
  for (int k = 0; k < D; k++)
    cr_assert_leq(fabs(g2[2 * D + k] * 4.0f - g1[2 * D + k]),
                  1e-6 * fabs(g1[2 * D + k]) + 1e-9);
  /* a second call adds the same gradient again */
  float t3[N * D];
  memcpy(t3, t2, sizeof t3);
  cr_assert_eq(vqc_clip_loss(NULL, &cfg, img, txt, N, D, &l2, g2, t2, NULL),
               VQC_OK);
  for (int k = 0; k < N * D; k++) cr_assert_eq(t2[k], 2.0f * t3[k]);
  vqc_gather_mode mode;
  cr_assert_eq(vqc_gather_mode_from_name("no_grad", &mode), VQC_OK);
  cr_assert_eq(mode, VQC_GATHER_NO_GRAD);
  cr_assert_str_eq(vqc_gather_mode_name(VQC_GATHER_WITH_GRAD), "with_grad");
}

/* ---- threads backend: feature gradients ---- */

enum { D_FEAT = 6 };

typedef struct feat_case {
  vqc_clip_config cfg;
  vqc_pair_data_config data;
  int world;
  int64_t sizes[MAX_WORLD], offsets[MAX_WORLD], n;
  /* results, each rank writing its own slots */
  double loss[MAX_WORLD];
  float dscale[MAX_WORLD];
  float *gimg, *gtxt; /* (n, D) each rank's rows, already divided by W */
} feat_case;

static vqc_status feat_rank(vqc_comm *c, void *arg) {
  feat_case *fc = arg;
  int r = vqc_comm_rank(c), w = vqc_comm_size(c);
  int64_t rows = fc->sizes[r], off = fc->offsets[r];
  float *img = malloc((size_t)(rows * D_FEAT + 1) * sizeof(float));
  float *txt = malloc((size_t)(rows * D_FEAT + 1) * sizeof(float));
  float *gi = calloc((size_t)(rows * D_FEAT + 1), sizeof(float));
  float *gt = calloc((size_t)(rows * D_FEAT + 1), sizeof(float));
  float ds = 0.0f;
  vqc_status s = vqc_pair_data_shard(&fc->data, 3, r, rows, img, txt);
  if (s == VQC_OK)
    s = vqc_clip_loss(c, &fc->cfg, img, txt, rows, D_FEAT, &fc->loss[r], gi,
                      gt, &ds);
  for (int64_t k = 0; k < rows * D_FEAT; k++) {
    fc->gimg[off * D_FEAT + k] = gi[k] / (float)w;
    fc->gtxt[off * D_FEAT + k] = gt[k] / (float)w;
  }
  fc->dscale[r] = ds;
  free(img);
  free(txt);
  free(gi);
  free(gt);
  return s;
}

/* Runs one case on `world` threads and checks it against one process on the
 * global batch. */
static void check_features(int world, vqc_split_rule rule, int64_t n,
                           vqc_gather_mode gather, bool local_loss) {
  feat_case fc;
  memset(&fc, 0, sizeof fc);
  fc.cfg = (vqc_clip_config){gather, local_loss, 1.0f / 0.07f};
  fc.data = (vqc_pair_data_config){.seed = 77, .dim = D_FEAT, .noise_std = 1.0f};
  fc.world = world;
  fc.n = n;
  cr_assert_eq(vqc_shard_sizes(n, world, rule, fc.sizes), VQC_OK);
  for (int r = 1; r < world; r++) fc.offsets[r] = fc.offsets[r - 1] + fc.sizes[r - 1];
  fc.gimg = calloc((size_t)(n * D_FEAT), sizeof(float));
  fc.gtxt = calloc((size_t)(n * D_FEAT), sizeof(float));
  vqc_status statuses[MAX_WORLD];
  cr_assert_eq(vqc_threads_run(world, 30.0, feat_rank, &fc, statuses), VQC_OK,
               "%s", vqc_last_error());

  /* single process on the concatenated batch */
  float *img = malloc((size_t)(n * D_FEAT) * sizeof(float));
  float *txt = malloc((size_t)(n * D_FEAT) * sizeof(float));
  float *gi = calloc((size_t)(n * D_FEAT), sizeof(float));
  float *gt = calloc((size_t)(n * D_FEAT), sizeof(float));
  float ds = 0.0f;
  double loss;
  cr_assert_eq(vqc_pair_data_global(&fc.data, 3, world, fc.sizes, img, txt), VQC_OK);
  vqc_clip_config sp = {VQC_GATHER_WITH_GRAD, false, fc.cfg.logit_scale};
  cr_assert_eq(vqc_clip_loss(NULL, &sp, img, txt, n, D_FEAT, &loss, gi, gt, &ds),
               VQC_OK);

  const char *what = local_loss ? "local" : "global";
  double mean_loss = 0.0, mean_ds = 0.0;
  for (int r = 0; r < world; r++) {
    mean_loss += fc.loss[r] / world;
    mean_ds += (double)fc.dscale[r] / world;
    if (!local_loss)
      cr_assert_eq(fc.loss[r], loss, "W=%d rank %d: the global loss must be "
                   "the single-process loss bit for bit", world, r);
  }
  cr_assert_leq(fabs(mean_loss - loss), 1e-12 * loss, "W=%d %s: mean loss %.17g "
                "vs %.17g", world, what, mean_loss, loss);

  double ei = rel_err(fc.gimg, gi, n * D_FEAT);
  double et = rel_err(fc.gtxt, gt, n * D_FEAT);
  double es = fabs(mean_ds - ds) / fabs(ds);
  if (gather == VQC_GATHER_WITH_GRAD) {
    cr_assert_leq(ei, GRAD_REL_TOL, "W=%d %s with_grad: image grads off by %.3g",
                  world, what, ei);
    cr_assert_leq(et, GRAD_REL_TOL, "W=%d %s with_grad: text grads off by %.3g",
                  world, what, et);
    cr_assert_leq(es, GRAD_REL_TOL, "W=%d %s with_grad: dscale off by %.3g",
                  world, what, es);
  } else {
    cr_assert_geq(ei, NO_GRAD_MARGIN, "W=%d %s no_grad: image grads only %.3g "
                  "off; the bug would go unseen", world, what, ei);
    cr_assert_geq(et, NO_GRAD_MARGIN, "W=%d %s no_grad: text grads only %.3g off",
                  world, what, et);
    if (!local_loss) {
      /* every rank computed the whole global loss but kept only its own
       * share: exactly 1/W of the single-process gradient */
      for (int64_t k = 0; k < n * D_FEAT; k++) {
        fc.gimg[k] *= (float)world;
        fc.gtxt[k] *= (float)world;
      }
      cr_assert_leq(rel_err(fc.gimg, gi, n * D_FEAT), GRAD_REL_TOL);
      cr_assert_leq(rel_err(fc.gtxt, gt, n * D_FEAT), GRAD_REL_TOL);
    }
  }
  free(img);
  free(txt);
  free(gi);
  free(gt);
  free(fc.gimg);
  free(fc.gtxt);
}

/* W=2 fill 9 -> 5,4; W=3 ramp 10 -> 1,4,5; W=4 fill 9 -> 3,3,3,0 (an
 * empty rank); W=4 ramp 10 -> 1,2,3,4. */
#define FEATURE_CASES(gather, local)                         \
  check_features(2, VQC_SPLIT_FILL, 9, (gather), (local));   \
  check_features(3, VQC_SPLIT_RAMP, 10, (gather), (local));  \
  check_features(4, VQC_SPLIT_FILL, 9, (gather), (local));   \
  check_features(4, VQC_SPLIT_RAMP, 10, (gather), (local))

Test(clip, with_grad_global_loss_equals_single_process) {
  FEATURE_CASES(VQC_GATHER_WITH_GRAD, false);
}
Test(clip, with_grad_local_loss_equals_single_process) {
  FEATURE_CASES(VQC_GATHER_WITH_GRAD, true);
}
Test(clip, no_grad_global_loss_differs) {
  FEATURE_CASES(VQC_GATHER_NO_GRAD, false);
}
Test(clip, no_grad_local_loss_differs) {
  FEATURE_CASES(VQC_GATHER_NO_GRAD, true);
}

/* ---- threads backend: through a linear encoder and DDP ---- */

enum { D_IN = 5, D_OUT = 4 };

typedef struct enc_case {
  vqc_clip_config cfg;
  vqc_pair_data_config data;
  int64_t sizes[MAX_WORLD];
  /* each rank's averaged gradients: (D_OUT*D_IN + D_OUT) per modality */
  float grads[MAX_WORLD][2 * (D_OUT * D_IN + D_OUT)];
} enc_case;

/* Two linear encoders (image, text) with identical init on every rank,
 * forward, contrastive loss, backward, then (with a comm) DDP averaging.
 * Copies the resulting gradients (weight then bias, image then text) to out. */
static vqc_status encode_step(vqc_comm *c, const enc_case *ec, int64_t rows,
                              const float *xi, const float *xt,
                              float *out) {
  vqc_rng init;
  vqc_rng_init(&init, 11, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
  vqc_linear li, lt;
  vqc_param_list params;
  vqc_param_list_init(&params);
  VQC_TRY(vqc_linear_init(&li, D_IN, D_OUT, &init));
  VQC_TRY(vqc_linear_init(&lt, D_IN, D_OUT, &init));
  VQC_TRY(vqc_linear_register(&li, "image.", &params));
  VQC_TRY(vqc_linear_register(&lt, "text.", &params));
  size_t nf = (size_t)(rows * D_OUT + 1);
  float *fi = malloc(nf * sizeof(float)), *ft = malloc(nf * sizeof(float));
  float *gi = calloc(nf, sizeof(float)), *gt = calloc(nf, sizeof(float));
  double loss;
  vqc_linear_forward(&li, xi, rows, fi);
  vqc_linear_forward(&lt, xt, rows, ft);
  vqc_status s = vqc_clip_loss(c, &ec->cfg, fi, ft, rows, D_OUT, &loss, gi, gt,
                               NULL);
  if (s == VQC_OK) {
    vqc_linear_backward(&li, xi, gi, rows, NULL);
    vqc_linear_backward(&lt, xt, gt, rows, NULL);
    s = vqc_ddp_average_grads(c, &params, NULL);
  }
  size_t off = 0;
  for (int i = 0; i < params.count; i++) {
    memcpy(out + off, params.items[i].grad,
           (size_t)params.items[i].numel * sizeof(float));
    off += (size_t)params.items[i].numel;
  }
  free(fi);
  free(ft);
  free(gi);
  free(gt);
  vqc_linear_free(&li);
  vqc_linear_free(&lt);
  vqc_param_list_free(&params);
  return s;
}

static vqc_status enc_rank(vqc_comm *c, void *arg) {
  enc_case *ec = arg;
  int r = vqc_comm_rank(c);
  int64_t rows = ec->sizes[r];
  size_t n = (size_t)(rows * D_IN + 1);
  float *xi = malloc(n * sizeof(float)), *xt = malloc(n * sizeof(float));
  vqc_status s = vqc_pair_data_shard(&ec->data, 0, r, rows, xi, xt);
  if (s == VQC_OK) s = encode_step(c, ec, rows, xi, xt, ec->grads[r]);
  free(xi);
  free(xt);
  return s;
}

static void check_encoder(int world, vqc_split_rule rule, int64_t n,
                          vqc_gather_mode gather, bool local_loss) {
  enum { NG = 2 * (D_OUT * D_IN + D_OUT) };
  enc_case ec;
  memset(&ec, 0, sizeof ec);
  ec.cfg = (vqc_clip_config){gather, local_loss, 1.0f / 0.07f};
  ec.data = (vqc_pair_data_config){.seed = 31, .dim = D_IN, .noise_std = 0.5f};
  cr_assert_eq(vqc_shard_sizes(n, world, rule, ec.sizes), VQC_OK);
  cr_assert_eq(vqc_threads_run(world, 30.0, enc_rank, &ec, NULL), VQC_OK, "%s",
               vqc_last_error());
  for (int r = 1; r < world; r++)
    cr_assert_eq(memcmp(ec.grads[r], ec.grads[0], sizeof ec.grads[0]), 0,
                 "W=%d: rank %d's averaged gradients differ from rank 0's",
                 world, r);

  float *xi = malloc((size_t)(n * D_IN) * sizeof(float));
  float *xt = malloc((size_t)(n * D_IN) * sizeof(float));
  float sp[NG];
  cr_assert_eq(vqc_pair_data_global(&ec.data, 0, world, ec.sizes, xi, xt), VQC_OK);
  enc_case single = ec;
  single.cfg.gather = VQC_GATHER_WITH_GRAD;
  single.cfg.local_loss = false;
  cr_assert_eq(encode_step(NULL, &single, n, xi, xt, sp), VQC_OK);
  double e = rel_err(ec.grads[0], sp, NG);
  const char *what = local_loss ? "local" : "global";
  if (gather == VQC_GATHER_WITH_GRAD)
    cr_assert_leq(e, GRAD_REL_TOL, "W=%d %s with_grad: parameter gradients off "
                  "by %.3g of their max", world, what, e);
  else
    cr_assert_geq(e, NO_GRAD_MARGIN, "W=%d %s no_grad: only %.3g off", world,
                  what, e);
  free(xi);
  free(xt);
}

Test(clip, ddp_encoder_gradients_with_grad_equal_single_process) {
  check_encoder(3, VQC_SPLIT_RAMP, 10, VQC_GATHER_WITH_GRAD, false);
  check_encoder(4, VQC_SPLIT_FILL, 9, VQC_GATHER_WITH_GRAD, false);
  check_encoder(3, VQC_SPLIT_RAMP, 10, VQC_GATHER_WITH_GRAD, true);
  check_encoder(2, VQC_SPLIT_EVEN, 8, VQC_GATHER_WITH_GRAD, true);
}

Test(clip, ddp_encoder_gradients_no_grad_differ) {
  check_encoder(3, VQC_SPLIT_RAMP, 10, VQC_GATHER_NO_GRAD, false);
  check_encoder(4, VQC_SPLIT_FILL, 9, VQC_GATHER_NO_GRAD, false);
  check_encoder(3, VQC_SPLIT_RAMP, 10, VQC_GATHER_NO_GRAD, true);
  check_encoder(2, VQC_SPLIT_EVEN, 8, VQC_GATHER_NO_GRAD, true);
}
