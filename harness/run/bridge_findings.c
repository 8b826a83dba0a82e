/* bridge_findings.c: reads and merges the Python bridge's per-rank findings
 * files (see bridge_findings.h). Owned by the harness: the bridge writes the
 * files, this is their only reader. */
#include "bridge_findings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rundir.h"
#include "trace.h"
#include "utf8.h"

static int cmp_int(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* "file:line func" from a site object into buf (n bytes); a path too long
 * for it keeps its end, where the file's name is. */
static void site_text(const json_t *site, char *buf, size_t n) {
  const char *file = json_string_value(json_object_get(site, "file"));
  const char *func = json_string_value(json_object_get(site, "func"));
  const json_t *line = json_object_get(site, "line");
  if (!file || !file[0]) file = "?";
  if (!func || !func[0]) func = "?";
  char tail[64];
  snprintf(tail, sizeof tail, ":%lld %.40s",
           json_is_integer(line) ? (long long)json_integer_value(line) : 0LL,
           func);
  const size_t room = n - 1 - strlen(tail);
  const size_t lf = strlen(file);
  const char *shown = lf > room ? file + (lf - room) : file;
  snprintf(buf, n, "%s%s", shown, tail);
}

/* Parses one line of rank `rank`'s file into *x. VQC_EPARSE naming
 * path:lineno otherwise. */
static vqc_status parse_line(const char *line, size_t len, const char *path,
                             long lineno, int rank, vqc_finding *x) {
  if (strlen(line) != len)
    return vqc_error(VQC_EPARSE, "%s:%ld: the line holds a NUL byte (is this "
                     "file one of the vqcheck bridge's?)", path, lineno);
  json_error_t err;
  bool mended = false; /* a lone surrogate escape read as '?' */
  json_t *j = vqc_json_loadb_mended(line, len, JSON_REJECT_DUPLICATES, &err,
                                    &mended);
  if (!j)
    return vqc_error(VQC_EPARSE, "%s:%ld: not JSON (column %d): %s", path,
                     lineno, err.column, err.text);
  vqc_status s = VQC_OK;
  char site[256] = "";
  const json_t *jsite = json_object_get(j, "site");
  if (!json_is_object(j)) {
    s = vqc_error(VQC_EPARSE, "%s:%ld: expected a JSON object (one finding "
                  "per line)", path, lineno);
  } else if (json_is_object(jsite)) {
    /* The bridge's structured call site: run.json's "file:line func". */
    site_text(jsite, site, sizeof site);
    json_object_set_new(j, "site", json_string(site));
  }
  if (s == VQC_OK && !json_object_get(j, "ranks"))
    json_object_set_new(j, "ranks", json_array()); /* the file's rank */
  if (s == VQC_OK) {
    s = vqc_finding_from_json(j, x);
    if (s != VQC_OK) {
      char why[1024]; /* vqc_error overwrites the message it would quote */
      snprintf(why, sizeof why, "%s", vqc_last_error());
      s = vqc_error(VQC_EPARSE, "%s:%ld: %s", path, lineno, why);
    } else if (x->nranks == 0) {
      vqc_finding_add_rank(x, rank);
    }
  }
  if (s == VQC_OK && mended) { /* say which strings lost a character */
    if (strchr(x->tensor, '?')) x->invalid_utf8 |= VQC_FINDING_TEXT_TENSOR;
    if (strchr(x->site, '?')) x->invalid_utf8 |= VQC_FINDING_TEXT_SITE;
    if (strchr(x->message, '?')) x->invalid_utf8 |= VQC_FINDING_TEXT_MESSAGE;
  }
  json_decref(j);
  return s;
}

/* Appends the findings of one file to all. */
static vqc_status read_file(const char *path, int rank, vqc_findings *all) {
  FILE *f = fopen(path, "r");
  if (!f)
    return vqc_error(VQC_EIO, "cannot read %s: %s", path, strerror(errno));
  char *buf = NULL;
  size_t cap = 0, len = 0;
  vqc_status s = VQC_OK;
  for (long lineno = 1;; lineno++) {
    s = vqc_trace_read_line(f, path, lineno, &buf, &cap, &len);
    if (s != VQC_OK || len == 0) break;
    bool blank = true;
    for (size_t i = 0; i < len && blank; i++)
      blank = buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' ||
              buf[i] == '\n';
    if (blank) continue;
    vqc_finding x;
    s = parse_line(buf, len, path, lineno, rank, &x);
    if (s == VQC_OK) s = vqc_findings_add(all, &x);
    if (s != VQC_OK) break;
  }
  free(buf);
  fclose(f);
  return s;
}

/* The merge of bridge_findings.h: same kind, site and tensor. */
static bool same_place(const vqc_finding *a, const vqc_finding *b) {
  return a->kind == b->kind && strcmp(a->site, b->site) == 0 &&
         strcmp(a->tensor, b->tensor) == 0 && vqc_finding_same_story(a, b);
}

/* Appends the merged findings of `all` to out; all keeps the details of
 * those not appended (freed with it). */
static vqc_status merge_into(vqc_findings *all, vqc_findings *out) {
  vqc_status s = VQC_OK;
  bool *used = calloc((size_t)all->count + 1, sizeof *used);
  if (!used) return vqc_error(VQC_ENOMEM, "no memory to merge findings");
  for (int i = 0; i < all->count && s == VQC_OK; i++) {
    if (used[i]) continue;
    /* The group of i: the lowest step wins, the first among equals. */
    int best = i;
    for (int k = i + 1; k < all->count; k++)
      if (!used[k] && same_place(&all->items[k], &all->items[i]) &&
          all->items[k].step < all->items[best].step)
        best = k;
    vqc_finding m = all->items[best];
    m.detail = json_incref(all->items[best].detail);
    for (int k = i; k < all->count; k++) {
      if (used[k] || !same_place(&all->items[k], &all->items[i])) continue;
      used[k] = true;
      for (int r = 0; r < all->items[k].nranks; r++)
        vqc_finding_add_rank(&m, all->items[k].ranks[r]);
    }
    qsort(m.ranks, (size_t)m.nranks, sizeof m.ranks[0], cmp_int);
    s = vqc_findings_add(out, &m);
  }
  free(used);
  return s;
}

bool vqc_bridge_is_exception(const vqc_finding *x) {
  return x->kind == VQC_FINDING_RANK_FAILURE &&
         json_is_string(json_object_get(x->detail, "exception"));
}

/* When the exception was raised (detail.raised_at, Unix seconds); ones
 * without it sort last. */
static double raised_at(const vqc_finding *x) {
  const json_t *t = json_object_get(x->detail, "raised_at");
  return json_is_number(t) ? json_number_value(t) : 1e300;
}

/* The exceptions that ended ranks, as one rank_failure: the first raised
 * (in time) keeps its step, site and message, and is the story; each
 * later one, most often a peer's collective failing because that rank was
 * gone, is added as "; then rank 0's all_reduce failed (RuntimeError at
 * x.py:11)" with its ranks, and its detail goes into detail.then. */
static void fold_exceptions(vqc_findings *list) {
  int first = -1;
  for (int i = 0; i < list->count; i++)
    if (vqc_bridge_is_exception(&list->items[i]) &&
        (first < 0 || raised_at(&list->items[i]) <
                          raised_at(&list->items[first])))
      first = i;
  if (first < 0) return;
  vqc_finding *m = &list->items[first];
  json_t *then = json_array();
  size_t k = strlen(m->message);
  bool *folded = calloc((size_t)list->count, sizeof *folded);
  if (!then || !folded) { /* no memory: each stays its own finding */
    json_decref(then);
    free(folded);
    return;
  }
  /* The later ones, in the order they were raised. */
  for (;;) {
    int next = -1;
    for (int i = 0; i < list->count; i++)
      if (i != first && !folded[i] && vqc_bridge_is_exception(&list->items[i]) &&
          (next < 0 || raised_at(&list->items[i]) <
                           raised_at(&list->items[next])))
        next = i;
    if (next < 0) break;
    folded[next] = true;
    vqc_finding *x = &list->items[next];
    const char *type =
        json_string_value(json_object_get(x->detail, "exception"));
    const char *op =
        json_string_value(json_object_get(x->detail, "in_collective"));
    const char *base = strrchr(x->site, '/');
    base = base ? base + 1 : x->site;
    char who[96];
    if (x->nranks == 1) snprintf(who, sizeof who, "rank %d", x->ranks[0]);
    else snprintf(who, sizeof who, "%d more ranks", x->nranks);
    const size_t room = sizeof m->message - k;
    int w = op ? snprintf(m->message + k, room,
                          "; then %s's %.32s failed (%.64s at %.96s)", who,
                          op, type, base)
               : snprintf(m->message + k, room,
                          "; then %s raised %.64s at %.96s", who, type,
                          base);
    if (w > 0 && (size_t)w < room) {
      k += (size_t)w;
    } else {
      k = sizeof m->message - 1;
      m->truncated |= VQC_FINDING_TEXT_MESSAGE;
    }
    for (int r = 0; r < x->nranks; r++) vqc_finding_add_rank(m, x->ranks[r]);
    json_t *d = json_deep_copy(x->detail);
    if (d) {
      json_t *ranks = json_array();
      for (int r = 0; r < x->nranks; r++)
        json_array_append_new(ranks, json_integer(x->ranks[r]));
      json_object_set_new(d, "ranks", ranks);
      json_object_set_new(d, "site", json_string(x->site));
      json_array_append_new(then, d);
    }
  }
  qsort(m->ranks, (size_t)m->nranks, sizeof m->ranks[0], cmp_int);
  if (json_array_size(then) > 0) json_object_set(m->detail, "then", then);
  json_decref(then);
  /* The folded ones leave the list, the others keep their order. */
  int kept = 0;
  for (int i = 0; i < list->count; i++) {
    if (folded[i]) {
      json_decref(list->items[i].detail);
      continue;
    }
    if (kept != i) list->items[kept] = list->items[i];
    kept++;
  }
  list->count = kept;
  free(folded);
}

vqc_status vqc_bridge_findings_read(const char *dir, vqc_findings *out,
                                    int *nfiles) {
  if (nfiles) *nfiles = 0;
  int *ranks = NULL, n = 0;
  vqc_status s = vqc_run_dir_rank_list(dir, ".findings.jsonl", &ranks, &n);

  vqc_findings all;
  vqc_findings_init(&all);
  for (int i = 0; i < n && s == VQC_OK; i++) {
    char path[4200];
    int w = snprintf(path, sizeof path, "%s/rank-%d.findings.jsonl", dir,
                     ranks[i]);
    if (w < 0 || (size_t)w >= sizeof path) {
      s = vqc_error(VQC_EINVAL, "run directory path too long: %s", dir);
      break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    s = read_file(path, ranks[i], &all);
    if (s == VQC_OK && nfiles) (*nfiles)++;
  }
  vqc_findings merged;
  vqc_findings_init(&merged);
  if (s == VQC_OK) s = merge_into(&all, &merged);
  if (s == VQC_OK) fold_exceptions(&merged);
  for (int i = 0; i < merged.count && s == VQC_OK; i++) {
    s = vqc_findings_add(out, &merged.items[i]);
    if (s == VQC_OK) merged.items[i].detail = NULL; /* out owns it now */
  }
  vqc_findings_free(&merged);
  vqc_findings_free(&all);
  free(ranks);
  return s;
}
