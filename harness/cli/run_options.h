/* run_options.h: the options `vqcheck run` and `vqcheck suite` share, the
 * checks both make before anything is trained or written, and the rule both
 * apply to how training ended before they call an expectation met.
 *
 * parse_opts reads argv into run_opts: --ranks, --steps, --seed, --timeout,
 * --backend, --device, --out, --json, --quiet, --verbose (and --launcher for
 * the suite). Misuse is reported on stderr with a hint (cli.h). */
#ifndef VQC_RUN_OPTIONS_H
#define VQC_RUN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "findings.h"
#include "runner.h"
#include "scenario.h"

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
  const char *launcher; /* --launcher: the MPI launcher (mpi, nccl) */
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

/* ---- how training ended (never a false green)
 *
 * An expectation is only worth checking on a run that trained: a run that
 * stopped at step 0 (out of memory, a deadline passed) has no findings and
 * would meet `expect: clean`. So `vqcheck run` and `vqcheck suite` call an
 * expectation met only when training ran every step of the scenario, or
 * stopped with an error that a finding the expectation asks for explains:
 * a deadlock expectation (seed_sync_some_ranks) or a strict-mode mismatch
 * or a shape-mismatch one stops training by design. Which findings explain
 * which stop:
 *   VQC_ETIMEOUT          deadlock, rank_failure
 *   VQC_EMISMATCH         collective_mismatch
 *   VQC_ESHAPE            shape_mismatch
 *   VQC_EABORTED, ECOMM   deadlock, rank_failure, collective_mismatch,
 *                         shape_mismatch (a peer stopped, for its reason)
 *   anything else         nothing (out of memory, I/O, CUDA, internal)
 * The finding must be in the run and its kind among the scenario's
 * expected ones (a clean scenario explains no stop). */

/* How training ended, as vqc_run_result or run.json's "training" says. */
typedef struct vqc_run_training {
  vqc_status status;    /* VQC_OK: every rank finished */
  int failed_rank;      /* -1: none */
  int64_t steps_done;   /* steps rank 0 completed */
  const char *message;  /* e.g. "rank 1: training: ..."; NULL: none */
} vqc_run_training;

typedef enum vqc_training_verdict {
  VQC_TRAINING_COMPLETE,  /* every step ran */
  VQC_TRAINING_EXPLAINED, /* stopped; an expected finding explains it */
  VQC_TRAINING_FAILED     /* stopped (or short) and nothing explains it */
} vqc_training_verdict;

/* Judges t for scenario sc (its steps after any --steps) and the run's
 * findings f (may be NULL). Unless COMPLETE, why (n bytes) says what
 * happened, for a person: "training stopped at step 0 of 3 on rank 1 (out
 * of memory): building the model: ..." and, when EXPLAINED, "; the expected
 * deadlock explains it". */
vqc_training_verdict vqc_run_judge_training(const vqc_scenario *sc,
                                            const vqc_run_training *t,
                                            vqc_findings *f, char *why,
                                            size_t n);

/* What to do about a stop with status s, one line ("raise --timeout ...");
 * never NULL. */
const char *vqc_run_training_hint(vqc_status s);

#endif /* VQC_RUN_OPTIONS_H */
