/* trace_run.c: what the reports say about a comparison of traces
 * (`vqcheck compare`, environment.backend "traces"): the facts of run.json's
 * "compare" section (harness/cli/cmd_compare.c writes it), read and checked
 * once here, and the few phrases report.md, report.html and junit.xml
 * share, so they all say the same. A trace comparison has no scenario,
 * fault, seed or training: the renderers show these facts instead. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "report_internal.h"

/* ---- reading run.json's "compare" section */

/* compare.<key>: an integer >= 0 into *out; -1 when absent or null (an
 * older run.json, or nothing of that kind). */
static vqc_status opt_count(const rep_run *r, const json_t *c,
                            const char *key, long long *out) {
  const json_t *v = json_object_get(c, key);
  *out = -1;
  if (v == NULL || json_is_null(v)) return VQC_OK;
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return vqc_error(VQC_EPARSE, "%s: field 'compare.%s': expected an "
                     "integer >= 0 or null", r->path, key);
  *out = (long long)json_integer_value(v);
  return VQC_OK;
}

/* compare.<key>: a string into *out; NULL when absent or null. */
static vqc_status opt_text(const rep_run *r, const json_t *c, const char *key,
                           const char **out) {
  const json_t *v = json_object_get(c, key);
  *out = NULL;
  if (v == NULL || json_is_null(v)) return VQC_OK;
  if (!json_is_string(v))
    return vqc_error(VQC_EPARSE, "%s: field 'compare.%s': expected a string "
                     "or null", r->path, key);
  *out = json_string_value(v);
  return VQC_OK;
}

/* compare.rank_last_step: an array of integers >= 0 or null, or absent. */
static vqc_status opt_last_steps(const rep_run *r, const json_t *c,
                                 const json_t **out) {
  const json_t *v = json_object_get(c, "rank_last_step");
  *out = NULL;
  if (v == NULL) return VQC_OK;
  if (!json_is_array(v))
    return vqc_error(VQC_EPARSE, "%s: field 'compare.rank_last_step': "
                     "expected an array", r->path);
  size_t i;
  const json_t *x;
  json_array_foreach(v, i, x) {
    if (json_is_null(x) || (json_is_integer(x) && json_integer_value(x) >= 0))
      continue;
    return vqc_error(VQC_EPARSE, "%s: field 'compare.rank_last_step[%zu]': "
                     "expected an integer >= 0 or null", r->path, i);
  }
  *out = v;
  return VQC_OK;
}

vqc_status rep_traces_load(rep_run *r) {
  rep_traces *t = &r->traces;
  memset(t, 0, sizeof *t);
  t->steps = t->steps_compared = t->first_step = t->last_step = -1;
  t->tensors_min = t->tensors_max = t->digests_compared = -1;
  t->trace_dir = "?";
  if (strcmp(r->backend, "traces") != 0) return VQC_OK;
  t->is_traces = true;
  t->trace_dir = rep_str(r->root, "scenario.path", "?");
  const json_t *c = json_object_get(r->root, "compare");
  if (c == NULL) return VQC_OK; /* an older compare: what run.json has */
  if (!json_is_object(c))
    return vqc_error(VQC_EPARSE, "%s: field 'compare': expected an object",
                     r->path);
  const char *dir = NULL;
  VQC_TRY(opt_text(r, c, "trace_dir", &dir));
  if (dir) t->trace_dir = dir;
  VQC_TRY(opt_text(r, c, "program", &t->program));
  if (t->program && t->program[0] == '\0') t->program = NULL;
  VQC_TRY(opt_count(r, c, "steps", &t->steps));
  VQC_TRY(opt_count(r, c, "steps_compared", &t->steps_compared));
  VQC_TRY(opt_count(r, c, "first_step", &t->first_step));
  VQC_TRY(opt_count(r, c, "last_step", &t->last_step));
  VQC_TRY(opt_count(r, c, "tensors_per_step_min", &t->tensors_min));
  VQC_TRY(opt_count(r, c, "tensors_per_step", &t->tensors_max));
  VQC_TRY(opt_count(r, c, "digests_compared", &t->digests_compared));
  return opt_last_steps(r, c, &t->rank_last_step);
}

/* ---- phrases */

void rep_traces_steps_text(const rep_traces *t, char *buf, size_t n) {
  if (t->steps_compared < 0) {
    snprintf(buf, n, "(not recorded)");
    return;
  }
  if (t->steps_compared == 0 || t->first_step < 0 || t->last_step < 0) {
    snprintf(buf, n, "none");
    return;
  }
  int used = snprintf(buf, n, "%lld..%lld (%lld step%s", t->first_step,
                      t->last_step, t->steps_compared,
                      t->steps_compared == 1 ? "" : "s");
  if (used < 0 || (size_t)used >= n) return;
  if (t->steps > t->steps_compared)
    snprintf(buf + used, n - (size_t)used, "; the traces hold %lld)",
             t->steps);
  else
    snprintf(buf + used, n - (size_t)used, ")");
}

void rep_traces_tensors_text(const rep_traces *t, char *buf, size_t n) {
  if (t->tensors_max < 0)
    snprintf(buf, n, "(not recorded)");
  else if (t->tensors_min >= 0 && t->tensors_min != t->tensors_max)
    snprintf(buf, n, "%lld..%lld", t->tensors_min, t->tensors_max);
  else
    snprintf(buf, n, "%lld", t->tensors_max);
}

/* rank_last_step[rank] as a number; -1 for null (no step). */
static long long last_step_of(const json_t *a, size_t rank) {
  const json_t *v = json_array_get(a, rank);
  return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* Appends printf text to buf (used bytes in *used; stops when full). */
static void append(char *buf, size_t n, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t n, size_t *used, const char *fmt, ...) {
  if (*used >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *used, n - *used, fmt, ap);
  va_end(ap);
  if (w > 0) *used += (size_t)w;
  if (*used >= n) *used = n;
}

void rep_traces_last_steps_text(const rep_traces *t, char *buf, size_t n) {
  buf[0] = '\0';
  const size_t nranks = json_array_size(t->rank_last_step);
  long long hi = -2, lo = LLONG_MAX;
  for (size_t r = 0; r < nranks; r++) {
    const long long x = last_step_of(t->rank_last_step, r);
    if (x > hi) hi = x;
    if (x < lo) lo = x;
  }
  if (nranks == 0 || hi == lo) return;
  size_t used = 0;
  long long above = LLONG_MAX; /* the steps listed so far are >= this */
  for (int g = 0; g < 8; g++) {
    long long step = -2; /* the next lower step a rank's trace ends at */
    for (size_t r = 0; r < nranks; r++) {
      const long long x = last_step_of(t->rank_last_step, r);
      if (x < above && x > step) step = x;
    }
    if (step == -2) break;
    above = step;
    if (step >= 0) append(buf, n, &used, "%sstep %lld:", g ? "; " : "", step);
    else append(buf, n, &used, "%sno step:", g ? "; " : "");
    int shown = 0, count = 0;
    for (size_t r = 0; r < nranks; r++)
      count += last_step_of(t->rank_last_step, r) == step;
    for (size_t r = 0; r < nranks; r++) {
      if (last_step_of(t->rank_last_step, r) != step) continue;
      if (shown < 8)
        append(buf, n, &used, "%s %zu", shown ? "," : count > 1 ? " ranks"
                                                                : " rank",
               r);
      shown++;
    }
    if (shown > 8) append(buf, n, &used, " and %d more", shown - 8);
  }
  if (above > lo) append(buf, n, &used, "; ...");
}

int rep_collectives_not_run(const rep_run *r, char *buf, size_t n) {
  static const vqc_finding_kind kinds[] = {VQC_FINDING_DEADLOCK,
                                           VQC_FINDING_COLLECTIVE_MISMATCH};
  const char *name[2], *why[2];
  int count = 0;
  for (int i = 0; i < 2; i++) {
    const char *w = "";
    if (rep_check(r, kinds[i], &w) != REP_CHECK_NOT_RUN) continue;
    name[count] = vqc_finding_kind_name(kinds[i]);
    why[count] = w;
    count++;
  }
  buf[0] = '\0';
  if (count == 2 && strcmp(why[0], why[1]) == 0)
    snprintf(buf, n, "%s, %s: %s", name[0], name[1], why[0]);
  else if (count == 2)
    snprintf(buf, n, "%s: %s; %s: %s", name[0], why[0], name[1], why[1]);
  else if (count == 1)
    snprintf(buf, n, "%s: %s", name[0], why[0]);
  return count;
}
