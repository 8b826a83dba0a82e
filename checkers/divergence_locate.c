/* divergence_locate.c: step 4 of the divergence checker's protocol
 * (divergence.c's opening comment): when the two-phase agreement shows a
 * problem, the localising exchanges that find it and the findings that
 * describe it: `nonfinite` (which ranks, which tensor, how many NaN and Inf,
 * the first one) and `divergence` (the ranks grouped by digest, the
 * reference and the outliers, the entry's layout and bytes compared: the
 * first differing element and its values, the differing count, max abs,
 * rel and ULP differences). Split out of divergence.c; see
 * divergence_internal.h. */
#include "divergence_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of one localisation broadcast: at most 1 MiB, and at most 64 MiB
 * over all ranks (the threads backend holds every rank's buffer in one
 * process), but not under 64 KiB. Only paid on a mismatch. */
static size_t localise_piece_bytes(int size) {
  size_t b = ((size_t)64 << 20) / (size_t)(size > 0 ? size : 1);
  if (b > ((size_t)1 << 20)) b = (size_t)1 << 20;
  if (b < ((size_t)64 << 10)) b = (size_t)64 << 10;
  return b;
}

/* Records f where the synchronous check would have (see insert_at). */
static vqc_status add_finding(div_impl *d, const vqc_check_ctx *ctx,
                              const vqc_finding *f) {
  return vqc_check_report(ctx, d->insert_at, f);
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
void div_nonfinite_summary(const div_impl *d, int rank, int64_t *w) {
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
vqc_status div_report_nonfinite(div_impl *d, const vqc_check_ctx *ctx,
                                int64_t step) {
  int64_t mine[NF_COUNT];
  div_nonfinite_summary(d, ctx->rank, mine);
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
 * trace_compare_findings.c applies the same rule to traces. */
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
vqc_status div_report_divergence(div_impl *d, const vqc_check_ctx *ctx,
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
