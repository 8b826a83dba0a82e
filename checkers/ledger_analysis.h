/* ledger_analysis.h: the per-rank dump files of a stuck or failed run, and
 * the analysis that names the collective the ranks disagree on.
 *
 * When a rank's training ends badly (timeout, abort, mismatch) or its
 * watchdog sees a collective stuck, the collective checker writes two files
 * into the run directory (each to a temporary name, then renamed, so a crash
 * never leaves half a file; on a shared filesystem this works across nodes):
 *
 *   rank-<r>.ledger.jsonl  the rank's ledger, one record per line
 *                          (vqc_ledger_write_jsonl's format);
 *   rank-<r>.status.json   {"rank","size","status","step","last_seq",
 *                          "watchdog","in_flight": record or null}: how the
 *                          rank's training ended and where it was.
 *
 * vqc_ledger_analyze is a pure function of those files, so it runs on rank 0
 * at the end of a run and again offline (`vqcheck analyze RUN_DIR`). It finds
 * the lowest sequence number that is not DONE on every rank, or whose
 * collective (op, dtype, count, root, redop, call site) differs across
 * ranks, and reports ONE finding about it:
 *   deadlock      the ranks that entered it (op, dtype, count, site) and the
 *                 ranks that did not, with where they are instead (the other
 *                 collective they wait in, or their last completed one);
 *   rank_failure  for ranks without a ledger dump (crashed, killed): named
 *                 with the last sequence number the others completed. When
 *                 the only ranks missing from the stuck collective are such
 *                 ranks, rank_failure is the whole story and no deadlock is
 *                 reported.
 * A rank whose dump exists but has fewer collectives than the others (it
 * left its training loop) is "missing" from the deadlock, not failed.
 *
 * The fingerprint helpers are shared with strict mode (collective.c), which
 * compares the same fields before each collective. */
#ifndef VQC_LEDGER_ANALYSIS_H
#define VQC_LEDGER_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "findings.h"
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/status.h"

/* ---- fingerprints: what must agree across ranks for one collective */

typedef struct vqc_coll_fingerprint {
  int32_t op;         /* vqc_coll_op */
  int32_t dtype;      /* vqc_dtype */
  int32_t redop;      /* vqc_redop for ALL_REDUCE; -1 otherwise */
  int32_t root;       /* BROADCAST's root; -1 otherwise */
  uint64_t count;     /* elements this rank contributes */
  uint64_t site_hash; /* vqc_site_hash of the call site */
} vqc_coll_fingerprint;

/* xxh3 over "file", line and "func": equal for the same call site in every
 * process of the same build (string contents are hashed, not pointers). */
uint64_t vqc_site_hash(vqc_site site);
void vqc_fingerprint_of(const vqc_ledger_record *r, vqc_coll_fingerprint *out);
bool vqc_fingerprint_equal(const vqc_coll_fingerprint *a,
                           const vqc_coll_fingerprint *b);

/* "all_reduce(float32, count 16)", "all_reduce(int64, count 1, max)",
 * "broadcast(float32, count 4, root 0)", "barrier()". */
void vqc_coll_describe(vqc_coll_op op, vqc_dtype dt, size_t count, int root,
                       vqc_redop redop, char *buf, size_t n);
/* "lib/src/vq_ema.c:57 vqc_vq_ema_update": the same text as
 * vqc_finding_set_site (paths relative to the repository where it can). */
void vqc_site_text(vqc_site site, char *buf, size_t n);

/* When ranks entered different collectives at the same sequence number,
 * which one is "the" collective (the others skipped it, or called another)?
 * `groups` holds the ngroups distinct fingerprints, with how many ranks
 * entered each and the lowest such rank. `history` is the common record
 * before that sequence number, oldest first (every rank agreed on it). The
 * history predicts the answer: the last time the latest collective was
 * called, what came next? (A training loop repeats itself, so for a rank
 * that skipped the seed all_reduce this names the seed all_reduce, even in
 * a two-against-two split.) Without a prediction that matches a group: the
 * larger group, then the group holding the lowest rank. Returns the
 * group's index. */
int vqc_pick_expected(const vqc_coll_fingerprint *groups, const int *nranks,
                      const int *low_rank, int ngroups,
                      const vqc_coll_fingerprint *history, size_t nhistory);

/* ---- the dump files */

/* run_dir/rank-<r>.ledger.jsonl and run_dir/rank-<r>.status.json. */
vqc_status vqc_ledger_dump_path(const char *run_dir, int rank, char *buf,
                                size_t n);
vqc_status vqc_status_dump_path(const char *run_dir, int rank, char *buf,
                                size_t n);

/* How a rank ended, for rank-<r>.status.json. */
typedef struct vqc_rank_end {
  int rank, size;
  vqc_status status;     /* how its training ended (VQC_ETIMEOUT while a
                            watchdog reports it stuck) */
  int64_t step;          /* the step it was in; -1 if unknown */
  bool watchdog;         /* written by the watchdog (the rank is stuck) */
  bool has_in_flight;
  vqc_ledger_record in_flight; /* the record ENTERED at dump time */
} vqc_rank_end;

/* Writes rank-<r>.ledger.jsonl (vqc_ledger_dump) then rank-<r>.status.json
 * (temporary file + rename). The status file is written last: once it
 * exists, the rank's dump is complete. Safe from a watchdog thread. */
vqc_status vqc_rank_dump_write(const char *run_dir, vqc_ledger *ledger,
                               const vqc_rank_end *end);

/* ---- the analysis */

/* Reads the dumps of ranks 0..size-1 in run_dir and appends at most one
 * deadlock finding and at most one rank_failure finding to `out` (how many
 * in *nadded, which may be NULL). size <= 0: taken from the status files'
 * "size" (else from the highest rank-<r> file found). step >= 0 is the step
 * of the findings; < 0: the step in the status files (that of the lowest
 * rank that entered the collective). Consistent dumps with nothing stuck
 * add nothing. Errors: VQC_EPARSE "file:line: ..." for a malformed dump,
 * VQC_EINVAL when no rank left a dump, VQC_EIO, VQC_ENOMEM. */
vqc_status vqc_ledger_analyze(const char *run_dir, int size, int64_t step,
                              vqc_findings *out, int *nadded);

#endif /* VQC_LEDGER_ANALYSIS_H */
