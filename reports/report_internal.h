/* report_internal.h: what the report writers share inside reports/: the
 * loaded run (run.json, validated), the digest grid built from the traces,
 * the collective window built from the ledger dumps, the escaping helpers
 * and the renderers. Nothing here is public: callers use report.h. */
#ifndef VQC_REPORT_INTERNAL_H
#define VQC_REPORT_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "findings.h"
#include "report.h"
#include "vqc/status.h"

/* The most ranks a report reads traces and dumps for (larger worlds are
 * cut, and the report says so). */
#define REP_MAX_RANKS 4096
/* Up to this many ranks the figures and tables give every rank its own
 * row; beyond, ranks whose rows are identical share one, labelled with
 * their ranges ("ranks 0-1021, 1023"), so a 1024-rank run shows the one
 * rank that differs instead of a thousand thin rows. */
#define REP_FOLD_FROM 32

/* ---- run.json (json_report.c) */

/* One finding of run.json; every pointer is borrowed from rep_run.root. */
typedef struct rep_finding {
  const char *kind;       /* a kind of checkers/findings.h */
  long long step;         /* -1 when no step applies */
  const json_t *ranks;    /* array of integers */
  const char *tensor;     /* "" when absent */
  const char *site;       /* "" when absent */
  const json_t *detail;   /* object, or NULL when absent */
  const char *message;
} rep_finding;

/* What `vqcheck compare` compared, for a run whose environment.backend is
 * "traces" (harness/cli/cmd_compare.c writes run.json's "compare" section; its
 * comment lists the members). Pointers are borrowed from rep_run.root. A
 * member an older run.json lacks is NULL or -1, and the reports leave it
 * out. */
typedef struct rep_traces {
  bool is_traces;             /* environment.backend is "traces" */
  const char *program;        /* compare.program; NULL: the traces name none */
  const char *trace_dir;      /* compare.trace_dir, else scenario.path, "?" */
  long long steps;            /* compare.steps: steps some trace holds */
  long long steps_compared;   /* compare.steps_compared */
  long long first_step;       /* compare.first_step: -1 also when null */
  long long last_step;        /* compare.last_step */
  long long tensors_min;      /* compare.tensors_per_step_min */
  long long tensors_max;      /* compare.tensors_per_step */
  long long digests_compared; /* compare.digests_compared */
  const json_t *rank_last_step; /* compare.rank_last_step: array of integers
                                   >= 0 or null; NULL when absent */
} rep_traces;

typedef struct rep_run {
  char run_dir[4096];
  char path[4200];        /* run_dir/run.json, for messages */
  json_t *root;           /* the whole document, owned */
  /* Borrowed from root, validated: */
  const char *name;       /* scenario.name */
  const char *backend;    /* environment.backend */
  int ranks;              /* environment.ranks (>= 1) */
  int exit_code;          /* 0..3 */
  const char *training_status;  /* training.status, e.g. "VQC_OK" */
  const char *training_message; /* training.message ("" when absent) */
  long long steps_done;   /* training.steps_done */
  double duration_s;      /* duration_s, 0 when absent */
  rep_finding *findings;  /* (nfindings), owned; their strings are not */
  int nfindings;
  rep_traces traces;      /* is_traces false for scenario runs, programs */
} rep_run;

/* Loads and validates run_dir/run.json into *out (the caller frees it with
 * rep_run_free, also after an error). VQC_EIO when unreadable, VQC_EPARSE
 * "path: field 'x.y': ..." for a schema violation. */
vqc_status rep_run_load(const char *run_dir, rep_run *out);
void rep_run_free(rep_run *r);

/* The run's verdict: "clean", "findings" or "error" (exit 3 without a
 * finding that explains it). */
const char *rep_verdict(const rep_run *r);

/* Member `key` of the object at `path` ("scenario.name") as a string, or
 * fallback. Never NULL when fallback is not. */
const char *rep_str(const json_t *root, const char *path, const char *fallback);

/* "1, 2, 3" from a finding's ranks array ("" when empty); a list of more
 * than VQC_FINDING_RANGES_FROM ranks folded into ranges ("0-1021, 1023",
 * vqc_rank_ranges_text), as run.json's "rank_ranges". */
void rep_ranks_text(const json_t *ranks, char *buf, size_t n);

/* A number from JSON: a real or an integer, or the strings "nan", "inf",
 * "-inf" the checkers write for non-finite values. False otherwise. */
bool rep_json_number(const json_t *v, double *out);

/* ---- a comparison of traces (trace_run.c) */

/* Fills r->traces from r->root (after environment.backend was read):
 * is_traces false, and nothing read, unless the backend is "traces".
 * VQC_EPARSE "path: field 'compare.x': ..." for a mistyped member. */
vqc_status rep_traces_load(rep_run *r);

/* "0..9 (10 steps)", "0..4 (5 steps; the traces hold 10)", "none" or
 * "(not recorded)" into buf: the steps compared. */
void rep_traces_steps_text(const rep_traces *t, char *buf, size_t n);

/* "16" or "12..16" (fewest..most) into buf; "(not recorded)". */
void rep_traces_tensors_text(const rep_traces *t, char *buf, size_t n);

/* "step 9: ranks 0, 1, 3; step 4: rank 2; no step: rank 5" into buf when
 * the ranks' traces end at different steps (from the furthest down, at
 * most 8 steps of at most 8 ranks each); "" when they all end together or
 * it was not recorded. */
void rep_traces_last_steps_text(const rep_traces *t, char *buf, size_t n);

/* The collective checks (deadlock, collective_mismatch) that did not run
 * (rep_check), for the note that replaces the collective timeline of a
 * trace comparison, with the reasons run.json's checks_not_run gives, each
 * reason once: "deadlock, collective_mismatch: traces hold no collective
 * ledger: ..." (or "deadlock: why; collective_mismatch: other why") into
 * buf. Returns how many did not run (0: buf is "", say nothing). */
int rep_collectives_not_run(const rep_run *r, char *buf, size_t n);

/* ---- what was not compared (not_compared.c) */

/* The lines of the "Not compared" section (issue 24), a new JSON array of
 * strings, empty when there is nothing to say (or NULL without memory):
 * "no replica: not comparable: N lines, K tensors: name (shard), ..." and
 * one "not digested: TENSOR on ranks 0, 1: WHY" per tensor and reason,
 * from run.json's "analysis" (else "compare") section. Plain text: each
 * renderer escapes it. Never a finding, never part of the verdict. */
json_t *rep_not_compared_lines(const rep_run *r);

/* The lines of the "Warnings" section: the analysis' warnings (run.json's
 * "analysis" (else "compare") "warnings": MPI objects never freed, uneven
 * ends, records it could not read), at most REP_NC_LINES of them and a
 * line counting the rest; a new JSON array of strings, empty when there
 * are none (NULL without memory). Plain text; never a finding, never part
 * of the verdict. */
json_t *rep_warning_lines(const rep_run *r);

/* ---- which checks ran (run_data.c) */

typedef enum {
  REP_CHECK_PASSED,  /* it ran and found nothing */
  REP_CHECK_FAILED,  /* a finding of its kind is in run.json */
  REP_CHECK_NOT_RUN  /* not known to have run: never shown as passed */
} rep_check_state;

/* The state of the check of finding kind k. FAILED when run.json holds a
 * finding of that kind (a finding proves the check ran); else PASSED when
 * run.json records that it ran; else NOT_RUN, with *why saying why (never
 * NULL; *why is "" for the other states).
 *
 * How run.json records it: "checks", an array of the finding kinds that
 * were checked, with "checks_not_run", an object {kind: reason} (optional,
 * for the reasons shown). Without "checks", by the writer's subject (older
 * files; rundir.h): a vqcheck scenario run ("scenario" with a "fault", the
 * runner, which attaches every checker) checked every kind; an
 * instrumented program ("check": {"checkers": "collective,divergence,..."})
 * checked the kinds of its checkers (collective: deadlock,
 * collective_mismatch, rank_failure; divergence: divergence, nonfinite;
 * lost_inplace; shape: shape_mismatch; equivalence: gradient_mismatch);
 * any other file checked no kind known: each without a finding is
 * NOT_RUN. Whatever run.json says, divergence is NOT_RUN on one rank
 * (environment.ranks 1), with REP_ONE_RANK_WHY: there is no second copy to
 * compare, so it never passes. */
#define REP_ONE_RANK_WHY "1 rank: nothing to compare"
rep_check_state rep_check(const rep_run *r, vqc_finding_kind k,
                          const char **why);

/* ---- traces (run_data.c) */

#define REP_CELL_MISSING (-1)

/* Per step and rank: does the rank's digest set (tensor name, dtype, shape,
 * algorithm, digest) equal the reference rank's? */
typedef struct rep_grid {
  int nranks;          /* rows: ranks 0..nranks-1 */
  bool any;            /* some rank left a trace */
  int ref_rank;        /* the reference rank; -1 when !any */
  bool *has_trace;     /* (nranks) */
  int nsteps;
  int64_t *steps;      /* (nsteps) increasing: every step some rank traced */
  /* (nranks * nsteps), row-major by rank: REP_CELL_MISSING when the rank or
   * the reference traced nothing at that step, else the number of tensors
   * whose entries differ (present on one side only counts too). */
  int *cell;
  int *ntensors;       /* (nsteps) tensors the reference traced per step */
  /* (nsteps) tensors whose ranks split with no majority at the step (no
   * group of equal digests strictly larger than every other, among the
   * ranks that traced the step; a rank without the tensor is a group of
   * its own kind). At such a step the reference rank is a tie-break, not a
   * majority: every rank that traced it is shown as disagreeing. */
  int *nomajority;
} rep_grid;

/* ---- ledger dumps (run_data.c) */

typedef enum { REP_COLL_ABSENT = 0, REP_COLL_ENTERED, REP_COLL_DONE,
               REP_COLL_FAILED } rep_coll_state;

/* One rank's record of one sequence number, as read from its dump. */
typedef struct rep_coll {
  rep_coll_state state;  /* ABSENT: the rank never got to this seq */
  char op[16];           /* "all_reduce" */
  char describe[96];     /* "all_reduce(float32, count 16, sum)" */
  char site[320];        /* "lib/src/quant/vq_ema.c:35 reduce_counts" */
  char status[24];       /* "VQC_OK" */
} rep_coll;

/* A window of sequence numbers around the collective the ranks got stuck in
 * (or the last ones, when nothing is stuck), for every rank. */
typedef struct rep_timeline {
  int nranks;
  bool any;              /* some rank left a dump */
  bool *has_dump;        /* (nranks) */
  int64_t *last_seq;     /* (nranks) highest seq in the dump; -1 if none */
  uint64_t first;        /* window: seq first .. first + ncols - 1 */
  int ncols;
  bool has_focus;
  uint64_t focus;        /* the stuck collective's seq */
  char focus_why[96];    /* where focus came from, for the reader */
  rep_coll *cells;       /* (nranks * ncols), row-major by rank */
} rep_timeline;

/* Everything a report is made from. */
typedef struct rep_data {
  rep_run run;
  rep_grid grid;
  rep_timeline tl;
} rep_data;

/* Loads run.json, and when `with_traces` also the traces and ledger dumps.
 * The caller frees *out with rep_data_free, also after an error. */
vqc_status rep_data_load(const char *run_dir, bool with_traces, rep_data *out);
void rep_data_free(rep_data *d);

/* The worst (largest) cell of a step over the ranks; REP_CELL_MISSING when
 * every rank is missing there. */
int rep_grid_worst(const rep_grid *g, int step_index);

/* ---- folding ranks (run_data.c)
 *
 * Ranks whose rows are identical form a group; groups are numbered from 0
 * in the order of their lowest rank. Each fills group_of (nranks entries)
 * and returns the number of groups. Without memory for the hashes every
 * rank is its own group. */

/* The digest grid: has_trace and every step's cell equal. */
int rep_grid_groups(const rep_grid *g, int *group_of);
/* The timeline: has_dump and, at column `col` (every column when col < 0),
 * state, collective, site and status equal (and, where a rank never
 * reached it, where its dump ends). */
int rep_timeline_groups(const rep_timeline *t, int col, int *group_of);
/* The ranks of group g as ranges into buf ("3", "0-1021, 1023"); *count
 * (when not NULL) gets how many there are. */
void rep_group_text(const int *group_of, int nranks, int g, char *buf,
                    size_t n, int *count);

/* ---- escaping (escape.c) */

/* Text or attribute value for HTML: & < > " ' escaped, control characters
 * (other than tab and newline) replaced by U+FFFD. */
void rep_html(FILE *f, const char *s);
/* The same for XML 1.0 (&apos; for '): also valid inside attributes. */
void rep_xml(FILE *f, const char *s);
/* Inline Markdown text: characters that would change how it renders
 * (\ ` * [ < > | &, an underscore at a word edge, a leading #)
 * backslash-escaped, newlines as spaces. */
void rep_md(FILE *f, const char *s);
/* A Markdown code span long enough for any backtick run in s; inside a
 * table `|` becomes `\|` (GFM reads the cell split before the span). */
void rep_md_code(FILE *f, const char *s, bool in_table);
/* The longest run of backticks in s (for fenced blocks). */
int rep_md_backtick_run(const char *s);

/* ---- renderers (markdown.c, html.c, junit.c, svg.c, json_report.c) */

vqc_status rep_render_md(const rep_data *d, FILE *out);
vqc_status rep_render_html(const rep_data *d, FILE *out);
vqc_status rep_render_junit(const rep_run *r, FILE *out);
vqc_status rep_render_json(const rep_run *r, FILE *out);
vqc_status rep_render_junit_suite(const char *suite_name,
                                  const vqc_suite_case *cases, int ncases,
                                  FILE *out);
vqc_status rep_render_md_suite(const char *suite_name,
                               const vqc_suite_case *cases, int ncases,
                               FILE *out);

/* The "Job" section of a run `vqcheck watch` wrote (run.json "job"):
 * nothing when run.json has none (job.c). */
void rep_render_md_job(FILE *f, const rep_run *r);
/* Whether run.json is one `vqcheck watch` wrote (it has a "job" section):
 * a job, not a scenario (job.c). */
bool rep_watched_job(const rep_run *r);
/* Whether r ran no training of vqcheck's own (a watched job, or traces
 * compared offline): an error there is "no verdict", never "training
 * stopped". */
bool rep_no_training(const rep_run *r);
/* A run `vqcheck watch` wrote, told in one line for the report's head
 * ("an MPI program, checked through the PMPI interposer in each rank, under
 * vqcheck watch ...: 3 ranks, ran 1.20 s; ..."), instead of a scenario's
 * facts it does not have: true and buf filled (unescaped) when run.json has
 * a "job" section, false otherwise (job.c). */
bool rep_job_facts_text(const rep_run *r, char *buf, size_t n);
void rep_render_html_job(FILE *f, const rep_run *r);

/* SVG figures, each one <svg> element with the given id and child elements
 * even when there is nothing to draw (then a text saying why). */
void rep_svg_heatmap(FILE *f, const rep_grid *g);
void rep_svg_divergence(FILE *f, const rep_data *d);
void rep_svg_timeline(FILE *f, const rep_timeline *t);

#endif /* VQC_REPORT_INTERNAL_H */
