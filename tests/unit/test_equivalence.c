/* test_equivalence.c: the gradient equivalence checker.
 *
 * Each rank registers two trainable entries (w (3, 4) and b (4), with
 * gradients) and one that is not trained (an EMA buffer), sets its gradients
 * to the values DDP would leave (the same on every rank unless the case says
 * otherwise), and raises step_end. A fake reference_grads callback returns
 * the true gradient, a wrong one, or one within rounding of the truth. The
 * values are small binary fractions, so the expected errors are exact. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "checkers.h"
#include "vqc/comm.h"
#include "vqc/nn.h"

#define MAX_RANKS 8

/* The true averaged gradient. max|b| is 1, max|w| is 0.75. */
static float true_w(int i) { return (float)((i % 7) - 3) * 0.25f; }
static const float true_b[4] = {0.5f, -0.25f, 1.0f, 0.125f};

typedef enum {
  REF_TRUE,     /* the reference equals the ranks' gradient */
  REF_WRONG_B,  /* b[2] is 2 in the reference: rel error 1/2 on b */
  REF_ROUNDING, /* w[1] off by 2^-20 relative: rounding, under 1e-4 */
} ref_kind;

typedef struct eq_case {
  int size, steps, interval;
  ref_kind kind;
  int odd_rank;       /* this rank's b[1] is 0 (its share dropped); -1 none */
  double tolerance;   /* opts.tolerance; 0 for the default */
  int calls;          /* reference_grads calls, all ranks (atomic) */
  int steps_seen[16]; /* calls per step (atomic) */
  vqc_findings findings;
} eq_case;

static vqc_status fake_reference(void *user, int64_t step,
                                 vqc_param_list *grads) {
  eq_case *c = user;
  __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
  if (step >= 0 && step < 16)
    __atomic_fetch_add(&c->steps_seen[step], 1, __ATOMIC_RELAXED);
  if (grads->count != 2 || strcmp(grads->items[0].name, "w") != 0 ||
      strcmp(grads->items[1].name, "b") != 0 || grads->items[0].numel != 12 ||
      grads->items[1].numel != 4)
    return vqc_error(VQC_EINVAL, "reference list has the wrong entries");
  float *w = grads->items[0].data, *b = grads->items[1].data;
  for (int i = 0; i < 12; i++) w[i] = true_w(i);
  for (int i = 0; i < 4; i++) b[i] = true_b[i];
  if (c->kind == REF_WRONG_B) b[2] = 2.0f;
  if (c->kind == REF_ROUNDING) w[1] *= 1.0f + 0x1p-20f; /* exact */
  return VQC_OK;
}

static vqc_status rank_main(vqc_comm *comm, void *arg) {
  eq_case *c = arg;
  int rank = vqc_comm_rank(comm);
  float w[12], dw[12], b[4], db[4], ema[6] = {0};
  for (int i = 0; i < 12; i++) {
    w[i] = 0;
    dw[i] = true_w(i);
  }
  for (int i = 0; i < 4; i++) {
    b[i] = 0;
    db[i] = true_b[i];
  }
  if (rank == c->odd_rank) db[1] = 0.0f;
  vqc_param_list list;
  vqc_param_list_init(&list);
  int64_t sw[2] = {3, 4}, sb[1] = {4}, se[1] = {6};
  vqc_status st = vqc_param_list_add(&list, "w", VQC_F32, w, dw, 2, sw);
  if (st == VQC_OK) st = vqc_param_list_add(&list, "ema", VQC_F32, ema, NULL, 1, se);
  if (st == VQC_OK) st = vqc_param_list_add(&list, "b", VQC_F32, b, db, 1, sb);

  vqc_checker chk;
  vqc_check_ctx ctx;
  memset(&chk, 0, sizeof chk);
  memset(&ctx, 0, sizeof ctx);
  ctx.comm = comm;
  ctx.rank = rank;
  ctx.size = vqc_comm_size(comm);
  ctx.state = &list;
  ctx.findings = &c->findings;
  ctx.opts.interval = c->interval;
  ctx.opts.tolerance = c->tolerance;
  ctx.reference_grads = fake_reference;
  ctx.reference_user = c;
  if (st == VQC_OK) st = vqc_checker_equivalence(&chk);
  if (st == VQC_OK) st = chk.attach(&chk, &ctx);
  for (int64_t step = 0; st == VQC_OK && step < c->steps; step++)
    st = chk.step_end(&chk, &ctx, step);
  if (st == VQC_OK) st = chk.finish(&chk, &ctx, VQC_OK);
  if (chk.destroy) chk.destroy(&chk, &ctx);
  vqc_param_list_free(&list);
  return st;
}

static void run(eq_case *c) {
  vqc_findings_init(&c->findings);
  vqc_status s = vqc_threads_run(c->size, 30.0, rank_main, c, NULL);
  cr_assert_eq(s, VQC_OK, "run failed: %s", vqc_last_error());
}

static double det_num(const vqc_finding *x, const char *key) {
  const json_t *v = json_object_get(x->detail, key);
  cr_assert(json_is_number(v), "detail.%s is not a number", key);
  return json_number_value(v);
}

Test(equivalence, true_reference_no_finding, .timeout = 60) {
  eq_case c = {.size = 3, .steps = 3, .interval = 1, .kind = REF_TRUE,
               .odd_rank = -1};
  run(&c);
  cr_expect_eq(c.findings.count, 0, "first: %s",
               c.findings.count ? c.findings.items[0].message : "");
  cr_expect_eq(c.calls, 9); /* every rank, every step */
  vqc_findings_free(&c.findings);
}

Test(equivalence, rounding_within_tolerance_no_finding, .timeout = 60) {
  eq_case c = {.size = 2, .steps = 2, .interval = 1, .kind = REF_ROUNDING,
               .odd_rank = -1};
  run(&c);
  cr_expect_eq(c.findings.count, 0, "first: %s",
               c.findings.count ? c.findings.items[0].message : "");
  vqc_findings_free(&c.findings);

  /* the same difference (|w[1]| = 0.5: 2^-21 absolute, over max|w| = 0.75)
   * is found when the tolerance is tighter than it */
  eq_case t = {.size = 2, .steps = 2, .interval = 1, .kind = REF_ROUNDING,
               .odd_rank = -1, .tolerance = 1e-7};
  run(&t);
  cr_assert_eq(t.findings.count, 1);
  cr_expect_str_eq(t.findings.items[0].tensor, "w");
  cr_expect_eq(det_num(&t.findings.items[0], "rel_error"), 0x1p-21 / 0.75);
  vqc_findings_free(&t.findings);
}

Test(equivalence, wrong_reference_names_the_tensor, .timeout = 60) {
  eq_case c = {.size = 3, .steps = 4, .interval = 1, .kind = REF_WRONG_B,
               .odd_rank = -1};
  run(&c);
  /* one finding (one rank records it, once per run), all ranks listed */
  cr_assert_eq(c.findings.count, 1, "%d findings", c.findings.count);
  const vqc_finding *x = &c.findings.items[0];
  cr_expect_eq(x->kind, VQC_FINDING_GRADIENT_MISMATCH);
  cr_expect_eq(x->step, 0);
  cr_expect_str_eq(x->tensor, "b");
  cr_assert_eq(x->nranks, 3);
  for (int r = 0; r < 3; r++) cr_expect_eq(x->ranks[r], r);
  /* |1 - 2| / max|ref| = 1 / 2 */
  cr_expect_eq(det_num(x, "rel_error"), 0.5);
  cr_expect_eq(det_num(x, "max_abs_diff"), 1.0);
  cr_expect_eq(det_num(x, "tolerance"), 1e-4);
  cr_expect_eq(json_integer_value(json_object_get(x->detail, "first_index")), 2);
  cr_expect(strstr(x->message, "'b'") != NULL, "%s", x->message);
  vqc_findings_free(&c.findings);
}

Test(equivalence, one_rank_dropped_share, .timeout = 60) {
  /* rank 2's b[1] is 0 instead of -0.25: rel error 0.25 / 1 on rank 2 only */
  eq_case c = {.size = 4, .steps = 2, .interval = 1, .kind = REF_TRUE,
               .odd_rank = 2};
  run(&c);
  cr_assert_eq(c.findings.count, 1, "%d findings", c.findings.count);
  const vqc_finding *x = &c.findings.items[0];
  cr_expect_str_eq(x->tensor, "b");
  cr_assert_eq(x->nranks, 1);
  cr_expect_eq(x->ranks[0], 2);
  cr_expect_eq(det_num(x, "rel_error"), 0.25);
  cr_expect_eq(json_integer_value(json_object_get(x->detail, "first_index")), 1);
  vqc_findings_free(&c.findings);
}

Test(equivalence, interval, .timeout = 60) {
  eq_case c = {.size = 2, .steps = 5, .interval = 2, .kind = REF_TRUE,
               .odd_rank = -1};
  run(&c);
  cr_expect_eq(c.calls, 6); /* steps 0, 2, 4 on two ranks */
  for (int s = 0; s < 5; s++)
    cr_expect_eq(c.steps_seen[s], s % 2 == 0 ? 2 : 0, "step %d", s);
  vqc_findings_free(&c.findings);
}
