/* rma_races.h: an MPI program's one-sided accesses that race: two RMA
 * accesses to one location of a rank's window memory, at least one of
 * them a plain write (MPI_Put, or a Get's result landing in the origin's
 * own window memory), with no order between them (analyze.c asks).
 *
 * libvqcheck_mpi.so writes rank-<r>.rma.jsonl as each rank's operations
 * complete (interpose/vqc_mpi_rma_record.c has the format): per access,
 * the target's world rank and bytes, whether a fence completed it (and in
 * which fence epoch), whether it was under an exclusive lock, and when it
 * was issued and completed. Two accesses are unordered, and a pair that
 * overlaps and writes is a lost_inplace finding naming both ranks, both
 * call sites, the window, the target and the bytes, when:
 *   - both were completed by fences and issued in the same fence epoch
 *     (every member counts the window's fences alike: exact);
 *   - or neither was, no exclusive lock of one origin held them apart
 *     (two origins' exclusive epochs on a target never overlap), both
 *     origins are on one host, and each was issued before the other
 *     completed: were one ordered before the other, the first's unlock or
 *     flush would have returned before the second was issued (whatever
 *     orders them, a message, a barrier, a flag in memory, comes after the
 *     return and before the issue), on the clock every process of a host
 *     shares. So an overlap in time is never an ordered pair; an
 *     unordered pair that happens not to overlap is not told (missed,
 *     never wrong).
 * Accumulates against accumulates are atomic (not told), as are two reads;
 * an access that mixes a fence epoch with a lock is not compared; one
 * operation's own accesses (its target's, its origin buffer's) are not
 * compared with each other, nor are a run's (a line standing for a loop's
 * operations, "n" and "step": one access when their cells touch end to
 * end, one per operation otherwise). Accesses whose target's disp_unit is unknown
 * are skipped; past the file's cap (its "truncated" line) the rest are
 * missing, so only races among those written are found. */
#ifndef VQC_RMA_RACES_H
#define VQC_RMA_RACES_H

#include <jansson.h>
#include <stdint.h>

#include "findings.h"

/* Appends the findings above to `fresh`, for the ranks of run directory
 * dir (0..ranks-1; ranks <= 0: as many as there are files). A file that
 * cannot be read or parsed is a warning appended to `warnings`, never a
 * finding; it, and accesses past what the analysis compares, also put why
 * some were not compared into unchecked (n bytes; "" when all were: the
 * caller makes the verdict incomplete). *accesses (may be NULL): the
 * accesses compared. */
void vqc_rma_races(const char *dir, int ranks, vqc_findings *fresh,
                   json_t *warnings, int64_t *accesses, char *unchecked,
                   size_t n);

#endif /* VQC_RMA_RACES_H */
