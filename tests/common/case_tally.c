/* case_tally.c: counting and printing failed checks (see case_tally.h). */
#include "case_tally.h"

#include <stdarg.h>
#include <stdio.h>

void vqc_case_failf(vqc_case_tally *t, const char *fmt, ...) {
  t->failures++;
  if (t->failures > t->max_prints + 1) return;
  if (t->failures == t->max_prints + 1) {
    fprintf(stderr, "[rank %d] %s: further failures not printed\n", t->rank,
            t->name);
    return;
  }
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* One write per line, so lines of several ranks do not interleave. */
  fprintf(stderr, "[rank %d] %s: %s\n", t->rank, t->name, msg);
  fflush(stderr);
}
