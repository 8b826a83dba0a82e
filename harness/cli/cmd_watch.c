/* cmd_watch.c: `vqcheck watch [options] -- COMMAND [ARGS...]`: runs an
 * unmodified PyTorch job with the vqcheck Python bridge loaded in each of
 * its Python processes, supervises it, then analyses what the bridge wrote
 * exactly as `vqcheck analyze` does (analyze.h).
 *
 * This file is the command: the run directory, the environment every
 * process of the job gets (set here), the watch loop and the analysis.
 * Its pieces (what they share: cmd_watch_internal.h): cmd_watch_opts.c,
 * the options and --help; cmd_watch_env.c, what that environment points
 * to (BRIDGE_DIR, MPI_LIB, whether the job is an MPI one, MASTER_PORT);
 * cmd_watch_procs.c, the job's processes (started, their stderr passed
 * through, signalled, asked for their stacks at a hang). This comment is
 * the contract for all of them.
 *
 * The contract with the bridge (python/bridge/sitecustomize.py, which
 * Python imports at start-up because BRIDGE_DIR leads PYTHONPATH). Every
 * process of the job gets, besides the user's environment:
 *   VQC_WATCH_DIR       the run directory, absolute;
 *   VQC_WATCH_INTERVAL  --interval K (default 1);
 *   VQC_WATCH_TIMEOUT   --timeout S in seconds (default 60), "%g";
 *   PYTHONPATH          BRIDGE_DIR, then ":" and the user's PYTHONPATH when
 *                       set and not empty;
 *   with --nproc N, per process i: RANK=i, WORLD_SIZE=N, LOCAL_RANK=i,
 *   LOCAL_WORLD_SIZE=N, MASTER_ADDR=127.0.0.1, MASTER_PORT (one free port).
 * The bridge writes into VQC_WATCH_DIR, per rank r:
 *   rank-<r>.trace.jsonl, rank-<r>.live.jsonl, ledger dumps: as a vqcheck
 *     run does (trace.h, ledger_analysis.h);
 *   rank-<r>.findings.jsonl: what it found in-process (bridge_findings.h);
 *   rank-<r>.hang: a small JSON object, written when one of its collectives
 *     has been in flight longer than VQC_WATCH_TIMEOUT, after its dumps:
 *     {"rank", "op", "seq", "site": "/abs/job.py:15 main", "step",
 *     "waited_s", "last_completed": {"op", "seq", "site"} or null};
 *   rank-<r>.stacks.txt: Python's faulthandler dumps of all its threads,
 *     appended: before its hang marker, and at SIGUSR1, which the bridge
 *     handles so (the program having no SIGUSR1 handler of its own) once
 *     it has written its live record;
 *   rank-<r>.heartbeat: 64 bytes rewritten in place at every sign of
 *     progress (a collective entered or left, a step end): pid, state
 *     (running, in a collective, finished), beats, the time of the last
 *     (python/vqcheck/_heartbeat.py; read by watch_heartbeat.h).
 *
 * MPI programs (C, C++, Fortran: docs/mpi.md). When COMMAND is an MPI
 * launcher (its name is mpiexec, mpirun, orterun or srun, with an optional
 * ".suffix" such as mpirun.openmpi) and no argument names Python (a word
 * ending in ".py", or a program named python*), or with --mpi, the job
 * gets LD_PRELOAD=MPI_LIB (then ":" and the user's LD_PRELOAD when set):
 * libvqcheck_mpi.so, the PMPI interposer (interpose/vqc_mpi.c), which
 * writes the same files as the bridge (the live record with one ledger
 * line per collective on every communicator, "group" naming each
 * communicator's world ranks; the heartbeat; the stacks at SIGUSR1). The
 * launcher and every process it starts inherit it (OpenMPI's local launch
 * passes the environment on; for other nodes, the launcher's own option
 * such as `-x LD_PRELOAD` is the user's to add). --strict sets
 * VQC_MPI_STRICT=1 for it (strict mode: docs/mpi.md; a usage error for a
 * job that is not an MPI one). --no-mpi never preloads it
 * (a Python job under mpirun, say, whose argument list hides it). It is
 * never preloaded into any other job: a Python job gets the bridge only.
 * MPI_LIB, the first that exists: $VQC_MPI_PRELOAD; <this executable's
 * directory>/../<libdir>/vqcheck/libvqcheck_mpi.so (installed); the build
 * tree's (compiled in). With the interposer the bridge is optional (a
 * Python rank of an MPI job still gets it when found). The collectives the
 * interposer recorded are the check: a clean MPI run whose ranks compared
 * collectives exits 0 without any digest trace (vqc_analyze_opts.
 * ledger_checks).
 *
 * BRIDGE_DIR, the first that holds sitecustomize.py: $VQC_BRIDGE_DIR;
 * <this executable's directory>/../share/vqcheck/bridge (`pip install .`);
 * the source tree's python/bridge (VQC_BRIDGE_SOURCE_DIR, compiled in).
 *
 * Supervision (the parent; only main-level code): every process of the job
 * in a process group of its own, stdin /dev/null, stdout passed through
 * (to our stderr with --json), stderr passed through with its last 4 KiB
 * kept. SIGINT/SIGTERM/SIGHUP are forwarded to every group (SIGKILL 5 s
 * later, or at a second signal).
 *
 * Hangs: no progress for --timeout is a hang, wherever it is. Every
 * HB_SCAN_S the heartbeats and each rank's process state (/proc: running,
 * stopped, zombie, gone; with --nproc its process is known, with a
 * launcher the heartbeat's pid when it is our descendant) are read. A
 * rank's clock starts at its first heartbeat: a slow start before the
 * bridge writes one is not a hang, but once any rank has beaten, a rank
 * with none counts from then. Ranks that finished or ended are not hung.
 * A live rank (stopped or not) whose last progress is --timeout old is
 * hung: a rank waiting in a collective torch issues from C++ (DDP's
 * gradient all_reduce), in a functional collective's wait (its deadline
 * runs from the call to the wait), stopped by SIGSTOP, or looping in
 * Python outside any collective (also after its peers exited 0). A rank
 * slower than --timeout between two signs of progress is hung by this
 * definition: the message and docs/pytorch.md ("Hangs") say so. Then, as
 * at a hang marker (below): every live rank not stopped is asked for its
 * stacks (a stopped one could not answer, and is said to be stopped),
 * a rank hung in a collective the bridge sees gets its marker's time (it
 * writes one about then), and the job is stopped; groups holding a
 * stopped process get SIGKILL at once with the SIGTERM, so the report
 * comes within --timeout + 5 s of the hang. Not once a process has
 * failed (below): the others then get the timeout to end of it, and its
 * failure is what is reported. The first rank-*.hang: with --nproc,
 * each rank still running that has written no marker, and whose live
 * record shows the bridge loaded, is sent SIGUSR1 (its process, not its
 * group: a DataLoader worker need not answer; never a launcher, which it
 * would kill) to dump its stacks; the ranks get up to 2 s to write their
 * markers or stacks (less once every rank has, or never will), then every
 * group gets SIGTERM, and SIGKILL 3 s after. A process that fails while others run: the others get --timeout
 * seconds to end on their own (they usually fail in a collective), then
 * the same. This process is the job's subreaper, so descendants a launcher
 * left behind are killed and reaped at the end: nothing survives.
 *
 * Then the analysis (vqc_analyze_run_dir) with run.json's "job" section
 * (watch_job.h) and findings of this command's own (watch_job.c):
 *   deadlock      from the rank-*.hang markers, when no deadlock or
 *                 collective_mismatch was found otherwise, naming where
 *                 every rank is: a rank with a marker in its collective
 *                 (op, site, seconds, its number, the last it completed),
 *                 another at the top frame of its last stack dump's current
 *                 thread that is not torch's or vqcheck's, else "no stack":
 *                 "deadlock: rank 1 waits in all_reduce at job.py:15 (main)
 *                 for 5.1 s (its collective #7; last completed: all_reduce
 *                 at job.py:14); rank 0 never entered it: it is at
 *                 job.py:12 (main)". Its ranks: those waiting and those
 *                 elsewhere (not those without a stack: a rank that died
 *                 keeps its rank_failure; a stopped rank is "stopped" and
 *                 then the one it names); its site: the first waiting
 *                 rank's;
 *   deadlock      from the heartbeats, when no marker was written (and no
 *                 deadlock or collective_mismatch found otherwise): the
 *                 culprits first (vqc_hb_culprits: the stopped ranks; else
 *                 those outside any collective in the program's own code;
 *                 else those that ended cleanly while the others waited;
 *                 else every hung rank), then every rank's place: "no
 *                 progress for 5 s (the --timeout): rank 1 is stopped
 *                 (process state T: ...); rank 0 is in torch's backward
 *                 (_tensor.py:623), called at job.py:15 (main) (no
 *                 progress for 5.2 s). A rank slower than --timeout between
 *                 two signs of progress (...) counts as a hang." Its
 *                 ranks: the culprits; detail.places: every rank's place,
 *                 process state and heartbeat;
 *   rank_failure  the processes that failed (exit status != 0, or a signal)
 *                 that no finding explains (the rule is watch_job.h's:
 *                 a finding about the rank, its call of the collective
 *                 included; a signal of its own only by a finding naming
 *                 it once its live record holds the signal). Before the
 *                 analysis, each rank that died by itself gets its signal
 *                 or exit status and last stderr words appended to its
 *                 live record (vqc_watch_mark_ended), so the analysis
 *                 names them instead of guessing.
 *
 * Whatever bytes the job leaves (a stderr tail cut inside a character,
 * the bridge's strings), run.json, the reports and junit.xml are valid
 * UTF-8 (checkers/utf8.h: bad bytes become '?', and the finding or text
 * says so), and a run.json that fails vqcheck's own validation anyway is
 * rebuilt and reported with the verdict's exit code (cmd_analyze.c).
 *
 * Exit: 0 clean, 1 findings, 2 usage (or a refused --out, or a malformed
 * bridge file: file:line), 3 environment (no bridge, or for an MPI job no
 * interposer; a command that cannot be run; nothing written by any rank:
 * the bridge or interposer never loaded), 130 / 143
 * / 129 when interrupted by SIGINT / SIGTERM / SIGHUP (after the analysis). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analyze.h"
#include "cli.h"
#include "cmd_watch_internal.h"
#include "ledger_analysis.h"
#include "rundir.h"
#include "supervise.h"
#include "watch_heartbeat.h"
#include "watch_job.h"
#include "vqc/clock.h"

/* Poll period of the loop (pipes, exits); the hang markers every
 * HANG_SCAN_S; the heartbeats and process states every HB_SCAN_S (a hang
 * is then seen at most that late: well inside the 5 s its report may take
 * past --timeout). */
#define POLL_MS 50
#define HANG_SCAN_S 0.15
#define HB_SCAN_S 0.25
/* After the first hang marker: how long the other ranks get to write
 * theirs. After SIGTERM: how long before SIGKILL. After a forwarded
 * interrupt: how long before SIGKILL. */
#define HANG_GRACE_S 2.0
#define TERM_GRACE_S 3.0
#define INTERRUPT_GRACE_S 5.0
/* At the end: how long leftover descendants get to be reaped, and how long
 * the stderr pipes get to deliver what is left in them. */
#define REAP_WAIT_S 3.0
#define DRAIN_S 1.0

/* ---- supervision: the interrupts vqcheck forwards to the job (the job's
 * processes: cmd_watch_procs.c) */

static volatile sig_atomic_t got_signal = 0;
static volatile sig_atomic_t signal_count = 0;

static void on_signal(int sig) {
  got_signal = sig;
  signal_count++;
}

/* ---- the command */

/* Marks the live records of the ranks vqcheck stopped "killed" (as the MPI
 * supervisor does), when they have one and it has no end line yet: with
 * --nproc the ranks it signalled, for a launcher every rank's record. */
static void mark_killed(const char *dir, const vqc_watch_proc *procs, int n,
                        bool launcher_stopped, const char *why) {
  enum { MAXR = 1000000 };
  bool *seen = calloc(MAXR, sizeof *seen);
  if (!seen) return;
  vqc_cw_count_files(dir, ".live.jsonl", seen, MAXR);
  for (int r = 0; r < MAXR; r++) {
    if (!seen[r]) continue;
    bool stopped = launcher_stopped;
    for (int i = 0; i < n && !stopped; i++)
      stopped = procs[i].rank == r && procs[i].stopped;
    vqc_live_info info;
    if (!stopped || vqc_live_scan(dir, r, &info) != VQC_OK || !info.exists ||
        info.finished || info.signal != 0 || info.killed)
      continue;
    (void)vqc_live_mark(dir, r, "killed", "vqcheck watch", why);
  }
  free(seen);
}

/* The base name of path. */
static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash && slash[1] ? slash + 1 : path;
}

/* The job's name for its report: the first argument that ends in ".py";
 * for an MPI program under its launcher ("mpiexec -n 4 ./prog"), the first
 * argument after the launcher's that names an executable file in the
 * working directory or by its path (not one found on PATH: "-n 4" must not
 * name a program called 4); else the command's base name. */
static const char *job_name(const vqc_watch_opts *o, bool mpi) {
  for (int i = 0; i < o->cmd_argc; i++) {
    const size_t l = strlen(o->cmd_argv[i]);
    if (l > 3 && strcmp(o->cmd_argv[i] + l - 3, ".py") == 0)
      return base_name(o->cmd_argv[i]);
  }
  for (int i = 1; mpi && o->nproc <= 0 && i < o->cmd_argc; i++) {
    const char *a = o->cmd_argv[i];
    struct stat st;
    if (a[0] != '-' && stat(a, &st) == 0 && S_ISREG(st.st_mode) &&
        access(a, X_OK) == 0)
      return base_name(a);
  }
  return base_name(o->cmd_argv[0]);
}

/* At the end of a hang's grace (stacks asked for, the job not yet
 * stopped): the heartbeats and process states once more, and the stalled
 * flags as they are now, so a rank whose last progress came a few
 * milliseconds after the hung rank's and made none since is told hung too.
 * The decision stands: when no rank is stalled now (one moved at the last
 * moment), the flags of the decision are kept. */
static void refresh_stalled(vqc_hb_watch *w, const vqc_watch_proc *procs,
                            int nprocs, double now, double timeout) {
  vqc_hb_rank *before = malloc((size_t)w->n * sizeof *before);
  if (!before) return;
  memcpy(before, w->ranks, (size_t)w->n * sizeof *before);
  const int n = w->n;
  vqc_hb_watch_poll(w, procs, nprocs, now);
  if (vqc_hb_stalled(w->ranks, w->n, now, timeout, w->first_beat, NULL) < 0 &&
      w->n >= n)
    memcpy(w->ranks, before, (size_t)n * sizeof *before);
  free(before);
}

int vqc_cmd_watch(int argc, char **argv) {
  vqc_watch_opts o;
  int rc = vqc_cw_parse_opts(argc, argv, &o);
  if (rc >= 0) return rc;
  char bridge[PATH_MAX] = "", mpi_lib[PATH_MAX] = "";
  const bool mpi = vqc_cw_mpi_job(&o);
  if (vqc_cw_buffered_opt && !mpi) {
    fprintf(stderr, "vqcheck watch: --buffered-sends is the MPI "
            "interposer's, and '%s' is not an MPI job\nhint: launch the "
            "program with mpiexec, mpirun or srun, or add --mpi\n",
            o.cmd_argv[0]);
    return 2;
  }
  if (vqc_cw_strict_opt && !mpi) {
    fprintf(stderr, "vqcheck watch: --strict is the MPI interposer's strict "
            "mode, and '%s' is not an MPI job\nhint: launch the program "
            "with mpiexec, mpirun or srun, or add --mpi\n", o.cmd_argv[0]);
    return 2;
  }
  if (mpi) {
    if (!vqc_cw_find_mpi_lib(mpi_lib, sizeof mpi_lib)) return 3;
    /* The bridge too, where there is one (quietly: it is optional). */
    vqc_cw_find_bridge_quietly(bridge);
  } else if (!vqc_cw_find_bridge(bridge, sizeof bridge)) {
    return 3;
  }
  if (!vqc_cw_executable(o.cmd_argv[0])) {
    fprintf(stderr, "vqcheck watch: cannot run '%s': no executable file of "
            "that name%s\nhint: check the command after '--' (a program on "
            "PATH, or a path to an executable file)\n", o.cmd_argv[0],
            strchr(o.cmd_argv[0], '/') ? "" : " on PATH");
    return 3;
  }

  /* The run directory: vqcheck's, locked, an earlier run's files gone
   * (rundir.c clears the bridge's findings and hang markers too). */
  char dir0[4096], dir[PATH_MAX];
  vqc_run_dir_choose(o.out, "watch", dir0, sizeof dir0);
  vqc_status s = vqc_run_dir_prepare(dir0);
  bool locked = s == VQC_OK;
  if (s == VQC_OK && !realpath(dir0, dir))
    s = vqc_error(VQC_EIO, "cannot resolve %s: %s", dir0, strerror(errno));
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck watch: %s\n", vqc_cli_error_text());
    if (vqc_status_exit_code(s) == 2)
      fprintf(stderr, "hint: 'vqcheck watch --help'\n");
    if (locked) vqc_run_dir_unlock(dir0);
    return vqc_status_exit_code(s);
  }

  /* The environment every process gets (see the file comment). */
  char value[PATH_MAX + 64];
  setenv("VQC_WATCH_DIR", dir, 1);
  snprintf(value, sizeof value, "%ld", o.interval);
  setenv("VQC_WATCH_INTERVAL", value, 1);
  snprintf(value, sizeof value, "%g", o.timeout);
  setenv("VQC_WATCH_TIMEOUT", value, 1);
  if (mpi) { /* the interposer, before the user's preloads */
    const char *pre = getenv("LD_PRELOAD");
    const size_t l = strlen(mpi_lib) + (pre ? strlen(pre) : 0) + 2;
    char *v = malloc(l);
    if (!v) {
      fprintf(stderr, "vqcheck watch: no memory for LD_PRELOAD\n");
      vqc_run_dir_unlock(dir);
      return 3;
    }
    snprintf(v, l, "%s%s%s", mpi_lib, pre && pre[0] ? ":" : "",
             pre && pre[0] ? pre : "");
    setenv("LD_PRELOAD", v, 1);
    free(v);
    if (vqc_cw_strict_opt) setenv("VQC_MPI_STRICT", "1", 1);
    if (vqc_cw_buffered_opt) unsetenv("VQC_MPI_SYNC_SENDS");
    else setenv("VQC_MPI_SYNC_SENDS", "1", 1);
  }
  const char *pp = getenv("PYTHONPATH");
  size_t pplen = strlen(bridge) + (pp ? strlen(pp) : 0) + 2;
  char *pythonpath = malloc(pplen);
  if (!pythonpath) {
    fprintf(stderr, "vqcheck watch: no memory for PYTHONPATH\n");
    vqc_run_dir_unlock(dir);
    return 3;
  }
  snprintf(pythonpath, pplen, "%s%s%s", bridge,
           bridge[0] && pp && pp[0] ? ":" : "", pp && pp[0] ? pp : "");
  if (pythonpath[0]) setenv("PYTHONPATH", pythonpath, 1);
  free(pythonpath);

  int port = 0;
  if (o.nproc > 0 && (port = vqc_cw_free_port()) == 0) {
    fprintf(stderr, "vqcheck watch: cannot find a free TCP port on "
            "127.0.0.1 for MASTER_PORT: %s\n", strerror(errno));
    vqc_run_dir_unlock(dir);
    return 3;
  }
  const int nprocs = o.nproc > 0 ? o.nproc : 1;
  vqc_watch_proc *procs = calloc((size_t)nprocs, sizeof *procs);
  if (!procs) {
    fprintf(stderr, "vqcheck watch: no memory for %d processes\n", nprocs);
    vqc_run_dir_unlock(dir);
    return 3;
  }
  for (int i = 0; i < nprocs; i++) procs[i].err_fd = -1;

  struct sigaction sa, old_int, old_term, old_hup, old_pipe;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGHUP, &sa, &old_hup);
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGPIPE, &ign, &old_pipe); /* our stderr may close first */
  /* Whatever the job's launcher leaves behind becomes ours to end. */
  (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

  int started = 0, code = -1;
  const double job_start = vqc_now_s(); /* run.json's duration_s from here */
  for (int i = 0; i < nprocs; i++) {
    int e = vqc_cw_start_proc(&o, &procs[i], o.nproc > 0 ? i : -1, port);
    started = i + 1;
    if (e != 0) {
      fprintf(stderr, "vqcheck watch: cannot run '%s': %s\nhint: check the "
              "command after '--'\n", o.cmd_argv[0], strerror(e));
      code = 3;
      break;
    }
  }

  /* ---- the watch */
  char reason[512] = "";
  double term_at = 0.0, kill_at = 0.0, last_scan = 0.0, hang_at = 0.0;
  double last_hb = 0.0;
  bool term_sent = false, kill_sent = false, fail_seen = false;
  bool hb_hang = false; /* the hang was decided from the heartbeats */
  vqc_hb_watch hbw;
  (void)vqc_hb_watch_init(&hbw, dir, o.nproc);
  int forwarded = 0, nexited = 0;
  if (code >= 0) { /* a process could not start: end the others now */
    vqc_cw_signal_all(procs, started, SIGKILL);
    kill_sent = true;
  }
  bool *hung = o.nproc > 0 ? calloc((size_t)o.nproc, sizeof *hung) : NULL;
  for (;;) {
    int running = 0;
    for (int i = 0; i < started; i++) {
      vqc_watch_proc *p = &procs[i];
      if (p->exited) continue;
      pid_t r = waitpid(p->pid, &p->status, WNOHANG);
      if (r == p->pid) {
        p->exited = true;
        p->exit_order = ++nexited;
        /* Asked for its stacks, it died of the asking: vqcheck's doing. */
        if (p->asked_pid == p->pid && WIFSIGNALED(p->status) &&
            WTERMSIG(p->status) == SIGUSR1)
          p->stopped = true;
        if (vqc_watch_failed(p) && !p->stopped && !fail_seen &&
            !term_sent) {
          /* The others get the timeout to end on their own. */
          fail_seen = true;
          char who[64], how[96];
          vqc_watch_proc_name(p, who, sizeof who);
          vqc_watch_end_text(p, how, sizeof how);
          snprintf(reason, sizeof reason, "%s %s; vqcheck watch stopped "
                   "the processes still running %g s later", who, how,
                   o.timeout);
          const double at = vqc_now_s() + o.timeout;
          if (term_at == 0.0 || at < term_at) term_at = at;
        }
      } else {
        running++;
      }
    }
    if (running == 0) break;
    const double now = vqc_now_s();
    if (signal_count > forwarded) {
      const int sig = got_signal;
      if (forwarded == 0) {
        snprintf(reason, sizeof reason, "vqcheck watch was interrupted "
                 "(%s) and forwarded it to the job", strsignal(sig));
        vqc_cw_signal_all(procs, started, sig);
        kill_at = now + INTERRUPT_GRACE_S;
        term_sent = true; /* nothing else is sent but SIGKILL */
      } else if (!kill_sent) {
        vqc_cw_signal_all(procs, started, SIGKILL); /* a second Ctrl-C */
        kill_sent = true;
      }
      forwarded = signal_count;
    }
    if (hang_at == 0.0 && !term_sent && now - last_scan >= HANG_SCAN_S) {
      last_scan = now;
      const int hr = vqc_cw_lowest_rank_file(dir, ".hang");
      if (hr >= 0) {
        hang_at = now;
        snprintf(reason, sizeof reason, "rank %d wrote rank-%d.hang (a "
                 "collective in flight longer than %g s); vqcheck watch "
                 "stopped the job", hr, hr, o.timeout);
        if (term_at == 0.0 || now + HANG_GRACE_S < term_at)
          term_at = now + HANG_GRACE_S;
        if (o.nproc > 0) vqc_cw_ask_for_stacks(dir, procs, started, NULL);
      }
    } else if (hang_at > 0.0 && !term_sent && (hung || hb_hang) &&
               now - last_scan >= HANG_SCAN_S) {
      /* Every rank told where it is: no need to wait longer. */
      last_scan = now;
      if (vqc_cw_all_placed(dir, procs, started, hung, o.nproc, &hbw, hb_hang))
        term_at = now;
    }
    /* No progress for --timeout, wherever a rank is (the file comment).
     * Not once a process failed: the others then get the timeout to end
     * of it, and its failure is what is reported. */
    if (hang_at == 0.0 && !term_sent && !fail_seen &&
        now - last_hb >= HB_SCAN_S) {
      last_hb = now;
      vqc_hb_watch_poll(&hbw, procs, started, now);
      double idle = 0.0;
      const int hr = vqc_hb_stalled(hbw.ranks, hbw.n, now, o.timeout,
                                    hbw.first_beat, &idle);
      if (hr >= 0) {
        hang_at = now;
        hb_hang = true;
        snprintf(reason, sizeof reason, "rank %d made no progress for %.1f s "
                 "(--timeout %g s: no collective entered or left, no step "
                 "ended); vqcheck watch stopped the job", hbw.ranks[hr].rank,
                 idle, o.timeout);
        if (term_at == 0.0 || now + HANG_GRACE_S < term_at)
          term_at = now + HANG_GRACE_S;
        vqc_cw_ask_for_stacks(dir, procs, started, &hbw);
      }
    }
    if (term_at > 0.0 && !term_sent && now >= term_at) {
      if (hb_hang) /* a rank a few ms short of it at the decision is told
                      hung too if it made no progress since */
        refresh_stalled(&hbw, procs, started, now, o.timeout);
      vqc_cw_signal_all(procs, started, SIGTERM);
      vqc_cw_kill_stopped(procs, started, &hbw);
      term_sent = true;
      kill_at = now + TERM_GRACE_S;
    }
    if (kill_at > 0.0 && !kill_sent && now >= kill_at) {
      vqc_cw_signal_all(procs, started, SIGKILL);
      kill_sent = true;
    }
    vqc_cw_pump_all(procs, started, POLL_MS);
  }
  free(hung);

  const double job_seconds = vqc_now_s() - job_start;
  /* ---- the end: nothing of the job survives; what its pipes still hold
   * is read. */
  vqc_kill_and_reap_children(vqc_now_s() + REAP_WAIT_S);
  const double drain_until = vqc_now_s() + DRAIN_S;
  for (;;) {
    bool open = false;
    for (int i = 0; i < started; i++) open = open || procs[i].err_fd >= 0;
    if (!open || vqc_now_s() > drain_until) break;
    vqc_cw_pump_all(procs, started, POLL_MS);
  }
  for (int i = 0; i < started; i++)
    if (procs[i].err_fd >= 0) close(procs[i].err_fd);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  sigaction(SIGHUP, &old_hup, NULL);
  sigaction(SIGPIPE, &old_pipe, NULL);
  const int interrupt = forwarded > 0 ? got_signal : 0;

  if (code < 0) {
    bool any_stopped = false;
    for (int i = 0; i < started; i++) any_stopped |= procs[i].stopped;
    if (any_stopped)
      mark_killed(dir, procs, started, o.nproc == 0, reason);
    /* Ranks that died by themselves: their signal or exit status and last
     * stderr words into their live records, for the analysis to name. */
    vqc_watch_mark_ended(dir, procs, started);
    /* Did the bridge load? Every rank it ran in writes something. */
    static const char *const written[] = {".trace.jsonl", ".live.jsonl",
                                          ".findings.jsonl", ".hang",
                                          ".ledger.jsonl", ".status.json"};
    int nfiles = 0;
    for (size_t k = 0; k < sizeof written / sizeof written[0]; k++)
      nfiles += vqc_cw_count_files(dir, written[k], NULL, 0);
    char unchecked[4608] = "";
    const bool no_bridge = nfiles == 0 && !interrupt;
    /* The interposer's mark that it loaded in a rank (vqc_mpi.c). */
    const int preloaded =
        mpi ? vqc_cw_count_files(dir, ".preloaded", NULL, 0) : 0;
    if (interrupt) /* run.json must not read clean either */
      snprintf(unchecked, sizeof unchecked, "vqcheck watch was interrupted "
               "(%s) and stopped the job before it ended: it was checked "
               "only up to there", strsignal(interrupt));
    else if (no_bridge && mpi && preloaded > 0)
      snprintf(unchecked, sizeof unchecked, "the MPI interposer loaded in "
               "%d rank%s, but no rank returned from MPI_Init: only how "
               "each process ended, and whether it hung, was checked",
               preloaded, preloaded == 1 ? "" : "s");
    else if (no_bridge && mpi)
      snprintf(unchecked, sizeof unchecked, "no process of the job wrote a "
               "live record into %.2000s: the MPI interposer (%.2000s) did "
               "not load in "
               "its ranks (a program linked statically against MPI, or not "
               "calling MPI_Init, or a launcher that does not pass "
               "LD_PRELOAD on), or every process ended before MPI_Init",
               dir, mpi_lib);
    else if (no_bridge)
      snprintf(unchecked, sizeof unchecked, "no process of the job wrote a "
               "trace, live record or finding into %s: the vqcheck bridge "
               "did not load in its Python processes (the job's Python "
               "lacks the vqcheck package, or is not the one PYTHONPATH "
               "reaches), or every process ended before its first step",
               dir);
    json_t *job = vqc_watch_job_json(&o, bridge, procs, started,
                           any_stopped ? reason : "");
    if (mpi && job)
      json_object_set_new(job, "mpi_preload", json_string(mpi_lib));
    vqc_watch_ctx ctx = {.dir = dir, .o = &o, .procs = procs, .nprocs = started,
                     .interrupted = interrupt != 0,
                     .hb = hb_hang ? hbw.ranks : NULL,
                     .hb_n = hb_hang ? hbw.n : 0};
    const vqc_analyze_opts ao = {.run_dir = dir,
                                 .ranks = o.nproc,
                                 .name = job_name(&o, mpi),
                                 .path = o.cmd_argv[0],
                                 .backend = "watch",
                                 .why = any_stopped ? reason : NULL,
                                 .description =
                                     mpi ? "an MPI program run by vqcheck "
                                           "watch through the PMPI "
                                           "interposer"
                                         : "a job run by vqcheck watch with "
                                           "the Python bridge",
                                 .duration_s = job_seconds,
                                 .job = job,
                                 .more_findings = vqc_watch_more_findings,
                                 .more_ctx = &ctx,
                                 .caller_reports_hangs =
                                     hb_hang || vqc_watch_any_hang(dir),
                                 .unchecked = unchecked[0] ? unchecked
                                                           : NULL,
                                 .unchecked_found = no_bridge && mpi &&
                                                    preloaded > 0,
                                 .ledger_checks = mpi};
    code = vqc_cli_analyze(&ao, VQC_CW_CMD, o.json, o.quiet);
    json_decref(job);
    if (no_bridge && code == 1 && mpi && preloaded > 0) {
      /* a rank failed before MPI_Init: the program's failure, found */
      fprintf(stderr, "vqcheck watch: %s\n", unchecked);
    } else if (no_bridge && code != 2 && mpi) {
      fprintf(stderr, "vqcheck watch: %s\nhint: check that the program is "
              "linked dynamically against the MPI library the interposer "
              "was built with (ldd ./prog)\n", unchecked);
      code = 3;
    } else if (no_bridge && code != 2) {
      fprintf(stderr, "vqcheck watch: %s\nhint: install vqcheck into the "
              "job's Python ('pip install .' in vqcheck's source tree), and "
              "check that the job runs Python\n", unchecked);
      code = 3;
    }
    /* Never clean after a failure or a stop (the findings say why). */
    bool bad = any_stopped;
    for (int i = 0; i < started; i++) bad = bad || vqc_watch_failed(&procs[i]);
    if (code == 0 && bad) code = 3;
  }
  if (interrupt)
    code = 128 + (interrupt == SIGINT ? SIGINT
                  : interrupt == SIGHUP ? SIGHUP : SIGTERM);
  vqc_hb_watch_free(&hbw);
  vqc_run_dir_unlock(dir);
  free(procs);
  return code;
}
