/* mpi_leaks.h: MPI objects an MPI program never freed (analyze.c asks).
 *
 * libvqcheck_mpi.so (interpose/vqc_mpi_leaks.c) follows the communicators,
 * groups, derived datatypes, reduction operations, persistent requests,
 * windows and files a rank makes, and at MPI_Finalize writes those still alive to its live
 * record as one "leaks" line, counted by the call and site that made them:
 *   {"event":"leaks","objects":[{"object":"communicator",
 *    "objects":"communicators","free_with":"MPI_Comm_free","count":10,
 *    "call":"MPI_Comm_dup","site":{"file":..,"line":..,"func":..}},...],
 *    "more_count":N,"not_followed":K}
 * Here the ranks' lines are joined by object, call and site, and each
 * becomes a warning: "rank 0-3 reached MPI_Finalize with 10 communicators
 * made by MPI_Comm_dup at ring.c:13 (main) never freed (10 each) ...".
 *
 * A warning, not a finding: bugs.md's finding kinds name no leak, and MPI
 * does not require freeing before MPI_Finalize; but a communicator, group
 * or type made in a loop and never freed runs MPI out of them ("Too many
 * communicators") after some thousands of iterations, far from the line
 * that made them, and checkers of MPI programs (MUST, Umpire, mpileaks)
 * tell them. The line is written just before the end line, so it is read
 * from each record's last MiB, not by a scan of the whole record. */
#ifndef VQC_MPI_LEAKS_H
#define VQC_MPI_LEAKS_H

#include <jansson.h>

/* Appends to `warnings` (a JSON array of strings) one warning per object
 * kind, call and site that some of ranks 0..ranks-1 of run directory dir
 * never freed (at most 16, then one for the rest). A record that cannot be
 * read, or has no leaks line, adds nothing. */
void vqc_mpi_leaks(const char *dir, int ranks, json_t *warnings);

#endif
