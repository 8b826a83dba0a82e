/* comm/ owns: the collective API and its backends (threads; mpi/ and nccl/ when
 *   built), the per-rank ledger, the watchdog, probes.
 * May use: core/. The ledger sits below the comm (comm.c hands it each record).
 *
 * The public headers comm/ owns (see core/layer.h for how tests/layers.sh
 * uses this list). */
#ifndef VQC_COMM_LAYER_H
#define VQC_COMM_LAYER_H

#include "core/layer.h"
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/probe.h"
#include "vqc/watchdog.h"

#endif /* VQC_COMM_LAYER_H */
