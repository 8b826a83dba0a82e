/* ledger_dump.c: a rank's files in the run directory: their names
 * (rank-<r>.ledger.jsonl, .status.json, .live.jsonl) and the writer of its
 * dump (ledger_analysis.h; split out of ledger_analysis.c, see
 * ledger_analysis_internal.h). */
#include "ledger_analysis_internal.h"

#include <stdio.h>

#include "ledger_record.h"
#include "rundir.h"

/* ---- paths */

static vqc_status rank_path(const char *run_dir, int rank, const char *suffix,
                            char *buf, size_t n) {
  if (!run_dir || !buf)
    return vqc_error(VQC_EINVAL, "dump path: run_dir or buffer is NULL");
  int k = snprintf(buf, n, "%s/rank-%d.%s", run_dir, rank, suffix);
  if (k < 0 || (size_t)k >= n)
    return vqc_error(VQC_EINVAL, "dump path too long for run directory %s",
                     run_dir);
  return VQC_OK;
}

vqc_status vqc_ledger_dump_path(const char *run_dir, int rank, char *buf,
                                size_t n) {
  return rank_path(run_dir, rank, "ledger.jsonl", buf, n);
}

vqc_status vqc_status_dump_path(const char *run_dir, int rank, char *buf,
                                size_t n) {
  return rank_path(run_dir, rank, "status.json", buf, n);
}

vqc_status vqc_live_path(const char *run_dir, int rank, char *buf, size_t n) {
  return rank_path(run_dir, rank, "live.jsonl", buf, n);
}

/* ---- writing */

/* The record as an object with the fields of a ledger line
 * (ledger_record.h). */
static json_t *record_json(const vqc_ledger_record *r) {
  vqc_ledger_line l;
  vqc_ledger_line_of(r, &l);
  return vqc_ledger_line_json(&l);
}

vqc_status vqc_rank_dump_write(const char *run_dir, vqc_ledger *ledger,
                               const vqc_rank_end *end) {
  if (!run_dir || !ledger || !end)
    return vqc_error(VQC_EINVAL, "vqc_rank_dump_write: NULL argument");
  char path[4096];
  VQC_TRY(vqc_ledger_dump_path(run_dir, end->rank, path, sizeof path));
  VQC_TRY(vqc_ledger_dump(ledger, path));

  uint64_t count = vqc_ledger_count(ledger);
  json_t *j = json_object();
  json_object_set_new(j, "rank", json_integer(end->rank));
  json_object_set_new(j, "size", json_integer(end->size));
  json_object_set_new(j, "status", json_string(vqc_status_name(end->status)));
  json_object_set_new(j, "step", json_integer(end->step));
  json_object_set_new(j, "last_seq", json_integer((json_int_t)count - 1));
  json_object_set_new(j, "watchdog", json_boolean(end->watchdog));
  json_object_set_new(j, "in_flight", end->has_in_flight
                                          ? record_json(&end->in_flight)
                                          : json_null());
  vqc_status s = vqc_status_dump_path(run_dir, end->rank, path, sizeof path);
  if (s == VQC_OK)
    s = vqc_json_write_atomic(path, j, JSON_INDENT(2) | JSON_SORT_KEYS);
  json_decref(j);
  return s;
}
