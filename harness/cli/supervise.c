/* supervise.c: launches an MPI job of `vqcheck run` and watches its ranks
 * (see supervise.h for what it promises).
 *
 * How the supervisor knows which rank was lost. Every rank's live record
 * (rank-<r>.live.jsonl) starts with its pid and host, and ends with
 * "finished" when the rank reaches its end. On this host a rank's process
 * is polled through /proc/<pid>/stat: state T or t is stopped, no entry (or
 * a zombie) is gone. Gone before "finished" is lost; stopped for the
 * collective timeout is lost. When the launcher tears a job down itself
 * (OpenMPI's mpiexec SIGTERMs every rank as soon as one dies), the ranks it
 * terminated note the signal in their records, so the rank whose record
 * just stops is the one that died, even if the supervisor's poll missed the
 * order. And a rank whose process is gone in a later poll than the first
 * rank lost was ended by that teardown (mpiexec's SIGKILL can beat the
 * rank's own note of its SIGTERM on a loaded machine): it is marked
 * "killed", not lost, so the rank named is the one that died first. A
 * record older than the launch (an earlier run's, same directory) is
 * ignored.
 *
 * Only main-level code: it forks, execs, signals and exits nothing itself
 * (the exit code is returned). */
#include "supervise.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analyze.h"
#include "cli.h"
#include "ledger_analysis.h"
#include "rundir.h"
#include "runner.h"
#include "spawn.h"
#include "utf8.h"
#include "vqc/clock.h"
#include "vqc/vqc.h"

/* Poll period: a rank's death is seen within this (20 ms costs nothing on
 * a core, and is far below any timeout). */
#define POLL_NS 20000000L
/* After a rank is seen gone, how long the launcher gets to end the job by
 * itself (its SIGTERMs are what lets the records tell the dead rank from
 * the ranks it took down). */
#define GONE_GRACE_S 2.0
/* After the group is SIGKILLed, how long to wait for the ranks' processes
 * to disappear before the records are read. */
#define REAP_WAIT_S 3.0
/* No record growing for 3 x timeout + this: the job hangs beyond what the
 * ranks' own deadlines (each within 2 x timeout + 10 s) end. */
#define IDLE_SLACK_S 30.0
/* Largest job watched rank by rank (bigger ones run unwatched, their
 * records are still analysed). */
#define MAX_WATCHED 4096

bool vqc_supervise_wanted(void) {
  const char *v = getenv("VQC_SUPERVISE");
  return v && strcmp(v, "1") == 0;
}

/* ---- the launcher command line (shared with vqcheck suite) */

void vqc_launcher_resolve(const char *wanted, char *buf, size_t n) {
  const char *l = wanted && wanted[0] ? wanted : getenv("VQC_LAUNCHER");
  if (l && l[0])
    snprintf(buf, n, "%s", l);
  else
    snprintf(buf, n, "mpiexec --oversubscribe%s",
             geteuid() == 0 ? " --allow-run-as-root" : "");
}

int vqc_launcher_split(char *line, char **args, int max) {
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(line, " \t", &save); tok && n < max;
       tok = strtok_r(NULL, " \t", &save))
    args[n++] = tok;
  return n;
}

static bool on_path(const char *prog) {
  if (strchr(prog, '/')) return access(prog, X_OK) == 0;
  const char *path = getenv("PATH");
  if (!path) return false;
  char *copy = strdup(path);
  if (!copy) return false;
  bool found = false;
  char *save = NULL;
  for (char *dir = strtok_r(copy, ":", &save); dir && !found;
       dir = strtok_r(NULL, ":", &save)) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", dir, prog);
    found = access(full, X_OK) == 0;
  }
  free(copy);
  return found;
}

bool vqc_launcher_available(const char *cmd, const char *launcher) {
  char first[1024];
  snprintf(first, sizeof first, "%s", launcher);
  char *word = NULL;
  vqc_launcher_split(first, &word, 1);
  if (word && on_path(word)) return true;
  fprintf(stderr, "vqcheck %s: the MPI launcher '%s' is not available\n"
          "hint: install OpenMPI (scripts/install-deps.sh) or pass "
          "--launcher\n", cmd, word ? word : launcher);
  return false;
}

/* ---- watching the ranks */

typedef struct rank_watch {
  long pid;             /* from its live record; 0 until known */
  bool local;           /* on this host: its process can be polled */
  double stopped_since; /* vqc_now_s() when first seen stopped; 0 if not */
  bool gone;            /* its process disappeared */
  bool lost;            /* declared lost by the supervisor */
  bool torn_down;       /* gone after another rank was lost (the launcher
                           ending the job): marked "killed", not lost */
  char why[256];        /* why it was declared lost or torn down */
} rank_watch;

/* The process's state letter from /proc/<pid>/stat; 0 when there is no
 * such process. */
static char proc_state(long pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the name may hold anything */
  return p && p[1] == ' ' && p[2] ? p[2] : 0;
}

/* Whether pid is a live process (a zombie is not). */
static bool alive(long pid) {
  const char st = proc_state(pid);
  return st != 0 && st != 'Z' && st != 'X';
}

/* Whether path was modified at or after t0 (CLOCK_REALTIME seconds). */
static bool fresh(const struct stat *st, double t0) {
  const double m = (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec * 1e-9;
  return m + 0.001 >= t0;
}

/* Reads the pid and host from rank r's live record if it is this run's. */
static void learn_pid(const char *dir, int r, double t0_real,
                      const char *host, rank_watch *w) {
  char path[4200];
  struct stat st;
  if (vqc_live_path(dir, r, path, sizeof path) != VQC_OK ||
      stat(path, &st) != 0 || !fresh(&st, t0_real))
    return;
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  if (fgets(line, sizeof line, f)) {
    json_t *j = vqc_json_loadb_mended(line, strlen(line), 0, NULL, NULL);
    const char *ev = json_string_value(json_object_get(j, "event"));
    const json_t *pid = json_object_get(j, "pid");
    const char *h = json_string_value(json_object_get(j, "host"));
    if (ev && strcmp(ev, "start") == 0 && json_is_integer(pid)) {
      w->pid = (long)json_integer_value(pid);
      w->local = h && strcmp(h, host) == 0;
    }
    json_decref(j);
  }
  fclose(f);
}

/* Marks x ended by the launcher's teardown, seen gone after_s seconds after
 * rank first_lost was lost. */
static void mark_torn_down(rank_watch *x, double after_s, int first_lost) {
  x->torn_down = true;
  snprintf(x->why, sizeof x->why, "its process (pid %ld) ended %.2f s after "
           "rank %d was lost, as the launcher ended the job", x->pid, after_s,
           first_lost);
}

/* Whether rank r's live record has an end line ("finished", "signal"). */
static bool ended(const char *dir, int r) {
  vqc_live_info info;
  return vqc_live_scan(dir, r, &info) == VQC_OK &&
         (info.finished || info.signal != 0);
}

/* The total size of the ranks' live records: it grows while any rank
 * makes progress (a line per collective and per step). */
static long long records_size(const char *dir, int n, double t0_real) {
  long long total = 0;
  for (int r = 0; r < n; r++) {
    char path[4200];
    struct stat st;
    if (vqc_live_path(dir, r, path, sizeof path) == VQC_OK &&
        stat(path, &st) == 0 && fresh(&st, t0_real))
      total += (long long)st.st_size;
  }
  return total;
}

/* The parent pid of process pid (from /proc), or -1. */
static long parent_of(long pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  long ppid = -1;
  char st;
  if (!p || sscanf(p + 1, " %c %ld", &st, &ppid) != 2) return -1;
  return ppid;
}

/* (supervise.h; `until` is CLOCK_MONOTONIC seconds, as mono_s.) Also
 * shared with `vqcheck watch`. */
void vqc_kill_and_reap_children(double until) {
  const long me = (long)getpid();
  for (;;) {
    int st;
    while (waitpid(-1, &st, WNOHANG) > 0) {
    }
    if (waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD) return;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
      char *end;
      long pid = strtol(e->d_name, &end, 10);
      if (*end == '\0' && pid > 0 && parent_of(pid) == me)
        kill((pid_t)pid, SIGKILL);
    }
    if (d) closedir(d);
    if (vqc_now_s() > until) return;
    struct timespec nap = {0, POLL_NS / 4};
    nanosleep(&nap, NULL);
  }
}

/* A termination signal the supervisor received (it then ends the job). */
static volatile sig_atomic_t interrupted = 0;

static void on_signal(int sig) { interrupted = sig; }

/* ---- the command */

/* argv for the launcher: its words, -n N, this program, "run" and the
 * user's arguments without --launcher/--out, then --out dir. Pointers into
 * lcopy, argv and the given buffers; NULL-terminated. */
static char **child_args(char *lcopy, const char *self, int nranks,
                         char *nbuf, size_t nbuf_n, int argc, char **argv,
                         const char *dir) {
  char **args = calloc((size_t)argc + 80, sizeof *args);
  if (!args) return NULL;
  int k = vqc_launcher_split(lcopy, args, 64);
  snprintf(nbuf, nbuf_n, "%d", nranks);
  args[k++] = "-n";
  args[k++] = nbuf;
  args[k++] = (char *)self;
  args[k++] = "run";
  for (int i = 1; i < argc; i++) {
    if ((strcmp(argv[i], "--launcher") == 0 || strcmp(argv[i], "--out") == 0)
        && i + 1 < argc) {
      i++;
      continue;
    }
    args[k++] = argv[i];
  }
  args[k++] = "--out";
  args[k++] = (char *)dir;
  args[k] = NULL;
  return args;
}

int vqc_supervise_run(const run_opts *o, const vqc_scenario *sc, int argc,
                      char **argv) {
  const int nranks = o->ranks > 0 ? o->ranks : sc->ranks;
  const double timeout = o->timeout > 0 ? o->timeout : sc->timeout_s;
  char launcher[1024];
  vqc_launcher_resolve(o->launcher, launcher, sizeof launcher);
  if (!vqc_launcher_available("run", launcher)) return 3;
  char self[4096];
  ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sn <= 0) {
    fprintf(stderr, "vqcheck run: cannot find this program's path\n");
    return 3;
  }
  self[sn] = '\0';
  /* The ranks' rank 0 prepares (and clears) the directory; only its name
   * is chosen here, so the records can be found. */
  char dir[4096];
  vqc_run_dir_choose(o->out, sc->name, dir, sizeof dir);

  char lcopy[1024], nbuf[16];
  snprintf(lcopy, sizeof lcopy, "%s", launcher);
  char **args = child_args(lcopy, self, nranks, nbuf, sizeof nbuf, argc, argv,
                           dir);
  rank_watch *w = calloc((size_t)(nranks < MAX_WATCHED ? nranks : MAX_WATCHED),
                         sizeof *w);
  if (!args || !w) {
    fprintf(stderr, "vqcheck run: no memory to launch %d ranks\n", nranks);
    free(args);
    free(w);
    return 3;
  }
  const int nwatch = nranks < MAX_WATCHED ? nranks : MAX_WATCHED;
  char host[256] = "";
  gethostname(host, sizeof host - 1);

  struct sigaction sa, old_int, old_term, old_hup;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGHUP, &sa, &old_hup);

  /* OpenMPI puts every rank in a process group of its own, so killing the
   * launcher's group does not reach them; as their subreaper, ranks whose
   * launcher died become this process's children, to be killed and
   * reaped (nothing left behind, and no zombie for a PID 1 that reaps
   * nothing). */
  (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  /* Records written after this are this run's. (File times come from a
   * coarse clock, a tick behind at most: 50 ms of slack.) */
  const double t0_real = (double)rt.tv_sec + rt.tv_nsec * 1e-9 - 0.05;
  static const int dfl[] = {SIGINT, SIGTERM, SIGHUP, 0};
  const char *const env[] = {
      "VQC_SUPERVISE", /* unset: the ranks are ranks */
      /* The ranks' stdout is the launcher's pseudo-terminal, whatever ours
       * is: tell rank 0 whether per-step progress is wanted (cmd_run.c). */
      vqc_cli_show_progress(o->quiet, o->json) ? "VQC_PROGRESS=1"
                                               : "VQC_PROGRESS=0",
      NULL};
  /* Should this supervisor be killed outright (SIGKILL, e.g. a suite's
   * deadline), the launcher still hears of it and tears the job down
   * (mpiexec ends its ranks on SIGTERM): die_with_parent. */
  const vqc_spawn_opts so = {.argv = args,
                             .die_with_parent = true,
                             .default_signals = dfl,
                             .env = env,
                             .who = "vqcheck run"};
  pid_t pid;
  int err = vqc_spawn(&so, &pid, NULL);
  if (err != 0) {
    fprintf(stderr, "vqcheck run: cannot start %s: %s\n", args[0],
            strerror(err));
    free(args);
    free(w);
    return 3;
  }

  /* ---- the watch */
  const double start = vqc_now_s();
  const double idle_limit = 3.0 * timeout + IDLE_SLACK_S;
  double last_growth = start, gone_at = 0.0;
  int first_lost = -1; /* the first rank seen gone unfinished */
  long long last_size = -1;
  int status = 0;
  bool exited = false, cut = false;
  char reason[512] = "";
  while (!exited) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      exited = true;
      break;
    }
    if (r < 0 && errno != EINTR) break;
    const double now = vqc_now_s();
    if (interrupted) {
      snprintf(reason, sizeof reason, "vqcheck run was interrupted (signal "
               "%d) and ended the job", (int)interrupted);
      cut = true;
      break;
    }
    for (int k = 0; k < nwatch; k++) {
      rank_watch *x = &w[k];
      if (!x->pid) learn_pid(dir, k, t0_real, host, x);
      if (!x->pid || !x->local || x->gone || x->lost) continue;
      const char st = proc_state(x->pid);
      if (st == 0 || st == 'Z' || st == 'X') {
        x->gone = true;
        if (!ended(dir, k) && gone_at > 0.0 && now > gone_at) {
          mark_torn_down(x, now - gone_at, first_lost);
        } else if (!ended(dir, k)) {
          x->lost = true;
          snprintf(x->why, sizeof x->why, "its process (pid %ld) ended "
                   "while the job ran, without finishing", x->pid);
          if (gone_at == 0.0) {
            gone_at = now;
            first_lost = k;
          }
          if (!reason[0])
            snprintf(reason, sizeof reason, "rank %d (pid %ld) ended "
                     "without finishing", k, x->pid);
        }
      } else if (st == 'T' || st == 't') {
        if (x->stopped_since == 0.0) x->stopped_since = now;
        if (now - x->stopped_since >= timeout) {
          x->lost = true;
          snprintf(x->why, sizeof x->why, "its process (pid %ld) was stopped "
                   "(SIGSTOP or a debugger) for %.3g s, the collective "
                   "timeout", x->pid, now - x->stopped_since);
          snprintf(reason, sizeof reason, "rank %d (pid %ld) was stopped "
                   "for %.3g s", k, x->pid, now - x->stopped_since);
          cut = true;
        }
      } else {
        x->stopped_since = 0.0;
      }
    }
    if (cut) break;
    if (gone_at > 0.0 && now - gone_at > GONE_GRACE_S) {
      cut = true; /* the launcher did not end the job by itself */
      break;
    }
    const long long size = records_size(dir, nranks, t0_real);
    if (size != last_size) {
      last_size = size;
      last_growth = now;
    } else if (now - last_growth > idle_limit) {
      snprintf(reason, sizeof reason, "no rank made progress for %.0f s "
               "(3 x the %.3g s timeout + %.0f s)", now - last_growth,
               timeout, IDLE_SLACK_S);
      cut = true;
      break;
    }
    struct timespec nap = {0, POLL_NS};
    nanosleep(&nap, NULL);
  }

  /* A rank seen alive after the first was lost whose process is gone now,
   * unfinished, was ended by the launcher's teardown (or by whatever ended
   * the launcher) between our last poll and the launcher's exit: torn down
   * as one seen in a poll would be, never a second rank lost. On a loaded
   * machine the launcher can exit before the next poll. */
  for (int k = 0; k < nwatch && gone_at > 0.0; k++) {
    rank_watch *x = &w[k];
    if (!x->pid || !x->local || x->gone || x->lost || alive(x->pid) ||
        ended(dir, k))
      continue;
    x->gone = true;
    mark_torn_down(x, vqc_now_s() - gone_at, first_lost);
  }

  /* ---- the end: nothing of the job survives, a stopped rank included.
   * Which ranks still ran is noted first ("killed", not "lost"). */
  bool *running = calloc((size_t)nwatch + 1, sizeof *running);
  for (int k = 0; k < nwatch && running; k++)
    running[k] = w[k].pid && w[k].local && !w[k].lost && alive(w[k].pid) &&
                 !ended(dir, k);
  /* The ranks first (each in its own group, see above; none is reaped
   * before this process reaps it, so a pid cannot have been reused), then
   * the launcher's group, then whatever is left of our children. */
  for (int k = 0; k < nwatch; k++) {
    if (!w[k].pid || !w[k].local || w[k].gone) continue;
    const long pp = parent_of(w[k].pid);
    if (pp == (long)pid || pp == (long)getpid())
      kill((pid_t)w[k].pid, SIGKILL);
  }
  kill(-pid, SIGKILL);
  if (!exited) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  const double reap_until = vqc_now_s() + REAP_WAIT_S;
  vqc_kill_and_reap_children(reap_until);
  for (int k = 0; k < nwatch; k++) {
    if (!w[k].pid || !w[k].local) continue;
    while (alive(w[k].pid) && vqc_now_s() < reap_until) {
      struct timespec nap = {0, POLL_NS / 4};
      nanosleep(&nap, NULL);
    }
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  sigaction(SIGHUP, &old_hup, NULL);

  /* The job's own verdict stands when rank 0 wrote it and nothing was cut
   * short: run.json (with the reports and the summary rank 0 printed). */
  char json_path[4200];
  snprintf(json_path, sizeof json_path, "%s/run.json", dir);
  struct stat st;
  bool lost_any = false;
  for (int k = 0; k < nwatch; k++) lost_any = lost_any || w[k].lost;
  const bool has_json = stat(json_path, &st) == 0 && fresh(&st, t0_real);
  int code = -1;
  if (!cut && !lost_any && exited && WIFEXITED(status) && has_json) {
    code = WEXITSTATUS(status);
  } else {
    int started = 0;
    for (int k = 0; k < nranks; k++) {
      char path[4200];
      if (vqc_live_path(dir, k, path, sizeof path) == VQC_OK &&
          stat(path, &st) == 0 && fresh(&st, t0_real))
        started++;
    }
    if (!reason[0]) {
      if (exited && WIFSIGNALED(status))
        snprintf(reason, sizeof reason, "the launcher was killed by signal "
                 "%d", WTERMSIG(status));
      else if (exited)
        snprintf(reason, sizeof reason, "the launcher ended with exit %d "
                 "%s", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                 has_json ? "after a rank was lost" : "and no run.json");
      else
        snprintf(reason, sizeof reason, "the job could not be watched");
    }
    if (started > 0) {
      fprintf(stderr, "vqcheck run: %s; ranks seen lost: ", reason);
      int nl = 0;
      for (int k = 0; k < nwatch; k++)
        if (w[k].lost) fprintf(stderr, "%s%d", nl++ ? ", " : "", k);
      fprintf(stderr, "%s; reporting from the ranks' records in %s\n",
              nl ? "" : "none", dir);
    }
    if (started == 0 && exited && WIFEXITED(status) &&
        WEXITSTATUS(status) == 2) {
      code = 2; /* the ranks refused the arguments, and said why */
    } else if (started == 0) {
      fprintf(stderr, "vqcheck run: no rank started (see the launcher's "
              "messages above)\nhint: check the launcher: %s -n %d "
              "hostname\n", launcher, nranks);
      code = 3;
    } else {
      for (int k = 0; k < nwatch; k++) {
        if (w[k].lost)
          (void)vqc_live_mark(dir, k, "lost", "vqcheck run (supervisor)",
                              w[k].why);
        else if (w[k].torn_down)
          (void)vqc_live_mark(dir, k, "killed", "vqcheck run (supervisor)",
                              w[k].why);
        else if (running && running[k])
          (void)vqc_live_mark(dir, k, "killed", "vqcheck run (supervisor)",
                              reason);
      }
      const vqc_analyze_opts ao = {.run_dir = dir,
                                   .ranks = nranks,
                                   .name = sc->name,
                                   .path = sc->path,
                                   .backend = vqc_backend_name(o->backend),
                                   .why = reason};
      code = vqc_cli_analyze(&ao, "run", o->json, o->quiet);
      if (code == 0) code = 3; /* cut short: never clean */
    }
  }
  free(running);
  free(args);
  free(w);
  return code;
}
