/* scenario.c: reads and validates scenario files (format: scenarios/README.md).
 *
 * The file is parsed by libyaml's document API into a node tree; this file
 * only walks that tree against the scenario schema. Each node keeps its
 * start mark, so every error names "file:line: field: what is wrong
 * (what is expected)". The walk follows the schema (top mapping -> sizes /
 * check / batch / expect -> scalars), never the tree's own shape, so aliases
 * that make the tree cyclic or absurdly deep cannot make it loop or recurse.
 * Before the document is built, a pass over libyaml's events refuses
 * nesting deeper than SCENARIO_MAX_DEPTH (check_depth): libyaml itself
 * takes quadratic time on deep flow collections.
 *
 * Sizes the file leaves out are filled with the model's defaults (its row
 * of scenario.h's VQC_MODEL_LIST), so a loaded scenario is fully explicit.
 * The sizes themselves, their ranges, readers and JSON come from one list,
 * scenario.h's VQC_SCENARIO_SIZE_LIST. */
#include "scenario.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

/* A scenario file is a page of text; anything far bigger is not one, and the
 * bound keeps a wrong path (a data file) from being read into memory. */
#define SCENARIO_MAX_BYTES (1 << 20)
/* Lists and mappings nested deeper than this are refused before the
 * document is built. A scenario nests three deep (top -> expect -> item);
 * the bound is for hostile files: libyaml's scanner costs O(depth) per
 * token inside flow collections, so "[[[[...", 100k deep (200 KB), took
 * 23 s to load and 500k minutes. */
#define SCENARIO_MAX_DEPTH 64

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

/* ---- models: what a scenario file may say about each (VQC_MODEL_LIST) */

typedef struct model_info {
  const char *name;
  unsigned sizes;           /* VQC_TAKES mask: the sizes it takes */
  vqc_model_sizes defaults; /* for the sizes the file leaves out */
} model_info;

static const model_info model_info_table[VQC_MODEL_COUNT] = {
#define MODEL_INFO(e, name, sizes, defaults) \
  [VQC_MODEL_##e] = {#name, sizes, defaults},
    VQC_MODEL_LIST(MODEL_INFO)
#undef MODEL_INFO
};

const char *vqc_model_name(vqc_model_kind m) {
  return (unsigned)m < VQC_MODEL_COUNT ? model_info_table[m].name : "?";
}

/* Every model's name joined by ", " ("vq, rvq, fsq, clip, autoencoder"). */
static void model_names(char *out, size_t n) {
  out[0] = '\0';
  for (int m = 0; m < VQC_MODEL_COUNT; m++) {
    const size_t used = strlen(out);
    snprintf(out + used, n - used, "%s%s", m ? ", " : "",
             model_info_table[m].name);
  }
}

/* ---- the loader's context and error helpers */

typedef struct loader {
  const char *path;
  yaml_document_t *doc;
  vqc_scenario *s;
} loader;

static int node_line(const yaml_node_t *n) {
  return n ? (int)n->start_mark.line + 1 : 1;
}

/* Records "path:line: field: problem" as an EPARSE error. The problem text
 * carries its own "(expected ...)". */
static vqc_status fail(const loader *L, int line, const char *field,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static vqc_status fail(const loader *L, int line, const char *field,
                       const char *fmt, ...) {
  char problem[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(problem, sizeof problem, fmt, ap);
  va_end(ap);
  return vqc_error(VQC_EPARSE, "%s:%d: %s: %s", L->path, line, field, problem);
}

/* A printable, bounded rendering of user text for messages: control bytes
 * become '?', and long text is cut with "...". */
static void show_text(const char *text, size_t len, char *out, size_t n) {
  size_t o = 0;
  const size_t keep = n > 4 ? n - 4 : 0;
  for (size_t i = 0; i < len && o < keep; i++) {
    unsigned char c = (unsigned char)text[i];
    out[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  if (o < len && n > 4) {
    memcpy(out + o, "...", 3);
    o += 3;
  }
  if (n) out[o < n ? o : n - 1] = '\0';
}

static bool is_scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE;
}

static const char *scalar(const yaml_node_t *n) {
  return (const char *)n->data.scalar.value;
}

/* YAML's null: an empty plain scalar, ~, or null. */
static bool is_null(const yaml_node_t *n) {
  if (!is_scalar(n) || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return false;
  const char *v = scalar(n);
  return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
         strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

/* What a node is, for "got ..." in messages. */
static void describe(const yaml_node_t *n, char *out, size_t size) {
  if (!n) {
    snprintf(out, size, "nothing");
  } else if (n->type == YAML_MAPPING_NODE) {
    snprintf(out, size, "a mapping");
  } else if (n->type == YAML_SEQUENCE_NODE) {
    snprintf(out, size, "a list");
  } else if (is_null(n)) {
    snprintf(out, size, "no value");
  } else {
    char text[64];
    show_text(scalar(n), n->data.scalar.length, text, sizeof text);
    const bool quoted = n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                        n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    snprintf(out, size, "%s'%s'", quoted ? "the quoted string " : "", text);
  }
}

static vqc_status fail_type(const loader *L, const yaml_node_t *n,
                            const char *field, const char *expected) {
  char got[96];
  describe(n, got, sizeof got);
  return fail(L, node_line(n), field, "got %s (expected %s)", got, expected);
}

/* ---- scalar readers: each checks type and range and names the field */

/* A plain (unquoted) scalar with no NUL bytes inside: the only kind that
 * may hold a number or a bool. */
static bool plain_text(const yaml_node_t *n) {
  return is_scalar(n) && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
         strlen(scalar(n)) == n->data.scalar.length && !is_null(n);
}

/* True for a non-empty run of decimal digits. */
static bool all_digits(const char *d) {
  if (d[0] == '\0') return false;
  for (const char *p = d; *p; p++)
    if (*p < '0' || *p > '9') return false;
  return true;
}

static vqc_status read_int(const loader *L, const yaml_node_t *n,
                           const char *field, int64_t lo, int64_t hi,
                           int64_t *out) {
  char expected[96];
  snprintf(expected, sizeof expected, "an integer %" PRId64 "..%" PRId64, lo,
           hi);
  if (!plain_text(n)) return fail_type(L, n, field, expected);
  const char *v = scalar(n);
  /* Decimal only: YAML's 0x / 0o / 1_000 forms read as typos here. */
  if (!all_digits(v[0] == '-' || v[0] == '+' ? v + 1 : v))
    return fail_type(L, n, field, expected);
  errno = 0;
  long long x = strtoll(v, NULL, 10);
  if (errno == ERANGE || x < lo || x > hi) {
    char text[64];
    show_text(v, strlen(v), text, sizeof text);
    return fail(L, node_line(n), field, "%s is out of range (expected %s)",
                text, expected);
  }
  *out = x;
  return VQC_OK;
}

/* The full uint64 range, which int64 cannot hold (seeds). */
static vqc_status read_u64(const loader *L, const yaml_node_t *n,
                           const char *field, uint64_t *out) {
  const char *expected = "an integer 0..18446744073709551615";
  if (!plain_text(n)) return fail_type(L, n, field, expected);
  const char *v = scalar(n);
  const char *d = v[0] == '-' || v[0] == '+' ? v + 1 : v;
  if (!all_digits(d)) return fail_type(L, n, field, expected);
  char text[64];
  show_text(v, strlen(v), text, sizeof text);
  errno = 0;
  /* strtoull would wrap "-5" around to a huge value: refuse the sign. */
  const unsigned long long x = strtoull(d, NULL, 10);
  if (v[0] == '-' || errno == ERANGE)
    return fail(L, node_line(n), field, "%s is out of range (expected %s)",
                text, expected);
  *out = x;
  return VQC_OK;
}

/* A finite number; lo_open: value must be > lo, else >= lo. */
static vqc_status read_double(const loader *L, const yaml_node_t *n,
                              const char *field, double lo, bool lo_open,
                              double hi, const char *expected, double *out) {
  if (!plain_text(n)) return fail_type(L, n, field, expected);
  const char *v = scalar(n);
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  /* strtod also reads "inf", "nan" and hex floats: only finite values that
   * use every character are numbers here. */
  if (end == v || *end != '\0' || !isfinite(x) || errno == ERANGE)
    return fail_type(L, n, field, expected);
  if ((lo_open ? x <= lo : x < lo) || x > hi) {
    char text[64];
    show_text(v, strlen(v), text, sizeof text);
    return fail(L, node_line(n), field, "%s is out of range (expected %s)",
                text, expected);
  }
  *out = x;
  return VQC_OK;
}

static vqc_status read_bool(const loader *L, const yaml_node_t *n,
                            const char *field, bool *out) {
  /* YAML 1.2's core schema; yes/no/on/off (YAML 1.1) are refused because
   * they read differently in different tools. */
  static const char *const yes[] = {"true", "True", "TRUE"};
  static const char *const no[] = {"false", "False", "FALSE"};
  if (plain_text(n)) {
    for (int i = 0; i < 3; i++) {
      if (strcmp(scalar(n), yes[i]) == 0) {
        *out = true;
        return VQC_OK;
      }
      if (strcmp(scalar(n), no[i]) == 0) {
        *out = false;
        return VQC_OK;
      }
    }
  }
  return fail_type(L, n, field, "true or false");
}

/* A non-empty string of at most cap-1 bytes, without control characters. */
static vqc_status read_string(const loader *L, const yaml_node_t *n,
                              const char *field, char *dst, size_t cap,
                              bool allow_newlines) {
  char expected[64];
  snprintf(expected, sizeof expected, "a string of 1..%zu characters", cap - 1);
  if (!is_scalar(n) || is_null(n)) return fail_type(L, n, field, expected);
  const char *v = scalar(n);
  const size_t len = n->data.scalar.length;
  if (len == 0) return fail(L, node_line(n), field, "empty (expected %s)", expected);
  if (len >= cap)
    return fail(L, node_line(n), field, "too long: %zu bytes (expected %s)",
                len, expected);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)v[i];
    if ((c < 0x20 && !(allow_newlines && (c == '\n' || c == '\t'))) || c == 0x7f)
      return fail(L, node_line(n), field,
                  "contains control character 0x%02x at byte %zu (expected "
                  "printable text)",
                  c, i);
  }
  memcpy(dst, v, len);
  dst[len] = '\0';
  return VQC_OK;
}

/* ---- mappings: known keys, each at most once */

#define MAX_FIELDS 16

typedef struct field_set {
  const char *const *names; /* (n,) the keys this mapping may hold */
  int n;
  const yaml_node_t *value[MAX_FIELDS]; /* NULL: not given */
  int key_line[MAX_FIELDS];
} field_set;

static void join_names(const char *const *names, int n, unsigned mask,
                       char *out, size_t size) {
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    if (!(mask & BIT(i))) continue;
    if (out[0]) strncat(out, ", ", size - strlen(out) - 1);
    strncat(out, names[i], size - strlen(out) - 1);
  }
}

/* Fills fs from the mapping node map. prefix ("", "sizes.", "expect[2].")
 * is prepended to the keys in messages; what names the mapping itself. */
static vqc_status collect(const loader *L, const yaml_node_t *map,
                          const char *what, const char *prefix, field_set *fs) {
  char expected[256];
  join_names(fs->names, fs->n, ~0u, expected, sizeof expected);
  for (int i = 0; i < fs->n; i++) {
    fs->value[i] = NULL;
    fs->key_line[i] = 0;
  }
  if (!map || map->type != YAML_MAPPING_NODE) {
    char want[320];
    snprintf(want, sizeof want, "a mapping with keys %s", expected);
    return fail_type(L, map, what, want);
  }
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
       p < map->data.mapping.pairs.top; p++) {
    const yaml_node_t *key = yaml_document_get_node(L->doc, p->key);
    const yaml_node_t *val = yaml_document_get_node(L->doc, p->value);
    if (!is_scalar(key) || is_null(key) ||
        strlen(scalar(key)) != key->data.scalar.length) {
      char label[64];
      snprintf(label, sizeof label, "%s(key)", prefix);
      char want[320];
      snprintf(want, sizeof want, "a field name: one of %s", expected);
      return fail_type(L, key, label, want);
    }
    char label[128];
    char shown[64];
    show_text(scalar(key), key->data.scalar.length, shown, sizeof shown);
    snprintf(label, sizeof label, "%s%s", prefix, shown);
    int found = -1;
    for (int i = 0; i < fs->n; i++)
      if (strcmp(scalar(key), fs->names[i]) == 0) found = i;
    if (found < 0)
      return fail(L, node_line(key), label,
                  "unknown field (expected one of %s)", expected);
    if (fs->value[found])
      return fail(L, node_line(key), label,
                  "duplicate key, first given at line %d (expected each field "
                  "once)",
                  fs->key_line[found]);
    fs->value[found] = val;
    fs->key_line[found] = node_line(key);
  }
  return VQC_OK;
}

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
  VQC_TRY(read_string(L, n, "name", L->s->name, sizeof L->s->name, false));
  for (const char *p = L->s->name; *p; p++) {
    const bool ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                    *p == '_' || *p == '-';
    if (!ok)
      return fail(L, node_line(n), "name",
                  "'%s' has the character '%c' (expected lower-case letters, "
                  "digits, '_' and '-': [a-z0-9_-]+)",
                  L->s->name, *p);
  }
  return VQC_OK;
}

static vqc_status read_model(const loader *L, const yaml_node_t *n) {
  char names[128], expected[160];
  model_names(names, sizeof names);
  snprintf(expected, sizeof expected, "one of %s", names);
  if (is_scalar(n) && !is_null(n)) {
    for (int m = 0; m < VQC_MODEL_COUNT; m++) {
      if (strcmp(scalar(n), model_info_table[m].name) == 0) {
        L->s->model = (vqc_model_kind)m;
        return VQC_OK;
      }
    }
  }
  return fail_type(L, n, "model", expected);
}

/* ---- sizes: VQC_SCENARIO_SIZE_LIST (scenario.h) gives each its key, type
 * and range; below, one reader and one JSON writer per type, named
 * read_size_<type> and size_json_<type> so that the list can call them. */

static const char *const size_names[VQC_SIZE_COUNT] = {
#define SIZE_NAME(e, name, type, lo, hi, note) #name,
    VQC_SCENARIO_SIZE_LIST(SIZE_NAME)
#undef SIZE_NAME
};

static vqc_status read_size_INT(const loader *L, const yaml_node_t *n,
                                const char *field, int64_t lo, int64_t hi,
                                const char *note, int64_t *out) {
  (void)note;
  return read_int(L, n, field, lo, hi, out);
}

static vqc_status read_size_COUNT(const loader *L, const yaml_node_t *n,
                                  const char *field, int64_t lo, int64_t hi,
                                  const char *note, int *out) {
  (void)note;
  int64_t v;
  VQC_TRY(read_int(L, n, field, lo, hi, &v));
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
    return fail_type(L, n, field, expected);
  const int count =
      (int)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (count < 1 || count > VQC_SCENARIO_MAX_LEVELS)
    return fail(L, node_line(n), field, "%d levels (expected %s)", count,
                expected);
  int64_t codes = 1;
  for (int i = 0; i < count; i++) {
    const yaml_node_t *item =
        yaml_document_get_node(L->doc, n->data.sequence.items.start[i]);
    char item_field[64];
    snprintf(item_field, sizeof item_field, "%s[%d]", field, i);
    int64_t v;
    VQC_TRY(read_int(L, item, item_field, lo, hi, &v));
    codes *= v; /* <= 2^31 * 2^16 before the check below: no overflow */
    if (codes >= MAX_FSQ_CODES)
      return fail(L, node_line(item), item_field,
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
  return read_double(L, n, field, lo, false, hi, expected, out);
}

static vqc_status read_size_FLAG(const loader *L, const yaml_node_t *n,
                                 const char *field, int lo, int hi,
                                 const char *note, bool *out) {
  (void)lo, (void)hi, (void)note;
  return read_bool(L, n, field, out);
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
  const model_info *model = &model_info_table[s->model];
  /* Defaults first; the file overrides. */
  apply_defaults(s, &model->defaults);
  if (!n) return VQC_OK;

  field_set fs = {.names = size_names, .n = VQC_SIZE_COUNT};
  VQC_TRY(collect(L, n, "sizes", "sizes.", &fs));
  char takes[160];
  join_names(size_names, VQC_SIZE_COUNT, model->sizes, takes, sizeof takes);
  for (int i = 0; i < VQC_SIZE_COUNT; i++) {
    if (!fs.value[i] || (model->sizes & VQC_SIZE_BIT(i))) continue;
    char field[48];
    snprintf(field, sizeof field, "sizes.%s", size_names[i]);
    return fail(L, fs.key_line[i], field,
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
    return fail(L, node_line(n), "sizes",
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
      return fail(L, node_line(n), "batch",
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
      VQC_TRY(read_int(L, item, field, 0, MAX_BATCH, &v));
      s->batch[i] = v;
      any = any || v > 0;
    }
    if (!any)
      return fail(L, node_line(n), "batch",
                  "every rank has 0 rows (expected at least one rank with "
                  "rows > 0)");
    s->nbatch = count;
    return VQC_OK;
  }
  if (!plain_text(n)) return fail_type(L, n, "batch", expected);
  VQC_TRY(read_int(L, n, "batch", 1, MAX_BATCH, &v));
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
  VQC_TRY(collect(L, n, "check", "check.", &fs));
  if (fs.value[0]) {
    int64_t v;
    VQC_TRY(read_int(L, fs.value[0], "check.interval", 1, MAX_INTERVAL, &v));
    s->interval = (int)v;
  }
  if (fs.value[1]) {
    char expected[64];
    snprintf(expected, sizeof expected,
             "a number of seconds > 0, at most %g", MAX_TIMEOUT_S);
    VQC_TRY(read_double(L, fs.value[1], "check.timeout", 0.0, true,
                        MAX_TIMEOUT_S, expected, &s->timeout_s));
  }
  if (fs.value[2])
    VQC_TRY(read_double(L, fs.value[2], "check.tolerance", 0.0, true, 1e30,
                        "a number > 0", &s->tolerance));
  if (fs.value[3]) VQC_TRY(read_bool(L, fs.value[3], "check.strict", &s->strict));
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
  if (!is_scalar(n) || is_null(n) ||
      strlen(scalar(n)) != n->data.scalar.length ||
      vqc_fault_from_name(scalar(n), &L->s->fault) != VQC_OK)
    return fail_type(L, n, "fault", expected);
  return VQC_OK;
}

static vqc_status read_expectation(const loader *L, const yaml_node_t *n,
                                   int index, vqc_expectation *e) {
  static const char *const names[] = {"kind", "step", "tensor", "site"};
  char what[32], prefix[32], field[48];
  snprintf(what, sizeof what, "expect[%d]", index);
  snprintf(prefix, sizeof prefix, "expect[%d].", index);
  field_set fs = {.names = names, .n = 4};
  VQC_TRY(collect(L, n, what, prefix, &fs));
  memset(e, 0, sizeof *e);
  e->step = -1;
  e->line = node_line(n);
  snprintf(field, sizeof field, "%skind", prefix);
  const char *kinds = "a finding kind: divergence, lost_inplace, deadlock, "
                      "collective_mismatch, shape_mismatch, gradient_mismatch, "
                      "rank_failure or nonfinite";
  if (!fs.value[0])
    return fail(L, node_line(n), field, "missing (expected %s)", kinds);
  const yaml_node_t *k = fs.value[0];
  if (!is_scalar(k) || is_null(k) ||
      strlen(scalar(k)) != k->data.scalar.length ||
      vqc_finding_kind_from_name(scalar(k), &e->kind) != VQC_OK)
    return fail_type(L, k, field, kinds);
  if (fs.value[1]) {
    const yaml_node_t *step = fs.value[1];
    snprintf(field, sizeof field, "%sstep", prefix);
    int64_t v;
    /* A step number first, then this run's range, with a message that says
     * steps count from 0, the usual off-by-one. */
    VQC_TRY(read_int(L, step, field, 0, MAX_STEPS, &v));
    if (v >= L->s->steps)
      return fail(L, node_line(step), field,
                  "%" PRId64 " is not a step of this run (expected 0..%d: "
                  "steps count from 0 and the run has %d)",
                  v, L->s->steps - 1, L->s->steps);
    e->step = v;
  }
  if (fs.value[2]) {
    snprintf(field, sizeof field, "%stensor", prefix);
    VQC_TRY(read_string(L, fs.value[2], field, e->tensor, sizeof e->tensor,
                        false));
  }
  if (fs.value[3]) {
    snprintf(field, sizeof field, "%ssite", prefix);
    VQC_TRY(read_string(L, fs.value[3], field, e->site, sizeof e->site, false));
  }
  return VQC_OK;
}

static vqc_status read_expect(const loader *L, const yaml_node_t *n) {
  vqc_scenario *s = L->s;
  char expected[128];
  snprintf(expected, sizeof expected,
           "clean, or a list of 1..%d {kind, step, tensor, site} mappings",
           VQC_SCENARIO_MAX_EXPECT);
  if (is_scalar(n) && n->data.scalar.length == 5 &&
      strcmp(scalar(n), "clean") == 0) {
    s->expect_clean = true;
    s->nexpect = 0;
    return VQC_OK;
  }
  if (!n || n->type != YAML_SEQUENCE_NODE) return fail_type(L, n, "expect", expected);
  const int count =
      (int)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (count < 1 || count > VQC_SCENARIO_MAX_EXPECT)
    return fail(L, node_line(n), "expect", "a list of %d (expected %s)", count,
                expected);
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
static vqc_status read_scenario(const loader *L, const yaml_node_t *root) {
  vqc_scenario *s = L->s;
  field_set fs = {.names = top_names, .n = F_COUNT};
  VQC_TRY(collect(L, root, "scenario", "", &fs));

  /* Fields are read in the README's order, which is also the order of their
   * dependencies (sizes need the model, batch the ranks, expect the steps);
   * a required field is reported missing when its turn comes, so the first
   * error in a half-written file is the first thing wrong in it. */
#define REQUIRE(f, what)                                                  \
  do {                                                                    \
    if (!fs.value[f])                                                     \
      return fail(L, node_line(root), top_names[f],                       \
                  "missing (expected a required field: %s)", what);       \
  } while (0)
  char model_what[160], names[128], ranks_what[48], steps_what[48];
  model_names(names, sizeof names);
  snprintf(model_what, sizeof model_what, "one of %s", names);
  snprintf(ranks_what, sizeof ranks_what, "an integer 1..%d",
           VQC_SCENARIO_MAX_RANKS);
  snprintf(steps_what, sizeof steps_what, "an integer 1..%d", MAX_STEPS);
  REQUIRE(F_NAME, "a name of [a-z0-9_-]+");
  VQC_TRY(read_name(L, fs.value[F_NAME]));
  if (fs.value[F_DESCRIPTION])
    VQC_TRY(read_string(L, fs.value[F_DESCRIPTION], "description",
                        s->description, sizeof s->description, true));
  REQUIRE(F_MODEL, model_what);
  VQC_TRY(read_model(L, fs.value[F_MODEL]));
  VQC_TRY(read_sizes(L, fs.value[F_SIZES]));
  int64_t v;
  REQUIRE(F_RANKS, ranks_what);
  VQC_TRY(read_int(L, fs.value[F_RANKS], "ranks", 1, VQC_SCENARIO_MAX_RANKS, &v));
  s->ranks = (int)v;
  REQUIRE(F_STEPS, steps_what);
  VQC_TRY(read_int(L, fs.value[F_STEPS], "steps", 1, MAX_STEPS, &v));
  s->steps = (int)v;
  REQUIRE(F_BATCH, "rows per rank: an integer, or a list with one per rank");
  VQC_TRY(read_batch(L, fs.value[F_BATCH]));
  REQUIRE(F_SEED, "an integer 0..18446744073709551615");
  VQC_TRY(read_u64(L, fs.value[F_SEED], "seed", &s->seed));
  VQC_TRY(read_check(L, fs.value[F_CHECK]));
  s->fault = VQC_FAULT_NONE;
  if (fs.value[F_FAULT]) VQC_TRY(read_fault(L, fs.value[F_FAULT]));
  REQUIRE(F_EXPECT, "clean, or a list of expected findings");
  VQC_TRY(read_expect(L, fs.value[F_EXPECT]));
#undef REQUIRE
  return VQC_OK;
}

/* ---- files */

static vqc_status fail_yaml(const loader *L, const yaml_parser_t *p,
                            const unsigned char *text, size_t len) {
  if (p->error == YAML_MEMORY_ERROR)
    return vqc_error(VQC_ENOMEM, "%s: out of memory while parsing", L->path);
  int line = (int)p->problem_mark.line + 1;
  if (p->error == YAML_READER_ERROR) {
    /* Encoding errors carry a byte offset instead of a mark. */
    line = 1;
    for (size_t i = 0; i < p->problem_offset && i < len; i++)
      line += text[i] == '\n';
  }
  char context[96] = "";
  if (p->context)
    snprintf(context, sizeof context, ", %s at line %d", p->context,
             (int)p->context_mark.line + 1);
  return fail(L, line, "YAML", "%s%s (expected valid YAML)",
              p->problem ? p->problem : "syntax error", context);
}

/* Reads the whole file (at most SCENARIO_MAX_BYTES) into *buf (malloc'd,
 * the caller frees). */
static vqc_status read_file(const char *path, unsigned char **buf, size_t *len) {
  struct stat st;
  *buf = NULL;
  *len = 0;
  if (stat(path, &st) != 0) {
    const int err = errno;
    return vqc_error(err == ENOENT || err == ENOTDIR ? VQC_EINVAL : VQC_EIO,
                     "%s: cannot open: %s", path, strerror(err));
  }
  if (!S_ISREG(st.st_mode))
    return vqc_error(VQC_EINVAL, "%s: not a regular file (expected a scenario "
                                 "file)", path);
  if (st.st_size > SCENARIO_MAX_BYTES)
    return vqc_error(VQC_EPARSE, "%s:1: file: %lld bytes (expected a scenario "
                                 "file of at most %d bytes)",
                     path, (long long)st.st_size, SCENARIO_MAX_BYTES);
  FILE *f = fopen(path, "rb");
  if (!f)
    return vqc_error(VQC_EIO, "%s: cannot open: %s", path, strerror(errno));
  /* +1: room to notice a file that grew since stat */
  unsigned char *data = malloc((size_t)st.st_size + 1);
  if (!data) {
    fclose(f);
    return vqc_error(VQC_ENOMEM, "%s: cannot allocate %lld bytes", path,
                     (long long)st.st_size + 1);
  }
  const size_t n = fread(data, 1, (size_t)st.st_size + 1, f);
  const bool bad = ferror(f) != 0;
  fclose(f);
  if (bad || n > (size_t)st.st_size) {
    free(data);
    return vqc_error(VQC_EIO, "%s: read error or the file changed while "
                              "being read", path);
  }
  *buf = data;
  *len = n;
  return VQC_OK;
}

/* Refuses a file nesting lists and mappings (flow or block) deeper than
 * SCENARIO_MAX_DEPTH, naming where the first too-deep one starts. Streams
 * libyaml's events and stops at the first one too deep: the scanner looks
 * ahead at most one simple key (1024 characters), so this costs the first
 * SCENARIO_MAX_DEPTH levels, not the whole nest. A syntax error is left to
 * the loader proper (same parser, same message). */
static vqc_status check_depth(const char *path, const unsigned char *text,
                              size_t len) {
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p))
    return vqc_error(VQC_ENOMEM, "%s: cannot initialise the YAML parser", path);
  yaml_parser_set_input_string(&p, text, len);
  vqc_status s = VQC_OK;
  int depth = 0;
  for (;;) {
    yaml_event_t e;
    if (!yaml_parser_parse(&p, &e)) break; /* the loader reports it */
    const yaml_event_type_t type = e.type;
    const yaml_mark_t mark = e.start_mark;
    yaml_event_delete(&e);
    if (type == YAML_STREAM_END_EVENT) break;
    if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
      if (++depth > SCENARIO_MAX_DEPTH) {
        s = vqc_error(VQC_EPARSE, "%s:%d:%d: YAML: lists and mappings nested "
                      "more than %d deep (expected a scenario: it nests 3 "
                      "deep; flatten the file)", path, (int)mark.line + 1,
                      (int)mark.column + 1, SCENARIO_MAX_DEPTH);
        break;
      }
    } else if (type == YAML_SEQUENCE_END_EVENT ||
               type == YAML_MAPPING_END_EVENT) {
      depth--;
    }
  }
  yaml_parser_delete(&p);
  return s;
}

vqc_status vqc_scenario_load(const char *path, vqc_scenario *out) {
  memset(out, 0, sizeof *out);
  if (!path) return vqc_error(VQC_EINVAL, "scenario path is NULL");
  snprintf(out->path, sizeof out->path, "%s", path);
  unsigned char *text;
  size_t len;
  VQC_TRY(read_file(path, &text, &len));
  vqc_status depth = check_depth(path, text, len);
  if (depth != VQC_OK) {
    free(text);
    return depth;
  }

  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) {
    free(text);
    return vqc_error(VQC_ENOMEM, "%s: cannot initialise the YAML parser", path);
  }
  yaml_parser_set_input_string(&parser, text, len);
  loader L = {.path = path, .s = out};
  yaml_document_t doc, extra;
  vqc_status s;
  if (!yaml_parser_load(&parser, &doc)) {
    /* yaml_parser_load deleted the partial document itself */
    s = fail_yaml(&L, &parser, text, len);
    goto done_parser;
  }
  L.doc = &doc;
  const yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (!root) {
    s = fail(&L, 1, "scenario",
             "the file is empty (expected a mapping with name, model, ranks, "
             "steps, batch, seed and expect)");
    goto done_doc;
  }
  s = read_scenario(&L, root);
  if (s != VQC_OK) goto done_doc;
  /* A second document would be silently ignored otherwise. */
  if (!yaml_parser_load(&parser, &extra)) {
    s = fail_yaml(&L, &parser, text, len);
    goto done_doc;
  }
  const yaml_node_t *second = yaml_document_get_root_node(&extra);
  if (second)
    s = fail(&L, node_line(second), "scenario",
             "a second YAML document (expected one scenario per file)");
  yaml_document_delete(&extra);
done_doc:
  yaml_document_delete(&doc);
done_parser:
  yaml_parser_delete(&parser);
  free(text);
  return s;
}

int64_t vqc_scenario_batch(const vqc_scenario *s, int rank) {
  if (!s || rank < 0 || rank >= s->ranks || s->nbatch < 1) return 0;
  if (s->nbatch == 1) return s->batch[0];
  return rank < s->nbatch ? s->batch[rank] : 0;
}

vqc_status vqc_scenario_override(vqc_scenario *s, int ranks, int steps,
                                 int64_t seed, double timeout_s) {
  /* Everything is checked before anything changes, so a refused override
   * leaves the scenario as it was. */
  if (ranks >= 0) {
    if (ranks < 1 || ranks > VQC_SCENARIO_MAX_RANKS)
      return vqc_error(VQC_EINVAL, "%s: --ranks %d is out of range (expected "
                                   "1..%d)",
                       s->path, ranks, VQC_SCENARIO_MAX_RANKS);
    /* A per-rank batch list only fits the rank count it was written for. */
    if (s->nbatch > 1 && s->nbatch != ranks)
      return vqc_error(VQC_EINVAL,
                       "%s: batch: the file gives a list of %d per-rank "
                       "batches but --ranks is %d (expected --ranks %d, or a "
                       "single integer batch in the file)",
                       s->path, s->nbatch, ranks, s->nbatch);
  }
  if (steps >= 0) {
    if (steps < 1 || steps > MAX_STEPS)
      return vqc_error(VQC_EINVAL, "%s: --steps %d is out of range (expected "
                                   "1..%d)",
                       s->path, steps, MAX_STEPS);
    for (int i = 0; i < s->nexpect; i++)
      if (s->expect[i].step >= steps)
        return vqc_error(VQC_EINVAL,
                         "%s:%d: expect[%d].step: step %" PRId64
                         " never runs with --steps %d (expected --steps > %" PRId64
                         ")",
                         s->path, s->expect[i].line, i, s->expect[i].step,
                         steps, s->expect[i].step);
  }
  if (timeout_s >= 0 && (!(timeout_s > 0) || timeout_s > MAX_TIMEOUT_S))
    return vqc_error(VQC_EINVAL, "%s: --timeout %g is out of range "
                                 "(expected seconds > 0, at most %g)",
                     s->path, timeout_s, MAX_TIMEOUT_S);
  if (ranks >= 0) s->ranks = ranks;
  if (steps >= 0) s->steps = steps;
  if (seed >= 0) s->seed = (uint64_t)seed;
  if (timeout_s >= 0) s->timeout_s = timeout_s;
  return VQC_OK;
}

/* ---- expectations */

static bool matches(const vqc_expectation *e, const vqc_finding *x) {
  if (e->kind != x->kind) return false;
  if (e->step >= 0 && e->step != x->step) return false;
  if (e->tensor[0] && !strstr(x->tensor, e->tensor)) return false;
  if (e->site[0] && !strstr(x->site, e->site)) return false;
  return true;
}

static void describe_finding(const vqc_finding *x, char *out, size_t n) {
  int k = snprintf(out, n, "%s at step %" PRId64, vqc_finding_kind_name(x->kind),
                   x->step);
  if (k < 0 || (size_t)k >= n) return;
  if (x->tensor[0]) k += snprintf(out + k, n - (size_t)k, " tensor '%s'", x->tensor);
  if (k < 0 || (size_t)k >= n) return;
  if (x->site[0]) snprintf(out + k, n - (size_t)k, " site '%s'", x->site);
}

static void describe_expectation(const vqc_expectation *e, char *out, size_t n) {
  int k = snprintf(out, n, "%s", vqc_finding_kind_name(e->kind));
  if (k >= 0 && (size_t)k < n && e->step >= 0)
    k += snprintf(out + k, n - (size_t)k, "@%" PRId64, e->step);
  if (k >= 0 && (size_t)k < n && e->tensor[0])
    k += snprintf(out + k, n - (size_t)k, " tensor~%s", e->tensor);
  if (k >= 0 && (size_t)k < n && e->site[0])
    snprintf(out + k, n - (size_t)k, " site~%s", e->site);
}

bool vqc_scenario_expectations_met(const vqc_scenario *s, vqc_findings *f,
                                   char *why, size_t why_n) {
  char scratch[8];
  if (!why || why_n == 0) {
    why = scratch;
    why_n = sizeof scratch;
  }
  why[0] = '\0';
  if (f) pthread_mutex_lock(&f->lock);
  const int count = f ? f->count : 0;
  bool met = true;
  if (s->expect_clean || s->nexpect == 0) {
    if (count > 0) {
      char first[400];
      describe_finding(&f->items[0], first, sizeof first);
      snprintf(why, why_n, "expected clean, got %d finding%s; first: %s",
               count, count == 1 ? "" : "s", first);
      met = false;
    }
  } else {
    for (int i = 0; i < s->nexpect && met; i++) {
      bool found = false;
      for (int j = 0; j < count && !found; j++)
        found = matches(&s->expect[i], &f->items[j]);
      if (found) continue;
      char want[300], got[400] = "none";
      describe_expectation(&s->expect[i], want, sizeof want);
      if (count > 0) describe_finding(&f->items[0], got, sizeof got);
      snprintf(why, why_n,
               "expected %s (line %d) but no finding matched; %d finding%s%s%s",
               want, s->expect[i].line, count, count == 1 ? "" : "s",
               count > 0 ? ", first: " : "", count > 0 ? got : "");
      met = false;
    }
  }
  if (f) pthread_mutex_unlock(&f->lock);
  return met;
}

void vqc_scenario_expect_string(const vqc_scenario *s, char *out, size_t n) {
  if (n == 0) return;
  out[0] = '\0';
  if (s->expect_clean || s->nexpect == 0) {
    snprintf(out, n, "clean");
    return;
  }
  for (int i = 0; i < s->nexpect; i++) {
    char one[300];
    describe_expectation(&s->expect[i], one, sizeof one);
    const size_t used = strlen(out);
    snprintf(out + used, n - used, "%s%s", i ? ", " : "", one);
  }
}

json_t *vqc_scenario_to_json(const vqc_scenario *s) {
  json_t *j = json_object();
  json_object_set_new(j, "path", json_string(s->path));
  json_object_set_new(j, "name", json_string(s->name));
  json_object_set_new(j, "description", json_string(s->description));
  json_object_set_new(j, "model", json_string(vqc_model_name(s->model)));

  const unsigned takes = (unsigned)s->model < VQC_MODEL_COUNT
                             ? model_info_table[s->model].sizes
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

/* ---- listing a directory of scenarios */

static bool has_suffix(const char *s, const char *suffix) {
  const size_t ls = strlen(s), lx = strlen(suffix);
  return ls > lx && strcmp(s + ls - lx, suffix) == 0;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

bool vqc_scenario_files(const char *dir, char ***names, int *count) {
  *names = NULL;
  *count = 0;
  DIR *d = opendir(dir);
  if (!d) return false;
  int cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue; /* editors' hidden swap files too */
    if (!has_suffix(e->d_name, ".yaml") && !has_suffix(e->d_name, ".yml"))
      continue;
    if (*count == cap) {
      cap = cap ? 2 * cap : 16;
      char **grown = realloc(*names, (size_t)cap * sizeof *grown);
      if (!grown) goto fail;
      *names = grown;
    }
    char *copy = strdup(e->d_name);
    if (!copy) goto fail;
    (*names)[(*count)++] = copy;
  }
  closedir(d);
  if (*count > 1) qsort(*names, (size_t)*count, sizeof **names, compare_names);
  return true;
fail:
  closedir(d);
  for (int i = 0; i < *count; i++) free((*names)[i]);
  free(*names);
  *names = NULL;
  *count = 0;
  errno = ENOMEM;
  return false;
}

void vqc_scenario_files_free(char **names, int count) {
  if (!names) return;
  for (int i = 0; i < count; i++) free(names[i]);
  free(names);
}
