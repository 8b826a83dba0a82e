/* test_optim.c: unit tests for vqc/optim.h: SGD (plain and momentum) on
 * steps whose results are exact in float32, Adam against the textbook
 * formula in double and against PyTorch's float32 operation order bit for
 * bit, and the naming and registration of optimizer state. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vqc/nn.h"
#include "vqc/optim.h"

/* Registers p/g (n floats) as "w", plus a non-trainable "frozen" entry the
 * optimizers must leave alone. */
static float frozen[2] = {3, 4};
static void make_list(vqc_param_list *l, float *p, float *g, int64_t n) {
  vqc_param_list_init(l);
  cr_assert_eq(vqc_param_list_add(l, "w", VQC_F32, p, g, 1, &n), VQC_OK);
  int64_t two = 2;
  cr_assert_eq(vqc_param_list_add(l, "frozen", VQC_F32, frozen, NULL, 1, &two),
               VQC_OK);
}

Test(optim, sgd_plain_exact) {
  float p[2] = {1, -2}, g[2] = {0.25f, 0.5f};
  vqc_param_list l;
  make_list(&l, p, g, 2);
  vqc_optim_config cfg = vqc_optim_sgd(0.5, 0.0);
  vqc_optim *o;
  cr_assert_eq(vqc_optim_create(&cfg, &l, &o), VQC_OK);
  cr_assert_eq(vqc_optim_step(o), VQC_OK);
  cr_assert_eq(p[0], 0.875f);
  cr_assert_eq(p[1], -2.25f);
  cr_assert_eq(vqc_optim_step(o), VQC_OK);
  cr_assert_eq(p[0], 0.75f);
  cr_assert_eq(p[1], -2.5f);
  cr_assert_eq(g[0], 0.25f, "the step must not touch the gradient");
  cr_assert_eq(frozen[0], 3.0f);
  /* plain SGD has no buffers: only the step counter */
  const vqc_param_list *st = vqc_optim_state(o);
  cr_assert_eq(st->count, 1);
  cr_assert_str_eq(st->items[0].name, "optim.step");
  cr_assert_eq(*(int64_t *)st->items[0].data, 2);
  vqc_optim_destroy(o);
  vqc_param_list_free(&l);
}

/* torch: buf = g on the first step, then buf = buf * momentum + g;
 * p -= lr * buf. lr = momentum = 0.5 keeps every value dyadic. */
Test(optim, sgd_momentum_exact) {
  float p[1] = {1}, g[1];
  vqc_param_list l;
  make_list(&l, p, g, 1);
  vqc_optim_config cfg = vqc_optim_sgd(0.5, 0.5);
  vqc_optim *o;
  cr_assert_eq(vqc_optim_create(&cfg, &l, &o), VQC_OK);
  const vqc_param *buf = vqc_param_list_find(vqc_optim_state(o),
                                             "w.momentum_buffer");
  cr_assert_not_null(buf);
  cr_assert_null(buf->grad);
  const float grads[3] = {0.25f, 0.25f, -1.0f};
  const float want_buf[3] = {0.25f, 0.375f, -0.8125f};
  const float want_p[3] = {0.875f, 0.6875f, 1.09375f};
  for (int s = 0; s < 3; s++) {
    g[0] = grads[s];
    cr_assert_eq(vqc_optim_step(o), VQC_OK);
    cr_assert_eq(((float *)buf->data)[0], want_buf[s], "step %d buf %g", s,
                 ((float *)buf->data)[0]);
    cr_assert_eq(p[0], want_p[s], "step %d p %g", s, p[0]);
  }
  cr_assert_eq(vqc_optim_steps(o), 3);
  vqc_optim_destroy(o);
  vqc_param_list_free(&l);
}

/* Textbook Adam (Kingma & Ba, Algorithm 1) in double:
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 * which is algebraically PyTorch's form. Six steps, gradients from 1e-3 to
 * 10 with sign changes. Tolerance 2e-6 absolute on parameters of size ~1:
 * each float32 step rounds p (3e-8) and computes the update (lr ~1e-2) to a
 * few 1e-7 relative, so six steps stay below 4e-7. */
Test(optim, adam_matches_textbook_in_double) {
  enum { N = 5, STEPS = 6 };
  float p[N] = {1, -0.5f, 2, 0.25f, -1.5f}, g[N];
  double pr[N], m[N] = {0}, v[N] = {0};
  for (int i = 0; i < N; i++) pr[i] = p[i];
  vqc_param_list l;
  make_list(&l, p, g, N);
  vqc_optim_config cfg = vqc_optim_adam(1e-2);
  cfg.beta1 = 0.8;
  cfg.beta2 = 0.99;
  cfg.eps = 1e-6;
  vqc_optim *o;
  cr_assert_eq(vqc_optim_create(&cfg, &l, &o), VQC_OK);
  for (int t = 1; t <= STEPS; t++) {
    for (int i = 0; i < N; i++)
      g[i] = (float)((i % 2 ? -1.0 : 1.0) * pow(10.0, i - 3) * (1 + 0.3 * t) *
                     (t == 4 ? -1 : 1));
    cr_assert_eq(vqc_optim_step(o), VQC_OK);
    for (int i = 0; i < N; i++) {
      m[i] = cfg.beta1 * m[i] + (1 - cfg.beta1) * g[i];
      v[i] = cfg.beta2 * v[i] + (1 - cfg.beta2) * (double)g[i] * g[i];
      double mhat = m[i] / (1 - pow(cfg.beta1, t));
      double vhat = v[i] / (1 - pow(cfg.beta2, t));
      pr[i] -= cfg.lr * mhat / (sqrt(vhat) + cfg.eps);
      cr_assert_leq(fabs(p[i] - pr[i]), 2e-6, "step %d p[%d] %.9g vs %.9g", t,
                    i, p[i], pr[i]);
    }
  }
  vqc_optim_destroy(o);
  vqc_param_list_free(&l);
}

/* Adam's first step moves every parameter by lr * g / (|g| + eps), i.e.
 * about lr against the sign of g whatever its size (bias correction makes
 * m_hat = g and v_hat = g^2 exactly in real arithmetic). */
Test(optim, adam_first_step_is_lr_against_the_sign) {
  float p[4] = {0, 0, 0, 0}, g[4] = {1e-3f, -5, 2, -0.01f};
  vqc_param_list l;
  make_list(&l, p, g, 4);
  vqc_optim_config cfg = vqc_optim_adam(0.01);
  vqc_optim *o;
  cr_assert_eq(vqc_optim_create(&cfg, &l, &o), VQC_OK);
  cr_assert_eq(vqc_optim_step(o), VQC_OK);
  for (int i = 0; i < 4; i++) {
    double want = -0.01 * g[i] / (fabs(g[i]) + 1e-8);
    cr_assert_leq(fabs(p[i] - want), 1e-6 * 0.01, "p[%d] %.9g vs %.9g", i, p[i],
                  want);
  }
  vqc_optim_destroy(o);
  vqc_param_list_free(&l);
}

/* PyTorch's _single_tensor_adam, line by line in float32 with its Python
 * scalars in double: locks the documented operation order bit for bit. */
Test(optim, adam_follows_torch_operation_order_bitwise) {
  enum { N = 4 };
  float p[N] = {0.3f, -1.7f, 2.5f, 0.01f}, g[N];
  float tp[N], tm[N] = {0}, tv[N] = {0};
  memcpy(tp, p, sizeof p);
  vqc_param_list l;
  make_list(&l, p, g, N);
  vqc_optim_config cfg = vqc_optim_adam(3e-3);
  vqc_optim *o;
  cr_assert_eq(vqc_optim_create(&cfg, &l, &o), VQC_OK);
  for (int t = 1; t <= 3; t++) {
    for (int i = 0; i < N; i++) g[i] = (float)(0.37 * (i + 1) - 0.2 * t);
    cr_assert_eq(vqc_optim_step(o), VQC_OK);
    double bc1 = 1 - pow(0.9, t), bc2 = 1 - pow(0.999, t);
    float step_size = (float)(-(3e-3 / bc1)), bc2s = (float)sqrt(bc2);
    for (int i = 0; i < N; i++) {
      float w = (float)(1 - 0.9);                    /* exp_avg.lerp_ */
      tm[i] = tm[i] + w * (g[i] - tm[i]);
      tv[i] = tv[i] * (float)0.999;                  /* exp_avg_sq.mul_ */
      tv[i] = tv[i] + (float)(1 - 0.999) * g[i] * g[i]; /* .addcmul_ */
      float denom = sqrtf(tv[i]) / bc2s + (float)1e-8;
      tp[i] = tp[i] + step_size * tm[i] / denom;     /* param.addcdiv_ */
      cr_assert_eq(p[i], tp[i], "step %d p[%d] %a vs %a", t, i, p[i], tp[i]);
    }
  }
  const vqc_param_list *st = vqc_optim_state(o);
  cr_assert_eq(memcmp(vqc_param_list_find(st, "w.exp_avg")->data, tm, sizeof tm), 0);
  cr_assert_eq(memcmp(vqc_param_list_find(st, "w.exp_avg_sq")->data, tv, sizeof tv), 0);
  vqc_optim_destroy(o);
  vqc_param_list_free(&l);
}

Test(optim, adam_state_is_registered_and_frozen_entries_skipped) {
  float p[3] = {1, 2, 3}, g[3] = {1, 1, 1};
  vqc_param_list l;
  make_list(&l, p, g, 3);
  vqc_optim_config cfg = vqc_optim_adam(0.0); /* lr 0: weights stay */
  vqc_optim *o;
  cr_assert_eq(vqc_optim_create(&cfg, &l, &o), VQC_OK);
  const vqc_param_list *st = vqc_optim_state(o);
  cr_assert_eq(st->count, 3);
  cr_assert_str_eq(st->items[0].name, "w.exp_avg");
  cr_assert_str_eq(st->items[1].name, "w.exp_avg_sq");
  cr_assert_str_eq(st->items[2].name, "optim.step");
  cr_assert_eq(st->items[2].dtype, VQC_I64);
  cr_assert_eq(st->items[0].numel, 3);
  cr_assert_null(vqc_param_list_find(st, "frozen.exp_avg"));

  uint64_t before, after;
  cr_assert_eq(vqc_param_digest(&st->items[0], &before), VQC_OK);
  cr_assert_eq(vqc_optim_step(o), VQC_OK);
  cr_assert_eq(vqc_param_digest(&st->items[0], &after), VQC_OK);
  cr_assert_neq(before, after, "the moments moved, so their digest must");
  for (int i = 0; i < 3; i++) cr_assert_eq(p[i], (float)(i + 1));
  cr_assert_eq(frozen[1], 4.0f);
  cr_assert_eq(*(int64_t *)st->items[2].data, 1);
  vqc_optim_destroy(o);
  vqc_optim_destroy(NULL);
  vqc_param_list_free(&l);
}

Test(optim, config_validation_and_names) {
  float p[1] = {0}, g[1] = {0};
  vqc_param_list l;
  make_list(&l, p, g, 1);
  vqc_optim *o = NULL;
  vqc_optim_config bad = vqc_optim_adam(1e-3);
  bad.beta1 = 1.0;
  cr_assert_eq(vqc_optim_create(&bad, &l, &o), VQC_EINVAL);
  cr_assert_null(o);
  bad = vqc_optim_sgd(-1.0, 0.0);
  cr_assert_eq(vqc_optim_create(&bad, &l, &o), VQC_EINVAL);
  vqc_optim_kind k;
  cr_assert_eq(vqc_optim_kind_from_name("adam", &k), VQC_OK);
  cr_assert_eq(k, VQC_OPTIM_ADAM);
  cr_assert_str_eq(vqc_optim_kind_name(VQC_OPTIM_SGD), "sgd");
  cr_assert_eq(vqc_optim_kind_from_name("lamb", &k), VQC_EINVAL);
  vqc_param_list_free(&l);
}
