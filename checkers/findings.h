/* findings.h: what checkers report (DESIGN.md "A finding is a JSON object").
 *
 * A finding: kind (the shared vocabulary of docs/spec/bugs.md), step, the
 * ranks involved, the tensor (when one applies), the call site, kind-specific
 * detail (a JSON object) and a one-sentence message a person can act on.
 * Checkers append findings to a vqc_findings list; several rank threads may
 * append to the same list (threads backend), so appends are locked. The
 * report writers read findings only through this header. Where the ranks'
 * lists meet at the end of a run (the runner, the instrumentation API),
 * vqc_findings_gather and vqc_findings_merge_duplicates do the joining, so
 * both report a finding several ranks made as one finding. */
#ifndef VQC_FINDINGS_H
#define VQC_FINDINGS_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "vqc/comm.h"
#include "vqc/status.h"

#define VQC_FINDING_KIND_LIST(X)             \
  X(DIVERGENCE, "divergence")                \
  X(LOST_INPLACE, "lost_inplace")            \
  X(DEADLOCK, "deadlock")                    \
  X(COLLECTIVE_MISMATCH, "collective_mismatch") \
  X(SHAPE_MISMATCH, "shape_mismatch")        \
  X(GRADIENT_MISMATCH, "gradient_mismatch")  \
  X(RANK_FAILURE, "rank_failure")            \
  X(NONFINITE, "nonfinite")

typedef enum {
#define VQC_FINDING_ENUM(e, name) VQC_FINDING_##e,
  VQC_FINDING_KIND_LIST(VQC_FINDING_ENUM)
#undef VQC_FINDING_ENUM
  VQC_FINDING_KIND_COUNT
} vqc_finding_kind;

const char *vqc_finding_kind_name(vqc_finding_kind k);
vqc_status vqc_finding_kind_from_name(const char *name, vqc_finding_kind *out);

/* The ranks a finding can name: every rank of the largest threads run
 * (harness/scenario/scenario.h VQC_SCENARIO_MAX_RANKS). */
#define VQC_FINDING_MAX_RANKS 1024
/* A finding's JSON adds "rank_ranges" (vqc_rank_ranges_text of its ranks)
 * when it names more ranks than this: "ranks" stays the full list that
 * programs read, "rank_ranges" is what a person reads. */
#define VQC_FINDING_RANGES_FROM 8

/* A finding's strings, as bits of vqc_finding.invalid_utf8 and .truncated
 * (and the names in its JSON's "invalid_utf8" and "truncated" lists). */
enum {
  VQC_FINDING_TEXT_TENSOR = 1u << 0,
  VQC_FINDING_TEXT_SITE = 1u << 1,
  VQC_FINDING_TEXT_MESSAGE = 1u << 2,
};

/* The deepest nesting of a finding's detail run.json keeps (objects and
 * arrays inside detail, detail itself being level 1). jansson reads at most
 * 2048 levels; a detail read from a file at that limit would put run.json
 * past it (findings sit 3 levels down), and vqcheck could not read its own
 * run.json. Real details are 3 or 4 levels deep. */
#define VQC_FINDING_DETAIL_MAX_DEPTH 64

typedef struct vqc_finding {
  vqc_finding_kind kind;
  int64_t step;                    /* -1 when no step applies */
  int nranks;
  int ranks[VQC_FINDING_MAX_RANKS]; /* the ranks involved (outliers, stuck),
                                      each >= 0 */
  char tensor[128];                /* "" when none applies */
  char site[256];                  /* "file:line function", "" when none */
  json_t *detail;                  /* object, owned by the finding */
  char message[512];
  /* VQC_FINDING_TEXT_* bits: the strings whose bytes that were not UTF-8
   * became '?' (utf8.h), and those cut (where a character ends) to fit,
   * on their way into this finding; kept through the JSON form. */
  unsigned char invalid_utf8;
  unsigned char truncated;
} vqc_finding;

/* A thread-safe growable list of findings. */
typedef struct vqc_findings {
  pthread_mutex_t lock;
  vqc_finding *items;
  int count;
  int capacity;
  /* vqc_findings_insert: the last `at` asked for and where the next
   * insertion at that same `at` goes (after the ones inserted before) */
  int insert_mark, insert_next;
} vqc_findings;

void vqc_findings_init(vqc_findings *f);
/* Frees every finding's detail and the array; accepts NULL. */
void vqc_findings_free(vqc_findings *f);
/* Appends a copy of *x; the list takes ownership of x->detail (x->detail may
 * be NULL: an empty object is used). */
vqc_status vqc_findings_add(vqc_findings *f, const vqc_finding *x);
/* Starts a finding: zeroes it, sets kind, step, an empty detail object, and
 * the message from printf-style arguments (cut where a character ends when
 * it does not fit, and marked truncated). */
void vqc_finding_init(vqc_finding *x, vqc_finding_kind kind, int64_t step,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* "file:line function" from a call site (cut as the message). */
void vqc_finding_set_site(vqc_finding *x, vqc_site site);
/* Adds rank (once); a negative rank is no rank and is ignored. */
void vqc_finding_add_rank(vqc_finding *x, int rank);
/* True when the list holds a finding of this kind. */
bool vqc_findings_has(vqc_findings *f, vqc_finding_kind kind);
/* The number of findings (read under the lock: other ranks' threads may be
 * appending). */
int vqc_findings_count(vqc_findings *f);
/* Appends deep copies of src's findings (details copied) to dst, in order.
 * dst and src must be different lists. */
vqc_status vqc_findings_copy(vqc_findings *dst, vqc_findings *src);

/* Whether a and b tell one story, as the merges of several ranks'
 * findings ask (below, and checkers/findings_record.c, harness/run/
 * bridge_findings.c): always for findings at a step (each rank words what
 * it saw from its own side); for findings without one (step < 0: an MPI
 * program's), only when their messages are the same but for their
 * numbers ("rank 0's MPI_Put ..." and "rank 1's MPI_Put ..."), so that two
 * ranks' different mistakes at one call site stay two findings. */
bool vqc_finding_same_story(const vqc_finding *a, const vqc_finding *b);

/* Merges the findings several ranks recorded once each into one finding.
 * The rule: two findings are the same when kind, step, tensor and site are
 * all equal and they tell one story (vqc_finding_same_story). The first of them in list order is kept, with
 * its message and detail, and takes the union of every duplicate's ranks
 * (in order of first appearance); the duplicates are dropped and their
 * details freed. The kept findings keep their relative order. In place. */
void vqc_findings_merge_duplicates(vqc_findings *f);

/* Every rank's findings in one list, over `side` (a side channel: the data
 * comm may be broken by the time the findings are collected). Collective:
 * every rank of side calls it. Each rank sends its list `mine` as JSON; a
 * rank that passes a non-NULL `out` appends everyone's findings to it, in
 * rank order (mine's own included), a rank that passes NULL only sends.
 * Duplicates are left for vqc_findings_merge_duplicates. VQC_EPARSE when a
 * rank's findings do not parse; the exchange's error when a rank is gone.
 * (findings_gather.c.) */
vqc_status vqc_findings_gather(vqc_comm *side, vqc_findings *mine,
                               vqc_findings *out);

/* The finding as a JSON object (new reference): {"kind","step","ranks",
 * "tensor","site","detail","message"} (tensor and site omitted when empty),
 * plus "rank_ranges" when ranks has more than VQC_FINDING_RANGES_FROM
 * entries (vqc_rank_ranges_text; readers take "ranks" and may ignore it).
 *
 * Always one that vqcheck's own run.json validation accepts, whatever the
 * finding holds (issue 23): tensor, site and message go through utf8.h
 * (bytes that are not UTF-8 become '?'); the strings that had such bytes,
 * now or on their way in (x->invalid_utf8), are listed by name in
 * "invalid_utf8" (e.g. ["message"]), those cut to fit (x->truncated) in
 * "truncated"; both are left out when empty. A step below -1 is written
 * as -1, negative ranks are left out, and a detail nested deeper than
 * VQC_FINDING_DETAIL_MAX_DEPTH has its deeper levels replaced by the
 * string "(nested too deep: left out)", a NUL in one of its strings by '?'
 * (written as \u0000 it would make run.json unreadable to vqcheck). */
json_t *vqc_finding_to_json(const vqc_finding *x);
/* Parses one; VQC_EPARSE with a message naming the field otherwise: kind
 * not a known kind, step not an integer >= -1, ranks not an array of
 * integers in 0..INT_MAX, tensor, site or message present but not a
 * string, detail present but not an object. Lenient where the text is
 * concerned, so that what a rank or the bridge wrote is reported rather
 * than refused: a string longer than the finding holds (tensor 127, site
 * 255, message 511 bytes) is cut where a character ends, a NUL in it
 * becomes '?', and both are marked (truncated, invalid_utf8; the lists of
 * vqc_finding_to_json are read back too). "site" may also be the bridge's
 * object {"file", "line", "func"} (each optional), turned into "file:line
 * func" (a path too long keeps its end, func at most 40 bytes). */
vqc_status vqc_finding_from_json(const json_t *j, vqc_finding *out);
/* The whole list as a JSON array of vqc_finding_to_json objects (new
 * reference), in list order. */
json_t *vqc_findings_to_json(vqc_findings *f);

/* How ranks split when a tensor's digests have no strict majority, into
 * buf (cap bytes): "ranks 0, 1, 2 all differ" when every group is one rank
 * (3 or more), else "ranks {0, 1} and {2, 3} differ" (at most 8 groups of
 * at most 8 ranks named). group_of[r] is rank r's group (0..ngroups-1,
 * numbered by lowest rank), -1 for a rank left out. One wording for the
 * live divergence checker and `vqcheck compare`. */
void vqc_no_majority_text(const int *group_of, int n, int ngroups, char *buf,
                          size_t cap);

/* Adds x (as vqc_findings_add) at index `at` of the list, the later ones
 * moving up; several insertions at the same `at` keep their order (each
 * goes after the previous one); `at` past the end appends. For a checker
 * that finishes a step's check later (the overlapped divergence check) but
 * must list its findings where the synchronous check would have: at the
 * count the list had at that step's end. */
vqc_status vqc_findings_insert(vqc_findings *f, int at, const vqc_finding *x);

/* A set of ranks as folded ranges into buf (cap bytes): ranks[0..n) ->
 * "0-1021, 1023". A run of 3 or more consecutive ranks becomes "a-b" (two
 * are "a, b"); a run of 4 or more with one larger stride s becomes
 * "a-b (step s)" ("1-1023 (step 2)": the odd ranks). The input may be in
 * any order and hold repeats (a finding's ranks are in order of first
 * appearance): the text is of the sorted set. When the text does not fit,
 * it ends with ", ... (N ranks)" so it never lies by omission. Every
 * message that names many ranks (deadlocks, divergence outliers, rank
 * failures) uses it: at 1024 ranks a plain list is noise. */
void vqc_rank_ranges_text(const int *ranks, int n, char *buf, size_t cap);

#endif /* VQC_FINDINGS_H */
