/* scenario.h: a training scenario, as read from a scenario file.
 *
 * Scenario files are human-editable YAML (scenarios/NAME.yaml; the format is
 * documented in scenarios/README.md), read with libyaml so every value keeps
 * its file:line for error messages. Command-line overrides (--ranks, --steps,
 * --seed, --timeout) are applied after loading and re-validated. */
#ifndef VQC_SCENARIO_H
#define VQC_SCENARIO_H

#include <stdbool.h>
#include <stdint.h>

#include "findings.h"
#include "vqc/fault.h"
#include "vqc/status.h"

typedef enum {
  VQC_MODEL_VQ,          /* a VQ codebook trained with EMA (+ dead codes) */
  VQC_MODEL_RVQ,         /* residual VQ with quantize dropout */
  VQC_MODEL_FSQ,         /* FSQ bottleneck autoencoder (no collectives of its own) */
  VQC_MODEL_CLIP,        /* two linear towers + contrastive loss over ranks */
  VQC_MODEL_AUTOENCODER, /* encoder -> VQ -> decoder, DDP + Adam */
  VQC_MODEL_COUNT
} vqc_model_kind;
const char *vqc_model_name(vqc_model_kind m);

/* The most ranks a scenario may have: the threads backend runs them all as
 * threads of one process (lib/src/comm/comm_threads.c: 256 KiB stacks, O(N n)
 * all_reduce) and the checkers' per-step exchanges do not grow with the
 * rank count; harness/run/run_memory.c refuses up front a scenario whose ranks
 * the machine cannot hold. */
#define VQC_SCENARIO_MAX_RANKS 1024
#define VQC_SCENARIO_MAX_EXPECT 16
#define VQC_SCENARIO_MAX_LEVELS 8

/* One expected finding: kind, and optionally the step and a substring of the
 * tensor name or of the call site ("vq_ema.c" matches "lib/src/quant/vq_ema.c:57
 * vqc_vq_ema_update"). */
typedef struct vqc_expectation {
  vqc_finding_kind kind;
  int64_t step;      /* -1: any step */
  char tensor[128];  /* "": any */
  char site[128];    /* "": any */
  int line;          /* where it was written, for messages */
} vqc_expectation;

typedef struct vqc_scenario {
  char path[1024];         /* the file it came from */
  char name[128];
  char description[1024];
  vqc_model_kind model;
  /* sizes: the loader fills the ones the file leaves out with the model's
   * defaults (scenarios/README.md); sizes the model does not use stay 0. */
  int64_t dim;             /* feature dim D */
  int64_t codebook_size;   /* C */
  int num_quantizers;      /* RVQ layers Q */
  int nlevels;             /* FSQ */
  int levels[VQC_SCENARIO_MAX_LEVELS];
  int64_t hidden;          /* autoencoder / clip hidden width */
  double threshold_dead_code; /* VQ dead-code threshold (0 = off) */
  bool kmeans_init;
  int ranks;
  int steps;
  /* batch rows per rank: nbatch == 1 means every rank gets batch[0];
   * nbatch == ranks gives each rank its own (uneven allowed, 0 allowed). */
  int nbatch;
  int64_t batch[VQC_SCENARIO_MAX_RANKS];
  uint64_t seed;
  /* check options */
  int interval;
  double timeout_s;
  double tolerance;
  bool strict;
  vqc_fault fault;
  /* expectation: clean (nexpect == 0) or these findings */
  bool expect_clean;
  int nexpect;
  vqc_expectation expect[VQC_SCENARIO_MAX_EXPECT];
} vqc_scenario;

/* Reads and validates a scenario file. Every bad field gives VQC_EPARSE with
 * a message "file:line: field: what is wrong (what is expected)"; lists and
 * mappings nested more than 64 deep give "file:line:column: YAML: ..."
 * before the file is loaded (scenarios/README.md "Value syntax"). */
vqc_status vqc_scenario_load(const char *path, vqc_scenario *out);
/* Rows of `rank` at every step. */
int64_t vqc_scenario_batch(const vqc_scenario *s, int rank);
/* Applies command-line overrides (values < 0 / NULL mean "keep"), then
 * re-validates (e.g. a batch list whose length no longer matches --ranks is
 * an error naming both). */
vqc_status vqc_scenario_override(vqc_scenario *s, int ranks, int steps,
                                 int64_t seed, double timeout_s);
/* Checks the findings against the expectation: every expectation must be
 * matched by at least one finding, and a clean scenario must have none.
 * Writes a one-line explanation of the first failure into why. */
bool vqc_scenario_expectations_met(const vqc_scenario *s, vqc_findings *f,
                                   char *why, size_t why_n);

/* The expectation in one line, for tables: "clean", or the expected findings
 * joined by ", " as "kind[@step][ tensor~T][ site~S]". */
void vqc_scenario_expect_string(const vqc_scenario *s, char *out, size_t n);
/* The loaded scenario as a JSON object (new reference), every field explicit
 * (defaults filled, batch one entry per rank, seed as a decimal string so
 * that readers holding numbers in doubles keep all 64 bits). */
json_t *vqc_scenario_to_json(const vqc_scenario *s);

/* The scenario files in dir (*.yaml, *.yml; hidden ones left out), sorted:
 * *names (count entries, each malloc'd; vqc_scenario_files_free frees
 * them). Returns false with errno set when dir cannot be read or memory
 * runs out. `vqcheck list` and `vqcheck suite` list the same files. */
bool vqc_scenario_files(const char *dir, char ***names, int *count);
void vqc_scenario_files_free(char **names, int count);

#endif /* VQC_SCENARIO_H */
