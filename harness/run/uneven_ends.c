/* uneven_ends.c: ranks that end cleanly after different numbers of steps
 * (uneven_ends.h says what is decided and why). */
#include "uneven_ends.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge_findings.h" /* vqc_bridge_is_exception */
#include "ledger_analysis.h" /* vqc_live_scan */

/* Whether rank r's live record ends with a clean "finished" line. */
static bool ended_cleanly(const vqc_live_info *info) {
  return info->exists && info->finished && !info->killed && !info->lost &&
         info->signal == 0 && strcmp(info->status, "VQC_OK") == 0;
}

/* The traces' "stop early" rank_failure (trace_compare_findings.c), or -1. */
static int stopped_early_finding(const vqc_findings *f) {
  for (int i = 0; i < f->count; i++) {
    const vqc_finding *x = &f->items[i];
    const char *src = json_string_value(json_object_get(x->detail, "source"));
    if (x->kind == VQC_FINDING_RANK_FAILURE && src &&
        strcmp(src, "traces") == 0 &&
        json_is_array(json_object_get(x->detail, "stopped_early")))
      return i;
  }
  return -1;
}

/* Removes item i of f (its detail freed). */
static void drop_finding(vqc_findings *f, int i) {
  json_decref(f->items[i].detail);
  memmove(&f->items[i], &f->items[i + 1],
          (size_t)(f->count - i - 1) * sizeof f->items[0]);
  f->count--;
}

/* Every rank ended cleanly: the stopped-early finding goes, a warning
 * tells the uneven ends ("rank 0 after step 4, rank 1 after step 6"). */
static void drop_uneven(vqc_findings *f, int i, const vqc_live_info *infos,
                        int ranks, json_t *warnings) {
  char list[600];
  size_t k = 0;
  int64_t least = INT64_MAX, most = -1;
  list[0] = '\0';
  for (int r = 0; r < ranks; r++) {
    const int64_t last = infos[r].steps_done - 1;
    if (last < least) least = last;
    if (last > most) most = last;
    if (r < 8 && k < sizeof list) {
      const char *sep = r ? ", " : "";
      int w = last >= 0
                  ? snprintf(list + k, sizeof list - k,
                             "%srank %d after step %" PRId64, sep, r, last)
                  : snprintf(list + k, sizeof list - k,
                             "%srank %d before its first step", sep, r);
      if (w > 0) k += (size_t)w;
    } else if (r == 8 && k < sizeof list) {
      k += (size_t)snprintf(list + k, sizeof list - k, ", ...");
    }
  }
  char msg[1024];
  snprintf(msg, sizeof msg, "uneven ends: every rank ended cleanly, after "
           "its own number of steps (%s): uneven inputs, as under torch's "
           "Join context, are legal; what of steps %" PRId64 "-%" PRId64
           " not every rank trained was not compared",
           list, least + 1, most);
  json_array_append_new(warnings, json_string(msg));
  drop_finding(f, i);
}

/* An exception on a rank that had done `done` steps, while ranks that had
 * already ended cleanly after no more steps are in infos: the finding says
 * so first, and lists them in its detail as "ended_before". */
static void name_ended_before(vqc_finding *x, const vqc_live_info *infos,
                              int ranks) {
  const int failed = x->nranks > 0 ? x->ranks[0] : -1;
  if (failed < 0 || failed >= ranks || ended_cleanly(&infos[failed])) return;
  const int64_t done = infos[failed].steps_done;
  json_t *before = json_array();
  char list[200];
  size_t k = 0;
  int n = 0;
  int64_t their = 0;
  list[0] = '\0';
  for (int r = 0; r < ranks && before; r++) {
    if (r == failed || !ended_cleanly(&infos[r]) ||
        infos[r].steps_done > done)
      continue;
    json_array_append_new(before, json_integer(r));
    if (infos[r].steps_done > their) their = infos[r].steps_done;
    if (n < 8 && k < sizeof list)
      k += (size_t)snprintf(list + k, sizeof list - k, "%s%d", n ? ", " : "",
                            r);
    n++;
  }
  if (!before || n == 0) {
    json_decref(before);
    return;
  }
  json_object_set_new(x->detail, "ended_before", before);
  char msg[sizeof x->message];
  const int w = snprintf(msg, sizeof msg, "rank%s %s ended cleanly after %"
                         PRId64 " step%s while rank %d went on (in step %"
                         PRId64 "): a rank that leaves the job early "
                         "strands the others in their next collective; "
                         "then %s",
                         n == 1 ? "" : "s", list, their,
                         their == 1 ? "" : "s", failed, done, x->message);
  if (w >= (int)sizeof msg) x->truncated = 1;
  memcpy(x->message, msg, sizeof msg);
}

/* (uneven_ends.h) */
void vqc_uneven_ends(const char *dir, int ranks, vqc_findings *fresh,
                     json_t *warnings) {
  if (ranks <= 0) return;
  vqc_live_info *infos = calloc((size_t)ranks, sizeof *infos);
  if (!infos) return; /* no memory: the findings stay as they are */
  bool all_clean = true;
  for (int r = 0; r < ranks; r++) {
    if (vqc_live_scan(dir, r, &infos[r]) != VQC_OK) {
      free(infos);
      return;
    }
    all_clean = all_clean && ended_cleanly(&infos[r]);
  }
  const int early = stopped_early_finding(fresh);
  if (early >= 0 && all_clean)
    drop_uneven(fresh, early, infos, ranks, warnings);
  for (int i = 0; i < fresh->count && !all_clean; i++)
    if (vqc_bridge_is_exception(&fresh->items[i])) {
      name_ended_before(&fresh->items[i], infos, ranks);
      break; /* bridge_findings.c folded them into the first */
    }
  free(infos);
}
