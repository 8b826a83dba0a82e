/* scenario_expect.c: a scenario's expectations against the findings of its
 * run (vqc_scenario_expectations_met, with why not), and in one line for
 * tables (vqc_scenario_expect_string). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "scenario.h"

/* ---- expectations */

static bool matches(const vqc_expectation *e, const vqc_finding *x) {
  if (e->kind != x->kind) return false;
  if (e->step >= 0 && e->step != x->step) return false;
  if (e->tensor[0] && !strstr(x->tensor, e->tensor)) return false;
  if (e->site[0] && !strstr(x->site, e->site)) return false;
  return true;
}

static void describe_finding(const vqc_finding *x, char *out, size_t n) {
  int k = x->step >= 0 /* -1: no step applies */
              ? snprintf(out, n, "%s at step %" PRId64,
                         vqc_finding_kind_name(x->kind), x->step)
              : snprintf(out, n, "%s", vqc_finding_kind_name(x->kind));
  if (k < 0 || (size_t)k >= n) return;
  if (x->tensor[0]) k += snprintf(out + k, n - (size_t)k, " tensor '%s'", x->tensor);
  if (k < 0 || (size_t)k >= n) return;
  if (x->site[0]) snprintf(out + k, n - (size_t)k, " site '%s'", x->site);
}

static void describe_expectation(const vqc_expectation *e, char *out, size_t n) {
  int k = snprintf(out, n, "%s", vqc_finding_kind_name(e->kind));
  if (k >= 0 && (size_t)k < n && e->step >= 0)
    k += snprintf(out + k, n - (size_t)k, "@%" PRId64, e->step);
  if (k >= 0 && (size_t)k < n && e->tensor[0])
    k += snprintf(out + k, n - (size_t)k, " tensor~%s", e->tensor);
  if (k >= 0 && (size_t)k < n && e->site[0])
    snprintf(out + k, n - (size_t)k, " site~%s", e->site);
}

bool vqc_scenario_expectations_met(const vqc_scenario *s, vqc_findings *f,
                                   char *why, size_t why_n) {
  char scratch[8];
  if (!why || why_n == 0) {
    why = scratch;
    why_n = sizeof scratch;
  }
  why[0] = '\0';
  if (f) pthread_mutex_lock(&f->lock);
  const int count = f ? f->count : 0;
  bool met = true;
  if (s->expect_clean || s->nexpect == 0) {
    if (count > 0) {
      char first[400];
      describe_finding(&f->items[0], first, sizeof first);
      snprintf(why, why_n, "expected clean, got %d finding%s; first: %s",
               count, count == 1 ? "" : "s", first);
      met = false;
    }
  } else {
    for (int i = 0; i < s->nexpect && met; i++) {
      bool found = false;
      for (int j = 0; j < count && !found; j++)
        found = matches(&s->expect[i], &f->items[j]);
      if (found) continue;
      char want[300], got[400] = "none";
      describe_expectation(&s->expect[i], want, sizeof want);
      if (count > 0) describe_finding(&f->items[0], got, sizeof got);
      snprintf(why, why_n,
               "expected %s (line %d) but no finding matched; %d finding%s%s%s",
               want, s->expect[i].line, count, count == 1 ? "" : "s",
               count > 0 ? ", first: " : "", count > 0 ? got : "");
      met = false;
    }
  }
  if (f) pthread_mutex_unlock(&f->lock);
  return met;
}

void vqc_scenario_expect_string(const vqc_scenario *s, char *out, size_t n) {
  if (n == 0) return;
  out[0] = '\0';
  if (s->expect_clean || s->nexpect == 0) {
    snprintf(out, n, "clean");
    return;
  }
  for (int i = 0; i < s->nexpect; i++) {
    char one[300];
    describe_expectation(&s->expect[i], one, sizeof one);
    const size_t used = strlen(out);
    snprintf(out + used, n - used, "%s%s", i ? ", " : "", one);
  }
}
