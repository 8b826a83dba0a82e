/* rundir.c: run directory preparation (ownership marker, lock, clearing
 * only what vqcheck writes) and the common part of run.json (see
 * rundir.h). */
#include "rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "utf8.h"
#include "vqc/fsutil.h"
#include "vqc/version.h"

/* ---- the directory */

void vqc_run_default_dir(const char *name, char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  snprintf(buf, n, "vqcheck-runs/%s-%s", name, stamp);
}

void vqc_run_dir_choose(const char *wanted, const char *name, char *buf,
                        size_t n) {
  if (wanted && wanted[0]) {
    snprintf(buf, n, "%s", wanted);
    return;
  }
  char base[2048];
  vqc_run_default_dir(name, base, sizeof base);
  snprintf(buf, n, "%s", base);
  struct stat st;
  for (int k = 2; stat(buf, &st) == 0 && k < 1000; k++)
    snprintf(buf, n, "%s-%d", base, k);
}

/* ---- ownership and clearing */

/* The files of a run besides the rank-<r> ones (rundir.h). */
static const char *const run_files[] = {"run.json", "report.md",
                                        "report.html", "junit.xml"};

/* What follows "rank-<r>." in a rank file (trace.h, ledger_analysis.h,
 * harness/run/bridge_findings.h): the digest trace, the ledger dumps, the Python
 * bridge's findings, hang marker and stack dumps, the status dump, the live
 * ledger, the heartbeat (harness/run/watch_heartbeat.h: an earlier run's
 * would read as a rank that beat long ago), the MPI interposer's message
 * counts (harness/run/p2p_messages.h) and its mark that it loaded. */
static const char *const rank_suffixes[] = {"trace.jsonl", "ledger.jsonl",
                                            "findings.jsonl", "hang", "stacks.txt",
                                            "status.json", "live.jsonl",
                                            "heartbeat", "p2p.jsonl",
                                            "rma.jsonl", "preloaded"};

/* The length of the plain decimal number at s ("0", "17"; not "01", not
 * "+1"), 0 when s does not start with one. */
static size_t decimal_len(const char *s) {
  size_t i = 0;
  while (s[i] >= '0' && s[i] <= '9') i++;
  if (i > 1 && s[0] == '0') return 0;
  return i;
}

bool vqc_run_dir_rank_file(const char *name, const char *suffix, int *rank) {
  if (strncmp(name, "rank-", 5) != 0) return false;
  const size_t d = decimal_len(name + 5);
  if (d == 0 || d > 6 || strcmp(name + 5 + d, suffix) != 0) return false;
  *rank = atoi(name + 5); /* at most 6 digits: < 1000000 */
  return true;
}

static int cmp_rank(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

vqc_status vqc_run_dir_rank_list(const char *dir, const char *suffix,
                                 int **ranks, int *n) {
  *ranks = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return vqc_error(VQC_EIO, "cannot read %s: %s", dir,
                           strerror(errno));
  int cap = 0;
  vqc_status s = VQC_OK;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int r;
    if (!vqc_run_dir_rank_file(e->d_name, suffix, &r)) continue;
    if (*n == cap) {
      const int ncap = cap ? 2 * cap : 16;
      int *g = realloc(*ranks, (size_t)ncap * sizeof *g);
      if (!g) {
        s = vqc_error(VQC_ENOMEM, "no memory to list %s", dir);
        break;
      }
      *ranks = g;
      cap = ncap;
    }
    (*ranks)[(*n)++] = r;
  }
  closedir(d);
  if (s == VQC_OK && *n > 1) qsort(*ranks, (size_t)*n, sizeof **ranks, cmp_rank);
  if (s != VQC_OK) {
    free(*ranks);
    *ranks = NULL;
    *n = 0;
  }
  return s;
}

int vqc_run_dir_rank_span(const char *dir, const char *suffix) {
  int *ranks = NULL, n = 0;
  if (vqc_run_dir_rank_list(dir, suffix, &ranks, &n) != VQC_OK) return 0;
  const int span = n > 0 ? ranks[n - 1] + 1 : 0;
  free(ranks);
  return span;
}

/* Whether s is "" or ".tmp.<pid>" (vqc/fsutil.h's temporaries). */
static bool is_end_or_temp(const char *s) {
  if (s[0] == '\0') return true;
  if (strncmp(s, ".tmp.", 5) != 0) return false;
  const size_t l = decimal_len(s + 5);
  return l > 0 && s[5 + l] == '\0';
}

/* Whether `name` (a directory entry) is one vqc_run_dir_clear removes:
 * exactly the names the writers make, and their temporaries. */
static bool is_run_file(const char *name) {
  for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
    const size_t l = strlen(run_files[i]);
    if (strncmp(name, run_files[i], l) == 0 && is_end_or_temp(name + l))
      return true;
  }
  if (strncmp(name, "rank-", 5) != 0) return false;
  const size_t d = decimal_len(name + 5);
  if (d == 0 || name[5 + d] != '.') return false;
  const char *rest = name + 5 + d + 1;
  for (size_t i = 0; i < sizeof rank_suffixes / sizeof rank_suffixes[0];
       i++) {
    const size_t l = strlen(rank_suffixes[i]);
    if (strncmp(rest, rank_suffixes[i], l) == 0 && is_end_or_temp(rest + l))
      return true;
  }
  return false;
}

/* vqcheck's bookkeeping in a run directory: the lock file and an
 * interrupted write of the marker (the marker itself is checked apart). */
static bool is_bookkeeping(const char *name) {
  static const char marker[] = VQC_RUN_DIR_MARKER;
  if (strcmp(name, VQC_RUN_DIR_LOCK) == 0 ||
      strcmp(name, VQC_RUN_DIR_WRITTEN) == 0)
    return true;
  return strncmp(name, marker, sizeof marker - 1) == 0 &&
         name[sizeof marker - 1] != '\0' &&
         is_end_or_temp(name + sizeof marker - 1);
}

/* "<dir>/<name>" into buf; VQC_EINVAL when it does not fit. */
static vqc_status join(const char *dir, const char *name, char *buf,
                       size_t n) {
  int k = snprintf(buf, n, "%s/%s", dir, name);
  if (k < 0 || (size_t)k >= n)
    return vqc_error(VQC_EINVAL, "run directory path too long: %.200s...",
                     dir);
  return VQC_OK;
}

/* Whether dir holds the marker as a regular file (a link of that name is
 * not vqcheck's). */
static bool has_marker(const char *dir) {
  char path[4200];
  struct stat st;
  return join(dir, VQC_RUN_DIR_MARKER, path, sizeof path) == VQC_OK &&
         lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

vqc_status vqc_run_dir_check(const char *dir) {
  if (!dir || !dir[0])
    return vqc_error(VQC_EINVAL, "no run directory given (an empty name): "
                     "pass a new or empty directory");
  DIR *d = opendir(dir);
  if (!d) return vqc_error(VQC_EIO, "cannot read %s: %s", dir, strerror(errno));
  char found[256] = "";
  bool marked = false;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    if (strcmp(name, VQC_RUN_DIR_MARKER) == 0) {
      marked = has_marker(dir);
      if (!marked && !found[0]) snprintf(found, sizeof found, "%s", name);
      continue;
    }
    if (is_bookkeeping(name)) continue;
    if (!found[0]) snprintf(found, sizeof found, "%s", name);
  }
  closedir(d);
  if (marked || !found[0]) return VQC_OK;
  return vqc_error(VQC_EINVAL, "refusing to use %s as a run directory: it is "
                   "not empty and vqcheck did not create it (found %s); pass "
                   "a new or empty directory (an older vqcheck's run "
                   "directory has no %s: remove it yourself)",
                   dir, found, VQC_RUN_DIR_MARKER);
}

/* Whether `name` is a line of `list` (a VQC_RUN_DIR_WRITTEN file's text). */
static bool listed(const char *list, const char *name) {
  const size_t l = strlen(name);
  for (const char *p = list; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (strncmp(p, name, l) == 0 && (p[l] == '\n' || p[l] == '\0'))
      return true;
  return false;
}

vqc_status vqc_run_dir_claim_outputs(const char *dir,
                                     const char *const *names, size_t n) {
  if (vqc_run_dir_check(dir) == VQC_OK) return VQC_OK;
  char path[4200];
  VQC_TRY(join(dir, VQC_RUN_DIR_WRITTEN, path, sizeof path));
  /* The list so far; a link or an oversized file of that name is not
   * ours (a list of a few report names is a few dozen bytes). */
  char list[4096] = "";
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (S_ISLNK(st.st_mode))
      return vqc_error(VQC_EINVAL, "refusing to write through the link %s: "
                       "remove it (vqcheck never follows links in a run "
                       "directory)", path);
    /* O_NOFOLLOW: a link put there since the lstat is not read either. */
    const int fd = S_ISREG(st.st_mode) && st.st_size < (off_t)sizeof list
                       ? open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
                       : -1;
    const ssize_t got = fd >= 0 ? read(fd, list, sizeof list - 1) : -1;
    if (fd >= 0) close(fd);
    if (got < 0)
      return vqc_error(VQC_EIO, "cannot read %s (vqcheck's list of the files "
                       "it wrote there)", path);
    list[got] = '\0';
  }
  size_t used = strlen(list);
  for (size_t i = 0; i < n; i++) {
    char file[4200];
    VQC_TRY(join(dir, names[i], file, sizeof file));
    const bool ours = listed(list, names[i]);
    if (!ours && lstat(file, &st) == 0)
      return vqc_error(VQC_EINVAL, "refusing to write into %s: %s is there "
                       "and vqcheck did not write it; move it away (or, for "
                       "compare, pass another --out)", dir, file);
    if (!ours) {
      const int w = snprintf(list + used, sizeof list - used, "%s\n",
                             names[i]);
      if (w < 0 || (size_t)w >= sizeof list - used)
        return vqc_error(VQC_EINVAL, "too many names for %s", path);
      used += (size_t)w;
    }
  }
  return vqc_write_file_atomic(path, list, used);
}

/* The holder's line for the lock file: "pid 1234 (vqcheck suite, started
 * 2026-11-24T03:30:00Z, host h)". The command is this process's program
 * name and first argument, from /proc (no caller has to say). */
static void holder_line(char *buf, size_t n) {
  char cmd[256] = "";
  FILE *f = fopen("/proc/self/cmdline", "rb");
  if (f) {
    char raw[512];
    const size_t got = fread(raw, 1, sizeof raw - 1, f);
    fclose(f);
    raw[got] = '\0';
    const char *prog = raw, *slash = strrchr(prog, '/');
    if (slash) prog = slash + 1;
    const size_t l0 = strlen(raw);
    const char *arg = l0 + 1 < got ? raw + l0 + 1 : "";
    snprintf(cmd, sizeof cmd, "%.100s%s%.100s", prog, arg[0] ? " " : "",
             arg);
    for (char *p = cmd; *p; p++)
      if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
  }
  if (!cmd[0]) snprintf(cmd, sizeof cmd, "vqcheck");
  char when[64], host[256] = "";
  vqc_run_json_time(when, sizeof when);
  gethostname(host, sizeof host - 1);
  snprintf(buf, n, "pid %ld (%s, started %s, host %.100s)", (long)getpid(),
           cmd, when, host);
}

/* Writes the marker into dir unless it is there: whole, and made by one
 * process only (vqc_write_file_new: a fully written temporary, link()ed;
 * of several processes marking dir at once, one makes it and none
 * replaces it). Something else of that name (a link) stays as it is and is
 * refused by vqc_run_dir_check. */
static vqc_status mark(const char *dir) {
  if (has_marker(dir)) return VQC_OK;
  char path[4200], holder[512], text[2048];
  VQC_TRY(join(dir, VQC_RUN_DIR_MARKER, path, sizeof path));
  holder_line(holder, sizeof holder);
  int k = snprintf(
      text, sizeof text,
      "vqcheck run directory, made by vqcheck %s: %s.\n"
      "vqcheck uses a non-empty directory only when this file is in it, and\n"
      "removes from it only the files it writes (run.json, report.md,\n"
      "report.html, junit.xml, rank-<r>.trace.jsonl, rank-<r>.ledger.jsonl,\n"
      "rank-<r>.status.json, rank-<r>.live.jsonl, rank-<r>.findings.jsonl,\n"
      "rank-<r>.stacks.txt, rank-<r>.hang, rank-<r>.heartbeat,\n"
      "rank-<r>.p2p.jsonl, rank-<r>.rma.jsonl, rank-<r>.preloaded);\n"
      "everything else here is left alone.\n",
      VQC_VERSION_STRING, holder);
  bool made = false;
  return vqc_write_file_new(path, text, (size_t)(k > 0 ? k : 0), &made);
}

/* ---- the lock */

/* The run directory locks this process holds. A handful at most (the
 * suite's base, a scenario's directory while it is cleared). */
#define MAX_HELD 64
typedef struct held_lock {
  int fd;         /* the locked lock file; -1: free slot */
  int holds;      /* vqc_run_dir_lock calls not yet given back */
  dev_t dev;      /* the lock file's identity: the same directory by */
  ino_t ino;      /* another path is the same lock */
} held_lock;
static held_lock held[MAX_HELD];
static int nheld = 0;
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;

/* The slot of the lock file (dev, ino) this process holds, or NULL. Called
 * with held_mu held. */
static held_lock *find_held(dev_t dev, ino_t ino) {
  for (int i = 0; i < nheld; i++)
    if (held[i].fd >= 0 && held[i].dev == dev && held[i].ino == ino)
      return &held[i];
  return NULL;
}

/* The holder named in an open lock file, for the refusal ("" when it has
 * not written itself yet). */
static void read_holder(int fd, char *buf, size_t n) {
  ssize_t got = pread(fd, buf, n - 1, 0);
  buf[got > 0 ? got : 0] = '\0';
  for (char *p = buf; *p; p++) {
    if (*p == '\n') {
      *p = '\0';
      break;
    }
    if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
  }
}

static vqc_status busy(const char *dir, int fd) {
  char who[512];
  read_holder(fd, who, sizeof who);
  return vqc_error(VQC_EINVAL, "%s is in use by %s; wait for it to end or "
                   "pass another --out", dir,
                   who[0] ? who : "another vqcheck process");
}

/* Whether path still names the file (dev, ino): a lock taken on a lock
 * file that vqc_run_dir_abandon unlinked meanwhile locks nothing. */
static bool still_named(const char *path, const struct stat *st) {
  struct stat now;
  return lstat(path, &now) == 0 && now.st_dev == st->st_dev &&
         now.st_ino == st->st_ino;
}

vqc_status vqc_run_dir_lock(const char *dir) {
  char path[4200];
  VQC_TRY(join(dir, VQC_RUN_DIR_LOCK, path, sizeof path));
  /* A few tries: each retry means another process abandoned the
   * directory (and unlinked its lock file) between our open and flock. */
  for (int attempt = 0; attempt < 8; attempt++) {
    /* O_CLOEXEC: a child (the suite's `vqcheck run`, mpiexec) must not
     * keep the lock alive after this process ends. O_NOFOLLOW: a link of
     * that name is not ours to write through. */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      const int e = errno;
      if (e == ELOOP)
        return vqc_error(VQC_EINVAL, "refusing to write through the link "
                         "%s: remove it (vqcheck never follows links in a "
                         "run directory)", path);
      return vqc_error(VQC_EIO, "cannot create the lock file %s: %s", path,
                       strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return vqc_error(VQC_EIO, "the lock file %s is not a regular file",
                       path);
    }
    pthread_mutex_lock(&held_mu);
    held_lock *h = find_held(st.st_dev, st.st_ino);
    if (h) {
      /* Already ours: a second flock on another descriptor would conflict
       * with our own. */
      h->holds++;
      pthread_mutex_unlock(&held_mu);
      close(fd);
      return VQC_OK;
    }
    vqc_status s = VQC_OK;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      s = errno == EWOULDBLOCK
              ? busy(dir, fd)
              : vqc_error(VQC_EIO, "cannot lock %s: %s", path,
                          strerror(errno));
    } else if (!still_named(path, &st)) {
      pthread_mutex_unlock(&held_mu);
      close(fd); /* an unlinked file's lock: try the one there now */
      continue;
    } else {
      char line[600];
      holder_line(line, sizeof line);
      strncat(line, "\n", sizeof line - strlen(line) - 1);
      const size_t l = strlen(line);
      if (ftruncate(fd, 0) != 0 || pwrite(fd, line, l, 0) != (ssize_t)l)
        s = vqc_error(VQC_EIO, "cannot write the lock file %s: %s", path,
                      strerror(errno));
    }
    if (s == VQC_OK) {
      int slot = -1;
      for (int i = 0; i < nheld && slot < 0; i++)
        if (held[i].fd < 0) slot = i;
      if (slot < 0 && nheld < MAX_HELD) slot = nheld++;
      if (slot < 0)
        s = vqc_error(VQC_EINVAL, "more than %d run directories locked at "
                      "once by this process: give back those it is done "
                      "with (vqc_run_dir_unlock, vqc_run_result_free)",
                      MAX_HELD);
      else
        held[slot] = (held_lock){fd, 1, st.st_dev, st.st_ino};
    }
    pthread_mutex_unlock(&held_mu);
    if (s != VQC_OK) close(fd); /* releases the flock if it was taken */
    return s;
  }
  return vqc_error(VQC_EINVAL, "%s is being set up and removed by other "
                   "vqcheck processes (its lock file was replaced 8 times "
                   "while this one took it); wait for them to end or pass "
                   "another --out", dir);
}

void vqc_run_dir_unlock(const char *dir) {
  char path[4200];
  struct stat st;
  if (!dir || join(dir, VQC_RUN_DIR_LOCK, path, sizeof path) != VQC_OK ||
      lstat(path, &st) != 0)
    return;
  pthread_mutex_lock(&held_mu);
  held_lock *h = find_held(st.st_dev, st.st_ino);
  if (h && --h->holds == 0) {
    /* The holder's line goes with the lock, so a later reader never takes
     * an ended process for the holder. */
    if (ftruncate(h->fd, 0) != 0) { /* the lock is released anyway */
    }
    close(h->fd);
    h->fd = -1;
  }
  pthread_mutex_unlock(&held_mu);
}

/* VQC_OK unless another process holds dir's lock (VQC_EINVAL naming it).
 * Takes nothing and creates no lock file. */
static vqc_status not_in_use(const char *dir) {
  char path[4200];
  VQC_TRY(join(dir, VQC_RUN_DIR_LOCK, path, sizeof path));
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return VQC_OK; /* no lock file: nobody ever locked it */
  struct stat st;
  vqc_status s = VQC_OK;
  if (fstat(fd, &st) == 0) {
    pthread_mutex_lock(&held_mu);
    const bool ours = find_held(st.st_dev, st.st_ino) != NULL;
    pthread_mutex_unlock(&held_mu);
    if (!ours) {
      if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        s = busy(dir, fd);
      /* else free: closing the descriptor gives the probe back */
    }
  }
  close(fd);
  return s;
}

/* VQC_EINVAL naming the first symbolic link in dir at a name vqcheck
 * writes (is_run_file): it would be written through (or replaced). The
 * run is refused before anything is removed or written (vqc/fsutil.h
 * "Links"). A directory of such a name is left to the write, which fails
 * with the system's reason (an I/O error, exit 3). */
static vqc_status no_link_at_run_names(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return vqc_error(VQC_EIO, "cannot read %s: %s", dir, strerror(errno));
  struct dirent *e;
  vqc_status s = VQC_OK;
  while ((e = readdir(d)) != NULL && s == VQC_OK) {
    if (!is_run_file(e->d_name)) continue;
    char path[8192]; /* dir (< 4096) + "/" + a file name (< 256) */
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
      s = vqc_error(VQC_EINVAL, "refusing to write through the link %s: "
                    "remove it (vqcheck never follows links in a run "
                    "directory)", path);
  }
  closedir(d);
  return s;
}

vqc_status vqc_run_dir_clear(const char *dir) {
  VQC_TRY(vqc_run_dir_check(dir));
  VQC_TRY(not_in_use(dir));
  VQC_TRY(no_link_at_run_names(dir));
  VQC_TRY(mark(dir));
  DIR *d = opendir(dir);
  if (!d) return vqc_error(VQC_EIO, "cannot read %s: %s", dir, strerror(errno));
  struct dirent *e;
  vqc_status s = VQC_OK;
  while ((e = readdir(d)) != NULL && s == VQC_OK) {
    if (!is_run_file(e->d_name) &&
        !(is_bookkeeping(e->d_name) &&
          strcmp(e->d_name, VQC_RUN_DIR_LOCK) != 0))
      continue;
    char path[8192]; /* dir (< 4096) + "/" + a file name (< 256) */
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    /* lstat: a link or a directory of that name is not ours to remove. */
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && unlink(path) != 0 &&
        errno != ENOENT)
      s = vqc_error(VQC_EIO, "cannot remove the stale %s: %s", path,
                    strerror(errno));
  }
  closedir(d);
  return s;
}

vqc_status vqc_run_dir_make(const char *dir, bool *created) {
  *created = false;
  char parent[4096];
  const int n = snprintf(parent, sizeof parent, "%s", dir ? dir : "");
  if (n <= 0 || (size_t)n >= sizeof parent)
    return vqc_error(VQC_EINVAL, "run directory name empty or too long: "
                     "%.200s", dir ? dir : "(null)");
  /* The parents as mkdir -p makes them; dir itself by one mkdir(2), which
   * of several processes exactly one wins. */
  size_t l = (size_t)n;
  while (l > 1 && parent[l - 1] == '/') parent[--l] = '\0';
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) {
    *slash = '\0';
    VQC_TRY(vqc_mkdir_p(parent));
  }
  if (mkdir(dir, 0777) == 0) {
    *created = true;
    return VQC_OK;
  }
  if (errno != EEXIST)
    return vqc_error(VQC_EIO, "cannot create %s: %s", dir, strerror(errno));
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return vqc_error(VQC_EIO, "%s exists and is not a directory", dir);
  return VQC_OK;
}

/* Whether dir holds anything but the marker, the lock file and their
 * temporaries (is_bookkeeping): the files of a run that used it. True too
 * when it cannot be read (then nothing is removed). */
static bool holds_more_than_bookkeeping(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return true;
  bool more = false;
  struct dirent *e;
  while (!more && (e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    if (strcmp(name, VQC_RUN_DIR_MARKER) == 0) continue;
    /* The list of a foreign directory's outputs is no bookkeeping here. */
    more = !is_bookkeeping(name) || strcmp(name, VQC_RUN_DIR_WRITTEN) == 0;
  }
  closedir(d);
  return more;
}

void vqc_run_dir_abandon(const char *dir) {
  char lock[4200], marker[4200];
  if (!dir || join(dir, VQC_RUN_DIR_LOCK, lock, sizeof lock) != VQC_OK ||
      join(dir, VQC_RUN_DIR_MARKER, marker, sizeof marker) != VQC_OK)
    return;
  /* The lock, held: this process's own hold, or one taken now. Another
   * process holding it owns the directory now: nothing is touched. */
  pthread_mutex_lock(&held_mu);
  int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  struct stat st;
  held_lock *h = NULL;
  bool locked = false;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    h = find_held(st.st_dev, st.st_ino);
    locked = h != NULL || (flock(fd, LOCK_EX | LOCK_NB) == 0 &&
                           still_named(lock, &st));
  }
  /* With the lock: a directory that only holds what this process put
   * there loses the marker, then the lock file (while still locked, so a
   * process that opened it meanwhile is refused, and one that comes after
   * makes a lock file of its own), then itself. A directory some run wrote
   * into (its run.json, its reports) keeps its marker: it is that run's. */
  if (locked && !holds_more_than_bookkeeping(dir)) {
    struct stat m;
    if (lstat(marker, &m) == 0 && S_ISREG(m.st_mode)) unlink(marker);
    unlink(lock);
    if (rmdir(dir) != 0) {
      /* Someone came in since: it marks the directory itself (clear). */
    }
  }
  if (h) {
    close(h->fd);
    h->fd = -1;
    h->holds = 0;
  }
  if (fd >= 0) close(fd);
  pthread_mutex_unlock(&held_mu);
}

vqc_status vqc_run_dir_prepare(const char *dir) {
  VQC_TRY(vqc_mkdir_p(dir));
  /* Before the lock file is made: a directory that is not vqcheck's gets
   * nothing written into it. */
  VQC_TRY(vqc_run_dir_check(dir));
  VQC_TRY(vqc_run_dir_lock(dir));
  vqc_status s = vqc_run_dir_clear(dir);
  if (s != VQC_OK) vqc_run_dir_unlock(dir);
  return s;
}

/* ---- run.json */

void vqc_run_json_time(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* A JSON string of s, valid UTF-8 whatever s holds (a host name or a
 * message can be anything; jansson refuses what is not UTF-8, and the
 * field would then be missing): utf8.h, bytes replaced by '?' and, with
 * `say`, the text ending in VQC_UTF8_NOTE_TEXT then. s NULL: "". */
static json_t *text_or_empty(const char *s, bool say) {
  return vqc_json_text_opts(s, s ? strlen(s) : 0, say ? VQC_UTF8_NOTE : 0,
                            NULL);
}

json_t *vqc_run_json_new(json_t *head, const vqc_run_json_info *info) {
  json_t *j = json_object();
  json_object_set_new(j, "schema_version", json_integer(VQC_RUN_JSON_SCHEMA));
  if (head) {
    json_object_update(j, head); /* keeps head's order */
    json_decref(head);
  }

  char host[256] = "";
  gethostname(host, sizeof host - 1);
  json_t *env = json_object();
  json_object_set_new(env, "hostname", text_or_empty(host, false));
  /* run.json's readers need a backend: none given is "unknown". */
  json_object_set_new(env, "backend",
                      text_or_empty(info->backend && info->backend[0]
                                        ? info->backend
                                        : "unknown",
                                    false));
  if (info->device)
    json_object_set_new(env, "device", text_or_empty(info->device, false));
  json_object_set_new(env, "ranks", json_integer(info->ranks));
  json_object_set_new(env, "pid", json_integer((json_int_t)getpid()));
  json_object_set_new(j, "environment", env);

  json_t *build = json_object();
  json_object_set_new(build, "version", json_string(VQC_VERSION_STRING));
  json_object_set_new(build, "build_type", json_string(VQC_BUILD_TYPE));
  json_object_set_new(build, "compiler", json_string(VQC_C_COMPILER));
  json_object_set_new(build, "mpi", json_boolean(VQC_WITH_MPI));
  json_object_set_new(build, "cuda", json_boolean(VQC_WITH_CUDA));
  json_object_set_new(j, "build", build);

  char when[64];
  vqc_run_json_time(when, sizeof when);
  json_object_set_new(j, "finished", json_string(when));
  json_object_set_new(j, "duration_s", json_real(info->duration_s));
  json_t *tr = json_object();
  json_object_set_new(tr, "status", json_string(vqc_status_name(info->training)));
  json_object_set_new(tr, "failed_rank", json_integer(info->failed_rank));
  json_object_set_new(tr, "message", text_or_empty(info->message, true));
  json_object_set_new(tr, "steps_done", json_integer(info->steps_done));
  json_object_set_new(j, "training", tr);
  json_object_set_new(j, "findings", info->findings
                                         ? vqc_findings_to_json(info->findings)
                                         : json_array());
  json_object_set_new(j, "steps", json_array());
  json_object_set_new(j, "exit_code", json_integer(info->exit_code));
  return j;
}

/* What vqc_json_write_atomic hands vqc_write_atomic. */
typedef struct json_dump {
  const char *path; /* for the message */
  const json_t *j;
  size_t flags;
} json_dump;

static vqc_status write_json(FILE *f, void *user) {
  const json_dump *d = user;
  if (json_dumpf(d->j, f, d->flags) != 0)
    return vqc_error(VQC_EIO, "cannot write %s: %s", d->path, strerror(errno));
  return VQC_OK;
}

vqc_status vqc_json_write_atomic(const char *path, const json_t *j,
                                 size_t flags) {
  if (!j) return vqc_error(VQC_EINVAL, "vqc_json_write_atomic: no document");
  json_dump d = {path, j, flags};
  return vqc_write_atomic(path, write_json, &d);
}

/* steps (a run.json "steps" array longer than VQC_RUN_JSON_MAX_STEPS)
 * thinned as rundir.h says: a new array of references to its entries. */
static json_t *thinned_steps(const json_t *steps) {
  const size_t n = json_array_size(steps);
  const size_t every = (n + VQC_RUN_JSON_MAX_STEPS / 2 - 1) /
                       (VQC_RUN_JSON_MAX_STEPS / 2); /* half the budget */
  json_t *out = json_array();
  const json_t *before = NULL;
  size_t nchanged = 0; /* kept for a change: the other half of the budget */
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_array_get(steps, i);
    const json_t *f = json_object_get(e, "findings");
    const bool changed = before && nchanged < VQC_RUN_JSON_MAX_STEPS / 2 &&
                         !json_equal(f, json_object_get(before, "findings"));
    if (i == 0 || i + 1 == n || i % every == 0 || changed) {
      json_array_append(out, (json_t *)e);
      if (changed && i % every != 0) nchanged++;
    }
    before = e;
  }
  return out;
}

vqc_status vqc_run_json_write(const char *run_dir, const json_t *j) {
  char path[4200];
  int n = snprintf(path, sizeof path, "%s/run.json", run_dir);
  if (n < 0 || (size_t)n >= sizeof path)
    return vqc_error(VQC_EINVAL, "run directory path too long: %.200s...",
                     run_dir);
  const json_t *steps = json_object_get(j, "steps");
  if (json_array_size(steps) <= VQC_RUN_JSON_MAX_STEPS)
    return vqc_json_write_atomic(path, j, JSON_INDENT(2) | JSON_ENSURE_ASCII);
  /* A shallow copy with the thinned steps: the caller's document stays. */
  json_t *thin = json_copy((json_t *)j);
  json_t *kept = thinned_steps(steps);
  const size_t omitted = json_array_size(steps) - json_array_size(kept);
  json_object_set_new(thin, "steps", kept);
  json_object_set_new(thin, "steps_omitted", json_integer((json_int_t)omitted));
  vqc_status s =
      vqc_json_write_atomic(path, thin, JSON_INDENT(2) | JSON_ENSURE_ASCII);
  json_decref(thin);
  return s;
}

/* ---- reading run.json, bounded (rundir.h) */

/* What read_capped hands jansson: the file and the bytes it may still
 * give; `over` when the file held more (it grew after the size check). */
typedef struct capped_file {
  FILE *f;
  long long left;
  bool over;
} capped_file;

/* jansson's json_load_callback source: at most VQC_RUN_JSON_MAX_BYTES in
 * all, then an error, so a file that grows while it is read is still
 * bounded. Returns the bytes read, 0 at the end, (size_t)-1 on error. */
static size_t read_capped(void *buf, size_t n, void *arg) {
  capped_file *c = arg;
  const size_t got = fread(buf, 1, n, c->f);
  if (got == 0) return ferror(c->f) ? (size_t)-1 : 0;
  c->left -= (long long)got;
  if (c->left < 0) {
    c->over = true;
    return (size_t)-1;
  }
  return got;
}

/* The VQC_EINVAL of a run.json over the cap (size in bytes). */
static vqc_status too_big(const char *path, long long size) {
  return vqc_error(VQC_EINVAL, "%s is %lld bytes, more than the %lld MiB "
                   "vqcheck reads of a run.json (no run writes one that "
                   "big): it is not a run.json vqcheck wrote; move it away "
                   "and run again, or name the run directory it belongs to",
                   path, size, VQC_RUN_JSON_MAX_BYTES / (1024 * 1024));
}

vqc_status vqc_run_json_load(const char *path, json_t **out) {
  *out = NULL;
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT)
      return vqc_error(VQC_EINVAL, "%s: no such file", path);
    return vqc_error(VQC_EIO, "cannot read %s: %s", path, strerror(errno));
  }
  if (S_ISLNK(st.st_mode))
    return vqc_error(VQC_EINVAL, "%s is a symbolic link: vqcheck reads only "
                     "the run.json it wrote, a regular file (replace the "
                     "link by the file it points to)", path);
  if (!S_ISREG(st.st_mode))
    return vqc_error(VQC_EINVAL, "%s is not a regular file: move it away "
                     "and run again", path);
  if ((long long)st.st_size > VQC_RUN_JSON_MAX_BYTES)
    return too_big(path, (long long)st.st_size);
  /* O_NOFOLLOW: a link put in its place since the lstat is refused too. */
  const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return vqc_error(errno == ELOOP ? VQC_EINVAL : VQC_EIO,
                     "cannot read %s: %s", path, strerror(errno));
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    const int e = errno;
    close(fd);
    return vqc_error(VQC_EIO, "cannot read %s: %s", path, strerror(e));
  }
  capped_file c = {f, VQC_RUN_JSON_MAX_BYTES, false};
  json_error_t err;
  json_t *j = json_load_callback(read_capped, &c, JSON_REJECT_DUPLICATES, &err);
  const bool read_failed = ferror(f) != 0;
  fclose(f);
  if (!j) {
    if (c.over) return too_big(path, VQC_RUN_JSON_MAX_BYTES - c.left);
    if (read_failed)
      return vqc_error(VQC_EIO, "cannot read %s: a read failed", path);
    return vqc_error(VQC_EPARSE, "%s:%d:%d: not valid JSON: %s", path,
                     err.line, err.column, err.text);
  }
  if (!json_is_object(j)) {
    json_decref(j);
    return vqc_error(VQC_EPARSE, "%s: expected a JSON object at the top",
                     path);
  }
  *out = j;
  return VQC_OK;
}
