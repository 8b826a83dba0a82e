/* case_tally.h: one rank's count of failed checks in one collective test
 * case, shared by the case bodies of coll_cases.c and equiv_cases.c.
 *
 * A failed check is counted and printed to stderr as "[rank R] case: msg",
 * one write per line so lines of several ranks sharing stderr do not
 * interleave; after max_prints failures one line says the rest are only
 * counted, so a broken backend does not flood the log. */
#ifndef VQC_CASE_TALLY_H
#define VQC_CASE_TALLY_H

typedef struct vqc_case_tally {
  int rank;         /* this rank, for the messages */
  const char *name; /* the case, for the messages */
  int failures;     /* failed checks so far */
  int max_prints;   /* failures printed; later ones are only counted */
} vqc_case_tally;

/* Counts one failure and prints it (printf-style message) while fewer than
 * max_prints have been. */
void vqc_case_failf(vqc_case_tally *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* VQC_CASE_TALLY_H */
