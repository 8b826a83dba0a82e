/* watch_job_internal.h: what the sources behind watch_job.h share; not a
 * public header (watch_job.h is). The code was one file, watch_job.c,
 * split by job:
 *   watch_job.c      the process facts, run.json's "job" section, the
 *                    rank_failure, and the findings callback
 *                    (vqc_watch_more_findings), which asks the other two
 *                    first;
 *   watch_hang.c     where each rank is (hang markers, stack dumps) and
 *                    the deadlock told from the hang markers;
 *   watch_hb_hang.c  the deadlock told from the heartbeats.
 * The helpers declared here were static in that one file: each is defined
 * (with its comment) in the file named above its declaration. */
#ifndef VQC_WATCH_JOB_INTERNAL_H
#define VQC_WATCH_JOB_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "findings.h"
#include "watch_job.h"

/* ---- watch_job.c */

/* A JSON string (new reference) of the bytes b[0..n), which may be
 * anything: valid UTF-8, control characters but newline and tab as '?'. */
json_t *watch_clean_string(const char *b, size_t n);

/* The NUL-terminated s made valid UTF-8 in place (the same rule). */
void watch_clean_in_place(char *s);

/* Whether a or b (b may be NULL) holds a finding of kind k. */
bool watch_has_kind(const vqc_findings *a, const vqc_findings *b,
                    vqc_finding_kind k);

/* ---- watch_hang.c */

/* The most ranks placed: a hang's finding tells at most so many. */
#define WATCH_PLACE_MAX 4096

/* "job.py:15 (main)" (with_func) or "job.py:15". */
void watch_short_site(const vqc_watch_frame *f, bool with_func, char *buf,
                      size_t n);

/* run.json's "file:line func". */
void watch_full_site(const vqc_watch_frame *f, char *buf, size_t n);

/* Appends printf-style text to buf (n bytes) at *k, truncating. */
void watch_appendf(char *buf, size_t *k, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The process of rank r, NULL when none. */
const vqc_watch_proc *watch_proc_of(const vqc_watch_ctx *c, int r);

/* "rank 3" or "ranks 0, 2, 5" (at most 8 named, then "and N more"). */
void watch_rank_names(const int *ranks, int n, char *buf, size_t cap);

/* A deadlock finding from the hang markers, if any (into out). */
void watch_hang_finding(const vqc_watch_ctx *c, vqc_findings *known,
                        vqc_findings *out);

/* ---- watch_hb_hang.c */

/* A deadlock from the heartbeats when the watcher decided one (c->hb) and
 * no hang marker, deadlock or collective_mismatch tells it already. */
void watch_hb_finding(const vqc_watch_ctx *c, vqc_findings *known,
                      vqc_findings *out);

#endif /* VQC_WATCH_JOB_INTERNAL_H */
