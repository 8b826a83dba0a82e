/* ledger_record.h: the ledger line, one record of a rank's collectives:
 * one struct, one line, both directions. The one place in checkers/ and
 * reports/ that names the line's fields.
 *
 * The line (ledger_analysis.h: the dump rank-<r>.ledger.jsonl, and the
 * ledger lines of the live record rank-<r>.live.jsonl), in this order:
 *
 *   {"seq":N,"rank":R,"op":"all_reduce","redop":"sum","dtype":"float32",
 *    "count":N,"root":-1,
 *    ["group_size":N,] ["any_site":true,] ["mpi_type":"...",]
 *    ["group":[world ranks],"group_name":"...",]
 *    "file":"...","line":N,"func":"...",
 *    "t_enter_ns":N,"t_exit_ns":N,"state":"entered|done|failed",
 *    "status":"VQC_OK"}
 *
 * The bracketed fields are optional: vqcheck's own comm writes none of
 * them; the Python bridge (python/vqcheck/_bridge, through vqcheck._core)
 * writes group_size and, for a sub-group, group and group_name; the MPI
 * interposer (interpose/vqc_mpi_record.c) group_size, any_site, mpi_type
 * and group; the bridge sets any_site too, on a collective torch issues
 * itself. Readers ignore fields they do not know.
 *
 * Writers elsewhere, in the same format: lib/src/comm/ledger.c
 * vqc_ledger_write_jsonl (the dump; the library cannot call checkers/, so
 * tests/unit/test_ledger_record.c holds its lines to this codec's) and
 * interpose/vqc_mpi_record.c (preformatted pieces copied into a shared
 * mapping of the live record). */
#ifndef VQC_LEDGER_RECORD_H
#define VQC_LEDGER_RECORD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vqc/ledger.h"
#include "vqc/status.h"

/* Group ranks a decoded line holds without an allocation. */
#define VQC_LEDGER_GROUP_INLINE 64

typedef struct vqc_ledger_line {
  uint64_t seq;
  int rank;
  const char *op;       /* a collective's name: vqcheck's, torch's, MPI's */
  const char *redop;    /* its reduction; "" when it takes none */
  const char *dtype;    /* the element type's name; "" for none */
  uint64_t count;
  int root;             /* -1 when the collective has none */
  /* optional: written when set, in this order */
  int group_size;       /* > 0: "group_size" */
  bool any_site;        /* "any_site": true (written only when true) */
  const char *mpi_type; /* not NULL: "mpi_type" */
  bool has_group;       /* "group" and "group_name" */
  const int *group;     /* the group's world ranks, ngroup of them */
  int ngroup;           /* decoded: -1 when "group" is not an array */
  const char *group_name;
  /* the call site */
  const char *file;
  int line;
  const char *func;
  uint64_t t_enter_ns, t_exit_ns;
  vqc_record_state state;
  const char *status;   /* vqc_status_name's, or a Python exception's name */
  /* decoding's storage (vqc_ledger_line_release) */
  int group_inline[VQC_LEDGER_GROUP_INLINE];
  int *group_heap;
} vqc_ledger_line;

/* The line of record r (no optional fields; strings point into r or are
 * static). */
void vqc_ledger_line_of(const vqc_ledger_record *r, vqc_ledger_line *out);

/* Options of vqc_ledger_line_format (bits). */
enum {
  /* Control characters in strings as Python's json.dumps writes them
   * (\b \f \n \r \t, the rest \u00XX) rather than all as \u00XX (the C
   * writers'): the Python bridge's lines stay what they were. */
  VQC_LEDGER_PY_ESCAPES = 1u << 0,
};

/* Writes l's line, with its newline, into buf (cap bytes, NUL-terminated
 * when cap > 0) as snprintf does: returns the length of the whole line,
 * which did not fit when it is >= cap. Strings are written as their bytes
 * with '"', '\\' and control characters escaped (no check that they are
 * UTF-8: a reader mends what is not, utf8.h). NULL strings are "". */
size_t vqc_ledger_line_format(const vqc_ledger_line *l, unsigned opts,
                              char *buf, size_t cap);

/* The line's fields as a JSON object (without the optional ones), for a
 * file that holds a record inside a larger document (rank-<r>.status.json's
 * "in_flight"). A string that is not UTF-8 is left out (jansson). */
json_t *vqc_ledger_line_json(const vqc_ledger_line *l);

/* Options of vqc_ledger_line_decode (bits). */
enum {
  /* The reports' reading (a picture of what the ranks did): seq, rank, op
   * and state are required, the rest taken when present ("" and 0 when
   * not). Without it, every field of the line (all but the optional ones)
   * is required with its type and range. */
  VQC_LEDGER_LENIENT = 1u << 0,
};

/* Decodes line object j (line `lineno` of path, for messages) into *out.
 * rank >= 0: the rank whose file it is ("rank" must be it). Strings point
 * into j (valid while j is). VQC_EPARSE "path:line: field 'NAME': ..." for
 * a field that is missing or not what it must be. Release *out with
 * vqc_ledger_line_release (also after an error). Names are not checked
 * against a vocabulary: that is the reader's business (ledger_read.c
 * knows which collectives and reductions it compares). */
vqc_status vqc_ledger_line_decode(const json_t *j, int rank, const char *path,
                                  long lineno, unsigned opts,
                                  vqc_ledger_line *out);
void vqc_ledger_line_release(vqc_ledger_line *l);

#endif /* VQC_LEDGER_RECORD_H */
