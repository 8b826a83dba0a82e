/* not_digested.c: the tensors the ranks could not digest, from their live
 * records (not_digested.h). One pass per record; a line is parsed only
 * when it mentions the event, so the ledger lines that fill a record cost
 * a substring search, not a JSON parse. */
#include "not_digested.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_analysis.h" /* vqc_live_path */
#include "rundir.h"          /* vqc_run_dir_rank_list */
#include "jsonl.h"           /* bounded lines */
#include "utf8.h"            /* vqc_json_text */

/* One not_digested event j of rank `rank` (line lineno of path) into nd;
 * the first line skipped is named into first_skip (first_cap bytes). */
static vqc_status take_event(vqc_not_digested *nd, const json_t *j, int rank,
                             const char *path, long lineno, char *first_skip,
                             size_t first_cap) {
  const json_t *t = json_object_get(j, "tensor");
  if (!json_is_string(t) || json_string_length(t) == 0) {
    if (nd->skipped++ == 0) /* named once, at the end (vqc_not_digested_read) */
      snprintf(first_skip, first_cap, "%s:%ld", path, lineno);
    return VQC_OK;
  }
  nd->count++;
  /* Only an explicit false says the tensor held nothing to compare: a
   * line without the flag (an older bridge's) or with another value is
   * taken as contents that went unchecked, never as clean. */
  const bool unchecked = !json_is_false(json_object_get(j, "unchecked"));
  if (unchecked) nd->unchecked++;
  const json_t *w = json_object_get(j, "why");
  const json_t *s = json_object_get(j, "step");
  bool fresh;
  return vqc_not_digested_list(nd, rank, json_string_value(t),
                    json_is_string(w) ? json_string_value(w) : NULL,
                    json_is_integer(s) && json_integer_value(s) >= 0
                        ? (int64_t)json_integer_value(s)
                        : -1,
                    unchecked, &fresh);
}
/* What reading one record works on. */
typedef struct record_reading {
  vqc_not_digested *nd;
  int rank;
  char *first_skip;
  size_t first_cap;
} record_reading;

/* One line of a record that mentions the event (jsonl.h). */
static vqc_status event_line(const vqc_jsonl_line *l, void *user) {
  record_reading *rd = user;
  const char *ev = json_string_value(json_object_get(l->json, "event"));
  if (!ev || strcmp(ev, "not_digested") != 0)
    return VQC_OK; /* another event, a collective, or not JSON */
  return take_event(rd->nd, l->json, rd->rank, l->path, l->lineno,
                    rd->first_skip, rd->first_cap);
}

/* The not_digested events of one record (rank `rank`, at path). */
static vqc_status read_record(vqc_not_digested *nd, const char *path,
                              int rank, char *first_skip, size_t first_cap) {
  record_reading rd = {nd, rank, first_skip, first_cap};
  /* A line is parsed only when it mentions the event: the ledger lines
   * that fill a record cost a substring search, not a parse. */
  const vqc_jsonl_opts opts = {VQC_JSONL_SKIP_BAD, JSON_REJECT_DUPLICATES,
                               "not_digested", NULL};
  vqc_status s = vqc_jsonl_read(path, &opts, event_line, &rd, NULL);
  if (s == VQC_EPARSE) { /* a line over the cap: the rest is not read */
    const char *why = vqc_last_error();
    json_array_append_new(nd->warnings, vqc_json_text(why, strlen(why)));
    vqc_clear_error();
    s = VQC_OK;
  }
  return s;
}

vqc_status vqc_not_digested_read(const char *dir, vqc_not_digested *out) {
  VQC_TRY(vqc_not_digested_init(out));
  int *ranks = NULL, n = 0; /* owned here */
  VQC_TRY(vqc_run_dir_rank_list(dir, ".live.jsonl", &ranks, &n));
  vqc_status s = VQC_OK;
  char first_skip[4300] = ""; /* "path:line" of the first line skipped */
  for (int i = 0; i < n && s == VQC_OK; i++) {
    char path[4200];
    s = vqc_live_path(dir, ranks[i], path, sizeof path);
    if (s == VQC_OK)
      s = read_record(out, path, ranks[i], first_skip, sizeof first_skip);
  }
  free(ranks);
  if (out->skipped > 0) {
    char msg[4600];
    snprintf(msg, sizeof msg, "%s: a not_digested line without a tensor "
             "name (\"tensor\"): skipped (%lld such line%s in all)",
             first_skip, (long long)out->skipped,
             out->skipped == 1 ? "" : "s");
    json_array_append_new(out->warnings, vqc_json_text(msg, strlen(msg)));
  }
  return s;
}

