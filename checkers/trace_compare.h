/* trace_compare.h: the divergence check, offline, from per-rank traces.
 *
 * Reads the rank-<r>.trace.jsonl files of a directory (format
 * vqcheck-trace/1, trace.h and docs/trace-format.md) written by a vqcheck run
 * or by any other program, aligns their lines by (step, tensor) and reports
 * the `divergence` findings the divergence checker would have reported during
 * the run: per step in increasing order, the first tensor (in the order of
 * the lowest rank's file) whose digest, dtype or shape differs across ranks
 * and that was not reported before; tensors that start to differ at the same
 * step go into its detail (also_differing) and are not reported later. Ranks
 * are grouped by (digest, dtype, shape); the largest group is the reference
 * (ties: the group holding the lowest rank), the other ranks are the
 * outliers. Traces hold digests only, so unlike a run's finding there is no
 * first differing index, value or max diff: the detail says so. NaN / Inf
 * (`nonfinite`) cannot be seen in a digest either.
 *
 * Reading is streamed, one step at a time per rank, so memory stays bounded
 * by the largest step, not by the length of the job. This relies on the
 * format's order: a file lists its steps in non-decreasing order, each step's
 * lines together. What breaks the format is an error naming file:line
 * (VQC_EPARSE): garbage, an unknown schema, a line whose rank is not the
 * file's, a tensor listed twice in a step, a step that goes backwards, two
 * ranks using different digest algorithms for the same tensor. One thing is
 * forgiven: a last line without its newline that is not complete JSON (the
 * job was killed while writing it) is ignored with a warning.
 *
 * A (step, tensor) is compared only when every rank wrote it, as in a run
 * (the digest exchange needs every rank); lines that some rank lacks (a job
 * killed at different points on different ranks) are counted and named in a
 * warning. */
#ifndef VQC_TRACE_COMPARE_H
#define VQC_TRACE_COMPARE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "findings.h"
#include "vqc/status.h"

/* Ranks a directory may hold: each rank's file stays open while the steps
 * are streamed, so this also bounds the file descriptors used. */
#define VQC_TRACE_COMPARE_MAX_RANKS 4096

typedef struct vqc_trace_set vqc_trace_set;

typedef struct vqc_trace_set_options {
  /* false (`vqcheck compare`): every rank 0..max must have a file, a gap is
   * VQC_EINVAL naming the missing ranks. true (`vqcheck analyze`): ranks
   * without a file are left out of the comparison, with a warning. */
  bool allow_missing_ranks;
  /* > 0: the run had this many ranks (a file for a rank >= it is an error,
   * and ranks missing at the end count as missing); 0: from the files. */
  int expected_ranks;
  /* true: a directory without any trace file opens as an empty set
   * (nfiles 0); false: that is VQC_EINVAL. */
  bool allow_empty;
} vqc_trace_set_options;

/* Finds and opens the traces in dir (nothing is read yet beyond checking
 * names and that each file can be opened). *out is freed with
 * vqc_trace_set_close. Errors: VQC_EINVAL (no traces, missing ranks, too
 * many ranks, a trace that is not a regular file), VQC_EIO (unreadable). */
vqc_status vqc_trace_set_open(const char *dir, const vqc_trace_set_options *o,
                              vqc_trace_set **out);
/* Highest rank with a file + 1 (or expected_ranks when given), and the
 * number of ranks that have a file. */
int vqc_trace_set_ranks(const vqc_trace_set *s);
int vqc_trace_set_files(const vqc_trace_set *s);
/* Closes the files; accepts NULL. */
void vqc_trace_set_close(vqc_trace_set *s);

/* One step as compare saw it (for run.json "steps"). */
typedef struct vqc_trace_step {
  int64_t step;
  int64_t compared;  /* tensors written by every rank */
  int64_t differing; /* of those, tensors whose ranks disagree (reported now
                        or at an earlier step) */
  int findings;      /* divergence findings so far, this step included */
} vqc_trace_step;

typedef struct vqc_trace_compare_result {
  int64_t lines_read;        /* valid lines, every rank */
  int64_t digests_compared;  /* (step, tensor) pairs compared */
  int64_t lines_not_compared; /* lines whose (step, tensor) a rank lacks */
  int findings;              /* divergence findings added */
  vqc_trace_step *steps;     /* (nsteps) steps with >= 1 line, ascending;
                                owned */
  int64_t nsteps;
  json_t *warnings;          /* array of strings, owned: cut-off last lines,
                                missing ranks, lines not compared */
} vqc_trace_compare_result;

/* Streams every file once, appends the divergence findings to `out`, and
 * fills *res (initialised here; free with vqc_trace_compare_result_free,
 * also after an error). copy_dir != NULL: the valid lines are also written
 * to copy_dir/rank-<r>.trace.jsonl (an existing directory; temporary names,
 * renamed when everything was read, removed on error), so a run directory
 * holds clean traces for the reports. A set is compared once. */
vqc_status vqc_trace_set_compare(vqc_trace_set *s, const char *copy_dir,
                                 vqc_findings *out,
                                 vqc_trace_compare_result *res);
void vqc_trace_compare_result_free(vqc_trace_compare_result *r);

#endif /* VQC_TRACE_COMPARE_H */
