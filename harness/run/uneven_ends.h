/* uneven_ends.h: ranks that end cleanly after different numbers of steps
 * (analyze.c asks, after the traces were compared).
 *
 * Uneven inputs are legal: under torch's Join context a rank whose data ran
 * out ends its loop early and shadows the others' collectives until they
 * end too; every process then ends cleanly, each after its own number of
 * steps. The trace comparison sees only that some traces stop early (a
 * rank_failure, "died, hung or was killed"); the live records say how
 * each rank ended. Two cases are told apart here:
 *
 *   - every rank's live record ends with a clean "finished" line: the
 *     traces' stopped-early rank_failure is dropped and a warning says
 *     which rank ended after which step (what of the later steps not
 *     every rank trained was not compared). A process that still exited
 *     with a failure is watch's own rank_failure (watch_job.c), so this
 *     never makes a failed job clean;
 *   - some rank failed (an exception the bridge saw) while another had
 *     already ended cleanly after no more steps than the failed one had
 *     done: the exception's finding says so ("rank 1 had ended cleanly
 *     after step 2"), and its detail lists those ranks as "ended_before":
 *     a rank that leaves early strands the others in their next
 *     collective, and the error they then raise ("Connection closed by
 *     peer") names only the victim. */
#ifndef VQC_UNEVEN_ENDS_H
#define VQC_UNEVEN_ENDS_H

#include <jansson.h>

#include "findings.h"

/* The two rules above, on `fresh` (the analysis' findings so far) for the
 * ranks 0..ranks-1 of run directory dir; a warning is appended to
 * `warnings` when a finding is dropped. Nothing changes where a live
 * record cannot be read. */
void vqc_uneven_ends(const char *dir, int ranks, vqc_findings *fresh,
                     json_t *warnings);

#endif
