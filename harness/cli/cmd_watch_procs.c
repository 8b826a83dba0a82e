/* cmd_watch_procs.c: the processes of `vqcheck watch`'s job, for the watch
 * loop in cmd_watch.c: each started in a process group of its own with
 * its stderr on a pipe (passed through, its last VQC_WATCH_TAIL_MAX bytes
 * kept in its vqc_watch_proc), signalled as a whole, and at a hang asked
 * for its Python stacks (SIGUSR1), then ended (a stopped one by SIGKILL);
 * and the run directory's rank-<r> files counted. The rules (when a hang
 * is declared, who is asked, the graces): cmd_watch.c's file comment. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd_watch_internal.h"
#include "ledger_analysis.h"
#include "rundir.h"
#include "spawn.h"
#include "supervise.h"
#include "watch_heartbeat.h"
#include "watch_job.h"

/* ---- the run directory */

/* How many rank-<r><suffix> files dir holds; marks seen[r] for r < nseen
 * (seen may be NULL). */
int vqc_cw_count_files(const char *dir, const char *suffix, bool *seen,
                       int nseen) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int r;
    if (!vqc_run_dir_rank_file(e->d_name, suffix, &r)) continue;
    n++;
    if (seen && r < nseen) seen[r] = true;
  }
  closedir(d);
  return n;
}

/* The lowest rank with a rank-<r><suffix> file in dir; -1 when none. */
int vqc_cw_lowest_rank_file(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int low = -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int r;
    if (vqc_run_dir_rank_file(e->d_name, suffix, &r) && (low < 0 || r < low))
      low = r;
  }
  closedir(d);
  return low;
}

/* ---- the job's processes */

/* Appends n bytes to p's kept stderr, keeping the last VQC_WATCH_TAIL_MAX. */
static void tail_append(vqc_watch_proc *p, const char *b, size_t n) {
  if (n >= VQC_WATCH_TAIL_MAX) {
    memcpy(p->tail, b + (n - VQC_WATCH_TAIL_MAX), VQC_WATCH_TAIL_MAX);
    p->ntail = VQC_WATCH_TAIL_MAX;
    return;
  }
  if (p->ntail + n > VQC_WATCH_TAIL_MAX) {
    size_t drop = p->ntail + n - VQC_WATCH_TAIL_MAX;
    memmove(p->tail, p->tail + drop, p->ntail - drop);
    p->ntail -= drop;
  }
  memcpy(p->tail + p->ntail, b, n);
  p->ntail += n;
}

static void write_all(int fd, const char *b, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return; /* our stderr is gone: the tail is still kept */
    b += w;
    n -= (size_t)w;
  }
}

/* Reads what p's stderr pipe holds: to our stderr and its tail. */
static void pump(vqc_watch_proc *p) {
  char buf[65536];
  ssize_t n = read(p->err_fd, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close(p->err_fd);
    p->err_fd = -1;
    return;
  }
  write_all(STDERR_FILENO, buf, (size_t)n);
  tail_append(p, buf, (size_t)n);
}

/* Polls every open stderr pipe for up to ms; reads what is there. */
void vqc_cw_pump_all(vqc_watch_proc *procs, int n, int ms) {
  struct pollfd fds[VQC_CW_MAX_NPROC];
  int idx[VQC_CW_MAX_NPROC], k = 0;
  for (int i = 0; i < n; i++) {
    if (procs[i].err_fd < 0) continue;
    fds[k].fd = procs[i].err_fd;
    fds[k].events = POLLIN;
    fds[k].revents = 0;
    idx[k++] = i;
  }
  if (k == 0) {
    struct timespec nap = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&nap, NULL);
    return;
  }
  if (poll(fds, (nfds_t)k, ms) <= 0) return;
  for (int j = 0; j < k; j++)
    if (fds[j].revents & (POLLIN | POLLHUP | POLLERR)) pump(&procs[idx[j]]);
}

/* Sends sig to the process group of every process still running, noting
 * that vqcheck stopped them. */
void vqc_cw_signal_all(vqc_watch_proc *procs, int n, int sig) {
  for (int i = 0; i < n; i++) {
    if (procs[i].exited) continue;
    procs[i].stopped = true;
    kill(-procs[i].pid, sig);
  }
}

/* rank-<r>.stacks.txt's size in dir, -1 when there is none. */
static long long stacks_size(const char *dir, int r) {
  char path[4200];
  struct stat st;
  snprintf(path, sizeof path, "%s/rank-%d.stacks.txt", dir, r);
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (long long)st.st_size
                                                      : -1;
}

/* With --nproc, at the first hang marker: asks every rank still running
 * that has written no marker where it is, by SIGUSR1 to its process alone
 * (not the group: a DataLoader worker need not answer), whose bridge then
 * appends every thread's Python stack to rank-<r>.stacks.txt. Only a rank
 * whose live record shows the bridge loaded, and to the process the record
 * names when that is the rank's process or one of its group (a wrapper's
 * Python child); another would die of SIGUSR1 (what became of each rank:
 * p->at_hang). A rank found stopped is not sent it (AT_HANG_STOPPED). A
 * launcher is never sent it; with hb (a hang from the heartbeats), a
 * launcher's ranks are, by their heartbeat's pid (below). */
void vqc_cw_ask_for_stacks(const char *dir, vqc_watch_proc *procs, int n,
                           vqc_hb_watch *hb) {
  for (int i = 0; i < n; i++) {
    vqc_watch_proc *p = &procs[i];
    if (p->rank < 0) continue;
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/rank-%d.hang", dir, p->rank);
    vqc_live_info info;
    if (p->exited) {
      p->at_hang = VQC_WATCH_AT_HANG_ENDED;
    } else if (lstat(path, &st) == 0) {
      p->at_hang = VQC_WATCH_AT_HANG_MARKED;
    } else if (vqc_live_scan(dir, p->rank, &info) != VQC_OK ||
               !info.exists) {
      p->at_hang = VQC_WATCH_AT_HANG_NO_BRIDGE;
    } else if (info.finished) {
      p->at_hang = VQC_WATCH_AT_HANG_FINISHED;
    } else {
      pid_t target = p->pid;
      if (info.pid > 0 && (pid_t)info.pid != p->pid) {
        const pid_t g = getpgid((pid_t)info.pid);
        target = g == p->pid ? (pid_t)info.pid : 0;
      }
      p->stacks_size0 = stacks_size(dir, p->rank);
      char letter = '\0';
      if (target > 0 && vqc_proc_state_of(target, &letter, NULL) ==
                            VQC_PROC_STOPPED) {
        /* It cannot answer; the signal would wait for a SIGCONT. */
        p->at_hang = VQC_WATCH_AT_HANG_STOPPED;
        p->stop_letter = letter;
      } else if (target > 0 && kill(target, SIGUSR1) == 0) {
        p->at_hang = VQC_WATCH_AT_HANG_ASKED;
        p->asked_pid = target;
        if (hb && p->rank < hb->n) {
          hb->ranks[p->rank].asked = true;
          hb->ranks[p->rank].stacks0 = p->stacks_size0;
        }
      } else {
        p->at_hang = VQC_WATCH_AT_HANG_NO_BRIDGE;
      }
    }
  }
  /* A launcher's ranks: those whose heartbeat names a process of ours that
   * is neither stopped nor ended (its bridge set up the stack dump before
   * it wrote its first heartbeat). The launcher itself never. */
  for (int r = 0; hb && hb->nproc == 0 && r < hb->n; r++) {
    vqc_hb_rank *h = &hb->ranks[r];
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/rank-%d.hang", dir, r);
    if (!h->beaten || h->ended || h->pid <= 0 ||
        h->hb.state == VQC_HB_FINISHED || lstat(path, &st) == 0 ||
        !vqc_proc_is_descendant(h->pid) ||
        vqc_proc_state_of(h->pid, NULL, NULL) != VQC_PROC_RUNNING)
      continue;
    h->stacks0 = stacks_size(dir, r);
    h->asked = kill(h->pid, SIGUSR1) == 0;
  }
}

/* Once the job is to stop: a process that is stopped (process state T)
 * cannot act on SIGTERM before a SIGCONT, so every group holding one gets
 * SIGKILL now, and so does a launcher's stopped rank (our descendant): the
 * job ends within the grace instead of after it. */
void vqc_cw_kill_stopped(vqc_watch_proc *procs, int n,
                         const vqc_hb_watch *hb) {
  for (int i = 0; i < n; i++) {
    vqc_watch_proc *p = &procs[i];
    if (p->exited) continue;
    bool stopped = vqc_proc_state_of(p->pid, NULL, NULL) == VQC_PROC_STOPPED;
    for (int r = 0; !stopped && hb && r < hb->n; r++) {
      const pid_t pid = hb->ranks[r].pid;
      stopped = pid > 0 && pid != p->pid && getpgid(pid) == p->pid &&
                vqc_proc_state_of(pid, NULL, NULL) == VQC_PROC_STOPPED;
    }
    if (stopped) {
      p->stopped = true;
      kill(-p->pid, SIGKILL);
    }
  }
  for (int r = 0; hb && hb->nproc == 0 && r < hb->n; r++) {
    const pid_t pid = hb->ranks[r].pid;
    if (pid > 0 && vqc_proc_state_of(pid, NULL, NULL) == VQC_PROC_STOPPED &&
        vqc_proc_is_descendant(pid))
      kill(pid, SIGKILL);
  }
}

/* After vqc_cw_ask_for_stacks: whether every rank has told where it is
 * (its hang marker, or stacks grown since it was asked), or never will (it
 * ended, or was not asked). hung: scratch, one per rank. With a hang
 * decided from the heartbeats (hb_hang), a rank hung in a collective the
 * bridge sees writes its marker about now (its deadline is the same): it
 * is waited for, so that the marker's account (which collective, since
 * when) is the one reported. */
bool vqc_cw_all_placed(const char *dir, const vqc_watch_proc *procs,
                       int n, bool *hung, int nproc,
                       const vqc_hb_watch *hb, bool hb_hang) {
  if (hung) {
    memset(hung, 0, (size_t)nproc * sizeof *hung);
    vqc_cw_count_files(dir, ".hang", hung, nproc);
  }
  for (int i = 0; hung && i < n; i++) {
    const vqc_watch_proc *p = &procs[i];
    if (p->rank < 0 || p->rank >= nproc || p->exited || hung[p->rank])
      continue;
    if (p->at_hang == VQC_WATCH_AT_HANG_ASKED &&
        stacks_size(dir, p->rank) <= p->stacks_size0)
      return false;
    if (p->at_hang == VQC_WATCH_AT_HANG_NONE) return false;
  }
  for (int r = 0; hb_hang && r < hb->n; r++) {
    const vqc_hb_rank *h = &hb->ranks[r];
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/rank-%d.hang", dir, r);
    if (h->ended || h->proc == VQC_PROC_STOPPED || lstat(path, &st) == 0)
      continue;
    if (h->stalled && h->hb.state == VQC_HB_IN_COLLECTIVE) return false;
    if (hb->nproc == 0 && h->asked && stacks_size(dir, r) <= h->stacks0)
      return false;
  }
  return true;
}

/* Starts process i of the job (rank, or -1 for a launcher) with its stderr
 * on a pipe. 0, or the errno of the failure (pipe, fork, or the exec
 * itself, which vqc_spawn reports back). */
int vqc_cw_start_proc(const vqc_watch_opts *o, vqc_watch_proc *p,
                      int rank, int port) {
  int errp[2];
  if (pipe(errp) != 0) return errno;
  /* Close-on-exec: no other process of the job holds another's pipe (its
   * EOF then means its end). */
  for (int k = 0; k < 2; k++) fcntl(errp[k], F_SETFD, FD_CLOEXEC);
  /* A rank's environment as torchrun gives it. */
  char v_rank[32], v_local[32], v_world[32], v_lworld[32], v_port[32];
  snprintf(v_rank, sizeof v_rank, "RANK=%d", rank);
  snprintf(v_local, sizeof v_local, "LOCAL_RANK=%d", rank);
  snprintf(v_world, sizeof v_world, "WORLD_SIZE=%d", o->nproc);
  snprintf(v_lworld, sizeof v_lworld, "LOCAL_WORLD_SIZE=%d", o->nproc);
  snprintf(v_port, sizeof v_port, "MASTER_PORT=%d", port);
  const char *const env[] = {v_rank,  v_local, v_world, v_lworld,
                             "MASTER_ADDR=127.0.0.1", v_port, NULL};
  static const int dfl[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, 0};
  /* Should vqcheck be killed outright, the job hears of it
   * (die_with_parent). With --json our stdout is run.json: the job's goes
   * to our stderr. */
  const vqc_spawn_opts so = {.argv = o->cmd_argv,
                             .die_with_parent = true,
                             .default_signals = dfl,
                             .stdin_null = true,
                             .stdout_fd = o->json ? STDERR_FILENO : 0,
                             .stderr_fd = errp[1],
                             .env = rank >= 0 ? env : NULL,
                             .report_exec = true};
  pid_t pid;
  int st = 0;
  int e = vqc_spawn(&so, &pid, &st);
  close(errp[1]);
  if (pid < 0) {
    close(errp[0]);
    return e;
  }
  p->pid = pid;
  p->rank = rank;
  p->err_fd = errp[0];
  if (e != 0) {
    p->exited = true;
    p->status = st;
    close(p->err_fd);
    p->err_fd = -1;
  }
  return e;
}
