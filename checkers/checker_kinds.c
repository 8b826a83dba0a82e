/* checker_kinds.c: which finding kinds each checker reports, from
 * VQC_CHECKER_LIST (checker_set.h), without the checkers themselves: the
 * reports (reports/run_data.c) ask it of a run.json, and link no checker
 * for it (nor does the fuzz target built from their sources). */
#include <string.h>

#include "checker_set.h"

static const struct {
  const char *name;
  unsigned kinds;
} kinds_of[] = {
#define VQC_CHECKER_KINDS_ROW(name, bit, ctor, kinds) {#name, (kinds)},
    VQC_CHECKER_LIST(VQC_CHECKER_KINDS_ROW)
#undef VQC_CHECKER_KINDS_ROW
};

bool vqc_checker_reports(const char *name, size_t len, vqc_finding_kind k) {
  for (size_t i = 0; i < sizeof kinds_of / sizeof kinds_of[0]; i++)
    if (strlen(kinds_of[i].name) == len &&
        strncmp(kinds_of[i].name, name, len) == 0)
      return (kinds_of[i].kinds >> k) & 1u;
  return false;
}
