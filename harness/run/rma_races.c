/* rma_races.c: RMA accesses that race (rma_races.h says what is found and
 * why an ordered pair is never told). */
#include "rma_races.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rundir.h"
#include "trace.h" /* vqc_trace_read_line */

#define MAX_FINDINGS 32 /* findings told; the rest counted in a warning */
#define MAX_ACCESSES ((size_t)1 << 22) /* about 120 bytes each */
#define SCAN_MAX 256 /* later accesses compared with each one */

/* A call site, interned (a program has few). */
typedef struct rsite {
  char *file, *func, *call;
  int line;
} rsite;

/* One access as a rank's file tells it; lo/hi resolved after all files
 * are read (the target's disp_unit may be in another file). */
typedef struct access {
  const char *win;  /* interned */
  const rsite *s;   /* interned */
  int origin, target;
  long long disp, off, bytes, lo, hi;
  long long n, step;  /* a run of n operations, displacements step apart */
  int unit;         /* 0: the target's */
  char kind;        /* 'w', 'r', 'a' */
  bool fence, excl;
  uint64_t epoch, t0, t1;
  uint64_t id, id_last; /* the operations it stands for: id..id_last */
} access;

/* A rank's window and its disp_unit. */
typedef struct unit_of {
  int rank;
  const char *win;
  int unit;
} unit_of;

typedef struct tables {
  char **names;
  size_t n_names;
  rsite *sites;     /* pointers into it are taken only after reading */
  size_t n_sites;
  unit_of *units;
  size_t n_units;
  char **hosts;     /* per rank; NULL: no file */
  access *as;
  size_t n, cap;
} tables;

static const char *intern(tables *t, const char *name) {
  for (size_t i = 0; i < t->n_names; i++)
    if (strcmp(t->names[i], name) == 0) return t->names[i];
  char **grown = realloc(t->names, (t->n_names + 1) * sizeof *grown);
  if (!grown) return NULL;
  t->names = grown;
  if (!(t->names[t->n_names] = strdup(name))) return NULL;
  return t->names[t->n_names++];
}

/* The index of site (file, line, func, call) in t->sites; -1: no memory. */
static long site_index(tables *t, const char *file, int line,
                       const char *func, const char *call) {
  for (size_t i = 0; i < t->n_sites; i++) {
    const rsite *s = &t->sites[i];
    if (s->line == line && strcmp(s->file, file) == 0 &&
        strcmp(s->func, func) == 0 && strcmp(s->call, call) == 0)
      return (long)i;
  }
  rsite *grown = realloc(t->sites, (t->n_sites + 1) * sizeof *grown);
  if (!grown) return -1;
  t->sites = grown;
  rsite *s = &t->sites[t->n_sites];
  s->file = strdup(file);
  s->func = strdup(func);
  s->call = strdup(call);
  s->line = line;
  if (!s->file || !s->func || !s->call) {
    free(s->file), free(s->func), free(s->call);
    return -1;
  }
  return (long)t->n_sites++;
}

static const char *str(const json_t *j, const char *key) {
  const char *s = json_string_value(json_object_get(j, key));
  return s ? s : "";
}

static long long num(const json_t *j, const char *key) {
  const json_t *v = json_object_get(j, key);
  return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

static bool flag(const json_t *j, const char *key) {
  return json_is_true(json_object_get(j, key));
}

/* One access line j of rank r into t (its site's index in s's place until
 * resolve); why (n bytes) says what is wrong when it cannot be. */
static bool add_access(tables *t, const json_t *j, int r, char *why,
                       size_t n) {
  const char *kind = str(j, "access");
  if (!json_is_integer(json_object_get(j, "target")) ||
      !json_is_integer(json_object_get(j, "bytes")) ||
      (strcmp(kind, "w") != 0 && strcmp(kind, "r") != 0 &&
       strcmp(kind, "a") != 0)) {
    snprintf(why, n, "an access line lacks target, bytes or access");
    return false;
  }
  if (t->n == MAX_ACCESSES) {
    snprintf(why, n, "the ranks' files hold more than %zu accesses in all, "
             "more than the analysis compares", MAX_ACCESSES);
    return false;
  }
  if (t->n == t->cap) {
    const size_t c = t->cap ? 2 * t->cap : 256;
    access *grown = realloc(t->as, c * sizeof *grown);
    if (!grown) {
      snprintf(why, n, "no memory");
      return false;
    }
    t->as = grown;
    t->cap = c;
  }
  const long si = site_index(t, str(j, "file"), (int)num(j, "line"),
                             str(j, "func"), str(j, "call"));
  const char *win = intern(t, str(j, "w"));
  if (si < 0 || !win) {
    snprintf(why, n, "no memory");
    return false;
  }
  access *a = &t->as[t->n++];
  *a = (access){.win = win, .s = (const rsite *)(intptr_t)si, .origin = r,
                .target = (int)num(j, "target"), .disp = num(j, "disp"),
                .off = num(j, "off"), .bytes = num(j, "bytes"),
                .unit = (int)num(j, "unit"), .kind = kind[0],
                .n = num(j, "n") > 1 ? num(j, "n") : 1,
                .step = num(j, "step"),
                .fence = flag(j, "fence"), .excl = flag(j, "excl"),
                .epoch = (uint64_t)num(j, "epoch"),
                .t0 = (uint64_t)num(j, "t0"), .t1 = (uint64_t)num(j, "t1"),
                .id = (uint64_t)num(j, "id")};
  return true;
}

/* Rank r's file read into t; false (and a warning) when it cannot be. */
static bool read_rank(const char *dir, int r, tables *t, json_t *warnings,
                      char *unchecked, size_t nu) {
  char path[4200];
  snprintf(path, sizeof path, "%s/rank-%d.rma.jsonl", dir, r);
  FILE *f = fopen(path, "r");
  if (!f) return false; /* the rank made no window */
  char *buf = NULL, why[600] = "";
  size_t bcap = 0, len = 0;
  bool head = false, truncated = false;
  long lineno = 1;
  for (; !why[0]; lineno++) {
    if (vqc_trace_read_line(f, path, lineno, &buf, &bcap, &len) != VQC_OK) {
      snprintf(why, sizeof why, "line %ld cannot be read", lineno);
      break;
    }
    if (len == 0) break;
    json_t *j = json_loadb(buf, len, 0, NULL);
    if (!json_is_object(j)) {
      /* A last line cut by a rank's death is the end of what it did. */
      const int c = fgetc(f);
      if (c != EOF || buf[len - 1] == '\n')
        snprintf(why, sizeof why, "line %ld is not a JSON object", lineno);
      json_decref(j);
      break;
    }
    if (!head) {
      head = true;
      t->hosts[r] = strdup(str(j, "host"));
    } else if (json_object_get(j, "window")) {
      unit_of *grown =
          realloc(t->units, (t->n_units + 1) * sizeof *grown);
      const char *win = intern(t, str(j, "window"));
      if (!grown || !win) snprintf(why, sizeof why, "no memory");
      if (grown) t->units = grown;
      if (grown && win)
        t->units[t->n_units++] =
            (unit_of){.rank = r, .win = win, .unit = (int)num(j, "disp_unit")};
    } else if (json_object_get(j, "w")) {
      (void)add_access(t, j, r, why, sizeof why);
    } else if (flag(j, "truncated")) {
      truncated = true;
    }
    json_decref(j);
  }
  free(buf);
  fclose(f);
  char msg[5000];
  if (why[0]) {
    snprintf(msg, sizeof msg, "rank %d's RMA accesses were not all "
             "checked: %s: %s", r, path, why);
    json_array_append_new(warnings, json_string(msg));
    if (!unchecked[0])
      snprintf(unchecked, nu, "rank %d's RMA accesses were not all compared "
               "with other ranks' (rank-%d.rma.jsonl: %s)", r, r, why);
  } else if (truncated) {
    snprintf(msg, sizeof msg, "rank %d made more RMA accesses than its "
             "record keeps (%s): races among the later ones were not "
             "checked", r, path);
    json_array_append_new(warnings, json_string(msg));
  }
  return head;
}

/* Every access's bytes from its target's disp_unit, and its site's
 * pointer, into a new array: a run of operations whose cells touch end to
 * end is one access of all their bytes (ids id..id_last); one with gaps
 * or overlaps between its cells is its operations, one access each.
 * Accesses with no known unit are dropped, and expansions past
 * MAX_ACCESSES (a warning). */
static void resolve(tables *t, json_t *warnings, char *unchecked,
                    size_t nu) {
  access *out = NULL;
  size_t n = 0, cap = 0;
  bool cut = false;
  for (size_t i = 0; i < t->n && !cut; i++) {
    access a = t->as[i];
    a.s = &t->sites[(intptr_t)a.s];
    int unit = a.unit;
    for (size_t u = 0; unit <= 0 && u < t->n_units; u++)
      if (t->units[u].rank == a.target && t->units[u].win == a.win)
        unit = t->units[u].unit;
    if (unit <= 0 || a.bytes <= 0 || a.n < 1) continue;
    const bool solid = a.n == 1 || a.step * unit == a.bytes;
    const long long parts = solid ? 1 : a.n;
    for (long long k = 0; k < parts && !cut; k++) {
      if (n == cap) {
        const size_t c = cap ? 2 * cap : 256;
        access *grown = c <= MAX_ACCESSES ? realloc(out, c * sizeof *grown)
                                          : NULL;
        if (!grown) {
          cut = true;
          break;
        }
        out = grown;
        cap = c;
      }
      access *b = &out[n++];
      *b = a;
      b->lo = (a.disp + k * a.step) * unit + a.off;
      b->hi = b->lo + (solid ? a.n * a.bytes : a.bytes);
      b->id = a.id + (uint64_t)k;
      b->id_last = solid ? a.id + (uint64_t)a.n - 1 : b->id;
    }
  }
  if (cut) {
    json_array_append_new(warnings, json_string(
        "the ranks' RMA accesses are more than the analysis compares: races "
        "among the later ones were not checked"));
    if (!unchecked[0])
      snprintf(unchecked, nu, "the ranks' RMA accesses were more than the "
               "analysis compares (%zu), so races among the later ones were "
               "not checked", (size_t)MAX_ACCESSES);
  }
  free(t->as);
  t->as = out;
  t->n = n;
  t->cap = cap;
}

static int cmp_access(const void *pa, const void *pb) {
  const access *a = pa, *b = pb;
  const int w = strcmp(a->win, b->win);
  if (w) return w;
  if (a->target != b->target) return a->target < b->target ? -1 : 1;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  if (a->origin != b->origin) return a->origin < b->origin ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

/* Whether a and b (overlapping bytes of one target) race (rma_races.h). */
static bool race(const tables *t, const access *a, const access *b) {
  /* One operation's own accesses (or a run's) are not compared. */
  if (a->origin == b->origin && a->id <= b->id_last && b->id <= a->id_last)
    return false;
  if (a->kind != 'w' && b->kind != 'w') return false;
  if (a->fence != b->fence) return false;
  if (a->fence) return a->epoch == b->epoch;
  if (a->origin != b->origin) {
    if (a->excl || b->excl) return false;
    const char *ha = t->hosts[a->origin], *hb = t->hosts[b->origin];
    if (!ha || !hb || strcmp(ha, hb) != 0) return false;
  }
  return a->t0 < b->t1 && b->t0 < a->t1;
}

static const char *verb(char kind) {
  return kind == 'w' ? "writes" : kind == 'r' ? "reads" : "accumulates into";
}

/* "rank 0's MPI_Put at race.c:20 (main)" into b. */
static void who(const access *a, char *b, size_t n) {
  const char *slash = strrchr(a->s->file, '/');
  if (a->s->file[0])
    snprintf(b, n, "rank %d's %s at %s:%d (%s)", a->origin, a->s->call,
             slash ? slash + 1 : a->s->file, a->s->line, a->s->func);
  else
    snprintf(b, n, "rank %d's %s in %s", a->origin, a->s->call, a->s->func);
}

static void tell(const access *a, const access *b, vqc_findings *fresh) {
  if (b->origin < a->origin) { /* told from the lower rank's side */
    const access *t = a;
    a = b;
    b = t;
  }
  const long long lo = a->lo > b->lo ? a->lo : b->lo;
  const long long hi = a->hi < b->hi ? a->hi : b->hi;
  char wa[700], wb[700], ranks[64];
  who(a, wa, sizeof wa);
  who(b, wb, sizeof wb);
  if (a->origin == b->origin)
    snprintf(ranks, sizeof ranks, "rank %d", a->origin);
  else
    snprintf(ranks, sizeof ranks, "ranks %d and %d", a->origin, b->origin);
  char when[300];
  if (a->fence)
    snprintf(when, sizeof when, "both in the fence epoch that the window's "
             "fence #%" PRIu64 " opened, completed only by the next fence",
             a->epoch);
  else
    snprintf(when, sizeof when, "both in flight at once, neither completed "
             "(unlock or flush) before the other was issued");
  const char *what =
      a->kind == 'w' && b->kind == 'w'
          ? "the bytes the window holds afterwards depend on which lands last"
          : "the read may see the old bytes, the new ones or a mix";
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_LOST_INPLACE, -1,
      "%s access bytes %lld-%lld of rank %d's memory in window %s with no "
      "order between them: %s %s them and %s %s them, %s: %s (MPI calls "
      "conflicting accesses that are not ordered erroneous: separate them "
      "with a fence, or complete the first with MPI_Win_flush or "
      "MPI_Win_unlock and synchronise before the second; or use an "
      "exclusive lock or MPI_Accumulate)",
      ranks, lo, hi - 1, a->target, a->win, wa, verb(a->kind), wb,
      verb(b->kind), when, what);
  vqc_finding_add_rank(&x, a->origin);
  vqc_finding_add_rank(&x, b->origin);
  vqc_finding_set_site(&x, (vqc_site){a->s->file, a->s->line, a->s->func});
  json_t *d = x.detail;
  json_object_set_new(d, "window", json_string(a->win));
  json_object_set_new(d, "target", json_integer(a->target));
  json_object_set_new(d, "bytes", json_pack("[I,I]", (json_int_t)lo,
                                            (json_int_t)hi));
  json_object_set_new(d, "calls", json_pack("[s,s]", a->s->call, b->s->call));
  char sb[700];
  const char *slash = strrchr(b->s->file, '/');
  snprintf(sb, sizeof sb, "%s:%d", slash ? slash + 1 : b->s->file,
           b->s->line);
  json_object_set_new(d, "other_site", json_string(sb));
  json_object_set_new(d, "fence_epoch", a->fence ? json_integer(
                      (json_int_t)a->epoch) : json_null());
  json_object_set_new(d, "race", json_true());
  json_object_set_new(d, "rma", json_true());
  (void)vqc_findings_add(fresh, &x);
}

static void free_tables(tables *t, int ranks) {
  for (size_t i = 0; i < t->n_names; i++) free(t->names[i]);
  for (size_t i = 0; i < t->n_sites; i++)
    free(t->sites[i].file), free(t->sites[i].func), free(t->sites[i].call);
  for (int r = 0; t->hosts && r < ranks; r++) free(t->hosts[r]);
  free(t->names);
  free(t->sites);
  free(t->units);
  free(t->hosts);
  free(t->as);
}

void vqc_rma_races(const char *dir, int ranks, vqc_findings *fresh,
                   json_t *warnings, int64_t *accesses, char *unchecked,
                   size_t nu) {
  if (accesses) *accesses = 0;
  if (nu > 0) unchecked[0] = '\0';
  const int in_dir = vqc_run_dir_rank_span(dir, ".rma.jsonl");
  if (ranks <= 0 || in_dir > ranks) ranks = in_dir;
  if (ranks <= 0) return;
  tables t = {0};
  t.hosts = calloc((size_t)ranks, sizeof *t.hosts);
  if (!t.hosts) return;
  for (int r = 0; r < ranks; r++)
    (void)read_rank(dir, r, &t, warnings, unchecked, nu);
  resolve(&t, warnings, unchecked, nu);
  for (size_t i = 0; i < t.n; i++) /* a target past the ranks: no host */
    if (t.as[i].target < 0 || t.as[i].target >= ranks) t.as[i].bytes = 0;
  if (t.n > 0) qsort(t.as, t.n, sizeof *t.as, cmp_access);
  /* Each pair of sites (and target) told once. */
  const access *told[MAX_FINDINGS][2];
  int ntold = 0, more = 0;
  for (size_t i = 0; i < t.n; i++) {
    const access *a = &t.as[i];
    for (size_t j = i + 1; j < t.n && j <= i + SCAN_MAX; j++) {
      const access *b = &t.as[j];
      if (b->win != a->win || b->target != a->target || b->lo >= a->hi)
        break;
      if (a->bytes <= 0 || b->bytes <= 0 || !race(&t, a, b)) continue;
      bool seen = false;
      for (int k = 0; k < ntold && !seen; k++)
        seen = told[k][0]->target == a->target &&
               ((told[k][0]->s == a->s && told[k][1]->s == b->s) ||
                (told[k][0]->s == b->s && told[k][1]->s == a->s));
      if (seen) continue;
      if (ntold == MAX_FINDINGS) {
        more++;
        continue;
      }
      told[ntold][0] = a;
      told[ntold][1] = b;
      ntold++;
      tell(a, b, fresh);
    }
  }
  if (more > 0) {
    char msg[200];
    snprintf(msg, sizeof msg, "%d more pairs of racing RMA accesses not "
             "told (the first %d are)", more, MAX_FINDINGS);
    json_array_append_new(warnings, json_string(msg));
  }
  if (accesses) *accesses = (int64_t)t.n;
  free_tables(&t, ranks);
}
