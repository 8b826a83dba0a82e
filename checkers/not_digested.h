/* not_digested.h: the tensors a rank could not digest, read back from the
 * live records of a run directory (issue 24: "one tensor never switches the
 * check off").
 *
 * When the digest cannot read a tensor (a meta tensor, an element type
 * without a digest code, a tensor subclass that does not say what it
 * wraps), the Python bridge of `vqcheck watch` leaves that tensor out,
 * goes on with every other one, and appends once per tensor and rank to
 * rank-<r>.live.jsonl (ledger_analysis.h):
 *
 *   {"event":"not_digested","tensor":NAME,"why":TEXT,"step":N,
 *    "unchecked":BOOL}
 *
 * "unchecked": false when the tensor held nothing to compare (a meta
 * tensor, freed storage), true when it held contents nothing read (an
 * element type the digest has no code for, ...: vqcheck/_dense.py).
 *
 * This is the reader `vqcheck analyze` uses to put them into run.json
 * ("analysis.not_digested") for the reports, and to tell what went
 * unchecked (vqc_not_digested_unchecked), which makes the verdict "not
 * everything was checked" (exit 3): never a finding. It is lenient, as a
 * reader of what a dying process wrote must be:
 * a line that is not a JSON object, or another event, is passed over; a
 * not_digested line without a tensor name is skipped, counted and the
 * first one named in a warning; a line over the 1 MiB cap ends the reading
 * of that record, with a warning; a missing or mistyped "why" or "step" is
 * told as such, never an error. Every string goes through utf8.h (cut at a
 * character's end) so run.json stays valid.
 *
 * Bounded: lines through jsonl.h (1 MiB each); at most
 * VQC_NOT_DIGESTED_LISTED entries kept (a tensor name cut to
 * VQC_NOT_DIGESTED_NAME_MAX bytes, a reason to VQC_NOT_DIGESTED_WHY_MAX),
 * whatever the size of the records; the rest is only counted. */
#ifndef VQC_NOT_DIGESTED_H
#define VQC_NOT_DIGESTED_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "vqc/status.h"

/* Entries kept: enough to name every tensor a job left out on a few ranks
 * (the bridge leaves out a handful at most); the count says how many more. */
#define VQC_NOT_DIGESTED_LISTED 100
/* A tensor name longer than a trace's (trace.h VQC_TRACE_NAME_MAX) is cut
 * here too; the bridge cuts its reason at 400 characters, at most 1600
 * bytes of UTF-8. */
#define VQC_NOT_DIGESTED_NAME_MAX 255
#define VQC_NOT_DIGESTED_WHY_MAX 1600

typedef struct vqc_not_digested {
  /* Array (owned) of {"rank": int, "tensor": string, "why": string,
   * "step": int or null, "unchecked": bool}: the first
   * VQC_NOT_DIGESTED_LISTED distinct (rank, tensor), in rank order, then
   * each record's order. */
  json_t *list;
  int64_t count;   /* not_digested lines read with a tensor name, every
                      rank (the bridge writes one per tensor and rank) */
  int64_t skipped; /* not_digested lines without a tensor name */
  int64_t unchecked; /* lines among `count` whose tensor held contents
                        that went unchecked (not "unchecked": false) */
  json_t *warnings; /* array of strings (owned): a line over the cap, and
                       the first line skipped, with how many were */
} vqc_not_digested;

/* An empty *nd (free it with vqc_not_digested_free, also after an
 * error: VQC_ENOMEM). */
vqc_status vqc_not_digested_init(vqc_not_digested *nd);
/* Lists (rank, tensor, why; step -1: not known; unchecked) unless
 * (rank, tensor) is listed already or the list is full; counts nothing.
 * *fresh: it was listed now. What the readers build on
 * (not_digested_list.c). */
vqc_status vqc_not_digested_list(vqc_not_digested *nd, int rank,
                                 const char *tensor, const char *why,
                                 int64_t step, bool unchecked, bool *fresh);
/* One tensor that rank left out (why; step -1: not known; unchecked: it
 * held contents nothing compared), as a trace's not_digested line names it
 * (trace.h): listed unless (rank, tensor) is already, and counted once per
 * (rank, tensor) while the list has room, every time past it. Strings
 * must be UTF-8 (they are cut, at a character's end, as the reader's). */
vqc_status vqc_not_digested_add(vqc_not_digested *nd, int rank,
                                const char *tensor, const char *why,
                                int64_t step, bool unchecked);
/* Adds from's listed entries to into (vqc_not_digested_add each): the
 * traces' tensors left out beside the live records' (a watched job names
 * them in both). */
vqc_status vqc_not_digested_merge(vqc_not_digested *into,
                                  const vqc_not_digested *from);
/* Reads every rank-<r>.live.jsonl of dir into *out (initialised here; free
 * it with vqc_not_digested_free, also after an error). A directory without
 * live records gives an empty list. VQC_EIO when dir or a record cannot be
 * read, VQC_ENOMEM. */
vqc_status vqc_not_digested_read(const char *dir, vqc_not_digested *out);
/* What went unchecked, for the verdict: "tensor 'T' was not digested on
 * ranks 0, 1 (why)", for the first 3 such tensors, then "; and N more
 * tensors", into out (cap bytes; a cut may fall inside a character, which
 * the verdict's JSON text mends). Returns the count of unchecked lines
 * (0: out is ""). */
int64_t vqc_not_digested_unchecked(const vqc_not_digested *nd, char *out,
                                   size_t cap);
/* Frees what *nd holds and zeroes it; accepts NULL. */
void vqc_not_digested_free(vqc_not_digested *nd);

#endif /* VQC_NOT_DIGESTED_H */
