/* watch_job.h: what `vqcheck watch` (cmd_watch.c) knows of the job it ran,
 * and what it makes of it for the analysis: run.json's "job" section and
 * the command's own findings (a hang marker's deadlock, the rank_failure of
 * a process that failed with nothing to explain it). cmd_watch.c starts and
 * supervises the processes; watch_job.c only reads what they left (their
 * exit statuses, stderr tails, and the hang markers and stack dumps in the
 * run directory, and the ranks' heartbeats as the watcher knew them at a
 * hang: watch_heartbeat.h).
 * The rules are in cmd_watch.c's file comment. */
#ifndef VQC_WATCH_JOB_H
#define VQC_WATCH_JOB_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "findings.h"

/* The bytes of each process's stderr kept for run.json. */
#define VQC_WATCH_TAIL_MAX 4096

/* The command line of `vqcheck watch`. */
typedef struct vqc_watch_opts {
  int nproc;          /* 0: COMMAND is a launcher, started once */
  long interval;
  double timeout;
  const char *out;
  bool json;
  bool quiet;
  int cmd_argc;
  char **cmd_argv;    /* NULL-terminated (argv's own terminator) */
} vqc_watch_opts;

/* What vqcheck watch did with a rank at the first hang marker (--nproc
 * only; cmd_watch.c). */
typedef enum vqc_watch_at_hang {
  VQC_WATCH_AT_HANG_NONE = 0, /* no hang, or a launcher's job */
  VQC_WATCH_AT_HANG_MARKED,   /* it had written its own marker */
  VQC_WATCH_AT_HANG_ASKED,    /* SIGUSR1 sent: asked for its stacks */
  VQC_WATCH_AT_HANG_NO_BRIDGE, /* not asked: no live record of it (the
                                * bridge had not started there) */
  VQC_WATCH_AT_HANG_FINISHED, /* not asked: its live record says finished */
  VQC_WATCH_AT_HANG_ENDED,    /* not asked: it had ended */
  VQC_WATCH_AT_HANG_STOPPED   /* not asked: it was stopped (process state
                               * T or t), so could not have answered */
} vqc_watch_at_hang;

/* One process of the job. */
typedef struct vqc_watch_proc {
  pid_t pid;
  int rank;           /* -1: a launcher */
  int err_fd;         /* read end of its stderr pipe; -1 once at EOF */
  bool exited;
  int status;         /* waitpid's, once exited */
  bool stopped;       /* vqcheck signalled it while it ran */
  int exit_order;     /* 1 for the first process seen ended, 2, ... */
  vqc_watch_at_hang at_hang;
  pid_t asked_pid;    /* the process sent SIGUSR1 (its live record's) */
  long long stacks_size0; /* rank-<r>.stacks.txt's size then, -1: none */
  char stop_letter;   /* AT_HANG_STOPPED: /proc's 'T' or 't' */
  char tail[VQC_WATCH_TAIL_MAX];
  size_t ntail;
} vqc_watch_proc;

/* A Python frame: "file:line func". */
typedef struct vqc_watch_frame {
  char file[1024];
  long line;          /* 0 when unknown */
  char func[128];
} vqc_watch_frame;

/* Where a rank's Python is, from its stack dump (vqc_watch_stack_read). */
typedef struct vqc_watch_stack {
  vqc_watch_frame top;   /* the innermost frame */
  vqc_watch_frame where; /* the innermost frame of the program's own code:
                          * not torch's or vqcheck's, nor Python's standard
                          * library or an installed package's (when every
                          * frame is such, the innermost not torch's or
                          * vqcheck's; the top when every frame is theirs) */
  vqc_watch_frame entry; /* the frame `where` called (its way into torch,
                          * say Tensor.backward), when where is not top */
  bool has_entry;
  bool user_top;         /* the top frame is the program's: not torch's or
                          * vqcheck's */
} vqc_watch_stack;

struct vqc_hb_rank; /* watch_heartbeat.h */

/* What the findings callback needs (analyze.h more_findings). */
typedef struct vqc_watch_ctx {
  const char *dir;
  const vqc_watch_opts *o;
  vqc_watch_proc *procs;
  int nprocs;
  bool interrupted;
  /* A hang decided from the heartbeats (cmd_watch.c): every rank as the
   * watcher knew it then, hb_n of them (rank i at [i]); NULL when none. */
  const struct vqc_hb_rank *hb;
  int hb_n;
} vqc_watch_ctx;

/* Whether p ended other than with exit status 0. */
bool vqc_watch_failed(const vqc_watch_proc *p);

/* "rank 1 (pid 123)" or "the launcher (pid 123)". */
void vqc_watch_proc_name(const vqc_watch_proc *p, char *buf, size_t n);

/* "exited with status 3" / "was killed by signal 9 (SIGKILL, Killed)". */
void vqc_watch_end_text(const vqc_watch_proc *p, char *buf, size_t n);

/* Before the analysis, once every process has ended: for each rank's
 * process that ended by itself other than with exit status 0 (a signal of
 * its own, SIGABRT from the backend, SIGKILL from the OOM killer, SIGSEGV;
 * or an exit status) and whose live record has no end line (the bridge
 * never got to write one), appends to that record how it ended and its
 * last stderr lines (vqc_live_mark_end, by "vqcheck watch"). The ledger
 * analysis then names the signal and the rank's last words instead of
 * guessing, and so does a later `vqcheck analyze` of the directory.
 * Processes vqcheck stopped itself, launchers, and ranks without a live
 * record are left as they are. Best effort: a record that cannot be
 * written stays as it was. */
void vqc_watch_mark_ended(const char *dir, const vqc_watch_proc *procs,
                          int n);

/* run.json's "job" section (new reference), `stopped` "" when vqcheck did
 * not stop the job:
 *   command     the argv array of COMMAND
 *   nproc       --nproc, null for a launcher
 *   interval, timeout_s, bridge_dir   what the bridge was given
 *   stopped     why vqcheck stopped the job, null when it did not
 *   processes   per process: rank (null for a launcher), pid, exit_code
 *               (null when killed by a signal), signal (null when it
 *               exited), stopped_by_vqcheck, stderr_tail (its last 4 KiB,
 *               invalid UTF-8 and control characters as '?') */
json_t *vqc_watch_job_json(const vqc_watch_opts *o, const char *bridge,
                           const vqc_watch_proc *procs, int n,
                           const char *stopped);

/* Where a rank is, from its rank-<r>.stacks.txt at path: faulthandler's
 * dumps of every thread, possibly several appended. In the LAST dump, the
 * "Current thread" block (else the thread running "<module>", else the
 * first with a frame): *top gets its top frame, *where its top frame not in
 * torch or vqcheck code (no "/torch/" or "/vqcheck/" in the path), its top
 * frame when every frame is. Only the file's last MiB is read, lines are
 * bounded, anything else is skipped; false (the rank has "no stack") when
 * the file is missing or holds no frame. Strings are valid UTF-8. */
bool vqc_watch_stack_position(const char *path, vqc_watch_frame *where,
                              vqc_watch_frame *top);

/* The same reading of the stacks at path, with the frame `where` called
 * and whether the top frame is the program's (vqc_watch_stack). */
bool vqc_watch_stack_read(const char *path, vqc_watch_stack *s);

/* Whether a rank left a hang marker (rank-<r>.hang) in dir. */
bool vqc_watch_any_hang(const char *dir);

/* analyze.h's more_findings for watch; ctx is a vqc_watch_ctx. The rules
 * (cmd_watch.c's file comment has the whole list):
 *   - a deadlock from the hang markers when no deadlock or
 *     collective_mismatch was found otherwise; when a rank was stopped
 *     (process state T) those are the ranks it names; else when a rank
 *     had exited with status 0 while the others waited (it left early)
 *     that rank is the one it names, and its message starts "rank R left
 *     early";
 *   - without a hang marker, a deadlock from the heartbeats (ctx->hb: no
 *     progress for --timeout) under the same condition, naming the
 *     culprits (vqc_hb_culprits) first and every rank's place: "no
 *     progress for 5 s (the --timeout): rank 1 is stopped (...); rank 0
 *     is in torch's backward (_tensor.py:623), called at job.py:15
 *     (main) (no progress for 5.2 s). A rank slower than --timeout ...";
 *   - one rank_failure for the processes that failed with nothing to
 *     explain them. A finding explains a rank's failure when it is about
 *     that rank: it names it, or its detail lists the rank's call of the
 *     collective it is about (a deadlock's "entered", a
 *     collective_mismatch's "calls"): a rank whose collective failed
 *     because its peer left or called it wrongly failed of that. A process
 *     killed by a signal of its own (not vqcheck's) is explained only by a
 *     rank_failure naming it, or by a finding about it when its live record
 *     holds the signal (vqc_watch_mark_ended): the signal is news the other
 *     findings do not have. Such a rank_failure names the finding the rank
 *     died in ("killed by signal 6 (SIGABRT, Aborted) in the
 *     collective_mismatch at job.py:5 <module>: the backend aborted the
 *     process on it") and its last stderr lines. */
void vqc_watch_more_findings(void *ctx, vqc_findings *known,
                             vqc_findings *out);

#endif /* VQC_WATCH_JOB_H */
