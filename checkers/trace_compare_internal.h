/* trace_compare_internal.h: what the trace comparison's sources share; not
 * a public header (trace_compare.h is). The code was one file,
 * trace_compare.c, split by job:
 *   trace_compare_read.c      the set: finding and opening the rank-<r>
 *                             files, closing them; streaming a rank's
 *                             lines one step (its "group") at a time and
 *                             indexing the group by tensor name;
 *   trace_compare.c           the comparison: the loop over steps, the
 *                             alignment of (step, tensor, group, shard)
 *                             across ranks, the pieces without a replica,
 *                             vqc_trace_set_compare and the result;
 *   trace_compare_findings.c  what the comparison reports: the divergence
 *                             finding, the rank_failure finding for traces
 *                             that stop early, the warnings and errors
 *                             about what was not compared, the result's
 *                             program and last steps.
 * The helpers declared here were static in that one file: each is defined
 * (with its comment) in the file named above its declaration, carries the
 * prefix tc_, and none is exported from libvqcheck_checkers.so (hidden
 * visibility). */
#ifndef VQC_TRACE_COMPARE_INTERNAL_H
#define VQC_TRACE_COMPARE_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "findings.h"
#include "trace.h"
#include "trace_compare.h"
#include "vqc/status.h"

#pragma GCC visibility push(hidden)

/* ---- the set and its ranks' files (filled by trace_compare_read.c) */

/* One valid line of a trace and where it was. */
typedef struct line_rec {
  vqc_trace_record r;
  long line;
  bool handled;  /* its (tensor, group, shard) was looked at this step */
  bool compared; /* compared (or known to have no replica) */
} line_rec;

/* One rank's file while it is streamed. */
typedef struct rank_file {
  bool present;             /* the rank has a file */
  char path[4096];
  FILE *f;
  char *buf;                /* vqc_jsonl_read_line's buffer */
  size_t cap;
  long lineno;              /* lines read so far (blank ones included) */
  bool has_next;            /* `next` holds the record after the group */
  line_rec next;
  line_rec *group;          /* (n) the current step's lines, file order */
  const line_rec **byname;  /* (n) the same, sorted by tensor name */
  size_t n, gcap;
  int64_t last_step;        /* the last step read; -1 before the first */
  int64_t lines;            /* valid lines read */
  int64_t not_compared;     /* lines some other rank has no match for */
  line_rec first_not_compared;
  char program[VQC_TRACE_NAME_MAX]; /* the first "program" named; "" none */
  long program_line;        /* its line */
  /* Where its not_digested lines go (the result's; NULL: before the
   * comparison), and the last step one named (-1: none): they are read
   * past, never part of a group. */
  vqc_not_digested *not_digested;
  int64_t not_digested_step;
  vqc_trace_writer *copy;   /* NULL unless copying */
  char copy_path[4200];
  char copy_tmp[4224];      /* copy_path + ".tmp.<pid>" */
} rank_file;

struct vqc_trace_set {
  char dir[4096];
  int nranks;        /* slots: highest rank with a file + 1, or expected */
  int nfiles;        /* slots that have a file */
  rank_file *ranks;  /* (nranks) */
  json_t *warnings;  /* found while opening; moved into the result */
  bool require_comparison;
  bool compared;
};

/* ---- trace_compare_read.c */

void tc_warn(json_t *warnings, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void tc_rank_list(const int *ranks, int n, char *buf, size_t cap);
void tc_close_copy(rank_file *rf, bool keep);
vqc_status tc_read_next(rank_file *rf, int rank, json_t *warnings);
vqc_status tc_read_group(rank_file *rf, int rank, int64_t step,
                         json_t *warnings);
const line_rec *tc_find_tensor(const rank_file *rf, const char *name);

/* ---- trace_compare.c */

bool tc_same_layout(const vqc_trace_record *a, const vqc_trace_record *b);
bool tc_same_state(const vqc_trace_record *a, const vqc_trace_record *b);

/* ---- trace_compare_findings.c */

vqc_status tc_add_finding(const vqc_trace_set *s, int64_t step,
                          const line_rec *const *recs, json_t *also,
                          vqc_findings *out);
vqc_status tc_stopped_early(const vqc_trace_set *s, vqc_findings *out,
                            bool *added);
void tc_end_warnings(const vqc_trace_set *s, json_t *warnings);
void tc_pick_program(const vqc_trace_set *s, vqc_trace_compare_result *res,
                     json_t *warnings);
vqc_status tc_fill_last_steps(const vqc_trace_set *s,
                              vqc_trace_compare_result *res);
vqc_status tc_check_something_compared(const vqc_trace_set *s,
                                       const vqc_trace_compare_result *res);

#pragma GCC visibility pop

#endif /* VQC_TRACE_COMPARE_INTERNAL_H */
