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
 * two threads of one process must not write the same path at once.
 *
 * Links (the one rule for every file vqcheck writes in a run directory):
 * vqcheck never writes through a symbolic link, and never replaces one. A
 * link at the name it writes is refused with VQC_EINVAL (the CLI's exit
 * 2), naming it:
 *   "refusing to write through the link DIR/NAME: remove it (vqcheck never
 *    follows links in a run directory)"
 * and nothing is written. vqc_open_write, for the files that are appended
 * to as a run goes (traces, live records), adds O_NOFOLLOW and O_CLOEXEC to
 * every open, so a link put there between a check and the open is refused
 * too, and a descriptor never leaks into a child. (A directory at the name
 * is no link: the write fails on it, VQC_EIO, as before.) */
#ifndef VQC_FSUTIL_H
#define VQC_FSUTIL_H

#include <stdbool.h>
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

/* Writes the n bytes at data to path only when nothing is there: the whole
 * content goes to a temporary first (as above), which is then link()ed to
 * path, so of several processes making path at once exactly one succeeds
 * and no reader ever sees path half written. *made: whether this call made
 * path (false, with VQC_OK, when something of that name was already there;
 * it is left as it was). VQC_EIO when it cannot be written. */
vqc_status vqc_write_file_new(const char *path, const void *data, size_t n,
                              bool *made);

/* Opens path for writing (O_WRONLY | O_CREAT, mode 0644 less the umask)
 * with O_NOFOLLOW | O_CLOEXEC, and O_APPEND when `append`; *fd gets the
 * descriptor (the caller closes it). The file must be a regular file of
 * one name (a hard link to a file elsewhere would be written through as a
 * symbolic link would); it is truncated only after that check, when
 * `truncate`. VQC_EINVAL for a link, a file that opens but is not regular
 * (a FIFO, a device) or one with other hard links (see "Links" above;
 * nothing is truncated); VQC_EIO when it cannot be opened (a directory
 * among others), naming path and the system's reason. */
vqc_status vqc_open_write(const char *path, bool truncate, bool append,
                          int *fd);

/* mkdir -p: creates path and any missing parents (mode 0777 less the
 * umask). VQC_OK when path is, or now is, a directory; VQC_EIO when a part
 * cannot be made or path exists and is not a directory; VQC_EINVAL for an
 * empty path or one of 4096 bytes or more. */
vqc_status vqc_mkdir_p(const char *path);

#ifdef __cplusplus
}
#endif
#endif /* VQC_FSUTIL_H */
