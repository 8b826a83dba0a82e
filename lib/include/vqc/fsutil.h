/* fsutil.h: the two file-system chores everything that writes a run
 * directory needs: making a directory with its parents, and writing a file
 * so that a reader never sees half of it (DESIGN.md "Run directory": files
 * are written to a temporary name and renamed).
 *
 * The atomic write, in one place for every writer (ledger dumps, run.json,
 * status dumps, reports):
 *   1. the content goes to "<path>.tmp.<pid>" (a leftover of that name, from
 *      a crashed process that had this pid, is removed first; the file is
 *      then created exclusively);
 *   2. it is flushed and fsync'ed, so the final name never points at a file
 *      a power loss could leave empty;
 *   3. it is renamed over path (atomic on POSIX file systems: a reader sees
 *      the old file or the new one, never a mix).
 * On any failure the temporary is removed, path is left as it was, and the
 * status is VQC_EIO with a message naming the file and the system's reason.
 * Two processes writing the same path use different temporaries (the pid);
 * two threads of one process must not write the same path at once. */
#ifndef VQC_FSUTIL_H
#define VQC_FSUTIL_H

#include <stddef.h>
#include <stdio.h>

#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the file's content to f; returns VQC_OK, or the error that stops
 * the write (path is then left untouched). Write errors on f need not be
 * checked: the caller checks f once the callback returns. */
typedef vqc_status (*vqc_write_fn)(FILE *f, void *user);

/* Writes path atomically (see above) with whatever fn writes to the stream
 * it is given. For writers that stream (a ledger dump, a JSON document). */
vqc_status vqc_write_atomic(const char *path, vqc_write_fn fn, void *user);

/* Writes the n bytes at data to path atomically (n may be 0). */
vqc_status vqc_write_file_atomic(const char *path, const void *data, size_t n);

/* mkdir -p: creates path and any missing parents (mode 0777 less the
 * umask). VQC_OK when path is, or now is, a directory; VQC_EIO when a part
 * cannot be made or path exists and is not a directory; VQC_EINVAL for an
 * empty path or one of 4096 bytes or more. */
vqc_status vqc_mkdir_p(const char *path);

#ifdef __cplusplus
}
#endif
#endif /* VQC_FSUTIL_H */
