/* scenario.c: reads scenario files (format: scenarios/README.md) and hands
 * their document to the schema walk (scenario_fields.c); the models' names,
 * a loaded scenario's batch and command-line overrides, and the listing of a
 * folder of scenarios.
 *
 * The file is parsed by libyaml's document API into a node tree;
 * scenario_fields.c only walks that tree against the scenario schema. Each
 * node keeps its start mark, so every error names "file:line: field: what
 * is wrong (what is expected)" (scenario_yaml.c). The walk follows the
 * schema (top mapping -> sizes / check / batch / expect -> scalars), never
 * the tree's own shape, so aliases that make the tree cyclic or absurdly
 * deep cannot make it loop or recurse. Before the document is built, a pass
 * over libyaml's events refuses nesting deeper than SCENARIO_MAX_DEPTH
 * (check_depth): libyaml itself takes quadratic time on deep flow
 * collections.
 *
 * Sizes the file leaves out are filled with the model's defaults (its row
 * of scenario.h's VQC_MODEL_LIST), so a loaded scenario is fully explicit.
 * The sizes themselves, their ranges, readers and JSON come from one list,
 * scenario.h's VQC_SCENARIO_SIZE_LIST. The pieces of the loader and what
 * they share: scenario_internal.h. */
#include "scenario.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "scenario_internal.h"

/* A scenario file is a page of text; anything far bigger is not one, and the
 * bound keeps a wrong path (a data file) from being read into memory. */
#define SCENARIO_MAX_BYTES (1 << 20)
/* Lists and mappings nested deeper than this are refused before the
 * document is built. A scenario nests three deep (top -> expect -> item);
 * the bound is for hostile files: libyaml's scanner costs O(depth) per
 * token inside flow collections, so "[[[[...", 100k deep (200 KB), took
 * 23 s to load and 500k minutes. */
#define SCENARIO_MAX_DEPTH 64

/* ---- models: what a scenario file may say about each (VQC_MODEL_LIST;
 * model_info: scenario_internal.h) */

const model_info scn_model_info[VQC_MODEL_COUNT] = {
#define MODEL_INFO(e, name, sizes, defaults) \
  [VQC_MODEL_##e] = {#name, sizes, defaults},
    VQC_MODEL_LIST(MODEL_INFO)
#undef MODEL_INFO
};

const char *vqc_model_name(vqc_model_kind m) {
  return (unsigned)m < VQC_MODEL_COUNT ? scn_model_info[m].name : "?";
}

/* Every model's name joined by ", " ("vq, rvq, fsq, clip, autoencoder"). */
void scn_model_names(char *out, size_t n) {
  out[0] = '\0';
  for (int m = 0; m < VQC_MODEL_COUNT; m++) {
    const size_t used = strlen(out);
    snprintf(out + used, n - used, "%s%s", m ? ", " : "",
             scn_model_info[m].name);
  }
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
  return scn_fail(L, line, "YAML", "%s%s (expected valid YAML)",
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
    s = scn_fail(&L, 1, "scenario",
                 "the file is empty (expected a mapping with name, model, "
                 "ranks, steps, batch, seed and expect)");
    goto done_doc;
  }
  s = scn_read_scenario(&L, root);
  if (s != VQC_OK) goto done_doc;
  /* A second document would be silently ignored otherwise. */
  if (!yaml_parser_load(&parser, &extra)) {
    s = fail_yaml(&L, &parser, text, len);
    goto done_doc;
  }
  const yaml_node_t *second = yaml_document_get_root_node(&extra);
  if (second)
    s = scn_fail(&L, scn_node_line(second), "scenario",
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
