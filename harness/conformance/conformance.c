/* conformance.c: the kind table lookup, the comparison helpers every
 * conformance handler uses, and running one case (see conformance.h).
 *
 * The comparison rule is the fixture contract (fixtures/vqpt/README.md):
 * exact for indices, masks, counts and FSQ outputs; |got - want| <= 1e-5 *
 * max(1, |want|) for every other float. The "worst" difference reported is
 * normalised the same way, |got - want| / max(1, |want|), for both. */
#include "conformance.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

vqc_conformance_fn vqc_conformance_find(const char *kind) {
  for (int i = 0; i < vqc_conformance_fsq_nkinds; i++)
    if (strcmp(vqc_conformance_fsq_kinds[i].kind, kind) == 0)
      return vqc_conformance_fsq_kinds[i].run;
  for (int i = 0; i < vqc_conformance_vq_nkinds; i++)
    if (strcmp(vqc_conformance_vq_kinds[i].kind, kind) == 0)
      return vqc_conformance_vq_kinds[i].run;
  return NULL;
}

/* Appends a line to r->details (silently truncated when full). */
static void add_detail(vqc_conformance_result *r, const char *line) {
  const size_t used = strlen(r->details);
  if (used + 1 < sizeof r->details)
    snprintf(r->details + used, sizeof r->details - used, "%s%s",
             used ? "\n" : "", line);
}

void vqc_conf_fail(vqc_conformance_result *r, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  r->outcome = VQC_CONF_FAIL;
  if (r->message[0] == '\0') snprintf(r->message, sizeof r->message, "%s", line);
  add_detail(r, line);
}

/* |got - want| / max(1, |want|); 0 when both are NaN or the same infinity,
 * +inf when only one is NaN or infinite. */
static double normalised_diff(double got, double want) {
  if (isnan(got) || isnan(want)) return (isnan(got) && isnan(want)) ? 0 : INFINITY;
  if (isinf(got) || isinf(want)) return got == want ? 0 : INFINITY;
  const double scale = fabs(want) > 1 ? fabs(want) : 1;
  return fabs(got - want) / scale;
}

static void note_worst(vqc_conformance_result *r, const char *name,
                       int64_t index, double diff) {
  if (diff > r->worst) {
    r->worst = diff;
    snprintf(r->worst_array, sizeof r->worst_array, "%s", name);
    r->worst_index = index;
  }
}

/* Shared loop of the float comparisons. */
static void compare_f32(vqc_conformance_result *r, const char *name,
                        const float *got, const float *want, int64_t n,
                        bool exact) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++) {
    const double diff = normalised_diff(got[i], want[i]);
    note_worst(r, name, i, diff);
    const bool same = exact ? (got[i] == want[i] ||
                               (isnan(got[i]) && isnan(want[i])))
                            : diff <= VQC_CONF_TOL;
    if (!same && bad++ == 0) first = i;
  }
  r->compared += n;
  if (bad == 0) return;
  r->narrays_failed++;
  vqc_conf_fail(r,
                "%s: %" PRId64 " of %" PRId64 " elements differ (%s); first "
                "at [%" PRId64 "]: got %.9g, want %.9g",
                name, bad, n, exact ? "exact" : "tolerance 1e-5", first,
                (double)got[first], (double)want[first]);
}

void vqc_conf_compare_f32(vqc_conformance_result *r, const char *name,
                          const float *got, const float *want, int64_t n) {
  compare_f32(r, name, got, want, n, false);
}

void vqc_conf_compare_f32_exact(vqc_conformance_result *r, const char *name,
                                const float *got, const float *want,
                                int64_t n) {
  compare_f32(r, name, got, want, n, true);
}

void vqc_conf_compare_i64(vqc_conformance_result *r, const char *name,
                          const int64_t *got, const int64_t *want,
                          int64_t n) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++) {
    note_worst(r, name, i, normalised_diff((double)got[i], (double)want[i]));
    if (got[i] != want[i] && bad++ == 0) first = i;
  }
  r->compared += n;
  if (bad == 0) return;
  r->narrays_failed++;
  vqc_conf_fail(r,
                "%s: %" PRId64 " of %" PRId64 " elements differ (exact); "
                "first at [%" PRId64 "]: got %" PRId64 ", want %" PRId64,
                name, bad, n, first, got[first], want[first]);
}

/* The fixture array `name` with dtype dt and exactly n elements. */
static vqc_status want_array(const vqc_fixture *fx, const char *name,
                             vqc_fixture_dtype dt, int64_t n,
                             const vqc_fixture_array **out) {
  VQC_TRY(vqc_fixture_array_get(fx, name, dt, out));
  if ((*out)->numel != n)
    return vqc_error(VQC_ESHAPE,
                     "%s: arrays.%s: holds %" PRId64 " elements, but the "
                     "replay produced %" PRId64,
                     vqc_fixture_json_path(fx), name, (*out)->numel, n);
  return VQC_OK;
}

vqc_status vqc_conf_expect_f32(vqc_conformance_result *r,
                               const vqc_fixture *fx, const char *name,
                               const float *got, int64_t n) {
  const vqc_fixture_array *a;
  VQC_TRY(want_array(fx, name, VQC_FIXTURE_F32, n, &a));
  compare_f32(r, name, got, a->data, n, false);
  return VQC_OK;
}

vqc_status vqc_conf_expect_f32_exact(vqc_conformance_result *r,
                                     const vqc_fixture *fx, const char *name,
                                     const float *got, int64_t n) {
  const vqc_fixture_array *a;
  VQC_TRY(want_array(fx, name, VQC_FIXTURE_F32, n, &a));
  compare_f32(r, name, got, a->data, n, true);
  return VQC_OK;
}

vqc_status vqc_conf_expect_i64(vqc_conformance_result *r,
                               const vqc_fixture *fx, const char *name,
                               const int64_t *got, int64_t n) {
  const vqc_fixture_array *a;
  VQC_TRY(want_array(fx, name, VQC_FIXTURE_I64, n, &a));
  vqc_conf_compare_i64(r, name, got, a->data, n);
  return VQC_OK;
}

static vqc_status expect_scalar(vqc_conformance_result *r,
                                const vqc_fixture *fx, const char *name,
                                double got, bool exact) {
  double want;
  VQC_TRY(vqc_fixture_scalar(fx, name, &want));
  const double diff = normalised_diff(got, want);
  note_worst(r, name, 0, diff);
  r->compared++;
  const bool same = exact ? (got == want || (isnan(got) && isnan(want)))
                          : diff <= VQC_CONF_TOL;
  if (!same) {
    r->narrays_failed++;
    vqc_conf_fail(r, "scalar %s: got %.9g, want %.9g (%s)", name, got, want,
                  exact ? "exact" : "tolerance 1e-5");
  }
  return VQC_OK;
}

vqc_status vqc_conf_expect_scalar(vqc_conformance_result *r,
                                  const vqc_fixture *fx, const char *name,
                                  double got) {
  return expect_scalar(r, fx, name, got, false);
}

vqc_status vqc_conf_expect_scalar_exact(vqc_conformance_result *r,
                                        const vqc_fixture *fx,
                                        const char *name, double got) {
  return expect_scalar(r, fx, name, got, true);
}

void vqc_conformance_run_case(const char *case_dir, vqc_conformance_result *r,
                              char *kind_out, size_t kind_cap) {
  memset(r, 0, sizeof *r);
  r->worst_index = -1;
  snprintf(kind_out, kind_cap, "?");

  vqc_fixture *fx = NULL;
  vqc_clear_error();
  vqc_status s = vqc_fixture_open(case_dir, &fx);
  if (s != VQC_OK) {
    r->outcome = VQC_CONF_FAIL;
    snprintf(r->message, sizeof r->message, "cannot read the case: %s",
             vqc_last_error());
    add_detail(r, r->message);
    /* Report the kind too if case.json at least says it. */
    char kind[64];
    if (vqc_fixture_read_kind(case_dir, kind, sizeof kind) == VQC_OK)
      snprintf(kind_out, kind_cap, "%s", kind);
    return;
  }
  snprintf(kind_out, kind_cap, "%s", vqc_fixture_kind(fx));
  vqc_conformance_fn run = vqc_conformance_find(vqc_fixture_kind(fx));
  if (!run) {
    r->outcome = VQC_CONF_SKIPPED;
    snprintf(r->message, sizeof r->message,
             "no handler for kind '%s' in this build", vqc_fixture_kind(fx));
    vqc_fixture_close(fx);
    return;
  }
  vqc_clear_error();
  s = run(fx, r);
  if (s != VQC_OK) {
    /* The stop is the headline: whatever was compared before it is
     * incomplete. Earlier mismatches stay in the details. */
    r->outcome = VQC_CONF_FAIL;
    snprintf(r->message, sizeof r->message, "the replay stopped: %s",
             vqc_last_error()[0] ? vqc_last_error() : vqc_status_message(s));
    add_detail(r, r->message);
  } else if (r->outcome != VQC_CONF_FAIL && r->compared == 0) {
    /* A handler that compared nothing proved nothing. */
    vqc_conf_fail(r, "the %s handler compared no output",
                  vqc_fixture_kind(fx));
  }
  vqc_fixture_close(fx);
}
