/* run_options.h: the options `vqcheck run` and `vqcheck suite` share, and
 * the checks both make before anything is trained or written.
 *
 * parse_opts reads argv into run_opts: --ranks, --steps, --seed, --timeout,
 * --backend, --device, --out, --json, --quiet, --verbose (and --launcher for
 * the suite). Misuse is reported on stderr with a hint (cli.h). */
#ifndef VQC_RUN_OPTIONS_H
#define VQC_RUN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "runner.h"

typedef struct run_opts {
  const char *path;     /* run: the scenario file; suite: the directory */
  int ranks;            /* < 0: the scenario's */
  int steps;
  int64_t seed;
  double timeout;
  bool backend_set;
  vqc_backend backend;
  vqc_device device;    /* --device; VQC_DEVICE_CPU unless told */
  const char *out;
  const char *launcher; /* suite only */
  bool quiet;
  bool json;
} run_opts;

/* Parses argv[1..] of subcommand `cmd` into *o; returns -1 to go on, else
 * the exit code (0 after --help, which help() prints, 2 after misuse). */
int vqc_run_parse_opts(const char *cmd, int argc, char **argv, bool suite,
                       void (*help)(FILE *), run_opts *o);

/* True for the backends whose ranks are processes started by a launcher
 * (mpi, nccl). */
bool vqc_run_launched_backend(vqc_backend b);

/* --device cuda on a machine without a device: prints why and returns 3;
 * 0 when a device answers or none is asked for. */
int vqc_run_device_unusable(const char *cmd, vqc_device device);

#endif /* VQC_RUN_OPTIONS_H */
