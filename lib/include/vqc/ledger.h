/* ledger.h: the per-rank record of every collective, and its events.
 *
 * Each collective on a (non-side) comm appends one record before any data
 * moves (state ENTERED) and completes it after (DONE or FAILED). Records are
 * kept in a ring of fixed capacity (oldest dropped, `seq` keeps counting), so
 * the hot path never allocates. A watchdog thread (vqc/watchdog.h) may read
 * the ledger while the rank runs: the thread driving the comm is its only
 * writer, and every reader (vqc_ledger_get, _in_flight, _last_done,
 * _snapshot, _write_jsonl, _dump) copies records through a per-record
 * seqlock, retrying a copy the writer tore, so readers never block the rank
 * and always get whole records. A snapshot taken while the rank runs leaves
 * out records the ring overwrote during the copy.
 *
 * The ledger sits below the comm: it records what comm.c hands it (the
 * record's vocabulary -- operations, reductions, call sites -- is defined
 * here, and comm.h includes this header) and knows nothing of comms. The
 * events raised around each collective are the comm's (vqc/comm.h). */
#ifndef VQC_LEDGER_H
#define VQC_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vqc/status.h"
#include "vqc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vqc_ledger vqc_ledger;

/* Where a collective was called from (captured by the macros below). */
typedef struct vqc_site {
  const char *file;
  int line;
  const char *func;
} vqc_site;
#define VQC_SITE ((vqc_site){__FILE__, __LINE__, __func__})

#define VQC_REDOP_LIST(X) X(SUM, "sum") X(MIN, "min") X(MAX, "max")
typedef enum {
#define VQC_REDOP_ENUM(name, str) VQC_##name,
  VQC_REDOP_LIST(VQC_REDOP_ENUM)
#undef VQC_REDOP_ENUM
  VQC_REDOP_COUNT
} vqc_redop;
const char *vqc_redop_name(vqc_redop op);

#define VQC_COLL_LIST(X)                     \
  X(ALL_REDUCE, "all_reduce")                \
  X(ALL_GATHER, "all_gather")                \
  X(ALL_GATHERV, "all_gatherv")              \
  X(BROADCAST, "broadcast")                  \
  X(BARRIER, "barrier")
typedef enum {
#define VQC_COLL_ENUM(name, str) VQC_COLL_##name,
  VQC_COLL_LIST(VQC_COLL_ENUM)
#undef VQC_COLL_ENUM
  VQC_COLL_COUNT
} vqc_coll_op;
const char *vqc_coll_name(vqc_coll_op op);

typedef enum {
  VQC_REC_ENTERED = 0, /* called, data not (fully) moved yet */
  VQC_REC_DONE = 1,    /* returned VQC_OK */
  VQC_REC_FAILED = 2,  /* returned an error (status says which) */
} vqc_record_state;
const char *vqc_record_state_name(vqc_record_state s);

typedef struct vqc_ledger_record {
  uint64_t seq;          /* 0, 1, 2, ... per rank per comm */
  int rank;
  vqc_coll_op op;
  vqc_redop redop;       /* ALL_REDUCE only */
  vqc_dtype dtype;
  size_t count;          /* elements this rank contributes (send count) */
  int root;              /* BROADCAST only; -1 otherwise */
  vqc_site site;
  const void *sendbuf;   /* as passed; for checkers, valid during events */
  void *recvbuf;
  uint64_t t_enter_ns;   /* CLOCK_MONOTONIC */
  uint64_t t_exit_ns;    /* 0 while ENTERED */
  vqc_record_state state;
  vqc_status status;
} vqc_ledger_record;

#define VQC_LEDGER_DEFAULT_CAPACITY 65536
/* Memory one record takes in the ring (the record, its seqlock version and
 * padding to two cache lines): a ledger reserves capacity times this. */
#define VQC_LEDGER_SLOT_BYTES 128

/* Number of collectives ever appended (== next seq). */
uint64_t vqc_ledger_count(vqc_ledger *l);
/* Copies record `seq` if it is still in the ring; false otherwise. */
bool vqc_ledger_get(vqc_ledger *l, uint64_t seq, vqc_ledger_record *out);
/* Copies the record currently ENTERED, if any (for a watchdog). */
bool vqc_ledger_in_flight(vqc_ledger *l, vqc_ledger_record *out);
/* The last record whose state is DONE, if any. */
bool vqc_ledger_last_done(vqc_ledger *l, vqc_ledger_record *out);
/* Copies up to `max` most recent records, oldest first; returns how many. */
size_t vqc_ledger_snapshot(vqc_ledger *l, vqc_ledger_record *out, size_t max);

/* Writes the kept records as JSON Lines, one object per record, oldest first:
 * {"seq":..,"rank":..,"op":"all_reduce","redop":"sum","dtype":"float32",
 *  "count":..,"root":-1,"file":"..","line":..,"func":"..",
 *  "t_enter_ns":..,"t_exit_ns":..,"state":"done","status":"VQC_OK"} */
vqc_status vqc_ledger_write_jsonl(vqc_ledger *l, FILE *f);
/* Same, into `path` through a temporary file renamed into place, so a crash
 * never leaves a half-written dump. */
vqc_status vqc_ledger_dump(vqc_ledger *l, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* VQC_LEDGER_H */
