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
 *    "disp":D,"unit":U,"off":O,"bytes":B,"fence":F,"epoch":E,"excl":X,
 *    "file":..,"line":..,"func":..,"t0":NS,"t1":NS}       an access
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
 *
 * Written in blocks of up to BUF_SIZE bytes, each of whole lines, at the
 * synchronisation that completes them. */
#include "vqc_mpi_internal.h"

#define BUF_SIZE (64u << 10)
#define LINES_MAX (1u << 20) /* lines written; the rest are not */

static int fd = -1;
static bool failed; /* the file could not be made or written: stop */
static unsigned long lines;
static char buf[BUF_SIZE];
static size_t used;

static void write_all(const char *b, size_t n) {
  while (n > 0 && !failed) {
    const ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      fprintf(stderr, "libvqcheck_mpi: rank %d: cannot write its RMA "
              "accesses: %s; the rest are not checked\n", g.rank,
              strerror(w < 0 ? errno : EIO));
      failed = true;
      return;
    }
    b += w;
    n -= (size_t)w;
  }
}

void rma_record_flush(void) {
  if (fd >= 0 && used > 0) write_all(buf, used);
  used = 0;
}

/* Appends one line (n bytes, its newline included); the block goes out
 * when full. */
static void add_line(const char *line, size_t n) {
  if (failed || n > BUF_SIZE) return;
  if (lines == LINES_MAX) {
    static const char cut[] = "{\"truncated\":true}\n";
    lines++;
    add_line(cut, sizeof cut - 1);
    return;
  }
  if (lines > LINES_MAX) return;
  if (used + n > BUF_SIZE) rma_record_flush();
  memcpy(buf + used, line, n);
  used += n;
  lines++;
}

/* The file and its first line, at the first window. */
static bool opened(void) {
  if (fd >= 0) return true;
  if (failed || !g.on) return false;
  char path[4200];
  snprintf(path, sizeof path, "%s/rank-%d.rma.jsonl", g.dir, g.rank);
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC |
                      O_NOFOLLOW, 0644);
  if (fd < 0) {
    fprintf(stderr, "libvqcheck_mpi: rank %d: cannot make %s: %s; its RMA "
            "accesses are not checked against other ranks'\n", g.rank,
            path, strerror(errno));
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

void rma_record_access(const char *win, const rma_op *o, char access,
                       int target, long long disp, int unit, long long off,
                       long long bytes_, bool fence, uint64_t t1) {
  if (!opened()) return;
  /* The window's name escaped once while its accesses come (one window's
   * at a time, most often). */
  static const char *last_win;
  static char esc[420];
  static size_t esc_n;
  if (win != last_win) {
    json_esc(esc, sizeof esc, win);
    esc_n = strlen(esc);
    last_win = win;
  }
  const site *s = o->s && o->s->len ? o->s : &overflow_site;
  /* Formatted by hand, literals copied whole: a line per operation, and
   * snprintf's share was most of its cost (bench_mpi_interposer.py
   * --program rma_loop). At most 420 + 1000 bytes of names and site, 12
   * numbers of at most 20 digits, 250 of keys and call: under 2000. */
  char b[2400];
  size_t k = LIT(b, 0, "{\"w\":\"");
  k = bytes(b, k, esc, esc_n);
  k = num(b, LIT(b, k, "\",\"id\":"), (long long)o->id);
  k = LIT(b, k, ",\"call\":\"");
  k = bytes(b, k, o->call, strlen(o->call));
  k = LIT(b, k, "\",\"access\":\"");
  b[k++] = access;
  k = num(b, LIT(b, k, "\",\"target\":"), target);
  k = num(b, LIT(b, k, ",\"disp\":"), disp);
  k = num(b, LIT(b, k, ",\"unit\":"), unit);
  k = num(b, LIT(b, k, ",\"off\":"), off);
  k = num(b, LIT(b, k, ",\"bytes\":"), bytes_);
  k = fence ? LIT(b, k, ",\"fence\":true") : LIT(b, k, ",\"fence\":false");
  k = num(b, LIT(b, k, ",\"epoch\":"), (long long)o->epoch);
  k = o->excl ? LIT(b, k, ",\"excl\":true,") : LIT(b, k, ",\"excl\":false,");
  k = bytes(b, k, s->json, s->len); /* "file":..,"line":..,"func":.., */
  k = num(b, LIT(b, k, "\"t0\":"), (long long)o->t0);
  k = num(b, LIT(b, k, ",\"t1\":"), (long long)t1);
  k = LIT(b, k, "}\n");
  add_line(b, k);
}

void rma_record_close(void) {
  rma_record_flush();
  if (fd >= 0) close(fd);
  fd = -1;
}
