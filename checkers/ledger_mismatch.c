/* ledger_mismatch.c: the collective_mismatch finding: one call site called
 * with other arguments on different ranks (ledger_analysis.h; split out of
 * ledger_analysis.c, see ledger_analysis_internal.h). */
#include "ledger_analysis_internal.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"

/* ---- one call site, other arguments: collective_mismatch */

/* How a rank's call of the mismatched collective ended. */
typedef enum {
  END_RETURNED,   /* it returned (the backend paired the calls) */
  END_FAILED,     /* it returned an error (its status) */
  END_DIED,       /* the rank's record stops there: its process died */
  END_DIED_AFTER, /* it returned, then died with nothing else recorded */
  END_WAITING,    /* still in it when the record was read */
  END_TERMINATED  /* in it when others ended the rank (signal, killed) */
} call_end;

static const char *const call_end_names[] = {
    "returned", "failed", "died", "died after it returned", "waiting",
    "terminated"};

/* How rank r's call at seq ended: the code, and for END_FAILED the status,
 * for END_DIED why (what killed it, when its supervisor saw it). */
static call_end call_ending(const analysis *a, int r, uint64_t seq,
                            char *why, size_t n) {
  const rank_dump *d = &a->dumps[r];
  const long i = find_seq(d, seq);
  const drec *x = &d->recs[i];
  why[0] = '\0';
  /* Its record stops at this call and it reached no end: it died there. */
  if (d->failed && i == (long)d->n - 1) {
    if (d->live.end_signal > 0) {
      char sig[96];
      vqc_signal_text(d->live.end_signal, sig, sizeof sig);
      /* An abort inside a collective is the backend's (gloo's enforce,
       * NCCL's, c10's): it checked the sizes and gave up. */
      snprintf(why, n, "killed by %s%s", sig,
               d->live.end_signal == SIGABRT && x->state != VQC_REC_DONE
                   ? ": the backend aborted on the mismatch"
                   : "");
    } else if (d->live.lost && d->live.why[0]) {
      snprintf(why, n, "%s", d->live.why);
    } else {
      snprintf(why, n, "its record stops there, with no end record");
    }
    utf8_cut(why); /* the copy of a "why" may be cut inside a character */
    return x->state == VQC_REC_DONE ? END_DIED_AFTER : END_DIED;
  }
  if (x->state == VQC_REC_DONE) return END_RETURNED;
  if (x->state == VQC_REC_FAILED) {
    snprintf(why, n, "%s", x->status[0] ? x->status : "an error");
    return END_FAILED;
  }
  return d->terminated ? END_TERMINATED : END_WAITING;
}

/* The phrase for ranks `rl` (n of them) whose calls ended as `e`. */
static void ending_text(call_end e, const char *rl, int n, const char *why,
                        char *buf, size_t cap) {
  const bool one = n == 1;
  switch (e) {
    case END_RETURNED:
      snprintf(buf, cap, "rank%s %s returned from it", one ? "" : "s", rl);
      break;
    case END_FAILED:
      if (one)
        snprintf(buf, cap, "rank %s's call failed (%s)", rl, why);
      else
        snprintf(buf, cap, "the calls of ranks %s failed (%s)", rl, why);
      break;
    case END_DIED:
    case END_DIED_AFTER:
      snprintf(buf, cap, "rank%s %s died %s (%s)", one ? "" : "s", rl,
               e == END_DIED ? "in it" : "after it returned", why);
      break;
    case END_WAITING:
      snprintf(buf, cap, "rank%s %s wait%s in it", one ? "" : "s", rl,
               one ? "s" : "");
      break;
    case END_TERMINATED:
      snprintf(buf, cap, "rank%s %s %s terminated while waiting in it",
               one ? "" : "s", rl, one ? "was" : "were");
      break;
  }
}

/* Whether every group at seq is the same collective at the same call site
 * (only count, dtype, root or reduction differ): the same line called with
 * other arguments, not a skipped or extra call. */
bool same_call(const vqc_coll_fingerprint *gfp, int ngroups) {
  for (int g = 1; g < ngroups; g++)
    if (gfp[g].op != gfp[0].op || gfp[g].site_hash != gfp[0].site_hash)
      return false;
  return ngroups > 1;
}

/* The collective_mismatch of one call site called with other arguments at
 * seq (ledger_analysis.h). group[r]: rank r's group at seq (-1: no record
 * there); gfp, gn, grec: each group's fingerprint, size and first record;
 * expected: vqc_pick_expected's group. */
vqc_status report_mismatch(const analysis *a, uint64_t seq,
                                  int64_t step, const int *group,
                                  const vqc_coll_fingerprint *gfp,
                                  const int *gn, const drec *const *grec,
                                  int ngroups, int expected,
                                  vqc_findings *out, int *nadded) {
  const int size = a->size;
  int *ranks = malloc((size_t)size * sizeof *ranks);
  int *ends = malloc((size_t)size * sizeof *ends);
  char (*whys)[256] = malloc((size_t)size * sizeof *whys);
  if (!ranks || !ends || !whys) {
    free(ranks);
    free(ends);
    free(whys);
    return vqc_error(VQC_ENOMEM, "no memory for the analysis of %d ranks",
                     size);
  }

  /* What differs: the fields the fingerprint compares, site and op aside. */
  bool dcount = false, ddtype = false, droot = false, dredop = false;
  for (int g = 1; g < ngroups; g++) {
    dcount |= gfp[g].count != gfp[0].count;
    ddtype |= gfp[g].dtype != gfp[0].dtype;
    droot |= gfp[g].root != gfp[0].root;
    dredop |= gfp[g].redop != gfp[0].redop;
  }
  const char *fields[4];
  int nfields = 0;
  if (dcount) fields[nfields++] = "count";
  if (ddtype) fields[nfields++] = "dtype";
  if (droot) fields[nfields++] = "root";
  if (dredop) fields[nfields++] = "reduction";
  char differs[64] = "";
  size_t kd = 0;
  for (int i = 0; i < nfields; i++)
    appendf(differs, &kd, sizeof differs, "%s%s",
            i == 0 ? "" : i == nfields - 1 ? " and " : ", ", fields[i]);

  const drec *x = grec[expected];
  const vqc_site site = site_of(&a->sites, x->site);
  char stext[512];
  vqc_site_text(site, stext, sizeof stext);

  /* The ranks named: outside a strict majority, else every caller (1
   * against 1 says nothing about which side is wrong). */
  int ncalled = 0;
  for (int g = 0; g < ngroups; g++) ncalled += gn[g];
  const bool majority = 2 * gn[expected] > ncalled;

  vqc_finding f;
  vqc_finding_init(&f, VQC_FINDING_COLLECTIVE_MISMATCH, step, "%s", "");
  vqc_finding_set_site(&f, site);
  for (int r = 0; r < size; r++)
    if (group[r] >= 0 && !(majority && group[r] == expected))
      vqc_finding_add_rank(&f, r);

  char *msg = f.message;
  const size_t cap = sizeof f.message;
  size_t k = 0;
  appendf(msg, &k, cap, "collective #%" PRIu64 " %s at %s was called with a "
          "different %s on different ranks: ", seq, record_ops[x->op].name,
          stext, differs);
  /* Each group's call, the expected one first. */
  for (int i = 0, shown = 0; i < ngroups; i++) {
    const int g = i == 0 ? expected : i <= expected ? i - 1 : i;
    int n = 0;
    for (int r = 0; r < size; r++)
      if (group[r] == g) ranks[n++] = r;
    if (shown == WHERE_SHOWN) {
      appendf(msg, &k, cap, ", %d more calls", ngroups - shown);
      break;
    }
    char rl[256], desc[128];
    rank_list(ranks, n, rl, sizeof rl);
    describe_rec_redop(grec[g], dredop, desc, sizeof desc);
    appendf(msg, &k, cap, "%srank%s %s %s", shown ? ", " : "",
            n == 1 ? "" : "s", rl, desc);
    shown++;
  }

  /* How each call ended, ranks with the same ending told together. */
  bool all_returned = true;
  for (int r = 0; r < size; r++) {
    if (group[r] < 0) continue;
    ends[r] = (int)call_ending(a, r, seq, whys[r], sizeof whys[r]);
    all_returned &= ends[r] == END_RETURNED;
  }
  if (all_returned) {
    appendf(msg, &k, cap, "; every rank returned from it, so the backend "
            "paired calls that do not match and their results are not what "
            "the program asked for");
  } else {
    bool *told = calloc((size_t)size, sizeof *told);
    for (int r = 0, first = 1; told && r < size; r++) {
      if (group[r] < 0 || told[r]) continue;
      int n = 0;
      for (int q = r; q < size; q++)
        if (group[q] >= 0 && !told[q] && ends[q] == ends[r] &&
            strcmp(whys[q], whys[r]) == 0) {
          ranks[n++] = q;
          told[q] = true;
        }
      char rl[256], text[640];
      rank_list(ranks, n, rl, sizeof rl);
      ending_text((call_end)ends[r], rl, n, whys[r], text, sizeof text);
      appendf(msg, &k, cap, "%s%s", first ? "; " : ", ", text);
      first = 0;
    }
    free(told);
  }
  appendf(msg, &k, cap, "; one call site must pass the same %s on every "
          "rank", differs);
  utf8_cut(msg); /* cut to its size, maybe inside a character */

  /* The detail: the collective, what differs, every rank's call. */
  json_t *det = f.detail;
  json_object_set_new(det, "seq", json_integer((json_int_t)seq));
  json_object_set_new(det, "op", json_string(record_ops[x->op].name));
  json_object_set_new(det, "site", json_string(stext));
  json_object_set_new(det, "misaligned", json_true());
  json_t *jd = json_array();
  for (int i = 0; i < nfields; i++)
    json_array_append_new(jd, json_string(fields[i]));
  json_object_set_new(det, "differs", jd);
  json_t *calls = json_array(), *absent = json_array();
  for (int r = 0; r < size; r++) {
    if (!in_pass(a, r)) continue;
    const rank_dump *d = &a->dumps[r];
    json_t *o = json_object();
    json_object_set_new(o, "rank", json_integer(r));
    if (group[r] < 0) {
      char where[768];
      where_of(a, r, seq, where, sizeof where);
      json_object_set_new(o, "where", json_string(where));
      json_array_append_new(absent, o);
      continue;
    }
    json_object_set_new(o, "record",
                        record_detail(a, &d->recs[find_seq(d, seq)]));
    json_object_set_new(o, "ended", json_string(call_end_names[ends[r]]));
    if (whys[r][0]) json_object_set_new(o, "why", json_string(whys[r]));
    if (d->live.last_words[0])
      json_object_set_new(o, "last_words", json_string(d->live.last_words));
    json_array_append_new(calls, o);
  }
  json_object_set_new(det, "calls", calls);
  json_object_set_new(det, "absent", absent);

  free(ranks);
  free(ends);
  free(whys);
  return add_finding(out, &f, NULL, nadded);
}
