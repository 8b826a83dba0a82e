/* test_bottleneck.c: the VQ, RVQ and FSQ bottleneck adapters (bottleneck.h)
 * in the autoencoder, and distributed-equals-serial on the threads backend.
 *
 *   adapters      registered state names; the RVQ adapter's forward is
 *                 vqc_rvq_forward bit for bit; eval mode; shape errors.
 *   gradients     every trainable parameter's gradient against central
 *                 finite differences of a float64 twin in which the
 *                 quantizer's choice is held fixed (the straight-through
 *                 surrogate), with margins asserted so the choice really
 *                 does not change within the step.
 *   training      each bottleneck's autoencoder learns (Adam, fixed seed).
 *   determinism   two identical runs give bit-identical digests of every
 *                 registered tensor, in one process and on 3 rank threads.
 *   equivalence   the shared cases of tests/common/equiv_cases.h (the MPI
 *                 driver runs the same bodies) on W = 1..5 rank threads with
 *                 uneven shards: codes equal, every rank's digests equal at
 *                 every step, state within the stated tolerances; and the
 *                 checks fail when DDP skips the gradient sync.
 *
 * Finite differences: the twin runs in double with h = 1e-5 (truncation and
 * rounding errors ~1e-10); the analytic gradient is float32 with errors of a
 * few 1e-7 of the largest component. We allow 2e-5 of max |gradient|, as
 * test_nn does. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equiv_cases.h"
#include "vqc/autoencoder.h"
#include "vqc/bottleneck.h"
#include "vqc/comm.h"
#include "vqc/data.h"
#include "vqc/ddp.h"
#include "vqc/nn.h"
#include "vqc/optim.h"
#include "vqc/rng.h"

#define FD_H 1e-5
#define FD_REL_TOL 2e-5

static void fill_normal(uint64_t seed, float *x, int64_t n, float std) {
  vqc_rng r;
  vqc_rng_init(&r, seed, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_normal(&r, x, n, 0.0f, std);
}

/* ---- building a bottleneck of each kind ---- */

typedef struct bn_any {
  vqc_equiv_bn kind;
  vqc_vq_bottleneck vq;
  vqc_rvq_bottleneck rvq;
  vqc_fsq_bottleneck fsq;
  vqc_bottleneck iface;
} bn_any;

/* Latent width 4 for every kind. `frozen`: no k-means, random codebooks,
 * freeze_codebook (the forward changes no state, for finite differences);
 * otherwise k-means init, EMA and dead-code expiry, RVQ dropout. */
enum { LAT = 4 };
static void bn_make(bn_any *b, vqc_equiv_bn kind, bool frozen) {
  memset(b, 0, sizeof *b);
  b->kind = kind;
  if (kind == VQC_EQUIV_BN_VQ) {
    vqc_vq_params p;
    vqc_vq_params_default(&p, LAT, 16);
    p.kmeans_init = !frozen;
    p.freeze_codebook = frozen;
    p.threshold_ema_dead_code = frozen ? 0.0 : 0.5;
    p.commitment_weight = 0.25;
    p.seed = 21;
    cr_assert_eq(vqc_vq_bottleneck_init(&b->vq, &p, NULL), VQC_OK, "%s",
                 vqc_last_error());
    b->iface = vqc_vq_bottleneck_iface(&b->vq);
  } else if (kind == VQC_EQUIV_BN_RVQ) {
    vqc_rvq_params p;
    vqc_rvq_params_default(&p, 3, LAT, 8);
    p.quantize_dropout = !frozen;
    p.layer.kmeans_init = !frozen;
    p.layer.freeze_codebook = frozen;
    p.layer.threshold_ema_dead_code = frozen ? 0.0 : 0.5;
    p.layer.commitment_weight = 0.25;
    p.layer.seed = 22;
    cr_assert_eq(vqc_rvq_bottleneck_init(&b->rvq, &p, NULL), VQC_OK, "%s",
                 vqc_last_error());
    b->iface = vqc_rvq_bottleneck_iface(&b->rvq);
  } else {
    const int32_t levels[LAT] = {8, 5, 5, 5};
    cr_assert_eq(vqc_fsq_bottleneck_init(&b->fsq, levels, LAT, 1, false, 1e-3),
                 VQC_OK);
    b->iface = vqc_fsq_bottleneck_iface(&b->fsq);
  }
}

static void bn_free(bn_any *b) {
  vqc_vq_bottleneck_free(&b->vq);
  vqc_rvq_bottleneck_free(&b->rvq);
  vqc_fsq_bottleneck_free(&b->fsq);
}

static void bn_run(bn_any *b, vqc_comm *c, uint64_t step, bool train) {
  b->vq.comm = b->rvq.comm = c;
  b->vq.step = b->rvq.step = step;
  b->vq.train = b->rvq.train = train;
}

static const char *kind_name(vqc_equiv_bn k) {
  return k == VQC_EQUIV_BN_VQ ? "vq" : k == VQC_EQUIV_BN_RVQ ? "rvq" : "fsq";
}

/* ---- adapters ---- */

Test(bottleneck, registers_replicated_state_under_bottleneck_names) {
  const vqc_autoencoder_config cfg = {6, 8, LAT, VQC_ACT_TANH};
  const int want_count[3] = {8 + 3, 8 + 9, 8};
  for (int k = 0; k < 3; k++) {
    bn_any b;
    bn_make(&b, (vqc_equiv_bn)k, false);
    vqc_rng init;
    vqc_rng_init(&init, 1, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
    vqc_autoencoder *ae;
    cr_assert_eq(vqc_autoencoder_create(&cfg, &init, &b.iface, &ae), VQC_OK);
    const vqc_param_list *p = vqc_autoencoder_params(ae);
    cr_assert_eq(p->count, want_count[k], "%s: %d entries", kind_name(b.kind),
                 p->count);
    if (b.kind == VQC_EQUIV_BN_VQ) {
      const vqc_param *e = vqc_param_list_find(p, "bottleneck.embed");
      cr_assert_not_null(e);
      cr_expect_null(e->grad);
      cr_expect_eq(e->data, vqc_vq_embed(&b.vq.vq), "a view, not a copy");
      cr_expect(e->ndim == 2 && e->shape[0] == 16 && e->shape[1] == LAT);
      cr_expect_not_null(vqc_param_list_find(p, "bottleneck.cluster_size"));
      cr_expect_not_null(vqc_param_list_find(p, "bottleneck.embed_avg"));
    } else if (b.kind == VQC_EQUIV_BN_RVQ) {
      for (int l = 0; l < 3; l++) {
        const char *names[3] = {"embed", "cluster_size", "embed_avg"};
        for (int i = 0; i < 3; i++) {
          char name[64];
          snprintf(name, sizeof name, "bottleneck.layers.%d.%s", l, names[i]);
          const vqc_param *e = vqc_param_list_find(p, name);
          cr_assert_not_null(e, "%s missing", name);
          cr_expect_null(e->grad);
        }
      }
      cr_expect_eq(vqc_param_list_find(p, "bottleneck.layers.2.embed")->data,
                   vqc_vq_embed(&b.rvq.rvq.layers[2]));
    }
    vqc_autoencoder_destroy(ae);
    bn_free(&b);
  }
}

/* The RVQ adapter writes out vqc_rvq_forward's loop; over training steps
 * with dropout, k-means init and dead-code expiry (library draws) the two
 * must agree bit for bit: output, codes, cutoff, every layer's state. The
 * adapter's rows also carry the per-layer commitment losses. */
Test(bottleneck, rvq_adapter_is_rvq_forward_bit_for_bit) {
  enum { M = 40, Q = 3, D = LAT, STEPS = 8 };
  bn_any b;
  bn_make(&b, VQC_EQUIV_BN_RVQ, false);
  vqc_rvq twin;
  cr_assert_eq(vqc_rvq_init(&twin, &b.rvq.rvq.p, NULL), VQC_OK);
  float z[M * D], q[M * D], qt[M * D], rows[M], losses[Q];
  int64_t idx[M * Q];
  int cut_seen[Q] = {0};
  for (int s = 0; s < STEPS; s++) {
    fill_normal(100 + (uint64_t)s, z, M * D, 1.0f);
    bn_run(&b, NULL, (uint64_t)s, true);
    cr_assert_eq(b.iface.forward(b.iface.ctx, z, M, D, q, rows), VQC_OK, "%s",
                 vqc_last_error());
    const vqc_vq_ctx ctx = {NULL, (uint64_t)s, NULL, 0};
    int cut = -1;
    cr_assert_eq(vqc_rvq_forward(&twin, &ctx, z, M, true, idx, qt, losses, &cut),
                 VQC_OK);
    cr_assert_eq(b.rvq.cutoff, cut, "step %d", s);
    cut_seen[cut]++;
    cr_assert_eq(memcmp(q, qt, sizeof q), 0, "step %d: output differs", s);
    cr_assert_eq(memcmp(b.rvq.indices, idx, sizeof idx), 0, "step %d", s);
    for (int l = 0; l < Q; l++) {
      vqc_vq *a = &b.rvq.rvq.layers[l], *t = &twin.layers[l];
      cr_assert_eq(memcmp(vqc_vq_embed(a), vqc_vq_embed(t), 8 * D * sizeof(float)), 0);
      cr_assert_eq(memcmp(vqc_vq_cluster_size(a), vqc_vq_cluster_size(t), 8 * sizeof(float)), 0);
      cr_assert_eq(memcmp(vqc_vq_embed_avg(a), vqc_vq_embed_avg(t), 8 * D * sizeof(float)), 0);
    }
    /* mean of the rows = sum of the layers' losses (double sums each,
     * rounded differently: 1e-6 relative) */
    double mean = 0.0, total = 0.0;
    for (int i = 0; i < M; i++) mean += rows[i];
    mean /= M;
    for (int l = 0; l < Q; l++) total += losses[l];
    cr_assert_gt(total, 0.0);
    cr_assert_leq(fabs(mean - total), 1e-6 * total, "step %d: %.9g vs %.9g", s,
                  mean, total);
  }
  int kinds = 0;
  for (int l = 0; l < Q; l++) kinds += cut_seen[l] > 0;
  cr_assert_geq(kinds, 2, "dropout never varied the cutoff: the test is weak");
  vqc_rvq_free(&twin);
  bn_free(&b);
}

/* VQ: the output is the codebook row vqc_vq_forward picks, the rows' mean is
 * its commitment loss; eval mode has no loss and changes no state; the
 * backward passes dq through plus the commitment term. */
Test(bottleneck, vq_adapter_forward_eval_and_backward) {
  enum { M = 12, D = LAT };
  bn_any b;
  bn_make(&b, VQC_EQUIV_BN_VQ, false);
  float z[M * D], q[M * D], rows[M];
  fill_normal(7, z, M * D, 1.0f);
  vqc_vq twin;
  cr_assert_eq(vqc_vq_init(&twin, &b.vq.vq.p, NULL), VQC_OK);
  bn_run(&b, NULL, 0, true);
  cr_assert_eq(b.iface.forward(b.iface.ctx, z, M, D, q, rows), VQC_OK, "%s",
               vqc_last_error());
  int64_t idx[M];
  float qt[M * D], loss;
  cr_assert_eq(vqc_vq_forward(&twin, NULL, z, M, true, idx, qt, &loss), VQC_OK);
  cr_assert_eq(memcmp(q, qt, sizeof q), 0);
  cr_assert_eq(memcmp(b.vq.indices, idx, sizeof idx), 0);
  double mean = 0.0;
  for (int i = 0; i < M; i++) mean += rows[i];
  mean /= M;
  cr_assert_leq(fabs(mean - loss), 1e-6 * loss, "%.9g vs %.9g", mean, loss);

  float E[16 * D];
  memcpy(E, vqc_vq_embed(&b.vq.vq), sizeof E);
  bn_run(&b, NULL, 1, false);
  cr_assert_eq(b.iface.forward(b.iface.ctx, z, M, D, q, rows), VQC_OK);
  for (int i = 0; i < M; i++) cr_assert_eq(rows[i], 0.0f);
  cr_assert_eq(memcmp(E, vqc_vq_embed(&b.vq.vq), sizeof E), 0);
  /* eval backward: dq passes unchanged (no commitment term) */
  float dq[M * D], dz[M * D] = {0};
  fill_normal(8, dq, M * D, 1.0f);
  cr_assert_eq(b.iface.backward(b.iface.ctx, z, q, dq, M, D, 0.5f, dz), VQC_OK);
  cr_assert_eq(memcmp(dz, dq, sizeof dz), 0);
  /* a backward whose row count is not the forward's is refused */
  cr_assert_eq(b.iface.backward(b.iface.ctx, z, q, dq, M - 1, D, 0.5f, dz),
               VQC_EINVAL);
  /* a latent width the codebook does not have */
  cr_assert_eq(b.iface.forward(b.iface.ctx, z, M / 2, 2 * D, q, rows),
               VQC_ESHAPE);
  vqc_vq_free(&twin);
  bn_free(&b);
}

Test(bottleneck, fsq_adapter_codes_no_loss_and_width_check) {
  enum { M = 6, D = LAT };
  bn_any b;
  bn_make(&b, VQC_EQUIV_BN_FSQ, false);
  /* spec worked example, levels [8,5,5,5]: z = [1,-1,0.3,2] -> 926 */
  float z[M * D] = {1, -1, 0.3f, 2, 0, 0, 0, 0};
  float q[M * D], rows[M];
  cr_assert_eq(b.iface.forward(b.iface.ctx, z, M, D, q, rows), VQC_OK);
  cr_assert_eq(b.fsq.indices[0], 926);
  cr_assert_eq(b.fsq.indices[1], 500);
  const float want[D] = {0.5f, -1.0f, 0.5f, 1.0f};
  for (int d = 0; d < D; d++) cr_assert_eq(q[d], want[d]);
  for (int i = 0; i < M; i++) cr_assert_eq(rows[i], 0.0f);
  cr_assert_eq(b.iface.forward(b.iface.ctx, z, 2, 2 * D, q, rows), VQC_ESHAPE);
  bn_free(&b);
}

/* ---- gradients against finite differences ---- */

enum { G_DIN = 6, G_HID = 8, G_ROWS = 5 };

/* What the twin holds fixed: the codes of the float forward. */
typedef struct fixed_choice {
  vqc_equiv_bn kind;
  double weight;            /* commitment weight */
  double z0[G_ROWS * LAT];  /* twin z at the base point */
  double q0[G_ROWS * LAT];  /* the float forward's q */
  /* RVQ: s_l = sum_{k<=l} q_k per layer (Q = 3), n layers */
  double s[3][G_ROWS * LAT];
  int layers;
  /* FSQ constants (float32 values, used in double) */
  double shift[LAT], half_l[LAT], hw[LAT];
} fixed_choice;

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

static double fsq_bound(const fixed_choice *f, double z, int d) {
  return tanh(z + f->shift[d]) * f->half_l[d];
}

/* loss(theta) with the quantizer's choice held fixed; z_out (may be NULL)
 * receives z. */
static double twin_loss(const double *theta, const double *x,
                        const fixed_choice *f, double scale, double *z_out) {
  double h1[G_ROWS * G_HID], z[G_ROWS * LAT], q[G_ROWS * LAT],
      h2[G_ROWS * G_HID], rec[G_ROWS * G_DIN];
  int64_t off = 0;
  twin_linear(theta, &off, x, G_ROWS, G_DIN, G_HID, h1);
  for (int i = 0; i < G_ROWS * G_HID; i++) h1[i] = tanh(h1[i]);
  twin_linear(theta, &off, h1, G_ROWS, G_HID, LAT, z);
  if (z_out) memcpy(z_out, z, sizeof z);
  double commit = 0.0;
  for (int i = 0; i < G_ROWS * LAT; i++) {
    const int d = i % LAT;
    switch (f->kind) {
    case VQC_EQUIV_BN_VQ: /* z + sg(q0 - z) */
      q[i] = f->q0[i] + (z[i] - f->z0[i]);
      commit += (z[i] - f->q0[i]) * (z[i] - f->q0[i]);
      break;
    case VQC_EQUIV_BN_RVQ: /* sum over layers of residual_l + sg(q_l - r_l) */
      q[i] = f->q0[i] + f->layers * (z[i] - f->z0[i]);
      for (int l = 0; l < f->layers; l++)
        commit += (z[i] - f->s[l][i]) * (z[i] - f->s[l][i]);
      break;
    case VQC_EQUIV_BN_FSQ: /* rounding passes the change of the bound */
      q[i] = f->q0[i] + (fsq_bound(f, z[i], d) - fsq_bound(f, f->z0[i], d)) /
                            f->hw[d];
      break;
    }
  }
  twin_linear(theta, &off, q, G_ROWS, LAT, G_HID, h2);
  for (int i = 0; i < G_ROWS * G_HID; i++) h2[i] = tanh(h2[i]);
  twin_linear(theta, &off, h2, G_ROWS, G_HID, G_DIN, rec);
  double mse = 0.0;
  for (int i = 0; i < G_ROWS * G_DIN; i++) mse += (rec[i] - x[i]) * (rec[i] - x[i]);
  return scale * (mse / (G_ROWS * G_DIN) + f->weight * commit / (G_ROWS * LAT));
}

/* Smallest margin by which the float forward's choice is made: VQ, the gap
 * between the best and second-best squared distance; RVQ, the same over
 * layers; FSQ, the distance of the bound from a rounding edge. */
static double choice_margin(const bn_any *b, const float *z) {
  double margin = INFINITY;
  if (b->kind == VQC_EQUIV_BN_FSQ) {
    for (int i = 0; i < G_ROWS * LAT; i++) {
      const int d = i % LAT;
      const double bounded = tanh((double)z[i] + b->fsq.fsq.shift[d]) *
                                 b->fsq.fsq.half_l[d] - b->fsq.fsq.offset[d];
      const double edge = floor(bounded) + 0.5;
      margin = fmin(margin, fabs(bounded - edge));
    }
    return margin;
  }
  const int layers = b->kind == VQC_EQUIV_BN_VQ ? 1 : 3;
  double r[G_ROWS * LAT];
  for (int i = 0; i < G_ROWS * LAT; i++) r[i] = z[i];
  for (int l = 0; l < layers; l++) {
    vqc_vq *vq = b->kind == VQC_EQUIV_BN_VQ ? (vqc_vq *)&b->vq.vq
                                            : &b->rvq.rvq.layers[l];
    const float *E = vqc_vq_embed(vq);
    const int64_t C = vq->p.codebook_size;
    for (int i = 0; i < G_ROWS; i++) {
      double best = INFINITY, second = INFINITY;
      int64_t arg = 0;
      for (int64_t c = 0; c < C; c++) {
        double d2 = 0.0;
        for (int d = 0; d < LAT; d++) {
          const double e = r[i * LAT + d] - E[c * LAT + d];
          d2 += e * e;
        }
        if (d2 < best) {
          second = best;
          best = d2;
          arg = c;
        } else if (d2 < second) {
          second = d2;
        }
      }
      margin = fmin(margin, second - best);
      for (int d = 0; d < LAT; d++) r[i * LAT + d] -= E[arg * LAT + d];
    }
  }
  return margin;
}

static void check_gradients(vqc_equiv_bn kind, uint64_t seed) {
  float x[G_ROWS * G_DIN];
  fill_normal(seed, x, G_ROWS * G_DIN, 1.0f);
  bn_any b;
  bn_make(&b, kind, true);
  const vqc_autoencoder_config cfg = {G_DIN, G_HID, LAT, VQC_ACT_TANH};
  vqc_rng init;
  vqc_rng_init(&init, seed, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
  vqc_autoencoder *ae;
  cr_assert_eq(vqc_autoencoder_create(&cfg, &init, &b.iface, &ae), VQC_OK);
  const float scale = 1.5f;
  vqc_ae_loss loss;
  cr_assert_eq(vqc_autoencoder_forward(ae, x, G_ROWS, &loss), VQC_OK, "%s",
               vqc_last_error());
  cr_assert_eq(vqc_autoencoder_backward(ae, scale), VQC_OK);
  const float *zf, *qf;
  vqc_autoencoder_activations(ae, &zf, &qf, NULL);

  /* The perturbations move z by ~1e-5; the choice must be clear by more. */
  const double margin = choice_margin(&b, zf);
  cr_assert_gt(margin, 1e-2, "%s: the quantizer's choice is too close to an "
               "edge (%.3g); change the seed", kind_name(kind), margin);

  const vqc_param_list *params = vqc_autoencoder_params(ae);
  const int64_t n = vqc_param_list_grad_numel(params);
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
  double xd[G_ROWS * G_DIN];
  for (int i = 0; i < G_ROWS * G_DIN; i++) xd[i] = x[i];

  fixed_choice *f = calloc(1, sizeof *f);
  f->kind = kind;
  for (int i = 0; i < G_ROWS * LAT; i++) f->q0[i] = qf[i];
  if (kind == VQC_EQUIV_BN_VQ) f->weight = b.vq.vq.p.commitment_weight;
  if (kind == VQC_EQUIV_BN_RVQ) {
    f->weight = b.rvq.rvq.p.layer.commitment_weight;
    f->layers = b.rvq.cutoff + 1;
    cr_assert_eq(f->layers, 3, "no dropout here: every layer runs");
    /* The layers' codes from the (frozen) codebooks, summed in order. */
    float codes[3 * G_ROWS * LAT];
    cr_assert_eq(vqc_rvq_codes_from_indices(&b.rvq.rvq, b.rvq.indices, G_ROWS,
                                            3, codes), VQC_OK);
    for (int i = 0; i < G_ROWS * LAT; i++) {
      double acc = 0.0;
      for (int l = 0; l < 3; l++) {
        acc += codes[l * G_ROWS * LAT + i];
        f->s[l][i] = acc;
      }
    }
  }
  for (int d = 0; d < LAT; d++) {
    f->shift[d] = b.fsq.fsq.shift[d];
    f->half_l[d] = b.fsq.fsq.half_l[d];
    f->hw[d] = b.fsq.fsq.half_width[d];
  }
  f->weight = kind == VQC_EQUIV_BN_FSQ ? 0.0 : f->weight;
  /* z0: the twin's own z at the base point, so the twin's q there is q0. */
  twin_loss(theta, xd, f, 1.0, f->z0);
  const double twin0 = twin_loss(theta, xd, f, 1.0, NULL);
  cr_assert_leq(fabs(loss.total - twin0), 1e-5 * fabs(twin0),
                "%s: loss %.9g vs twin %.9g", kind_name(kind), loss.total, twin0);
  if (kind != VQC_EQUIV_BN_FSQ) cr_assert_gt(loss.bottleneck, 0.0);

  for (int64_t k = 0; k < n; k++) {
    const double keep = theta[k];
    theta[k] = keep + FD_H;
    const double up = twin_loss(theta, xd, f, scale, NULL);
    theta[k] = keep - FD_H;
    const double down = twin_loss(theta, xd, f, scale, NULL);
    theta[k] = keep;
    fd[k] = (up - down) / (2 * FD_H);
  }
  double top = 0.0, worst = 0.0, enc_top = 0.0;
  int64_t at = 0;
  /* encoder.0 and encoder.2 come first: their gradient crosses the
   * bottleneck, so it must not be ~0 (or the check would be vacuous). */
  const int64_t enc = G_DIN * G_HID + G_HID + G_HID * LAT + LAT;
  for (int64_t k = 0; k < n; k++) {
    top = fmax(top, fabs(fd[k]));
    if (k < enc) enc_top = fmax(enc_top, fabs(fd[k]));
    const double e = fabs((double)analytic[k] - fd[k]);
    if (e > worst) {
      worst = e;
      at = k;
    }
  }
  fprintf(stderr, "gradients %s: worst |analytic - fd| = %.3g of max |grad| "
          "%.3g; choice margin %.3g\n", kind_name(kind), worst / top, top,
          margin);
  cr_assert_gt(enc_top, 1e-3, "%s: encoder gradient ~0", kind_name(kind));
  cr_assert_leq(worst, FD_REL_TOL * top,
                "%s: parameter %lld analytic %.9g vs finite difference %.9g "
                "(%.3g of max |grad| %.3g)", kind_name(kind), (long long)at,
                analytic[at], fd[at], worst / top, top);
  free(f);
  free(theta);
  free(fd);
  free(analytic);
  vqc_autoencoder_destroy(ae);
  bn_free(&b);
}

Test(bottleneck, vq_gradients_match_finite_differences) {
  check_gradients(VQC_EQUIV_BN_VQ, 300);
}
Test(bottleneck, rvq_gradients_match_finite_differences) {
  check_gradients(VQC_EQUIV_BN_RVQ, 301);
}
Test(bottleneck, fsq_gradients_match_finite_differences) {
  check_gradients(VQC_EQUIV_BN_FSQ, 302);
}

/* ---- training runs (single process or threads) ---- */

enum { T_DIN = 8, T_HID = 16, T_ROWS = 48, T_STEPS = 50, MAX_W = 4,
       MAX_ENTRIES = 48 };

typedef struct train_run {
  vqc_equiv_bn kind;
  int world;                /* ranks (1 for comm NULL) */
  int steps;
  vqc_optim_config optim;
  /* written by the ranks, each its own slot */
  uint64_t digest[MAX_W][T_STEPS][MAX_ENTRIES];
  int entries;
  double loss[T_STEPS];     /* rank 0's (single process: the batch's) loss */
  vqc_status status[MAX_W];
  char err[MAX_W][256];
} train_run;

static const vqc_cluster_data_config T_DATA = {
    .seed = 2024, .dim = T_DIN, .clusters = 6, .centre_std = 1.0f,
    .noise_std = 0.2f};

/* Trains `steps` steps with the library's own draws on ramp shards (comm
 * NULL: one process on the whole batch) and digests every registered tensor
 * (model, bottleneck state, optimizer state) after each step. */
static vqc_status train_body(vqc_comm *c, train_run *tr) {
  const int rank = c ? vqc_comm_rank(c) : 0, W = c ? vqc_comm_size(c) : 1;
  int64_t off = 0, rows = T_ROWS;
  if (c) VQC_TRY(vqc_shard_range(T_ROWS, W, rank, VQC_SPLIT_RAMP, &off, &rows));
  vqc_cluster_data data;
  VQC_TRY(vqc_cluster_data_init(&data, &T_DATA));
  bn_any *b = calloc(1, sizeof *b);
  float *x = malloc(T_ROWS * T_DIN * sizeof(float));
  vqc_autoencoder *ae = NULL;
  vqc_optim *opt = NULL;
  vqc_param_list all;
  vqc_param_list_init(&all);
  const vqc_autoencoder_config cfg = {T_DIN, T_HID, LAT, VQC_ACT_TANH};
  vqc_rng init;
  vqc_rng_init(&init, 5, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
  vqc_status s = b && x ? VQC_OK : VQC_ENOMEM;
  if (s == VQC_OK) {
    bn_make(b, tr->kind, false);
    s = vqc_autoencoder_create(&cfg, &init, &b->iface, &ae);
  }
  if (s == VQC_OK) s = vqc_optim_create(&tr->optim, vqc_autoencoder_params(ae), &opt);
  if (s == VQC_OK) s = vqc_param_list_extend(&all, vqc_autoencoder_params(ae), "");
  if (s == VQC_OK) s = vqc_param_list_extend(&all, vqc_optim_state(opt), "");
  if (s == VQC_OK) s = vqc_ddp_broadcast(c, &all);
  const float scale = vqc_ddp_loss_scale(rows, T_ROWS, W);
  for (int step = 0; step < tr->steps && s == VQC_OK; step++) {
    int64_t sizes[MAX_W];
    s = vqc_shard_sizes(T_ROWS, W, VQC_SPLIT_RAMP, sizes);
    if (s == VQC_OK)
      s = c ? vqc_cluster_data_shard(&data, (uint64_t)step, rank, rows, x, NULL)
            : vqc_cluster_data_global(&data, (uint64_t)step, 1, sizes, x, NULL);
    bn_run(b, c, (uint64_t)step, true);
    vqc_ae_loss loss = {0};
    if (s == VQC_OK) s = vqc_autoencoder_forward(ae, x, rows, &loss);
    vqc_param_list_zero_grad(vqc_autoencoder_params(ae));
    if (s == VQC_OK) s = vqc_autoencoder_backward(ae, scale);
    if (s == VQC_OK) s = vqc_ddp_average_grads(c, vqc_autoencoder_params(ae), NULL);
    if (s == VQC_OK) s = vqc_optim_step(opt);
    if (rank == 0) {
      tr->loss[step] = loss.total;
      tr->entries = all.count;
    }
    for (int i = 0; i < all.count && i < MAX_ENTRIES && s == VQC_OK; i++)
      s = vqc_param_digest(&all.items[i], &tr->digest[rank][step][i]);
  }
  if (s != VQC_OK) snprintf(tr->err[rank], sizeof tr->err[rank], "%s", vqc_last_error());
  tr->status[rank] = s;
  vqc_param_list_free(&all);
  vqc_optim_destroy(opt);
  vqc_autoencoder_destroy(ae);
  if (b) bn_free(b);
  free(b);
  free(x);
  vqc_cluster_data_free(&data);
  return s;
}

static vqc_status train_rank(vqc_comm *c, void *arg) { return train_body(c, arg); }

static train_run *new_run(vqc_equiv_bn kind, int world, int steps) {
  train_run *tr = calloc(1, sizeof *tr);
  cr_assert_not_null(tr);
  tr->kind = kind;
  tr->world = world;
  tr->steps = steps;
  tr->optim = vqc_optim_adam(1e-2);
  return tr;
}

static void run(train_run *tr) {
  if (tr->world == 1) {
    cr_assert_eq(train_body(NULL, tr), VQC_OK, "%s", tr->err[0]);
  } else {
    vqc_status s = vqc_threads_run(tr->world, 60.0, train_rank, tr, NULL);
    for (int r = 0; r < tr->world; r++)
      cr_assert_eq(tr->status[r], VQC_OK, "rank %d: %s", r, tr->err[r]);
    cr_assert_eq(s, VQC_OK);
  }
  cr_assert_leq(tr->entries, MAX_ENTRIES);
}

/* 50 Adam steps on fresh batches of the same clusters: the mean loss of the
 * last five steps is well below that of the first five. Measured (first ->
 * last): see the figures printed below; we require a factor of 2. */
static void check_learns(vqc_equiv_bn kind) {
  train_run *tr = new_run(kind, 1, T_STEPS);
  run(tr);
  double first = 0.0, last = 0.0;
  for (int s = 0; s < 5; s++) {
    first += tr->loss[s] / 5;
    last += tr->loss[T_STEPS - 1 - s] / 5;
  }
  fprintf(stderr, "training %s: mean loss of steps 0-4 %.4f, of steps 45-49 %.4f\n",
          kind_name(kind), first, last);
  cr_assert(isfinite(last));
  cr_assert_lt(last, 0.5 * first, "%s: loss %.4f -> %.4f", kind_name(kind),
               first, last);
  free(tr);
}

Test(bottleneck_training, vq_autoencoder_learns) { check_learns(VQC_EQUIV_BN_VQ); }
Test(bottleneck_training, rvq_autoencoder_learns) { check_learns(VQC_EQUIV_BN_RVQ); }
Test(bottleneck_training, fsq_autoencoder_learns) { check_learns(VQC_EQUIV_BN_FSQ); }

/* Two identical runs: every registered tensor bit-identical after every
 * step, in one process and on 3 rank threads (library draws: binomial split
 * on rank 0, per-rank row streams, synced dropout seeds), where every rank
 * also holds rank 0's digests. */
static void check_deterministic(vqc_equiv_bn kind, int world) {
  enum { STEPS = 12 };
  train_run *a = new_run(kind, world, STEPS), *b = new_run(kind, world, STEPS);
  run(a);
  run(b);
  cr_assert_eq(a->entries, b->entries);
  for (int r = 0; r < world; r++)
    for (int s = 0; s < STEPS; s++)
      for (int i = 0; i < a->entries; i++) {
        cr_assert_eq(a->digest[r][s][i], b->digest[r][s][i],
                     "%s W=%d: rank %d step %d entry %d differs between runs",
                     kind_name(kind), world, r, s, i);
        cr_assert_eq(a->digest[r][s][i], a->digest[0][s][i],
                     "%s W=%d: rank %d step %d entry %d differs from rank 0",
                     kind_name(kind), world, r, s, i);
      }
  /* teeth: the state does change from step to step */
  int changed = 0;
  for (int i = 0; i < a->entries; i++)
    changed += a->digest[0][0][i] != a->digest[0][STEPS - 1][i];
  cr_assert_gt(changed, a->entries / 2, "only %d of %d entries changed", changed,
               a->entries);
  free(a);
  free(b);
}

Test(bottleneck_determinism, vq_runs_are_bit_identical) {
  check_deterministic(VQC_EQUIV_BN_VQ, 1);
  check_deterministic(VQC_EQUIV_BN_VQ, 3);
}
Test(bottleneck_determinism, rvq_runs_are_bit_identical) {
  check_deterministic(VQC_EQUIV_BN_RVQ, 1);
  check_deterministic(VQC_EQUIV_BN_RVQ, 3);
}
Test(bottleneck_determinism, fsq_runs_are_bit_identical) {
  check_deterministic(VQC_EQUIV_BN_FSQ, 1);
  check_deterministic(VQC_EQUIV_BN_FSQ, 3);
}

/* ---- the shared equivalence cases on rank threads ---- */

enum { EQ_MAX_W = 5 };

typedef struct eq_run {
  int which;           /* index into vqc_equiv_cases, or -1: AE with fault */
  vqc_ddp_fault fault;
  int failures[EQ_MAX_W];
  vqc_equiv_report rep[EQ_MAX_W];
} eq_run;

static vqc_status eq_rank(vqc_comm *c, void *arg) {
  eq_run *e = arg;
  const int r = vqc_comm_rank(c);
  e->failures[r] =
      e->which >= 0
          ? vqc_equiv_cases[e->which].fn(c, &e->rep[r])
          : vqc_equiv_autoencoder(c, VQC_EQUIV_BN_VQ, e->fault, &e->rep[r]);
  return VQC_OK; /* failures are read by the test */
}

static void run_equiv_case(int which) {
  for (int W = 1; W <= EQ_MAX_W; W++) {
    eq_run e = {.which = which};
    cr_assert_eq(vqc_threads_run(W, 60.0, eq_rank, &e, NULL), VQC_OK, "%s",
                 vqc_last_error());
    char line[512];
    vqc_equiv_format(&e.rep[0], line, sizeof line);
    fprintf(stderr, "%s: %s\n", vqc_equiv_cases[which].name, line);
    for (int r = 0; r < W; r++)
      cr_expect_eq(e.failures[r], 0, "%s W=%d rank %d: %d failed checks (see "
                   "stderr)", vqc_equiv_cases[which].name, W, r, e.failures[r]);
    cr_expect_eq(e.rep[0].index_mismatches, 0);
    cr_expect_eq(e.rep[0].digest_mismatches, 0);
    cr_expect_gt(e.rep[0].index_checked, 0);
    cr_expect_gt(e.rep[0].digest_checked, 0);
  }
}

Test(bottleneck_equivalence, vq_codebook_w1_to_5) { run_equiv_case(0); }
Test(bottleneck_equivalence, rvq_dropout_w1_to_5) { run_equiv_case(1); }
Test(bottleneck_equivalence, autoencoder_vq_w1_to_5) { run_equiv_case(2); }
Test(bottleneck_equivalence, autoencoder_rvq_w1_to_5) { run_equiv_case(3); }
Test(bottleneck_equivalence, autoencoder_fsq_w1_to_5) { run_equiv_case(4); }

/* The checks have teeth: without the gradient all_reduce each replica
 * steps on its own gradient, so the other ranks' digests part from rank
 * 0's, and every rank's weights leave the single-process run's. */
Test(bottleneck_equivalence, skipped_grad_sync_is_caught) {
  eq_run e = {.which = -1, .fault = VQC_DDP_FAULT_SKIP_GRAD_SYNC};
  cr_assert_eq(vqc_threads_run(3, 60.0, eq_rank, &e, NULL), VQC_OK);
  cr_expect_gt(e.rep[0].digest_mismatches, 0);
  cr_expect_gt(e.rep[0].weight_abs, VQC_EQUIV_WEIGHT_TOL);
  for (int r = 0; r < 3; r++)
    cr_expect_gt(e.failures[r], 0, "rank %d saw nothing wrong", r);
}
