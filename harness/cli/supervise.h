/* supervise.h: `vqcheck run --backend mpi|nccl` typed outside a launcher.
 *
 * The command then launches the job itself and watches it, so that a rank
 * that dies or stops is reported rather than lost with the job:
 *
 *   LAUNCHER -n N <this vqcheck> run SCENARIO ... --out DIR
 *
 * runs in a process group of its own (LAUNCHER: --launcher, else
 * $VQC_LAUNCHER, else "mpiexec --oversubscribe", with --allow-run-as-root
 * as root). Each rank's live record (checkers/ledger_analysis.h) names its
 * pid and host; on this host the supervisor polls every rank's process:
 *
 *   a rank gone without writing "finished" (kill -9, a crash): lost; the
 *     launcher normally tears the job down at once (its SIGTERM is noted in
 *     the others' records), else the supervisor does so 2 s later;
 *   a rank stopped (SIGSTOP, a debugger) for the collective timeout: lost;
 *   no rank's record growing for 3 x timeout + 30 s (a hang the ranks'
 *     own deadlines did not end): every rank is killed.
 *
 * When the job ends, the whole process group is SIGKILLed (a stopped rank
 * too), so nothing is left behind. If rank 0 wrote run.json and the job
 * was not cut short, its exit code is the answer. Otherwise the ranks'
 * records are marked ("lost" for the rank that was seen stopped or gone,
 * "killed" for ranks still running when the job was ended) and the offline
 * analysis `vqcheck analyze` runs (analyze.h) writes run.json and the
 * reports, with a rank_failure naming the lost rank, its last step and its
 * last collective. Such a run is never clean (exit 1 with that finding,
 * else 3).
 *
 * Ranks on other hosts cannot be watched: their loss is still found from
 * their records once the launcher ends the job. */
#ifndef VQC_SUPERVISE_H
#define VQC_SUPERVISE_H

#include <stdbool.h>
#include <stddef.h>

#include "run_options.h"
#include "scenario.h"

/* Launches and supervises sc on o->ranks (else the scenario's) ranks;
 * argv (argc entries, argv[0] "run") is passed on to every rank, without
 * --launcher and --out (the run directory is chosen here and passed on).
 * Returns the exit code. */
int vqc_supervise_run(const run_opts *o, const vqc_scenario *sc, int argc,
                      char **argv);

/* Whether $VQC_SUPERVISE is "1": supervise even where the environment
 * looks launched (vqcheck suite sets it for its children; a Slurm batch
 * script has SLURM_PROCID set). The supervisor removes it from its
 * launcher's environment, so the ranks do not supervise in turn. */
bool vqc_supervise_wanted(void);

/* The launcher command line into buf: `wanted` (--launcher) when set, else
 * $VQC_LAUNCHER, else "mpiexec --oversubscribe" (+ " --allow-run-as-root"
 * when running as root). Shared by `vqcheck run` and `vqcheck suite`. */
void vqc_launcher_resolve(const char *wanted, char *buf, size_t n);

/* Whether the launcher's first word is an executable (on $PATH or a path);
 * when not, prints "vqcheck CMD: the MPI launcher 'X' is not available"
 * with a hint on stderr. */
bool vqc_launcher_available(const char *cmd, const char *launcher);

/* Splits line in place on blanks into args (at most max); returns how many. */
int vqc_launcher_split(char *line, char **args, int max);

/* SIGKILLs every child of this process (a launcher, and processes that
 * were reparented here when their parent died, where this process is their
 * subreaper: prctl PR_SET_CHILD_SUBREAPER) and reaps them, until none is
 * left or `until` (CLOCK_MONOTONIC seconds). Shared by the supervisor and
 * `vqcheck watch` (cmd_watch.c) for the end of a job. */
void vqc_kill_and_reap_children(double until);

#endif /* VQC_SUPERVISE_H */
