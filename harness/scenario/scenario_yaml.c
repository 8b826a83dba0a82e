/* scenario_yaml.c: YAML nodes as typed values, for the scenario loader:
 * the error messages ("file:line: field: what is wrong (what is
 * expected)"), the scalar readers (each checks type and range and names
 * the field) and mappings of known keys. The schema that calls them is
 * scenario_fields.c; what they share, scenario_internal.h. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "scenario_internal.h"

/* ---- the loader's error helpers (its context: scenario_internal.h) */

int scn_node_line(const yaml_node_t *n) {
  return n ? (int)n->start_mark.line + 1 : 1;
}

/* Records "path:line: field: problem" as an EPARSE error. The problem text
 * carries its own "(expected ...)". */
vqc_status scn_fail(const loader *L, int line, const char *field,
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

bool scn_is_scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE;
}

const char *scn_scalar(const yaml_node_t *n) {
  return (const char *)n->data.scalar.value;
}

/* YAML's null: an empty plain scalar, ~, or null. */
bool scn_is_null(const yaml_node_t *n) {
  if (!scn_is_scalar(n) || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return false;
  const char *v = scn_scalar(n);
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
  } else if (scn_is_null(n)) {
    snprintf(out, size, "no value");
  } else {
    char text[64];
    show_text(scn_scalar(n), n->data.scalar.length, text, sizeof text);
    const bool quoted = n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                        n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    snprintf(out, size, "%s'%s'", quoted ? "the quoted string " : "", text);
  }
}

vqc_status scn_fail_type(const loader *L, const yaml_node_t *n,
                         const char *field, const char *expected) {
  char got[96];
  describe(n, got, sizeof got);
  return scn_fail(L, scn_node_line(n), field, "got %s (expected %s)", got,
                  expected);
}

/* ---- scalar readers: each checks type and range and names the field */

/* A plain (unquoted) scalar with no NUL bytes inside: the only kind that
 * may hold a number or a bool. */
bool scn_plain_text(const yaml_node_t *n) {
  return scn_is_scalar(n) && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
         strlen(scn_scalar(n)) == n->data.scalar.length && !scn_is_null(n);
}

/* True for a non-empty run of decimal digits. */
static bool all_digits(const char *d) {
  if (d[0] == '\0') return false;
  for (const char *p = d; *p; p++)
    if (*p < '0' || *p > '9') return false;
  return true;
}

vqc_status scn_read_int(const loader *L, const yaml_node_t *n,
                        const char *field, int64_t lo, int64_t hi,
                        int64_t *out) {
  char expected[96];
  snprintf(expected, sizeof expected, "an integer %" PRId64 "..%" PRId64, lo,
           hi);
  if (!scn_plain_text(n)) return scn_fail_type(L, n, field, expected);
  const char *v = scn_scalar(n);
  /* Decimal only: YAML's 0x / 0o / 1_000 forms read as typos here. */
  if (!all_digits(v[0] == '-' || v[0] == '+' ? v + 1 : v))
    return scn_fail_type(L, n, field, expected);
  errno = 0;
  long long x = strtoll(v, NULL, 10);
  if (errno == ERANGE || x < lo || x > hi) {
    char text[64];
    show_text(v, strlen(v), text, sizeof text);
    return scn_fail(L, scn_node_line(n), field,
                    "%s is out of range (expected %s)", text, expected);
  }
  *out = x;
  return VQC_OK;
}

/* The full uint64 range, which int64 cannot hold (seeds). */
vqc_status scn_read_u64(const loader *L, const yaml_node_t *n,
                        const char *field, uint64_t *out) {
  const char *expected = "an integer 0..18446744073709551615";
  if (!scn_plain_text(n)) return scn_fail_type(L, n, field, expected);
  const char *v = scn_scalar(n);
  const char *d = v[0] == '-' || v[0] == '+' ? v + 1 : v;
  if (!all_digits(d)) return scn_fail_type(L, n, field, expected);
  char text[64];
  show_text(v, strlen(v), text, sizeof text);
  errno = 0;
  /* strtoull would wrap "-5" around to a huge value: refuse the sign. */
  const unsigned long long x = strtoull(d, NULL, 10);
  if (v[0] == '-' || errno == ERANGE)
    return scn_fail(L, scn_node_line(n), field,
                    "%s is out of range (expected %s)", text, expected);
  *out = x;
  return VQC_OK;
}

/* A finite number; lo_open: value must be > lo, else >= lo. */
vqc_status scn_read_double(const loader *L, const yaml_node_t *n,
                           const char *field, double lo, bool lo_open,
                           double hi, const char *expected, double *out) {
  if (!scn_plain_text(n)) return scn_fail_type(L, n, field, expected);
  const char *v = scn_scalar(n);
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  /* strtod also reads "inf", "nan" and hex floats: only finite values that
   * use every character are numbers here. */
  if (end == v || *end != '\0' || !isfinite(x) || errno == ERANGE)
    return scn_fail_type(L, n, field, expected);
  if ((lo_open ? x <= lo : x < lo) || x > hi) {
    char text[64];
    show_text(v, strlen(v), text, sizeof text);
    return scn_fail(L, scn_node_line(n), field,
                    "%s is out of range (expected %s)", text, expected);
  }
  *out = x;
  return VQC_OK;
}

vqc_status scn_read_bool(const loader *L, const yaml_node_t *n,
                         const char *field, bool *out) {
  /* YAML 1.2's core schema; yes/no/on/off (YAML 1.1) are refused because
   * they read differently in different tools. */
  static const char *const yes[] = {"true", "True", "TRUE"};
  static const char *const no[] = {"false", "False", "FALSE"};
  if (scn_plain_text(n)) {
    for (int i = 0; i < 3; i++) {
      if (strcmp(scn_scalar(n), yes[i]) == 0) {
        *out = true;
        return VQC_OK;
      }
      if (strcmp(scn_scalar(n), no[i]) == 0) {
        *out = false;
        return VQC_OK;
      }
    }
  }
  return scn_fail_type(L, n, field, "true or false");
}

/* A non-empty string of at most cap-1 bytes, without control characters. */
vqc_status scn_read_string(const loader *L, const yaml_node_t *n,
                           const char *field, char *dst, size_t cap,
                           bool allow_newlines) {
  char expected[64];
  snprintf(expected, sizeof expected, "a string of 1..%zu characters", cap - 1);
  if (!scn_is_scalar(n) || scn_is_null(n))
    return scn_fail_type(L, n, field, expected);
  const char *v = scn_scalar(n);
  const size_t len = n->data.scalar.length;
  if (len == 0)
    return scn_fail(L, scn_node_line(n), field, "empty (expected %s)",
                    expected);
  if (len >= cap)
    return scn_fail(L, scn_node_line(n), field,
                    "too long: %zu bytes (expected %s)", len, expected);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)v[i];
    if ((c < 0x20 && !(allow_newlines && (c == '\n' || c == '\t'))) || c == 0x7f)
      return scn_fail(L, scn_node_line(n), field,
                      "contains control character 0x%02x at byte %zu (expected "
                      "printable text)",
                      c, i);
  }
  memcpy(dst, v, len);
  dst[len] = '\0';
  return VQC_OK;
}

/* ---- mappings: known keys, each at most once */

void scn_join_names(const char *const *names, int n, unsigned mask,
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
vqc_status scn_collect(const loader *L, const yaml_node_t *map,
                       const char *what, const char *prefix, field_set *fs) {
  char expected[256];
  scn_join_names(fs->names, fs->n, ~0u, expected, sizeof expected);
  for (int i = 0; i < fs->n; i++) {
    fs->value[i] = NULL;
    fs->key_line[i] = 0;
  }
  if (!map || map->type != YAML_MAPPING_NODE) {
    char want[320];
    snprintf(want, sizeof want, "a mapping with keys %s", expected);
    return scn_fail_type(L, map, what, want);
  }
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
       p < map->data.mapping.pairs.top; p++) {
    const yaml_node_t *key = yaml_document_get_node(L->doc, p->key);
    const yaml_node_t *val = yaml_document_get_node(L->doc, p->value);
    if (!scn_is_scalar(key) || scn_is_null(key) ||
        strlen(scn_scalar(key)) != key->data.scalar.length) {
      char label[64];
      snprintf(label, sizeof label, "%s(key)", prefix);
      char want[320];
      snprintf(want, sizeof want, "a field name: one of %s", expected);
      return scn_fail_type(L, key, label, want);
    }
    char label[128];
    char shown[64];
    show_text(scn_scalar(key), key->data.scalar.length, shown, sizeof shown);
    snprintf(label, sizeof label, "%s%s", prefix, shown);
    int found = -1;
    for (int i = 0; i < fs->n; i++)
      if (strcmp(scn_scalar(key), fs->names[i]) == 0) found = i;
    if (found < 0)
      return scn_fail(L, scn_node_line(key), label,
                      "unknown field (expected one of %s)", expected);
    if (fs->value[found])
      return scn_fail(L, scn_node_line(key), label,
                      "duplicate key, first given at line %d (expected each field "
                      "once)",
                      fs->key_line[found]);
    fs->value[found] = val;
    fs->key_line[found] = scn_node_line(key);
  }
  return VQC_OK;
}
