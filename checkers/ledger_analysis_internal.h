/* ledger_analysis_internal.h: what the ledger analysis' sources share; not a
 * public header (ledger_analysis.h is). The code was one file,
 * ledger_analysis.c, split by job:
 *   ledger_fingerprint.c  fingerprints, site texts (vqc_fingerprint_of, ...);
 *   ledger_dump.c         a rank's file names, writing its dump;
 *   ledger_read.c         reading dumps, status files and live records'
 *                         ledger lines into per-rank record arrays, the
 *                         process groups;
 *   live_record.c         the live record: its event lines' writers and
 *                         readers (vqc_live_*), vqc_live_scan;
 *   ledger_describe.c     how the analysis tells a record and where a rank
 *                         is (for the findings' messages and details);
 *   ledger_mismatch.c     the collective_mismatch finding;
 *   ledger_analysis.c     the analysis (vqc_ledger_analyze, the process
 *                         groups' passes, report(): group, classify, emit).
 * The helpers declared here were static in that one file: each is defined
 * (with its comment) in the file named above its declaration, and none is
 * exported from libvqcheck_checkers.so (hidden visibility). */
#ifndef VQC_LEDGER_ANALYSIS_INTERNAL_H
#define VQC_LEDGER_ANALYSIS_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonl.h"
#include "ledger_analysis.h"
#include "vqc/status.h"

#pragma GCC visibility push(hidden)

/* ---- ledger_fingerprint.c */

uint64_t site_hash_parts(const char *file, int line, const char *func);

/* ---- ledger_read.c: distinct call sites */

typedef struct site_entry {
  char *file;
  char *func;
  int line;
  uint64_t hash;
} site_entry;

/* Distinct sites, with an open-addressing index (hash -> entry + 1). */
typedef struct site_table {
  site_entry *items;
  size_t n, cap;
  uint32_t *index;
  size_t nindex; /* power of two, at least 2 * cap */
} site_table;

void sites_free(site_table *t);
vqc_site site_of(const site_table *t, uint32_t id);

/* ---- ledger_read.c: what a ledger line may name (record_ops) */

typedef struct record_op {
  const char *name;
  bool redop, root;
} record_op;

extern const record_op record_ops[];
extern const char *const record_redops[];
const char *dtype_text(uint8_t code);

/* ---- ledger_read.c: one rank's dump */

typedef struct drec {
  uint64_t seq;
  int32_t op;             /* index into record_ops */
  int32_t redop;          /* index into record_redops; -1 if none */
  uint8_t dtype;          /* digest type code; 0 for none */
  uint64_t count;
  int root;
  uint32_t site;          /* index into the site table */
  vqc_record_state state;
  char status[24];
  uint64_t t_enter_ns;    /* the rank's monotonic clock; 0 if unknown */
  vqc_coll_fingerprint fp;
} drec;

typedef struct rank_dump {
  bool present;           /* records to compare: a dump, else a live file */
  bool dumped;            /* rank-<r>.ledger.jsonl exists */
  bool failed;            /* no dump and no end of its own (see the .h) */
  bool terminated;        /* no dump; ended by others (signal, killed) */
  vqc_live_info live;     /* rank-<r>.live.jsonl, when read */
  drec *recs;             /* by increasing seq */
  size_t n, cap;
  bool has_status;        /* rank-<r>.status.json exists */
  char status[24];        /* its "status" */
  int64_t step;
  bool watchdog;
} rank_dump;

/* A process group other than the world (a torch sub-group: a DeviceMesh
 * dimension, DDP(process_group=g), a pipeline stage's replicas). Its ledger
 * lines carry "group" (its world ranks) and "group_name", and their "seq"
 * counts that group's collectives only, so they are compared among its
 * members, in a pass of their own (ledger_analysis.h "Process groups"). */
typedef struct proc_group {
  char name[64];   /* "group_name"; "" when the line had none */
  int *ranks;      /* its world ranks, in the order written */
  int n;
  rank_dump *dumps; /* the run's size entries; members' records only */
} proc_group;

typedef struct proc_groups {
  proc_group *items;
  size_t n, cap;
  int size; /* the run's ranks */
} proc_groups;

vqc_status read_ledger(const char *path, int rank, site_table *sites,
                       rank_dump *d);
vqc_status read_status(const char *path, int rank, rank_dump *d,
                       int *size_out);
int size_from_names(const char *run_dir);
void groups_free(proc_groups *g);
vqc_status read_live(const char *path, int rank, site_table *sites,
                     rank_dump *d, proc_groups *groups, vqc_live_info *info);

/* ---- live_record.c */

void utf8_cut(char *s);
void live_event(const json_t *j, vqc_live_info *info);

/* ---- ledger_describe.c */

/* The state of one analysis (everything read from the run directory). */
typedef struct analysis {
  const char *run_dir;
  int size;
  rank_dump *dumps;   /* size entries */
  site_table sites;
  /* A process group's pass (group_pass): its members (size entries), whose
   * dumps hold the group's records; NULL in the world's pass. */
  const bool *member;
} analysis;

long find_seq(const rank_dump *d, uint64_t seq);
void rank_list(const int *ranks, int n, char *buf, size_t len);
/* Appends finding f to out with `detail` (owned; replaces f's own; NULL:
 * f's own) and counts it in *nadded (may be NULL); on failure the detail
 * is freed. */
vqc_status add_finding(vqc_findings *out, vqc_finding *f, json_t *detail,
                       int *nadded);
/* Appends printf output to buf (length *k, capacity n), truncating. */
void appendf(char *buf, size_t *k, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void describe_rec(const drec *r, char *buf, size_t n);
/* The same, naming the reduction even when it is the default "sum" (for a
 * mismatch in the reduction, where "sum" against "max" must be read). */
void describe_rec_redop(const drec *r, bool every_redop, char *buf,
                        size_t n);
bool in_pass(const analysis *a, int r);
json_t *record_detail(const analysis *a, const drec *r);
bool ended_cleanly(const rank_dump *d);
void last_words_text(const char *w, char *buf, size_t room);
void where_of(const analysis *a, int r, uint64_t seq, char *buf, size_t n);
vqc_coll_fingerprint *history_of(const rank_dump *d, uint64_t seq,
                                 size_t max, size_t *n);
/* How many distinct places of missing ranks a deadlock message names (the
 * detail lists every rank's). */
#define WHERE_SHOWN 4

/* ---- ledger_mismatch.c */

bool same_call(const vqc_coll_fingerprint *gfp, int ngroups);
vqc_status report_mismatch(const analysis *a, uint64_t seq, int64_t step,
                           const int *group, const vqc_coll_fingerprint *gfp,
                           const int *gn, const drec *const *grec,
                           int ngroups, int expected, vqc_findings *out,
                           int *nadded);

#pragma GCC visibility pop

#endif /* VQC_LEDGER_ANALYSIS_INTERNAL_H */
