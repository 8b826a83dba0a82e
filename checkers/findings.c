/* findings.c: the finding list, its JSON form, and the merge of the
 * duplicates several ranks recorded (see findings.h). The gather over a comm
 * is in findings_gather.c, so this file needs nothing but jansson and
 * utf8.c (the parser fuzzers in tests/fuzz build them on their own). */
#include "findings.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

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

/* Drops an incomplete UTF-8 character at the end of s, which a byte-wise
 * cut (snprintf's) left; only for a cut string: an incomplete character
 * that was in the text itself stays, for vqc_finding_to_json to replace
 * and report. */
static void cut_partial_char(char *s) {
  const size_t n = strlen(s);
  size_t lead = n;
  /* At most 3 continuation bytes back to the lead byte. */
  while (lead > 0 && n - lead < 3 && ((unsigned char)s[lead - 1] & 0xC0) == 0x80)
    lead--;
  if (lead == 0) return;
  const unsigned char c = (unsigned char)s[lead - 1];
  const size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (want > 1 && n - (lead - 1) < want) s[lead - 1] = '\0';
}

void vqc_finding_init(vqc_finding *x, vqc_finding_kind kind, int64_t step,
                      const char *fmt, ...) {
  memset(x, 0, sizeof *x);
  x->kind = kind;
  x->step = step;
  x->detail = json_object();
  va_list ap;
  va_start(ap, fmt);
  const int w = vsnprintf(x->message, sizeof x->message, fmt, ap);
  va_end(ap);
  if (w >= (int)sizeof x->message) {
    /* vsnprintf cuts at a byte: take back a character it left half. */
    x->truncated |= VQC_FINDING_TEXT_MESSAGE;
    cut_partial_char(x->message);
  }
}

void vqc_finding_set_site(vqc_finding *x, vqc_site site) {
  const char *file = site.file ? site.file : "?";
  /* Paths relative to the repository read better than build-machine ones. */
  const char *rel = strstr(file, "/lib/");
  if (!rel) rel = strstr(file, "/harness/");
  if (!rel) rel = strstr(file, "/examples/");
  const int w = snprintf(x->site, sizeof x->site, "%s:%d %s",
                         rel ? rel + 1 : file, site.line,
                         site.func ? site.func : "?");
  if (w >= (int)sizeof x->site) {
    x->truncated |= VQC_FINDING_TEXT_SITE;
    cut_partial_char(x->site);
  }
}

void vqc_finding_add_rank(vqc_finding *x, int rank) {
  if (rank < 0) return;
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

/* The names of the VQC_FINDING_TEXT_* bits, in bit order. */
static const char *const text_names[3] = {"tensor", "site", "message"};

/* A JSON string of a finding's field (utf8.h); bit `field` is set in
 * *replaced when bytes had to be replaced. */
static json_t *text_json(const char *s, unsigned field, unsigned *replaced) {
  unsigned done = 0;
  json_t *j = vqc_json_text_opts(s, strlen(s), 0, &done);
  if (done & VQC_UTF8_REPLACED) *replaced |= field;
  return j;
}

/* ["tensor", "message"] of the bits set in bits; NULL when none. */
static json_t *text_list(unsigned bits) {
  if (!bits) return NULL;
  json_t *a = json_array();
  for (unsigned i = 0; i < 3; i++)
    if (bits & (1u << i)) json_array_append_new(a, json_string(text_names[i]));
  return a;
}

/* Whether v, a detail at nesting level `depth` (1 for the detail itself),
 * is written as it is: nested no deeper than VQC_FINDING_DETAIL_MAX_DEPTH,
 * and no string in it holding a NUL (jansson keeps one from json_stringn;
 * written as \u0000, it makes run.json one that vqcheck's reader, like
 * jansson's by default, refuses). */
static bool detail_as_is(const json_t *v, int depth) {
  if (json_is_string(v))
    return strlen(json_string_value(v)) == json_string_length(v);
  if (!json_is_object(v) && !json_is_array(v)) return true;
  if (depth > VQC_FINDING_DETAIL_MAX_DEPTH) return false;
  const char *k;
  size_t i;
  json_t *m;
  if (json_is_object(v)) {
    json_object_foreach((json_t *)v, k, m)
      if (!detail_as_is(m, depth + 1)) return false;
  } else {
    json_array_foreach(v, i, m)
      if (!detail_as_is(m, depth + 1)) return false;
  }
  return true;
}

/* A copy of v (new reference; other values shared) that detail_as_is
 * accepts: objects and arrays past level VQC_FINDING_DETAIL_MAX_DEPTH
 * become a string saying so, a NUL in a string '?' (utf8.h). */
static json_t *detail_fixed(json_t *v, int depth) {
  if (json_is_string(v))
    return vqc_json_text(json_string_value(v), json_string_length(v));
  if (!json_is_object(v) && !json_is_array(v)) return json_incref(v);
  if (depth > VQC_FINDING_DETAIL_MAX_DEPTH)
    return json_string("(nested too deep: left out)");
  json_t *out;
  if (json_is_object(v)) {
    out = json_object();
    const char *k;
    json_t *m;
    json_object_foreach(v, k, m)
      json_object_set_new(out, k, detail_fixed(m, depth + 1));
  } else {
    out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(v, i, m)
      json_array_append_new(out, detail_fixed(m, depth + 1));
  }
  return out;
}

json_t *vqc_finding_to_json(const vqc_finding *x) {
  json_t *ranks = json_array();
  for (int i = 0; i < x->nranks; i++)
    if (x->ranks[i] >= 0)
      json_array_append_new(ranks, json_integer(x->ranks[i]));
  json_t *j = json_object();
  json_object_set_new(j, "kind", json_string(vqc_finding_kind_name(x->kind)));
  json_object_set_new(j, "step", json_integer(x->step < -1 ? -1 : x->step));
  json_object_set_new(j, "ranks", ranks);
  if (x->nranks > VQC_FINDING_RANGES_FROM) {
    char text[1024];
    vqc_rank_ranges_text(x->ranks, x->nranks, text, sizeof text);
    json_object_set_new(j, "rank_ranges", json_string(text));
  }
  unsigned replaced = x->invalid_utf8;
  if (x->tensor[0])
    json_object_set_new(j, "tensor", text_json(x->tensor,
                                               VQC_FINDING_TEXT_TENSOR,
                                               &replaced));
  if (x->site[0])
    json_object_set_new(j, "site", text_json(x->site, VQC_FINDING_TEXT_SITE,
                                             &replaced));
  if (!x->detail)
    json_object_set_new(j, "detail", json_object());
  else if (!detail_as_is(x->detail, 1))
    json_object_set_new(j, "detail", detail_fixed(x->detail, 1));
  else
    json_object_set(j, "detail", x->detail);
  json_object_set_new(j, "message", text_json(x->message,
                                              VQC_FINDING_TEXT_MESSAGE,
                                              &replaced));
  json_t *bad = text_list(replaced), *cut = text_list(x->truncated);
  if (bad) json_object_set_new(j, "invalid_utf8", bad);
  if (cut) json_object_set_new(j, "truncated", cut);
  return j;
}

/* An optional string member `key` of j into buf (n bytes): "" when
 * absent; cut where a character ends when longer (bit `field` in
 * *truncated), a NUL in it made '?' (in *replaced). False when present but
 * not a string. */
static bool get_opt_string(const json_t *j, const char *key, char *buf,
                           size_t n, unsigned field, unsigned *truncated,
                           unsigned *replaced) {
  const json_t *v = json_object_get(j, key);
  buf[0] = '\0';
  if (!v) return true;
  if (!json_is_string(v)) return false;
  const unsigned done = vqc_utf8_copy(buf, n, json_string_value(v),
                                      json_string_length(v), 0, NULL);
  if (done & VQC_UTF8_CUT) *truncated |= field;
  if (done & VQC_UTF8_REPLACED) *replaced |= field;
  return true;
}

/* The bridge's site object {"file", "line", "func"} as run.json's "file:line
 * func" into buf (n bytes): a path too long keeps its end (the file's name),
 * func at most 40 bytes, each cut where a character ends (bit
 * VQC_FINDING_TEXT_SITE in *truncated). */
static void site_from_object(const json_t *site, char *buf, size_t n,
                             unsigned *truncated, unsigned *replaced) {
  const json_t *jf = json_object_get(site, "file");
  const json_t *jn = json_object_get(site, "func");
  const json_t *line = json_object_get(site, "line");
  const char *file = json_string_value(jf), *func = json_string_value(jn);
  size_t lf = file ? json_string_length(jf) : 0;
  size_t ln = func ? json_string_length(jn) : 0;
  if (lf == 0) {
    file = "?";
    lf = 1;
  }
  if (ln == 0) {
    func = "?";
    ln = 1;
  }
  char fn[41];
  unsigned done = vqc_utf8_copy(fn, sizeof fn, func, ln, 0, NULL);
  char tail[80];
  snprintf(tail, sizeof tail, ":%lld %s",
           json_is_integer(line) ? (long long)json_integer_value(line) : 0LL,
           fn);
  const size_t lt = strlen(tail), room = n - 1 - lt;
  const char *shown = file;
  if (lf > room) { /* keep the end, from where a character starts */
    shown = file + (lf - room);
    while (shown < file + lf && ((unsigned char)*shown & 0xC0) == 0x80)
      shown++;
    done |= VQC_UTF8_CUT;
  }
  size_t k = 0;
  done |= vqc_utf8_copy(buf, room + 1, shown, lf - (size_t)(shown - file), 0,
                        &k);
  memcpy(buf + k, tail, lt + 1);
  if (done & VQC_UTF8_CUT) *truncated |= VQC_FINDING_TEXT_SITE;
  if (done & VQC_UTF8_REPLACED) *replaced |= VQC_FINDING_TEXT_SITE;
}

/* The VQC_FINDING_TEXT_* bits named in the list member `key` of j (the
 * notes of vqc_finding_to_json); anything else in it is ignored. */
static unsigned text_bits(const json_t *j, const char *key) {
  unsigned bits = 0;
  size_t i;
  const json_t *v;
  json_array_foreach(json_object_get(j, key), i, v) {
    const char *name = json_string_value(v);
    for (unsigned b = 0; name && b < 3; b++)
      if (strcmp(name, text_names[b]) == 0) bits |= 1u << b;
  }
  return bits;
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
  if (!json_is_integer(step) || json_integer_value(step) < -1)
    return vqc_error(VQC_EPARSE, "finding field 'step': expected an integer "
                                 ">= -1 (-1: no step)");
  out->step = json_integer_value(step);
  const json_t *ranks = json_object_get(j, "ranks");
  if (!json_is_array(ranks))
    return vqc_error(VQC_EPARSE, "finding field 'ranks': expected an array");
  size_t i;
  const json_t *r;
  json_array_foreach(ranks, i, r) {
    if (!json_is_integer(r) || json_integer_value(r) < 0 ||
        json_integer_value(r) > INT_MAX)
      return vqc_error(VQC_EPARSE, "finding field 'ranks[%zu]': expected a "
                                   "rank, an integer from 0 to %d", i,
                       INT_MAX);
    vqc_finding_add_rank(out, (int)json_integer_value(r));
  }
  unsigned cut = text_bits(j, "truncated"), bad = text_bits(j, "invalid_utf8");
  const json_t *site = json_object_get(j, "site");
  bool ok = get_opt_string(j, "tensor", out->tensor, sizeof out->tensor,
                           VQC_FINDING_TEXT_TENSOR, &cut, &bad) &&
            get_opt_string(j, "message", out->message, sizeof out->message,
                           VQC_FINDING_TEXT_MESSAGE, &cut, &bad);
  if (ok && json_is_object(site))
    site_from_object(site, out->site, sizeof out->site, &cut, &bad);
  else if (ok)
    ok = get_opt_string(j, "site", out->site, sizeof out->site,
                        VQC_FINDING_TEXT_SITE, &cut, &bad);
  if (!ok)
    return vqc_error(VQC_EPARSE, "finding fields 'tensor' and 'message' must "
                                 "be strings, 'site' a string or an object "
                                 "{\"file\", \"line\", \"func\"}");
  out->truncated = (unsigned char)cut;
  out->invalid_utf8 = (unsigned char)bad;
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

bool vqc_finding_same_story(const vqc_finding *a, const vqc_finding *b) {
  if (a->step >= 0 || b->step >= 0) return true;
  const char *p = a->message, *q = b->message;
  for (;;) {
    const bool dp = *p >= '0' && *p <= '9', dq = *q >= '0' && *q <= '9';
    if (dp && dq) { /* a number each: skip both */
      while (*p >= '0' && *p <= '9') p++;
      while (*q >= '0' && *q <= '9') q++;
      continue;
    }
    if (*p != *q) return false;
    if (!*p) return true;
    p++, q++;
  }
}

/* The identity of vqc_findings_merge_duplicates (see findings.h). */
static bool same_finding(const vqc_finding *a, const vqc_finding *b) {
  return a->kind == b->kind && a->step == b->step &&
         strcmp(a->tensor, b->tensor) == 0 && strcmp(a->site, b->site) == 0 &&
         vqc_finding_same_story(a, b);
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
