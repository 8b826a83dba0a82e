/* equiv_cases.c: distributed-equals-serial test bodies (see equiv_cases.h).
 *
 * Every case keeps all ranks in step even when a check fails: checks only
 * count and print; a library error stops the step loop on every rank
 * together, because each step ends with an exchange over the side channel
 * that carries every rank's "still ok" flag along with its digests. */
#include "equiv_cases.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_tally.h"
#include "vqc/autoencoder.h"
#include "vqc/bottleneck.h"
#include "vqc/data.h"
#include "vqc/ddp.h"
#include "vqc/nn.h"
#include "vqc/optim.h"
#include "vqc/rng.h"
#include "vqc/rvq.h"
#include "vqc/vq.h"

/* Failed checks printed per case per rank; the rest are only counted. */
#define MAX_PRINTS 8

/* ---- failure tally (case_tally.h) ---- */

typedef vqc_case_tally tally;

/* True when s is VQC_OK; otherwise counts a failure naming `what`. */
static bool check_ok(tally *t, vqc_status s, const char *what, int step) {
  if (s == VQC_OK) return true;
  vqc_case_failf(t, "step %d: %s returned %s: %s", step, what,
                 vqc_status_name(s), vqc_last_error());
  return false;
}

static void report_init(vqc_equiv_report *rep, int world, int steps) {
  memset(rep, 0, sizeof *rep);
  rep->world = world;
  rep->steps = steps;
  rep->codebook_rel = -1.0;
  rep->weight_abs = -1.0;
}

/* Makes the report global: maxima and sums over all ranks, through the side
 * channel (every rank gets the same report). */
static void report_reduce(vqc_comm *c, tally *t, vqc_equiv_report *rep) {
  vqc_comm *side = vqc_comm_side(c);
  double d[2] = {rep->codebook_rel, rep->weight_abs};
  int64_t sums[4] = {rep->index_checked, rep->index_mismatches,
                     rep->digest_checked, rep->digest_mismatches};
  int64_t maxes[3] = {rep->expired, rep->dropped_steps, rep->distinct_cutoffs};
  vqc_status s;
  if ((s = vqc_all_reduce(side, d, d, 2, VQC_F64, VQC_MAX)) ||
      (s = vqc_all_reduce(side, sums, sums, 4, VQC_I64, VQC_SUM)) ||
      (s = vqc_all_reduce(side, maxes, maxes, 3, VQC_I64, VQC_MAX))) {
    check_ok(t, s, "side-channel report reduction", rep->steps);
    return;
  }
  rep->codebook_rel = d[0];
  rep->weight_abs = d[1];
  rep->index_checked = sums[0];
  rep->index_mismatches = sums[1];
  rep->digest_checked = sums[2];
  rep->digest_mismatches = sums[3];
  rep->expired = maxes[0];
  rep->dropped_steps = maxes[1];
  rep->distinct_cutoffs = maxes[2];
}

void vqc_equiv_format(const vqc_equiv_report *rep, char *buf, size_t n) {
  char cb[32], wt[32];
  if (rep->codebook_rel < 0) snprintf(cb, sizeof cb, "n/a");
  else snprintf(cb, sizeof cb, "%.2e", rep->codebook_rel);
  if (rep->weight_abs < 0) snprintf(wt, sizeof wt, "n/a");
  else snprintf(wt, sizeof wt, "%.2e", rep->weight_abs);
  snprintf(buf, n,
           "W=%d steps=%d codebook_rel=%s weight_abs=%s codes_differing=%lld/%lld "
           "digests_differing=%lld/%lld expired=%lld dropped_steps=%lld "
           "cutoffs=%lld",
           rep->world, rep->steps, cb, wt, (long long)rep->index_mismatches,
           (long long)rep->index_checked, (long long)rep->digest_mismatches,
           (long long)rep->digest_checked, (long long)rep->expired,
           (long long)rep->dropped_steps, (long long)rep->distinct_cutoffs);
}

/* ---- injected draws: one permutation of the global batch ---- */

typedef struct perm_draws {
  uint64_t seed;
  int world;            /* W of the distributed run (for the dropout seeds) */
  bool single;          /* the single-process replay: one pool of all rows */
  int rank;             /* this rank (distributed) */
  const int64_t *sizes; /* (world,) this step's shard sizes */
  int64_t global;       /* sum of sizes */
  int64_t *perm;        /* (capacity,) scratch */
  int64_t capacity;
  int64_t dead_code_rows; /* single: rows drawn for dead codes (= expired) */
} perm_draws;

/* P for (step, purpose, layer): a permutation of the global rows, the same
 * on every rank and in both runs. */
static vqc_status make_perm(perm_draws *p, vqc_draw_at at) {
  if (p->global > p->capacity) {
    int64_t *q = realloc(p->perm, (size_t)p->global * sizeof(int64_t));
    if (!q) return vqc_error(VQC_ENOMEM, "perm draws: %lld rows",
                             (long long)p->global);
    p->perm = q;
    p->capacity = p->global;
  }
  vqc_rng g;
  vqc_rng_init(&g, p->seed + 1000003ull * (uint64_t)at.layer,
               vqc_rng_stream_for(at.step, at.purpose, -1));
  vqc_rng_randperm(&g, p->global, p->perm);
  return VQC_OK;
}

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* This rank's k rows: the first k entries of P inside its shard, ascending,
 * as local indices. */
static vqc_status perm_rows(void *user, vqc_draw_at at, int64_t n, int64_t k,
                            int64_t *rows) {
  perm_draws *p = user;
  int64_t off = 0, mine = p->global;
  if (!p->single) {
    for (int r = 0; r < p->rank; r++) off += p->sizes[r];
    mine = p->sizes[p->rank];
  }
  if (n != mine)
    return vqc_error(VQC_ESHAPE, "perm draws: pool of %lld rows, the shard "
                     "has %lld", (long long)n, (long long)mine);
  VQC_TRY(make_perm(p, at));
  int64_t m = 0;
  for (int64_t j = 0; j < p->global && m < k; j++)
    if (p->perm[j] >= off && p->perm[j] < off + mine) rows[m++] = p->perm[j] - off;
  if (m != k)
    return vqc_error(VQC_ESHAPE, "perm draws: %lld rows wanted, %lld in the "
                     "shard (k > global rows?)", (long long)k, (long long)m);
  qsort(rows, (size_t)k, sizeof *rows, cmp_i64);
  if (p->single && at.purpose == VQC_RNG_DEAD_CODE) p->dead_code_rows += k;
  return VQC_OK;
}

/* Rank 0: rank r's share of the first k entries of P, from the pools'
 * counts (contiguous, in rank order). */
static vqc_status perm_split(void *user, vqc_draw_at at, int size,
                             const int64_t *counts, int64_t k,
                             int64_t *shares) {
  perm_draws *p = user;
  int64_t total = 0;
  for (int r = 0; r < size; r++) total += counts[r];
  if (total != p->global || k > p->global)
    return vqc_error(VQC_ESHAPE, "perm split: pools hold %lld rows, the step "
                     "%lld; %lld draws", (long long)total,
                     (long long)p->global, (long long)k);
  VQC_TRY(make_perm(p, at));
  for (int r = 0; r < size; r++) shares[r] = 0;
  for (int64_t j = 0; j < k; j++) {
    int64_t start = 0;
    for (int r = 0; r < size; r++) {
      if (p->perm[j] >= start && p->perm[j] < start + counts[r]) {
        shares[r]++;
        break;
      }
      start += counts[r];
    }
  }
  return VQC_OK;
}

/* Rank r's dropout seed f(step, r); the single-process run gets the sum
 * over the W ranks, which is what the all_reduce must give. */
static int64_t rank_seed(uint64_t seed, uint64_t step, int r) {
  vqc_rng g;
  vqc_rng_init(&g, seed, vqc_rng_stream_for(step, VQC_RNG_DROPOUT, r));
  return vqc_rng_randint(&g, 0, 10000);
}

static vqc_status perm_dropout_seed(void *user, vqc_draw_at at, int64_t *seed) {
  perm_draws *p = user;
  if (!p->single) {
    *seed = rank_seed(p->seed, at.step, p->rank);
    return VQC_OK;
  }
  *seed = 0;
  for (int r = 0; r < p->world; r++) *seed += rank_seed(p->seed, at.step, r);
  return VQC_OK;
}

static vqc_draws perm_draws_table(perm_draws *p) {
  vqc_draws d = {p, perm_rows, perm_split, perm_dropout_seed, NULL};
  return d;
}

/* ---- batches ---- */

/* This step's shard sizes over W ranks: a different data.h rule each step
 * (ramp, fill, even); with allow_empty, every third step rank 1 (W > 1)
 * gets no rows, its rows going to rank 0. Without it, a split with an empty
 * shard falls back to even (N >= W). */
static vqc_status step_sizes(int64_t N, int W, int step, bool allow_empty,
                             int64_t *sizes) {
  const vqc_split_rule rules[3] = {VQC_SPLIT_RAMP, VQC_SPLIT_FILL,
                                   VQC_SPLIT_EVEN};
  VQC_TRY(vqc_shard_sizes(N, W, rules[step % 3], sizes));
  if (allow_empty && step % 3 == 2 && W > 1) {
    sizes[0] += sizes[1];
    sizes[1] = 0;
  }
  bool empty = false;
  for (int r = 0; r < W; r++) empty |= sizes[r] == 0;
  if (!allow_empty && empty) VQC_TRY(vqc_shard_sizes(N, W, VQC_SPLIT_EVEN, sizes));
  return VQC_OK;
}

/* One step's data: the global batch X (N, dim) as the single-process run
 * sees it, and this rank's shard x (its rows drawn from (seed, step, rank)
 * alone). Checks that the shard is X's slice, as data.h promises. */
static bool step_data(tally *t, const vqc_cluster_data *data, int step, int W,
                      int rank, const int64_t *sizes, float *X, float *x,
                      int64_t *off) {
  const int64_t dim = data->cfg.dim;
  *off = 0;
  for (int r = 0; r < rank; r++) *off += sizes[r];
  if (!check_ok(t, vqc_cluster_data_global(data, (uint64_t)step, W, sizes, X,
                                           NULL),
                "cluster_data_global", step) ||
      !check_ok(t, vqc_cluster_data_shard(data, (uint64_t)step, rank,
                                          sizes[rank], x, NULL),
                "cluster_data_shard", step))
    return false;
  if (sizes[rank] > 0 &&
      memcmp(x, X + *off * dim, (size_t)(sizes[rank] * dim) * sizeof(float)))
    vqc_case_failf(
        t, "step %d: the shard is not the global batch's rows %lld..%lld", step,
        (long long)*off, (long long)(*off + sizes[rank]));
  return true;
}

/* ---- comparisons ---- */

/* This rank's codes (n, width) against the single-process codes of its rows
 * (ref starts at the global batch's row 0). */
static void compare_codes(tally *t, vqc_equiv_report *rep, int step,
                          const int64_t *got, const int64_t *ref, int64_t off,
                          int64_t n, int width) {
  for (int64_t i = 0; i < n; i++)
    for (int l = 0; l < width; l++) {
      const int64_t a = got[i * width + l], b = ref[(off + i) * width + l];
      rep->index_checked++;
      if (a != b) {
        rep->index_mismatches++;
        vqc_case_failf(t,
                       "step %d: global row %lld (code %d): code %lld, the "
                       "single-process run chose %lld",
                       step, (long long)(off + i), l, (long long)a,
                       (long long)b);
      }
    }
}

/* The floor of the relative measure for codebook entry `p` of `ref`: 1, or
 * for a residual layer l >= 1 ("...layers.<l>.<what>") the largest |value|
 * of layer 0's <what>. A residual layer quantizes x - (earlier codes): the
 * earlier codes carry rounding differences at the scale of x (a few ulps
 * of |x|), which the subtraction keeps as ABSOLUTE errors in a smaller
 * residual. Measured against the residual itself they grow without bound
 * as the residual shrinks (we saw 2e-6 in layer 1); measured against the
 * scale they came from they stay at the few-ulp level. */
static double rel_floor(const vqc_param_list *ref, const vqc_param *p) {
  const char *at = strstr(p->name, "layers.");
  if (at == NULL) return 1.0;
  char *end;
  const long l = strtol(at + 7, &end, 10);
  if (l < 1 || *end != '.') return 1.0;
  char name[VQC_PARAM_NAME_MAX + 8];
  snprintf(name, sizeof name, "%.*slayers.0%s", (int)(at - p->name), p->name,
           end);
  const vqc_param *zero = vqc_param_list_find(ref, name);
  if (zero == NULL || zero->dtype != VQC_F32) return 1.0;
  double m = 1.0;
  for (int64_t k = 0; k < zero->numel; k++)
    m = fmax(m, fabs((double)((const float *)zero->data)[k]));
  return m;
}

/* Entry by entry, the distributed list against the single-process list (same
 * layout): trainable entries (grad != NULL) by absolute difference, float32
 * state without grad (codebooks) by |a - b| / max(|b|, floor) with floor 1,
 * or layer 0's scale for residual layers (rel_floor). Optimizer state is not
 * in these lists. */
static void compare_state(tally *t, vqc_equiv_report *rep, int step,
                          const vqc_param_list *got,
                          const vqc_param_list *ref) {
  if (got->count != ref->count) {
    vqc_case_failf(t, "step %d: %d registered tensors, single-process %d", step,
                   got->count, ref->count);
    return;
  }
  for (int i = 0; i < got->count; i++) {
    const vqc_param *a = &got->items[i], *b = &ref->items[i];
    if (a->dtype != VQC_F32 || a->numel != b->numel) continue;
    const float *x = a->data, *y = b->data;
    const bool weight = a->grad != NULL;
    const double floor = weight ? 0.0 : rel_floor(ref, b);
    double worst = 0.0;
    int64_t at = 0;
    for (int64_t k = 0; k < a->numel; k++) {
      double e = fabs((double)x[k] - (double)y[k]);
      if (!weight) e /= fmax(fabs((double)y[k]), floor);
      if (e > worst) {
        worst = e;
        at = k;
      }
    }
    double *track = weight ? &rep->weight_abs : &rep->codebook_rel;
    const double tol = weight ? VQC_EQUIV_WEIGHT_TOL : VQC_EQUIV_CODEBOOK_TOL;
    if (worst > *track) *track = worst;
    if (!(worst <= tol))
      vqc_case_failf(
          t, "step %d: %s[%lld] = %.9g, single-process %.9g (%s %.3g > %.0e)",
          step, a->name, (long long)at, x[at], y[at], weight ? "abs" : "rel",
          worst, tol);
  }
}

/* Digests of every entry of `list`, then of every gradient (names in the
 * same order); returns how many were written (<= max), or -1 on error. */
static int digest_all(tally *t, int step, const vqc_param_list *list,
                      uint64_t *out, int max) {
  int n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < list->count; i++) {
      const vqc_param *p = &list->items[i];
      if (pass == 1 && p->grad == NULL) continue;
      if (n >= max) {
        vqc_case_failf(t, "step %d: more than %d digests", step, max);
        return -1;
      }
      vqc_status s = pass == 0 ? vqc_param_digest(p, &out[n])
                               : vqc_param_grad_digest(p, &out[n]);
      if (!check_ok(t, s, p->name, step)) return -1;
      n++;
    }
  return n;
}

/* Name of digest j of digest_all's layout. */
static void digest_name(const vqc_param_list *list, int j, char *buf,
                        size_t n) {
  if (j < list->count) {
    snprintf(buf, n, "%s", list->items[j].name);
    return;
  }
  j -= list->count;
  for (int i = 0; i < list->count; i++) {
    if (list->items[i].grad == NULL) continue;
    if (j-- == 0) {
      snprintf(buf, n, "%s.grad", list->items[i].name);
      return;
    }
  }
  snprintf(buf, n, "?");
}

/* The step-end exchange over the side channel: every rank's ok flag and
 * digests of `list` (and its grads). Counts each of this rank's digests
 * that differs from rank 0's. Returns true while every rank is ok. */
#define MAX_DIGESTS 96
static bool step_end(vqc_comm *c, tally *t, vqc_equiv_report *rep, int step,
                     const vqc_param_list *list, bool ok) {
  uint64_t mine[MAX_DIGESTS];
  int n = ok ? digest_all(t, step, list, mine, MAX_DIGESTS) : -1;
  if (n < 0) {
    ok = false;
    n = 0;
  }
  /* Every rank sends the same count (the lists have the same layout); a
   * rank that failed sends zeros behind its flag. */
  int want = 0;
  for (int i = 0; i < list->count; i++) want += 1 + (list->items[i].grad != NULL);
  if (want > MAX_DIGESTS) want = MAX_DIGESTS;
  const int W = vqc_comm_size(c), rank = vqc_comm_rank(c);
  const size_t row = (size_t)want + 1;
  int64_t *buf = calloc(row, sizeof(int64_t));
  int64_t *all = calloc(row * (size_t)W, sizeof(int64_t));
  if (!buf || !all) {
    vqc_case_failf(t, "step %d: no memory for the digest exchange", step);
    free(buf);
    free(all);
    return false; /* the others time out in the exchange and stop too */
  }
  buf[0] = ok;
  memcpy(buf + 1, mine, (size_t)n * sizeof(uint64_t));
  vqc_status s = vqc_all_gather(vqc_comm_side(c), buf, all, row, VQC_I64);
  bool all_ok = check_ok(t, s, "side-channel digest all_gather", step);
  for (int r = 0; all_ok && r < W; r++)
    if (!all[(size_t)r * row]) all_ok = false;
  if (all_ok) {
    for (int j = 0; j < want; j++) {
      rep->digest_checked++;
      const int64_t a = all[(size_t)rank * row + 1 + j], b = all[1 + j];
      if (a != b) {
        char name[VQC_PARAM_NAME_MAX + 8];
        digest_name(list, j, name, sizeof name);
        rep->digest_mismatches++;
        vqc_case_failf(
            t, "step %d: %s digest %016llx differs from rank 0's %016llx", step,
            name, (unsigned long long)a, (unsigned long long)b);
      }
    }
  } else if (s == VQC_OK && ok) {
    vqc_case_failf(t, "step %d: another rank failed; stopping", step);
  }
  free(buf);
  free(all);
  return all_ok;
}

/* Registers a codebook's state as "<prefix>embed", "<prefix>cluster_size",
 * "<prefix>embed_avg" (the names bottleneck.h uses). */
static vqc_status list_codebook(vqc_param_list *l, vqc_vq *vq,
                                const char *prefix) {
  const vqc_tensor *ts[3] = {&vq->embed, &vq->cluster_size, &vq->embed_avg};
  const char *names[3] = {"embed", "cluster_size", "embed_avg"};
  for (int i = 0; i < 3; i++) {
    char name[VQC_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s%s", prefix, names[i]);
    VQC_TRY(vqc_param_list_add(l, name, VQC_F32, vqc_tensor_data(ts[i]), NULL,
                               ts[i]->ndim, ts[i]->shape));
  }
  return VQC_OK;
}

/* ---- (a) VQ codebook ---- */

enum { A_STEPS = 6, A_D = 6, A_C = 16, A_NMAX = 64 };

/* Global rows of step s: at least C (k-means without replacement) and
 * varying, so the shards change size from step to step. */
static int64_t a_rows(int step) { return 48 + 3 * step; }

int vqc_equiv_vq_codebook(vqc_comm *c, vqc_equiv_report *rep) {
  const int W = vqc_comm_size(c), rank = vqc_comm_rank(c);
  tally t = {rank, "vq_codebook", 0, MAX_PRINTS};
  report_init(rep, W, A_STEPS);
  /* Five blobs for sixteen codes: k-means leaves codes with few rows, and
   * the EMA pulls their counts under the threshold, so codes expire. */
  const vqc_cluster_data_config dc = {.seed = 31, .dim = A_D, .clusters = 5,
                                      .centre_std = 2.0f, .noise_std = 0.4f};
  vqc_vq_params p;
  vqc_vq_params_default(&p, A_D, A_C);
  p.kmeans_init = true;
  p.kmeans_iters = 4;
  p.threshold_ema_dead_code = 1.5;
  p.seed = 5;

  vqc_cluster_data data = {0};
  vqc_vq vq = {0}, ref = {0};
  vqc_param_list lv, lr;
  vqc_param_list_init(&lv);
  vqc_param_list_init(&lr);
  int64_t sizes[16], one[1];
  perm_draws pd = {.seed = 77, .world = W, .single = false, .rank = rank,
                   .sizes = sizes};
  perm_draws pr = {.seed = 77, .world = W, .single = true, .sizes = one};
  const vqc_draws dd = perm_draws_table(&pd), dr = perm_draws_table(&pr);
  float *X = malloc(A_NMAX * A_D * sizeof(float)), *Xq = malloc(A_NMAX * A_D * sizeof(float));
  float *x = malloc(A_NMAX * A_D * sizeof(float)), *xq = malloc(A_NMAX * A_D * sizeof(float));
  int64_t *ir = malloc(A_NMAX * sizeof(int64_t)), *iv = malloc(A_NMAX * sizeof(int64_t));

  bool ok = W <= 16 && X && Xq && x && xq && ir && iv;
  if (!ok) vqc_case_failf(&t, "setup: %d ranks or no memory", W);
  ok = ok && check_ok(&t, vqc_cluster_data_init(&data, &dc), "data init", -1) &&
       check_ok(&t, vqc_vq_init(&vq, &p, NULL), "vq init", -1) &&
       check_ok(&t, vqc_vq_init(&ref, &p, NULL), "vq init", -1) &&
       check_ok(&t, list_codebook(&lv, &vq, ""), "list", -1) &&
       check_ok(&t, list_codebook(&lr, &ref, ""), "list", -1);

  for (int step = 0; step < A_STEPS; step++) {
    const int64_t N = a_rows(step);
    int64_t off = 0;
    float loss;
    if (ok) ok = check_ok(&t, step_sizes(N, W, step, true, sizes), "sizes", step);
    if (ok) ok = step_data(&t, &data, step, W, rank, sizes, X, x, &off);
    one[0] = N;
    pd.global = pr.global = N;
    if (ok) {
      const vqc_vq_ctx cr = {NULL, (uint64_t)step, &dr, 0};
      ok = check_ok(&t, vqc_vq_forward(&ref, &cr, X, N, true, ir, Xq, &loss),
                    "single-process vq_forward", step);
    }
    if (ok) {
      const vqc_vq_ctx cd = {c, (uint64_t)step, &dd, 0};
      ok = check_ok(&t, vqc_vq_forward(&vq, &cd, x, sizes[rank], true, iv, xq,
                                       &loss),
                    "vq_forward", step);
    }
    if (ok) {
      compare_codes(&t, rep, step, iv, ir, off, sizes[rank], 1);
      compare_state(&t, rep, step, &lv, &lr);
    }
    if (!step_end(c, &t, rep, step, &lv, ok)) {
      ok = false;
      break;
    }
  }
  rep->expired = pr.dead_code_rows;
  if (ok && rep->expired == 0)
    vqc_case_failf(&t, "no code expired in the single-process run: "
                       "dead-code expiry went untested");

  free(X);
  free(Xq);
  free(x);
  free(xq);
  free(ir);
  free(iv);
  free(pd.perm);
  free(pr.perm);
  vqc_param_list_free(&lv);
  vqc_param_list_free(&lr);
  vqc_vq_free(&vq);
  vqc_vq_free(&ref);
  vqc_cluster_data_free(&data);
  report_reduce(c, &t, rep);
  return t.failures;
}

/* ---- (b) RVQ with quantize dropout ---- */

enum { B_STEPS = 8, B_Q = 3, B_D = 4, B_C = 8, B_NMAX = 64 };

static int64_t b_rows(int step) { return 40 + 2 * step; }

int vqc_equiv_rvq_dropout(vqc_comm *c, vqc_equiv_report *rep) {
  const int W = vqc_comm_size(c), rank = vqc_comm_rank(c);
  tally t = {rank, "rvq_dropout", 0, MAX_PRINTS};
  report_init(rep, W, B_STEPS);
  const vqc_cluster_data_config dc = {.seed = 41, .dim = B_D, .clusters = 6,
                                      .centre_std = 1.5f, .noise_std = 0.3f};
  vqc_rvq_params p;
  vqc_rvq_params_default(&p, B_Q, B_D, B_C);
  p.quantize_dropout = true;
  p.layer.kmeans_init = true;
  p.layer.kmeans_iters = 3;
  p.layer.threshold_ema_dead_code = 1.0;
  p.layer.seed = 9;

  vqc_cluster_data data = {0};
  vqc_rvq rvq = {0}, ref = {0};
  vqc_param_list lv, lr;
  vqc_param_list_init(&lv);
  vqc_param_list_init(&lr);
  int64_t sizes[16], one[1];
  perm_draws pd = {.seed = 78, .world = W, .single = false, .rank = rank,
                   .sizes = sizes};
  perm_draws pr = {.seed = 78, .world = W, .single = true, .sizes = one};
  const vqc_draws dd = perm_draws_table(&pd), dr = perm_draws_table(&pr);
  float *X = malloc(B_NMAX * B_D * sizeof(float)), *Xq = malloc(B_NMAX * B_D * sizeof(float));
  float *x = malloc(B_NMAX * B_D * sizeof(float)), *xq = malloc(B_NMAX * B_D * sizeof(float));
  int64_t *ir = malloc(B_NMAX * B_Q * sizeof(int64_t));
  int64_t *iv = malloc(B_NMAX * B_Q * sizeof(int64_t));
  bool seen[B_Q] = {false};

  bool ok = W <= 16 && X && Xq && x && xq && ir && iv;
  if (!ok) vqc_case_failf(&t, "setup: %d ranks or no memory", W);
  ok = ok && check_ok(&t, vqc_cluster_data_init(&data, &dc), "data init", -1) &&
       check_ok(&t, vqc_rvq_init(&rvq, &p, NULL), "rvq init", -1) &&
       check_ok(&t, vqc_rvq_init(&ref, &p, NULL), "rvq init", -1);
  for (int l = 0; ok && l < B_Q; l++) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "layers.%d.", l);
    ok = check_ok(&t, list_codebook(&lv, &rvq.layers[l], prefix), "list", -1) &&
         check_ok(&t, list_codebook(&lr, &ref.layers[l], prefix), "list", -1);
  }

  for (int step = 0; step < B_STEPS; step++) {
    const int64_t N = b_rows(step);
    int64_t off = 0;
    int cut_ref = -1, cut = -2;
    if (ok) ok = check_ok(&t, step_sizes(N, W, step, true, sizes), "sizes", step);
    if (ok) ok = step_data(&t, &data, step, W, rank, sizes, X, x, &off);
    one[0] = N;
    pd.global = pr.global = N;
    if (ok) {
      const vqc_vq_ctx cr = {NULL, (uint64_t)step, &dr, 0};
      ok = check_ok(&t, vqc_rvq_forward(&ref, &cr, X, N, true, ir, Xq, NULL,
                                        &cut_ref),
                    "single-process rvq_forward", step);
    }
    if (ok) {
      const vqc_vq_ctx cd = {c, (uint64_t)step, &dd, 0};
      ok = check_ok(&t, vqc_rvq_forward(&rvq, &cd, x, sizes[rank], true, iv, xq,
                                        NULL, &cut),
                    "rvq_forward", step);
    }
    if (ok) {
      if (cut != cut_ref)
        vqc_case_failf(&t, "step %d: dropout cutoff %d, single-process %d",
                       step, cut, cut_ref);
      if (cut_ref >= 0 && cut_ref < B_Q) seen[cut_ref] = true;
      if (cut_ref < B_Q - 1) rep->dropped_steps++;
      compare_codes(&t, rep, step, iv, ir, off, sizes[rank], B_Q);
      compare_state(&t, rep, step, &lv, &lr);
    }
    if (!step_end(c, &t, rep, step, &lv, ok)) {
      ok = false;
      break;
    }
  }
  for (int l = 0; l < B_Q; l++) rep->distinct_cutoffs += seen[l];
  rep->expired = pr.dead_code_rows;
  if (ok && (rep->dropped_steps == 0 || rep->distinct_cutoffs < 2))
    vqc_case_failf(&t, "dropout never varied (%lld steps dropped, %lld "
                       "cutoffs): the seed sync went untested",
                   (long long)rep->dropped_steps,
                   (long long)rep->distinct_cutoffs);

  free(X);
  free(Xq);
  free(x);
  free(xq);
  free(ir);
  free(iv);
  free(pd.perm);
  free(pr.perm);
  vqc_param_list_free(&lv);
  vqc_param_list_free(&lr);
  vqc_rvq_free(&rvq);
  vqc_rvq_free(&ref);
  vqc_cluster_data_free(&data);
  report_reduce(c, &t, rep);
  return t.failures;
}

/* ---- (c) the autoencoder with a quantizer bottleneck, DDP ---- */

enum { C_STEPS = 6, C_DIN = 8, C_HID = 16, C_LAT = 4, C_NMAX = 64 };
enum { C_VQ_C = 12, C_RVQ_Q = 3, C_RVQ_C = 6 };

static int64_t c_rows(int step) { return 40 + 4 * step; }

/* One of the three adapters, chosen by kind (the others stay zeroed). */
typedef struct bn_any {
  vqc_equiv_bn kind;
  vqc_vq_bottleneck vq;
  vqc_rvq_bottleneck rvq;
  vqc_fsq_bottleneck fsq;
} bn_any;

static vqc_status bn_init(bn_any *b, vqc_equiv_bn kind, vqc_bottleneck *out) {
  memset(b, 0, sizeof *b);
  b->kind = kind;
  if (kind == VQC_EQUIV_BN_VQ) {
    vqc_vq_params p;
    vqc_vq_params_default(&p, C_LAT, C_VQ_C);
    p.kmeans_init = true;
    p.kmeans_iters = 3;
    p.threshold_ema_dead_code = 1.5;
    p.commitment_weight = 0.25;
    p.seed = 11;
    VQC_TRY(vqc_vq_bottleneck_init(&b->vq, &p, NULL));
    *out = vqc_vq_bottleneck_iface(&b->vq);
  } else if (kind == VQC_EQUIV_BN_RVQ) {
    vqc_rvq_params p;
    vqc_rvq_params_default(&p, C_RVQ_Q, C_LAT, C_RVQ_C);
    p.quantize_dropout = true;
    p.layer.kmeans_init = true;
    p.layer.kmeans_iters = 3;
    p.layer.threshold_ema_dead_code = 1.5;
    p.layer.commitment_weight = 0.25;
    p.layer.seed = 12;
    VQC_TRY(vqc_rvq_bottleneck_init(&b->rvq, &p, NULL));
    *out = vqc_rvq_bottleneck_iface(&b->rvq);
  } else {
    const int32_t levels[C_LAT] = {8, 5, 5, 5};
    VQC_TRY(vqc_fsq_bottleneck_init(&b->fsq, levels, C_LAT, 1, false, 1e-3));
    *out = vqc_fsq_bottleneck_iface(&b->fsq);
  }
  return VQC_OK;
}

static void bn_free(bn_any *b) {
  vqc_vq_bottleneck_free(&b->vq);
  vqc_rvq_bottleneck_free(&b->rvq);
  vqc_fsq_bottleneck_free(&b->fsq);
}

static void bn_run(bn_any *b, vqc_comm *c, int step, const vqc_draws *d) {
  b->vq.comm = b->rvq.comm = c;
  b->vq.step = b->rvq.step = (uint64_t)step;
  b->vq.train = b->rvq.train = true;
  b->vq.draws = b->rvq.draws = d;
}

/* The last forward's codes as int64 (rows, width); returns width. */
static int bn_codes(const bn_any *b, int64_t rows, int64_t *out) {
  if (b->kind == VQC_EQUIV_BN_VQ) {
    memcpy(out, b->vq.indices, (size_t)rows * sizeof(int64_t));
    return 1;
  }
  if (b->kind == VQC_EQUIV_BN_RVQ) {
    memcpy(out, b->rvq.indices, (size_t)(rows * C_RVQ_Q) * sizeof(int64_t));
    return C_RVQ_Q;
  }
  for (int64_t i = 0; i < rows; i++) out[i] = b->fsq.indices[i];
  return 1;
}

static const char *bn_case_name(vqc_equiv_bn kind) {
  return kind == VQC_EQUIV_BN_VQ    ? "autoencoder_vq"
         : kind == VQC_EQUIV_BN_RVQ ? "autoencoder_rvq"
                                    : "autoencoder_fsq";
}

/* One training step; comm NULL is the single-process run (scale 1). */
static vqc_status ae_step(vqc_autoencoder *ae, vqc_optim *opt, vqc_comm *c,
                          const float *x, int64_t rows, float scale,
                          vqc_ddp_fault fault) {
  vqc_ae_loss loss;
  VQC_TRY(vqc_autoencoder_forward(ae, x, rows, &loss));
  vqc_param_list_zero_grad(vqc_autoencoder_params(ae));
  VQC_TRY(vqc_autoencoder_backward(ae, scale));
  const vqc_ddp_options ddp = {0, fault};
  VQC_TRY(vqc_ddp_average_grads(c, vqc_autoencoder_params(ae), &ddp));
  return vqc_optim_step(opt);
}

int vqc_equiv_autoencoder(vqc_comm *c, vqc_equiv_bn kind, vqc_ddp_fault fault,
                          vqc_equiv_report *rep) {
  const int W = vqc_comm_size(c), rank = vqc_comm_rank(c);
  tally t = {rank, bn_case_name(kind), 0, MAX_PRINTS};
  report_init(rep, W, C_STEPS);
  const vqc_cluster_data_config dc = {.seed = 2024, .dim = C_DIN, .clusters = 6,
                                      .centre_std = 1.0f, .noise_std = 0.2f};
  const vqc_autoencoder_config cfg = {C_DIN, C_HID, C_LAT, VQC_ACT_TANH};
  const vqc_optim_config sgd = vqc_optim_sgd(0.05, 0.9);

  vqc_cluster_data data = {0};
  bn_any bd, br;
  vqc_bottleneck ifd, ifr;
  vqc_autoencoder *ae = NULL, *ref = NULL;
  vqc_optim *opt = NULL, *opt_ref = NULL;
  vqc_param_list all; /* model, bottleneck and optimizer state: digested */
  vqc_param_list_init(&all);
  int64_t sizes[16], one[1];
  perm_draws pd = {.seed = 79, .world = W, .single = false, .rank = rank,
                   .sizes = sizes};
  perm_draws pr = {.seed = 79, .world = W, .single = true, .sizes = one};
  const vqc_draws dd = perm_draws_table(&pd), dr = perm_draws_table(&pr);
  float *X = malloc(C_NMAX * C_DIN * sizeof(float));
  float *x = malloc(C_NMAX * C_DIN * sizeof(float));
  int64_t *ir = malloc(C_NMAX * C_RVQ_Q * sizeof(int64_t));
  int64_t *iv = malloc(C_NMAX * C_RVQ_Q * sizeof(int64_t));
  bool seen[C_RVQ_Q] = {false};

  /* Every rank starts from its own init (seed 100 + rank): only the DDP
   * broadcast makes them replicas of rank 0, whose init the single-process
   * run uses. */
  vqc_rng init, init_ref;
  vqc_rng_init(&init, 100 + (uint64_t)rank, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
  vqc_rng_init(&init_ref, 100, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
  bool ok = W <= 16 && X && x && ir && iv;
  if (!ok) vqc_case_failf(&t, "setup: %d ranks or no memory", W);
  ok = ok && check_ok(&t, vqc_cluster_data_init(&data, &dc), "data init", -1) &&
       check_ok(&t, bn_init(&bd, kind, &ifd), "bottleneck init", -1) &&
       check_ok(&t, bn_init(&br, kind, &ifr), "bottleneck init", -1) &&
       check_ok(&t, vqc_autoencoder_create(&cfg, &init, &ifd, &ae), "create", -1) &&
       check_ok(&t, vqc_autoencoder_create(&cfg, &init_ref, &ifr, &ref), "create", -1) &&
       check_ok(&t, vqc_optim_create(&sgd, vqc_autoencoder_params(ae), &opt), "optim", -1) &&
       check_ok(&t, vqc_optim_create(&sgd, vqc_autoencoder_params(ref), &opt_ref), "optim", -1) &&
       check_ok(&t, vqc_param_list_extend(&all, vqc_autoencoder_params(ae), ""), "list", -1) &&
       check_ok(&t, vqc_param_list_extend(&all, vqc_optim_state(opt), ""), "list", -1) &&
       check_ok(&t, vqc_ddp_broadcast(c, &all), "ddp_broadcast", -1);

  for (int step = 0; step < C_STEPS; step++) {
    const int64_t N = c_rows(step);
    int64_t off = 0;
    if (ok) ok = check_ok(&t, step_sizes(N, W, step, false, sizes), "sizes", step);
    if (ok) ok = step_data(&t, &data, step, W, rank, sizes, X, x, &off);
    one[0] = N;
    pd.global = pr.global = N;
    if (ok) {
      bn_run(&br, NULL, step, &dr);
      ok = check_ok(&t, ae_step(ref, opt_ref, NULL, X, N, 1.0f,
                                VQC_DDP_FAULT_NONE),
                    "single-process step", step);
    }
    int width = 1;
    if (ok) width = bn_codes(&br, N, ir);
    if (ok) {
      bn_run(&bd, c, step, &dd);
      const float scale = vqc_ddp_loss_scale(sizes[rank], N, W);
      ok = check_ok(&t, ae_step(ae, opt, c, x, sizes[rank], scale, fault),
                    "distributed step", step);
    }
    if (ok) {
      bn_codes(&bd, sizes[rank], iv);
      compare_codes(&t, rep, step, iv, ir, off, sizes[rank], width);
      compare_state(&t, rep, step, vqc_autoencoder_params(ae),
                    vqc_autoencoder_params(ref));
      if (kind == VQC_EQUIV_BN_RVQ) {
        if (bd.rvq.cutoff != br.rvq.cutoff)
          vqc_case_failf(&t, "step %d: dropout cutoff %d, single-process %d",
                         step, bd.rvq.cutoff, br.rvq.cutoff);
        if (br.rvq.cutoff >= 0 && br.rvq.cutoff < C_RVQ_Q) seen[br.rvq.cutoff] = true;
        if (br.rvq.cutoff < C_RVQ_Q - 1) rep->dropped_steps++;
      }
    }
    if (!step_end(c, &t, rep, step, &all, ok)) {
      ok = false;
      break;
    }
  }
  for (int l = 0; l < C_RVQ_Q; l++) rep->distinct_cutoffs += seen[l];
  rep->expired = pr.dead_code_rows;

  free(X);
  free(x);
  free(ir);
  free(iv);
  free(pd.perm);
  free(pr.perm);
  vqc_param_list_free(&all);
  vqc_optim_destroy(opt);
  vqc_optim_destroy(opt_ref);
  vqc_autoencoder_destroy(ae);
  vqc_autoencoder_destroy(ref);
  bn_free(&bd);
  bn_free(&br);
  vqc_cluster_data_free(&data);
  report_reduce(c, &t, rep);
  return t.failures;
}

/* ---- the table ---- */

static int case_ae_vq(vqc_comm *c, vqc_equiv_report *rep) {
  return vqc_equiv_autoencoder(c, VQC_EQUIV_BN_VQ, VQC_DDP_FAULT_NONE, rep);
}
static int case_ae_rvq(vqc_comm *c, vqc_equiv_report *rep) {
  return vqc_equiv_autoencoder(c, VQC_EQUIV_BN_RVQ, VQC_DDP_FAULT_NONE, rep);
}
static int case_ae_fsq(vqc_comm *c, vqc_equiv_report *rep) {
  return vqc_equiv_autoencoder(c, VQC_EQUIV_BN_FSQ, VQC_DDP_FAULT_NONE, rep);
}

const vqc_equiv_case vqc_equiv_cases[] = {
    {"vq_codebook", vqc_equiv_vq_codebook},
    {"rvq_dropout", vqc_equiv_rvq_dropout},
    {"autoencoder_vq", case_ae_vq},
    {"autoencoder_rvq", case_ae_rvq},
    {"autoencoder_fsq", case_ae_fsq},
};
const int vqc_equiv_case_count =
    (int)(sizeof vqc_equiv_cases / sizeof vqc_equiv_cases[0]);
