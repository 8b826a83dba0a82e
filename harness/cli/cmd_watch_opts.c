/* cmd_watch_opts.c: `vqcheck watch`'s command line: --help's text and the
 * options, parsed into a vqc_watch_opts (watch_job.h) and, for the MPI
 * interposer, vqc_cw_mpi_opt and vqc_cw_strict_opt (cmd_watch_internal.h).
 * What the options mean for the job: cmd_watch.c's file comment. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_watch_internal.h"
#include "watch_job.h"

static void watch_help(FILE *f) {
  fprintf(f,
          "usage: vqcheck watch [--nproc N] [--interval K] [--timeout S] "
          "[--out DIR]\n                     [--json] [--quiet] -- COMMAND "
          "[ARGS...]\n\n"
          "Runs an unmodified PyTorch job with the vqcheck Python bridge "
          "loaded in each\nof its Python processes (through PYTHONPATH and "
          "sitecustomize), then analyses\nwhat the bridge wrote, as "
          "'vqcheck analyze' does: digest traces, live\nrecords, ledger "
          "dumps and the bridge's own findings.\n\n"
          "  --nproc N     start N copies of COMMAND (1..1024) with RANK, "
          "WORLD_SIZE,\n"
          "                LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and "
          "MASTER_PORT set;\n"
          "                without it COMMAND is started once (a launcher "
          "such as\n"
          "                torchrun, mpirun or srun)\n"
          "  --interval K  digest every K steps (default 1)\n"
          "  --timeout S   a rank with no progress for S seconds (no "
          "collective entered\n"
          "                or left, no step ended) is hung, wherever it is: "
          "a rank slower\n"
          "                than S between two signs of progress counts as "
          "a hang; a\n"
          "                process that failed gives the others S seconds "
          "to end\n"
          "                (default 60)\n"
          "  --out DIR     run directory (default vqcheck-runs/watch-<time>): "
          "new, empty,\n"
          "                or made by vqcheck\n"
          "  --json        print run.json on stdout instead of the summary "
          "(the job's\n"
          "                stdout then goes to stderr)\n"
          "  --quiet       no summary (the job's output still passes "
          "through)\n"
          "  --mpi         preload the MPI interposer (libvqcheck_mpi.so) "
          "into the job;\n"
          "                the default when COMMAND is mpiexec, mpirun, "
          "orterun or srun\n"
          "                and no argument names Python (*.py, python*)\n"
          "  --no-mpi      never preload it (the Python bridge only)\n"
          "  --strict      MPI jobs: agree on every blocking collective "
          "before it moves\n"
          "                data (one small all-gather each); stop the job "
          "at a mismatch\n"
          "  --buffered-sends  MPI jobs: let MPI_Send and MPI_Isend be "
          "buffered as MPI\n"
          "                chooses (by default they run as MPI_Ssend and "
          "MPI_Issend, so a\n"
          "                program that needs MPI to buffer its sends hangs "
          "here and is\n"
          "                reported, as it would hang with larger messages "
          "or another MPI),\n"
          "                and let a broadcast, reduce, gather, scatter or "
          "scan return\n"
          "                before every member entered it (by default it "
          "waits for them)\n\n"
          "An unmodified MPI program: 'vqcheck watch -- mpiexec -n 4 ./prog'. "
          "Each rank\nthen records every collective on every communicator "
          "(op, type, count,\nroot, reduction, call site) through PMPI; the "
          "analysis names a collective\nmismatch, a deadlock (with the rank "
          "that never entered) or a rank that died\n(docs/mpi.md). The "
          "library: $VQC_MPI_PRELOAD, else the installed one.\n\n"
          "The job gets VQC_WATCH_DIR, VQC_WATCH_INTERVAL, VQC_WATCH_TIMEOUT "
          "and\nPYTHONPATH=BRIDGE_DIR:$PYTHONPATH; its stdin is /dev/null. "
          "BRIDGE_DIR:\n$VQC_BRIDGE_DIR, else the one 'pip install .' "
          "installs beside this program.\nCtrl-C is forwarded to the job; "
          "the run is still analysed.\n\n"
          "At a hang (a rank without progress for S: in a collective, "
          "stopped, or\nlooping), the live ranks that are not stopped are "
          "sent SIGUSR1, which the\nbridge answers by dumping its Python "
          "stacks (rank-<r>.stacks.txt); the\ndeadlock then names the "
          "culprit and says where each rank is: in which\ncollective at "
          "which line, at which line instead, stopped, or ended. The\njob "
          "is then stopped (SIGTERM, then SIGKILL; a stopped rank SIGKILL), "
          "within\nS + 5 seconds of the hang.\n\n"
          "exit: 0 clean, 1 findings (a process that failed is a "
          "rank_failure),\n      2 usage or bad input, 3 environment (no "
          "bridge, COMMAND cannot run,\n      nothing written: the bridge "
          "never loaded), 130/143 interrupted\n");
}

/* ---- options */

/* --mpi / --no-mpi; by default the launcher's name decides (vqc_cw_mpi_job). */
int vqc_cw_mpi_opt = VQC_CW_MPI_AUTO;
/* --strict: the interposer's strict mode (VQC_MPI_STRICT=1, docs/mpi.md). */
bool vqc_cw_strict_opt;
/* --buffered-sends: MPI_Send left to MPI's buffering (no
 * VQC_MPI_SYNC_SENDS=1, docs/mpi.md). */
bool vqc_cw_buffered_opt;

/* Parses argv[1..]; -1 to go on, else the exit code (0 after --help). */
int vqc_cw_parse_opts(int argc, char **argv, vqc_watch_opts *o) {
  memset(o, 0, sizeof *o);
  vqc_cw_mpi_opt = VQC_CW_MPI_AUTO;
  vqc_cw_strict_opt = false;
  vqc_cw_buffered_opt = false;
  o->interval = 1;
  o->timeout = 60.0;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      watch_help(stdout);
      return 0;
    } else if (strcmp(a, "--json") == 0) {
      o->json = true;
    } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
      o->quiet = true;
    } else if (strcmp(a, "--mpi") == 0) {
      vqc_cw_mpi_opt = VQC_CW_MPI_FORCE;
    } else if (strcmp(a, "--no-mpi") == 0) {
      vqc_cw_mpi_opt = VQC_CW_MPI_NEVER;
    } else if (strcmp(a, "--strict") == 0) {
      vqc_cw_strict_opt = true;
    } else if (strcmp(a, "--buffered-sends") == 0) {
      vqc_cw_buffered_opt = true;
    } else if (strcmp(a, "--nproc") == 0 || strcmp(a, "--interval") == 0 ||
               strcmp(a, "--timeout") == 0 || strcmp(a, "--out") == 0) {
      if (i + 1 >= argc)
        return vqc_cli_usage_error(VQC_CW_CMD, "%s needs a value", a);
      const char *v = argv[++i];
      long n;
      if (strcmp(a, "--nproc") == 0) {
        if (!vqc_cli_parse_long(v, 1, VQC_CW_MAX_NPROC, &n))
          return vqc_cli_usage_error(VQC_CW_CMD, "--nproc '%s': expected an "
                                     "integer from 1 to %d", v,
                                     VQC_CW_MAX_NPROC);
        o->nproc = (int)n;
      } else if (strcmp(a, "--interval") == 0) {
        if (!vqc_cli_parse_long(v, 1, 1000000, &n))
          return vqc_cli_usage_error(VQC_CW_CMD, "--interval '%s': expected an "
                                     "integer from 1 to 1000000", v);
        o->interval = n;
      } else if (strcmp(a, "--timeout") == 0) {
        char *end;
        errno = 0;
        double t = strtod(v, &end);
        if (*v == '\0' || *end != '\0' || errno != 0 || !(t > 0.0) ||
            t > 86400.0)
          return vqc_cli_usage_error(VQC_CW_CMD, "--timeout '%s': expected "
                                     "seconds, > 0 and <= 86400", v);
        o->timeout = t;
      } else {
        if (vqc_cli_check_out(VQC_CW_CMD, v) != 0) return 2;
        o->out = v;
      }
    } else if (a[0] == '-' && a[1] != '\0') {
      return vqc_cli_usage_error(VQC_CW_CMD, "unknown option '%s' (put the "
                                 "job's command after '--')", a);
    } else {
      break; /* the command starts here */
    }
  }
  if (i >= argc)
    return vqc_cli_usage_error(VQC_CW_CMD, "no command given: 'vqcheck watch "
                               "[options] -- COMMAND [ARGS...]'");
  o->cmd_argc = argc - i;
  o->cmd_argv = argv + i;
  return -1;
}
