/* watch_symbols.h: a native frame the MPI interposer could not name, made
 * file:line by vqcheck watch. In a signal handler the interposer names
 * only the frames its site table knows (the MPI calls it resolved); any
 * other frame (a rank computing, or waiting before MPI_Init) it writes as
 * "? [vaddr 0x1253 in /path/prog]": the address in the object's own
 * terms (the ELF virtual address, load bias removed) and the object.
 * This resolves it from the object's debug information with libdw,
 * opened at run time (libdw.so.1: no build dependency; without it, or
 * without debug information, the frame stays unnamed). */
#ifndef VQC_WATCH_SYMBOLS_H
#define VQC_WATCH_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Finds " [vaddr 0xHEX in PATH]" at the end of text (n bytes): true with
 * *vaddr, path (NUL-terminated, cut to path_n) and *stem (the bytes of
 * text before it); false when text does not end so. */
bool vqc_watch_vaddr_parse(const char *text, size_t n, uint64_t *vaddr,
                           char *path, size_t path_n, size_t *stem);

/* The source file, line and function of address vaddr of the ELF object
 * at path; false (outputs untouched) when libdw, the object or its line
 * information is missing. Objects are opened once and kept (at most 32). */
bool vqc_watch_symbolize(const char *path, uint64_t vaddr, char *file,
                         size_t file_n, long *line, char *func,
                         size_t func_n);

#endif /* VQC_WATCH_SYMBOLS_H */
