/* ledger_record.c: the ledger line's codec (ledger_record.h). */
#include "ledger_record.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/comm.h"
#include "vqc/tensor.h"

void vqc_ledger_line_of(const vqc_ledger_record *r, vqc_ledger_line *out) {
  memset(out, 0, sizeof *out);
  out->seq = r->seq;
  out->rank = r->rank;
  out->op = vqc_coll_name(r->op);
  out->redop = r->op == VQC_COLL_ALL_REDUCE ? vqc_redop_name(r->redop) : "";
  out->dtype = vqc_dtype_name(r->dtype);
  out->count = (uint64_t)r->count;
  out->root = r->root;
  out->file = r->site.file ? r->site.file : "";
  out->line = r->site.line;
  out->func = r->site.func ? r->site.func : "";
  out->t_enter_ns = r->t_enter_ns;
  out->t_exit_ns = r->t_exit_ns;
  out->state = r->state;
  out->status = vqc_status_name(r->status);
}

/* ---- writing */

/* The text being made: as much as fits in buf, n counting all of it. */
typedef struct text {
  char *buf;
  size_t cap, n;
} text;

static void put(text *t, const char *s, size_t k) {
  if (t->n < t->cap) {
    size_t room = t->cap - t->n;
    memcpy(t->buf + t->n, s, k < room ? k : room);
  }
  t->n += k;
}

static void putf(text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void putf(text *t, const char *fmt, ...) {
  char tmp[96]; /* a key or two and their numbers: never cut */
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k > 0) put(t, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* s as a JSON string: quotes, with '"', '\\' and control characters
 * escaped; other bytes as they are. */
static void put_string(text *t, const char *s, unsigned opts) {
  put(t, "\"", 1);
  const char *run = s ? s : "";
  for (const char *p = run;; p++) {
    const unsigned char ch = (unsigned char)*p;
    if (ch != 0 && ch != '"' && ch != '\\' && ch >= 0x20) continue;
    put(t, run, (size_t)(p - run));
    run = p + 1;
    if (ch == 0) break;
    const char *esc = NULL;
    if (ch == '"') esc = "\\\"";
    else if (ch == '\\') esc = "\\\\";
    else if (opts & VQC_LEDGER_PY_ESCAPES)
      esc = ch == '\n' ? "\\n" : ch == '\r' ? "\\r" : ch == '\t' ? "\\t"
          : ch == '\b' ? "\\b" : ch == '\f' ? "\\f" : NULL;
    if (esc) put(t, esc, strlen(esc));
    else putf(t, "\\u%04x", ch);
  }
  put(t, "\"", 1);
}

size_t vqc_ledger_line_format(const vqc_ledger_line *l, unsigned opts,
                              char *buf, size_t cap) {
  text t = {buf, cap, 0};
  putf(&t, "{\"seq\":%" PRIu64 ",\"rank\":%d,\"op\":", l->seq, l->rank);
  put_string(&t, l->op, opts);
  put(&t, ",\"redop\":", 9);
  put_string(&t, l->redop, opts);
  put(&t, ",\"dtype\":", 9);
  put_string(&t, l->dtype, opts);
  putf(&t, ",\"count\":%" PRIu64 ",\"root\":%d,", l->count, l->root);
  if (l->group_size > 0) putf(&t, "\"group_size\":%d,", l->group_size);
  if (l->any_site) put(&t, "\"any_site\":true,", 16);
  if (l->mpi_type) {
    put(&t, "\"mpi_type\":", 11);
    put_string(&t, l->mpi_type, opts);
    put(&t, ",", 1);
  }
  if (l->has_group) {
    put(&t, "\"group\":[", 9);
    for (int i = 0; i < l->ngroup; i++)
      putf(&t, i ? ",%d" : "%d", l->group[i]);
    put(&t, "],\"group_name\":", 15);
    put_string(&t, l->group_name, opts);
    put(&t, ",", 1);
  }
  put(&t, "\"file\":", 7);
  put_string(&t, l->file, opts);
  putf(&t, ",\"line\":%d,\"func\":", l->line);
  put_string(&t, l->func, opts);
  putf(&t, ",\"t_enter_ns\":%" PRIu64, l->t_enter_ns);
  putf(&t, ",\"t_exit_ns\":%" PRIu64 ",\"state\":", l->t_exit_ns);
  put_string(&t, vqc_record_state_name(l->state), opts);
  put(&t, ",\"status\":", 10);
  put_string(&t, l->status, opts);
  put(&t, "}\n", 2);
  if (cap > 0) buf[t.n < cap ? t.n : cap - 1] = '\0';
  return t.n;
}

json_t *vqc_ledger_line_json(const vqc_ledger_line *l) {
  json_t *j = json_object();
  json_object_set_new(j, "seq", json_integer((json_int_t)l->seq));
  json_object_set_new(j, "rank", json_integer(l->rank));
  json_object_set_new(j, "op", json_string(l->op ? l->op : ""));
  json_object_set_new(j, "redop", json_string(l->redop ? l->redop : ""));
  json_object_set_new(j, "dtype", json_string(l->dtype ? l->dtype : ""));
  json_object_set_new(j, "count", json_integer((json_int_t)l->count));
  json_object_set_new(j, "root", json_integer(l->root));
  json_object_set_new(j, "file", json_string(l->file ? l->file : ""));
  json_object_set_new(j, "line", json_integer(l->line));
  json_object_set_new(j, "func", json_string(l->func ? l->func : ""));
  json_object_set_new(j, "t_enter_ns", json_integer((json_int_t)l->t_enter_ns));
  json_object_set_new(j, "t_exit_ns", json_integer((json_int_t)l->t_exit_ns));
  json_object_set_new(j, "state",
                      json_string(vqc_record_state_name(l->state)));
  json_object_set_new(j, "status", json_string(l->status ? l->status : ""));
  return j;
}

/* ---- reading */

/* Where a field is read from, and how strictly. */
typedef struct source {
  const json_t *j;
  const char *path;
  long lineno;
  bool lenient;
} source;

/* Member `key` as an integer in [lo, hi]. Lenient: >= lo, no upper bound
 * but hi's. */
static vqc_status get_int(const source *s, const char *key, long long lo,
                          long long hi, long long *out) {
  const json_t *v = json_object_get(s->j, key);
  if (!json_is_integer(v) || json_integer_value(v) < lo ||
      json_integer_value(v) > hi) {
    if (s->lenient)
      return vqc_error(VQC_EPARSE, "%s:%ld: field '%s': expected an integer "
                       ">= %lld", s->path, s->lineno, key, lo);
    return vqc_error(VQC_EPARSE, "%s:%ld: field '%s': expected an integer "
                     "in %lld..%lld",
                     s->path, s->lineno, key, lo, hi);
  }
  *out = json_integer_value(v);
  return VQC_OK;
}

static vqc_status get_str(const source *s, const char *key,
                          const char **out) {
  const json_t *v = json_object_get(s->j, key);
  if (!json_is_string(v))
    return vqc_error(VQC_EPARSE, "%s:%ld: field '%s': expected a string",
                     s->path, s->lineno, key);
  *out = json_string_value(v);
  return VQC_OK;
}

/* Lenient reading of a field that may be missing. */
static const char *opt_str(const source *s, const char *key) {
  const json_t *v = json_object_get(s->j, key);
  return json_is_string(v) ? json_string_value(v) : "";
}

static long long opt_int(const source *s, const char *key) {
  return json_integer_value(json_object_get(s->j, key)); /* 0 if none */
}

static vqc_status get_state(const source *s, vqc_record_state *out) {
  const char *v = NULL;
  if (s->lenient) v = opt_str(s, "state");
  else VQC_TRY(get_str(s, "state", &v));
  if (strcmp(v, "entered") == 0) *out = VQC_REC_ENTERED;
  else if (strcmp(v, "done") == 0) *out = VQC_REC_DONE;
  else if (strcmp(v, "failed") == 0) *out = VQC_REC_FAILED;
  else if (s->lenient)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'state': expected entered, "
                     "done or failed", s->path, s->lineno);
  else
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'state': '%s' (expected "
                     "entered, done or failed)",
                     s->path, s->lineno, v);
  return VQC_OK;
}

/* "group" (its world ranks; an element that is not an integer reads as
 * -1) and "group_name" ("" when it is not a string). */
static vqc_status get_group(const source *s, vqc_ledger_line *out) {
  const json_t *g = json_object_get(s->j, "group");
  if (!g || json_is_null(g)) return VQC_OK;
  out->has_group = true;
  const json_t *name = json_object_get(s->j, "group_name");
  out->group_name = json_is_string(name) ? json_string_value(name) : "";
  if (!json_is_array(g)) {
    out->ngroup = -1;
    return VQC_OK;
  }
  const size_t n = json_array_size(g);
  if (n > INT32_MAX)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'group': too long", s->path,
                     s->lineno);
  int *ranks = out->group_inline;
  if (n > VQC_LEDGER_GROUP_INLINE) {
    ranks = out->group_heap = malloc(n * sizeof *ranks);
    if (!ranks) return vqc_error(VQC_ENOMEM, "no memory for a group");
  }
  for (size_t i = 0; i < n; i++) {
    const json_t *v = json_array_get(g, i);
    const long long r = json_is_integer(v) ? json_integer_value(v) : -1;
    ranks[i] = r < 0 || r > INT32_MAX ? -1 : (int)r;
  }
  out->group = ranks;
  out->ngroup = (int)n;
  return VQC_OK;
}

vqc_status vqc_ledger_line_decode(const json_t *j, int rank, const char *path,
                                  long lineno, unsigned opts,
                                  vqc_ledger_line *out) {
  memset(out, 0, sizeof *out);
  const source s = {j, path ? path : "(ledger)", lineno,
                    (opts & VQC_LEDGER_LENIENT) != 0};
  long long v = 0;
  VQC_TRY(get_int(&s, "seq", 0, INT64_MAX, &v));
  out->seq = (uint64_t)v;
  VQC_TRY(get_int(&s, "rank", 0, INT32_MAX, &v));
  if (rank >= 0 && v != rank)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'rank': %lld in the dump of "
                     "rank %d",
                     s.path, lineno, v, rank);
  out->rank = (int)v;
  if (s.lenient) {
    out->op = opt_str(&s, "op");
    if (!out->op[0])
      return vqc_error(VQC_EPARSE, "%s:%ld: field 'op': expected a "
                       "collective name", s.path, lineno);
    VQC_TRY(get_state(&s, &out->state));
    out->status = opt_str(&s, "status");
    out->redop = opt_str(&s, "redop");
    out->dtype = opt_str(&s, "dtype");
    out->count = (uint64_t)opt_int(&s, "count");
    out->root = (int)opt_int(&s, "root");
    out->file = opt_str(&s, "file");
    out->line = (int)opt_int(&s, "line");
    out->func = opt_str(&s, "func");
    out->t_enter_ns = (uint64_t)opt_int(&s, "t_enter_ns");
    out->t_exit_ns = (uint64_t)opt_int(&s, "t_exit_ns");
  } else {
    VQC_TRY(get_str(&s, "op", &out->op));
    VQC_TRY(get_str(&s, "redop", &out->redop));
    VQC_TRY(get_str(&s, "dtype", &out->dtype));
    VQC_TRY(get_int(&s, "count", 0, INT64_MAX, &v));
    out->count = (uint64_t)v;
    VQC_TRY(get_int(&s, "root", -1, INT32_MAX, &v));
    out->root = (int)v;
    VQC_TRY(get_str(&s, "file", &out->file));
    VQC_TRY(get_str(&s, "func", &out->func));
    VQC_TRY(get_int(&s, "line", 0, INT32_MAX, &v));
    out->line = (int)v;
    VQC_TRY(get_state(&s, &out->state));
    VQC_TRY(get_str(&s, "status", &out->status));
    /* Times are told, never compared: taken when they are integers. */
    out->t_enter_ns = (uint64_t)opt_int(&s, "t_enter_ns");
    out->t_exit_ns = (uint64_t)opt_int(&s, "t_exit_ns");
  }
  const json_t *gs = json_object_get(j, "group_size");
  if (json_is_integer(gs) && json_integer_value(gs) > 0 &&
      json_integer_value(gs) <= INT32_MAX)
    out->group_size = (int)json_integer_value(gs);
  const json_t *any = json_object_get(j, "any_site");
  if (any && !json_is_boolean(any) && !s.lenient)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'any_site': expected true "
                     "or false", s.path, lineno);
  out->any_site = json_is_true(any);
  const json_t *mt = json_object_get(j, "mpi_type");
  if (json_is_string(mt)) out->mpi_type = json_string_value(mt);
  return get_group(&s, out);
}

void vqc_ledger_line_release(vqc_ledger_line *l) {
  if (!l) return;
  free(l->group_heap);
  l->group_heap = NULL;
  l->group = NULL;
}
