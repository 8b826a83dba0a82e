/* findings_record.c: each finding on record as it is made (checker.h
 * vqc_check_report), and read back from the live records
 * (findings_record.h). */
#include "findings_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker.h"
#include "ledger_analysis.h"
#include "rundir.h"
#include "utf8.h"
#include "jsonl.h" /* bounded lines */

vqc_status vqc_check_report(const vqc_check_ctx *ctx, int at,
                            const vqc_finding *x) {
  /* On record first: the list takes x->detail. */
  vqc_live_finding(ctx->live, x);
  if (at < 0) return vqc_findings_add(ctx->findings, x);
  return vqc_findings_insert(ctx->findings, at, x);
}

/* ---- reading back */

/* What reading one record works on. */
typedef struct record_reading {
  vqc_findings *all;
  int *nlines;
} record_reading;

/* One line of a record (jsonl.h): a finding line into rd->all. */
static vqc_status finding_line(const vqc_jsonl_line *l, void *user) {
  record_reading *rd = user;
  const char *ev = json_string_value(json_object_get(l->json, "event"));
  if (!ev || strcmp(ev, "finding") != 0)
    return VQC_OK; /* a collective, another event, or not JSON */
  vqc_finding x;
  vqc_status s = vqc_finding_from_json(json_object_get(l->json, "finding"),
                                       &x);
  if (s != VQC_OK) {
    char why[1024]; /* vqc_error overwrites the message it would quote */
    snprintf(why, sizeof why, "%s", vqc_last_error());
    return vqc_error(VQC_EPARSE, "%s:%ld: a finding line: %s", l->path,
                     l->lineno, why);
  }
  VQC_TRY(vqc_findings_add(rd->all, &x));
  if (rd->nlines) (*rd->nlines)++;
  return VQC_OK;
}

/* Appends the finding lines of one record to all, in order. */
static vqc_status read_record(const char *path, vqc_findings *all,
                              int *nlines) {
  record_reading rd = {all, nlines};
  /* Only the finding lines are parsed ({"event":"finding"}, or Python's
   * {"event": "finding"}): a long run's record holds millions of ledger
   * lines, which a parse of each would spend seconds on. */
  const vqc_jsonl_opts opts = {VQC_JSONL_SKIP_BAD, JSON_REJECT_DUPLICATES,
                               "\"finding\"", NULL};
  return vqc_jsonl_read(path, &opts, finding_line, &rd, NULL);
}

/* Stable order by step (insertion sort: records hold a handful). */
static void sort_by_step(vqc_findings *all) {
  for (int i = 1; i < all->count; i++) {
    vqc_finding x = all->items[i];
    int k = i;
    while (k > 0 && all->items[k - 1].step > x.step) {
      all->items[k] = all->items[k - 1];
      k--;
    }
    all->items[k] = x;
  }
}

/* lost_inplace.c's rule: one lost_inplace finding per call site, the
 * first (earliest) one keeping its step, message and detail, with every
 * later one's ranks, when they tell one story (vqc_finding_same_story:
 * an MPI program's two different mistakes at one site stay two). In
 * place; the dropped ones' details freed. */
static void merge_lost_by_site(vqc_findings *all) {
  int kept = 0;
  for (int i = 0; i < all->count; i++) {
    vqc_finding *x = &all->items[i];
    int into = -1;
    for (int k = 0; k < kept && into < 0 && x->kind ==
                                   VQC_FINDING_LOST_INPLACE; k++)
      if (all->items[k].kind == VQC_FINDING_LOST_INPLACE &&
          strcmp(all->items[k].site, x->site) == 0 &&
          vqc_finding_same_story(&all->items[k], x))
        into = k;
    if (into < 0) {
      if (kept != i) all->items[kept] = *x;
      kept++;
      continue;
    }
    for (int r = 0; r < x->nranks; r++)
      vqc_finding_add_rank(&all->items[into], x->ranks[r]);
    json_decref(x->detail);
  }
  all->count = kept;
}

vqc_status vqc_recorded_findings_read(const char *dir, vqc_findings *out,
                                      int *nlines) {
  if (nlines) *nlines = 0;
  int *ranks = NULL, n = 0;
  VQC_TRY(vqc_run_dir_rank_list(dir, ".live.jsonl", &ranks, &n));
  vqc_findings all;
  vqc_findings_init(&all);
  vqc_status s = VQC_OK;
  for (int i = 0; i < n && s == VQC_OK; i++) {
    char path[4200];
    s = vqc_live_path(dir, ranks[i], path, sizeof path);
    if (s == VQC_OK) s = read_record(path, &all, nlines);
  }
  free(ranks);
  if (s == VQC_OK) {
    sort_by_step(&all);
    vqc_findings_merge_duplicates(&all);
    merge_lost_by_site(&all);
    for (int i = 0; i < all.count && s == VQC_OK; i++) {
      s = vqc_findings_add(out, &all.items[i]);
      if (s == VQC_OK) all.items[i].detail = NULL; /* out owns it now */
    }
  }
  vqc_findings_free(&all);
  return s;
}
