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
 * Events: handlers subscribed on a comm are called on the rank's own thread,
 * BEFORE (record ENTERED, data not yet moved; a non-OK return vetoes the
 * collective, which then fails with that status) and AFTER (record closed;
 * the return value is ignored unless the collective succeeded, in which case
 * a non-OK return becomes the collective's status). */
#ifndef VQC_LEDGER_H
#define VQC_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vqc/comm.h"
#include "vqc/status.h"
#include "vqc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

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

typedef enum { VQC_EVENT_BEFORE = 0, VQC_EVENT_AFTER = 1 } vqc_event_phase;

typedef struct vqc_coll_event {
  vqc_event_phase phase;
  vqc_comm *comm;
  const vqc_ledger_record *record;
  /* The tensor passed to vqc_all_reduce_tensor (NULL for raw buffers). */
  vqc_tensor *tensor;
  /* For ALL_GATHERV: the per-rank counts (size entries); NULL otherwise. */
  const size_t *counts;
} vqc_coll_event;

typedef vqc_status (*vqc_event_fn)(const vqc_coll_event *ev, void *user);

#define VQC_MAX_SUBSCRIBERS 8
/* Handlers run in subscription order. VQC_ENOMEM when the table is full. */
vqc_status vqc_comm_subscribe(vqc_comm *c, vqc_event_fn fn, void *user);
/* Removes the (fn, user) pair; no-op if absent. */
void vqc_comm_unsubscribe(vqc_comm *c, vqc_event_fn fn, void *user);

#define VQC_LEDGER_DEFAULT_CAPACITY 65536

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
