/* ledger_internal.h: the ledger's writer side (not a public header), used
 * by comm.c, which opens and closes a record around every collective. The
 * ledger needs nothing of the comm: everything it records is handed to it
 * (the record's fields, and the times, taken on the core clock). */
#ifndef VQC_LEDGER_INTERNAL_H
#define VQC_LEDGER_INTERNAL_H

#include <stddef.h>

#include "vqc/ledger.h"
#include "vqc/status.h"

/* capacity 0 means the default; it is
 * rounded up to a power of two (the slot of seq is then seq & mask). */
vqc_status vqc_ledger_create(int rank, size_t capacity, vqc_ledger **out);
void vqc_ledger_destroy(vqc_ledger *l);
/* Opens a record: the caller fills op, redop, dtype, count, root, site and
 * the buffers of *r (its own memory, e.g. on the stack: this is what event
 * handlers see); open sets seq, rank, t_enter_ns, t_exit_ns = 0, state
 * ENTERED and status VQC_OK in *r and publishes a copy to the ring. Only the
 * thread driving the comm may open and close (the ledger's single writer). */
void vqc_ledger_open(vqc_ledger *l, vqc_ledger_record *r);
/* Sets *r's t_exit_ns, status and state (DONE or FAILED) and publishes it. */
void vqc_ledger_close(vqc_ledger *l, vqc_ledger_record *r, vqc_status s);

#endif /* VQC_LEDGER_INTERNAL_H */
