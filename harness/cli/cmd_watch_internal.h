/* cmd_watch_internal.h: what the pieces of `vqcheck watch` share, and only
 * they (harness/cli/cmd_watch*.c): cmd_watch.c, the command (its file
 * comment is the whole contract: the job's environment, supervision,
 * hangs, findings, exit codes); cmd_watch_opts.c, the options and --help;
 * cmd_watch_env.c, what the job's environment points to; cmd_watch_procs.c,
 * the job's processes. Names are vqc_cw_ (cmd_watch), apart from
 * watch_job.h's vqc_watch_. Each function's full comment is at its
 * definition. */
#ifndef VQC_CMD_WATCH_INTERNAL_H
#define VQC_CMD_WATCH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "watch_heartbeat.h"
#include "watch_job.h"

#define VQC_CW_CMD "watch"
/* --nproc's largest value, and so the most processes the loop polls. */
#define VQC_CW_MAX_NPROC 1024

/* ---- the options (cmd_watch_opts.c) */

/* --mpi / --no-mpi: vqc_cw_mpi_opt; --strict: vqc_cw_strict_opt. Set by
 * vqc_cw_parse_opts (reset at each call). */
enum { VQC_CW_MPI_AUTO = 0, VQC_CW_MPI_FORCE, VQC_CW_MPI_NEVER };
extern int vqc_cw_mpi_opt;
extern bool vqc_cw_strict_opt;
extern bool vqc_cw_buffered_opt;

/* Parses argv[1..] into *o (its cmd_argv borrows argv); -1 to go on, else
 * the exit code (0 after --help; the message printed). */
int vqc_cw_parse_opts(int argc, char **argv, vqc_watch_opts *o);

/* ---- the environment's targets (cmd_watch_env.c) */

/* BRIDGE_DIR, absolute, into buf (n bytes); false when there is none (the
 * message is printed). */
bool vqc_cw_find_bridge(char *buf, size_t n);
/* BRIDGE_DIR for an MPI job into bridge (PATH_MAX bytes), quietly; "" when
 * there is none. */
void vqc_cw_find_bridge_quietly(char *bridge);
/* Whether the job is an MPI program's (--mpi, or an MPI launcher). */
bool vqc_cw_mpi_job(const vqc_watch_opts *o);
/* MPI_LIB, absolute, into buf (n bytes); false when there is none (the
 * message is printed). */
bool vqc_cw_find_mpi_lib(char *buf, size_t n);
/* Whether execvp would find an executable file for prog. */
bool vqc_cw_executable(const char *prog);
/* A TCP port on 127.0.0.1 free when chosen (not reserved); 0 when none. */
int vqc_cw_free_port(void);

/* ---- the run directory and the job's processes (cmd_watch_procs.c) */

/* How many rank-<r><suffix> files dir holds; marks seen[r] for r < nseen
 * (seen may be NULL). */
int vqc_cw_count_files(const char *dir, const char *suffix, bool *seen,
                       int nseen);
/* The lowest rank with a rank-<r><suffix> file in dir; -1 when none. */
int vqc_cw_lowest_rank_file(const char *dir, const char *suffix);

/* Starts process p of the job (rank, or -1 for a launcher); 0 or an errno. */
int vqc_cw_start_proc(const vqc_watch_opts *o, vqc_watch_proc *p,
                      int rank, int port);
/* Polls the n processes' open stderr pipes for up to ms; passes on what is
 * there. */
void vqc_cw_pump_all(vqc_watch_proc *procs, int n, int ms);
/* sig to the process group of every process still running. */
void vqc_cw_signal_all(vqc_watch_proc *procs, int n, int sig);
/* At a hang: SIGUSR1 to the ranks that can dump their stacks (hb: the
 * heartbeats, NULL at a hang marker with --nproc). */
void vqc_cw_ask_for_stacks(const char *dir, vqc_watch_proc *procs, int n,
                           vqc_hb_watch *hb);
/* SIGKILL now to every group holding a stopped process. */
void vqc_cw_kill_stopped(vqc_watch_proc *procs, int n,
                         const vqc_hb_watch *hb);
/* After vqc_cw_ask_for_stacks: whether every rank has told where it is, or
 * never will. hung: scratch, nproc entries. */
bool vqc_cw_all_placed(const char *dir, const vqc_watch_proc *procs,
                       int n, bool *hung, int nproc,
                       const vqc_hb_watch *hb, bool hb_hang);

#endif
