/* trace_compare_findings.c: what the trace comparison reports (see
 * trace_compare.h): the divergence finding of one tensor from its ranks'
 * digests (tc_add_finding), the rank_failure finding for traces that stop
 * early (tc_stopped_early), the warnings and errors about what was not
 * compared, and the result's program and last steps. Split out of
 * trace_compare.c (see trace_compare_internal.h). */
#include "trace_compare_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* ---- the divergence finding */

/* "[32, 16]" ("[]" for a scalar). */
static void shape_str(const vqc_trace_record *r, char *buf, size_t n) {
  size_t used = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < r->ndim && used < n; d++)
    used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, d ? ", " : "",
                             r->shape[d]);
  if (used < n) snprintf(buf + used, n - used, "]");
}

/* "0.02" or "[0.9, 0.999]": a line's "values", each with the fewest
 * digits that read back as the same double (%.17g would print 0.1 as
 * 0.10000000000000001). */
static void values_text(const vqc_trace_record *r, char *buf, size_t n) {
  size_t used = (size_t)snprintf(buf, n, "%s", r->nvalues == 1 ? "" : "[");
  for (int i = 0; i < r->nvalues && used < n; i++) {
    char one[32];
    for (int prec = 6; prec <= 17; prec++) {
      snprintf(one, sizeof one, "%.*g", prec, r->values[i]);
      if (strtod(one, NULL) == r->values[i]) break;
    }
    used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", one);
  }
  if (r->nvalues > 1 && used < n) snprintf(buf + used, n - used, "]");
}

static json_t *shape_json(const vqc_trace_record *r) {
  json_t *a = json_array();
  for (int d = 0; d < r->ndim; d++)
    json_array_append_new(a, json_integer(r->shape[d]));
  return a;
}

static json_t *where_json(const rank_file *rf, int rank, const line_rec *x) {
  char at[4200];
  snprintf(at, sizeof at, "%s:%ld", rf->path, x->line);
  return json_pack("{s:i,s:s}", "rank", rank, "at", at);
}

/* Records the divergence of the tensor whose per-rank lines are recs[r]
 * (NULL for ranks without a file). Mirrors divergence_locate.c's localise,
 * from digests alone. */
vqc_status tc_add_finding(const vqc_trace_set *s, int64_t step,
                          const line_rec *const *recs, json_t *also,
                          vqc_findings *out) {
  const int n = s->nranks;
  int *group_of = malloc((size_t)n * sizeof *group_of);
  int *outliers = malloc((size_t)n * sizeof *outliers);
  if (group_of == NULL || outliers == NULL) {
    free(group_of);
    free(outliers);
    return vqc_error(VQC_ENOMEM, "trace compare: no memory for %d ranks", n);
  }
  /* Groups of equal (digest, dtype, shape), numbered by their lowest rank. */
  int ngroups = 0;
  for (int r = 0; r < n; r++) {
    group_of[r] = -1;
    if (recs[r] == NULL) continue;
    for (int q = 0; q < r && group_of[r] < 0; q++)
      if (recs[q] && tc_same_state(&recs[q]->r, &recs[r]->r))
        group_of[r] = group_of[q];
    if (group_of[r] < 0) group_of[r] = ngroups++;
  }
  /* A majority is a group strictly larger than every other. Without one
   * (3 ranks, 3 digests; any 1-1 or 2-2 split) no rank is the odd one out:
   * every rank is named, and group 0 (the lowest rank's) only anchors the
   * wording of the message. */
  int ref = 0, best = 0, nbest = 0;
  for (int g = 0; g < ngroups; g++) {
    int count = 0;
    for (int r = 0; r < n; r++) count += group_of[r] == g;
    if (count > best) {
      best = count;
      ref = g;
      nbest = 1;
    } else if (count == best) {
      nbest++;
    }
  }
  const bool majority = nbest == 1;
  if (!majority) ref = 0;
  int nout = 0, ref_rank = -1;
  for (int r = 0; r < n; r++) {
    if (group_of[r] < 0) continue;
    if (group_of[r] != ref) outliers[nout++] = r;
    else if (ref_rank < 0) ref_rank = r;
  }
  if (nout == 0 || ref_rank < 0) { /* callers pass a tensor that differs */
    free(group_of);
    free(outliers);
    return vqc_error(VQC_EINTERNAL, "trace compare: no outlier to report");
  }
  const vqc_trace_record *rr = &recs[ref_rank]->r;
  const vqc_trace_record *ro = &recs[outliers[0]]->r;

  char who[200], what[400];
  if (majority) {
    snprintf(who, sizeof who, "%s", nout == 1 ? "rank " : "ranks ");
    tc_rank_list(outliers, nout, who + strlen(who), sizeof who - strlen(who));
  } else {
    vqc_no_majority_text(group_of, n, ngroups, who, sizeof who);
  }
  if (!tc_same_layout(ro, rr)) {
    char so[96], sr[96];
    shape_str(ro, so, sizeof so);
    shape_str(rr, sr, sizeof sr);
    snprintf(what, sizeof what, "rank %d has %s %s, rank %d has %s %s",
             outliers[0], ro->dtype, so, ref_rank, rr->dtype, sr);
  } else if (ro->nvalues > 0 && rr->nvalues > 0) {
    /* a small tensor whose elements the trace tells: the values say more
     * than the digests ("lr 0.02 on rank 1 vs 0.01 on rank 0") */
    char vo[160], vr[160];
    values_text(ro, vo, sizeof vo);
    values_text(rr, vr, sizeof vr);
    snprintf(what, sizeof what, "value%s %s on rank %d vs %s on rank %d",
             ro->nvalues > 1 || rr->nvalues > 1 ? "s" : "", vo, outliers[0],
             vr, ref_rank);
  } else {
    snprintf(what, sizeof what, "digest %016" PRIx64 " on rank %d vs %016"
             PRIx64 " on rank %d", ro->digest, outliers[0], rr->digest,
             ref_rank);
  }
  /* Within a replica group (trace.h "group"), the finding says so: the
   * other ranks hold other shards and were rightly not compared. */
  char scope[VQC_TRACE_SHARD_MAX + 1100] = "";
  int *grp = NULL, ngrp = 0;
  if (rr->group[0]) {
    grp = malloc(VQC_TRACE_GROUP_MAX_RANKS * sizeof *grp);
    ngrp = grp ? vqc_trace_group_ranks(rr->group, grp,
                                       VQC_TRACE_GROUP_MAX_RANKS)
               : 0;
    char ranges[1024];
    vqc_rank_ranges_text(grp, ngrp > 0 ? ngrp : 0, ranges, sizeof ranges);
    if (rr->shard[0])
      snprintf(scope, sizeof scope, " (shard '%s', replica group {%s})",
               rr->shard, ranges);
    else
      snprintf(scope, sizeof scope, " (replica group {%s})", ranges);
  } else if (rr->shard[0]) {
    snprintf(scope, sizeof scope, " (shard '%s')", rr->shard);
  }
  vqc_finding f;
  if (majority)
    vqc_finding_init(&f, VQC_FINDING_DIVERGENCE, step,
                     "tensor '%s'%s differs on %s from rank %d at step %"
                     PRId64 " (%s; from traces, so digests only: no "
                     "element-level detail)", rr->tensor, scope, who,
                     ref_rank, step, what);
  else
    vqc_finding_init(&f, VQC_FINDING_DIVERGENCE, step,
                     "tensor '%s'%s differs across ranks at step %" PRId64
                     " with no majority: %s, so no rank can be told to be the "
                     "wrong one (%s; from traces, so digests only: no "
                     "element-level detail)", rr->tensor, scope, step, who,
                     what);
  snprintf(f.tensor, sizeof f.tensor, "%.127s", rr->tensor); /* may cut */
  if (majority) {
    for (int i = 0; i < nout; i++) vqc_finding_add_rank(&f, outliers[i]);
  } else {
    for (int r = 0; r < n; r++)
      if (group_of[r] >= 0) vqc_finding_add_rank(&f, r);
  }

  json_t *det = f.detail;
  json_object_set_new(det, "source", json_string("traces"));
  json_object_set_new(det, "element_detail",
                      json_string("not available: traces hold digests only, "
                                  "so the first differing index, the values "
                                  "there and the max abs/rel/ULP difference "
                                  "are unknown (a vqcheck run of the same "
                                  "program reports them)"));
  json_object_set_new(det, "digest_algo", json_string(rr->digest_algo));
  json_object_set_new(det, "dtype", json_string(rr->dtype));
  json_object_set_new(det, "shape", shape_json(rr));
  if (ro->nvalues > 0 && rr->nvalues > 0) { /* {"<rank>": [values]} */
    json_t *vals = json_object();
    const vqc_trace_record *two[2] = {ro, rr};
    const int who2[2] = {outliers[0], ref_rank};
    for (int k = 0; k < 2 && vals; k++) {
      json_t *a = json_array();
      for (int i = 0; i < two[k]->nvalues && a; i++)
        json_array_append_new(a, json_real(two[k]->values[i]));
      char key[16];
      snprintf(key, sizeof key, "%d", who2[k]);
      if (a) json_object_set_new(vals, key, a);
    }
    if (vals) json_object_set_new(det, "values", vals);
  }
  /* numel only when the product fits (foreign writers may lie about it). */
  int64_t numel = 1;
  bool fits = true;
  for (int d = 0; d < rr->ndim && fits; d++) {
    if (rr->shape[d] != 0 && numel > INT64_MAX / rr->shape[d]) fits = false;
    else numel *= rr->shape[d];
  }
  if (fits) json_object_set_new(det, "numel", json_integer(numel));
  json_object_set_new(det, "majority", json_boolean(majority));
  if (rr->group[0]) {
    json_t *g = json_array();
    for (int i = 0; i < ngrp && i < VQC_TRACE_GROUP_MAX_RANKS; i++)
      json_array_append_new(g, json_integer(grp[i]));
    json_object_set_new(det, "group", g);
  }
  free(grp);
  if (rr->shard[0]) json_object_set_new(det, "shard", json_string(rr->shard));
  /* Without a majority the lowest rank only anchors the wording ("base",
   * as the live checker calls it): it is no reference. */
  json_object_set_new(det, majority ? "reference_rank" : "base_rank",
                      json_integer(ref_rank));

  json_t *groups = json_array();
  for (int g = 0; g < ngroups; g++) {
    json_t *ranks = json_array();
    uint64_t digest = 0;
    for (int r = 0; r < n; r++) {
      if (group_of[r] != g) continue;
      digest = recs[r]->r.digest;
      json_array_append_new(ranks, json_integer(r));
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, digest);
    json_array_append_new(groups, json_pack("{s:s,s:o}", "digest", hex,
                                            "ranks", ranks));
  }
  json_object_set_new(det, "groups", groups);

  bool layouts_differ = false;
  for (int r = 0; r < n; r++)
    if (recs[r] && !tc_same_layout(&recs[r]->r, rr)) layouts_differ = true;
  if (layouts_differ) {
    json_t *l = json_array();
    for (int r = 0; r < n; r++) {
      if (recs[r] == NULL) continue;
      json_array_append_new(l, json_pack("{s:i,s:s,s:o}", "rank", r, "dtype",
                                         recs[r]->r.dtype, "shape",
                                         shape_json(&recs[r]->r)));
    }
    json_object_set_new(det, "layouts", l);
  }
  json_object_set(det, "also_differing", also);
  /* Where to look: the reference line (without a majority: the lowest
   * rank's) and each other rank's (at most 64). */
  json_t *lines = json_array();
  json_array_append_new(lines, where_json(&s->ranks[ref_rank], ref_rank,
                                          recs[ref_rank]));
  for (int i = 0; i < nout && i < VQC_FINDING_MAX_RANKS; i++)
    json_array_append_new(lines, where_json(&s->ranks[outliers[i]],
                                            outliers[i], recs[outliers[i]]));
  json_object_set_new(det, "trace_lines", lines);

  free(group_of);
  free(outliers);
  vqc_status st = vqc_findings_add(out, &f);
  if (st != VQC_OK) json_decref(f.detail); /* the list did not take it */
  return st;
}

/* ---- how far each rank got: the rank_failure finding, warnings */

/* How far a rank's trace got: its last step, -1 for a file without a line,
 * -2 for a rank without a file. */
static int64_t reach_of(const rank_file *rf) {
  if (!rf->present) return -2;
  return rf->lines == 0 ? -1 : rf->last_step;
}

/* "rank 2 at step 4" / "rank 3 before its first step (empty trace)" /
 * "rank 5 with no trace file" into buf. */
static void reach_text(int rank, int64_t reach, char *buf, size_t n) {
  if (reach >= 0)
    snprintf(buf, n, "rank %d at step %" PRId64, rank, reach);
  else if (reach == -1)
    snprintf(buf, n, "rank %d before its first step (empty trace)", rank);
  else
    snprintf(buf, n, "rank %d with no trace file", rank);
}

/* The rank_failure finding for traces that stop early (see
 * trace_compare.h): ranks whose trace reaches a lower step than another
 * rank's, an empty trace counting as no step and a missing file as less
 * than that; with require_comparison, also traces in which no rank reached
 * a step at all. *added: whether one was added. */
vqc_status tc_stopped_early(const vqc_trace_set *s, vqc_findings *out,
                            bool *added) {
  *added = false;
  if (s->nfiles == 0) return VQC_OK;
  int64_t max_reach = -2, min_reach = INT64_MAX;
  for (int r = 0; r < s->nranks; r++) {
    int64_t x = reach_of(&s->ranks[r]);
    if (x > max_reach) max_reach = x;
    if (x < min_reach) min_reach = x;
  }
  const bool none_reached = max_reach < 0 && min_reach == max_reach;
  if (min_reach == max_reach && !(none_reached && s->require_comparison))
    return VQC_OK;

  /* The ranks named: those below the furthest, or every rank when none got
   * anywhere. */
  char list[200], where[400];
  size_t lused = 0, wused = 0;
  int nearly = 0;
  list[0] = where[0] = '\0';
  vqc_finding f;
  memset(&f, 0, sizeof f);
  json_t *early = json_array(), *last = json_array();
  if (early == NULL || last == NULL) {
    json_decref(early);
    json_decref(last);
    return vqc_error(VQC_ENOMEM, "trace compare: no memory");
  }
  int64_t first_missing = INT64_MAX; /* the first step an early rank lacks */
  for (int r = 0; r < s->nranks; r++) {
    const rank_file *rf = &s->ranks[r];
    const int64_t x = reach_of(rf);
    json_array_append_new(last, x >= 0 ? json_integer(x) : json_null());
    if (!none_reached && x == max_reach) continue;
    if (x + 1 < first_missing) first_missing = x < 0 ? 0 : x + 1;
    json_t *o = json_pack("{s:i,s:o,s:s}", "rank", r, "last_step",
                          x >= 0 ? json_integer(x) : json_null(), "trace",
                          x >= 0 ? "ends early" : x == -1 ? "empty"
                                                          : "missing");
    json_t *path = vqc_json_text(rf->path, strlen(rf->path));
    if (x >= -1 && path) json_object_set_new(o, "path", path);
    else json_decref(path);
    json_array_append_new(early, o);
    if (nearly < 8) {
      char one[96];
      reach_text(r, x, one, sizeof one);
      if (lused < sizeof list)
        lused += (size_t)snprintf(list + lused, sizeof list - lused, "%s%d",
                                  nearly ? ", " : "", r);
      if (wused < sizeof where)
        wused += (size_t)snprintf(where + wused, sizeof where - wused, "%s%s",
                                  nearly ? ", " : "", one);
    } else if (nearly == 8) {
      if (lused < sizeof list)
        lused += (size_t)snprintf(list + lused, sizeof list - lused, ", ...");
      if (wused < sizeof where)
        wused += (size_t)snprintf(where + wused, sizeof where - wused,
                                  ", ...");
    }
    nearly++;
  }
  if (none_reached) {
    vqc_finding_init(&f, VQC_FINDING_RANK_FAILURE, 0,
                     "no trace holds a step (rank%s %s: every trace is "
                     "empty): every rank died, hung or was killed before "
                     "its first check, so nothing was compared",
                     nearly > 1 ? "s" : "", list);
  } else {
    const bool one = nearly == 1;
    char others[96];
    if (max_reach >= 0)
      snprintf(others, sizeof others, "the other ranks reach step %" PRId64,
               max_reach);
    else
      snprintf(others, sizeof others, "the other ranks' traces exist but "
               "hold no step");
    vqc_finding_init(&f, VQC_FINDING_RANK_FAILURE, first_missing,
                     "%s %s stop%s early: %s (%s): %s died, hung or %s "
                     "killed before the others stopped",
                     one ? "the trace of rank" : "traces of ranks", list,
                     one ? "s" : "", where, others,
                     one ? "that rank" : "those ranks",
                     one ? "was" : "were");
  }
  for (int r = 0; r < s->nranks; r++)
    if (none_reached || reach_of(&s->ranks[r]) != max_reach)
      vqc_finding_add_rank(&f, r);
  json_object_set_new(f.detail, "source", json_string("traces"));
  json_object_set_new(f.detail, "stopped_early", early);
  json_object_set_new(f.detail, "last_step", last);
  json_object_set_new(f.detail, "furthest_step",
                      max_reach >= 0 ? json_integer(max_reach) : json_null());
  vqc_status st = vqc_findings_add(out, &f);
  if (st != VQC_OK) json_decref(f.detail); /* the list did not take it */
  else *added = true;
  return st;
}

/* Warnings about what was not compared, once everything was read (ranks
 * that stop early are a finding, not a warning: tc_stopped_early). */
void tc_end_warnings(const vqc_trace_set *s, json_t *warnings) {
  int empty = 0;
  for (int r = 0; r < s->nranks; r++) empty += s->ranks[r].present &&
                                              s->ranks[r].lines == 0;
  if (s->nfiles == 1)
    tc_warn(warnings, "%s: one rank's trace only: there is nothing to compare "
            "it with", s->dir);
  if (empty > 0 && empty == s->nfiles) {
    tc_warn(warnings, "%s: no trace has a line (did the job stop before its "
            "first check?): nothing was compared", s->dir);
    return;
  }
  for (int r = 0; r < s->nranks; r++) {
    const rank_file *rf = &s->ranks[r];
    if (!rf->present || rf->not_compared == 0) continue;
    tc_warn(warnings, "%s: %" PRId64 " line%s not compared because some rank "
            "has no line for the same step and tensor (first: line %ld, step %"
            PRId64 ", tensor '%s')", rf->path, rf->not_compared,
            rf->not_compared > 1 ? "s" : "", rf->first_not_compared.line,
            rf->first_not_compared.r.step, rf->first_not_compared.r.tensor);
  }
}

/* res->program: the lowest rank's program among the ranks that name one;
 * a warning names the first rank that names another. */
void tc_pick_program(const vqc_trace_set *s, vqc_trace_compare_result *res,
                     json_t *warnings) {
  int from = -1;
  for (int r = 0; r < s->nranks; r++) {
    const rank_file *rf = &s->ranks[r];
    if (!rf->present || rf->program[0] == '\0') continue;
    if (from < 0) {
      from = r;
      memcpy(res->program, rf->program, sizeof res->program);
    } else if (strcmp(rf->program, res->program) != 0) {
      const rank_file *kept = &s->ranks[from];
      tc_warn(warnings, "%s:%ld: field 'program' is '%.200s' but %s:%ld names "
              "'%.200s': were these traces written by different programs? "
              "The reports name rank %d's", rf->path, rf->program_line,
              rf->program, kept->path, kept->program_line, kept->program, from);
      return;
    }
  }
}

/* res->rank_last_step: how far each rank's trace got (-1: no step). */
vqc_status tc_fill_last_steps(const vqc_trace_set *s,
                              vqc_trace_compare_result *res) {
  if (s->nranks == 0) return VQC_OK;
  res->rank_last_step = malloc((size_t)s->nranks * sizeof *res->rank_last_step);
  if (res->rank_last_step == NULL)
    return vqc_error(VQC_ENOMEM, "trace compare: no memory for %d ranks",
                     s->nranks);
  res->nranks = s->nranks;
  for (int r = 0; r < s->nranks; r++) {
    const int64_t x = reach_of(&s->ranks[r]);
    res->rank_last_step[r] = x >= 0 ? x : -1;
  }
  return VQC_OK;
}

/* With require_comparison: traces whose ranks all reach the same step but
 * share no (step, tensor) compared nothing, and that is an error, not a
 * clean result. */
vqc_status tc_check_something_compared(const vqc_trace_set *s,
                                       const vqc_trace_compare_result *res) {
  if (!s->require_comparison || res->digests_compared > 0) return VQC_OK;
  for (int r = 0; r < s->nranks; r++) {
    const rank_file *rf = &s->ranks[r];
    if (!rf->present || rf->not_compared == 0) continue;
    return vqc_error(VQC_EINVAL, "%s: nothing was compared: no (step, "
                     "tensor) is in the trace of every rank (e.g. %s:%ld, "
                     "step %" PRId64 ", tensor '%s', is missing from some "
                     "rank's trace): do the ranks write the same tensor "
                     "names and steps?", s->dir, rf->path,
                     rf->first_not_compared.line,
                     rf->first_not_compared.r.step,
                     rf->first_not_compared.r.tensor);
  }
  if (res->no_replica > 0)
    return vqc_error(VQC_EINVAL, "%s: nothing was compared: every tensor's "
                     "replica group (its lines' \"group\") is one rank, so "
                     "no two ranks must hold equal bits (a fully sharded "
                     "job with no replica has nothing for compare to check)",
                     s->dir);
  return vqc_error(VQC_EINVAL, "%s: nothing was compared (no (step, tensor) "
                   "is in the trace of every rank)", s->dir);
}
