/* harness/scenario/ owns: what a scenario is: the YAML loader
 *   (scenario.c; its pieces scenario_*.c, scenario_internal.h), the
 *   expectations and the scenario's JSON.
 * May use: checkers/ (findings), libvqcheck (never models/, run/ or cli/).
 *
 * scenario.h: a training scenario, as read from a scenario file.
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

/* The most ranks a scenario may have: the threads backend runs them all as
 * threads of one process (lib/src/comm/comm_threads.c: 256 KiB stacks, O(N n)
 * all_reduce) and the checkers' per-step exchanges do not grow with the
 * rank count; harness/run/run_memory.c refuses up front a scenario whose ranks
 * the machine cannot hold. */
#define VQC_SCENARIO_MAX_RANKS 1024
#define VQC_SCENARIO_MAX_EXPECT 16
#define VQC_SCENARIO_MAX_LEVELS 8

/* The ranges of the sizes. They are generous for real use and exist so that
 * a typo (an extra zero, a negative number) is an error at load time, not
 * an allocation failure half-way through a run. */
#define VQC_SCENARIO_MAX_DIM 65536          /* dim, hidden */
#define VQC_SCENARIO_MAX_CODEBOOK (1 << 20) /* codebook_size */
#define VQC_SCENARIO_MAX_QUANTIZERS 64
/* L = 2 needs FSQ's preserve_symmetry, which scenarios do not set
 * (lib/include/vqc/fsq.h): refused at load time rather than at run time. */
#define VQC_SCENARIO_MIN_LEVEL 3
#define VQC_SCENARIO_MAX_LEVEL 65536
#define VQC_SCENARIO_MAX_THRESHOLD 1e30

/* The sizes a scenario file may give (its `sizes:` mapping), in the order
 * messages list them and run.json writes them. One row each generates the
 * key, its range, its reader (scenario_fields.c) and its JSON
 * (scenario_json.c); the models' tables say which ones they take and their
 * defaults (model.h).
 *   X(ENUM, name, type, lo, hi, note)
 *   name    the key in the file and the vqc_scenario field
 *   type    INT (int64_t), COUNT (int), LEVELS (levels[nlevels]: lo..hi
 *           each, their product below 2^31), NUMBER (double >= lo, at
 *           most hi), FLAG (bool; lo and hi unused)
 *   note    added to "expected ..." in messages */
#define VQC_SCENARIO_SIZE_LIST(X)                                            \
  X(DIM, dim, INT, 1, VQC_SCENARIO_MAX_DIM, "")                              \
  X(CODEBOOK_SIZE, codebook_size, INT, 1, VQC_SCENARIO_MAX_CODEBOOK, "")     \
  X(NUM_QUANTIZERS, num_quantizers, COUNT, 1, VQC_SCENARIO_MAX_QUANTIZERS,  \
    "")                                                                      \
  X(LEVELS, levels, LEVELS, VQC_SCENARIO_MIN_LEVEL, VQC_SCENARIO_MAX_LEVEL,  \
    "")                                                                      \
  X(HIDDEN, hidden, INT, 1, VQC_SCENARIO_MAX_DIM, "")                        \
  X(THRESHOLD_DEAD_CODE, threshold_dead_code, NUMBER, 0,                     \
    VQC_SCENARIO_MAX_THRESHOLD, " (0 turns dead-code replacement off)")      \
  X(KMEANS_INIT, kmeans_init, FLAG, 0, 1, "")

typedef enum {
#define VQC_SIZE_ENUM(e, name, type, lo, hi, note) VQC_SIZE_##e,
  VQC_SCENARIO_SIZE_LIST(VQC_SIZE_ENUM)
#undef VQC_SIZE_ENUM
  VQC_SIZE_COUNT
} vqc_size;
/* A set of sizes as a bit mask: VQC_TAKES(DIM) | VQC_TAKES(HIDDEN). */
#define VQC_SIZE_BIT(x) (1u << (x))
#define VQC_TAKES(size) VQC_SIZE_BIT(VQC_SIZE_##size)
/* The sizes of an EMA codebook (vq, rvq, autoencoder). */
#define VQC_TAKES_CODEBOOK                                                   \
  (VQC_TAKES(CODEBOOK_SIZE) | VQC_TAKES(THRESHOLD_DEAD_CODE) |              \
   VQC_TAKES(KMEANS_INIT))

/* A model's default sizes: what the loader fills in for the sizes a file
 * leaves out. The fields are vqc_scenario's of the same names; the sizes a
 * model does not take stay 0. */
typedef struct vqc_model_sizes {
  int64_t dim, codebook_size;
  int num_quantizers;
  int nlevels;
  int levels[VQC_SCENARIO_MAX_LEVELS];
  int64_t hidden;
  double threshold_dead_code;
  bool kmeans_init;
} vqc_model_sizes;
#define VQC_DEFAULTS(...) {__VA_ARGS__}

/* The models a scenario can train, and what a scenario file may say about
 * each: X(ENUM, name, sizes, defaults)
 *   sizes     the sizes it takes (a VQC_TAKES mask); the others are refused
 *   defaults  its vqc_model_sizes for the sizes a file leaves out (small,
 *             so a scenario that only names its model runs in well under
 *             a second per step on one core)
 * What a model does is harness/models/model_<name>.c, whose ops table
 * vqc_model_<name> (model.h) answers everything else the runner and the
 * memory estimate ask: a new model is that file and one row here. The rows
 * are data only, so the scenario loader links without the models' code. */
#define VQC_MODEL_LIST(X)                                                    \
  /* a VQ codebook trained with EMA (+ dead codes) */                        \
  X(VQ, vq, VQC_TAKES(DIM) | VQC_TAKES_CODEBOOK,                             \
    VQC_DEFAULTS(.dim = 16, .codebook_size = 32))                            \
  /* residual VQ with quantize dropout */                                    \
  X(RVQ, rvq,                                                                \
    VQC_TAKES(DIM) | VQC_TAKES_CODEBOOK | VQC_TAKES(NUM_QUANTIZERS),         \
    VQC_DEFAULTS(.dim = 16, .codebook_size = 32, .num_quantizers = 4))       \
  /* FSQ bottleneck autoencoder (no collectives of its own); levels         \
   * 8,5,5,5: FSQ's paper's 1000-code setting */                             \
  X(FSQ, fsq, VQC_TAKES(DIM) | VQC_TAKES(LEVELS) | VQC_TAKES(HIDDEN),        \
    VQC_DEFAULTS(.dim = 16, .hidden = 32, .nlevels = 4,                      \
                 .levels = {8, 5, 5, 5}))                                    \
  /* two linear towers + contrastive loss over ranks */                      \
  X(CLIP, clip, VQC_TAKES(DIM) | VQC_TAKES(HIDDEN),                          \
    VQC_DEFAULTS(.dim = 16, .hidden = 32))                                   \
  /* encoder -> VQ -> decoder, DDP + Adam */                                 \
  X(AUTOENCODER, autoencoder,                                                \
    VQC_TAKES(DIM) | VQC_TAKES(HIDDEN) | VQC_TAKES_CODEBOOK,                 \
    VQC_DEFAULTS(.dim = 16, .codebook_size = 32, .hidden = 32))

typedef enum {
#define VQC_MODEL_ENUM(e, name, sizes, defaults) VQC_MODEL_##e,
  VQC_MODEL_LIST(VQC_MODEL_ENUM)
#undef VQC_MODEL_ENUM
  VQC_MODEL_COUNT
} vqc_model_kind;
/* "vq", ...; "?" outside the list. */
const char *vqc_model_name(vqc_model_kind m);

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
  /* sizes (one field per row of VQC_SCENARIO_SIZE_LIST): the loader fills
   * the ones the file leaves out with the model's defaults
   * (scenarios/README.md); sizes the model does not use stay 0. */
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
