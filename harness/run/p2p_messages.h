/* p2p_messages.h: an MPI program's point-to-point messages, each rank's
 * sends paired with their receiver's receives (analyze.c asks).
 *
 * libvqcheck_mpi.so writes, at each rank's MPI_Finalize,
 * rank-<r>.p2p.jsonl: its messages counted per channel (communicator,
 * peer, tag, direction), with a hash of their element types in order and
 * the first message's call, type and call site (interpose/vqc_mpi_msgs.c
 * has the format and why the k-th send of a channel is its peer's k-th
 * receive). Two findings come of pairing them, for every two ranks that
 * both wrote one:
 *   - deadlock: a message sent that its receiver never received before
 *     MPI_Finalize ("rank 0 sent 1 message to rank 1 (tag 123) with
 *     MPI_Send at lost.c:7 (main) that rank 1 never received"): MPI
 *     requires every message to be received; a small one sent eagerly lets
 *     the program end with it lost, a larger one blocks the sender
 *     forever. Not told when the receiver's own finding already says so
 *     (a receive request it never completed, "pending_recv");
 *   - collective_mismatch (the arguments of the two sides of one
 *     communication disagree): a message received as another element type
 *     than it was sent ("rank 1 received message 3 of tag 7 from rank 0 as
 *     float32 (MPI_FLOAT) ... but rank 0 sent it as int32 (MPI_INT)"): MPI
 *     checks only that it fits. MPI_BYTE, MPI_PACKED and mixed types are
 *     not compared.
 * A rank whose counts are incomplete (it used persistent requests or
 * matched receives, cancelled a send: the head line's "uncounted") has no
 * channel compared. */
#ifndef VQC_P2P_MESSAGES_H
#define VQC_P2P_MESSAGES_H

#include <jansson.h>
#include <stdint.h>

#include "findings.h"

/* Appends the findings above to `fresh`, for the ranks of run directory
 * dir (0..ranks-1; ranks <= 0: as many as there are files). A file that
 * cannot be read or parsed is a warning appended to `warnings`, never a
 * finding; it, and files past what the analysis holds, also put why some
 * messages were not compared into unchecked (n bytes; "" when all were:
 * the caller makes the verdict incomplete). *messages (may be NULL): the
 * messages compared. */
void vqc_p2p_messages(const char *dir, int ranks, vqc_findings *fresh,
                      json_t *warnings, int64_t *messages, char *unchecked,
                      size_t n);

/* The messages the ranks' files count, from their head lines (watch's
 * run.json "checks"); 0 when there are none. */
int64_t vqc_p2p_messages_recorded(const char *dir, int ranks);

#endif
