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
 * are grouped by (digest, dtype, shape). When one group is strictly larger
 * than every other (the majority), it is the reference and the other ranks
 * are the outliers: the finding's ranks, detail "majority": true and
 * "reference_rank". Otherwise (3 ranks with 3 digests, any 1-1 or 2-2
 * split) nobody is blamed: the finding names every rank, the message says
 * "no majority: ranks {0} and {1} differ" (or "ranks 0, 1, 2 all differ"),
 * detail "majority": false and no "reference_rank"; detail "groups" lists
 * every group either way (and "base_rank", the lowest rank, which only
 * anchors the message's wording). Traces hold digests only, so unlike a
 * run's finding there is no first differing index, value or max diff: the
 * detail says so. NaN / Inf (`nonfinite`) cannot be seen in a digest
 * either.
 *
 * Reading is streamed, one step at a time per rank, so memory stays bounded
 * by the largest step, not by the length of the job. This relies on the
 * format's order: a file lists its steps in non-decreasing order, each step's
 * lines together. What breaks the format is an error naming file:line
 * (VQC_EPARSE): garbage, an unknown schema, a line whose rank is not the
 * file's, a tensor listed twice in a step, a step that goes backwards, two
 * ranks using different digest algorithms for the same tensor. One thing is
 * forgiven: a last line without its newline that is not complete JSON (the
 * job was killed while writing it) is ignored with a warning. A line longer
 * than VQC_TRACE_LINE_MAX (1 MiB, trace.h) is VQC_EPARSE naming file:line
 * and the cap, found without reading the rest of it.
 *
 * Replica groups (trace.h "group", "shard"): a tensor is compared only among
 * the ranks of its line's group (the whole world when a line names none),
 * when each of them wrote it with the same group and shard, as in a run
 * (the digest exchange needs every rank of the group); a finding names
 * outliers within that group. Lines that some rank of the group lacks (or
 * names another group for) are counted and named in a warning; a tensor
 * whose group is its own rank alone has no replica: counted in no_replica,
 * never a divergence, and named: the distinct (tensor, shard) pieces
 * without a replica are counted and the first
 * VQC_TRACE_NO_REPLICA_LISTED of them kept, so a report can say which
 * tensors were not comparable. (A tensor of a line without a group, when
 * only one rank has a trace, is not counted there: that is a one-rank
 * job, or ranks that left no trace, which the rank_failure finding names.)
 * Ranks legitimately holding different shards write different groups or
 * shard keys, so they are never compared.
 *
 * Never a false green: traces that stop early are a finding, not a warning.
 * Each rank's trace reaches its last step; an empty file reaches no step, a
 * rank without a file (allowed only with allow_missing_ranks) less than
 * that. When the ranks do not all reach the same point, one `rank_failure`
 * finding names the ranks behind the furthest, each with how far it got
 * ("traces of ranks 2, 3 stop early: rank 2 at step 4, rank 3 at step 0
 * (the other ranks reach step 9): those ranks died, hung or were killed
 * ..."); its step is the first step one of them lacks, its detail holds
 * "stopped_early" (per named rank: "rank", "last_step" or null, "trace":
 * "ends early" | "empty" | "missing", "path"), "last_step" (per rank 0..n-1,
 * null for no step), "furthest_step" and "source": "traces". With
 * require_comparison (`vqcheck compare`), traces in which no rank reached a
 * step are also a rank_failure, of every rank, and a comparison that
 * compared nothing otherwise (the ranks share no (step, tensor)) is
 * VQC_EINVAL, as is a single rank's trace (at open). */
#ifndef VQC_TRACE_COMPARE_H
#define VQC_TRACE_COMPARE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "findings.h"
#include "not_digested.h"
#include "trace.h"
#include "vqc/status.h"

/* Ranks a directory may hold: each rank's file stays open while the steps
 * are streamed, so this also bounds the file descriptors used. */
#define VQC_TRACE_COMPARE_MAX_RANKS 4096

/* The pieces without a replica a result names (the first ones met, in the
 * order of the lowest rank's file): enough for a report to show which
 * tensors they are, bounded whatever the job (100 x 384 bytes). */
#define VQC_TRACE_NO_REPLICA_LISTED 100
/* Distinct pieces without a replica are counted through a set of 64-bit
 * hashes of (tensor, shard), at most this many (a table of 16 MiB at most):
 * a 1024-rank fully sharded job of 500 flat parameters has 512k. Past it
 * the count stops (no_replica_tensors_capped). */
#define VQC_TRACE_NO_REPLICA_COUNT_MAX ((int64_t)1 << 20)

typedef struct vqc_trace_set vqc_trace_set;

typedef struct vqc_trace_set_options {
  /* false (`vqcheck compare`): every rank 0..max must have a file, a gap is
   * VQC_EINVAL naming the missing ranks. true (`vqcheck analyze`): ranks
   * without a file are left out of the comparison and named in the
   * rank_failure finding (when some rank has a file). */
  bool allow_missing_ranks;
  /* > 0: the run had this many ranks (a file for a rank >= it is an error,
   * and ranks missing at the end count as missing); 0: from the files. */
  int expected_ranks;
  /* true: a directory without any trace file opens as an empty set
   * (nfiles 0, and no finding: nothing says a rank failed); false: that is
   * VQC_EINVAL. */
  bool allow_empty;
  /* true (`vqcheck compare`): comparing nothing is never a clean result: a
   * single rank's trace is VQC_EINVAL at open, traces where no rank reached
   * a step are a rank_failure of every rank, traces that share no (step,
   * tensor) are VQC_EINVAL from vqc_trace_set_compare. false (`analyze`,
   * where the ledger dumps speak for a job that died before its first
   * check): those are warnings. Ranks that stop early are a rank_failure
   * either way. */
  bool require_comparison;
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

/* A tensor piece: the tensor's name and its line's shard ("" for none). */
typedef struct vqc_trace_piece {
  char tensor[VQC_TRACE_NAME_MAX];
  char shard[VQC_TRACE_SHARD_MAX];
} vqc_trace_piece;

typedef struct vqc_trace_compare_result {
  int64_t lines_read;        /* valid lines, every rank */
  int64_t digests_compared;  /* (step, tensor) pairs compared */
  int64_t lines_not_compared; /* lines whose (step, tensor) a rank lacks */
  int64_t no_replica;        /* (step, tensor) whose replica group is one
                                rank: not comparable, never a divergence */
  int64_t no_replica_tensors; /* distinct (tensor, shard) among them */
  bool no_replica_tensors_capped; /* the count stopped at
                                     VQC_TRACE_NO_REPLICA_COUNT_MAX */
  vqc_trace_piece *no_replica_listed; /* (nno_replica_listed) owned: the
                                first VQC_TRACE_NO_REPLICA_LISTED of them,
                                in the order met; NULL when none */
  int nno_replica_listed;
  int findings;              /* divergence findings added */
  int rank_failures;         /* rank_failure findings added (0 or 1) */
  vqc_trace_step *steps;     /* (nsteps) steps with >= 1 line, ascending;
                                owned */
  int64_t nsteps;
  json_t *warnings;          /* array of strings, owned: cut-off last lines,
                                lines not compared, nothing compared (when
                                not required), ranks naming different
                                programs */
  /* The optional "program" of the lines (trace.h): the first one named in
   * the lowest rank's trace that names one; "" when no line names one. When
   * ranks name different programs this one is kept and a warning says so. */
  char program[VQC_TRACE_NAME_MAX];
  int nranks;                /* entries of rank_last_step */
  int64_t *rank_last_step;   /* (nranks) owned: the last step of each rank's
                                trace; -1 for an empty trace or a rank
                                without a file */
  /* The tensors the traces' not_digested lines name (trace.h), owned:
   * never compared; not_digested.unchecked > 0 means some held contents
   * nothing compared, so the comparison is not a clean verdict. */
  vqc_not_digested not_digested;
} vqc_trace_compare_result;

/* Streams every file once, appends the divergence findings and the
 * rank_failure finding for traces that stop early to `out` (in that order), and
 * fills *res (initialised here; free with vqc_trace_compare_result_free,
 * also after an error). copy_dir != NULL: the valid lines are also written
 * to copy_dir/rank-<r>.trace.jsonl (an existing directory; temporary names,
 * renamed when everything was read, removed on error), so a run directory
 * holds clean traces for the reports. A set is compared once. */
vqc_status vqc_trace_set_compare(vqc_trace_set *s, const char *copy_dir,
                                 vqc_findings *out,
                                 vqc_trace_compare_result *res);
void vqc_trace_compare_result_free(vqc_trace_compare_result *r);

/* run.json's list of the pieces without a replica (a new reference):
 * [{"tensor": ..., "shard": ...}] from r->no_replica_listed, "shard" ""
 * for a line without one; every string through utf8.h. */
json_t *vqc_trace_no_replica_json(const vqc_trace_compare_result *r);

#endif /* VQC_TRACE_COMPARE_H */
