/* scenario_json.c: a loaded scenario as a JSON object (run.json's
 * "scenario"), every field explicit; one writer per size type,
 * size_json_<type>, for VQC_SCENARIO_SIZE_LIST (scenario.h). */
#include <inttypes.h>
#include <stdio.h>

#include "scenario.h"
#include "scenario_internal.h"

static json_t *size_json_INT(const vqc_scenario *s, const int64_t *v) {
  (void)s;
  return json_integer(*v);
}

static json_t *size_json_COUNT(const vqc_scenario *s, const int *v) {
  (void)s;
  return json_integer(*v);
}

static json_t *size_json_LEVELS(const vqc_scenario *s,
                                const int (*v)[VQC_SCENARIO_MAX_LEVELS]) {
  json_t *levels = json_array();
  for (int i = 0; i < s->nlevels; i++)
    json_array_append_new(levels, json_integer((*v)[i]));
  return levels;
}

static json_t *size_json_NUMBER(const vqc_scenario *s, const double *v) {
  (void)s;
  return json_real(*v);
}

static json_t *size_json_FLAG(const vqc_scenario *s, const bool *v) {
  (void)s;
  return json_boolean(*v);
}

json_t *vqc_scenario_to_json(const vqc_scenario *s) {
  json_t *j = json_object();
  json_object_set_new(j, "path", json_string(s->path));
  json_object_set_new(j, "name", json_string(s->name));
  json_object_set_new(j, "description", json_string(s->description));
  json_object_set_new(j, "model", json_string(vqc_model_name(s->model)));

  const unsigned takes = (unsigned)s->model < VQC_MODEL_COUNT
                             ? scn_model_info[s->model].sizes
                             : 0;
  json_t *sizes = json_object();
#define SIZE_JSON(e, name, type, lo, hi, note)                              \
  if (takes & VQC_SIZE_BIT(VQC_SIZE_##e))                                   \
    json_object_set_new(sizes, #name, size_json_##type(s, &s->name));
  VQC_SCENARIO_SIZE_LIST(SIZE_JSON)
#undef SIZE_JSON
  json_object_set_new(j, "sizes", sizes);

  json_object_set_new(j, "ranks", json_integer(s->ranks));
  json_object_set_new(j, "steps", json_integer(s->steps));
  json_t *batch = json_array();
  for (int r = 0; r < s->ranks; r++)
    json_array_append_new(batch, json_integer(vqc_scenario_batch(s, r)));
  json_object_set_new(j, "batch", batch);
  /* As a string: JSON readers commonly hold numbers in doubles, which lose
   * seeds above 2^53. */
  char seed[32];
  snprintf(seed, sizeof seed, "%" PRIu64, s->seed);
  json_object_set_new(j, "seed", json_string(seed));
  json_t *check = json_object();
  json_object_set_new(check, "interval", json_integer(s->interval));
  json_object_set_new(check, "timeout", json_real(s->timeout_s));
  json_object_set_new(check, "tolerance", json_real(s->tolerance));
  json_object_set_new(check, "strict", json_boolean(s->strict));
  json_object_set_new(j, "check", check);
  json_object_set_new(j, "fault", json_string(vqc_fault_name(s->fault)));
  if (s->expect_clean || s->nexpect == 0) {
    json_object_set_new(j, "expect", json_string("clean"));
  } else {
    json_t *list = json_array();
    for (int i = 0; i < s->nexpect; i++) {
      const vqc_expectation *e = &s->expect[i];
      json_t *x = json_object();
      json_object_set_new(x, "kind", json_string(vqc_finding_kind_name(e->kind)));
      if (e->step >= 0) json_object_set_new(x, "step", json_integer(e->step));
      if (e->tensor[0]) json_object_set_new(x, "tensor", json_string(e->tensor));
      if (e->site[0]) json_object_set_new(x, "site", json_string(e->site));
      json_array_append_new(list, x);
    }
    json_object_set_new(j, "expect", list);
  }
  return j;
}
