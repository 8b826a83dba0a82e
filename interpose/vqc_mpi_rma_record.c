/* vqc_mpi_rma_record.c: rank-<r>.rma.jsonl, the RMA accesses this rank
 * made, for the analysis to find two ranks' conflicting accesses to one
 * window location (harness/run/rma_races.h says what it finds, and why
 * the rules it uses never call an ordered pair a race).
 *
 * The file is made (exclusively: the run directory starts empty) at this
 * rank's first window, and appended to as operations complete, so a rank
 * that dies later leaves what it did before. Lines, JSON Lines:
 *   {"rank":R,"host":"h","pid":P}                        first
 *   {"window":"world/win1","disp_unit":4}                 at each window
 *   {"w":"world/win1","id":K,"call":"MPI_Put","access":"w","target":T,
 *    "disp":D,"unit":U,"off":O,"bytes":B,["n":N,"step":S,]"fence":F,
 *    "epoch":E,"excl":X,"file":..,"line":..,"func":..,"t0":NS,"t1":NS}
 *                                                         an access, or N
 *   {"truncated":true}                                    past LINES_MAX
 * An access covers the bytes [D*unit + O, D*unit + O + B) of target T's
 * (a world rank) window memory, unit being U, or when U is 0 the target's
 * own disp_unit (its "window" line): MPI scales a displacement by the
 * target's unit, which the origin does not know. "access" is "w" (MPI_Put,
 * or an operation's origin buffer written inside this rank's own window
 * memory: a Get into it), "r" (MPI_Get, or an origin buffer read there)
 * or "a" (an accumulate, atomic against other accumulates). K numbers the
 * rank's operations: the two accesses of one operation (its target's and
 * its origin buffer's) share it. F: completed by MPI_Win_fence, issued
 * after the window's E-th fence; otherwise by an unlock, a flush or a
 * complete. X: under an exclusive lock on T. t0: issued; t1: the call that
 * completed it returned (CLOCK_MONOTONIC, comparable between the ranks of
 * one host). The call site is the operation's.
 * A run of N operations K, K+1, ... of one call site to one target, alike
 * but for displacements D, D+S, D+2S, ... (S > 0), completed by one
 * synchronisation, is one line with "n" and "step" (a loop's puts): its
 * t0 is the last one's, which only narrows the others' time in flight (a
 * pair that overlaps still does). Without the runs, a loop of one-double
 * puts in fence epochs wrote 270 MB per rank in 4 s.
 *
 * Written in blocks of up to BUF_SIZE bytes, each of whole lines, at the
 * synchronisation that completes them. */
#include "vqc_mpi_internal.h"

#define BUF_SIZE (64u << 10)
#define LINES_MAX (1u << 20) /* lines written; the rest are not */
/* VQC_MPI_RMA_LINES_MAX (the tests': mpi_watch.sh rma_truncated) lowers
 * it, never raises it. */
static unsigned lines_max = LINES_MAX;

static int fd = -1;
static bool failed; /* the file could not be made or written: stop */
static unsigned long lines;
static char buf[BUF_SIZE];
static size_t used;

/* The record could not be written (err): its later accesses are not
 * checked, and the rank's end line says so. */
static void write_failed(int err) {
  fprintf(stderr, "libvqcheck_mpi: rank %d: cannot write its RMA "
          "accesses: %s; the rest are not checked\n", g.rank, strerror(err));
  record_incomplete("VQC_EIO", "its RMA accesses could not all be written "
                    "to rank-%d.rma.jsonl (%s), so they were not all checked "
                    "against other ranks'", g.rank, strerror(err));
  failed = true;
}

static void write_all(const char *b, size_t n) {
  while (n > 0 && !failed) {
    const ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      write_failed(w < 0 ? errno : EIO);
      return;
    }
    b += w;
    n -= (size_t)w;
  }
}

static void write_run(void);

void rma_record_flush(void) {
  write_run();
  if (fd >= 0 && used > 0) write_all(buf, used);
  used = 0;
}

/* Appends one line (n bytes, its newline included); the block goes out
 * when full. */
static void add_line(const char *line, size_t n) {
  if (failed || n > BUF_SIZE) return;
  if (lines > lines_max) return;
  if (lines == lines_max) { /* the last line: says the rest are not */
    static const char cut[] = "{\"truncated\":true}\n";
    line = cut;
    n = sizeof cut - 1;
    record_incomplete("VQC_EUNSUPPORTED", "its RMA accesses past the first "
                      "%u lines of rank-%d.rma.jsonl were not recorded, so "
                      "they were not checked against other ranks'",
                      lines_max, g.rank);
  }
  if (used + n > BUF_SIZE) rma_record_flush();
  memcpy(buf + used, line, n);
  used += n;
  lines++;
}

/* The file and its first line, at the first window. */
static bool opened(void) {
  if (fd >= 0) return true;
  if (failed || !g.on) return false;
  const char *cap = getenv("VQC_MPI_RMA_LINES_MAX");
  if (cap && atol(cap) > 2 && (unsigned long)atol(cap) < LINES_MAX)
    lines_max = (unsigned)atol(cap);
  char path[4200];
  snprintf(path, sizeof path, "%s/rank-%d.rma.jsonl", g.dir, g.rank);
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC |
                      O_NOFOLLOW, 0644);
  if (fd < 0) {
    const int err = errno;
    fprintf(stderr, "libvqcheck_mpi: rank %d: cannot make %s: %s; its RMA "
            "accesses are not checked against other ranks'\n", g.rank,
            path, strerror(err));
    record_incomplete("VQC_EIO", "its RMA accesses were not checked "
                      "against other ranks': rank-%d.rma.jsonl could not be "
                      "made (%s)", g.rank, strerror(err));
    failed = true;
    return false;
  }
  char host[256] = "", esc[520], line[700];
  gethostname(host, sizeof host - 1);
  json_esc(esc, sizeof esc, host);
  const int k = snprintf(line, sizeof line,
                         "{\"rank\":%d,\"host\":\"%s\",\"pid\":%ld}\n",
                         g.rank, esc, (long)getpid());
  if (k > 0 && (size_t)k < sizeof line) add_line(line, (size_t)k);
  return true;
}

void rma_record_window(const char *name, int disp_unit) {
  if (!opened()) return;
  char esc[420], line[600];
  json_esc(esc, sizeof esc, name);
  const int k = snprintf(line, sizeof line,
                         "{\"window\":\"%s\",\"disp_unit\":%d}\n", esc,
                         disp_unit);
  if (k > 0 && (size_t)k < sizeof line) add_line(line, (size_t)k);
  rma_record_flush(); /* a window line is rare: out at once */
}

/* Appends number v at b + k (the caller leaves room). */
static size_t num(char *b, size_t k, long long v) {
  return k + fmt_int(b + k, v);
}

/* Appends string literal s at b + k (the caller leaves room). */
#define LIT(b, k, s) (memcpy((b) + (k), s, sizeof s - 1), (k) + sizeof s - 1)

/* Appends the n bytes at s. */
static size_t bytes(char *b, size_t k, const char *s, size_t n) {
  memcpy(b + k, s, n);
  return k + n;
}

/* The run being gathered (the header comment), not yet written. */
static struct run {
  bool has;
  const char *win;
  rma_op first;        /* its first operation (id, call, site, epoch ...) */
  char access;
  int target;
  long long disp, step, off, bytes;
  unsigned long long n;
  uint64_t last_id, last_t0, t1;
  int access_unit;      /* 0: the target's disp_unit; 1: bytes */
  bool fence;
} run;

static void write_run(void) {
  if (!run.has || !opened()) return;
  run.has = false;
  /* The window's name escaped once while its accesses come (one window's
   * at a time, most often). */
  static const char *last_win;
  static char esc[420];
  static size_t esc_n;
  if (run.win != last_win) {
    json_esc(esc, sizeof esc, run.win);
    esc_n = strlen(esc);
    last_win = run.win;
  }
  const rma_op *o = &run.first;
  const site *s = o->s && o->s->len ? o->s : &overflow_site;
  /* Formatted by hand, literals copied whole: a line per run, and
   * snprintf's share was most of its cost (bench_mpi_interposer.py
   * --program rma_loop). At most 420 + 1000 bytes of names and site, 14
   * numbers of at most 20 digits, 260 of keys and call: under 2000. */
  char b[2400];
  size_t k = LIT(b, 0, "{\"w\":\"");
  k = bytes(b, k, esc, esc_n);
  k = num(b, LIT(b, k, "\",\"id\":"), (long long)o->id);
  k = LIT(b, k, ",\"call\":\"");
  k = bytes(b, k, o->call, strlen(o->call));
  k = LIT(b, k, "\",\"access\":\"");
  b[k++] = run.access;
  k = num(b, LIT(b, k, "\",\"target\":"), run.target);
  k = num(b, LIT(b, k, ",\"disp\":"), run.disp);
  k = num(b, LIT(b, k, ",\"unit\":"), run.access_unit);
  k = num(b, LIT(b, k, ",\"off\":"), run.off);
  k = num(b, LIT(b, k, ",\"bytes\":"), run.bytes);
  if (run.n > 1) {
    k = num(b, LIT(b, k, ",\"n\":"), (long long)run.n);
    k = num(b, LIT(b, k, ",\"step\":"), run.step);
  }
  k = run.fence ? LIT(b, k, ",\"fence\":true") : LIT(b, k, ",\"fence\":false");
  k = num(b, LIT(b, k, ",\"epoch\":"), (long long)o->epoch);
  k = o->excl ? LIT(b, k, ",\"excl\":true,") : LIT(b, k, ",\"excl\":false,");
  k = bytes(b, k, s->json, s->len); /* "file":..,"line":..,"func":.., */
  k = num(b, LIT(b, k, "\"t0\":"), (long long)run.last_t0);
  k = num(b, LIT(b, k, ",\"t1\":"), (long long)run.t1);
  k = LIT(b, k, "}\n");
  add_line(b, k);
}

void rma_record_access(const char *win, const rma_op *o, char access,
                       int target, long long disp, int unit, long long off,
                       long long nbytes, bool fence, uint64_t t1) {
  /* The next of the run? Alike in all but the displacement, which moves
   * by the run's step (the second sets it). */
  if (run.has && unit == 0 && run.access_unit == 0 && win == run.win &&
      o->s == run.first.s && o->call == run.first.call &&
      access == run.access && target == run.target && off == run.off &&
      nbytes == run.bytes && fence == run.fence &&
      o->epoch == run.first.epoch && o->excl == run.first.excl &&
      t1 == run.t1 && o->id == run.last_id + 1 &&
      (run.n == 1 ? disp > run.disp : disp == run.disp + (long long)run.n *
                                                          run.step)) {
    if (run.n == 1) run.step = disp - run.disp;
    run.n++;
    run.last_id = o->id;
    run.last_t0 = o->t0;
    return;
  }
  write_run();
  run = (struct run){.has = true, .win = win, .first = *o, .access = access,
                     .access_unit = unit, .target = target, .disp = disp,
                     .off = off, .bytes = nbytes, .n = 1, .last_id = o->id,
                     .last_t0 = o->t0, .t1 = t1, .fence = fence};
  /* An origin buffer's access (unit 1) is never part of a run. */
  if (unit != 0) write_run();
}

void rma_record_close(void) {
  rma_record_flush();
  if (fd >= 0 && close(fd) != 0 && !failed) write_failed(errno);
  fd = -1;
}
