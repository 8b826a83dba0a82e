/* coll_cases.h: collective test bodies shared by every comm backend.
 *
 * Each case takes one rank's comm, runs collectives through the public API
 * only, and returns the number of failed checks on this rank (printing each
 * to stderr with the rank). The same bodies run on the threads backend (from
 * Criterion, on 1..5 ranks) and on the MPI backend (a driver under mpiexec),
 * so they hold for any size >= 1. Every rank must run the same cases in the
 * same order: the cases are collective.
 *
 * Inputs are built so the expected result is exact (nccl-tests style): small
 * integers in every dtype, so sums are exact in any order and min/max are
 * exact by nature.
 *
 * In-place conventions tested (the ones MPI_IN_PLACE and NCCL use):
 *   all_reduce   send == recv;
 *   all_gather   send == recv + rank * count (the rank's block, pre-filled);
 *   all_gatherv  send == recv + displ[rank] (displ = prefix sum of counts). */
#ifndef VQC_COLL_CASES_H
#define VQC_COLL_CASES_H

#include <stdbool.h>

#include "vqc/comm.h"

typedef int (*vqc_coll_case_fn)(vqc_comm *c);

typedef struct vqc_coll_case {
  const char *name;
  vqc_coll_case_fn fn;
} vqc_coll_case;

int vqc_case_all_reduce_sum(vqc_comm *c);
int vqc_case_all_reduce_min(vqc_comm *c);
int vqc_case_all_reduce_max(vqc_comm *c);
int vqc_case_all_gather(vqc_comm *c);
int vqc_case_all_gatherv(vqc_comm *c);
int vqc_case_broadcast(vqc_comm *c);
int vqc_case_barrier(vqc_comm *c);
int vqc_case_ledger(vqc_comm *c);
int vqc_case_events(vqc_comm *c);
int vqc_case_veto(vqc_comm *c);
int vqc_case_tensor(vqc_comm *c);
int vqc_case_side_channel(vqc_comm *c);
int vqc_case_sequence(vqc_comm *c);

/* Every case above, in the order vqc_run_coll_cases runs them. */
extern const vqc_coll_case vqc_coll_cases[];
extern const int vqc_coll_case_count;

/* Sums `local` over all ranks through c's side channel, so every rank learns
 * whether any rank failed. A side-channel error counts as one failure. */
int vqc_coll_global_failures(vqc_comm *c, int local);

/* Ends one case on every rank: agrees on the global failure count
 * (vqc_coll_global_failures, given this rank's `local` count), and rank 0
 * prints "name: ok" or "name: FAILED", followed by " (figures)" when
 * figures is not NULL. Returns true when no rank failed. Collective. */
bool vqc_coll_case_report(vqc_comm *c, const char *name, int local,
                          const char *figures);

/* Runs cases[0..n) in order, each ended by vqc_coll_case_report. Returns
 * the number of cases that failed on any rank (the same value on every
 * rank), so n minus it passed. */
int vqc_run_case_list(vqc_comm *c, const vqc_coll_case *cases, int n);

/* vqc_run_case_list of every case above. */
int vqc_run_coll_cases(vqc_comm *c);

#endif /* VQC_COLL_CASES_H */
