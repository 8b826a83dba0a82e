/* collective.h: what the collective checker offers beyond the checker
 * interface (its constructor, vqc_checker_collective, is in checkers.h).
 *
 * In VQC_WAIT_BLOCKING mode a collective whose peers never come does not
 * return, so the checker's finish never runs. Its watchdog then does the
 * work instead, on the watchdog's thread: it dumps the rank's ledger and
 * status into the run directory, rank 0 waits (bounded) for the other ranks'
 * dumps and runs the analysis (the `deadlock` or `rank_failure` finding is
 * in the findings list afterwards), and then the hang hook is called. The
 * library never exits, so the hook decides: a CLI writes its report and
 * calls MPI_Abort (on rank 0; other ranks should wait for it, since
 * aborting first would kill rank 0 mid-analysis); a test records the call
 * and releases the rank. Without a hook the checker calls vqc_comm_abort on
 * the data comm (which frees threads-backend waits but cannot wake a
 * blocking MPI call). */
#ifndef VQC_COLLECTIVE_H
#define VQC_COLLECTIVE_H

#include <stdbool.h>

#include "checker.h"
#include "vqc/ledger.h"

/* Called on the watchdog thread with the stuck record. `analysed` is true on
 * the rank that ran the analysis (rank 0) once its findings are added. */
typedef void (*vqc_hang_fn)(const vqc_ledger_record *stuck, bool analysed,
                            void *user);

/* Sets the hang hook of an attached collective checker (VQC_EINVAL before
 * attach or for another checker). Safe while its watchdog runs. */
vqc_status vqc_collective_on_hang(vqc_checker *chk, vqc_hang_fn fn,
                                  void *user);

/* Tells an attached collective checker that the ranks agreed, before the
 * first step, that the run cannot start (a rank could not prepare its run
 * directory, build its model or attach its checkers: the runner's start
 * agreement gives every rank that answer). Its finish then runs no
 * side-channel exchange, writes no dump and runs no analysis (the rank that
 * could not start may have no collective checker to meet it there); it
 * only ends the live record. Call it on every rank or on none. VQC_EINVAL
 * for another checker. */
vqc_status vqc_collective_not_started(vqc_checker *chk);

#endif /* VQC_COLLECTIVE_H */
