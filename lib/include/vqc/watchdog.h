/* watchdog.h: a per-rank thread that notices a collective stuck in flight.
 *
 * "Nothing hangs" needs someone to notice a collective whose peers never
 * come. In VQC_WAIT_POLL mode the call itself returns VQC_ETIMEOUT at its
 * deadline; in VQC_WAIT_BLOCKING mode (the fast one on MPI, see comm.h) the
 * call cannot return, so a watchdog thread watches the comm's ledger
 * instead: every poll interval it reads the record in flight
 * (vqc_ledger_in_flight) and, when one has been ENTERED for longer than the
 * timeout, calls fn with a copy of it. fn is called once per stuck record
 * (a later record that gets stuck is reported again).
 *
 * The library never exits: fn decides. A CLI typically dumps the ledger
 * (vqc_ledger_dump is safe from the watchdog thread), writes its report and
 * calls MPI_Abort; a test records what it saw and lets the rank go.
 *
 * fn runs on the watchdog's own thread, not the rank's: it must not call
 * collectives on the watched comm (the rank's thread drives it), and what it
 * shares with the rank's thread needs the usual synchronisation.
 *
 * Usage:
 *   vqc_watchdog *wd = NULL;
 *   VQC_TRY(vqc_watchdog_start(c, 0, on_stuck, &report, &wd));
 *   ... collectives on c ...
 *   vqc_watchdog_stop(wd);       (before the comm is destroyed) */
#ifndef VQC_WATCHDOG_H
#define VQC_WATCHDOG_H

#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vqc_watchdog vqc_watchdog;

/* Called on the watchdog thread with a copy of the stuck record (state
 * ENTERED; valid during the call). */
typedef void (*vqc_watchdog_fn)(const vqc_ledger_record *stuck, void *user);

/* Starts watching c's ledger (c must be a data comm, not a side channel).
 * timeout_s: how long a record may stay ENTERED before fn is called; <= 0
 * uses the comm's timeout at the time of the call (vqc_comm_timeout). The
 * ledger is polled every min(timeout / 10, 50 ms), so fn is called between
 * timeout and timeout + one poll interval (plus scheduling delay) after the
 * collective was entered. On success *out is the watchdog (free it with
 * vqc_watchdog_stop); VQC_EINVAL for bad arguments, VQC_EINTERNAL when the
 * thread cannot be started. */
vqc_status vqc_watchdog_start(vqc_comm *c, double timeout_s,
                              vqc_watchdog_fn fn, void *user,
                              vqc_watchdog **out);

/* Stops the thread (promptly: it does not wait out a poll interval), joins
 * it and frees the watchdog. If fn is running it is waited for. Accepts
 * NULL. */
void vqc_watchdog_stop(vqc_watchdog *w);

#ifdef __cplusplus
}
#endif
#endif /* VQC_WATCHDOG_H */
