/* findings_record.h: a run's findings read back from its ranks' live
 * records, for `vqcheck analyze` on a directory whose run.json was never
 * written (a full disk, a killed rank 0) or cannot be trusted.
 *
 * Every finding a checker makes goes, as it is made, to the list the run
 * reports from AND to the line {"event":"finding","finding":{...}} of that
 * rank's rank-<r>.live.jsonl (checker.h vqc_check_report,
 * ledger_analysis.h). This is the reader. It merges what the ranks
 * recorded as the run merges its list, so a rebuilt run.json holds the
 * findings the run would have written:
 *   - findings with the same kind, step, tensor and site are one, with the
 *     union of their ranks (vqc_findings_merge_duplicates);
 *   - lost_inplace findings at the same call site are one, the earliest
 *     step's (lost_inplace.c adds each later rank to the first finding).
 * Order: by step, then in rank order, then in each record's order. */
#ifndef VQC_FINDINGS_RECORD_H
#define VQC_FINDINGS_RECORD_H

#include "findings.h"
#include "vqc/status.h"

/* Appends the merged findings of every rank-<r>.live.jsonl in dir to out.
 * *nlines (may be NULL): how many finding lines were read. Lenient where
 * the ledger analysis is strict (a line that is not JSON, a last line cut
 * by a kill: skipped), strict on a finding line that is JSON but not a
 * finding (VQC_EPARSE "path:line: ..."; nothing appended then). VQC_EIO
 * when dir or a record cannot be read, VQC_ENOMEM. */
vqc_status vqc_recorded_findings_read(const char *dir, vqc_findings *out,
                                      int *nlines);

#endif /* VQC_FINDINGS_RECORD_H */
