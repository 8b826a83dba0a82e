/* checker_set.c: the checker list and the loops over it (see
 * checker_set.h). */
#include "checker_set.h"

#include <string.h>

static const struct {
  const char *name;
  unsigned bit;
  vqc_status (*ctor)(vqc_checker *out);
  unsigned kinds;
} checkers[VQC_CHECKER_COUNT] = {
#define VQC_CHECKER_ENTRY(name, bit, ctor, kinds) {#name, bit, ctor, kinds},
    VQC_CHECKER_LIST(VQC_CHECKER_ENTRY)
#undef VQC_CHECKER_ENTRY
};

void vqc_checker_set_init(vqc_checker_set *set, vqc_check_ctx *ctx) {
  memset(set, 0, sizeof *set);
  set->collective = -1;
  set->ctx = ctx;
}

vqc_status vqc_checker_set_attach(vqc_checker_set *set, unsigned bits) {
  for (int i = 0; i < VQC_CHECKER_COUNT; i++) {
    if (!(bits & checkers[i].bit)) continue;
    vqc_checker *c = &set->chk[set->attached];
    VQC_TRY(checkers[i].ctor(c));
    VQC_TRY(c->attach(c, set->ctx));
    if (checkers[i].bit == VQC_INSTR_COLLECTIVE)
      set->collective = set->attached;
    set->attached++;
  }
  return VQC_OK;
}

vqc_status vqc_checker_set_step_end(vqc_checker_set *set, int64_t step,
                                    const char **failed) {
  for (int i = 0; i < set->attached; i++) {
    vqc_checker *c = &set->chk[i];
    vqc_status s = c->step_end(c, set->ctx, step);
    if (s != VQC_OK) {
      if (failed) *failed = c->name;
      return s;
    }
  }
  return VQC_OK;
}

vqc_status vqc_checker_set_settle(vqc_checker_set *set, bool failed) {
  vqc_status first = VQC_OK;
  for (int i = 0; i < set->attached; i++) {
    vqc_checker *c = &set->chk[i];
    if (c->settle == NULL) continue;
    vqc_status s = c->settle(c, set->ctx, failed);
    if (s != VQC_OK && first == VQC_OK) first = s;
  }
  return first;
}

void vqc_checker_set_destroy(vqc_checker_set *set) {
  for (int i = 0; i < VQC_CHECKER_COUNT; i++)
    if (set->chk[i].destroy) set->chk[i].destroy(&set->chk[i], set->ctx);
  memset(set->chk, 0, sizeof set->chk);
  set->attached = 0;
  set->collective = -1;
}

