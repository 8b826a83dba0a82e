/* watch_heartbeat.c: reading the ranks' heartbeats and process states, and
 * the no-progress rule (see watch_heartbeat.h; the whole rule is in
 * cmd_watch.c's file comment).
 *
 * A heartbeat is rewritten in place by one pwrite(2) of 64 bytes; a read
 * may still see a write half done. Two reads that agree are kept (a rank
 * beats at most a few thousand times a second: two pread(2)s of 64 bytes
 * back to back agree unless a write fell between them, and the next try
 * will not). Anything else is no heartbeat: the watcher keeps the last one
 * it trusted, and a rank never seen to beat is never hung before another
 * rank beats. */
#include "watch_heartbeat.h"
#include "ledger_analysis.h" /* vqc_live_scan */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rundir.h"

/* Reads that disagree are tried again this many times. */
#define HB_READ_TRIES 4
/* A heartbeat's own time is taken for the progress when it lies within
 * this many seconds before the moment it was seen (the watcher looks every
 * few tenths of a second); else the moment seen is (another machine's
 * clock, or a late look: never earlier than the truth). */
#define HB_CLOCK_WINDOW_S 1.0

static uint32_t le32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
}

static uint64_t le64(const unsigned char *b) {
  return (uint64_t)le32(b) | (uint64_t)le32(b + 4) << 32;
}

bool vqc_heartbeat_decode(const unsigned char *b, size_t n,
                          vqc_heartbeat *hb) {
  if (!b || n < VQC_HB_SIZE || memcmp(b, "VQHB", 4) != 0) return false;
  vqc_heartbeat h;
  memset(&h, 0, sizeof h);
  h.version = le32(b + 4);
  h.pid = le32(b + 8);
  h.state = le32(b + 12);
  if (h.version != 1 || h.state > VQC_HB_SETUP) return false;
  h.beats = le64(b + 16);
  h.last_ns = le64(b + 24);
  h.seq = le64(b + 32);
  h.step = le64(b + 40);
  for (int i = 0; i < 16 && b[48 + i] != 0; i++)
    h.op[i] = b[48 + i] >= 0x20 && b[48 + i] < 0x7f ? (char)b[48 + i] : '?';
  *hb = h;
  return true;
}

/* n bytes at offset 0 of fd, retried on EINTR; the count read. */
static ssize_t read_head(int fd, unsigned char *b, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = pread(fd, b + got, n - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

bool vqc_heartbeat_read(const char *path, vqc_heartbeat *hb) {
  const int fd =
      open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  struct stat st;
  bool ok = false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= VQC_HB_SIZE) {
    unsigned char a[VQC_HB_SIZE], b[VQC_HB_SIZE];
    for (int t = 0; t < HB_READ_TRIES && !ok; t++) {
      if (read_head(fd, a, sizeof a) != VQC_HB_SIZE ||
          read_head(fd, b, sizeof b) != VQC_HB_SIZE)
        break;
      ok = memcmp(a, b, sizeof a) == 0 && vqc_heartbeat_decode(a, sizeof a, hb);
      if (memcmp(a, b, sizeof a) == 0 && !ok) break; /* garbage, settled */
    }
  }
  close(fd);
  return ok;
}

vqc_proc_state vqc_proc_state_parse(const char *text, char *letter,
                                    pid_t *ppid) {
  if (letter) *letter = '\0';
  if (ppid) *ppid = 0;
  const char *close = text ? strrchr(text, ')') : NULL;
  if (!close || close[1] != ' ' || close[2] == '\0') return VQC_PROC_UNKNOWN;
  const char c = close[2];
  if (letter) *letter = c;
  if (ppid) {
    char *end;
    const long p = strtol(close + 3, &end, 10);
    *ppid = end != close + 3 && p > 0 ? (pid_t)p : 0;
  }
  switch (c) {
  case 'T': case 't': return VQC_PROC_STOPPED;
  case 'Z': return VQC_PROC_ZOMBIE;
  case 'X': case 'x': return VQC_PROC_GONE;
  case 'R': case 'S': case 'D': case 'I': case 'W': case 'K': case 'P':
    return VQC_PROC_RUNNING;
  default: return VQC_PROC_UNKNOWN;
  }
}

double vqc_proc_cpu_parse(const char *text) {
  const char *close = text ? strrchr(text, ')') : NULL;
  if (!close) return -1.0;
  /* After ") ": field 3 (the state) is the first; utime and stime are
   * fields 14 and 15, in clock ticks. */
  const char *p = close + 1;
  unsigned long long ticks[2] = {0, 0};
  for (int field = 3; field <= 15; field++) {
    while (*p == ' ') p++;
    if (*p == '\0') return -1.0;
    if (field >= 14) {
      char *end;
      ticks[field - 14] = strtoull(p, &end, 10);
      if (end == p) return -1.0;
      p = end;
    } else {
      while (*p && *p != ' ') p++;
    }
  }
  const long hz = sysconf(_SC_CLK_TCK);
  return (double)(ticks[0] + ticks[1]) / (double)(hz > 0 ? hz : 100);
}

/* The CPU time of process pid (vqc_proc_cpu_parse); negative if unknown. */
static double proc_cpu_s(pid_t pid) {
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1.0;
  ssize_t n;
  do {
    n = read(fd, text, sizeof text - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return -1.0;
  text[n] = '\0';
  return vqc_proc_cpu_parse(text);
}

vqc_proc_state vqc_proc_state_of(pid_t pid, char *letter, pid_t *ppid) {
  if (letter) *letter = '\0';
  if (ppid) *ppid = 0;
  if (pid <= 0) return VQC_PROC_UNKNOWN;
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? VQC_PROC_GONE
                                                       : VQC_PROC_UNKNOWN;
  ssize_t n;
  do {
    n = read(fd, text, sizeof text - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return n == 0 || errno == ESRCH ? VQC_PROC_GONE
                                              : VQC_PROC_UNKNOWN;
  text[n] = '\0';
  return vqc_proc_state_parse(text, letter, ppid);
}

bool vqc_proc_is_descendant(pid_t pid) {
  const pid_t me = getpid();
  for (int gen = 0; gen < 64 && pid > 1; gen++) {
    pid_t parent;
    if (vqc_proc_state_of(pid, NULL, &parent) == VQC_PROC_GONE ||
        parent <= 0)
      return false;
    if (parent == me) return true;
    pid = parent;
  }
  return false;
}

const char *vqc_proc_stopped_text(char letter) {
  return letter == 't' ? "t: a debugger" : "T: a stop signal such as SIGSTOP";
}

/* ---- the rule */

void vqc_hb_note(vqc_hb_rank *r, const vqc_heartbeat *hb, double now) {
  const bool progress = !r->beaten || hb->beats != r->hb.beats ||
                        hb->last_ns != r->hb.last_ns || hb->pid != r->hb.pid;
  if (progress) {
    const double t = (double)hb->last_ns * 1e-9;
    r->since = t <= now && t >= now - HB_CLOCK_WINDOW_S ? t : now;
  }
  r->hb = *hb;
  r->beaten = true;
}

bool vqc_hb_setting_up(const vqc_hb_rank *r) {
  return r->beaten && (r->hb.state == VQC_HB_SETUP ||
                       (r->hb.state == VQC_HB_IN_COLLECTIVE &&
                        (strcmp(r->hb.op, "rendezvous") == 0 ||
                         strcmp(r->hb.op, "MPI_Init") == 0 ||
                         strcmp(r->hb.op, "MPI_Init_thread") == 0)));
}

/* A CPU sample shows progress when it used a tenth of a core or more
 * since the last, taken at least a second before: a rank building its
 * model, importing, loading data. Not a rank waiting in a rendezvous or
 * MPI_Init: what it uses there is the wait's own polling (Open MPI's
 * MPI_Init used 15% of a core here while it waited for a peer that never
 * came), and counting it hid that hang for good. */
#define HB_CPU_WINDOW_S 1.0
#define HB_CPU_BUSY 0.1

void vqc_hb_note_cpu(vqc_hb_rank *r, double cpu_s, double now) {
  if (cpu_s < 0.0) return;
  if (r->cpu_at <= 0.0) {
    r->cpu_s = cpu_s;
    r->cpu_at = now;
    return;
  }
  if (now - r->cpu_at < HB_CPU_WINDOW_S) return;
  if (cpu_s - r->cpu_s >= HB_CPU_BUSY * (now - r->cpu_at)) {
    r->busy_at = now;
    if (r->beaten && r->hb.state == VQC_HB_SETUP && r->since < now)
      r->since = now;
  }
  r->cpu_s = cpu_s;
  r->cpu_at = now;
}

/* When rank r last made progress on the watcher's clock: its own; a rank
 * never beaten counts from the first heartbeat of any, or from when its
 * process was last busy. */
static double last_progress(const vqc_hb_rank *r, double first_beat) {
  if (r->beaten) return r->since; /* vqc_hb_note_cpu moves it */
  return r->busy_at > first_beat ? r->busy_at : first_beat;
}

int vqc_hb_stalled(vqc_hb_rank *r, int n, double now, double timeout,
                   double first_beat, double *idle_s) {
  int worst = -1;
  double most = -1.0;
  /* The job's last progress: a rank setting up is hung only when no rank
   * made progress for the timeout. */
  double job = 0.0;
  for (int i = 0; i < n; i++) {
    if (r[i].ended || (r[i].beaten && r[i].hb.state == VQC_HB_FINISHED))
      continue;
    if (!r[i].beaten && first_beat <= 0.0) continue;
    const double t = last_progress(&r[i], first_beat);
    if (t > job) job = t;
  }
  /* Every rank finished (its end line written) or ended: a process of
   * ours still there, idle for the timeout since its end line, is stuck
   * on its way out (a destructor, an exit handler that waits), and its
   * launcher, and so vqcheck watch, would wait for it for good. Not while
   * another rank still runs (a rank done early waits for nobody), nor
   * for a rank of another machine (its process is not seen). */
  bool all_done = n > 0;
  for (int i = 0; i < n; i++)
    if (!r[i].ended && !(r[i].beaten && r[i].hb.state == VQC_HB_FINISHED))
      all_done = false;
  for (int i = 0; i < n; i++) {
    r[i].stalled = false;
    r[i].idle_s = 0.0;
    if (r[i].ended) continue;
    const bool finished = r[i].beaten && r[i].hb.state == VQC_HB_FINISHED;
    if (finished && (!all_done || r[i].pid <= 0)) continue;
    if (!r[i].beaten && first_beat <= 0.0) continue; /* nobody beat yet */
    const double idle =
        finished ? now - (r[i].busy_at > r[i].since ? r[i].busy_at
                                                    : r[i].since)
        : now - (vqc_hb_setting_up(&r[i]) ? job
                                           : last_progress(&r[i], first_beat));
    /* Told to the millisecond: the message and the detail say the same. */
    r[i].idle_s = idle > 0.0 ? (double)(long long)(idle * 1000.0 + 0.5) / 1000.0
                             : 0.0;
    if (idle < timeout) continue;
    r[i].stalled = true;
    if (idle > most) {
      most = idle;
      worst = i;
    }
  }
  if (idle_s) *idle_s = worst >= 0 ? most : 0.0;
  return worst;
}

int vqc_hb_culprits(vqc_hb_place *p, int n) {
  /* The first of these that holds for any rank names the culprits. */
  int count = 0;
  for (int rule = 0; rule < 4 && count == 0; rule++) {
    for (int i = 0; i < n; i++) {
      bool hit;
      switch (rule) {
      case 0: hit = p[i].stopped; break;
      case 1: hit = p[i].stalled && !p[i].stopped && !p[i].in_collective &&
                    p[i].user_code;
        break;
      case 2: hit = p[i].ended_ok && !p[i].stalled; break;
      default: hit = p[i].stalled; break;
      }
      p[i].culprit = hit;
      count += hit;
    }
  }
  return count;
}

/* ---- the watcher */

bool vqc_hb_watch_init(vqc_hb_watch *w, const char *dir, int nproc) {
  memset(w, 0, sizeof *w);
  w->dir = dir;
  w->nproc = nproc;
  if (gethostname(w->host, sizeof w->host) != 0) w->host[0] = '\0';
  w->host[sizeof w->host - 1] = '\0';
  return true;
}

void vqc_hb_watch_free(vqc_hb_watch *w) {
  if (!w) return;
  free(w->ranks);
  w->ranks = NULL;
  w->n = w->cap = 0;
}

/* Makes ranks 0..n-1 known; false when out of memory (or past the cap). */
static bool grow(vqc_hb_watch *w, int n) {
  if (n > VQC_HB_MAX_RANKS) n = VQC_HB_MAX_RANKS;
  if (n <= w->n) return true;
  if (n > w->cap) {
    int cap = w->cap ? w->cap : 16;
    while (cap < n) cap *= 2;
    if (cap > VQC_HB_MAX_RANKS) cap = VQC_HB_MAX_RANKS;
    vqc_hb_rank *g = realloc(w->ranks, (size_t)cap * sizeof *g);
    if (!g) return false;
    w->ranks = g;
    w->cap = cap;
  }
  for (int i = w->n; i < n; i++) {
    memset(&w->ranks[i], 0, sizeof w->ranks[i]);
    w->ranks[i].rank = i;
    w->ranks[i].exit_code = -1;
    w->ranks[i].stacks0 = -1;
  }
  w->n = n;
  return true;
}

/* Reads rank i's heartbeat, if there is one to trust. */
static void read_rank(vqc_hb_watch *w, int i, double now) {
  char path[4200];
  vqc_heartbeat hb;
  snprintf(path, sizeof path, "%s/rank-%d.heartbeat", w->dir, i);
  if (!vqc_heartbeat_read(path, &hb)) return;
  if (w->first_beat <= 0.0) w->first_beat = now;
  vqc_hb_note(&w->ranks[i], &hb, now);
}

/* With --nproc: rank r's process facts from its process among procs. */
static void nproc_state(vqc_hb_rank *r, const vqc_watch_proc *procs,
                        int nprocs) {
  const vqc_watch_proc *p = NULL;
  for (int i = 0; i < nprocs && !p; i++)
    if (procs[i].rank == r->rank) p = &procs[i];
  if (!p) {
    r->proc = VQC_PROC_UNKNOWN;
    return;
  }
  if (p->exited) {
    r->ended = true;
    r->proc = VQC_PROC_GONE;
    r->letter = '\0';
    r->exit_code = WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
    r->signal = WIFSIGNALED(p->status) ? WTERMSIG(p->status) : 0;
    return;
  }
  /* The Python process: the heartbeat's when it is the rank's process or
   * one of its group (a wrapper's child), else the rank's own. */
  pid_t pid = p->pid;
  if (r->beaten && (pid_t)r->hb.pid != p->pid && r->hb.pid > 0 &&
      getpgid((pid_t)r->hb.pid) == p->pid)
    pid = (pid_t)r->hb.pid;
  r->pid = pid;
  r->proc = vqc_proc_state_of(pid, &r->letter, NULL);
  r->ended = r->proc == VQC_PROC_GONE || r->proc == VQC_PROC_ZOMBIE;
}

/* With a launcher: rank r's process from its heartbeat's pid; the live
 * record's start line (once) tells the machine and the job's size. */
static void launcher_state(vqc_hb_watch *w, vqc_hb_rank *r) {
  if (!r->beaten) {
    r->proc = VQC_PROC_UNKNOWN;
    return;
  }
  if (!r->host_known) {
    vqc_live_info info;
    if (vqc_live_scan(w->dir, r->rank, &info) == VQC_OK && info.started) {
      r->host_known = true;
      r->local = w->host[0] && strcmp(info.host, w->host) == 0;
      if (info.size > w->size) w->size = info.size;
    }
  }
  const pid_t pid = (pid_t)r->hb.pid;
  if (pid > 0 && vqc_proc_is_descendant(pid)) {
    r->pid = pid;
    r->proc = vqc_proc_state_of(pid, &r->letter, NULL);
  } else {
    r->pid = 0;
    r->letter = '\0';
    /* Not ours: ended, if it was of this machine; else unknown (another
     * machine's rank: its heartbeat alone tells). */
    r->proc = r->host_known && r->local &&
                      vqc_proc_state_of(pid, NULL, NULL) == VQC_PROC_GONE
                  ? VQC_PROC_GONE
                  : VQC_PROC_UNKNOWN;
  }
  r->ended = r->proc == VQC_PROC_GONE || r->proc == VQC_PROC_ZOMBIE;
}

void vqc_hb_watch_poll(vqc_hb_watch *w, const vqc_watch_proc *procs,
                       int nprocs, double now) {
  if (w->nproc > 0) {
    if (!grow(w, w->nproc)) return;
  } else {
    /* Every rank that has a heartbeat, and the job's size once known. */
    DIR *d = opendir(w->dir);
    struct dirent *e;
    int top = w->size;
    while (d && (e = readdir(d)) != NULL) {
      int r;
      if (vqc_run_dir_rank_file(e->d_name, ".heartbeat", &r) && r + 1 > top)
        top = r + 1;
    }
    if (d) closedir(d);
    if (!grow(w, top)) return;
  }
  for (int i = 0; i < w->n; i++) {
    vqc_hb_rank *r = &w->ranks[i];
    read_rank(w, i, now); /* an ended rank's last word: finished or not */
    if (w->nproc > 0) nproc_state(r, procs, nprocs);
    else if (!r->ended) launcher_state(w, r);
    /* While it sets up, its CPU use is progress too (the file comment);
     * once finished, it tells a process still tearing down from one stuck
     * on its way out (vqc_hb_stalled). */
    if (!r->ended && r->pid > 0 && r->proc == VQC_PROC_RUNNING &&
        (!r->beaten || vqc_hb_setting_up(r) ||
         r->hb.state == VQC_HB_FINISHED))
      vqc_hb_note_cpu(r, proc_cpu_s(r->pid), now);
  }
  if (w->nproc == 0 && w->size > w->n) (void)grow(w, w->size);
}
