/* jsonl.h: the one reader of vqcheck's per-rank JSON Lines files.
 *
 * Traces (rank-<r>.trace.jsonl), ledger dumps (rank-<r>.ledger.jsonl) and
 * live records (rank-<r>.live.jsonl) are read line by line through this
 * module, by the checkers and by the reports:
 *   - a line is at most VQC_JSONL_LINE_MAX bytes (1 MiB): a file that is
 *     not one of vqcheck's cannot make a reader hold a gigabyte line
 *     (VQC_EPARSE "path:line: the line is longer than ...", found without
 *     holding it);
 *   - a line is parsed with vqc_json_loadb_mended (utf8.h): a lone
 *     surrogate escape (Python's json.dumps of a surrogateescape'd name)
 *     reads as '?', not as a line that is not JSON;
 *   - blank lines (whitespace only) carry nothing and are not handed on;
 *   - zeros are no data (a writer through a shared mapping, the MPI
 *     interposer, leaves them past its last line, or inside the line it was
 *     copying, when it is killed; a supervisor may append after them): a
 *     run of zeros ends the line before it, which is then torn (without
 *     its newline), and when it lasts to the end of the file, the data;
 *   - the last line of a file may lack its newline: a writer killed while
 *     writing it leaves exactly that. The line says so (torn), and a caller
 *     may have such a line skipped when it is not JSON (VQC_JSONL_SKIP_TORN),
 *     which is what every reader of a file written line by line does. */
#ifndef VQC_JSONL_H
#define VQC_JSONL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "vqc/status.h"

/* The longest line read (the newline not counted). */
#define VQC_JSONL_LINE_MAX ((size_t)1 << 20)

/* Reads the next line of f (the file at `path`; `lineno` is the number this
 * line will have, for messages) into *buf, which it grows as needed up to
 * VQC_JSONL_LINE_MAX + 2 bytes (the caller owns and frees *buf; *buf may be
 * NULL and *cap 0 at first). *len: the bytes read, the newline included
 * when there is one (the last line may lack it); 0 at the end of the file.
 * The line is NUL-terminated after *len bytes and holds no NUL byte (zeros
 * end it: see the top). A line longer than VQC_JSONL_LINE_MAX:
 * VQC_EPARSE "path:lineno: the line is longer than ...", read only up to
 * the cap. VQC_EIO on a read error, VQC_ENOMEM. The primitive under
 * vqc_jsonl_read, for a reader that pulls lines one at a time
 * (trace_compare.c merges the ranks' traces so). */
vqc_status vqc_jsonl_read_line(FILE *f, const char *path, long lineno,
                               char **buf, size_t *cap, size_t *len);

/* Options of vqc_jsonl_read (bits of vqc_jsonl_opts.flags). */
enum {
  /* A line that is not JSON is not handed on. */
  VQC_JSONL_SKIP_BAD = 1u << 0,
  /* The same for the last line when it lacks its newline (torn). */
  VQC_JSONL_SKIP_TORN = 1u << 1,
};

typedef struct vqc_jsonl_opts {
  unsigned flags;       /* VQC_JSONL_SKIP_* */
  size_t json_flags;    /* jansson's decoding flags: JSON_REJECT_DUPLICATES */
  /* Not NULL: only lines holding this text are parsed and handed on (a
   * substring search costs far less than a parse, for a reader that wants
   * one event out of a record full of ledger lines). */
  const char *needle;
  /* Not NULL: counts the lines the needle passed over (not blank, without
   * it), for a reader that wants to know how many there were (the live
   * record's ledger lines) without parsing them. */
  unsigned long *passed_over;
} vqc_jsonl_opts;

/* One line, as handed to the callback (valid during the call only). */
typedef struct vqc_jsonl_line {
  const char *path;
  long lineno;           /* from 1; blank lines are counted */
  const char *text;      /* the line without its newline (and a CR before
                            it), NUL-terminated */
  size_t len;            /* its length (strlen(text)) */
  bool torn;             /* the file's last line, without its newline */
  json_t *json;          /* the parsed line (borrowed: incref to keep it);
                            NULL when it is not JSON, with err */
  const json_error_t *err;
} vqc_jsonl_line;

/* Called for each line handed on; a status other than VQC_OK stops the
 * reading and is returned. */
typedef vqc_status (*vqc_jsonl_fn)(const vqc_jsonl_line *line, void *user);

/* Reads the open file f (the file at path) to its end, handing each line
 * that is not blank (nor skipped by opts) to fn. opts may be NULL (all
 * zero). Errors: vqc_jsonl_read_line's, then fn's. f stays open. */
vqc_status vqc_jsonl_read_stream(FILE *f, const char *path,
                                 const vqc_jsonl_opts *opts, vqc_jsonl_fn fn,
                                 void *user);

/* vqc_jsonl_read_stream over the file at path. A file that does not exist
 * is VQC_OK with *present false (present may be NULL); one that cannot be
 * opened otherwise is VQC_EIO "cannot read PATH: why". */
vqc_status vqc_jsonl_read(const char *path, const vqc_jsonl_opts *opts,
                          vqc_jsonl_fn fn, void *user, bool *present);

#endif /* VQC_JSONL_H */
