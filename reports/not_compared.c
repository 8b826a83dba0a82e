/* not_compared.c: what a run could not check, said rather than hidden
 * (issue 24), in the words report.md, report.html and junit.xml share
 * (and, below, the analysis' warnings, listed as they are):
 *
 *   no replica: not comparable: 8 lines, 4 tensors: w (flat:0/2), ...
 *   not digested: emb.weight on ranks 0, 1: a sparse tensor
 *
 * From run.json's "analysis" section (`vqcheck analyze`, `watch`), else its
 * "compare" section (`vqcheck compare`): no_replica (lines),
 * no_replica_tensor_count, no_replica_tensors [{"tensor","shard"}],
 * not_digested [{"rank","tensor","why","step"}], not_digested_count
 * (docs/trace-format.md). Never a finding, never the verdict. These
 * sections are informative, so a member that is absent or mistyped is left
 * out here, never an error. Bounded: at most REP_NC_NAMES names on the
 * no-replica line and REP_NC_LINES not-digested lines, whatever run.json
 * holds; the rest is counted ("and 3 more"). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"
#include "utf8.h"

#define REP_NC_NAMES 20 /* names on the no-replica line */
#define REP_NC_LINES 20 /* not-digested lines (one per tensor and reason) */
/* not_digested entries read: the analysis writes at most 100 (not_digested.h);
 * another writer's longer list is cut here, as grouping is quadratic. */
#define REP_NC_SCAN 1000

/* Appends printf text to buf (used bytes in *used; stops when full). */
static void add(char *buf, size_t n, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t n, size_t *used, const char *fmt, ...) {
  if (*used >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *used, n - *used, fmt, ap);
  va_end(ap);
  if (w > 0) *used += (size_t)w;
  if (*used >= n) *used = n;
}

/* A count member >= 0 of o, or -1. */
static long long count_of(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  return json_is_integer(v) && json_integer_value(v) >= 0
             ? (long long)json_integer_value(v)
             : -1;
}

static const char *text_of(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The section the facts come from: analysis, else compare. */
static const json_t *section(const rep_run *r) {
  const json_t *a = json_object_get(r->root, "analysis");
  if (json_is_object(a)) return a;
  const json_t *c = json_object_get(r->root, "compare");
  return json_is_object(c) ? c : NULL;
}

/* The no-replica line into buf; false (buf "") when there is none. */
static bool no_replica_line(const json_t *sec, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  const long long lines = count_of(sec, "no_replica");
  const json_t *list = json_object_get(sec, "no_replica_tensors");
  if (lines <= 0 && json_array_size(list) == 0) return false;
  long long tensors = count_of(sec, "no_replica_tensor_count");
  if (tensors < (long long)json_array_size(list))
    tensors = (long long)json_array_size(list);
  add(buf, n, &used, "no replica: not comparable: ");
  if (lines >= 0) add(buf, n, &used, "%lld line%s", lines,
                      lines == 1 ? "" : "s");
  if (tensors > 0) /* an older run.json counts lines only */
    add(buf, n, &used, "%s%s%lld tensor%s", lines >= 0 ? ", " : "",
        json_is_true(json_object_get(sec, "no_replica_tensor_count_capped"))
            ? "at least " : "",
        tensors, tensors == 1 ? "" : "s");
  size_t i;
  const json_t *e;
  int shown = 0;
  json_array_foreach(list, i, e) {
    const char *t = text_of(e, "tensor"), *sh = text_of(e, "shard");
    if (!t || shown == REP_NC_NAMES) continue;
    add(buf, n, &used, "%s%s", shown ? ", " : ": ", t);
    if (sh && sh[0]) add(buf, n, &used, " (%s)", sh);
    shown++;
  }
  if (tensors > shown && shown > 0)
    add(buf, n, &used, ", and %lld more", tensors - shown);
  return true;
}

/* Whether entries a and b of the not_digested list name the same tensor
 * for the same reason (one line, their ranks together). */
static bool same_skip(const json_t *a, const json_t *b) {
  const char *ta = text_of(a, "tensor"), *tb = text_of(b, "tensor");
  const char *wa = text_of(a, "why"), *wb = text_of(b, "why");
  return ta && tb && strcmp(ta, tb) == 0 &&
         strcmp(wa ? wa : "", wb ? wb : "") == 0;
}

/* The not-digested lines, appended to lines (strings): one per (tensor,
 * reason), its ranks together, in the order of the list. */
static void not_digested_lines(const json_t *sec, json_t *lines) {
  const json_t *list = json_object_get(sec, "not_digested");
  size_t n = json_array_size(list);
  if (n > REP_NC_SCAN) n = REP_NC_SCAN; /* the grouping is O(n^2) */
  size_t shown = 0, left = 0; /* (tensor, why) groups told, and not */
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_array_get(list, i);
    const char *t = text_of(e, "tensor");
    if (!t) continue;
    bool before = false; /* its group was told at an earlier entry */
    for (size_t k = 0; k < i && !before; k++)
      before = same_skip(json_array_get(list, k), e);
    if (before) continue;
    if (shown == REP_NC_LINES) {
      left++;
      continue;
    }
    int nranks = 0;
    for (size_t k = i; k < n; k++) nranks += same_skip(json_array_get(list, k),
                                                       e);
    char buf[3072];
    size_t used = 0;
    add(buf, sizeof buf, &used, "not digested: %s on rank%s", t,
        nranks > 1 ? "s" : "");
    int listed = 0;
    for (size_t k = i; k < n && listed < 16; k++) {
      const json_t *x = json_array_get(list, k);
      if (!same_skip(x, e)) continue;
      const long long r = count_of(x, "rank");
      if (r >= 0) add(buf, sizeof buf, &used, "%s %lld", listed ? "," : "", r);
      else add(buf, sizeof buf, &used, "%s ?", listed ? "," : "");
      listed++;
    }
    if (nranks > listed)
      add(buf, sizeof buf, &used, " and %d more", nranks - listed);
    const char *why = text_of(e, "why");
    add(buf, sizeof buf, &used, ": %s", why && why[0] ? why
                                                       : "no reason given");
    /* A cut may fall inside a character: utf8.h keeps the text valid. */
    json_array_append_new(lines, vqc_json_text(buf, strlen(buf)));
    shown++;
  }
  const long long count = count_of(sec, "not_digested_count");
  char more[256];
  if (left > 0)
    snprintf(more, sizeof more, "not digested: %zu more tensor%s (run.json "
             "lists them)", left, left == 1 ? "" : "s");
  else if (count > (long long)n && n > 0)
    snprintf(more, sizeof more, "not digested: %lld events in all (run.json "
             "lists %zu)", count, n);
  else
    return;
  json_array_append_new(lines, json_string(more));
}

json_t *rep_not_compared_lines(const rep_run *r) {
  json_t *lines = json_array();
  const json_t *sec = section(r);
  if (lines == NULL || sec == NULL) return lines;
  char buf[8192];
  if (no_replica_line(sec, buf, sizeof buf))
    json_array_append_new(lines, vqc_json_text(buf, strlen(buf)));
  not_digested_lines(sec, lines);
  return lines;
}

/* (report_internal.h) */
json_t *rep_warning_lines(const rep_run *r) {
  json_t *lines = json_array();
  const json_t *sec = section(r);
  const json_t *w = sec ? json_object_get(sec, "warnings") : NULL;
  if (lines == NULL || !json_is_array(w)) return lines;
  size_t shown = 0, skipped = 0;
  for (size_t i = 0; i < json_array_size(w); i++) {
    const char *s = json_string_value(json_array_get(w, i));
    if (!s) continue;
    if (shown == REP_NC_LINES) {
      skipped++;
      continue;
    }
    json_array_append_new(lines, vqc_json_text(s, strlen(s)));
    shown++;
  }
  if (skipped > 0) {
    char more[120];
    snprintf(more, sizeof more, "and %zu more warning%s (run.json's "
             "analysis.warnings)", skipped, skipped == 1 ? "" : "s");
    json_array_append_new(lines, json_string(more));
  }
  return lines;
}
