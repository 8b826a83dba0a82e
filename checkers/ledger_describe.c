/* ledger_describe.c: how the analysis tells a record and where a rank is,
 * for the findings' messages and details (split out of ledger_analysis.c,
 * see ledger_analysis_internal.h). */
#include "ledger_analysis_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"

/* ---- the analysis */

/* Index of seq in d's records, or -1. */
long find_seq(const rank_dump *d, uint64_t seq) {
  size_t lo = 0, hi = d->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (d->recs[mid].seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo < d->n && d->recs[lo].seq == seq ? (long)lo : -1;
}

vqc_status add_finding(vqc_findings *out, vqc_finding *f, json_t *detail,
                       int *nadded) {
  if (detail) {
    json_decref(f->detail);
    f->detail = detail;
  }
  const vqc_status s = vqc_findings_add(out, f);
  if (s != VQC_OK) {
    json_decref(f->detail);
    return s;
  }
  if (nadded) (*nadded)++;
  return VQC_OK;
}

/* "0, 2, 3", "0-1021, 1023": folded ranges (findings.h), so that a
 * message about 1024 ranks stays a sentence. */
void rank_list(const int *ranks, int n, char *buf, size_t len) {
  vqc_rank_ranges_text(ranks, n, buf, len);
}

void appendf(char *buf, size_t *k, size_t n, const char *fmt, ...) {
  if (*k >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *k, n - *k, fmt, ap);
  va_end(ap);
  if (w > 0) *k = *k + (size_t)w < n ? *k + (size_t)w : n - 1;
}

/* vqc_coll_describe's text, for any record (torch's collectives too):
 * "all_reduce(float32, count 16)", "reduce_scatter(bfloat16, count 8, avg)",
 * "broadcast(float32, count 4, root 0)", "barrier()". */
void describe_rec(const drec *r, char *buf, size_t n) {
  describe_rec_redop(r, false, buf, n);
}

void describe_rec_redop(const drec *r, bool every_redop, char *buf,
                        size_t n) {
  const record_op *kind = &record_ops[r->op];
  size_t k = 0;
  appendf(buf, &k, n, "%s(", kind->name);
  /* a barrier, and MPI's calls that carry no data (ibarrier, comm_split,
   * win_fence, ...): "()" */
  const bool no_data = r->dtype == 0 && r->count == 0;
  if (r->op == VQC_COLL_BARRIER || (no_data && !kind->root && !kind->redop)) {
    appendf(buf, &k, n, ")");
    return;
  }
  /* No data told (an MPI intercommunicator's collective: only its op and
   * reduction are compared): "all_reduce(sum)", "broadcast()". */
  if (no_data) {
    if (kind->redop && r->redop > 0)
      appendf(buf, &k, n, "%s", record_redops[r->redop]);
    appendf(buf, &k, n, ")");
    return;
  }
  if (r->dtype != 0) appendf(buf, &k, n, "%s, ", dtype_text(r->dtype));
  appendf(buf, &k, n, "count %" PRIu64, r->count);
  if (kind->root) appendf(buf, &k, n, ", root %d", r->root);
  if (kind->redop && (r->redop > 0 || (every_redop && r->redop == 0)))
    appendf(buf, &k, n, ", %s", record_redops[r->redop]);
  appendf(buf, &k, n, ")");
}

/* Whether rank r takes part in this pass: every rank in the world's, the
 * members in a process group's. */
bool in_pass(const analysis *a, int r) {
  return !a->member || a->member[r];
}

json_t *record_detail(const analysis *a, const drec *r) {
  char desc[128], site[512];
  describe_rec(r, desc, sizeof desc);
  vqc_site_text(site_of(&a->sites, r->site), site, sizeof site);
  json_t *j = json_object();
  json_object_set_new(j, "seq", json_integer((json_int_t)r->seq));
  json_object_set_new(j, "op", json_string(record_ops[r->op].name));
  json_object_set_new(j, "dtype", json_string(dtype_text(r->dtype)));
  json_object_set_new(j, "count", json_integer((json_int_t)r->count));
  if (record_ops[r->op].root)
    json_object_set_new(j, "root", json_integer(r->root));
  if (record_ops[r->op].redop)
    json_object_set_new(j, "redop", json_string(record_redops[r->redop]));
  json_object_set_new(j, "site", json_string(site));
  json_object_set_new(j, "state", json_string(vqc_record_state_name(r->state)));
  json_object_set_new(j, "status", json_string(r->status));
  json_object_set_new(j, "describe", json_string(desc));
  return j;
}

/* Whether rank d reached its end cleanly: a status file, or a live record
 * whose end line, says VQC_OK. */
bool ended_cleanly(const rank_dump *d) {
  if (d->has_status) return strcmp(d->status, "VQC_OK") == 0;
  return d->live.finished && strcmp(d->live.status, "VQC_OK") == 0;
}

/* A process's last stderr lines (a "lost" line's last_words) for a message:
 * at most the last 3 lines, joined by " / ", in buf (room bytes with its
 * NUL). When they do not fit, their end (what a process says last tells
 * most), from a character's start, after "... ". "" when there are none. */
void last_words_text(const char *w, char *buf, size_t room) {
  buf[0] = '\0';
  if (room < 16) return;
  size_t end = strlen(w);
  while (end > 0 && (w[end - 1] == '\n' || w[end - 1] == '\r' ||
                     w[end - 1] == ' '))
    end--;
  size_t start = end;
  int lines = 0;
  while (start > 0 && !(w[start - 1] == '\n' && ++lines == 3)) start--;
  /* Joined, from the end backwards: a newline becomes " / ". */
  char joined[3 * VQC_LIVE_LAST_WORDS];
  size_t m = sizeof joined - 1, stop = start;
  joined[m] = '\0';
  for (size_t i = end; i > start && m >= 3; i--) {
    const char c = w[i - 1];
    if (c == '\r') continue;
    if (c == '\n') {
      m -= 3;
      memcpy(joined + m, " / ", 3);
    } else {
      joined[--m] = c;
    }
    stop = i - 1;
  }
  const char *from = joined + m;
  const size_t len = sizeof joined - 1 - m;
  if (stop == start && len + 1 <= room) {
    memcpy(buf, from, len + 1);
    return;
  }
  static const char cut[] = "... ";
  if (len > room - sizeof cut) from += len - (room - sizeof cut);
  while (*from && ((unsigned char)*from & 0xC0) == 0x80) from++;
  snprintf(buf, room, "%s%s", cut, from);
}

/* Where rank r is instead of collective `seq`: one phrase for the detail and
 * the message. */
void where_of(const analysis *a, int r, uint64_t seq, char *buf,
                     size_t n) {
  const rank_dump *d = &a->dumps[r];
  char desc[128], site[512];
  size_t k = 0;
  buf[0] = '\0';
  if (!d->present) {
    appendf(buf, &k, n, "no ledger dump (rank failed)");
    return;
  }
  long i = find_seq(d, seq);
  if (i >= 0) {
    const drec *x = &d->recs[i];
    describe_rec(x, desc, sizeof desc);
    vqc_site_text(site_of(&a->sites, x->site), site, sizeof site);
    if (x->state == VQC_REC_DONE)
      appendf(buf, &k, n, "called %s at %s instead (it completed)", desc,
              site);
    else if (x->state == VQC_REC_ENTERED)
      appendf(buf, &k, n, "waiting in %s at %s", desc, site);
    else
      appendf(buf, &k, n, "waiting in %s at %s (ended %s)", desc, site,
              x->status);
    return;
  }
  /* No record at seq: where it stopped. */
  const drec *last = NULL;
  for (size_t j = d->n; j > 0 && !last; j--)
    if (d->recs[j - 1].seq < seq && d->recs[j - 1].state == VQC_REC_DONE)
      last = &d->recs[j - 1];
  if (last) {
    describe_rec(last, desc, sizeof desc);
    vqc_site_text(site_of(&a->sites, last->site), site, sizeof site);
    appendf(buf, &k, n, "last completed seq %" PRIu64 " %s at %s", last->seq,
            desc, site);
  } else if (d->n > 0) {
    appendf(buf, &k, n, "never completed a collective");
  } else {
    appendf(buf, &k, n, "no collective of it was recorded");
  }
  char sig[96] = "";
  if (d->live.signal > 0) vqc_signal_text(d->live.signal, sig, sizeof sig);
  if (d->has_status && strcmp(d->status, "VQC_OK") == 0)
    appendf(buf, &k, n, "; it left its training loop (VQC_OK)");
  else if (d->has_status)
    appendf(buf, &k, n, "; its training ended with %s", d->status);
  else if (d->failed)
    appendf(buf, &k, n, "; its record stops there (%s)",
            d->live.lost && d->live.why[0] ? d->live.why : "no end record");
  else if (ended_cleanly(d) && d->live.mpi) /* an MPI program's */
    appendf(buf, &k, n, "; it reached MPI_Finalize (VQC_OK)");
  else if (ended_cleanly(d)) /* a live record only (the Python bridge) */
    appendf(buf, &k, n, "; it left its training loop (VQC_OK) after %" PRId64
            " step%s", d->live.steps_done,
            d->live.steps_done == 1 ? "" : "s");
  else if (d->live.finished)
    appendf(buf, &k, n, "; its training ended with %s", d->live.status);
  else if (d->live.signal > 0)
    appendf(buf, &k, n, "; then terminated by %s", sig);
  else if (d->live.killed)
    appendf(buf, &k, n, "; then killed (%s)", d->live.why);
}

/* The history before seq (fingerprints, oldest first) from rank r's dump,
 * at most `max` entries; *n gets how many. Caller frees. */
vqc_coll_fingerprint *history_of(const rank_dump *d, uint64_t seq,
                                        size_t max, size_t *n) {
  *n = 0;
  size_t end = 0;
  while (end < d->n && d->recs[end].seq < seq) end++;
  size_t start = end > max ? end - max : 0;
  vqc_coll_fingerprint *h = malloc((end - start + 1) * sizeof *h);
  if (!h) return NULL;
  for (size_t i = start; i < end; i++) h[(*n)++] = d->recs[i].fp;
  return h;
}
