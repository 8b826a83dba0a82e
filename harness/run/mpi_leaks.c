/* mpi_leaks.c: the ranks' "leaks" lines joined into warnings (mpi_leaks.h
 * says what they are and why they are warnings). */
#include "mpi_leaks.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "findings.h"        /* vqc_rank_ranges_text */
#include "ledger_analysis.h" /* vqc_live_path */
#include "utf8.h"

/* The leaks line comes just before the end line; past it only the end
 * line and the supervisor's few lines. */
#define TAIL_BYTES ((off_t)1 << 20)
#define GROUPS_MAX 16

static const char KEY[] = "{\"event\":\"leaks\"";

/* The last leaks line of rank r's live record, parsed (new reference);
 * NULL: none, or the record cannot be read. */
static json_t *leaks_line(const char *dir, int r) {
  char path[4200];
  if (vqc_live_path(dir, r, path, sizeof path) != VQC_OK) return NULL;
  const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return NULL;
  struct stat st;
  json_t *out = NULL;
  char *buf = NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0)
    goto done;
  const off_t from = st.st_size > TAIL_BYTES ? st.st_size - TAIL_BYTES : 0;
  const size_t n = (size_t)(st.st_size - from);
  buf = malloc(n + 1);
  if (!buf) goto done;
  size_t got = 0;
  while (got < n) {
    const ssize_t k = pread(fd, buf + got, n - got, from + (off_t)got);
    if (k <= 0) break;
    got += (size_t)k;
  }
  buf[got] = '\0';
  /* The last line that starts with KEY (the record may hold NUL bytes
   * where a killed rank's lines were never written: searched byte by
   * byte, not as a string). */
  char *line = NULL;
  for (size_t i = 0; i + sizeof KEY - 1 <= got; i++)
    if ((i == 0 ? from == 0 : buf[i - 1] == '\n') && buf[i] == '{' &&
        memcmp(buf + i, KEY, sizeof KEY - 1) == 0)
      line = buf + i;
  if (!line) goto done;
  const char *end = memchr(line, '\n', (size_t)(buf + got - line));
  if (!end) goto done; /* cut short: not a whole line */
  /* A path's bytes that are not UTF-8 become '?' (utf8.h), so the line
   * still parses (jansson refuses the whole text otherwise). */
  size_t n_clean = 0;
  vqc_utf8_copy(line, (size_t)(end - line) + 1, line, (size_t)(end - line),
                0, &n_clean);
  out = vqc_json_loadb_mended(line, n_clean, 0, NULL, NULL);
  if (out && !json_is_object(out)) {
    json_decref(out);
    out = NULL;
  }
done:
  free(buf);
  close(fd);
  return out;
}

/* One kind of object made at one site by one call, on some ranks. */
typedef struct leak_group {
  char object[48], objects[48], free_with[48], call[64], file[512],
      func[256];
  long long line;
  int *ranks, nranks;
  unsigned long long least, most, total;
} leak_group;

static const char *text_of(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "?";
}

static unsigned long long count_of(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  return json_is_integer(v) && json_integer_value(v) > 0
             ? (unsigned long long)json_integer_value(v)
             : 0;
}

/* Entry e (one of a rank's "objects") of rank r added to its group. */
static void add_entry(leak_group *grp, int *ngrp, unsigned long long *rest,
                      const json_t *e, int r, int ranks) {
  const unsigned long long count = count_of(e, "count");
  if (count == 0) return;
  const json_t *site = json_object_get(e, "site");
  const json_t *line = json_object_get(site, "line");
  const long long ln = json_is_integer(line) ? json_integer_value(line) : 0;
  const char *objects = text_of(e, "objects"), *call = text_of(e, "call");
  const char *file = text_of(site, "file");
  int k = 0;
  while (k < *ngrp &&
         !(strcmp(grp[k].objects, objects) == 0 &&
           strcmp(grp[k].call, call) == 0 && grp[k].line == ln &&
           strcmp(grp[k].file, file) == 0))
    k++;
  if (k == *ngrp) {
    if (k == GROUPS_MAX) {
      *rest += count;
      return;
    }
    leak_group *x = &grp[k];
    memset(x, 0, sizeof *x);
    x->ranks = malloc(sizeof *x->ranks * (size_t)ranks);
    if (!x->ranks) {
      *rest += count;
      return;
    }
    snprintf(x->object, sizeof x->object, "%s", text_of(e, "object"));
    snprintf(x->objects, sizeof x->objects, "%s", objects);
    snprintf(x->free_with, sizeof x->free_with, "%s",
             text_of(e, "free_with"));
    snprintf(x->call, sizeof x->call, "%s", call);
    snprintf(x->file, sizeof x->file, "%s", file);
    snprintf(x->func, sizeof x->func, "%s", text_of(site, "func"));
    x->line = ln;
    x->least = count;
    (*ngrp)++;
  }
  leak_group *x = &grp[k];
  if (x->nranks < ranks) x->ranks[x->nranks++] = r;
  if (count < x->least) x->least = count;
  if (count > x->most) x->most = count;
  x->total += count;
}

static void warn(json_t *warnings, const char *msg) {
  json_array_append_new(warnings, vqc_json_text(msg, strlen(msg)));
}

/* (mpi_leaks.h) */
void vqc_mpi_leaks(const char *dir, int ranks, json_t *warnings) {
  if (ranks <= 0 || !warnings) return;
  leak_group grp[GROUPS_MAX];
  int ngrp = 0;
  unsigned long long rest = 0, not_followed = 0;
  for (int r = 0; r < ranks; r++) {
    json_t *j = leaks_line(dir, r);
    if (!j) continue;
    const json_t *objs = json_object_get(j, "objects");
    for (size_t i = 0; i < json_array_size(objs); i++)
      add_entry(grp, &ngrp, &rest, json_array_get(objs, i), r, ranks);
    rest += count_of(j, "more_count");
    not_followed += count_of(j, "not_followed");
    json_decref(j);
  }
  for (int k = 0; k < ngrp; k++) {
    const leak_group *x = &grp[k];
    char who[512], each[96], msg[2048];
    vqc_rank_ranges_text(x->ranks, x->nranks, who, sizeof who);
    if (x->nranks == 1)
      each[0] = '\0';
    else if (x->least == x->most)
      snprintf(each, sizeof each, " (%llu each)", x->least);
    else
      snprintf(each, sizeof each, " (%llu-%llu per rank, %llu in all)",
               x->least, x->most, x->total);
    const unsigned long long shown = x->nranks == 1 ? x->total : x->most;
    snprintf(msg, sizeof msg,
             "MPI objects never freed: rank%s %.500s reached MPI_Finalize "
             "with %llu %.47s made by %.63s at %.400s:%lld (%.200s) not "
             "freed%.95s: MPI holds each until it is freed, and made in a "
             "loop they run out; free each with %.47s once done with it",
             x->nranks == 1 ? "" : "s", who, shown,
             shown == 1 ? x->object : x->objects, x->call, x->file, x->line,
             x->func, each, x->free_with);
    warn(warnings, msg);
    free(x->ranks);
  }
  if (rest > 0) {
    char msg[400];
    snprintf(msg, sizeof msg, "MPI objects never freed: %llu more, made "
             "at other call sites or by other calls (not listed here)",
             rest);
    warn(warnings, msg);
  }
  if (not_followed > 0) {
    char msg[400];
    snprintf(msg, sizeof msg, "MPI objects not followed: %llu made while "
             "over 786000 others were alive on their rank, so whether they "
             "were freed is not known", not_followed);
    warn(warnings, msg);
  }
}
