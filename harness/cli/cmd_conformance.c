/* cmd_conformance.c: `vqcheck conformance DIR`, which replays golden cases
 * produced by vector-quantize-pytorch (tests/fixtures/vqpt) through our
 * reference quantizers and reports, per case, pass / FAIL / skipped with the
 * worst difference found.
 *
 * DIR is a fixture root with index.json (its "cases" are run, in order), a
 * root without index.json (every subdirectory holding a case.json, sorted by
 * name), or a single case directory. The per-kind work lives in the
 * handlers (conformance.h); this file only finds cases, filters, prints and
 * picks the exit code. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "conformance.h"

#define MAX_KIND_FILTERS 16

typedef struct conf_opts {
  const char *root;
  bool json;
  bool verbose;
  bool strict; /* skipped cases count as failures */
  int nkinds;
  const char *kinds[MAX_KIND_FILTERS]; /* --kind filters; none: all kinds */
} conf_opts;

/* The cases to run: names (as listed) and their directories, malloc'd. */
typedef struct case_list {
  int n, cap;
  char **names;
  char **dirs;
} case_list;

static void case_list_free(case_list *l) {
  for (int i = 0; i < l->n; i++) {
    free(l->names[i]);
    free(l->dirs[i]);
  }
  free(l->names);
  free(l->dirs);
}

static char *path_join(const char *a, const char *b) {
  size_t la = strlen(a);
  while (la > 1 && a[la - 1] == '/') la--;
  char *p = malloc(la + strlen(b) + 2);
  if (p) sprintf(p, "%.*s/%s", (int)la, a, b);
  return p;
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static vqc_status case_list_add(case_list *l, const char *name,
                                const char *dir) {
  if (l->n == l->cap) {
    const int cap = l->cap ? 2 * l->cap : 16;
    char **names = realloc(l->names, (size_t)cap * sizeof *names);
    if (names) l->names = names;
    char **dirs = realloc(l->dirs, (size_t)cap * sizeof *dirs);
    if (dirs) l->dirs = dirs;
    if (!names || !dirs) return vqc_error(VQC_ENOMEM, "out of memory");
    l->cap = cap;
  }
  char *n = malloc(strlen(name) + 1), *d = malloc(strlen(dir) + 1);
  if (!n || !d) {
    free(n);
    free(d);
    return vqc_error(VQC_ENOMEM, "out of memory");
  }
  strcpy(n, name);
  strcpy(d, dir);
  l->names[l->n] = n;
  l->dirs[l->n] = d;
  l->n++;
  return VQC_OK;
}

/* Cases listed in root/index.json. */
static vqc_status cases_from_index(const char *root, const char *index_path,
                                   case_list *l) {
  json_error_t err;
  json_t *doc = json_load_file(index_path, JSON_REJECT_DUPLICATES, &err);
  if (!doc)
    return vqc_error(VQC_EPARSE, "%s:%d:%d: not valid JSON: %s", index_path,
                     err.line, err.column, err.text);
  vqc_status s = VQC_OK;
  const json_t *cases = json_object_get(doc, "cases");
  if (!json_is_array(cases)) {
    s = vqc_error(VQC_EPARSE, "%s: cases: %s, expected a list of case "
                  "directory names",
                  index_path, cases ? "not a list" : "missing");
    goto done;
  }
  for (size_t i = 0; i < json_array_size(cases); i++) {
    const json_t *c = json_array_get(cases, i);
    const char *name = json_string_value(c);
    if (!name || name[0] == '\0' || name[0] == '/' || strstr(name, "..")) {
      s = vqc_error(VQC_EPARSE, "%s: cases[%zu]: expected the name of a case "
                    "directory under %s",
                    index_path, i, root);
      goto done;
    }
    char *dir = path_join(root, name);
    if (!dir) {
      s = vqc_error(VQC_ENOMEM, "out of memory");
      goto done;
    }
    /* A listed case that is missing is run anyway: it fails with "cannot
     * read", which is the truth about it. */
    s = case_list_add(l, name, dir);
    free(dir);
    if (s != VQC_OK) goto done;
  }
done:
  json_decref(doc);
  return s;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Subdirectories of root that hold a case.json, sorted by name. */
static vqc_status cases_from_scan(const char *root, case_list *l) {
  DIR *d = opendir(root);
  if (!d) return vqc_error(VQC_EIO, "%s: cannot list the directory", root);
  case_list found = {0};
  vqc_status s = VQC_OK;
  struct dirent *e;
  while (s == VQC_OK && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char *dir = path_join(root, e->d_name);
    char *json = dir ? path_join(dir, "case.json") : NULL;
    if (!dir || !json)
      s = vqc_error(VQC_ENOMEM, "out of memory");
    else if (is_file(json))
      s = case_list_add(&found, e->d_name, e->d_name);
    free(dir);
    free(json);
  }
  closedir(d);
  if (s == VQC_OK && found.n > 0)
    qsort(found.names, (size_t)found.n, sizeof *found.names, compare_names);
  for (int i = 0; s == VQC_OK && i < found.n; i++) {
    char *dir = path_join(root, found.names[i]);
    s = dir ? case_list_add(l, found.names[i], dir)
            : vqc_error(VQC_ENOMEM, "out of memory");
    free(dir);
  }
  case_list_free(&found);
  return s;
}

/* Fills l from DIR; an error means DIR itself is unusable (exit 2). */
static vqc_status find_cases(const char *root, case_list *l) {
  if (!is_dir(root))
    return vqc_error(VQC_EINVAL, "%s: not a directory", root);
  char *case_json = path_join(root, "case.json");
  char *index = path_join(root, "index.json");
  vqc_status s = VQC_OK;
  if (!case_json || !index) {
    s = vqc_error(VQC_ENOMEM, "out of memory");
  } else if (is_file(case_json)) {
    /* A single case directory: its name is its last path component. */
    size_t end = strlen(root);
    while (end > 1 && root[end - 1] == '/') end--;
    size_t start = end;
    while (start > 0 && root[start - 1] != '/') start--;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(end - start), root + start);
    s = case_list_add(l, name, root);
  } else if (is_file(index)) {
    s = cases_from_index(root, index, l);
  } else {
    s = cases_from_scan(root, l);
  }
  free(case_json);
  free(index);
  if (s == VQC_OK && l->n == 0)
    s = vqc_error(VQC_EINVAL,
                  "%s: no cases (expected index.json, subdirectories with a "
                  "case.json, or a case.json)",
                  root);
  return s;
}

static bool kind_selected(const conf_opts *o, const char *kind) {
  if (o->nkinds == 0) return true;
  for (int i = 0; i < o->nkinds; i++)
    if (strcmp(o->kinds[i], kind) == 0) return true;
  return false;
}

static const char *outcome_text(vqc_conformance_outcome o) {
  return o == VQC_CONF_PASS ? "pass" : o == VQC_CONF_FAIL ? "FAIL" : "skipped";
}

/* "worst=3.2e-07 (out[17])", or "worst=0" when nothing differed. */
static void format_worst(const vqc_conformance_result *r, char *buf,
                         size_t cap) {
  if (r->compared == 0)
    snprintf(buf, cap, "worst=-"); /* nothing was compared */
  else if (r->worst_array[0] == '\0')
    snprintf(buf, cap, "worst=0");
  else
    snprintf(buf, cap, "worst=%.3g (%s[%lld])", r->worst, r->worst_array,
             (long long)r->worst_index);
}

/* A handler's message may carry a library error with its source location
 * ("fixture.c:88: VQC_EPARSE: ..."): for people, without it. */
static const char *case_message(const char *message, char *buf, size_t cap) {
  if (vqc_cli_debug()) return message;
  vqc_cli_strip_internal(message, buf, cap);
  return buf;
}

static void print_text(const conf_opts *o, int name_width, const char *name,
                       const char *kind, const char *dir,
                       const vqc_conformance_result *r) {
  char message[sizeof r->message];
  char worst[128];
  format_worst(r, worst, sizeof worst);
  if (r->outcome == VQC_CONF_SKIPPED)
    printf("%-*s  %-17s  skipped\n", name_width, name, kind);
  else
    printf("%-*s  %-17s  %-7s  %s\n", name_width, name, kind,
           outcome_text(r->outcome), worst);
  if (r->outcome == VQC_CONF_FAIL) {
    if (o->verbose) {
      /* Every failing output, one per line. */
      const char *line = r->details;
      while (*line) {
        const char *nl = strchr(line, '\n');
        const int len = nl ? (int)(nl - line) : (int)strlen(line);
        printf("    %.*s\n", len, line);
        line += len + (nl ? 1 : 0);
      }
    } else {
      printf("    %s", case_message(r->message, message, sizeof message));
      if (r->narrays_failed > 1)
        printf(" (and %d more output%s; --verbose lists them)",
               r->narrays_failed - 1,
               r->narrays_failed == 2 ? " differs" : "s differ");
      printf("\n");
    }
  }
  if (o->verbose) {
    if (r->outcome == VQC_CONF_SKIPPED)
      printf("    %s\n", case_message(r->message, message, sizeof message));
    printf("    dir %s, %lld values compared\n", dir, (long long)r->compared);
  }
  fflush(stdout);
}

/* One case as a JSON object (NULL when out of memory). */
static json_t *case_json(const char *name, const char *kind, const char *dir,
                         const vqc_conformance_result *r) {
  json_t *c = json_object();
  if (!c) return NULL;
  json_object_set_new(c, "name", json_string(name));
  json_object_set_new(c, "kind", json_string(kind));
  json_object_set_new(c, "dir", json_string(dir));
  json_object_set_new(c, "result", json_string(r->outcome == VQC_CONF_PASS
                                                   ? "pass"
                                               : r->outcome == VQC_CONF_FAIL
                                                   ? "fail"
                                                   : "skipped"));
  /* JSON has no inf or NaN: those become null, with the text beside. */
  json_object_set_new(c, "worst",
                      isfinite(r->worst) ? json_real(r->worst) : json_null());
  if (!isfinite(r->worst)) {
    char text[32];
    snprintf(text, sizeof text, "%g", r->worst);
    json_object_set_new(c, "worst_text", json_string(text));
  }
  if (r->worst_array[0]) {
    json_object_set_new(c, "worst_array", json_string(r->worst_array));
    json_object_set_new(c, "worst_index", json_integer(r->worst_index));
  }
  json_object_set_new(c, "compared", json_integer(r->compared));
  json_object_set_new(c, "failed_outputs", json_integer(r->narrays_failed));
  char message[sizeof r->message];
  if (r->message[0])
    json_object_set_new(c, "message", json_string(case_message(
                                          r->message, message,
                                          sizeof message)));
  if (r->outcome == VQC_CONF_FAIL && r->details[0])
    json_object_set_new(c, "details", json_string(r->details));
  return c;
}

static void conformance_help(FILE *f) {
  fprintf(f,
"usage: vqcheck conformance DIR [--kind KIND]... [--strict] [--json]\n"
"                               [--verbose] [--help]\n"
"\n"
"Replays golden cases produced by lucidrains/vector-quantize-pytorch\n"
"(format vq-oracle-fixture/1, e.g. tests/fixtures/vqpt) through vqcheck's\n"
"reference quantizers and compares every output: exactly for indices,\n"
"masks, counts and FSQ outputs, and within |got - want| <= 1e-5 * max(1,\n"
"|want|) for every other float.\n"
"\n"
"DIR is a fixture root with index.json (the cases it lists), a directory\n"
"whose subdirectories hold case.json files, or one case directory.\n"
"\n"
"One line per case: NAME  KIND  pass|FAIL|skipped  worst=D (ARRAY[i]),\n"
"where D is the largest |got - want| / max(1, |want|) over all compared\n"
"values and i the flat (C order) index ('worst=-': nothing compared); a\n"
"FAIL line is followed by the reason. Last line: 'N passed, M failed'\n"
"(', K skipped' when any).\n"
"\n"
"  --kind KIND  run only cases of this kind (repeatable)\n"
"  --strict     count skipped cases as failures\n"
"  --json       print the results as one JSON document instead\n"
"  --verbose    list every failing output, skip reasons and case paths,\n"
"               and errors with their full internal text (also: VQC_DEBUG=1)\n"
"\n"
"A case of a kind this build has no handler for is 'skipped': it is never\n"
"counted as passed, but on its own it does not fail the run (use --strict\n"
"for that). A case that cannot be read (bad JSON, missing or wrongly sized\n"
"file, BLAKE2b mismatch) fails, with the reason.\n"
"\n"
"exit: 0 no case failed, 1 at least one case failed (or, with --strict,\n"
"was skipped), 2 bad usage, DIR unusable, or no case selected\n");
}

#define usage_error(...) vqc_cli_usage_error("conformance", __VA_ARGS__)

int vqc_cmd_conformance(int argc, char **argv) {
  conf_opts o = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      conformance_help(stdout);
      return 0;
    } else if (strcmp(a, "--json") == 0) {
      o.json = true;
    } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
      o.verbose = true;
      vqc_cli_set_verbose(true); /* and full internal error text */
    } else if (strcmp(a, "--strict") == 0) {
      o.strict = true;
    } else if (strcmp(a, "--kind") == 0) {
      if (i + 1 >= argc) return usage_error("%s needs a kind", a);
      if (o.nkinds == MAX_KIND_FILTERS)
        return usage_error("too many %s filters", a);
      o.kinds[o.nkinds++] = argv[++i];
    } else if (a[0] == '-' && a[1] != '\0') {
      return usage_error("unknown option '%s'", a);
    } else if (o.root) {
      return usage_error("only one DIR is accepted, got also '%s'", a);
    } else {
      o.root = a;
    }
  }
  if (!o.root) return usage_error("missing DIR");

  case_list cases = {0};
  vqc_status s = find_cases(o.root, &cases);
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck conformance: %s\n", vqc_cli_error_text());
    case_list_free(&cases);
    return s == VQC_ENOMEM ? 3 : 2;
  }

  int name_width = 4;
  for (int i = 0; i < cases.n; i++)
    if ((int)strlen(cases.names[i]) > name_width)
      name_width = (int)strlen(cases.names[i]);

  json_t *doc = o.json ? json_object() : NULL;
  json_t *list = o.json ? json_array() : NULL;
  int passed = 0, failed = 0, skipped = 0, selected = 0;
  for (int i = 0; i < cases.n; i++) {
    /* Filter on the kind alone, so that a filtered-out case's arrays are
     * not even read; a case.json too broken to say its kind runs (and
     * fails) whatever the filter. */
    char kind[64];
    if (o.nkinds > 0 &&
        vqc_fixture_read_kind(cases.dirs[i], kind, sizeof kind) == VQC_OK &&
        !kind_selected(&o, kind)) {
      if (o.verbose && !o.json)
        printf("%-*s  %-17s  not selected\n", name_width, cases.names[i],
               kind);
      continue;
    }
    selected++;
    vqc_conformance_result r;
    vqc_conformance_run_case(cases.dirs[i], &r, kind, sizeof kind);
    if (r.outcome == VQC_CONF_PASS) passed++;
    else if (r.outcome == VQC_CONF_FAIL) failed++;
    else skipped++;
    if (o.json)
      json_array_append_new(list, case_json(cases.names[i], kind,
                                            cases.dirs[i], &r));
    else
      print_text(&o, name_width, cases.names[i], kind, cases.dirs[i], &r);
  }
  case_list_free(&cases);

  if (selected == 0) {
    json_decref(doc);
    json_decref(list);
    fprintf(stderr, "vqcheck conformance: %s: no case of the selected "
            "kind(s)\n", o.root);
    return 2;
  }
  const bool ok = failed == 0 && !(o.strict && skipped > 0);
  if (o.json) {
    json_object_set_new(doc, "root", json_string(o.root));
    json_object_set_new(doc, "cases", list);
    json_object_set_new(doc, "passed", json_integer(passed));
    json_object_set_new(doc, "failed", json_integer(failed));
    json_object_set_new(doc, "skipped", json_integer(skipped));
    json_object_set_new(doc, "strict", json_boolean(o.strict));
    json_object_set_new(doc, "ok", json_boolean(ok));
    json_dumpf(doc, stdout, JSON_INDENT(1));
    printf("\n");
    json_decref(doc);
  } else {
    printf("%d passed, %d failed", passed, failed);
    if (skipped > 0) printf(", %d skipped", skipped);
    printf("\n");
  }
  return ok ? 0 : 1;
}
