/* watch_checks.h: which checks a `vqcheck watch` run made, for run.json's
 * "checks" and "checks_not_run" (rundir.h; the reports and JUnit read them
 * through rep_check: a check not listed is told "not checked", never
 * "passed").
 *
 * Without them every check of a clean watched job was reported as not run
 * ("Not checked (did not run): divergence, deadlock, ..." in report.md, a
 * <skipped/> per check in junit.xml), which is as wrong as the opposite.
 * What ran depends on the way in and on what the job did:
 *
 *   check               Python bridge                 MPI interposer
 *   divergence          digests of 2 ranks compared   never (no state)
 *   deadlock            always (heartbeats, ledger)   always
 *   rank_failure        always (exit statuses, records, exceptions)
 *   collective_mismatch 2 ranks recorded collectives  the same
 *   lost_inplace        a rank recorded collectives   the same (buffers)
 *   gradient_mismatch   a rank recorded collectives   never
 *   shape_mismatch      never (a shape that differs   a rank recorded
 *                       is a divergence)              collectives
 *   nonfinite           never (digests, not values)   never
 *
 * "Recorded collectives": ledger lines in the rank's live record. The
 * bridge sees torch.distributed's Python collectives, not those torch
 * issues from C++ (DDP's gradient all_reduce), so a plain DDP job records
 * none, and its collective checks are said not to have run. */
#ifndef VQC_WATCH_CHECKS_H
#define VQC_WATCH_CHECKS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

/* Sets "checks" (the kinds checked) and "checks_not_run" ({kind: why})
 * in doc, for the ranks 0..ranks-1 of run directory dir; mpi: the job ran
 * under the MPI interposer; digests_compared: what the trace comparison
 * compared; unchecked: non-NULL when the bridge or interposer never
 * loaded (analyze.h): then only rank_failure ran (the processes' exit
 * statuses), and every other check is not run for that reason. A live
 * record that cannot be read counts as recording nothing. */
void vqc_watch_checks(json_t *doc, const char *dir, int ranks, bool mpi,
                      int64_t digests_compared, const char *unchecked);

#endif
