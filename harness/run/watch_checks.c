/* watch_checks.c: which checks a `vqcheck watch` run made (watch_checks.h
 * has the table this follows). */
#include "watch_checks.h"

#include "findings.h"        /* vqc_finding_kind_name */
#include "ledger_analysis.h" /* vqc_live_scan */
#include "p2p_messages.h"    /* vqc_p2p_messages_recorded */

/* Why a check that needs recorded collectives did not run. */
static const char *const NO_COLLECTIVE_PY =
    "no rank recorded a collective the bridge sees (torch.distributed's "
    "Python calls; those torch issues from C++, such as DDP's gradient "
    "all_reduce, are not recorded)";
static const char *const NO_COLLECTIVE_MPI =
    "no rank recorded a collective";

/* Marks kind k as run (why NULL) or not run, and why. */
static void mark(json_t *checks, json_t *not_run, vqc_finding_kind k,
                 const char *why) {
  const char *kind = vqc_finding_kind_name(k);
  if (why) json_object_set_new(not_run, kind, json_string(why));
  else json_array_append_new(checks, json_string(kind));
}

/* (watch_checks.h) */
void vqc_watch_checks(json_t *doc, const char *dir, int ranks, bool mpi,
                      int64_t digests_compared, const char *unchecked) {
  int recording = 0; /* ranks whose live record holds ledger lines */
  for (int r = 0; r < ranks; r++) {
    vqc_live_info li;
    if (vqc_live_scan(dir, r, &li) == VQC_OK && li.records > 0) recording++;
  }
  json_t *checks = json_array(), *not_run = json_object();
  if (!checks || !not_run) { /* no memory: no claim either way */
    json_decref(checks);
    json_decref(not_run);
    return;
  }
  if (unchecked) {
    for (int k = 0; k < VQC_FINDING_KIND_COUNT; k++)
      mark(checks, not_run, (vqc_finding_kind)k,
           k == VQC_FINDING_RANK_FAILURE ? NULL : unchecked);
    json_object_set_new(doc, "checks", checks);
    json_object_set_new(doc, "checks_not_run", not_run);
    return;
  }
  const char *none = mpi ? NO_COLLECTIVE_MPI : NO_COLLECTIVE_PY;
  mark(checks, not_run, VQC_FINDING_DIVERGENCE,
       mpi ? "an MPI program has no training state to digest: its "
             "collectives and waits are what is checked"
       : digests_compared > 0 ? NULL
                              : "no digests of two ranks for one step were "
                                "compared");
  /* An MPI program's point-to-point messages: their element types are
   * compared across sender and receiver (p2p_messages.h), the buffers of
   * their requests in flight checked (interpose/vqc_mpi_races.c) */
  const bool messages = mpi && vqc_p2p_messages_recorded(dir, ranks) > 0;
  mark(checks, not_run, VQC_FINDING_LOST_INPLACE,
       recording > 0 || messages ? NULL : none);
  mark(checks, not_run, VQC_FINDING_DEADLOCK, NULL);
  mark(checks, not_run, VQC_FINDING_COLLECTIVE_MISMATCH,
       recording >= 2 || messages ? NULL
       : recording == 1 ? "only one rank recorded collectives: nothing to "
                          "compare them with"
                        : none);
  mark(checks, not_run, VQC_FINDING_SHAPE_MISMATCH,
       !mpi ? "the Python bridge has no shape check of its own (a tensor "
              "whose shape differs across ranks is a divergence)"
       : recording > 0 ? NULL
                       : none);
  mark(checks, not_run, VQC_FINDING_GRADIENT_MISMATCH,
       mpi ? "not an MPI program's check (the Python bridge's, on gathers "
             "that drop gradients)"
       : recording > 0 ? NULL
                       : none);
  mark(checks, not_run, VQC_FINDING_RANK_FAILURE, NULL);
  mark(checks, not_run, VQC_FINDING_NONFINITE,
       "vqcheck watch digests the state; it does not read its values");
  json_object_set_new(doc, "checks", checks);
  json_object_set_new(doc, "checks_not_run", not_run);
}
