/* checker_set.h: the checkers vqcheck runs, in the order they attach, and
 * the loops that drive them (checker.h), shared by everything that runs
 * them: the scenario runner (harness/run/runner.c, every checker), the
 * instrumentation session (instrument.c, those its options name) and
 * bench_scale (the divergence checker alone).
 *
 * VQC_CHECKER_LIST is the one list: X(name, instrument bit, constructor,
 * kinds), with name the checker's vqc_checker.name and its name in an
 * instrumented run.json's "checkers" (rundir.h), the bit its
 * VQC_INSTR_* (vqc/instrument.h), and kinds the finding kinds it reports
 * (a mask of VQC_CHECKER_KIND bits). The collective checker comes first:
 * in strict mode its BEFORE handler must veto a mismatched collective
 * before any other subscriber looks at it, and its finish is where the
 * ranks agree on how the run ended.
 *
 * The finish loop stays with each caller: the runner passes a checker's
 * failure at the end on to the checkers after it as the rank's status,
 * the session does not. */
#ifndef VQC_CHECKER_SET_H
#define VQC_CHECKER_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkers.h"
#include "vqc/instrument.h" /* VQC_INSTR_* */

/* The bit of finding kind k in a checker's kinds. */
#define VQC_CHECKER_KIND(k) (1u << VQC_FINDING_##k)

#define VQC_CHECKER_LIST(X)                                                \
  X(collective, VQC_INSTR_COLLECTIVE, vqc_checker_collective,              \
    VQC_CHECKER_KIND(DEADLOCK) | VQC_CHECKER_KIND(COLLECTIVE_MISMATCH) |    \
        VQC_CHECKER_KIND(RANK_FAILURE))                                    \
  X(divergence, VQC_INSTR_DIVERGENCE, vqc_checker_divergence,              \
    VQC_CHECKER_KIND(DIVERGENCE) | VQC_CHECKER_KIND(NONFINITE))             \
  X(lost_inplace, VQC_INSTR_LOST_INPLACE, vqc_checker_lost_inplace,        \
    VQC_CHECKER_KIND(LOST_INPLACE))                                        \
  X(shape, VQC_INSTR_SHAPE, vqc_checker_shape,                             \
    VQC_CHECKER_KIND(SHAPE_MISMATCH))                                      \
  X(equivalence, VQC_INSTR_EQUIVALENCE, vqc_checker_equivalence,           \
    VQC_CHECKER_KIND(GRADIENT_MISMATCH))

enum {
#define VQC_CHECKER_COUNT_ONE(name, bit, ctor, kinds) +1
  VQC_CHECKER_COUNT = 0 VQC_CHECKER_LIST(VQC_CHECKER_COUNT_ONE),
#undef VQC_CHECKER_COUNT_ONE
  /* Every checker's bit. */
#define VQC_CHECKER_BIT_ONE(name, bit, ctor, kinds) | (bit)
  VQC_CHECKER_ALL = 0u VQC_CHECKER_LIST(VQC_CHECKER_BIT_ONE)
#undef VQC_CHECKER_BIT_ONE
};

/* One rank's checkers: chk[0 .. attached) attached, in list order. */
typedef struct vqc_checker_set {
  vqc_checker chk[VQC_CHECKER_COUNT];
  int attached;
  int collective;      /* index in chk of the collective checker; -1 none */
  vqc_check_ctx *ctx;  /* the rank's (borrowed; outlives the set) */
} vqc_checker_set;

/* An empty set over ctx. */
void vqc_checker_set_init(vqc_checker_set *set, vqc_check_ctx *ctx);

/* Builds and attaches, in list order, each checker whose bit is in
 * `bits`; stops at the first failure and returns it (the checkers attached
 * before it stay attached, and vqc_checker_set_destroy frees them all). */
vqc_status vqc_checker_set_attach(vqc_checker_set *set, unsigned bits);

/* step_end of every attached checker, in order, up to the first failure,
 * which is returned (*failed, when not NULL: that checker's name, with
 * vqc_last_error() its message). */
vqc_status vqc_checker_set_step_end(vqc_checker_set *set, int64_t step,
                                    const char **failed);

/* settle (checker.h) of every attached checker that has one: all of them,
 * whatever one returns, so the ranks' exchanges pair up; the first
 * failure. */
vqc_status vqc_checker_set_settle(vqc_checker_set *set, bool failed);

/* Destroys every checker built (attached or not); the set is empty. */
void vqc_checker_set_destroy(vqc_checker_set *set);

/* Whether the checker named by the len bytes at name (as in
 * VQC_CHECKER_LIST) reports finding kind k; false for no such checker
 * (checker_kinds.c: links none of the checkers). */
bool vqc_checker_reports(const char *name, size_t len, vqc_finding_kind k);

#endif /* VQC_CHECKER_SET_H */
