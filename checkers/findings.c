/* findings.c: the finding list, its JSON form, and the merge of the
 * duplicates several ranks recorded (see findings.h). The gather over a comm
 * is in findings_gather.c, so this file needs nothing but jansson (the
 * parser fuzzers in tests/fuzz build it on its own). */
#include "findings.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {
#define X(e, name) name,
    VQC_FINDING_KIND_LIST(X)
#undef X
};

const char *vqc_finding_kind_name(vqc_finding_kind k) {
  return (unsigned)k < VQC_FINDING_KIND_COUNT ? kind_names[k] : "?";
}

vqc_status vqc_finding_kind_from_name(const char *name, vqc_finding_kind *out) {
  for (int k = 0; k < VQC_FINDING_KIND_COUNT; k++) {
    if (name && strcmp(name, kind_names[k]) == 0) {
      *out = (vqc_finding_kind)k;
      return VQC_OK;
    }
  }
  return vqc_error(VQC_EINVAL,
                   "unknown finding kind '%s' (known: divergence, "
                   "lost_inplace, deadlock, collective_mismatch, "
                   "shape_mismatch, gradient_mismatch, rank_failure, "
                   "nonfinite)",
                   name ? name : "(null)");
}

void vqc_findings_init(vqc_findings *f) {
  memset(f, 0, sizeof *f);
  pthread_mutex_init(&f->lock, NULL);
}

void vqc_findings_free(vqc_findings *f) {
  if (!f) return;
  for (int i = 0; i < f->count; i++) json_decref(f->items[i].detail);
  free(f->items);
  pthread_mutex_destroy(&f->lock);
  memset(f, 0, sizeof *f);
}

vqc_status vqc_findings_add(vqc_findings *f, const vqc_finding *x) {
  pthread_mutex_lock(&f->lock);
  if (f->count == f->capacity) {
    int cap = f->capacity ? 2 * f->capacity : 8;
    vqc_finding *items = realloc(f->items, (size_t)cap * sizeof *items);
    if (!items) {
      pthread_mutex_unlock(&f->lock);
      return vqc_error(VQC_ENOMEM, "cannot grow the findings list to %d", cap);
    }
    f->items = items;
    f->capacity = cap;
  }
  vqc_finding *dst = &f->items[f->count++];
  *dst = *x;
  if (!dst->detail) dst->detail = json_object();
  pthread_mutex_unlock(&f->lock);
  return VQC_OK;
}

void vqc_finding_init(vqc_finding *x, vqc_finding_kind kind, int64_t step,
                      const char *fmt, ...) {
  memset(x, 0, sizeof *x);
  x->kind = kind;
  x->step = step;
  x->detail = json_object();
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->message, sizeof x->message, fmt, ap);
  va_end(ap);
}

void vqc_finding_set_site(vqc_finding *x, vqc_site site) {
  const char *file = site.file ? site.file : "?";
  /* Paths relative to the repository read better than build-machine ones. */
  const char *rel = strstr(file, "/lib/");
  if (!rel) rel = strstr(file, "/harness/");
  if (!rel) rel = strstr(file, "/examples/");
  snprintf(x->site, sizeof x->site, "%s:%d %s", rel ? rel + 1 : file,
           site.line, site.func ? site.func : "?");
}

void vqc_finding_add_rank(vqc_finding *x, int rank) {
  for (int i = 0; i < x->nranks; i++)
    if (x->ranks[i] == rank) return;
  if (x->nranks < VQC_FINDING_MAX_RANKS) x->ranks[x->nranks++] = rank;
}

bool vqc_findings_has(vqc_findings *f, vqc_finding_kind kind) {
  pthread_mutex_lock(&f->lock);
  bool has = false;
  for (int i = 0; i < f->count && !has; i++) has = f->items[i].kind == kind;
  pthread_mutex_unlock(&f->lock);
  return has;
}

/* A JSON string of s; bytes that are not UTF-8 (a rank's stderr cut in the
 * middle of a character, a path in another encoding) become '?', so the
 * member is never missing: jansson refuses a string that is not UTF-8. */
static json_t *text_json(const char *s) {
  json_t *j = json_string(s);
  if (j) return j;
  const size_t n = strlen(s);
  char *out = malloc(n + 1);
  if (!out) return json_string("?");
  size_t i = 0, k = 0;
  while (i < n) {
    const unsigned char c = (unsigned char)s[i];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2
                              : (c & 0xF0) == 0xE0 ? 3
                              : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t m = 1; ok && m < len; m++)
      ok = ((unsigned char)s[i + m] & 0xC0) == 0x80;
    /* One character at a time, so an overlong or surrogate form that
     * jansson still refuses is caught below. */
    if (ok && len > 1) {
      char one[5] = {0};
      memcpy(one, s + i, len);
      json_t *t = json_string(one);
      ok = t != NULL;
      json_decref(t);
    }
    if (ok) {
      memcpy(out + k, s + i, len);
      k += len;
      i += len;
    } else {
      out[k++] = '?';
      i++;
    }
  }
  out[k] = '\0';
  j = json_string(out);
  free(out);
  return j ? j : json_string("?");
}

json_t *vqc_finding_to_json(const vqc_finding *x) {
  json_t *ranks = json_array();
  for (int i = 0; i < x->nranks; i++)
    json_array_append_new(ranks, json_integer(x->ranks[i]));
  json_t *j = json_object();
  json_object_set_new(j, "kind", json_string(vqc_finding_kind_name(x->kind)));
  json_object_set_new(j, "step", json_integer(x->step));
  json_object_set_new(j, "ranks", ranks);
  if (x->nranks > VQC_FINDING_RANGES_FROM) {
    char text[1024];
    vqc_rank_ranges_text(x->ranks, x->nranks, text, sizeof text);
    json_object_set_new(j, "rank_ranges", json_string(text));
  }
  if (x->tensor[0]) json_object_set_new(j, "tensor", text_json(x->tensor));
  if (x->site[0]) json_object_set_new(j, "site", text_json(x->site));
  if (x->detail)
    json_object_set(j, "detail", x->detail);
  else
    json_object_set_new(j, "detail", json_object());
  json_object_set_new(j, "message", text_json(x->message));
  return j;
}

/* Copies an optional string member into buf; false if present but not a
 * string or too long. */
static bool get_opt_string(const json_t *j, const char *key, char *buf,
                           size_t n) {
  const json_t *v = json_object_get(j, key);
  buf[0] = '\0';
  if (!v) return true;
  if (!json_is_string(v) || strlen(json_string_value(v)) >= n) return false;
  strcpy(buf, json_string_value(v));
  return true;
}

vqc_status vqc_finding_from_json(const json_t *j, vqc_finding *out) {
  memset(out, 0, sizeof *out);
  if (!json_is_object(j))
    return vqc_error(VQC_EPARSE, "a finding must be a JSON object");
  const json_t *kind = json_object_get(j, "kind");
  if (!json_is_string(kind) ||
      vqc_finding_kind_from_name(json_string_value(kind), &out->kind) != VQC_OK)
    return vqc_error(VQC_EPARSE, "finding field 'kind': expected one of the "
                                 "finding kinds of spec/bugs.md");
  const json_t *step = json_object_get(j, "step");
  if (!json_is_integer(step))
    return vqc_error(VQC_EPARSE, "finding field 'step': expected an integer");
  out->step = json_integer_value(step);
  const json_t *ranks = json_object_get(j, "ranks");
  if (!json_is_array(ranks))
    return vqc_error(VQC_EPARSE, "finding field 'ranks': expected an array");
  size_t i;
  const json_t *r;
  json_array_foreach(ranks, i, r) {
    if (!json_is_integer(r))
      return vqc_error(VQC_EPARSE, "finding field 'ranks[%zu]': expected an "
                                   "integer", i);
    vqc_finding_add_rank(out, (int)json_integer_value(r));
  }
  if (!get_opt_string(j, "tensor", out->tensor, sizeof out->tensor) ||
      !get_opt_string(j, "site", out->site, sizeof out->site) ||
      !get_opt_string(j, "message", out->message, sizeof out->message))
    return vqc_error(VQC_EPARSE, "finding fields 'tensor', 'site' and "
                                 "'message' must be (short) strings");
  const json_t *detail = json_object_get(j, "detail");
  if (detail && !json_is_object(detail))
    return vqc_error(VQC_EPARSE, "finding field 'detail': expected an object");
  out->detail = detail ? json_deep_copy(detail) : json_object();
  return VQC_OK;
}

int vqc_findings_count(vqc_findings *f) {
  pthread_mutex_lock(&f->lock);
  int n = f->count;
  pthread_mutex_unlock(&f->lock);
  return n;
}

vqc_status vqc_findings_copy(vqc_findings *dst, vqc_findings *src) {
  vqc_status s = VQC_OK;
  pthread_mutex_lock(&src->lock);
  for (int i = 0; i < src->count && s == VQC_OK; i++) {
    vqc_finding x = src->items[i];
    x.detail = json_deep_copy(src->items[i].detail);
    s = vqc_findings_add(dst, &x);
    if (s != VQC_OK) json_decref(x.detail);
  }
  pthread_mutex_unlock(&src->lock);
  return s;
}

json_t *vqc_findings_to_json(vqc_findings *f) {
  json_t *arr = json_array();
  pthread_mutex_lock(&f->lock);
  for (int i = 0; i < f->count; i++)
    json_array_append_new(arr, vqc_finding_to_json(&f->items[i]));
  pthread_mutex_unlock(&f->lock);
  return arr;
}

/* The identity of vqc_findings_merge_duplicates (see findings.h). */
static bool same_finding(const vqc_finding *a, const vqc_finding *b) {
  return a->kind == b->kind && a->step == b->step &&
         strcmp(a->tensor, b->tensor) == 0 && strcmp(a->site, b->site) == 0;
}

void vqc_findings_merge_duplicates(vqc_findings *f) {
  pthread_mutex_lock(&f->lock);
  /* items[0 .. kept) are the distinct findings so far; each later one is
   * folded into its first occurrence or moved down to items[kept]. */
  int kept = 0;
  for (int i = 0; i < f->count; i++) {
    vqc_finding *x = &f->items[i];
    int j = 0;
    while (j < kept && !same_finding(&f->items[j], x)) j++;
    if (j < kept) {
      for (int r = 0; r < x->nranks; r++)
        vqc_finding_add_rank(&f->items[j], x->ranks[r]);
      json_decref(x->detail);
      continue;
    }
    if (kept != i) f->items[kept] = *x;
    kept++;
  }
  f->count = kept;
  pthread_mutex_unlock(&f->lock);
}

void vqc_no_majority_text(const int *group_of, int n, int ngroups, char *buf,
                          size_t cap) {
  bool singletons = true;
  int nranks = 0;
  for (int g = 0; g < ngroups && singletons; g++) {
    int count = 0;
    for (int r = 0; r < n; r++) count += group_of[r] == g;
    singletons = count == 1;
  }
  /* Two ranks that differ read better as a split: "{0} and {1}". */
  if (ngroups < 3) singletons = false;
  size_t used = (size_t)snprintf(buf, cap, "ranks ");
  if (singletons) {
    for (int r = 0; r < n && used < cap; r++) {
      if (group_of[r] < 0) continue;
      if (nranks++ == 8) {
        used += (size_t)snprintf(buf + used, cap - used, " and %d more",
                                 ngroups - 8);
        break;
      }
      used += (size_t)snprintf(buf + used, cap - used, "%s%d",
                               nranks > 1 ? ", " : "", r);
    }
    if (used < cap) snprintf(buf + used, cap - used, " all differ");
    return;
  }
  for (int g = 0; g < ngroups && g < 8 && used < cap; g++) {
    const char *sep = g == 0 ? "" : g + 1 == ngroups ? " and " : ", ";
    used += (size_t)snprintf(buf + used, cap - used, "%s{", sep);
    int shown = 0, count = 0;
    for (int r = 0; r < n; r++) {
      if (group_of[r] != g) continue;
      if (shown < 8 && used < cap)
        used += (size_t)snprintf(buf + used, cap - used, "%s%d",
                                 shown ? ", " : "", r);
      shown += shown < 8;
      count++;
    }
    if (count > 8 && used < cap)
      used += (size_t)snprintf(buf + used, cap - used, ", +%d", count - 8);
    if (used < cap) used += (size_t)snprintf(buf + used, cap - used, "}");
  }
  if (ngroups > 8 && used < cap)
    used += (size_t)snprintf(buf + used, cap - used, " and %d more groups",
                             ngroups - 8);
  if (used < cap) snprintf(buf + used, cap - used, " differ");
}

static int cmp_int(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The next piece of the folded text of v[0..n) from *i (advanced past
 * it) into piece: "a-b", "a-b (step s)" or "a", with ", " before all but
 * the first. Returns its length. */
static size_t next_piece(const int *v, int n, int *i, char *piece,
                         size_t cap) {
  const int a = *i;
  int j = a; /* the longest run from a with one stride: v[a..j] */
  const long stride = a + 1 < n ? (long)v[a + 1] - v[a] : 0;
  while (j + 1 < n && (long)v[j + 1] - v[j] == stride) j++;
  const char *sep = a ? ", " : "";
  if (stride == 1 && j - a >= 2) {
    snprintf(piece, cap, "%s%d-%d", sep, v[a], v[j]);
    *i = j + 1;
  } else if (stride > 1 && j - a >= 3) {
    snprintf(piece, cap, "%s%d-%d (step %ld)", sep, v[a], v[j], stride);
    *i = j + 1;
  } else {
    snprintf(piece, cap, "%s%d", sep, v[a]);
    *i = a + 1;
  }
  return strlen(piece);
}

void vqc_rank_ranges_text(const int *ranks, int n, char *buf, size_t cap) {
  if (cap == 0) return;
  buf[0] = '\0';
  if (!ranks || n <= 0) return;
  /* The sorted set: callers pass a finding's ranks, in order of first
   * appearance. A small copy sorts on the stack; more goes to the heap,
   * and without memory the input order is used as it is. */
  int local[64];
  int *set = n <= 64 ? local : malloc((size_t)n * sizeof *set);
  const int *v = ranks;
  if (set) {
    memcpy(set, ranks, (size_t)n * sizeof *set);
    qsort(set, (size_t)n, sizeof *set, cmp_int);
    int m = 0;
    for (int i = 0; i < n; i++)
      if (m == 0 || set[i] != set[m - 1]) set[m++] = set[i];
    n = m;
    v = set;
  }
  char piece[64];
  /* The whole text, if it fits. */
  size_t total = 0;
  for (int i = 0; i < n;) total += next_piece(v, n, &i, piece, sizeof piece);
  const bool fits = total < cap;
  char tail[48];
  snprintf(tail, sizeof tail, ", ... (%d ranks)", n);
  const size_t reserve = strlen(tail) + 1;
  size_t used = 0;
  for (int i = 0; i < n;) {
    const size_t len = next_piece(v, n, &i, piece, sizeof piece);
    /* When cut, keep room for the tail after every piece. */
    if (!fits && used + len + reserve > cap) {
      /* Nothing fits before it: the tail alone, without its comma. */
      const char *t = used ? tail : tail + 2;
      if (used + strlen(t) + 1 <= cap)
        snprintf(buf + used, cap - used, "%s", t);
      break;
    }
    memcpy(buf + used, piece, len + 1);
    used += len;
  }
  if (set != local) free(set);
}

vqc_status vqc_findings_insert(vqc_findings *f, int at, const vqc_finding *x) {
  VQC_TRY(vqc_findings_add(f, x));
  pthread_mutex_lock(&f->lock);
  if (at != f->insert_mark) {
    f->insert_mark = at;
    f->insert_next = at;
  }
  at = f->insert_next++;
  if (at >= 0 && at < f->count - 1) {
    vqc_finding added = f->items[f->count - 1];
    memmove(&f->items[at + 1], &f->items[at],
            (size_t)(f->count - 1 - at) * sizeof *f->items);
    f->items[at] = added;
  }
  pthread_mutex_unlock(&f->lock);
  return VQC_OK;
}
