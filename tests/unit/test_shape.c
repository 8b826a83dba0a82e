/* test_shape.c: the probe API (vqc/probe.h) and the shape checker
 * (checkers/shape.c).
 *
 * The checker is driven twice over:
 *   - by hand-made "dead_code" probes on 3 ranks of the threads backend:
 *     counts that disagree on one rank give one `shape_mismatch` with every
 *     rank's counts and the root cause, and VQC_ESHAPE on every rank;
 *     matching counts give nothing;
 *   - through the real VQ library: a 3-rank EMA + dead-code run stays clean;
 *     a split that loses a draw (#142 a) and a rank whose cluster_size
 *     diverged (#142 b, including a rank with nothing to replace, which
 *     would otherwise leave the others waiting in the sampler) end on every
 *     rank with VQC_ESHAPE, the finding, and an untouched codebook.
 * Rank threads record what they saw; the assertions run on the main thread. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "checkers.h"
#include "vqc/comm.h"
#include "vqc/nn.h"
#include "vqc/probe.h"
#include "vqc/rng.h"
#include "vqc/vq.h"

#define W 3

/* ---- the probe API on its own */

static vqc_status count_probe(vqc_comm *c, const vqc_probe *p, void *user) {
  (void)c;
  (void)p;
  ++*(int *)user;
  return VQC_OK;
}

static vqc_status refuse_probe(vqc_comm *c, const vqc_probe *p, void *user) {
  (void)c;
  (void)p;
  (void)user;
  return vqc_error(VQC_ESHAPE, "refused");
}

Test(probe, keys_set_get_and_overflow) {
  vqc_probe p = {.name = "x"};
  static const char *const keys[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
  for (int i = 0; i < VQC_PROBE_MAX_KEYS; i++)
    cr_assert_eq(vqc_probe_set(&p, keys[i], 10 * i), VQC_OK);
  cr_expect_eq(vqc_probe_set(&p, "one too many", 1), VQC_ENOMEM);
  cr_expect_eq(vqc_probe_set(&p, "c", -7), VQC_OK); /* overwrite, no new key */
  int64_t v = 0;
  cr_expect(vqc_probe_get(&p, "c", &v) && v == -7);
  cr_expect(vqc_probe_get(&p, "h", &v) && v == 70);
  cr_expect(!vqc_probe_get(&p, "nope", &v));
  cr_expect_eq(p.n, VQC_PROBE_MAX_KEYS);
}

static vqc_status subscribe_rank(vqc_comm *c, void *arg) {
  int *calls = arg;
  vqc_probe p = {.name = "dead_code"};
  /* No handler: nothing runs. A side channel takes no handlers. */
  VQC_TRY(vqc_probe_emit(c, &p));
  if (vqc_probe_subscribe(vqc_comm_side(c), count_probe, calls) != VQC_EINVAL)
    return vqc_error(VQC_EINTERNAL, "side channel accepted a probe handler");
  int *mine = &calls[vqc_comm_rank(c)];
  VQC_TRY(vqc_probe_subscribe(c, count_probe, mine));
  VQC_TRY(vqc_probe_emit(c, &p));
  /* A refusal reaches the emitter and stops the handlers after it. */
  VQC_TRY(vqc_probe_subscribe(c, refuse_probe, NULL));
  VQC_TRY(vqc_probe_subscribe(c, count_probe, mine));
  if (vqc_probe_emit(c, &p) != VQC_ESHAPE)
    return vqc_error(VQC_EINTERNAL, "refusal lost");
  vqc_probe_unsubscribe(c, refuse_probe, NULL);
  vqc_probe_unsubscribe(c, count_probe, mine);
  vqc_probe_unsubscribe(c, count_probe, mine);
  return vqc_probe_emit(c, &p);
}

Test(probe, handlers_run_in_order_and_a_refusal_comes_back) {
  int calls[W] = {0};
  cr_expect_eq(vqc_probe_emit(NULL, &(vqc_probe){.name = "x"}), VQC_OK);
  cr_assert_eq(vqc_threads_run(W, 10.0, subscribe_rank, calls, NULL), VQC_OK,
               "%s", vqc_last_error());
  /* emit 2: one call; emit 3: one call before the refusal, none after;
   * emit 4: no handler left. */
  for (int r = 0; r < W; r++) cr_expect_eq(calls[r], 2, "rank %d", r);
}

/* ---- the checker on hand-made probes */

typedef struct fake {
  int64_t expired[W], sampled[W];
  bool diverged_state;      /* rank 2's registered tensor differs */
  vqc_findings findings;
  int line;                 /* line of the emit */
  vqc_status emit[W];
  char err[W][512];
} fake;

static vqc_status fake_rank(vqc_comm *c, void *arg) {
  fake *f = arg;
  const int r = vqc_comm_rank(c);
  /* Replicated state: equal on every rank unless told otherwise. */
  float cs[4] = {1, 2, 3, 4}, embed[2] = {5, 6};
  if (f->diverged_state && r == 2) cs[3] = 4.5f;
  const int64_t n4 = 4, n2 = 2;
  vqc_param_list state;
  vqc_param_list_init(&state);
  VQC_TRY(vqc_param_list_add(&state, "layers.1.embed", VQC_F32, embed, NULL,
                             1, &n2));
  VQC_TRY(vqc_param_list_add(&state, "layers.1.cluster_size", VQC_F32, cs,
                             NULL, 1, &n4));
  vqc_check_ctx ctx = {.comm = c, .rank = r, .size = W, .state = &state,
                       .findings = &f->findings, .opts = {.interval = 1}};
  vqc_checker ch;
  vqc_status s = vqc_checker_shape(&ch);
  if (s == VQC_OK) s = ch.attach(&ch, &ctx);
  if (s == VQC_OK) {
    vqc_probe p = {.name = "dead_code", .step = 3, .layer = 1};
    vqc_probe_set(&p, "expired", f->expired[r]);
    vqc_probe_set(&p, "sampled", f->sampled[r]);
    vqc_probe_set(&p, "local_rows", 100 + r);
    vqc_probe_set(&p, "layer", 1);
    f->line = __LINE__ + 1;
    f->emit[r] = vqc_probe_emit(c, &p);
    snprintf(f->err[r], sizeof f->err[r], "%s", vqc_last_error());
    s = ch.step_end(&ch, &ctx, 3);
  }
  vqc_status fin = ch.finish ? ch.finish(&ch, &ctx, s) : VQC_OK;
  if (ch.destroy) ch.destroy(&ch, &ctx);
  vqc_param_list_free(&state);
  return s != VQC_OK ? s : fin;
}

static void run_fake(fake *f) {
  vqc_findings_init(&f->findings);
  cr_assert_eq(vqc_threads_run(W, 10.0, fake_rank, f, NULL), VQC_OK, "%s",
               vqc_last_error());
}

static int64_t rank_field(const vqc_finding *g, int r, const char *key) {
  const json_t *o = json_array_get(json_object_get(g->detail, "ranks"), r);
  return json_integer_value(json_object_get(o, key));
}

static const char *detail_str(const vqc_finding *g, const char *key) {
  return json_string_value(json_object_get(g->detail, key));
}

Test(shape, a_rank_with_fewer_sampled_rows_is_reported_and_refused_everywhere) {
  static fake f = {.expired = {9331, 9331, 9331},
                   .sampled = {9331, 9330, 9331}};
  run_fake(&f);
  for (int r = 0; r < W; r++) {
    cr_expect_eq(f.emit[r], VQC_ESHAPE, "rank %d", r);
    cr_expect(strstr(f.err[r], "rank 1 expired 9331 codes but 9330 rows "
                               "were sampled") != NULL,
              "rank %d: %s", r, f.err[r]);
  }
  cr_assert_eq(f.findings.count, 1);
  const vqc_finding *g = &f.findings.items[0];
  cr_expect_eq(g->kind, VQC_FINDING_SHAPE_MISMATCH);
  cr_expect_eq(g->step, 3);
  cr_expect(g->nranks == 1 && g->ranks[0] == 1);
  cr_expect_eq(json_integer_value(json_object_get(g->detail, "layer")), 1);
  cr_assert_eq(json_array_size(json_object_get(g->detail, "ranks")), W);
  for (int r = 0; r < W; r++) {
    cr_expect_eq(rank_field(g, r, "rank"), r);
    cr_expect_eq(rank_field(g, r, "expired"), 9331);
    cr_expect_eq(rank_field(g, r, "sampled"), f.sampled[r]);
    cr_expect_eq(rank_field(g, r, "local_rows"), 100 + r);
  }
  cr_expect_str_eq(detail_str(g, "root_cause"),
                   "replicated state agrees: the sampler lost rows");
  char site[64];
  snprintf(site, sizeof site, "test_shape.c:%d fake_rank", f.line);
  cr_expect(strstr(g->site, site) != NULL, "site %s", g->site);
  cr_expect(strstr(g->message, "dead-code replacement at step 3 layer 1: "
                               "rank 1 expired 9331 codes but 9330 rows") ==
                g->message, "%s", g->message);
  vqc_findings_free(&f.findings);
}

Test(shape, matching_counts_give_nothing) {
  static fake f = {.expired = {7, 7, 7}, .sampled = {7, 7, 7}};
  run_fake(&f);
  for (int r = 0; r < W; r++) cr_expect_eq(f.emit[r], VQC_OK, "%s", f.err[r]);
  cr_expect_eq(f.findings.count, 0);
  /* Before sampling (sampled -1), agreeing counts are fine too. */
  static fake g = {.expired = {0, 0, 0}, .sampled = {-1, -1, -1}};
  run_fake(&g);
  for (int r = 0; r < W; r++) cr_expect_eq(g.emit[r], VQC_OK, "%s", g.err[r]);
  cr_expect_eq(g.findings.count, 0);
  vqc_findings_free(&f.findings);
  vqc_findings_free(&g.findings);
}

Test(shape, ranks_that_disagree_on_expired_name_the_diverged_state) {
  /* Before sampling: rank 2 has nothing to replace, the others 5 codes. */
  static fake f = {.expired = {5, 5, 0}, .sampled = {-1, -1, -1},
                   .diverged_state = true};
  run_fake(&f);
  for (int r = 0; r < W; r++) cr_expect_eq(f.emit[r], VQC_ESHAPE, "rank %d", r);
  cr_assert_eq(f.findings.count, 1);
  const vqc_finding *g = &f.findings.items[0];
  cr_expect(g->nranks == 1 && g->ranks[0] == 2);
  cr_expect_str_eq(g->tensor, "layers.1.cluster_size");
  cr_expect_str_eq(
      json_string_value(json_object_get(g->detail, "root_cause_tensor")),
      "layers.1.cluster_size");
  cr_expect(json_is_null(json_object_get(
      json_array_get(json_object_get(g->detail, "ranks"), 0), "sampled")));
  cr_expect(strstr(g->message, "disagree on how many codes to fill (rank 0: "
                               "5, rank 1: 5, rank 2: 0)") != NULL,
            "%s", g->message);
  vqc_findings_free(&f.findings);
}

Test(shape, an_earlier_divergence_finding_is_the_root_cause) {
  static fake f = {.expired = {5, 4, 5}, .sampled = {-1, -1, -1},
                   .diverged_state = true};
  vqc_findings_init(&f.findings);
  vqc_finding d;
  vqc_finding_init(&d, VQC_FINDING_DIVERGENCE, 1, "layers.0.embed differs");
  snprintf(d.tensor, sizeof d.tensor, "layers.0.embed");
  cr_assert_eq(vqc_findings_add(&f.findings, &d), VQC_OK);
  cr_assert_eq(vqc_threads_run(W, 10.0, fake_rank, &f, NULL), VQC_OK);
  cr_assert_eq(f.findings.count, 2);
  const vqc_finding *g = &f.findings.items[1];
  cr_expect_eq(g->kind, VQC_FINDING_SHAPE_MISMATCH);
  cr_expect_str_eq(g->tensor, "layers.0.embed");
  cr_expect_eq(json_integer_value(json_object_get(g->detail, "root_cause_step")),
               1);
  cr_expect(strstr(detail_str(g, "root_cause"), "since step 1") != NULL,
            "%s", detail_str(g, "root_cause"));
  vqc_findings_free(&f.findings);
}

/* ---- the checker on the real VQ library */

#define VC 8  /* codes */
#define VD 4  /* dims */
#define VSTEPS 4
#define VMAX_ROWS 21

typedef enum {
  V_CLEAN,       /* default draws: EMA + dead code, 4 steps */
  V_LOSSY_SPLIT, /* the split gives one row fewer than k (#142 a) */
  V_DIVERGED,    /* rank 2's cluster_size differs: it expires nothing */
} vq_case;

typedef struct vq_run {
  vq_case kind;
  vqc_findings findings;
  vqc_status status[W];
  char err[W][512];
  int stage1[W], stage2[W]; /* dead_code probes seen before / after sampling */
  int64_t replaced[W];      /* codes replaced over the run */
  bool untouched[W];        /* the refused call changed no state */
} vq_run;

static const int64_t vq_rows[W] = {12, 4, 21};

/* Counts the dead_code probes (a second handler next to the checker's). */
static vqc_status seen_probe(vqc_comm *c, const vqc_probe *p, void *user) {
  vq_run *v = user;
  const int r = vqc_comm_rank(c);
  int64_t sampled = -1;
  if (strcmp(p->name, "dead_code") != 0) return VQC_OK;
  vqc_probe_get(p, "sampled", &sampled);
  if (sampled < 0)
    v->stage1[r]++;
  else
    v->stage2[r]++;
  return VQC_OK;
}

/* Rank 0's split that loses one draw: the library's own split, then one
 * share less for the last rank that had any (upstream's float remainder). */
static vqc_status lossy_split(void *user, vqc_draw_at at, int size,
                              const int64_t *counts, int64_t k,
                              int64_t *shares) {
  (void)user;
  vqc_rng r;
  vqc_rng_init(&r, 5, vqc_rng_stream_for(at.step, VQC_RNG_DEAD_CODE_SPLIT, -1));
  VQC_TRY(vqc_vq_split_draws(&r, size, counts, k, shares));
  for (int i = size - 1; i >= 0; i--)
    if (shares[i] > 0) {
      shares[i]--;
      break;
    }
  return VQC_OK;
}

static vqc_status vq_body(vq_run *v, vqc_comm *c, vqc_vq *vq,
                          vqc_check_ctx *ctx, vqc_checker *ch) {
  const int r = vqc_comm_rank(c);
  const int64_t M = vq_rows[r];
  float x[VMAX_ROWS * VD], q[VMAX_ROWS * VD], loss;
  int64_t idx[VMAX_ROWS];
  vqc_rng g;
  if (v->kind != V_CLEAN) {
    /* One dead-code call on a known state: codes 0, 3 and 5 are dead. */
    vqc_rng_init(&g, 11, vqc_rng_stream_for(0, VQC_RNG_TEST, r));
    vqc_rng_normal(&g, x, M * VD, 0.0f, 1.0f);
    float *cs = vqc_vq_cluster_size(vq);
    for (int i = 0; i < VC; i++) cs[i] = (i == 0 || i == 3 || i == 5) ? 0.5f : 9.0f;
    if (v->kind == V_DIVERGED && r == 2) cs[0] = cs[3] = cs[5] = 9.0f;
    float E0[VC * VD], cs0[VC];
    memcpy(E0, vqc_vq_embed(vq), sizeof E0);
    memcpy(cs0, cs, sizeof cs0);
    const vqc_draws lossy = {NULL, NULL, lossy_split, NULL, NULL};
    const vqc_vq_ctx vctx = {c, 2, v->kind == V_LOSSY_SPLIT ? &lossy : NULL, 0};
    int64_t k = 0;
    vqc_status s = vqc_vq_expire_codes(vq, &vctx, x, M, NULL, &k);
    v->untouched[r] = memcmp(E0, vqc_vq_embed(vq), sizeof E0) == 0 &&
                      memcmp(cs0, cs, sizeof cs0) == 0;
    return s;
  }
  for (int st = 0; st < VSTEPS; st++) {
    vqc_rng_init(&g, 11, vqc_rng_stream_for((uint64_t)st, VQC_RNG_TEST, r));
    vqc_rng_normal(&g, x, M * VD, 0.0f, 1.0f);
    const vqc_vq_ctx vctx = {c, (uint64_t)st, NULL, 0};
    VQC_TRY(vqc_vq_forward(vq, &vctx, x, M, true, idx, q, &loss));
    VQC_TRY(ch->step_end(ch, ctx, st));
  }
  return VQC_OK;
}

static vqc_status vq_rank(vqc_comm *c, void *arg) {
  vq_run *v = arg;
  const int r = vqc_comm_rank(c);
  vqc_vq_params p;
  vqc_vq_params_default(&p, VD, VC);
  p.threshold_ema_dead_code = 2.5;
  p.seed = 42;
  vqc_vq vq;
  vqc_param_list state;
  vqc_param_list_init(&state);
  vqc_checker ch = {0};
  vqc_check_ctx ctx = {.comm = c, .rank = r, .size = W, .state = &state,
                       .findings = &v->findings, .opts = {.interval = 1}};
  vqc_status s = vqc_vq_init(&vq, &p, NULL);
  const vqc_tensor *t[3] = {&vq.embed, &vq.cluster_size, &vq.embed_avg};
  const char *names[3] = {"embed", "cluster_size", "embed_avg"};
  for (int i = 0; i < 3 && s == VQC_OK; i++)
    s = vqc_param_list_add(&state, names[i], VQC_F32,
                           vqc_tensor_data_untracked(t[i]), NULL, t[i]->ndim,
                           t[i]->shape);
  if (s == VQC_OK) s = vqc_checker_shape(&ch);
  if (s == VQC_OK) s = ch.attach(&ch, &ctx);
  if (s == VQC_OK) s = vqc_probe_subscribe(c, seen_probe, v);
  if (s == VQC_OK) s = vq_body(v, c, &vq, &ctx, &ch);
  v->status[r] = s;
  if (s != VQC_OK) snprintf(v->err[r], sizeof v->err[r], "%s", vqc_last_error());
  if (ch.finish) ch.finish(&ch, &ctx, s);
  if (ch.destroy) ch.destroy(&ch, &ctx);
  vqc_probe_unsubscribe(c, seen_probe, v);
  vqc_param_list_free(&state);
  vqc_vq_free(&vq);
  return VQC_OK; /* statuses are checked by the test */
}

static void run_vq(vq_run *v) {
  vqc_findings_init(&v->findings);
  /* 10 s: a rank left waiting would fail the test instead of hanging it. */
  cr_assert_eq(vqc_threads_run(W, 10.0, vq_rank, v, NULL), VQC_OK);
}

Test(shape_vq, ema_and_dead_code_on_three_ranks_stay_clean) {
  static vq_run v = {.kind = V_CLEAN};
  run_vq(&v);
  for (int r = 0; r < W; r++) {
    cr_expect_eq(v.status[r], VQC_OK, "rank %d: %s", r, v.err[r]);
    /* One count probe per step, and codes were really replaced. */
    cr_expect_eq(v.stage1[r], VSTEPS, "rank %d", r);
    cr_expect_gt(v.stage2[r], 0, "rank %d: no code expired", r);
  }
  cr_expect_eq(v.findings.count, 0, "first: %s",
               v.findings.count ? v.findings.items[0].message : "");
  vqc_findings_free(&v.findings);
}

Test(shape_vq, a_split_that_loses_a_draw_is_refused_on_every_rank) {
  static vq_run v = {.kind = V_LOSSY_SPLIT};
  run_vq(&v);
  for (int r = 0; r < W; r++) {
    cr_expect_eq(v.status[r], VQC_ESHAPE, "rank %d: %s", r, v.err[r]);
    cr_expect(v.untouched[r], "rank %d wrote into its codebook", r);
    cr_expect(strstr(v.err[r], "expired 3 codes but 2 rows were sampled"),
              "rank %d: %s", r, v.err[r]);
  }
  cr_assert_eq(v.findings.count, 1);
  const vqc_finding *g = &v.findings.items[0];
  cr_expect_eq(g->kind, VQC_FINDING_SHAPE_MISMATCH);
  cr_expect_eq(g->step, 2);
  cr_expect_eq(g->nranks, W);
  for (int r = 0; r < W; r++) {
    cr_expect_eq(rank_field(g, r, "expired"), 3);
    cr_expect_eq(rank_field(g, r, "sampled"), 2);
    cr_expect_eq(rank_field(g, r, "local_rows"), vq_rows[r]);
  }
  cr_expect(strstr(g->site, "vq_sampler.c"), "%s", g->site);
  cr_expect_str_eq(detail_str(g, "root_cause"),
                   "replicated state agrees: the sampler lost rows");
  vqc_findings_free(&v.findings);
}

Test(shape_vq, a_rank_whose_cluster_size_diverged_stops_everyone_cleanly) {
  static vq_run v = {.kind = V_DIVERGED};
  run_vq(&v);
  for (int r = 0; r < W; r++) {
    cr_expect_eq(v.status[r], VQC_ESHAPE, "rank %d: %s", r, v.err[r]);
    cr_expect(v.untouched[r], "rank %d wrote into its codebook", r);
  }
  cr_assert_eq(v.findings.count, 1);
  const vqc_finding *g = &v.findings.items[0];
  cr_expect(g->nranks == 1 && g->ranks[0] == 2);
  cr_expect_str_eq(g->tensor, "cluster_size");
  cr_expect(strstr(g->site, "vq_dead_code.c"), "%s", g->site);
  cr_expect_eq(rank_field(g, 2, "expired"), 0);
  cr_expect_eq(rank_field(g, 0, "expired"), 3);
  vqc_findings_free(&v.findings);
}
