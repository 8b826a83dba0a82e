/* clip_loss.c: the CLIP-style contrastive loss of clip.h over the global
 * batch, with the correct (autograd-aware) feature gather and the OpenCLIP
 * no-gradient gather of spec/bugs.md #5. The math runs in double on the
 * gathered float32 features; see clip.h for the definitions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/clip.h"

/* F.normalize's default eps: x / max(|x|, eps). */
#define CLIP_NORM_EPS 1e-12

const char *vqc_gather_mode_name(vqc_gather_mode m) {
  switch (m) {
  case VQC_GATHER_WITH_GRAD: return "with_grad";
  case VQC_GATHER_NO_GRAD: return "no_grad";
  }
  return "?";
}

vqc_status vqc_gather_mode_from_name(const char *name, vqc_gather_mode *out) {
  if (name != NULL && strcmp(name, "with_grad") == 0) {
    *out = VQC_GATHER_WITH_GRAD;
    return VQC_OK;
  }
  if (name != NULL && strcmp(name, "no_grad") == 0) {
    *out = VQC_GATHER_NO_GRAD;
    return VQC_OK;
  }
  return vqc_error(VQC_EINVAL,
                   "unknown gather mode '%s' (expected with_grad or no_grad)",
                   name ? name : "(null)");
}

/* Everything one call needs, sized for the global batch; one allocation per
 * array, all freed by scratch_free. */
typedef struct scratch {
  size_t *counts;  /* (W) elements each rank sends to a feature gather */
  float *all_img;  /* (N, D) gathered features, rank order */
  float *all_txt;
  double *nimg;    /* (N, D) normalised rows */
  double *ntxt;
  double *img_norm; /* (N) the max(|x|, eps) each row was divided by */
  double *txt_norm;
  double *sim;     /* (N, N) cosines, then the gradient for them */
  double *row_lse; /* (N) logsumexp of S[i, :] */
  double *col_lse; /* (N) logsumexp of S[:, j] */
  double *dn;      /* (N, D) gradient at a normalised feature */
  float *gimg;     /* (N, D) float32 gradient for every gathered row */
  float *gtxt;
} scratch;

static void scratch_free(scratch *s) {
  free(s->counts);
  free(s->all_img);
  free(s->all_txt);
  free(s->nimg);
  free(s->ntxt);
  free(s->img_norm);
  free(s->txt_norm);
  free(s->sim);
  free(s->row_lse);
  free(s->col_lse);
  free(s->dn);
  free(s->gimg);
  free(s->gtxt);
}

static vqc_status scratch_alloc(scratch *s, int world, int64_t n, int64_t d) {
  size_t nd = (size_t)(n * d) > 0 ? (size_t)(n * d) : 1;
  size_t nn = (size_t)(n * n) > 0 ? (size_t)(n * n) : 1;
  size_t n1 = n > 0 ? (size_t)n : 1;
  s->counts = malloc((size_t)world * sizeof *s->counts);
  s->all_img = malloc(nd * sizeof(float));
  s->all_txt = malloc(nd * sizeof(float));
  s->nimg = malloc(nd * sizeof(double));
  s->ntxt = malloc(nd * sizeof(double));
  s->img_norm = malloc(n1 * sizeof(double));
  s->txt_norm = malloc(n1 * sizeof(double));
  s->sim = malloc(nn * sizeof(double));
  s->row_lse = malloc(n1 * sizeof(double));
  s->col_lse = malloc(n1 * sizeof(double));
  /* calloc: also keeps GCC from warning that dn may be read unset. */
  s->dn = calloc(nd, sizeof(double));
  s->gimg = malloc(nd * sizeof(float));
  s->gtxt = malloc(nd * sizeof(float));
  if (!s->counts || !s->all_img || !s->all_txt || !s->nimg || !s->ntxt ||
      !s->img_norm || !s->txt_norm || !s->sim || !s->row_lse || !s->col_lse ||
      !s->dn || !s->gimg || !s->gtxt)
    return vqc_error(VQC_ENOMEM, "clip_loss: scratch for a global batch of "
                                 "%lld rows", (long long)n);
  return VQC_OK;
}

/* out (n, d) = rows of x divided by max(|row|, eps); norm[i] = that divisor. */
static void normalise_rows(const float *x, int64_t n, int64_t d, double *out,
                           double *norm) {
  for (int64_t i = 0; i < n; i++) {
    double sq = 0.0;
    for (int64_t k = 0; k < d; k++) sq += (double)x[i * d + k] * x[i * d + k];
    double nrm = sqrt(sq);
    norm[i] = nrm > CLIP_NORM_EPS ? nrm : CLIP_NORM_EPS;
    for (int64_t k = 0; k < d; k++) out[i * d + k] = (double)x[i * d + k] / norm[i];
  }
}

/* Backward of normalise_rows: g (n, d) float32 = dx for dn = d loss / d out.
 * Where |x| > eps, dx = (dn - out (out . dn)) / |x|; where the clamp was
 * active the divisor is a constant, so dx = dn / eps. */
static void normalise_backward(const double *out, const double *norm,
                               const double *dn, int64_t n, int64_t d,
                               float *g) {
  for (int64_t i = 0; i < n; i++) {
    const double *o = out + i * d, *gi = dn + i * d;
    double dot = 0.0;
    if (norm[i] > CLIP_NORM_EPS)
      for (int64_t k = 0; k < d; k++) dot += o[k] * gi[k];
    for (int64_t k = 0; k < d; k++)
      g[i * d + k] = (float)((gi[k] - o[k] * dot) / norm[i]);
  }
}

/* Numerically stable log(sum(exp(scale * v[k * stride]))) over k < n. */
static double logsumexp(const double *v, int64_t n, int64_t stride,
                        double scale) {
  double m = -INFINITY;
  for (int64_t k = 0; k < n; k++)
    if (scale * v[k * stride] > m) m = scale * v[k * stride];
  double sum = 0.0;
  for (int64_t k = 0; k < n; k++) sum += exp(scale * v[k * stride] - m);
  return m + log(sum);
}

/* The loss and its gradient on the gathered, normalised batch; comm-free.
 * Anchors are rows [a0, a1), each weighted w. Writes *loss, *dscale and, in
 * s->gimg and s->gtxt, d loss / d(every gathered raw row) in float32. */
static void contrastive(scratch *s, int64_t n, int64_t d, double scale,
                        int64_t a0, int64_t a1, double w, double *loss,
                        double *dscale) {
  double *sim = s->sim;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      double dot = 0.0;
      for (int64_t k = 0; k < d; k++) dot += s->nimg[i * d + k] * s->ntxt[j * d + k];
      sim[i * n + j] = dot;
    }

  /* image -> text uses row a of S, text -> image column a. */
  double total = 0.0;
  for (int64_t a = a0; a < a1; a++) {
    s->row_lse[a] = logsumexp(sim + a * n, n, 1, scale);
    s->col_lse[a] = logsumexp(sim + a, n, n, scale);
    double pos = scale * sim[a * n + a];
    total += w * (s->row_lse[a] - pos) + w * (s->col_lse[a] - pos);
  }
  *loss = total;

  /* dS[i][j] = w (softmax_row_i(j) - [i == j]) for anchor rows i, plus
   * w (softmax_col_j(i) - [i == j]) for anchor columns j. The cosine array
   * becomes d loss / d cos = scale * dS after its use for dscale. */
  double ds_total = 0.0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      double cosv = sim[i * n + j], sij = scale * cosv, g = 0.0;
      if (i >= a0 && i < a1) g += w * (exp(sij - s->row_lse[i]) - (i == j));
      if (j >= a0 && j < a1) g += w * (exp(sij - s->col_lse[j]) - (i == j));
      ds_total += g * cosv;
      sim[i * n + j] = scale * g;
    }
  *dscale = ds_total;

  /* d nimg = dcos ntxt; d ntxt = dcos^T nimg; then through the norms. */
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < d; k++) {
      double acc = 0.0;
      for (int64_t j = 0; j < n; j++) acc += sim[i * n + j] * s->ntxt[j * d + k];
      s->dn[i * d + k] = acc;
    }
  normalise_backward(s->nimg, s->img_norm, s->dn, n, d, s->gimg);
  for (int64_t j = 0; j < n; j++)
    for (int64_t k = 0; k < d; k++) {
      double acc = 0.0;
      for (int64_t i = 0; i < n; i++) acc += sim[i * n + j] * s->nimg[i * d + k];
      s->dn[j * d + k] = acc;
    }
  normalise_backward(s->ntxt, s->txt_norm, s->dn, n, d, s->gtxt);
}

vqc_status vqc_clip_loss(vqc_comm *c, const vqc_clip_config *cfg,
                         const float *img, const float *txt, int64_t rows,
                         int64_t dim, double *loss, float *dimg, float *dtxt,
                         float *dscale) {
  if (cfg == NULL || loss == NULL || rows < 0 || dim < 1 ||
      (rows > 0 && (img == NULL || txt == NULL || dimg == NULL || dtxt == NULL)))
    return vqc_error(VQC_EINVAL, "clip_loss: bad arguments (rows %lld, dim %lld)",
                     (long long)rows, (long long)dim);
  if (cfg->gather != VQC_GATHER_WITH_GRAD && cfg->gather != VQC_GATHER_NO_GRAD)
    return vqc_error(VQC_EINVAL, "clip_loss: unknown gather mode %d",
                     (int)cfg->gather);
  const int world = c != NULL ? vqc_comm_size(c) : 1;
  const int rank = c != NULL ? vqc_comm_rank(c) : 0;
  *loss = 0.0;

  /* Every rank's row count, so uneven shards gather correctly. */
  int64_t *rows_of = malloc((size_t)world * sizeof *rows_of);
  if (rows_of == NULL) return vqc_error(VQC_ENOMEM, "clip_loss");
  int64_t mine = rows;
  vqc_status st = VQC_OK;
  if (c != NULL)
    st = vqc_all_gather(c, &mine, rows_of, 1, VQC_I64);
  else
    rows_of[0] = rows;
  int64_t n = 0, offset = 0;
  for (int r = 0; r < world && st == VQC_OK; r++) {
    if (r == rank) offset = n;
    n += rows_of[r];
  }
  if (st != VQC_OK || n == 0) {
    free(rows_of);
    return st;
  }

  scratch s;
  memset(&s, 0, sizeof s);
  st = scratch_alloc(&s, world, n, dim);
  if (st != VQC_OK) goto done;
  for (int r = 0; r < world; r++) s.counts[r] = (size_t)(rows_of[r] * dim);

  /* Forward gather of both modalities. In the no-grad variant OpenCLIP then
   * puts the rank's own live features back at its block; the values are the
   * same, what differs is which rows carry gradient (see below). */
  if (c != NULL) {
    st = vqc_all_gatherv(c, img, (size_t)(rows * dim), s.all_img, s.counts,
                         VQC_F32);
    if (st == VQC_OK)
      st = vqc_all_gatherv(c, txt, (size_t)(rows * dim), s.all_txt, s.counts,
                           VQC_F32);
    if (st != VQC_OK) goto done;
  } else {
    memcpy(s.all_img, img, (size_t)(n * dim) * sizeof(float));
    memcpy(s.all_txt, txt, (size_t)(n * dim) * sizeof(float));
  }

  normalise_rows(s.all_img, n, dim, s.nimg, s.img_norm);
  normalise_rows(s.all_txt, n, dim, s.ntxt, s.txt_norm);

  int64_t a0 = 0, a1 = n;
  double w = 1.0 / (2.0 * (double)n);
  if (cfg->local_loss) {
    a0 = offset;
    a1 = offset + rows;
    w = (double)world / (2.0 * (double)n);
  }
  double ds = 0.0;
  contrastive(&s, n, dim, (double)cfg->logit_scale, a0, a1, w, loss, &ds);

  if (cfg->gather == VQC_GATHER_WITH_GRAD && c != NULL) {
    /* Backward of torch.distributed.nn.all_gather: each rank's gradient for
     * every gathered row is summed over ranks (a reduce-scatter; here an
     * all_reduce of the whole (N, D) gradient) and each rank keeps its own
     * block. */
    st = vqc_all_reduce(c, s.gimg, s.gimg, (size_t)(n * dim), VQC_F32, VQC_SUM);
    if (st == VQC_OK)
      st = vqc_all_reduce(c, s.gtxt, s.gtxt, (size_t)(n * dim), VQC_F32,
                          VQC_SUM);
    if (st != VQC_OK) goto done;
  }
  /* VQC_GATHER_NO_GRAD (spec/bugs.md #5): torch.distributed.all_gather has no
   * backward, so nothing is reduced: the rank keeps only the gradient its own
   * loss gives its own rows. */
  for (int64_t i = 0; i < rows * dim; i++) {
    dimg[i] += s.gimg[offset * dim + i];
    dtxt[i] += s.gtxt[offset * dim + i];
  }
  if (dscale != NULL) *dscale += (float)ds;

done:
  scratch_free(&s);
  free(rows_of);
  return st;
}
