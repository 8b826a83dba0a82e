/* scenario_fields.c: the scenario schema: walks a scenario file's YAML
 * document (scn_read_scenario, from vqc_scenario_load in scenario.c) section
 * by section into a vqc_scenario, in the README's order, with the model's
 * defaults for the sizes the file leaves out and the ranges of
 * scenario_internal.h. Scalars and mappings are read by scenario_yaml.c. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "scenario.h"
#include "scenario_internal.h"

/* ---- the sections of a scenario */

enum {
  F_NAME,
  F_DESCRIPTION,
  F_MODEL,
  F_SIZES,
  F_RANKS,
  F_STEPS,
  F_BATCH,
  F_SEED,
  F_CHECK,
  F_FAULT,
  F_EXPECT,
  F_COUNT
};
static const char *const top_names[F_COUNT] = {
    "name",  "description", "model", "sizes", "ranks", "steps",
    "batch", "seed",        "check", "fault", "expect"};

static vqc_status read_name(const loader *L, const yaml_node_t *n) {
  VQC_TRY(scn_read_string(L, n, "name", L->s->name, sizeof L->s->name, false));
  for (const char *p = L->s->name; *p; p++) {
    const bool ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                    *p == '_' || *p == '-';
    if (!ok)
      return scn_fail(L, scn_node_line(n), "name",
                      "'%s' has the character '%c' (expected lower-case letters, "
                      "digits, '_' and '-': [a-z0-9_-]+)",
                      L->s->name, *p);
  }
  return VQC_OK;
}

static vqc_status read_model(const loader *L, const yaml_node_t *n) {
  char names[128], expected[160];
  scn_model_names(names, sizeof names);
  snprintf(expected, sizeof expected, "one of %s", names);
  if (scn_is_scalar(n) && !scn_is_null(n)) {
    for (int m = 0; m < VQC_MODEL_COUNT; m++) {
      if (strcmp(scn_scalar(n), scn_model_info[m].name) == 0) {
        L->s->model = (vqc_model_kind)m;
        return VQC_OK;
      }
    }
  }
  return scn_fail_type(L, n, "model", expected);
}

/* ---- sizes: VQC_SCENARIO_SIZE_LIST (scenario.h) gives each its key, type
 * and range; below, one reader per type, named read_size_<type> so that
 * the list can call it (the JSON writers, size_json_<type>, are
 * scenario_json.c's). */

static const char *const size_names[VQC_SIZE_COUNT] = {
#define SIZE_NAME(e, name, type, lo, hi, note) #name,
    VQC_SCENARIO_SIZE_LIST(SIZE_NAME)
#undef SIZE_NAME
};

static vqc_status read_size_INT(const loader *L, const yaml_node_t *n,
                                const char *field, int64_t lo, int64_t hi,
                                const char *note, int64_t *out) {
  (void)note;
  return scn_read_int(L, n, field, lo, hi, out);
}

static vqc_status read_size_COUNT(const loader *L, const yaml_node_t *n,
                                  const char *field, int64_t lo, int64_t hi,
                                  const char *note, int *out) {
  (void)note;
  int64_t v;
  VQC_TRY(scn_read_int(L, n, field, lo, hi, &v));
  *out = (int)v;
  return VQC_OK;
}

/* A list of 1..VQC_SCENARIO_MAX_LEVELS integers lo..hi into *out, their
 * count into the scenario's nlevels. */
static vqc_status read_size_LEVELS(const loader *L, const yaml_node_t *n,
                                   const char *field, int64_t lo, int64_t hi,
                                   const char *note,
                                   int (*out)[VQC_SCENARIO_MAX_LEVELS]) {
  (void)note;
  char expected[128];
  snprintf(expected, sizeof expected,
           "a list of 1..%d integers %" PRId64 "..%" PRId64
           " whose product is below 2^%d",
           VQC_SCENARIO_MAX_LEVELS, lo, hi, MAX_FSQ_CODES_LOG2);
  if (!n || n->type != YAML_SEQUENCE_NODE)
    return scn_fail_type(L, n, field, expected);
  const int count =
      (int)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (count < 1 || count > VQC_SCENARIO_MAX_LEVELS)
    return scn_fail(L, scn_node_line(n), field, "%d levels (expected %s)",
                    count, expected);
  int64_t codes = 1;
  for (int i = 0; i < count; i++) {
    const yaml_node_t *item =
        yaml_document_get_node(L->doc, n->data.sequence.items.start[i]);
    char item_field[64];
    snprintf(item_field, sizeof item_field, "%s[%d]", field, i);
    int64_t v;
    VQC_TRY(scn_read_int(L, item, item_field, lo, hi, &v));
    codes *= v; /* <= 2^31 * 2^16 before the check below: no overflow */
    if (codes >= MAX_FSQ_CODES)
      return scn_fail(L, scn_node_line(item), item_field,
                      "the product of the levels reaches %" PRId64
                      " (expected %s: FSQ indices are int32)",
                      codes, expected);
    (*out)[i] = (int)v;
  }
  L->s->nlevels = count;
  return VQC_OK;
}

/* A finite number >= lo, at most hi. */
static vqc_status read_size_NUMBER(const loader *L, const yaml_node_t *n,
                                   const char *field, double lo, double hi,
                                   const char *note, double *out) {
  char expected[128];
  snprintf(expected, sizeof expected, "a number >= %g%s", lo, note);
  return scn_read_double(L, n, field, lo, false, hi, expected, out);
}

static vqc_status read_size_FLAG(const loader *L, const yaml_node_t *n,
                                 const char *field, int lo, int hi,
                                 const char *note, bool *out) {
  (void)lo, (void)hi, (void)note;
  return scn_read_bool(L, n, field, out);
}

/* Reads size `id` from its node n into the scenario. */
static vqc_status read_size(const loader *L, vqc_size id,
                            const yaml_node_t *n) {
  vqc_scenario *s = L->s;
  char field[48];
  snprintf(field, sizeof field, "sizes.%s", size_names[id]);
  switch (id) {
#define SIZE_READ(e, name, type, lo, hi, note)                              \
  case VQC_SIZE_##e:                                                        \
    return read_size_##type(L, n, field, lo, hi, note, &s->name);
    VQC_SCENARIO_SIZE_LIST(SIZE_READ)
#undef SIZE_READ
    case VQC_SIZE_COUNT:
      break;
  }
  return VQC_OK;
}

/* The model's defaults, for the sizes the file leaves out. */
static void apply_defaults(vqc_scenario *s, const vqc_model_sizes *d) {
  s->dim = d->dim;
  s->codebook_size = d->codebook_size;
  s->num_quantizers = d->num_quantizers;
  s->nlevels = d->nlevels;
  for (int i = 0; i < d->nlevels; i++) s->levels[i] = d->levels[i];
  s->hidden = d->hidden;
  s->threshold_dead_code = d->threshold_dead_code;
  s->kmeans_init = d->kmeans_init;
}

static vqc_status read_sizes(const loader *L, const yaml_node_t *n) {
  vqc_scenario *s = L->s;
  const model_info *model = &scn_model_info[s->model];
  /* Defaults first; the file overrides. */
  apply_defaults(s, &model->defaults);
  if (!n) return VQC_OK;

  field_set fs = {.names = size_names, .n = VQC_SIZE_COUNT};
  VQC_TRY(scn_collect(L, n, "sizes", "sizes.", &fs));
  char takes[160];
  scn_join_names(size_names, VQC_SIZE_COUNT, model->sizes, takes, sizeof takes);
  for (int i = 0; i < VQC_SIZE_COUNT; i++) {
    if (!fs.value[i] || (model->sizes & VQC_SIZE_BIT(i))) continue;
    char field[48];
    snprintf(field, sizeof field, "sizes.%s", size_names[i]);
    return scn_fail(L, fs.key_line[i], field,
                    "not used by model %s (expected only %s for %s)", model->name,
                    takes, model->name);
  }
  /* The scalars in the list's order, then the levels list: the order the
   * loader has always named the first bad size in (levels and hidden are
   * the only two a model takes together out of the list's order). */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < VQC_SIZE_COUNT; i++)
      if (fs.value[i] && (i == VQC_SIZE_LEVELS) == (pass == 1))
        VQC_TRY(read_size(L, (vqc_size)i, fs.value[i]));

  /* Keep each replicated matrix allocatable (see MAX_STATE_FLOATS). */
  const int64_t cb = s->dim * s->codebook_size;
  const int64_t hd = s->dim * s->hidden;
  if (cb > MAX_STATE_FLOATS || hd > MAX_STATE_FLOATS) {
    const bool is_cb = cb > MAX_STATE_FLOATS;
    return scn_fail(L, scn_node_line(n), "sizes",
                    "dim * %s = %" PRId64 " floats (expected at most 2^%d, %d GiB "
                    "of float32, per replicated matrix)",
                    is_cb ? "codebook_size" : "hidden", is_cb ? cb : hd,
                    MAX_STATE_FLOATS_LOG2,
                    (int)((MAX_STATE_FLOATS * (int64_t)sizeof(float)) >> 30));
  }
  return VQC_OK;
}

static vqc_status read_batch(const loader *L, const yaml_node_t *n) {
  vqc_scenario *s = L->s;
  char expected[160];
  snprintf(expected, sizeof expected,
           "an integer 1..%d, or a list of %d integers 0..%d, one per rank, "
           "at least one > 0",
           MAX_BATCH, s->ranks, MAX_BATCH);
  int64_t v;
  if (n && n->type == YAML_SEQUENCE_NODE) {
    const int count =
        (int)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count != s->ranks)
      return scn_fail(L, scn_node_line(n), "batch",
                      "the list has %d entr%s for %d rank%s (expected one per "
                      "rank, or a single integer)",
                      count, count == 1 ? "y" : "ies", s->ranks,
                      s->ranks == 1 ? "" : "s");
    bool any = false;
    for (int i = 0; i < count; i++) {
      const yaml_node_t *item =
          yaml_document_get_node(L->doc, n->data.sequence.items.start[i]);
      char field[32];
      snprintf(field, sizeof field, "batch[%d]", i);
      VQC_TRY(scn_read_int(L, item, field, 0, MAX_BATCH, &v));
      s->batch[i] = v;
      any = any || v > 0;
    }
    if (!any)
      return scn_fail(L, scn_node_line(n), "batch",
                      "every rank has 0 rows (expected at least one rank with "
                      "rows > 0)");
    s->nbatch = count;
    return VQC_OK;
  }
  if (!scn_plain_text(n)) return scn_fail_type(L, n, "batch", expected);
  VQC_TRY(scn_read_int(L, n, "batch", 1, MAX_BATCH, &v));
  s->batch[0] = v;
  s->nbatch = 1;
  return VQC_OK;
}

static vqc_status read_check(const loader *L, const yaml_node_t *n) {
  vqc_scenario *s = L->s;
  s->interval = 1;
  s->timeout_s = 30.0;
  s->tolerance = 1e-4;
  s->strict = false;
  if (!n) return VQC_OK;
  static const char *const names[] = {"interval", "timeout", "tolerance",
                                      "strict"};
  field_set fs = {.names = names, .n = 4};
  VQC_TRY(scn_collect(L, n, "check", "check.", &fs));
  if (fs.value[0]) {
    int64_t v;
    VQC_TRY(scn_read_int(L, fs.value[0], "check.interval", 1, MAX_INTERVAL,
                         &v));
    s->interval = (int)v;
  }
  if (fs.value[1]) {
    char expected[64];
    snprintf(expected, sizeof expected,
             "a number of seconds > 0, at most %g", MAX_TIMEOUT_S);
    VQC_TRY(scn_read_double(L, fs.value[1], "check.timeout", 0.0, true,
                            MAX_TIMEOUT_S, expected, &s->timeout_s));
  }
  if (fs.value[2])
    VQC_TRY(scn_read_double(L, fs.value[2], "check.tolerance", 0.0, true, 1e30,
                            "a number > 0", &s->tolerance));
  if (fs.value[3])
    VQC_TRY(scn_read_bool(L, fs.value[3], "check.strict", &s->strict));
  return VQC_OK;
}

static vqc_status read_fault(const loader *L, const yaml_node_t *n) {
  /* The list of names comes from fault.h, so it is never out of date. */
  char names[512] = "";
  for (int f = 0; f < VQC_FAULT_COUNT; f++) {
    if (f) strncat(names, ", ", sizeof names - strlen(names) - 1);
    strncat(names, vqc_fault_name((vqc_fault)f), sizeof names - strlen(names) - 1);
  }
  char expected[600];
  snprintf(expected, sizeof expected, "one of %s", names);
  if (!scn_is_scalar(n) || scn_is_null(n) ||
      strlen(scn_scalar(n)) != n->data.scalar.length ||
      vqc_fault_from_name(scn_scalar(n), &L->s->fault) != VQC_OK)
    return scn_fail_type(L, n, "fault", expected);
  return VQC_OK;
}

static vqc_status read_expectation(const loader *L, const yaml_node_t *n,
                                   int index, vqc_expectation *e) {
  static const char *const names[] = {"kind", "step", "tensor", "site"};
  char what[32], prefix[32], field[48];
  snprintf(what, sizeof what, "expect[%d]", index);
  snprintf(prefix, sizeof prefix, "expect[%d].", index);
  field_set fs = {.names = names, .n = 4};
  VQC_TRY(scn_collect(L, n, what, prefix, &fs));
  memset(e, 0, sizeof *e);
  e->step = -1;
  e->line = scn_node_line(n);
  snprintf(field, sizeof field, "%skind", prefix);
  const char *kinds = "a finding kind: divergence, lost_inplace, deadlock, "
                      "collective_mismatch, shape_mismatch, gradient_mismatch, "
                      "rank_failure or nonfinite";
  if (!fs.value[0])
    return scn_fail(L, scn_node_line(n), field, "missing (expected %s)", kinds);
  const yaml_node_t *k = fs.value[0];
  if (!scn_is_scalar(k) || scn_is_null(k) ||
      strlen(scn_scalar(k)) != k->data.scalar.length ||
      vqc_finding_kind_from_name(scn_scalar(k), &e->kind) != VQC_OK)
    return scn_fail_type(L, k, field, kinds);
  if (fs.value[1]) {
    const yaml_node_t *step = fs.value[1];
    snprintf(field, sizeof field, "%sstep", prefix);
    int64_t v;
    /* A step number first, then this run's range, with a message that says
     * steps count from 0, the usual off-by-one. */
    VQC_TRY(scn_read_int(L, step, field, 0, MAX_STEPS, &v));
    if (v >= L->s->steps)
      return scn_fail(L, scn_node_line(step), field,
                      "%" PRId64 " is not a step of this run (expected 0..%d: "
                      "steps count from 0 and the run has %d)",
                      v, L->s->steps - 1, L->s->steps);
    e->step = v;
  }
  if (fs.value[2]) {
    snprintf(field, sizeof field, "%stensor", prefix);
    VQC_TRY(scn_read_string(L, fs.value[2], field, e->tensor, sizeof e->tensor,
                            false));
  }
  if (fs.value[3]) {
    snprintf(field, sizeof field, "%ssite", prefix);
    VQC_TRY(scn_read_string(L, fs.value[3], field, e->site, sizeof e->site,
                            false));
  }
  return VQC_OK;
}

static vqc_status read_expect(const loader *L, const yaml_node_t *n) {
  vqc_scenario *s = L->s;
  char expected[128];
  snprintf(expected, sizeof expected,
           "clean, or a list of 1..%d {kind, step, tensor, site} mappings",
           VQC_SCENARIO_MAX_EXPECT);
  if (scn_is_scalar(n) && n->data.scalar.length == 5 &&
      strcmp(scn_scalar(n), "clean") == 0) {
    s->expect_clean = true;
    s->nexpect = 0;
    return VQC_OK;
  }
  if (!n || n->type != YAML_SEQUENCE_NODE)
    return scn_fail_type(L, n, "expect", expected);
  const int count =
      (int)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (count < 1 || count > VQC_SCENARIO_MAX_EXPECT)
    return scn_fail(L, scn_node_line(n), "expect",
                    "a list of %d (expected %s)", count, expected);
  for (int i = 0; i < count; i++) {
    const yaml_node_t *item =
        yaml_document_get_node(L->doc, n->data.sequence.items.start[i]);
    VQC_TRY(read_expectation(L, item, i, &s->expect[i]));
  }
  s->expect_clean = false;
  s->nexpect = count;
  return VQC_OK;
}

/* Walks the document's root against the schema. */
vqc_status scn_read_scenario(const loader *L, const yaml_node_t *root) {
  vqc_scenario *s = L->s;
  field_set fs = {.names = top_names, .n = F_COUNT};
  VQC_TRY(scn_collect(L, root, "scenario", "", &fs));

  /* Fields are read in the README's order, which is also the order of their
   * dependencies (sizes need the model, batch the ranks, expect the steps);
   * a required field is reported missing when its turn comes, so the first
   * error in a half-written file is the first thing wrong in it. */
#define REQUIRE(f, what)                                                  \
  do {                                                                    \
    if (!fs.value[f])                                                     \
      return scn_fail(L, scn_node_line(root), top_names[f],               \
                      "missing (expected a required field: %s)", what);   \
  } while (0)
  char model_what[160], names[128], ranks_what[48], steps_what[48];
  scn_model_names(names, sizeof names);
  snprintf(model_what, sizeof model_what, "one of %s", names);
  snprintf(ranks_what, sizeof ranks_what, "an integer 1..%d",
           VQC_SCENARIO_MAX_RANKS);
  snprintf(steps_what, sizeof steps_what, "an integer 1..%d", MAX_STEPS);
  REQUIRE(F_NAME, "a name of [a-z0-9_-]+");
  VQC_TRY(read_name(L, fs.value[F_NAME]));
  if (fs.value[F_DESCRIPTION])
    VQC_TRY(scn_read_string(L, fs.value[F_DESCRIPTION], "description",
                            s->description, sizeof s->description, true));
  REQUIRE(F_MODEL, model_what);
  VQC_TRY(read_model(L, fs.value[F_MODEL]));
  VQC_TRY(read_sizes(L, fs.value[F_SIZES]));
  int64_t v;
  REQUIRE(F_RANKS, ranks_what);
  VQC_TRY(scn_read_int(L, fs.value[F_RANKS], "ranks", 1,
                       VQC_SCENARIO_MAX_RANKS, &v));
  s->ranks = (int)v;
  REQUIRE(F_STEPS, steps_what);
  VQC_TRY(scn_read_int(L, fs.value[F_STEPS], "steps", 1, MAX_STEPS, &v));
  s->steps = (int)v;
  REQUIRE(F_BATCH, "rows per rank: an integer, or a list with one per rank");
  VQC_TRY(read_batch(L, fs.value[F_BATCH]));
  REQUIRE(F_SEED, "an integer 0..18446744073709551615");
  VQC_TRY(scn_read_u64(L, fs.value[F_SEED], "seed", &s->seed));
  VQC_TRY(read_check(L, fs.value[F_CHECK]));
  s->fault = VQC_FAULT_NONE;
  if (fs.value[F_FAULT]) VQC_TRY(read_fault(L, fs.value[F_FAULT]));
  REQUIRE(F_EXPECT, "clean, or a list of expected findings");
  VQC_TRY(read_expect(L, fs.value[F_EXPECT]));
#undef REQUIRE
  return VQC_OK;
}
