/* scenario_internal.h: what the scenario loader's sources share; not a
 * public header (scenario.h is). The code was one file, scenario.c, split
 * by job:
 *   scenario.c         the models' names; reading the file (its size, its
 *                      nesting depth, libyaml's document) and
 *                      vqc_scenario_load; batch and overrides; listing a
 *                      folder of scenarios;
 *   scenario_yaml.c    YAML nodes as typed values: the error messages
 *                      (file:line: field: ...), the scalar readers, the
 *                      mappings' known keys;
 *   scenario_fields.c  the schema: each section of a scenario file read
 *                      into vqc_scenario, the sizes and their defaults;
 *   scenario_expect.c  expectations against findings, and in one line;
 *   scenario_json.c    the loaded scenario as a JSON object.
 * The helpers declared here were static in that one file: each is defined
 * (with its comment) in the file named above its declaration, its name
 * prefixed scn_. */
#ifndef VQC_SCENARIO_INTERNAL_H
#define VQC_SCENARIO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "scenario.h"
#include "vqc/status.h"

/* Ranges besides the sizes' (scenario.h). Like those, they are generous
 * for real use and exist so that a typo is an error at load time. */
#define MAX_STEPS 1000000
#define MAX_BATCH (1 << 20)         /* rows per rank per step */
#define MAX_INTERVAL 1000000
#define MAX_TIMEOUT_S 86400.0       /* a day: longer is a typo, not a wait */
/* One replicated matrix (dim x codebook_size, dim x hidden) at most: 2^28
 * floats, 1 GiB of f32. */
#define MAX_STATE_FLOATS_LOG2 28
#define MAX_STATE_FLOATS ((int64_t)1 << MAX_STATE_FLOATS_LOG2)
/* FSQ's index must fit an int32 (lib/include/vqc/fsq.h): the product of
 * the levels stays below 2^31. */
#define MAX_FSQ_CODES_LOG2 31
#define MAX_FSQ_CODES ((int64_t)1 << MAX_FSQ_CODES_LOG2)

#define BIT(x) (1u << (x))

/* ---- scenario.c: models: what a scenario file may say about each
 * (VQC_MODEL_LIST) */

typedef struct model_info {
  const char *name;
  unsigned sizes;           /* VQC_TAKES mask: the sizes it takes */
  vqc_model_sizes defaults; /* for the sizes the file leaves out */
} model_info;

extern const model_info scn_model_info[VQC_MODEL_COUNT];
void scn_model_names(char *out, size_t n);

/* ---- scenario_yaml.c: the loader's context and error helpers */

typedef struct loader {
  const char *path;
  yaml_document_t *doc;
  vqc_scenario *s;
} loader;

int scn_node_line(const yaml_node_t *n);
vqc_status scn_fail(const loader *L, int line, const char *field,
                    const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool scn_is_scalar(const yaml_node_t *n);
const char *scn_scalar(const yaml_node_t *n);
bool scn_is_null(const yaml_node_t *n);
vqc_status scn_fail_type(const loader *L, const yaml_node_t *n,
                         const char *field, const char *expected);

/* ---- scenario_yaml.c: scalar readers */

bool scn_plain_text(const yaml_node_t *n);
vqc_status scn_read_int(const loader *L, const yaml_node_t *n,
                        const char *field, int64_t lo, int64_t hi,
                        int64_t *out);
vqc_status scn_read_u64(const loader *L, const yaml_node_t *n,
                        const char *field, uint64_t *out);
vqc_status scn_read_double(const loader *L, const yaml_node_t *n,
                           const char *field, double lo, bool lo_open,
                           double hi, const char *expected, double *out);
vqc_status scn_read_bool(const loader *L, const yaml_node_t *n,
                         const char *field, bool *out);
vqc_status scn_read_string(const loader *L, const yaml_node_t *n,
                           const char *field, char *dst, size_t cap,
                           bool allow_newlines);

/* ---- scenario_yaml.c: mappings: known keys, each at most once */

#define MAX_FIELDS 16

typedef struct field_set {
  const char *const *names; /* (n,) the keys this mapping may hold */
  int n;
  const yaml_node_t *value[MAX_FIELDS]; /* NULL: not given */
  int key_line[MAX_FIELDS];
} field_set;

void scn_join_names(const char *const *names, int n, unsigned mask,
                    char *out, size_t size);
vqc_status scn_collect(const loader *L, const yaml_node_t *map,
                       const char *what, const char *prefix, field_set *fs);

/* ---- scenario_fields.c: the sections of a scenario */

vqc_status scn_read_scenario(const loader *L, const yaml_node_t *root);

#endif /* VQC_SCENARIO_INTERNAL_H */
