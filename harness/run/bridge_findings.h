/* bridge_findings.h: the findings the vqcheck Python bridge detected inside
 * a job's processes (python/bridge/, loaded by `vqcheck watch`), read back
 * from the run directory. `vqcheck analyze` (analyze.h) reads them, so
 * `vqcheck watch` and a later `vqcheck analyze DIR` report them alike.
 *
 * File: DIR/rank-<r>.findings.jsonl (r in plain decimal), appended by rank
 * r, one finding per line in run.json's finding format (findings.h,
 * vqc_finding_to_json):
 *
 *   {"kind":"lost_inplace","step":2,"ranks":[1],"tensor":"embed_sum",
 *    "site":{"file":"/abs/path/x.py","line":496,"func":"forward"},
 *    "message":"...","detail":{...}}
 *
 *   kind     required: a finding kind of findings.h ("lost_inplace", ...).
 *   step     required integer (-1 when no step applies).
 *   ranks    optional array of integers; absent or [] means [r], the rank
 *            whose file it is.
 *   tensor   optional string (< 128 bytes).
 *   site     optional: a string as run.json writes it ("file:line func",
 *            < 256 bytes), or an object {"file": string, "line": integer,
 *            "func": string} (each optional), turned into that string.
 *   message  optional string (< 512 bytes); detail optional object.
 * Unknown keys are ignored; blank lines are skipped. A line is at most
 * VQC_TRACE_LINE_MAX bytes (trace.h, read with vqc_trace_read_line).
 *
 * Merging: findings with the same kind, site and tensor (whatever their
 * step, from any rank) that tell one story (vqc_finding_same_story: an MPI
 * program's, without a step, only when their messages are the same but
 * for numbers) are one finding: the one with the lowest step (the
 * first read among equals, files in rank order) keeps its message and
 * detail, with the union of every duplicate's ranks (increasing). Then the
 * rank_failures that note an exception ending a rank (detail.exception,
 * detail.raised_at: when, Unix seconds) are one finding: the first raised
 * tells the story, each later one (a peer's collective failing because
 * that rank was gone) is added as "; then rank 0's all_reduce failed
 * (RuntimeError at x.py:11)", its ranks too, its detail in detail.then. */
#ifndef VQC_BRIDGE_FINDINGS_H
#define VQC_BRIDGE_FINDINGS_H

#include "findings.h"
#include "vqc/status.h"

/* Reads every rank-<r>.findings.jsonl of dir, merges them (above) and
 * appends the result to out. *nfiles: how many files were read (may be
 * NULL). VQC_EPARSE "path:line: ..." for the first malformed line (nothing
 * appended then), VQC_EIO when a file cannot be read, VQC_ENOMEM. */
vqc_status vqc_bridge_findings_read(const char *dir, vqc_findings *out,
                                    int *nfiles);

/* Whether x is the bridge's note of an exception that ended its rank (a
 * rank_failure whose detail names the exception). */
bool vqc_bridge_is_exception(const vqc_finding *x);

#endif /* VQC_BRIDGE_FINDINGS_H */
