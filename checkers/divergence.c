/* divergence.c: the divergence and nonfinite checker.
 *
 * Replicated state (every entry of ctx->state: weights, codebooks, EMA
 * buffers, optimizer moments, step counters) must be bit-identical on every
 * rank after every step. At the end of every opts.interval-th step (steps 0,
 * N, 2N, ..., so initialisation bugs show at step 0) and at the last step the
 * runner reported when the run ends cleanly, each rank:
 *
 *   1. digests every entry (the tensor digest of vqc/digest.h, the value
 *      vqc_param_digest gives) and counts NaN and Inf in float entries, in one
 *      pass over the bytes;
 *   2. appends one line per entry to run_dir/rank-<r>.trace.jsonl (trace.h)
 *      and flushes it, so a killed job keeps its trace;
 *   3. agrees with the other ranks in ONE all_reduce over the SIDE channel
 *      whose size does not depend on the number of ranks (two-phase
 *      agreement): per entry the minimum and maximum digest (the maximum is
 *      sent as the minimum of ~digest, so one MIN reduction carries both),
 *      and one word saying whether some rank holds non-finite values not yet
 *      reported: 8 (2T + 1) bytes per rank per check for T entries, however
 *      many ranks (vqc_comm_get_stats counts them; test_divergence checks it
 *      stays flat from 2 to 1024 ranks).
 *   4. only when that shows a problem, a second, localising exchange: the
 *      digests of the first newly differing entry (8 bytes per rank), the
 *      ranks' non-finite summaries (32 bytes per rank), then the entry's
 *      layout and bytes (below). A clean check never pays for it.
 *
 * The registry itself (names, dtypes, order) is compared once, at the first
 * check, with a 4-word all_reduce; a mismatch names the odd rank.
 *
 * Every rank then holds the same table and takes the same decisions, so the
 * extra exchanges below happen in lockstep without further agreement, and
 * exactly one rank records each finding (the threads backend shares one
 * findings list; N copies would be noise).
 *
 * Divergence: the first entry in registry order whose digests differ and that
 * has not been reported yet is localised; entries that start to differ at the
 * same step are listed in its detail (also_differing) and not reported later,
 * since they are usually downstream of the first (weights, then their Adam
 * moments). A tensor that starts to differ at a later step gets its own
 * finding. Localising: ranks are grouped by digest. When one group is
 * strictly larger than every other (the majority) it is the reference and
 * the other ranks are the outliers. Without a majority (3 ranks, 3 digests;
 * any 1-1 or 2-2 split) no rank is blamed by a tie-break: the finding names
 * every rank and says "no majority: ranks {0} and {1} differ", its detail
 * has "majority": false and no reference or outliers, and the bytes are
 * compared against the lowest rank's ("base_rank") only to show where they
 * differ. The reference group's lowest rank broadcasts the tensor's bytes in
 * pieces (at most 1 MiB, less with many ranks, so the threads backend, where
 * every rank's copy lives in one process, holds at most 64 MiB of them) and
 * every outlier compares its own copy with them: first
 * differing flat index and its coordinates, the two values there, the number
 * of differing elements (bitwise, like the digest), max abs diff, max rel diff
 * (|a - b| / max(|a|, |b|) over differing elements, so 1 means one of them is
 * zero), and the max ULP distance for float dtypes (distance between the
 * ordered integer forms of the bit patterns; +0 and -0 are 0 apart). The
 * outliers' summaries are all_gathered (one small struct per rank) and the
 * reference rank records the finding with ranks = the outliers (every rank
 * without a majority).
 *
 * Nonfinite: for each rank, the first check at which any float entry holds a
 * NaN or Inf gives one `nonfinite` finding for the first such entry in
 * registry order (count, NaN/Inf split, first index). Ranks whose first
 * non-finite entry and step coincide share one finding (recorded by the
 * lowest of them), with per-rank counts in the detail.
 *
 * Detail values that are not finite numbers (a NaN compared with a number)
 * are written as the strings "nan", "inf", "-inf": JSON has no such
 * numbers. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkers.h"
#include "trace.h"
#include "vqc/digest.h"

/* What each rank sends per tensor in the digest exchange (u64 words). */
enum { W_DIGEST, W_NAN, W_INF, W_FIRST, W_COUNT };
#define NO_INDEX UINT64_MAX

/* What each rank sends per rank in the non-finite exchange (i64 words). */
enum { NF_TENSOR, NF_NAN, NF_INF, NF_FIRST, NF_COUNT };

/* Bytes of one localisation broadcast: at most 1 MiB, and at most 64 MiB
 * over all ranks (the threads backend holds every rank's buffer in one
 * process), but not under 64 KiB. Only paid on a mismatch. */
static size_t localise_piece_bytes(int size) {
  size_t b = ((size_t)64 << 20) / (size_t)(size > 0 ? size : 1);
  if (b > ((size_t)1 << 20)) b = (size_t)1 << 20;
  if (b < ((size_t)64 << 10)) b = (size_t)64 << 10;
  return b;
}

typedef struct div_impl {
  vqc_trace_writer *trace; /* NULL when ctx->run_dir is NULL */
  int size;
  int ntensors;            /* ctx->state->count at attach */
  bool registry_agreed;    /* compared with the other ranks' registries */
  bool *reported;          /* (ntensors) divergence already reported */
  bool *nonfinite_done;    /* (size) rank's nonfinite already reported */
  uint64_t *local;         /* (ntensors, W_COUNT) this rank's words */
  int64_t *agree_send;     /* (AGREE_WORDS) the two-phase message */
  int64_t *agree_min;      /* (AGREE_WORDS) its MIN over the ranks */
  int64_t last_seen;       /* last step passed to step_end; -1 none */
  int64_t last_checked;    /* last step checked; -1 none */
  /* Overlap (opts.overlap): step_end starts `worker` digesting the state
   * of `pending_step`; settle joins it and runs the exchange. */
  bool pending;            /* a step was digested (or is being) and awaits
                              its exchange */
  bool worker_running;     /* worker started and not joined */
  int64_t pending_step;
  const vqc_check_ctx *worker_ctx; /* the caller's, alive for the run */
  pthread_t worker;
  vqc_status worker_status;
  char worker_error[512];
  bool hooked;             /* side_hook set on the side channel */
  int insert_at;           /* where the next finding goes in the list: the
                              count at the pending step's end, so findings
                              keep the synchronous order; -1: append */
} div_impl;

/* Records f where the synchronous check would have (see insert_at). */
static vqc_status add_finding(div_impl *d, const vqc_check_ctx *ctx,
                              const vqc_finding *f) {
  return vqc_check_report(ctx, d->insert_at, f);
}

/* The two-phase message, in i64 words, all reduced with MIN:
 *   [2t], [2t+1]   digest of entry t and its complement (min and max)
 *   [2T]           ~(this rank has non-finite values not yet reported)
 *   [2T+1]         this rank's number if its training failed, else size
 *   [2T+2]         ~(this rank could not digest its state)
 *   [2T+3]         ~(where an overlapped check's findings go: insert_at);
 *                  the threads backend's ranks share one findings list and
 *                  take the largest, where the synchronous check's
 *                  findings would have landed (after every rank's step
 *                  end) */
#define AGREE_WORDS(nt) (2 * (size_t)(nt) + 4)

/* Word w of tensor t on this rank. */
static uint64_t local_word(const div_impl *d, int t, int w) {
  return d->local[(size_t)t * W_COUNT + (size_t)w];
}

static bool is_float(vqc_dtype dt) { return dt == VQC_F32 || dt == VQC_F64; }

/* ---- step 1: digest and non-finite scan in one pass */

typedef struct nonfinite_count {
  uint64_t nan, inf;
  uint64_t first; /* flat index of the first NaN or Inf, NO_INDEX if none */
} nonfinite_count;

/* Scans n values of dt (F32 or F64) starting at flat index `base`. The first
 * pass only counts values whose exponent bits are all ones (NaN or Inf),
 * without branches, in blocks of SCAN_BLOCK values: a loop of constant trip
 * count is one that GCC's -O2 vectoriser takes (a plain loop over n is not:
 * its cheap cost model refuses loops that need a remainder), which made a
 * clean 64 MiB state cost one streaming read instead of two and a half. Only
 * when it finds some does the second pass split NaN from Inf and find the
 * first index. memcpy reads the bits without breaking aliasing rules (it
 * compiles to a plain load). */
#define SCAN_BLOCK 64
static size_t count_f32_exp_ones(const unsigned char *p, size_t n) {
  size_t hits = 0, i = 0;
  for (; i + SCAN_BLOCK <= n; i += SCAN_BLOCK) {
    uint32_t block = 0;
    for (size_t k = 0; k < SCAN_BLOCK; k++) {
      uint32_t b;
      memcpy(&b, p + 4 * (i + k), 4);
      block += (b & 0x7f800000u) == 0x7f800000u;
    }
    hits += block;
  }
  for (; i < n; i++) {
    uint32_t b;
    memcpy(&b, p + 4 * i, 4);
    hits += (b & 0x7f800000u) == 0x7f800000u;
  }
  return hits;
}

static size_t count_f64_exp_ones(const unsigned char *p, size_t n) {
  size_t hits = 0, i = 0;
  for (; i + SCAN_BLOCK <= n; i += SCAN_BLOCK) {
    uint64_t block = 0;
    for (size_t k = 0; k < SCAN_BLOCK; k++) {
      uint64_t b;
      memcpy(&b, p + 8 * (i + k), 8);
      block += (b & 0x7ff0000000000000u) == 0x7ff0000000000000u;
    }
    hits += block;
  }
  for (; i < n; i++) {
    uint64_t b;
    memcpy(&b, p + 8 * i, 8);
    hits += (b & 0x7ff0000000000000u) == 0x7ff0000000000000u;
  }
  return hits;
}

static void scan_nonfinite(const void *data, size_t n, vqc_dtype dt,
                           uint64_t base, nonfinite_count *c) {
  const unsigned char *p = data;
  size_t hits = dt == VQC_F32 ? count_f32_exp_ones(p, n)
                              : count_f64_exp_ones(p, n);
  if (hits == 0) return;
  for (size_t i = 0; i < n; i++) {
    double v;
    if (dt == VQC_F32) {
      float f;
      memcpy(&f, p + 4 * i, 4);
      v = f;
    } else {
      memcpy(&v, p + 8 * i, 8);
    }
    if (isfinite(v)) continue;
    if (isnan(v)) c->nan++;
    else c->inf++;
    if (c->first == NO_INDEX) c->first = base + i;
  }
}

/* The entry's digest (equal to vqc_param_digest) and, for float entries, its
 * non-finite count. The bytes are fed to a streaming digest one 64 KiB chunk
 * at a time right after the scan read them, so the hash reads them from
 * cache rather than from memory a second time. */
static vqc_status digest_entry(const vqc_param *p, uint64_t *digest,
                               nonfinite_count *c) {
  c->nan = c->inf = 0;
  c->first = NO_INDEX;
  if (!is_float(p->dtype)) return vqc_param_digest(p, digest);

  size_t esize = vqc_dtype_size(p->dtype);
  size_t nbytes = (size_t)p->numel * esize;
  vqc_digest_state *st = NULL;
  VQC_TRY(vqc_digest_create(&st, p->dtype, p->ndim, p->shape));
  const unsigned char *bytes = p->data;
  vqc_status s = VQC_OK;
  for (size_t off = 0; off < nbytes && s == VQC_OK; off += VQC_DIGEST_CHUNK) {
    size_t len = nbytes - off < VQC_DIGEST_CHUNK ? nbytes - off
                                                 : VQC_DIGEST_CHUNK;
    scan_nonfinite(bytes + off, len / esize, p->dtype, off / esize, c);
    s = vqc_digest_update(st, bytes + off, len);
  }
  if (s == VQC_OK) s = vqc_digest_final(st, digest);
  vqc_digest_destroy(st);
  return s;
}

/* ---- small formatting helpers */

/* A double as JSON: a number when finite, else "nan" / "inf" / "-inf". */
static json_t *json_num(double v) {
  if (isfinite(v)) return json_real(v);
  if (isnan(v)) return json_string("nan");
  return json_string(v > 0 ? "inf" : "-inf");
}

/* Row-major coordinates of flat index i in shape (ndim dims). */
static void unravel(int64_t i, int ndim, const int64_t *shape,
                    int64_t *coords) {
  for (int d = ndim - 1; d >= 0; d--) {
    int64_t n = shape[d] > 0 ? shape[d] : 1;
    coords[d] = i % n;
    i /= n;
  }
}

static json_t *coords_json(int64_t i, int ndim, const int64_t *shape) {
  int64_t c[VQC_MAX_DIMS];
  unravel(i, ndim, shape, c);
  json_t *a = json_array();
  for (int d = 0; d < ndim; d++) json_array_append_new(a, json_integer(c[d]));
  return a;
}

/* "[3, 5]" into buf. */
static void coords_str(int64_t i, int ndim, const int64_t *shape, char *buf,
                       size_t n) {
  int64_t c[VQC_MAX_DIMS];
  unravel(i, ndim, shape, c);
  size_t used = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < ndim && used < n; d++)
    used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64,
                             d ? ", " : "", c[d]);
  if (used < n) snprintf(buf + used, n - used, "]");
}

/* "rank 1" or "ranks 1, 3" or "ranks 0-1021, 1023" (vqc_rank_ranges_text). */
static void ranks_str(const int *ranks, int n, char *buf, size_t cap) {
  int used = snprintf(buf, cap, "%s", n == 1 ? "rank " : "ranks ");
  if (used > 0 && (size_t)used < cap)
    vqc_rank_ranges_text(ranks, n, buf + used, cap - (size_t)used);
}

/* ---- nonfinite */

/* This rank's non-finite summary for the exchange: its first float entry
 * holding NaN or Inf, unless it was reported before (then -1). */
static void nonfinite_summary(const div_impl *d, int rank, int64_t *w) {
  w[NF_TENSOR] = -1;
  w[NF_NAN] = w[NF_INF] = 0;
  w[NF_FIRST] = -1;
  if (d->nonfinite_done[rank]) return;
  for (int t = 0; t < d->ntensors; t++) {
    if (local_word(d, t, W_NAN) + local_word(d, t, W_INF) == 0) continue;
    w[NF_TENSOR] = t;
    w[NF_NAN] = (int64_t)local_word(d, t, W_NAN);
    w[NF_INF] = (int64_t)local_word(d, t, W_INF);
    w[NF_FIRST] = (int64_t)local_word(d, t, W_FIRST);
    return;
  }
}

/* Phase 2 for non-finite values (some rank has new ones): the ranks'
 * summaries are all_gathered and every rank takes the same decisions. */
static vqc_status report_nonfinite(div_impl *d, const vqc_check_ctx *ctx,
                                   int64_t step) {
  int64_t mine[NF_COUNT];
  nonfinite_summary(d, ctx->rank, mine);
  int64_t *all = malloc((size_t)d->size * NF_COUNT * sizeof *all);
  int *group = malloc((size_t)d->size * sizeof *group);
  if (all == NULL || group == NULL) {
    free(all);
    free(group);
    return vqc_error(VQC_ENOMEM, "divergence: no memory for %d ranks",
                     d->size);
  }
  vqc_status s = vqc_all_gather(vqc_comm_side(ctx->comm), mine, all, NF_COUNT,
                                VQC_I64);
  if (s != VQC_OK) goto done;
#define NF(r, w) all[(size_t)(r) * NF_COUNT + (w)]
  for (int r = 0; r < d->size; r++)
    if (NF(r, NF_TENSOR) >= 0) d->nonfinite_done[r] = true;

  int me = ctx->rank, t = (int)NF(me, NF_TENSOR);
  /* Record only if no lower rank shares this (step, tensor). */
  bool lowest = t >= 0;
  for (int r = 0; r < me && lowest; r++)
    if (NF(r, NF_TENSOR) == t) lowest = false;
  if (lowest) {
    int n = 0;
    for (int r = 0; r < d->size; r++)
      if (NF(r, NF_TENSOR) == t) group[n++] = r;
    const vqc_param *p = &ctx->state->items[t];
    uint64_t nan = (uint64_t)NF(me, NF_NAN), inf = (uint64_t)NF(me, NF_INF);
    int64_t at = NF(me, NF_FIRST);
    char where[96], who[128];
    coords_str(at, p->ndim, p->shape, where, sizeof where);
    ranks_str(group, n, who, sizeof who);

    vqc_finding f;
    vqc_finding_init(&f, VQC_FINDING_NONFINITE, step,
                     "tensor '%s' holds non-finite values on %s at step %"
                     PRId64 " (rank %d: %" PRIu64 " of %" PRId64
                     " elements, %" PRIu64 " NaN and %" PRIu64
                     " Inf, first at %s)",
                     p->name, who, step, me, nan + inf, p->numel, nan, inf,
                     where);
    snprintf(f.tensor, sizeof f.tensor, "%s", p->name);
    for (int i = 0; i < n; i++) vqc_finding_add_rank(&f, group[i]);
    json_t *per_rank = json_array();
    for (int i = 0; i < n; i++) {
      int r = group[i];
      int64_t fi = NF(r, NF_FIRST);
      json_array_append_new(
          per_rank,
          json_pack("{s:i,s:I,s:I,s:I,s:I,s:o}", "rank", r, "count",
                    (json_int_t)(NF(r, NF_NAN) + NF(r, NF_INF)), "nan",
                    (json_int_t)NF(r, NF_NAN), "inf",
                    (json_int_t)NF(r, NF_INF), "first_index", (json_int_t)fi,
                    "coords", coords_json(fi, p->ndim, p->shape)));
    }
#undef NF
    json_object_set_new(f.detail, "count", json_integer((json_int_t)(nan + inf)));
    json_object_set_new(f.detail, "nan", json_integer((json_int_t)nan));
    json_object_set_new(f.detail, "inf", json_integer((json_int_t)inf));
    json_object_set_new(f.detail, "first_index", json_integer((json_int_t)at));
    json_object_set_new(f.detail, "coords", coords_json(at, p->ndim, p->shape));
    json_object_set_new(f.detail, "numel", json_integer(p->numel));
    json_object_set_new(f.detail, "ranks", per_rank);
    s = add_finding(d, ctx, &f);
  }
done:
  free(all);
  free(group);
  return s;
}

/* ---- divergence: element comparison */

/* How one outlier's copy differs from the reference copy. */
typedef struct elem_diff {
  int64_t differing;   /* elements whose bits differ */
  int64_t first_index; /* -1 until one is found */
  double ref_value, out_value;   /* at first_index (float dtypes) */
  int64_t ref_int, out_int;      /* at first_index (integer dtypes) */
  double max_abs, max_rel;
  uint64_t max_ulp;
} elem_diff;

/* Element i of dt at p as a double, and as an integer for integer dtypes. */
static double value_at(const unsigned char *p, vqc_dtype dt, size_t i,
                       int64_t *as_int) {
  *as_int = 0;
  switch (dt) {
    case VQC_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case VQC_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case VQC_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); *as_int = v; return v; }
    case VQC_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); *as_int = v; return (double)v; }
    case VQC_U8: *as_int = p[i]; return p[i];
    default: return 0;
  }
}

/* ULP distance between two float bit patterns of `bits` width (32 or 64):
 * the distance between their positions in the ordered line of floats, where
 * the magnitude bits order each sign's half and the halves meet at zero. */
static uint64_t ulp_distance(uint64_t a, uint64_t b, int bits) {
  uint64_t sign = (uint64_t)1 << (bits - 1);
  uint64_t ma = a & (sign - 1), mb = b & (sign - 1);
  if ((a & sign) == (b & sign)) return ma > mb ? ma - mb : mb - ma;
  return ma + mb; /* < 2^64: each magnitude is < 2^63 */
}

/* Compares n elements (flat indices base..base+n-1) of the reference `ref`
 * and the outlier `out` into *e. */
static void compare_piece(const unsigned char *ref, const unsigned char *out,
                          size_t n, vqc_dtype dt, int64_t base, elem_diff *e) {
  size_t es = vqc_dtype_size(dt);
  for (size_t i = 0; i < n; i++) {
    if (memcmp(ref + i * es, out + i * es, es) == 0) continue;
    int64_t ri, oi;
    double a = value_at(ref, dt, i, &ri), b = value_at(out, dt, i, &oi);
    if (e->differing++ == 0) {
      e->first_index = base + (int64_t)i;
      e->ref_value = a;
      e->out_value = b;
      e->ref_int = ri;
      e->out_int = oi;
    }
    double diff = fabs(a - b), mag = fmax(fabs(a), fabs(b));
    double rel = mag > 0 ? diff / mag : 0; /* +0 vs -0: equal values */
    if (diff > e->max_abs) e->max_abs = diff; /* NaN never wins a > */
    if (rel > e->max_rel) e->max_rel = rel;
    if (is_float(dt)) {
      uint64_t x = 0, y = 0;
      memcpy(&x, ref + i * es, es); /* little-endian: low bytes first */
      memcpy(&y, out + i * es, es);
      uint64_t u = ulp_distance(x, y, (int)(8 * es));
      if (u > e->max_ulp) e->max_ulp = u;
    }
  }
}

/* A value of the tensor's dtype as text: float32 with 9 significant digits
 * (enough to round-trip), float64 with 17, integers exactly. */
static void value_str(vqc_dtype dt, double v, int64_t iv, char *buf,
                      size_t n) {
  if (dt == VQC_F32) snprintf(buf, n, "%.9g", v);
  else if (dt == VQC_F64) snprintf(buf, n, "%.17g", v);
  else snprintf(buf, n, "%" PRId64, iv);
}

static json_t *value_json(vqc_dtype dt, double v, int64_t iv) {
  return is_float(dt) ? json_num(v) : json_integer(iv);
}

/* majority: the values are "reference_value" and "outlier_value"; without
 * one, "base_value" (the lowest rank's) and "value": no side is the wrong
 * one. */
static json_t *diff_json(const elem_diff *e, const vqc_param *p,
                         bool majority) {
  json_t *o = json_object();
  json_object_set_new(o, "differing", json_integer(e->differing));
  json_object_set_new(o, "first_index", json_integer(e->first_index));
  json_object_set_new(o, "coords",
                      e->first_index >= 0
                          ? coords_json(e->first_index, p->ndim, p->shape)
                          : json_array());
  json_object_set_new(o, majority ? "reference_value" : "base_value",
                      value_json(p->dtype, e->ref_value, e->ref_int));
  json_object_set_new(o, majority ? "outlier_value" : "value",
                      value_json(p->dtype, e->out_value, e->out_int));
  json_object_set_new(o, "max_abs_diff", json_num(e->max_abs));
  json_object_set_new(o, "max_rel_diff", json_num(e->max_rel));
  json_object_set_new(o, "ulp",
                      is_float(p->dtype)
                          ? json_integer(e->max_ulp > (uint64_t)INT64_MAX
                                             ? INT64_MAX
                                             : (json_int_t)e->max_ulp)
                          : json_null());
  return o;
}

/* ---- divergence: localisation */

/* The layout words of an entry, exchanged before its bytes: a rank whose
 * registry has the same name with another dtype or shape would otherwise
 * send a different number of bytes. */
enum { L_DTYPE, L_NDIM, L_SHAPE0, L_COUNT = L_SHAPE0 + VQC_MAX_DIMS };

static void layout_of(const vqc_param *p, uint64_t *l) {
  memset(l, 0, L_COUNT * sizeof *l);
  l[L_DTYPE] = (uint64_t)p->dtype;
  l[L_NDIM] = (uint64_t)p->ndim;
  for (int d = 0; d < p->ndim; d++) l[L_SHAPE0 + d] = (uint64_t)p->shape[d];
}

static json_t *layout_json(const uint64_t *l) {
  json_t *shape = json_array();
  for (uint64_t d = 0; d < l[L_NDIM] && d < VQC_MAX_DIMS; d++)
    json_array_append_new(shape, json_integer((json_int_t)l[L_SHAPE0 + d]));
  return json_pack("{s:s,s:o}", "dtype", vqc_dtype_name((vqc_dtype)l[L_DTYPE]),
                   "shape", shape);
}

/* Groups of ranks with equal digests of tensor t, in order of their lowest
 * rank: group_of[r] is r's group, *ngroups the count, *ref the reference
 * group: the majority (strictly larger than every other group), and then
 * *majority is true; without one *majority is false and *ref is group 0
 * (the lowest rank's), which only anchors the comparison, blaming no one.
 * trace_compare.c applies the same rule to traces. */
static void group_ranks(const uint64_t *digests, int size, int *group_of,
                        int *ngroups, int *ref, bool *majority) {
  int n = 0;
  for (int r = 0; r < size; r++) {
    group_of[r] = -1;
    for (int q = 0; q < r; q++) {
      if (digests[q] == digests[r]) {
        group_of[r] = group_of[q];
        break;
      }
    }
    if (group_of[r] < 0) group_of[r] = n++;
  }
  int best = 0, best_count = 0, nbest = 0;
  for (int g = 0; g < n; g++) {
    int count = 0;
    for (int r = 0; r < size; r++) count += group_of[r] == g;
    if (count > best_count) {
      best = g;
      best_count = count;
      nbest = 1;
    } else if (count == best_count) {
      nbest++;
    }
  }
  *ngroups = n;
  *majority = nbest == 1;
  *ref = *majority ? best : 0;
}

static json_t *groups_json(const uint64_t *digests, int size,
                           const int *group_of, int ngroups) {
  json_t *a = json_array();
  for (int g = 0; g < ngroups; g++) {
    json_t *ranks = json_array();
    uint64_t digest = 0;
    for (int r = 0; r < size; r++) {
      if (group_of[r] != g) continue;
      digest = digests[r];
      json_array_append_new(ranks, json_integer(r));
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, digest);
    json_array_append_new(a, json_pack("{s:s,s:o}", "digest", hex, "ranks",
                                       ranks));
  }
  return a;
}

/* Localises the divergence of tensor t (digests: every rank's digest of it)
 * and, on the reference group's lowest rank, records the finding. Every rank
 * runs it (the exchanges are collective). `also` lists other tensors that
 * started to differ now. */
static vqc_status localise(div_impl *d, const vqc_check_ctx *ctx, int64_t step,
                           int t, const uint64_t *digests, json_t *also) {
  const vqc_param *p = &ctx->state->items[t];
  vqc_comm *side = vqc_comm_side(ctx->comm);
  int size = d->size, me = ctx->rank;
  vqc_status s = VQC_OK;

  int *group_of = malloc((size_t)size * sizeof *group_of);
  int *outliers = malloc((size_t)size * sizeof *outliers);
  uint64_t *layouts = malloc((size_t)size * L_COUNT * sizeof *layouts);
  elem_diff *diffs = calloc((size_t)size, sizeof *diffs);
  unsigned char *piece_buf = NULL;
  if (!group_of || !outliers || !layouts || !diffs) {
    s = vqc_error(VQC_ENOMEM, "divergence: no memory to localise '%s'",
                  p->name);
    goto done;
  }
  int ngroups = 0, refg = 0, nout = 0, ref_rank = -1;
  bool majority = true;
  group_ranks(digests, size, group_of, &ngroups, &refg, &majority);
  for (int r = 0; r < size; r++) {
    if (group_of[r] != refg) outliers[nout++] = r;
    else if (ref_rank < 0) ref_rank = r;
  }
  bool recorder = me == ref_rank;

  uint64_t mine[L_COUNT];
  layout_of(p, mine);
  s = vqc_all_gather(side, mine, layouts, L_COUNT, VQC_I64);
  if (s != VQC_OK) goto done;
  bool same_layout = true;
  for (int r = 1; r < size; r++)
    if (memcmp(layouts, layouts + (size_t)r * L_COUNT, sizeof mine) != 0)
      same_layout = false;

  if (same_layout) {
    /* The bytes, piece by piece: the reference rank broadcasts, each
     * outlier compares its own copy, then the summaries are gathered. */
    size_t es = vqc_dtype_size(p->dtype);
    size_t piece = localise_piece_bytes(size) / es;
    if (piece == 0) piece = 1;
    piece_buf = malloc(piece * es);
    if (piece_buf == NULL) {
      s = vqc_error(VQC_ENOMEM, "divergence: no memory to exchange '%s'",
                    p->name);
      goto done;
    }
    elem_diff mine_diff;
    memset(&mine_diff, 0, sizeof mine_diff);
    mine_diff.first_index = -1;
    const bool outlier = group_of[me] != refg;
    const unsigned char *data = p->data;
    for (int64_t off = 0; off < p->numel; off += (int64_t)piece) {
      size_t n = (size_t)(p->numel - off) < piece ? (size_t)(p->numel - off)
                                                   : piece;
      if (me == ref_rank) memcpy(piece_buf, data + (size_t)off * es, n * es);
      s = vqc_broadcast(side, piece_buf, n * es, VQC_U8, ref_rank);
      if (s != VQC_OK) goto done;
      if (outlier)
        compare_piece(piece_buf, data + (size_t)off * es, n, p->dtype, off,
                      &mine_diff);
    }
    /* diffs (size entries) first holds every rank's summary by rank, then
     * is packed to the outliers' in outlier order. */
    s = vqc_all_gather(side, &mine_diff, diffs, sizeof mine_diff, VQC_U8);
    if (s != VQC_OK) goto done;
    for (int i = 0; i < nout; i++) diffs[i] = diffs[outliers[i]];
  }
  if (!recorder) goto done;

  /* The message and the top-level detail describe the lowest outlier; the
   * others are in detail.outliers. */
  char who[200];
  if (majority) ranks_str(outliers, nout, who, sizeof who);
  else vqc_no_majority_text(group_of, size, ngroups, who, sizeof who);
  const elem_diff *e = &diffs[0];
  char what[256];
  if (!same_layout) {
    char ref_shape[64], out_shape[64];
    vqc_tensor t_ref = {0}, t_out = {0};
    const uint64_t *lr = layouts + (size_t)ref_rank * L_COUNT;
    const uint64_t *lo = layouts + (size_t)outliers[0] * L_COUNT;
    t_ref.ndim = (int)lr[L_NDIM];
    t_out.ndim = (int)lo[L_NDIM];
    for (int k = 0; k < VQC_MAX_DIMS; k++) {
      t_ref.shape[k] = (int64_t)lr[L_SHAPE0 + k];
      t_out.shape[k] = (int64_t)lo[L_SHAPE0 + k];
    }
    vqc_tensor_shape_str(&t_ref, ref_shape, sizeof ref_shape);
    vqc_tensor_shape_str(&t_out, out_shape, sizeof out_shape);
    snprintf(what, sizeof what, "rank %d has %s %s, rank %d has %s %s",
             outliers[0], vqc_dtype_name((vqc_dtype)lo[L_DTYPE]), out_shape,
             ref_rank, vqc_dtype_name((vqc_dtype)lr[L_DTYPE]), ref_shape);
  } else if (e->first_index < 0) {
    /* Digests differed but the bytes sent afterwards agree: the tensor was
     * written between the digest and the exchange (a race in the program). */
    snprintf(what, sizeof what, "the digests differ but the bytes exchanged "
             "right after agree: is the tensor written concurrently?");
  } else {
    char where[96], a[40], b[40];
    coords_str(e->first_index, p->ndim, p->shape, where, sizeof where);
    value_str(p->dtype, e->out_value, e->out_int, a, sizeof a);
    value_str(p->dtype, e->ref_value, e->ref_int, b, sizeof b);
    snprintf(what, sizeof what, "first at %s: %s on rank %d vs %s on rank "
             "%d; %" PRId64 " of %" PRId64 " elements differ", where, a,
             outliers[0], b, ref_rank, e->differing, p->numel);
  }
  vqc_finding f;
  if (majority)
    vqc_finding_init(&f, VQC_FINDING_DIVERGENCE, step,
                     "tensor '%s' differs on %s from rank %d at step %" PRId64
                     " (%s)", p->name, who, ref_rank, step, what);
  else
    vqc_finding_init(&f, VQC_FINDING_DIVERGENCE, step,
                     "tensor '%s' differs across ranks at step %" PRId64
                     " with no majority: %s, so no rank can be told to be "
                     "the wrong one (%s)", p->name, step, who, what);
  snprintf(f.tensor, sizeof f.tensor, "%s", p->name);
  if (majority) {
    for (int i = 0; i < nout; i++) vqc_finding_add_rank(&f, outliers[i]);
  } else {
    for (int r = 0; r < size; r++) vqc_finding_add_rank(&f, r);
  }
  json_t *det = f.detail;
  if (same_layout) {
    /* copy the first's keys to the top level */
    json_t *first = diff_json(e, p, majority);
    json_object_update(det, first);
    json_decref(first);
    json_t *per = json_array();
    for (int i = 0; i < nout; i++) {
      json_t *o = diff_json(&diffs[i], p, majority);
      json_object_set_new(o, "rank", json_integer(outliers[i]));
      json_array_append_new(per, o);
    }
    /* Without a majority these are differences from the lowest rank, not
     * outliers. */
    json_object_set_new(det, majority ? "outliers" : "differences", per);
  } else {
    json_t *l = json_array();
    for (int r = 0; r < size; r++) {
      json_t *o = layout_json(layouts + (size_t)r * L_COUNT);
      json_object_set_new(o, "rank", json_integer(r));
      json_array_append_new(l, o);
    }
    json_object_set_new(det, "layouts", l);
  }
  json_object_set_new(det, "numel", json_integer(p->numel));
  json_object_set_new(det, "dtype", json_string(vqc_dtype_name(p->dtype)));
  json_object_set_new(det, "majority", json_boolean(majority));
  if (majority)
    json_object_set_new(det, "reference_rank", json_integer(ref_rank));
  else
    json_object_set_new(det, "base_rank", json_integer(ref_rank));
  json_object_set_new(det, "groups",
                      groups_json(digests, size, group_of, ngroups));
  json_object_set(det, "also_differing", also);
  s = add_finding(d, ctx, &f);

done:
  free(group_of);
  free(outliers);
  free(layouts);
  free(diffs);
  free(piece_buf);
  return s;
}

/* Whether tensor t's digests differ across ranks, from the phase-1 MIN:
 * the minimum digest, and the maximum sent as the minimum of ~digest. */
static bool digests_differ(const div_impl *d, int t) {
  return d->agree_min[2 * t] != ~d->agree_min[2 * t + 1];
}

/* Phase 2 for divergence: the first newly differing entry's digests are
 * all_gathered (8 bytes per rank) and it is localised. */
static vqc_status report_divergence(div_impl *d, const vqc_check_ctx *ctx,
                                    int64_t step) {
  int first = -1;
  json_t *also = json_array();
  for (int t = 0; t < d->ntensors; t++) {
    if (d->reported[t] || !digests_differ(d, t)) continue;
    d->reported[t] = true;
    if (first < 0) first = t;
    else json_array_append_new(also, json_string(ctx->state->items[t].name));
  }
  vqc_status s = VQC_OK;
  if (first >= 0) {
    uint64_t mine = local_word(d, first, W_DIGEST);
    uint64_t *digests = malloc((size_t)d->size * sizeof *digests);
    if (digests == NULL)
      s = vqc_error(VQC_ENOMEM, "divergence: no memory for %d ranks", d->size);
    else
      s = vqc_all_gather(vqc_comm_side(ctx->comm), &mine, digests, 1, VQC_I64);
    if (s == VQC_OK) s = localise(d, ctx, step, first, digests, also);
    free(digests);
  }
  json_decref(also);
  return s;
}

/* ---- one check */

/* A hash of the registry's names, dtypes and order: ranks must register the
 * same entries in the same order, or the table compares unrelated tensors. */
static uint64_t registry_signature(const vqc_param_list *l) {
  uint64_t h = (uint64_t)l->count;
  for (int i = 0; i < l->count; i++) {
    uint64_t pair[2] = {h, vqc_xxh3_64(l->items[i].name,
                                       strlen(l->items[i].name))};
    pair[0] ^= (uint64_t)l->items[i].dtype << 56;
    h = vqc_xxh3_64(pair, sizeof pair);
  }
  return h;
}

/* Once per run: every rank registered the same entries. A 4-word MIN
 * all_reduce (signature and entry count, each with its complement) says
 * whether they agree; only when they do not are the signatures gathered, to
 * name a rank that differs. */
static vqc_status agree_registry(div_impl *d, const vqc_check_ctx *ctx) {
  vqc_comm *side = vqc_comm_side(ctx->comm);
  uint64_t sig = registry_signature(ctx->state);
  int64_t mine[4] = {(int64_t)sig, ~(int64_t)sig, d->ntensors, ~d->ntensors};
  int64_t min[4];
  VQC_TRY(vqc_all_reduce(side, mine, min, 4, VQC_I64, VQC_MIN));
  if (min[0] == ~min[1] && min[2] == ~min[3]) {
    d->registry_agreed = true;
    return VQC_OK;
  }
  uint64_t *sigs = malloc((size_t)d->size * sizeof *sigs);
  if (sigs == NULL)
    return vqc_error(VQC_ENOMEM, "divergence: no memory for %d ranks", d->size);
  vqc_status s = vqc_all_gather(side, &sig, sigs, 1, VQC_I64);
  int odd = -1;
  for (int r = 0; s == VQC_OK && r < d->size && odd < 0; r++)
    if (sigs[r] != sig) odd = r;
  free(sigs);
  if (s != VQC_OK) return s;
  return vqc_error(VQC_EINVAL,
                   "divergence: rank %d registered other tensors (names, "
                   "dtypes or order) than rank %d; the replicated state "
                   "must be registered identically on every rank",
                   odd >= 0 ? odd : ctx->rank, ctx->rank);
}

/* Step 1 and 2: this rank's digests and non-finite counts, and its trace
 * lines. Reads the state; no exchange. */
static vqc_status digest_state(div_impl *d, const vqc_check_ctx *ctx,
                               int64_t step) {
  const vqc_param_list *state = ctx->state;
  for (int t = 0; t < d->ntensors; t++) {
    const vqc_param *p = &state->items[t];
    nonfinite_count c;
    uint64_t *w = d->local + (size_t)t * W_COUNT;
    VQC_TRY(digest_entry(p, &w[W_DIGEST], &c));
    w[W_NAN] = c.nan;
    w[W_INF] = c.inf;
    w[W_FIRST] = c.first;
    if (d->trace) {
      vqc_trace_record rec;
      memset(&rec, 0, sizeof rec);
      rec.rank = ctx->rank;
      rec.step = step;
      snprintf(rec.tensor, sizeof rec.tensor, "%s", p->name);
      snprintf(rec.dtype, sizeof rec.dtype, "%s", vqc_dtype_name(p->dtype));
      rec.ndim = p->ndim;
      for (int k = 0; k < p->ndim; k++) rec.shape[k] = p->shape[k];
      snprintf(rec.digest_algo, sizeof rec.digest_algo, "%s",
               VQC_TRACE_DIGEST_ALGO);
      rec.digest = w[W_DIGEST];
      VQC_TRY(vqc_trace_write(d->trace, &rec));
    }
  }
  if (d->trace) VQC_TRY(vqc_trace_flush(d->trace));
  return VQC_OK;
}

/* Steps 3 and 4: the two-phase agreement over the side channel, for the
 * digests of `step` in d->local. `failed`: this rank's training stopped
 * (it still takes part, so the others learn it and its digests still count:
 * they are of the state before the failure). `digested`: this rank's
 * digests are valid; if any rank's are not, nothing is reported. */
static vqc_status exchange(div_impl *d, const vqc_check_ctx *ctx,
                           int64_t step, bool failed, bool digested) {
  if (!d->registry_agreed) VQC_TRY(agree_registry(d, ctx));

  const int nt = d->ntensors;
  for (int t = 0; t < nt; t++) {
    int64_t digest = (int64_t)local_word(d, t, W_DIGEST);
    d->agree_send[2 * t] = digested ? digest : 0;
    d->agree_send[2 * t + 1] = digested ? ~digest : ~(int64_t)0;
  }
  int64_t nf[NF_COUNT];
  nonfinite_summary(d, ctx->rank, nf);
  int64_t new_nonfinite = digested && nf[NF_TENSOR] >= 0 ? 1 : 0;
  d->agree_send[2 * nt] = ~new_nonfinite; /* MIN of ~x is ~MAX of x */
  d->agree_send[2 * nt + 1] = failed ? ctx->rank : d->size;
  d->agree_send[2 * nt + 2] = ~(int64_t)(digested ? 0 : 1);
  d->agree_send[2 * nt + 3] = ~(int64_t)d->insert_at;
  VQC_TRY(vqc_all_reduce(vqc_comm_side(ctx->comm), d->agree_send,
                         d->agree_min, AGREE_WORDS(nt), VQC_I64, VQC_MIN));
  if (~d->agree_min[2 * nt + 2] != 0)
    return digested ? vqc_error(VQC_EABORTED, "divergence: another rank "
                                "could not digest its state at step %" PRId64,
                                step)
                    : VQC_OK; /* the caller reports its own error */
  if (d->insert_at >= 0 &&
      vqc_comm_backend(ctx->comm) == VQC_BACKEND_THREADS)
    d->insert_at = (int)~d->agree_min[2 * nt + 3];
  if (~d->agree_min[2 * nt] != 0) VQC_TRY(report_nonfinite(d, ctx, step));
  if (nt > 0) VQC_TRY(report_divergence(d, ctx, step));
  int64_t first_failed = d->agree_min[2 * nt + 1];
  if (!failed && first_failed < d->size)
    return vqc_error(VQC_EABORTED, "rank %d stopped training after step %"
                     PRId64, (int)first_failed, step);
  return VQC_OK;
}

static vqc_status check_registry_size(const div_impl *d,
                                      const vqc_check_ctx *ctx, int64_t step) {
  if (ctx->state->count == d->ntensors) return VQC_OK;
  return vqc_error(VQC_EINVAL,
                   "divergence: the registry had %d entries at attach and "
                   "has %d at step %" PRId64 " (register everything first)",
                   d->ntensors, ctx->state->count, step);
}

/* The synchronous check: digest, then exchange. A rank whose digest failed
 * still takes part in the exchange, so its peers do not wait for it. */
static vqc_status check_step(div_impl *d, const vqc_check_ctx *ctx,
                             int64_t step) {
  VQC_TRY(check_registry_size(d, ctx, step));
  d->last_checked = step;
  vqc_status ds = digest_state(d, ctx, step);
  if (ds == VQC_OK) return exchange(d, ctx, step, false, true);
  char why[512];
  snprintf(why, sizeof why, "%s", vqc_last_error());
  exchange(d, ctx, step, false, false);
  return vqc_error(ds, "%s", why);
}

/* ---- the overlapped check */

static void *worker_main(void *arg) {
  div_impl *d = arg;
  d->worker_status = digest_state(d, d->worker_ctx, d->pending_step);
  if (d->worker_status != VQC_OK)
    snprintf(d->worker_error, sizeof d->worker_error, "%s", vqc_last_error());
  return NULL;
}

/* Starts digesting `step` on the worker thread; digests in place if no
 * thread can be started. */
static vqc_status start_overlapped(div_impl *d, const vqc_check_ctx *ctx,
                                   int64_t step) {
  VQC_TRY(check_registry_size(d, ctx, step));
  d->last_checked = step;
  d->pending = true;
  d->pending_step = step;
  d->worker_ctx = ctx;
  d->worker_status = VQC_OK;
  d->worker_error[0] = '\0';
  d->insert_at = vqc_findings_count(ctx->findings);
  if (pthread_create(&d->worker, NULL, worker_main, d) == 0) {
    d->worker_running = true;
    return VQC_OK;
  }
  worker_main(d);
  return VQC_OK;
}

static vqc_status settle_pending(div_impl *d, const vqc_check_ctx *ctx,
                                 bool failed) {
  if (!d->pending) return VQC_OK;
  if (d->worker_running) {
    pthread_join(d->worker, NULL);
    d->worker_running = false;
  }
  d->pending = false;
  bool digested = d->worker_status == VQC_OK;
  vqc_status s = exchange(d, ctx, d->pending_step, failed, digested);
  d->insert_at = -1;
  if (!digested)
    return vqc_error(d->worker_status, "%s", d->worker_error);
  return s;
}

/* ---- the checker interface */

static void div_free(div_impl *d) {
  if (d == NULL) return;
  vqc_trace_writer_close(d->trace);
  free(d->reported);
  free(d->nonfinite_done);
  free(d->local);
  free(d->agree_send);
  free(d->agree_min);
  free(d);
}

static vqc_status side_hook(void *user);

static vqc_status div_attach(vqc_checker *self, vqc_check_ctx *ctx) {
  if (ctx == NULL || ctx->state == NULL || ctx->comm == NULL ||
      ctx->findings == NULL)
    return vqc_error(VQC_EINVAL, "divergence: ctx needs comm, state, findings");
  vqc_status s = VQC_OK;
  div_impl *d = calloc(1, sizeof *d);
  if (d == NULL) goto nomem;
  d->size = ctx->size;
  d->ntensors = ctx->state->count;
  d->last_seen = d->last_checked = -1;
  d->insert_at = -1;
  size_t nt = (size_t)d->ntensors, nr = (size_t)d->size;
  /* +1: calloc(0) may return NULL, which is not a failure here */
  d->reported = calloc(nt + 1, sizeof *d->reported);
  d->nonfinite_done = calloc(nr + 1, sizeof *d->nonfinite_done);
  d->local = calloc(nt * W_COUNT + 1, sizeof *d->local);
  d->agree_send = calloc(AGREE_WORDS(nt), sizeof *d->agree_send);
  d->agree_min = calloc(AGREE_WORDS(nt), sizeof *d->agree_min);
  if (!d->reported || !d->nonfinite_done || !d->local || !d->agree_send ||
      !d->agree_min)
    goto nomem;
  if (ctx->run_dir != NULL) {
    char path[4096];
    if ((s = vqc_trace_path(ctx->run_dir, ctx->rank, path, sizeof path)) !=
            VQC_OK ||
        (s = vqc_trace_writer_open(path, &d->trace)) != VQC_OK)
      goto fail;
  }
  if (ctx->opts.overlap &&
      (s = vqc_comm_set_before_collective(vqc_comm_side(ctx->comm), side_hook,
                                          d)) != VQC_OK)
    goto fail;
  d->hooked = ctx->opts.overlap;
  self->impl = d;
  return VQC_OK;

nomem:
  s = vqc_error(VQC_ENOMEM, "divergence: no memory for %d tensors x %d ranks",
                ctx->state->count, ctx->size);
fail:
  div_free(d);
  return s;
}

static int interval_of(const vqc_check_ctx *ctx) {
  return ctx->opts.interval >= 1 ? ctx->opts.interval : 1;
}

/* With overlap, a check still pending here was not settled before the
 * state changed: that is only sound when nothing was written since (a step
 * that updates nothing); it is settled now, before the next one starts. */
static vqc_status div_step_end(vqc_checker *self, vqc_check_ctx *ctx,
                               int64_t step) {
  div_impl *d = self->impl;
  if (d == NULL) return vqc_error(VQC_EINVAL, "divergence: not attached");
  VQC_TRY(settle_pending(d, ctx, false));
  d->last_seen = step;
  if (step % interval_of(ctx) != 0) return VQC_OK;
  if (ctx->opts.overlap) return start_overlapped(d, ctx, step);
  return check_step(d, ctx, step);
}

/* The side channel's hook (overlap only): a rank's first side collective
 * after step_end settles the pending check first, so ranks that write no
 * state this step (no settle from the model) still exchange in the same
 * order as those that did. A peer's failure learned here is not this
 * collective's error: the collective that follows (the runner's agreement,
 * vqc_instr_finish) reports it in its own words. */
static vqc_status side_hook(void *user) {
  div_impl *d = user;
  vqc_status s = settle_pending(d, d->worker_ctx, false);
  return s == VQC_EABORTED ? VQC_OK : s;
}

static vqc_status div_settle(vqc_checker *self, vqc_check_ctx *ctx,
                             bool failed) {
  div_impl *d = self->impl;
  return d ? settle_pending(d, ctx, failed) : VQC_OK;
}

/* After a clean run, checks the last step if the interval skipped it. After
 * a failure the ranks may have stopped at different points (or one may be
 * gone), so no exchange is attempted: the trace already holds every step
 * that was checked. */
static vqc_status div_finish(vqc_checker *self, vqc_check_ctx *ctx,
                             vqc_status run_status) {
  div_impl *d = self->impl;
  if (d == NULL) return VQC_OK;
  vqc_status s = settle_pending(d, ctx, run_status != VQC_OK);
  if (s == VQC_OK && run_status == VQC_OK && d->last_seen > d->last_checked)
    s = check_step(d, ctx, d->last_seen);
  vqc_trace_writer_close(d->trace);
  d->trace = NULL;
  return s;
}

static void div_destroy(vqc_checker *self, vqc_check_ctx *ctx) {
  if (self == NULL) return;
  div_impl *d = self->impl;
  if (d != NULL && d->worker_running) pthread_join(d->worker, NULL);
  if (d != NULL && d->hooked)
    vqc_comm_set_before_collective(vqc_comm_side(ctx->comm), NULL, NULL);
  div_free(d);
  self->impl = NULL;
}

vqc_status vqc_checker_divergence(vqc_checker *out) {
  if (out == NULL) return vqc_error(VQC_EINVAL, "divergence: out is NULL");
  memset(out, 0, sizeof *out);
  out->name = "divergence";
  out->attach = div_attach;
  out->step_end = div_step_end;
  out->settle = div_settle;
  out->finish = div_finish;
  out->destroy = div_destroy;
  return VQC_OK;
}
