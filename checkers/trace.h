/* trace.h: the per-rank digest trace (rank-<r>.trace.jsonl in the run
 * directory): an append writer used by the divergence checker, and a reader
 * for `vqcheck compare`, which also reads traces written by other programs.
 *
 * Format vqcheck-trace/1. UTF-8 text, one JSON object per line ("\n"), one
 * line per tensor per checked step, lines of a step in registry order:
 *
 *   {"schema":"vqcheck-trace/1","rank":0,"step":3,"tensor":"embed",
 *    "dtype":"float32","shape":[32,16],"digest_algo":"vqc-xxh3-tree-1",
 *    "digest":"0123456789abcdef"}
 *
 *   schema       the string "vqcheck-trace/1" on every line.
 *   rank         integer >= 0: the rank that wrote the line.
 *   step         integer >= 0: the training step whose end state is digested
 *                (0-based; the step the runner passed to step_end).
 *   tensor       non-empty string (< 256 bytes): the tensor's name, e.g.
 *                "encoder.0.weight"; names are unique within a step.
 *   dtype        non-empty string (< 32 bytes): "float32", "float64", "int32",
 *                "int64", "uint8", "bfloat16", ... (the names of digest.h's
 *                VQC_DIGEST_TYPE_LIST); other writers may use their
 *                own names; compare only checks equality.
 *   shape        array of at most 8 integers >= 0 ([] for a scalar).
 *   digest_algo  the digest definition. "vqc-xxh3-tree-1" is the tensor
 *                digest of vqc/digest.h (README "Tensor digest"): XXH3-64 of
 *                a header (dtype code, shape) and the XXH3-64 leaves of 64 KiB
 *                chunks of the contiguous little-endian bytes. A line with
 *                another algorithm is read back as it is; digests are only
 *                comparable between lines with the same algorithm.
 *   digest       exactly 16 lowercase hex digits, the 64-bit digest, most
 *                significant digit first (printf "%016" PRIx64).
 *   program      optional string (< 256 bytes, no NUL): the program that
 *                wrote the trace, e.g. "train.py"; reports name the traces
 *                by it. Absent or "" means none. vqcheck runs leave it out.
 *   group        optional array of distinct integers >= 0 holding `rank`:
 *                the replica group, the ranks that must hold equal bits of
 *                this tensor (a DDP process group, the data-parallel
 *                replicas of a tensor-parallel shard or a pipeline stage,
 *                HSDP's replica group). Absent: the whole world is one
 *                group. Every rank of a group writes the same group (in
 *                any order); a group of one rank has no replica, so its
 *                tensor is not comparable (never a divergence).
 *   shard        optional string (< 128 bytes, no NUL): which part of the
 *                tensor this rank holds, e.g. "Shard(0)@1" (DTensor
 *                placements and the mesh coordinate on Shard/Partial
 *                dimensions) or "flat:2/4"; absent or "" for the whole
 *                tensor. Lines are compared only among ranks that name the
 *                same tensor, group and shard.
 *
 * A tensor the writer could not digest (an element type without a digest
 * code, ...) is named by a line of its own at each checked step, in place of
 * dtype, shape, digest_algo, digest and values (which it must not have):
 *
 *   {"schema":"vqcheck-trace/1","rank":0,"step":3,"tensor":"q",
 *    "not_digested":"its element type torch.bits8 has no digest code",
 *    "unchecked":true}
 *
 *   not_digested non-empty string (< 512 bytes, no NUL): why.
 *   unchecked    optional boolean: false when the tensor held nothing to
 *                compare (a meta tensor); absent or true: it held contents
 *                nothing compared, so a comparison of these traces is not
 *                a clean verdict (`vqcheck compare` exits 3 unless a
 *                finding makes it 1).
 * Such a line is never compared; a reader older than it rejects it (a
 * missing dtype), never reads past it as a clean trace.
 *
 * Readers ignore keys they do not know (writers may add e.g. "time") and skip
 * empty lines; anything else that breaks the rules above is an error naming
 * file:line and the field. A line is at most VQC_TRACE_LINE_MAX bytes (1 MiB,
 * the newline not counted); a longer one is an error (VQC_EPARSE naming
 * file:line and the cap), found after reading at most the cap, so a file
 * that is not a trace (one huge line) cannot make a reader hold it whole.
 *
 * Unlike reports, a trace is written in place (not to a temporary name): it
 * is a log, and the point is that a killed job keeps every step it finished.
 * The writer is line-buffered and the checker also flushes at step end. */
#ifndef VQC_TRACE_H
#define VQC_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "jsonl.h"
#include "vqc/status.h"

#define VQC_TRACE_SCHEMA "vqcheck-trace/1"
#define VQC_TRACE_DIGEST_ALGO "vqc-xxh3-tree-1"
#define VQC_TRACE_MAX_DIMS 8
#define VQC_TRACE_NAME_MAX 256
#define VQC_TRACE_DTYPE_MAX 32
#define VQC_TRACE_ALGO_MAX 64
#define VQC_TRACE_WHY_MAX 512
/* A group as canonical text (vqc_trace_group_text): ranks in increasing
 * order, a run of 3 or more with one stride as "a-b:s" ("0-1016:8"),
 * others as single numbers, separated by ','. Mesh slices are such runs,
 * so this holds groups of any size; a group too irregular for it is a
 * VQC_EPARSE naming the line. */
#define VQC_TRACE_GROUP_MAX 512
#define VQC_TRACE_SHARD_MAX 128
#define VQC_TRACE_MAX_VALUES 8
/* The most ranks a group may name (trace_compare.h's rank limit). */
#define VQC_TRACE_GROUP_MAX_RANKS 4096
/* The longest trace line, in bytes, the newline not counted. A line holds
 * one tensor's digest: a few hundred bytes, under 2 KiB even with a 255-byte
 * name written as \uXXXX escapes and unknown keys a writer adds. 1 MiB
 * leaves room for any honest writer and bounds what a reader holds. */
#define VQC_TRACE_LINE_MAX VQC_JSONL_LINE_MAX /* jsonl.h */

/* One line of a trace. */
typedef struct vqc_trace_record {
  int rank;
  int64_t step;
  char tensor[VQC_TRACE_NAME_MAX];
  char dtype[VQC_TRACE_DTYPE_MAX];
  int ndim;
  int64_t shape[VQC_TRACE_MAX_DIMS];
  char digest_algo[VQC_TRACE_ALGO_MAX];
  uint64_t digest;
  char program[VQC_TRACE_NAME_MAX]; /* optional "program"; "" when absent */
  char group[VQC_TRACE_GROUP_MAX]; /* optional "group", canonical text;
                                      "" when absent (the whole world) */
  int group_size;                  /* ranks in group; 0 when absent */
  char shard[VQC_TRACE_SHARD_MAX]; /* optional "shard"; "" when absent */
  /* optional "values": the elements of a small tensor (at most
   * VQC_TRACE_MAX_VALUES: an optimizer's hyper-parameter, a grad scaler's
   * scale), told in a divergence's message, never compared (the digest
   * is); nvalues 0 when absent */
  int nvalues;
  double values[VQC_TRACE_MAX_VALUES];
  /* A "not_digested" line (above): why the tensor was left out; "" for a
   * line with a digest (dtype, shape, digest_algo and digest are then
   * unset). unchecked: its contents went unchecked (the line's
   * "unchecked", true when absent). */
  char not_digested[VQC_TRACE_WHY_MAX];
  bool unchecked;
} vqc_trace_record;

/* ---- replica groups (the "group" key) */

/* The canonical text of the n ranks (any order, distinct, >= 0) into buf
 * (cap bytes). VQC_EINVAL when a rank repeats or is negative, or the text
 * does not fit (a group too irregular: see VQC_TRACE_GROUP_MAX). */
vqc_status vqc_trace_group_text(const int *ranks, int n, char *buf,
                                size_t cap);
/* The ranks of a canonical text, increasing, into out (at most max);
 * returns how many there are (more than max: only max written), -1 when
 * text is not canonical group text. */
int vqc_trace_group_ranks(const char *text, int *out, int max);

/* ---- writer */

typedef struct vqc_trace_writer vqc_trace_writer;

/* "<run_dir>/rank-<rank>.trace.jsonl" into buf (VQC_EINVAL if it does not
 * fit in n bytes). */
vqc_status vqc_trace_path(const char *run_dir, int rank, char *buf, size_t n);
/* Creates (or truncates: one run, one trace) the file at path and returns a
 * writer in *out (free with vqc_trace_writer_close). VQC_EINVAL, nothing
 * truncated, when path is a symbolic link, not a regular file or a hard
 * link (vqc/fsutil.h vqc_open_write); VQC_EIO when it cannot be opened. */
vqc_status vqc_trace_writer_open(const char *path, vqc_trace_writer **out);
/* Appends one line. The record must satisfy the format above (VQC_EINVAL
 * otherwise: e.g. an empty name, a negative dim); VQC_EIO on a write error.
 * "program", "group" and "shard" are written only when r's are not "". */
vqc_status vqc_trace_write(vqc_trace_writer *w, const vqc_trace_record *r);
/* Pushes buffered lines to the file (VQC_EIO on error). */
vqc_status vqc_trace_flush(vqc_trace_writer *w);
/* Flushes and closes; accepts NULL. */
void vqc_trace_writer_close(vqc_trace_writer *w);

/* ---- reader */

/* Every record of a file, in file order. */
typedef struct vqc_trace {
  vqc_trace_record *items; /* count entries, owned (vqc_trace_free) */
  size_t count;
  size_t capacity;
} vqc_trace;

/* Parses one line (without or with its trailing newline). `path` and
 * `lineno` only name the place in the error message: VQC_EPARSE, with a
 * message "path:lineno: field 'digest': ..." recorded by vqc_error. */
vqc_status vqc_trace_parse_line(const char *line, const char *path,
                                long lineno, vqc_trace_record *out);
/* The same for a line already parsed (a JSON value; a line that is not an
 * object is VQC_EPARSE), for a reader going through jsonl.h. */
vqc_status vqc_trace_parse_json(const json_t *o, const char *path,
                                long lineno, vqc_trace_record *out);
/* vqc_jsonl_read_line (jsonl.h): the bounded line every reader of
 * vqcheck's per-rank JSONL files reads through (jsonl.h's vqc_jsonl_read
 * for the checkers and the reports). Kept under this name for the readers
 * outside checkers/. */
vqc_status vqc_trace_read_line(FILE *f, const char *path, long lineno,
                               char **buf, size_t *cap, size_t *len);
/* Reads a whole file into *out (initialised here; the caller frees it with
 * vqc_trace_free, also after an error). VQC_EIO when the file cannot be read,
 * VQC_EPARSE for the first bad line. */
vqc_status vqc_trace_read(const char *path, vqc_trace *out);
/* Frees the records and zeroes *t; accepts NULL. */
void vqc_trace_free(vqc_trace *t);

#endif /* VQC_TRACE_H */
