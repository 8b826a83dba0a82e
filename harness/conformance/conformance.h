/* harness/conformance/ owns: the golden-case reader (fixture.c) and the
 *   `vqcheck conformance` handlers, one per kind.
 * May use: libvqcheck (never run/, models/ or cli/).
 *
 * conformance.h: the `vqcheck conformance` framework shared by every kind.
 *
 * `vqcheck conformance DIR` loads each golden case (fixture.h), looks its
 * "kind" up in a table of handlers and lets the handler replay the case with
 * our reference quantizers. A handler compares its outputs with the recorded
 * ones through the helpers below, which apply the contract of
 * tests/fixtures/vqpt/README.md:
 *   exact      indices, masks, counts, cutoffs, FSQ outputs;
 *   tolerance  every other float: |got - want| <= 1e-5 * max(1, |want|).
 *
 * FOR THE VQ ENGINEER (harness/conformance/conformance_vq.c is yours):
 *   define, in conformance_vq.c,
 *     const vqc_conformance_kind vqc_conformance_vq_kinds[] = {
 *         {"vq_eval", handle_vq_eval}, {"vq_ema", handle_vq_ema}, ...};
 *     const int vqc_conformance_vq_nkinds =
 *         (int)(sizeof vqc_conformance_vq_kinds /
 *               sizeof vqc_conformance_vq_kinds[0]);
 *   conformance.c looks kinds up in its own table (fsq) and then in yours,
 *   so adding a kind never touches conformance.c. Every conformance*.c file
 *   in harness/ goes into the vqc_harness library automatically.
 *
 * A handler:
 *   static vqc_status handle_x(const vqc_fixture *fx, vqc_conformance_result *r)
 *   - reads inputs with the fixture.h accessors (they return a non-OK status
 *     with a message naming the case file and field when something is
 *     missing or malformed: just propagate it with VQC_TRY);
 *   - runs the algorithm, then calls vqc_conf_expect_* once per output. Each
 *     call records the worst difference and, on a mismatch, marks r failed
 *     with a message; it returns non-OK only when the comparison cannot be
 *     made (array missing, wrong element count);
 *   - returns VQC_OK when the case ran (pass or fail is then in r), or a
 *     non-OK status with vqc_error(...) when it could not run (the runner
 *     reports the case as failed with vqc_last_error()).
 *   Take every shape and parameter from the fixture; never assume the
 *   examples' sizes (unseen cases with other parameters will be run). */
#ifndef VQC_CONFORMANCE_H
#define VQC_CONFORMANCE_H

#include <stdbool.h>
#include <stdint.h>

#include "fixture.h"
#include "vqc/status.h"

/* The float tolerance of the contract: |got - want| <= 1e-5 * max(1,|want|). */
#define VQC_CONF_TOL 1e-5

typedef enum vqc_conformance_outcome {
  VQC_CONF_PASS = 0,
  VQC_CONF_FAIL,
  VQC_CONF_SKIPPED /* unknown kind: never counted as passed */
} vqc_conformance_outcome;

/* What one case produced. The comparison helpers fill it; a handler only
 * needs to zero-initialise nothing (the runner does that) and call them. */
typedef struct vqc_conformance_result {
  vqc_conformance_outcome outcome;
  /* Worst normalised difference |got-want| / max(1,|want|) over every
   * compared element (exact comparisons included), and where it was. */
  double worst;
  char worst_array[64]; /* "" while nothing differed */
  int64_t worst_index;  /* flat (C order) element index into worst_array */
  int64_t compared;     /* elements and scalars compared so far */
  int narrays_failed;   /* outputs with at least one mismatch */
  char message[512];    /* first failure, human readable; "" on pass */
  char details[2048];   /* one line per failing output (for --verbose) */
} vqc_conformance_result;

typedef vqc_status (*vqc_conformance_fn)(const vqc_fixture *fx,
                                         vqc_conformance_result *r);

typedef struct vqc_conformance_kind {
  const char *kind; /* the case.json "kind" it handles */
  vqc_conformance_fn run;
} vqc_conformance_kind;

/* Tables of handlers. conformance_fsq.c defines the fsq one;
 * conformance_vq.c (the vq engineer's) defines the vq/rvq one. */
extern const vqc_conformance_kind vqc_conformance_fsq_kinds[];
extern const int vqc_conformance_fsq_nkinds;
extern const vqc_conformance_kind vqc_conformance_vq_kinds[];
extern const int vqc_conformance_vq_nkinds;

/* The handler for `kind`, or NULL when no table has it. */
vqc_conformance_fn vqc_conformance_find(const char *kind);

/* Records a failure message in r (first one wins) and marks it failed.
 * For handler-specific checks that are not array comparisons. */
void vqc_conf_fail(vqc_conformance_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- comparisons of buffers you already hold (name is for the report) */

/* Tolerance comparison of n floats (got vs want). NaN matches only NaN. */
void vqc_conf_compare_f32(vqc_conformance_result *r, const char *name,
                          const float *got, const float *want, int64_t n);
/* Exact comparison of n floats: equal values (0.0 == -0.0; NaN == NaN). */
void vqc_conf_compare_f32_exact(vqc_conformance_result *r, const char *name,
                                const float *got, const float *want,
                                int64_t n);
/* Exact comparison of n int64 values. */
void vqc_conf_compare_i64(vqc_conformance_result *r, const char *name,
                          const int64_t *got, const int64_t *want, int64_t n);

/* ---- comparisons against a fixture array / scalar by name.
 * Return VQC_EPARSE (with a message naming the case and the array) when the
 * array is missing, has the wrong dtype or does not hold exactly n elements;
 * a value mismatch is recorded in r and still returns VQC_OK. */
vqc_status vqc_conf_expect_f32(vqc_conformance_result *r,
                               const vqc_fixture *fx, const char *name,
                               const float *got, int64_t n);
vqc_status vqc_conf_expect_f32_exact(vqc_conformance_result *r,
                                     const vqc_fixture *fx, const char *name,
                                     const float *got, int64_t n);
vqc_status vqc_conf_expect_i64(vqc_conformance_result *r,
                               const vqc_fixture *fx, const char *name,
                               const int64_t *got, int64_t n);
/* Scalars ("scalars" object of case.json): tolerance / exact. */
vqc_status vqc_conf_expect_scalar(vqc_conformance_result *r,
                                  const vqc_fixture *fx, const char *name,
                                  double got);
vqc_status vqc_conf_expect_scalar_exact(vqc_conformance_result *r,
                                        const vqc_fixture *fx,
                                        const char *name, double got);

/* ---- running (used by cmd_conformance.c and tests) */

/* Loads the case directory `case_dir` and runs its handler. Always fills r
 * and `kind_out` (the kind, or "?" when unreadable; kind_cap bytes):
 * unreadable case -> FAIL with the reason in r->message; unknown kind ->
 * SKIPPED. */
void vqc_conformance_run_case(const char *case_dir, vqc_conformance_result *r,
                              char *kind_out, size_t kind_cap);

#endif
