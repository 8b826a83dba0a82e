/* test_nn.c: unit tests for vqc/nn.h and vqc/autoencoder.h: the parameter
 * registry, the linear layer, activations and MSE (exact small cases), and
 * every backward against central finite differences computed on a float64
 * twin of the forward.
 *
 * Finite-difference tolerance (used by every gradient check here): the twin
 * runs in double with h = 1e-5, so its truncation error (h^2 |f'''| / 6, about
 * 1e-10) and rounding error (1e-16 |L| / h, about 1e-11) are negligible. The
 * analytic gradient is float32: each component is a chain of at most a few
 * dozen float operations over fan-ins of at most 8, so its error is a few
 * 1e-7 of the largest gradient. We allow 2e-5 of the largest |gradient|
 * (measured: below 1e-7 of it); a wrong term, sign or transpose
 * errs by a sizeable fraction of it. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/autoencoder.h"
#include "vqc/digest.h"
#include "vqc/nn.h"
#include "vqc/rng.h"

#define FD_H 1e-5
#define FD_REL_TOL 2e-5

static void fill_normal(uint64_t seed, float *x, int64_t n, float std) {
  vqc_rng r;
  vqc_rng_init(&r, seed, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_normal(&r, x, n, 0.0f, std);
}

/* Asserts max |analytic - fd| <= FD_REL_TOL * max |fd| and that the
 * gradient is not trivially zero. */
static void assert_grad_close(const char *what, const float *analytic,
                              const double *fd, int64_t n) {
  double scale = 0.0, worst = 0.0;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++) {
    if (fabs(fd[i]) > scale) scale = fabs(fd[i]);
    double e = fabs((double)analytic[i] - fd[i]);
    if (e > worst) {
      worst = e;
      at = i;
    }
  }
  cr_assert_gt(scale, 1e-6, "%s: gradient is ~0, the check would be vacuous",
               what);
  cr_assert_leq(worst, FD_REL_TOL * scale,
                "%s: element %lld analytic %.9g vs finite difference %.9g "
                "(error %.3g, %.3g of max |grad| %.3g)",
                what, (long long)at, analytic[at], fd[at], worst,
                worst / scale, scale);
}

/* ---- parameter registry ---- */

Test(nn, registry_add_find_extend_and_reject) {
  vqc_param_list l, outer;
  vqc_param_list_init(&l);
  vqc_param_list_init(&outer);
  float w[6] = {0}, dw[6] = {1, 2, 3, 4, 5, 6}, b[3] = {0};
  int64_t step = 7;
  int64_t ws[2] = {2, 3}, bs[1] = {3};
  cr_assert_eq(vqc_param_list_add(&l, "w", VQC_F32, w, dw, 2, ws), VQC_OK);
  cr_assert_eq(vqc_param_list_add(&l, "b", VQC_F32, b, NULL, 1, bs), VQC_OK);
  cr_assert_eq(vqc_param_list_add(&l, "step", VQC_I64, &step, NULL, 0, NULL),
               VQC_OK);
  /* duplicates, empty and over-long names, a gradient on an int tensor */
  cr_assert_eq(vqc_param_list_add(&l, "w", VQC_F32, w, dw, 2, ws), VQC_EINVAL);
  cr_assert_eq(vqc_param_list_add(&l, "", VQC_F32, w, dw, 2, ws), VQC_EINVAL);
  char longname[VQC_PARAM_NAME_MAX + 1];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  cr_assert_eq(vqc_param_list_add(&l, longname, VQC_F32, w, dw, 2, ws),
               VQC_EINVAL);
  cr_assert_eq(vqc_param_list_add(&l, "s2", VQC_I64, &step, (float *)dw, 0, NULL),
               VQC_EDTYPE);
  cr_assert_eq(l.count, 3);

  const vqc_param *p = vqc_param_list_find(&l, "w");
  cr_assert(p != NULL && p->numel == 6 && p->data == w && p->grad == dw);
  cr_assert_eq(vqc_param_list_find(&l, "step")->numel, 1);
  cr_assert_null(vqc_param_list_find(&l, "nope"));
  cr_assert_eq(vqc_param_list_grad_numel(&l), 6);

  cr_assert_eq(vqc_param_list_extend(&outer, &l, "model."), VQC_OK);
  cr_assert_eq(outer.count, 3);
  cr_assert_str_eq(outer.items[0].name, "model.w");
  cr_assert_str_eq(outer.items[2].name, "model.step");
  cr_assert_eq(outer.items[0].data, w);

  vqc_param_list_zero_grad(&l);
  for (int i = 0; i < 6; i++) cr_assert_eq(dw[i], 0.0f);
  vqc_param_list_free(&l);
  vqc_param_list_free(&outer);
  vqc_param_list_free(NULL);
}

Test(nn, registry_digest_is_the_tensor_digest) {
  vqc_param_list l;
  vqc_param_list_init(&l);
  float w[6] = {1, 2, 3, 4, 5, 6}, dw[6] = {6, 5, 4, 3, 2, 1};
  int64_t ws[2] = {2, 3};
  cr_assert_eq(vqc_param_list_add(&l, "w", VQC_F32, w, dw, 2, ws), VQC_OK);
  uint64_t got, want, gotg, wantg;
  cr_assert_eq(vqc_param_digest(&l.items[0], &got), VQC_OK);
  cr_assert_eq(vqc_digest_buffer(w, sizeof w, VQC_F32, 2, ws, &want), VQC_OK);
  cr_assert_eq(got, want);
  cr_assert_eq(vqc_param_grad_digest(&l.items[0], &gotg), VQC_OK);
  cr_assert_eq(vqc_digest_buffer(dw, sizeof dw, VQC_F32, 2, ws, &wantg), VQC_OK);
  cr_assert_eq(gotg, wantg);
  cr_assert_neq(got, gotg);
  vqc_param_list_free(&l);
}

/* ---- linear layer ---- */

Test(nn, linear_init_is_torch_uniform_from_the_cursor) {
  vqc_rng a, b;
  vqc_rng_init(&a, 42, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
  b = a;
  vqc_linear l;
  cr_assert_eq(vqc_linear_init(&l, 4, 3, &a), VQC_OK);
  /* The weights are exactly the next 12 uniforms in +-1/sqrt(4), then the
   * bias the next 3, and the cursor moved past all of them. */
  float want[15];
  vqc_rng_uniform(&b, want, 15, -0.5f, 0.5f);
  cr_assert_eq(memcmp(l.w, want, 12 * sizeof(float)), 0);
  cr_assert_eq(memcmp(l.b, want + 12, 3 * sizeof(float)), 0);
  cr_assert_eq(a.position, b.position);
  for (int i = 0; i < 12; i++) {
    cr_assert(l.w[i] >= -0.5f && l.w[i] < 0.5f);
    cr_assert_eq(l.dw[i], 0.0f);
  }
  vqc_linear_free(&l);
  vqc_linear_free(&l); /* a freed layer is zeroed and may be freed again */
  cr_assert_eq(vqc_linear_init(&l, 0, 3, &a), VQC_EINVAL);
}

/* A layer with hand-set weights: W (3, 2) = [[1, 2], [3, 4], [5, 6]],
 * b = [0.5, -1, 0]. */
static void hand_layer(vqc_linear *l) {
  vqc_rng r;
  vqc_rng_init(&r, 1, 1);
  cr_assert_eq(vqc_linear_init(l, 2, 3, &r), VQC_OK);
  const float w[6] = {1, 2, 3, 4, 5, 6}, b[3] = {0.5f, -1, 0};
  memcpy(l->w, w, sizeof w);
  memcpy(l->b, b, sizeof b);
}

Test(nn, linear_forward_and_backward_exact) {
  vqc_linear l;
  hand_layer(&l);
  const float x[4] = {1, -1, 2, 0.5f}; /* (2, 2) */
  float y[6];
  vqc_linear_forward(&l, x, 2, y);
  /* row 0: [1-2, 3-4, 5-6] + b; row 1: [2+1, 6+2, 10+3] + b */
  const float want_y[6] = {-0.5f, -2, -1, 3.5f, 7, 13};
  for (int i = 0; i < 6; i++) cr_assert_eq(y[i], want_y[i], "y[%d] = %g", i, y[i]);

  const float dy[6] = {1, 0, -1, 0.5f, 2, 1}; /* (2, 3) */
  float dx[4] = {0};
  vqc_linear_backward(&l, x, dy, 2, dx);
  /* dW = dy^T x: dW[o][i] = sum_r dy[r][o] x[r][i] */
  const float want_dw[6] = {1 + 1, -1 + 0.25f, 0 + 4, 0 + 1, -1 + 2, 1 + 0.5f};
  const float want_db[3] = {1.5f, 2, 0};
  /* dx = dy W: row 0 [1 - 5, 2 - 6]; row 1 [0.5 + 6 + 5, 1 + 8 + 6] */
  const float want_dx[4] = {-4, -4, 11.5f, 15};
  for (int i = 0; i < 6; i++) cr_assert_eq(l.dw[i], want_dw[i], "dw[%d]", i);
  for (int i = 0; i < 3; i++) cr_assert_eq(l.db[i], want_db[i], "db[%d]", i);
  for (int i = 0; i < 4; i++) cr_assert_eq(dx[i], want_dx[i], "dx[%d]", i);

  /* Backward accumulates into dW, db and dx (these sums are exact). */
  vqc_linear_backward(&l, x, dy, 2, dx);
  for (int i = 0; i < 6; i++) cr_assert_eq(l.dw[i], 2 * want_dw[i]);
  for (int i = 0; i < 3; i++) cr_assert_eq(l.db[i], 2 * want_db[i]);
  for (int i = 0; i < 4; i++) cr_assert_eq(dx[i], 2 * want_dx[i]);

  vqc_param_list list;
  vqc_param_list_init(&list);
  cr_assert_eq(vqc_linear_register(&l, "proj.", &list), VQC_OK);
  cr_assert_str_eq(list.items[0].name, "proj.weight");
  cr_assert_eq(list.items[0].shape[0], 3);
  cr_assert_eq(list.items[0].shape[1], 2);
  cr_assert_eq(list.items[0].grad, l.dw);
  cr_assert_str_eq(list.items[1].name, "proj.bias");
  cr_assert_eq(list.items[1].numel, 3);
  vqc_param_list_free(&list);
  vqc_linear_free(&l);
}

/* L = sum(c * linear(x)) in double, for the finite differences. */
static double linear_twin(const double *w, const double *b, const double *x,
                          const double *c, int64_t batch, int64_t din,
                          int64_t dout) {
  double loss = 0.0;
  for (int64_t r = 0; r < batch; r++)
    for (int64_t o = 0; o < dout; o++) {
      double y = b[o];
      for (int64_t i = 0; i < din; i++) y += x[r * din + i] * w[o * din + i];
      loss += c[r * dout + o] * y;
    }
  return loss;
}

Test(nn, linear_backward_matches_finite_differences) {
  const int64_t B = 5, DIN = 7, DOUT = 4;
  vqc_rng init;
  vqc_rng_init(&init, 3, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
  vqc_linear l;
  cr_assert_eq(vqc_linear_init(&l, DIN, DOUT, &init), VQC_OK);
  float x[B * DIN], dy[B * DOUT], dx[B * DIN];
  fill_normal(10, x, B * DIN, 1.0f);
  fill_normal(11, dy, B * DOUT, 1.0f);
  memset(dx, 0, sizeof dx);
  vqc_linear_backward(&l, x, dy, B, dx);

  double w[DOUT * DIN], b[DOUT], xd[B * DIN], c[B * DOUT];
  for (int i = 0; i < DOUT * DIN; i++) w[i] = l.w[i];
  for (int i = 0; i < DOUT; i++) b[i] = l.b[i];
  for (int i = 0; i < B * DIN; i++) xd[i] = x[i];
  for (int i = 0; i < B * DOUT; i++) c[i] = dy[i];

  double fd_w[DOUT * DIN], fd_b[DOUT], fd_x[B * DIN];
  double *targets[3] = {w, b, xd}, *fds[3] = {fd_w, fd_b, fd_x};
  const int64_t sizes[3] = {DOUT * DIN, DOUT, B * DIN};
  for (int t = 0; t < 3; t++)
    for (int64_t k = 0; k < sizes[t]; k++) {
      double keep = targets[t][k];
      targets[t][k] = keep + FD_H;
      double up = linear_twin(w, b, xd, c, B, DIN, DOUT);
      targets[t][k] = keep - FD_H;
      double down = linear_twin(w, b, xd, c, B, DIN, DOUT);
      targets[t][k] = keep;
      fds[t][k] = (up - down) / (2 * FD_H);
    }
  assert_grad_close("dW", l.dw, fd_w, DOUT * DIN);
  assert_grad_close("db", l.db, fd_b, DOUT);
  assert_grad_close("dx", dx, fd_x, B * DIN);
  vqc_linear_free(&l);
}

/* ---- activations and MSE ---- */

Test(nn, relu_forward_backward_exact) {
  const float x[5] = {-2, -0.0f, 0, 0.5f, 3};
  float y[5], dx[5] = {10, 10, 10, 10, 10};
  const float dy[5] = {1, 2, 3, 4, 5};
  vqc_act_forward(VQC_ACT_RELU, x, 5, y);
  const float want_y[5] = {0, 0, 0, 0.5f, 3};
  for (int i = 0; i < 5; i++) cr_assert_eq(y[i], want_y[i]);
  vqc_act_backward(VQC_ACT_RELU, y, dy, 5, dx);
  /* gradient 0 at x = 0 (PyTorch's choice); backward adds to dx */
  const float want_dx[5] = {10, 10, 10, 14, 15};
  for (int i = 0; i < 5; i++) cr_assert_eq(dx[i], want_dx[i], "dx[%d]", i);
  cr_assert_str_eq(vqc_act_name(VQC_ACT_TANH), "tanh");
}

Test(nn, tanh_backward_matches_finite_differences) {
  const int64_t N = 9;
  float x[N], y[N], dy[N], dx[N];
  fill_normal(20, x, N, 1.5f);
  fill_normal(21, dy, N, 1.0f);
  memset(dx, 0, sizeof dx);
  vqc_act_forward(VQC_ACT_TANH, x, N, y);
  vqc_act_backward(VQC_ACT_TANH, y, dy, N, dx);
  double fd[N];
  for (int64_t i = 0; i < N; i++)
    fd[i] = dy[i] * (tanh((double)x[i] + FD_H) - tanh((double)x[i] - FD_H)) /
            (2 * FD_H);
  assert_grad_close("tanh dx", dx, fd, N);
  /* the identity passes the gradient through */
  float id[N];
  memset(id, 0, sizeof id);
  vqc_act_backward(VQC_ACT_NONE, y, dy, N, id);
  cr_assert_eq(memcmp(id, dy, sizeof id), 0);
}

Test(nn, mse_value_and_gradient_exact) {
  const float pred[4] = {1, 2, 3, 4}, target[4] = {0, 2, 5, 4};
  float d[4] = {0};
  /* diffs 1, 0, -2, 0: mean of squares 5 / 4; with scale 2, c = 2*2/4 = 1 */
  double loss = vqc_mse_loss(pred, target, 4, 2.0f, d);
  cr_assert_eq(loss, 1.25);
  const float want[4] = {1, 0, -2, 0};
  for (int i = 0; i < 4; i++) cr_assert_eq(d[i], want[i], "d[%d] = %g", i, d[i]);
  cr_assert_eq(vqc_mse_loss(pred, target, 0, 1.0f, d), 0.0);
}

/* ---- autoencoder ---- */

/* A test bottleneck that the finite differences can check exactly: q = z
 * (so straight-through is the true gradient) and a commitment-like row loss
 * against FIXED targets t (so sg() changes nothing), built from the same
 * helpers a quantizer adapter uses. */
typedef struct target_bn {
  const float *t; /* (rows, dim) */
  float weight;
  float state[3]; /* pretend codebook, for register_state */
} target_bn;

static vqc_status target_forward(void *ctx, const float *z, int64_t rows,
                                 int64_t dim, float *q, float *row_loss) {
  target_bn *b = ctx;
  memcpy(q, z, (size_t)(rows * dim) * sizeof(float));
  vqc_commitment_rows(z, b->t, rows, dim, b->weight, row_loss);
  return VQC_OK;
}

static vqc_status target_backward(void *ctx, const float *z, const float *q,
                                  const float *dq, int64_t rows, int64_t dim,
                                  float dloss_row, float *dz) {
  target_bn *b = ctx;
  vqc_straight_through_backward(z, b->t, dq, rows, dim, b->weight, dloss_row,
                                dz);
  return VQC_OK;
}

static vqc_status target_register(void *ctx, vqc_param_list *list) {
  target_bn *b = ctx;
  int64_t shape[1] = {3};
  return vqc_param_list_add(list, "codebook", VQC_F32, b->state, NULL, 1, shape);
}

enum { AE_DIN = 6, AE_HID = 8, AE_LAT = 3, AE_ROWS = 5 };

/* The float64 twin: loss(theta) with theta the trainable parameters in
 * registration order (encoder.0 W b, encoder.2 W b, decoder.0 W b,
 * decoder.2 W b). *min_pre receives the smallest |pre-activation| (a ReLU
 * kink closer than the finite-difference step would spoil the check). */
static void twin_linear(const double *theta, int64_t *off, const double *in,
                        int64_t rows, int64_t din, int64_t dout, double *out) {
  const double *w = theta + *off, *b = w + din * dout;
  *off += din * dout + dout;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t o = 0; o < dout; o++) {
      double acc = 0.0;
      for (int64_t i = 0; i < din; i++) acc += in[r * din + i] * w[o * din + i];
      out[r * dout + o] = acc + b[o];
    }
}

static void twin_act(vqc_act a, double *v, int64_t n, double *min_pre) {
  for (int64_t i = 0; i < n; i++) {
    if (fabs(v[i]) < *min_pre) *min_pre = fabs(v[i]);
    if (a == VQC_ACT_RELU) v[i] = v[i] > 0 ? v[i] : 0;
    if (a == VQC_ACT_TANH) v[i] = tanh(v[i]);
  }
}

static double twin_loss(const double *theta, vqc_act act, const double *x,
                        const double *t, double weight, double scale,
                        double *min_pre) {
  double h1[AE_ROWS * AE_HID], z[AE_ROWS * AE_LAT], h2[AE_ROWS * AE_HID],
      rec[AE_ROWS * AE_DIN];
  int64_t off = 0;
  *min_pre = INFINITY;
  twin_linear(theta, &off, x, AE_ROWS, AE_DIN, AE_HID, h1);
  twin_act(act, h1, AE_ROWS * AE_HID, min_pre);
  twin_linear(theta, &off, h1, AE_ROWS, AE_HID, AE_LAT, z);
  twin_linear(theta, &off, z, AE_ROWS, AE_LAT, AE_HID, h2);
  twin_act(act, h2, AE_ROWS * AE_HID, min_pre);
  twin_linear(theta, &off, h2, AE_ROWS, AE_HID, AE_DIN, rec);
  double mse = 0.0, commit = 0.0;
  for (int i = 0; i < AE_ROWS * AE_DIN; i++) mse += (rec[i] - x[i]) * (rec[i] - x[i]);
  for (int i = 0; i < AE_ROWS * AE_LAT; i++) commit += (z[i] - t[i]) * (z[i] - t[i]);
  return scale * (mse / (AE_ROWS * AE_DIN) + weight * commit / (AE_ROWS * AE_LAT));
}

static void check_autoencoder_gradients(vqc_act act, uint64_t seed) {
  float x[AE_ROWS * AE_DIN], t[AE_ROWS * AE_LAT];
  fill_normal(seed, x, AE_ROWS * AE_DIN, 1.0f);
  fill_normal(seed + 1, t, AE_ROWS * AE_LAT, 0.5f);
  target_bn tb = {t, 0.25f, {0}};
  vqc_bottleneck bn = {"target", &tb, target_forward, target_backward,
                       target_register};
  vqc_autoencoder_config cfg = {AE_DIN, AE_HID, AE_LAT, act};
  vqc_rng init;
  vqc_rng_init(&init, seed, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
  vqc_autoencoder *ae;
  cr_assert_eq(vqc_autoencoder_create(&cfg, &init, &bn, &ae), VQC_OK);

  const float scale = 1.5f;
  vqc_ae_loss loss;
  cr_assert_eq(vqc_autoencoder_forward(ae, x, AE_ROWS, &loss), VQC_OK);
  cr_assert_eq(vqc_autoencoder_backward(ae, scale), VQC_OK);

  const vqc_param_list *params = vqc_autoencoder_params(ae);
  int64_t n = vqc_param_list_grad_numel(params);
  double *theta = malloc((size_t)n * sizeof(double));
  double *fd = malloc((size_t)n * sizeof(double));
  float *analytic = malloc((size_t)n * sizeof(float));
  int64_t off = 0;
  for (int i = 0; i < params->count; i++) {
    const vqc_param *p = &params->items[i];
    if (p->grad == NULL) continue;
    for (int64_t k = 0; k < p->numel; k++) {
      theta[off + k] = ((const float *)p->data)[k];
      analytic[off + k] = p->grad[k];
    }
    off += p->numel;
  }
  double xd[AE_ROWS * AE_DIN], td[AE_ROWS * AE_LAT], min_pre;
  for (int i = 0; i < AE_ROWS * AE_DIN; i++) xd[i] = x[i];
  for (int i = 0; i < AE_ROWS * AE_LAT; i++) td[i] = t[i];

  /* The forward's loss agrees with the twin's (float32 forward: 1e-5). */
  double twin0 = twin_loss(theta, act, xd, td, tb.weight, 1.0, &min_pre);
  cr_assert_leq(fabs(loss.total - twin0), 1e-5 * fabs(twin0),
                "loss %.9g vs twin %.9g", loss.total, twin0);
  cr_assert_gt(loss.bottleneck, 0.0);
  cr_assert_eq(loss.total, loss.recon + loss.bottleneck);
  cr_assert_gt(min_pre, 100 * FD_H, "a pre-activation sits on a kink; change "
                                    "the seed");

  for (int64_t k = 0; k < n; k++) {
    double keep = theta[k], mp;
    theta[k] = keep + FD_H;
    double up = twin_loss(theta, act, xd, td, tb.weight, scale, &mp);
    theta[k] = keep - FD_H;
    double down = twin_loss(theta, act, xd, td, tb.weight, scale, &mp);
    theta[k] = keep;
    fd[k] = (up - down) / (2 * FD_H);
  }
  assert_grad_close(vqc_act_name(act), analytic, fd, n);

  free(theta);
  free(fd);
  free(analytic);
  vqc_autoencoder_destroy(ae);
}

Test(nn, autoencoder_tanh_gradients_match_finite_differences) {
  check_autoencoder_gradients(VQC_ACT_TANH, 100);
}

Test(nn, autoencoder_relu_gradients_match_finite_differences) {
  check_autoencoder_gradients(VQC_ACT_RELU, 200);
}

Test(nn, autoencoder_registers_params_in_order_with_bottleneck_state) {
  float t[AE_LAT] = {0};
  target_bn tb = {t, 1.0f, {0}};
  vqc_bottleneck bn = {"target", &tb, target_forward, target_backward,
                       target_register};
  vqc_autoencoder_config cfg = {AE_DIN, AE_HID, AE_LAT, VQC_ACT_RELU};
  vqc_rng init;
  vqc_rng_init(&init, 1, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
  vqc_autoencoder *ae;
  cr_assert_eq(vqc_autoencoder_create(&cfg, &init, &bn, &ae), VQC_OK);
  const vqc_param_list *p = vqc_autoencoder_params(ae);
  const char *want[] = {"encoder.0.weight", "encoder.0.bias",
                        "encoder.2.weight", "encoder.2.bias",
                        "decoder.0.weight", "decoder.0.bias",
                        "decoder.2.weight", "decoder.2.bias",
                        "bottleneck.codebook"};
  cr_assert_eq(p->count, 9);
  for (int i = 0; i < 9; i++) cr_assert_str_eq(p->items[i].name, want[i]);
  cr_assert_null(p->items[8].grad);
  cr_assert_eq(p->items[8].data, tb.state);
  cr_assert_eq(p->items[0].shape[0], AE_HID);
  cr_assert_eq(p->items[0].shape[1], AE_DIN);
  cr_assert_eq(p->items[6].shape[0], AE_DIN);
  cr_assert_eq(p->items[6].shape[1], AE_HID);
  vqc_autoencoder_destroy(ae);
  vqc_autoencoder_destroy(NULL);
}

/* Identity bottleneck: q is z bit for bit; gradients scale exactly with
 * grad_scale (a power of two commutes with float rounding); an empty shard
 * adds nothing; backward without forward is refused. */
Test(nn, autoencoder_identity_scale_and_empty_shard) {
  vqc_autoencoder_config cfg = {AE_DIN, AE_HID, AE_LAT, VQC_ACT_TANH};
  vqc_rng init;
  vqc_rng_init(&init, 9, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
  vqc_autoencoder *ae;
  cr_assert_eq(vqc_autoencoder_create(&cfg, &init, NULL, &ae), VQC_OK);
  cr_assert_eq(vqc_autoencoder_backward(ae, 1.0f), VQC_EINVAL);
  float x[AE_ROWS * AE_DIN];
  fill_normal(5, x, AE_ROWS * AE_DIN, 1.0f);
  vqc_ae_loss loss;
  cr_assert_eq(vqc_autoencoder_forward(ae, x, AE_ROWS, &loss), VQC_OK);
  cr_assert_eq(loss.bottleneck, 0.0);
  const float *z, *q;
  vqc_autoencoder_activations(ae, &z, &q, NULL);
  cr_assert_eq(memcmp(z, q, AE_ROWS * AE_LAT * sizeof(float)), 0);

  const vqc_param_list *p = vqc_autoencoder_params(ae);
  int64_t n = vqc_param_list_grad_numel(p);
  float *g1 = malloc((size_t)n * sizeof(float));
  vqc_param_list_zero_grad(p);
  cr_assert_eq(vqc_autoencoder_backward(ae, 1.0f), VQC_OK);
  int64_t off = 0;
  for (int i = 0; i < p->count; i++) {
    memcpy(g1 + off, p->items[i].grad, (size_t)p->items[i].numel * sizeof(float));
    off += p->items[i].numel;
  }
  vqc_param_list_zero_grad(p);
  cr_assert_eq(vqc_autoencoder_backward(ae, 4.0f), VQC_OK);
  off = 0;
  int nonzero = 0;
  for (int i = 0; i < p->count; i++)
    for (int64_t k = 0; k < p->items[i].numel; k++, off++) {
      cr_assert_eq(p->items[i].grad[k], 4.0f * g1[off], "%s[%lld]",
                   p->items[i].name, (long long)k);
      nonzero += g1[off] != 0.0f;
    }
  cr_assert_gt(nonzero, n / 2);

  vqc_param_list_zero_grad(p);
  cr_assert_eq(vqc_autoencoder_forward(ae, NULL, 0, &loss), VQC_OK);
  cr_assert_eq(loss.total, 0.0);
  cr_assert_eq(vqc_autoencoder_backward(ae, 1.0f), VQC_OK);
  for (int i = 0; i < p->count; i++)
    for (int64_t k = 0; k < p->items[i].numel; k++)
      cr_assert_eq(p->items[i].grad[k], 0.0f);
  free(g1);
  vqc_autoencoder_destroy(ae);
}

/* The quantizer helpers on values whose answers are exact. */
Test(nn, commitment_and_straight_through_exact) {
  const float z[4] = {0, 0, 1, 1}, q[4] = {1, 2, 1, 3}; /* (2, 2) */
  float rows[2];
  vqc_commitment_rows(z, q, 2, 2, 0.5f, rows);
  cr_assert_eq(rows[0], 0.5f * (1 + 4) / 2);
  cr_assert_eq(rows[1], 0.5f * (0 + 4) / 2);
  const float dq[4] = {1, -1, 0.5f, 0};
  float dz[4] = {0};
  /* c = dloss_row * weight * 2 / dim = 0.25 * 0.5 * 2 / 2 = 0.125 */
  vqc_straight_through_backward(z, q, dq, 2, 2, 0.5f, 0.25f, dz);
  const float want[4] = {1 - 0.125f, -1 - 0.25f, 0.5f, -0.25f};
  for (int i = 0; i < 4; i++) cr_assert_eq(dz[i], want[i], "dz[%d] = %g", i, dz[i]);
}
