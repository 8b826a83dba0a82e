/* vqc_mpi_record.c: the live record: lines appended through a shared
 * mapping of rank-<r>.live.jsonl, a collective's "entered" and "done"
 * lines put together without printf. */
#include "vqc_mpi_internal.h"
#include <stdarg.h>

/* JSON string contents of s into out (n bytes, NUL-terminated; cut short
 * rather than overflow). Control bytes become '?'. */
void json_esc(char *out, size_t n, const char *s) {
  size_t k = 0;
  for (; *s && k + 3 < n; s++) {
    const unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      out[k++] = '\\';
      out[k++] = (char)c;
    } else {
      out[k++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
  }
  out[k] = '\0';
}

/* ---- the live record
 *
 * Written through a shared mapping of the file, not a system call per
 * line: a line is a reservation of its bytes (one atomic add on the
 * record's length) and a copy into the mapping, which is the file's page
 * cache: a reader (vqcheck watch, at a hang) sees it at once, and a rank
 * killed with SIGKILL leaves every line it copied. The mapping is one
 * range of address space reserved at the start (rec_spans, no memory
 * behind it); the file's blocks are allocated ahead of the lines
 * (posix_fallocate, REC_GROW at a time, so a full disk is an error here,
 * never a SIGBUS later), and at MPI_Finalize the file is cut to its
 * lines. Until then, or when a rank is killed, its end is zeros (readers
 * stop at them: a torn last line). Signal handlers write with pwrite(2)
 * at their reservation, as does everything once the mapping is gone or
 * could not be made (a full disk, a file system without fallocate: one
 * pwrite per line, as before). */

/* Address space, not memory: 64 GiB, else (a limit on address space:
 * ulimit -v, valgrind) 1 GiB; past the span, lines are pwrites. */
static const size_t rec_spans[] = {(size_t)64 << 30, (size_t)1 << 30};
#define REC_GROW ((uint64_t)4 << 20)

/* How far ahead of the lines the mapping's pages are made present and
 * writable (MADV_POPULATE_WRITE), in one system call: a page faulted in by
 * the copy of a line cost 1.6 us on the project's VM, 16 ns per collective
 * at 40 bytes each, and most of that was the fault's own entry and exit. */
#define REC_READY ((uint64_t)256 << 10)

static struct {
  unsigned char *map;   /* NULL: pwrite only */
  size_t span;          /* the mapping's length */
  uint64_t used;        /* bytes reserved so far (atomic) */
  uint64_t size;        /* bytes allocated in the file (under rec_lock) */
  uint64_t ready;       /* bytes allocated and, where the kernel can,
                           populated: <= size (atomic; under rec_lock) */
} rec;
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;

static int rec_broken; /* a line was lost: later ones are not attempted */

static void rec_pwrite(const char *s, size_t n, uint64_t off) {
  while (n > 0) {
    ssize_t w = pwrite(g.live_fd, s, n, (off_t)off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      rec_lost(w < 0 ? errno : ENOSPC);
      return;
    }
    s += w;
    n -= (size_t)w;
    off += (uint64_t)w;
  }
}

/* rec_room's slow path: blocks allocated up to past end, and the pages
 * from rec.ready on populated up to REC_READY past end (under
 * rec_lock). */
static __attribute__((noinline)) bool rec_grow(uint64_t end) {
  bool ok = true;
  pthread_mutex_lock(&rec_lock);
  if (rec.size < end) {
    uint64_t want = __atomic_load_n(&rec.used, __ATOMIC_RELAXED);
    want = (want > end ? want : end) + REC_GROW;
    if (want > rec.span || posix_fallocate(g.live_fd, (off_t)rec.size,
                                           (off_t)(want - rec.size)) != 0) {
      ok = false;
    } else {
      __atomic_store_n(&rec.size, want, __ATOMIC_RELEASE);
    }
  }
  if (ok && rec.ready < end) {
    uint64_t to = end + REC_READY;
    if (to > rec.size) to = rec.size;
    const uint64_t from = rec.ready & ~(uint64_t)4095; /* page-aligned */
#ifdef MADV_POPULATE_WRITE
    /* Best effort: a kernel without it (before 5.14) faults the pages
     * in one by one, as the copies reach them. */
    unsigned char *const m = __atomic_load_n(&rec.map, __ATOMIC_ACQUIRE);
    if (m && to > from)
      (void)madvise(m + from, (size_t)(to - from), MADV_POPULATE_WRITE);
#endif
    __atomic_store_n(&rec.ready, to, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&rec_lock);
  return ok;
}

/* Whether the file holds blocks up to end (allocating, and populating
 * the mapping's pages, when not); false: write with pwrite instead. */
static inline bool rec_room(uint64_t end) {
  return __atomic_load_n(&rec.ready, __ATOMIC_ACQUIRE) >= end ||
         rec_grow(end);
}

/* The record's next n bytes, taken: their offset. Other threads may take
 * bytes at once under MPI_THREAD_MULTIPLE (an atomic add); with one
 * thread calling MPI only a signal handler may, on this thread, between
 * two instructions, so on x86-64 one xadd without the lock prefix does
 * (the prefix's bus lock was a tenth of a recorded call's time). */
static inline uint64_t reserve(uint64_t n) {
#if defined(__x86_64__)
  if (!g.multi) {
    uint64_t off = n;
    __asm__ volatile("xaddq %0, %1" : "+r"(off), "+m"(rec.used) : : "memory");
    return off;
  }
#endif
  return __atomic_fetch_add(&rec.used, n, __ATOMIC_RELAXED);
}

/* A line of n bytes taken in the record: false when nothing is to be
 * written (no record, or a line was lost: the record is incomplete
 * whatever follows, and each try would cost a failing system call per
 * collective). Else *off is its offset and *dst where to copy it in the
 * mapping, or NULL: write it with rec_pwrite at *off (no mapping, a
 * signal handler's line, no room). */
static inline bool rec_take(uint64_t n, bool from_signal, uint64_t *off,
                            unsigned char **dst) {
  if (g.live_fd < 0 || __atomic_load_n(&rec_broken, __ATOMIC_RELAXED))
    return false;
  *off = reserve(n);
  unsigned char *map = __atomic_load_n(&rec.map, __ATOMIC_ACQUIRE);
  *dst = map && !from_signal && rec_room(*off + n) ? map + *off : NULL;
  return true;
}

/* Appends the n parts of one line to the record. Async-signal-safe when
 * from_signal (pwrite only). */
static void rec_append(const struct iovec *part, int n, bool from_signal) {
  size_t total = 0;
  for (int i = 0; i < n; i++) total += part[i].iov_len;
  uint64_t off;
  unsigned char *dst;
  if (!rec_take(total, from_signal, &off, &dst)) return;
  if (dst) {
    for (int i = 0; i < n; i++) {
      memcpy(dst, part[i].iov_base, part[i].iov_len);
      dst += part[i].iov_len;
    }
    return;
  }
  uint64_t at = off;
  for (int i = 0; i < n; i++) {
    rec_pwrite(part[i].iov_base, part[i].iov_len, at);
    at += part[i].iov_len;
  }
}

void live_write(const char *s, size_t n) {
  struct iovec one = {(void *)s, n};
  rec_append(&one, 1, false);
}

/* From a signal handler: pwrite only. */
void live_write_signal(const char *s, size_t n) {
  struct iovec one = {(void *)s, n};
  rec_append(&one, 1, true);
}

/* The record's file, just made: its mapping (none when it cannot be:
 * every line is then a pwrite). */
void rec_open(void) {
  rec.used = rec.size = rec.ready = 0;
  void *m = MAP_FAILED;
  for (size_t i = 0; m == MAP_FAILED && i < sizeof rec_spans /
                                            sizeof rec_spans[0]; i++) {
    rec.span = rec_spans[i];
    m = mmap(NULL, rec.span, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_NORESERVE, g.live_fd, 0);
  }
  if (m == MAP_FAILED) return;
  if (posix_fallocate(g.live_fd, 0, (off_t)REC_GROW) != 0) {
    munmap(m, rec.span);
    return;
  }
  rec.size = REC_GROW;
  __atomic_store_n(&rec.map, (unsigned char *)m, __ATOMIC_RELEASE);
}

/* At MPI_Finalize: the file cut to its lines, the mapping gone (later
 * lines, a signal's, are pwrites past the end). */
void rec_close(void) {
  unsigned char *m = __atomic_exchange_n(&rec.map, NULL, __ATOMIC_ACQ_REL);
  if (m) munmap(m, rec.span);
  if (g.live_fd >= 0 &&
      ftruncate(g.live_fd, (off_t)__atomic_load_n(&rec.used,
                                                  __ATOMIC_ACQUIRE)) != 0) {
    /* the zeros stay: readers stop at them */
  }
}


/* ---- a line, put together without printf (snprintf was most of a
 * recorded call's cost): pieces appended to a fixed buffer; one that does
 * not fit marks the buffer full, and a full buffer's line is not written. */

typedef struct line_out {
  char *p, *end;
  bool full;
} line_out;

static void put(line_out *o, const char *s, size_t n) {
  if (o->full || (size_t)(o->end - o->p) < n) {
    o->full = true;
    return;
  }
  memcpy(o->p, s, n);
  o->p += n;
}
#define PUT(o, lit) put((o), (lit), sizeof(lit) - 1)

static void put_str(line_out *o, const char *s) { put(o, s, strlen(s)); }

/* "00" "01" ... "99": two digits per division (the timestamps' 13 to
 * 19 digits were a fifth of a recorded call's instructions). */
static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233"
    "34353637383940414243444546474849505152535455565758596061626364656667"
    "6869707172737475767778798081828384858687888990919293949596979899";

static void put_u64(line_out *o, unsigned long long v) {
  char b[24];
  int k = (int)sizeof b;
  while (v >= 100) {
    const unsigned d = (unsigned)(v % 100);
    v /= 100;
    b[--k] = digit_pairs[2 * d + 1];
    b[--k] = digit_pairs[2 * d];
  }
  if (v >= 10) {
    b[--k] = digit_pairs[2 * v + 1];
    b[--k] = digit_pairs[2 * v];
  } else {
    b[--k] = (char)('0' + v);
  }
  put(o, b + k, sizeof b - (size_t)k);
}

static void put_i64(line_out *o, long long v) {
  if (v < 0) {
    PUT(o, "-");
    put_u64(o, (unsigned long long)(-(v + 1)) + 1);
  } else {
    put_u64(o, (unsigned long long)v);
  }
}

/* ---- heads kept, and short lines for a loop's collectives
 *
 * A collective's line is its head ({"seq":..,"rank":..,"op":.. up to
 * "any_site":true and "mpi_type"), its communicator's group, its call
 * site and its times. With single-threaded MPI the heads of the last
 * NHEADS full "entered" lines are kept: the k-th such line of the record
 * (counted from 0) goes to slot k % NHEADS, which the start line says
 * ("heads":NHEADS). A loop calls the same few collectives with the same
 * arguments from the same lines, so:
 *   - a blocking call whose head, communicator and site are a slot's is
 *     written as two short lines, about 40 bytes where its two full lines
 *     take about 570 (the kernel's share of a recorded call, providing
 *     the record's pages, grows with the bytes):
 *       {"same":SEQ,"as":K,"in":DT}  entered: collective SEQ with every
 *                                    other field of slot K's line, DT ns
 *                                    after the collective entered before
 *                                    it (full or short line);
 *       {"same":SEQ,"out":DT}        that call done (MPI_SUCCESS), DT ns
 *                                    after it entered;
 *     "in" and "out" are left out when DT is 0 (the usual case: the
 *     coarse clock ticks every few ms);
 *     a failed one's last line is a full one (checkers/ledger_read.c reads
 *     them: ledger_analysis.h "The live record");
 *   - another call with a slot's head copies it instead of formatting it.
 * With MPI_THREAD_MULTIPLE the same, under a lock (coll_lock, below):
 * threads' lines interleave, and before, every line there was a full one
 * (about 1 us per collective, four times a short-lined one). */
#define NHEADS 8

typedef struct head_slot {
  const comm_info *ci;  /* NULL: empty */
  const site *s;
  const char *op, *redop, *dtype;
  long long count, elems;
  int root, gsize;
  char extra[200];      /* the type's "mpi_type":.., compared as text */
  char rest[480];       /* ,"rank":..,...,"any_site":true,<mpi_type> */
  size_t n;             /* rest's length */
} head_slot;

static struct {
  head_slot slot[NHEADS];
  uint64_t nfull;       /* full entered lines written */
  uint64_t t_enter;     /* the last entered line's (full or short) */
  const call *open;     /* the call of the last short entered line, and */
  uint64_t open_seq;    /* its seq: its done line may be short (below) */
} heads;

/* Under MPI_THREAD_MULTIPLE threads record collectives at once: their
 * entered lines, the head slots and the times short lines count from
 * are taken under this lock, so the slots are filled in the record's
 * order, which is the order the reader fills its own (a full entered
 * line's reservation and its slot under one lock). A short call's done
 * line is short only while its entered line is the last short entered
 * one (the reader pairs them so); otherwise it is a full line, made from
 * the call's own copy of its head (another thread's full line may have
 * taken its slot). One thread: no lock, and nothing can come between. */
static pthread_mutex_t coll_lock = PTHREAD_MUTEX_INITIALIZER;

static inline void coll_take(void) {
  if (g.multi) pthread_mutex_lock(&coll_lock);
}
static inline void coll_give(void) {
  if (g.multi) pthread_mutex_unlock(&coll_lock);
}

int rec_heads(void) { return NHEADS; }

/* The last call recorded as short lines, by its arguments (one thread
 * calls MPI): a loop's next call with the same ones is recorded the same
 * way without its type, communicator, site and head looked up again (they
 * were half of a recorded call's instructions). Kept only for a basic type
 * (a derived type's handle may name another type once freed), an
 * intracommunicator, and a site of its own pc (not a Fortran binding's:
 * site_of); valid while no full line took a head slot since (nfull) and
 * its communicator is still there (rec_forget_comm). */
typedef struct again_call {
  comm_info *ci;        /* NULL: none */
  MPI_Comm comm;
  MPI_Datatype dt;
  long long count;
  const char *op, *redop;
  int root;
  uintptr_t pc;
  const site *s;
  int slot;
  uint64_t nfull;       /* heads.nfull when kept */
  const char *dtype;
  long long elems;
} again_call;
static again_call again;

void rec_forget_comm(const comm_info *ci) {
  coll_take();
  for (int k = 0; k < NHEADS; k++)
    if (heads.slot[k].ci == ci) heads.slot[k].ci = NULL;
  if (again.ci == ci) again.ci = NULL;
  coll_give();
}

/* The slot holding the head of a call with these arguments at site s;
 * -1: none. */
static int head_find(const comm_info *ci, const site *s, const char *op,
                     const char *redop, const tinfo *tp, long long count,
                     int root, int gsize) {
  for (int k = 0; k < NHEADS; k++) {
    const head_slot *h = &heads.slot[k];
    if (h->ci == ci && h->s == s && h->op == op && h->redop == redop &&
        h->dtype == tp->dtype && h->count == count &&
        h->elems == tp->elems && h->root == root && h->gsize == gsize &&
        strcmp(h->extra, tp->extra) == 0)
      return k;
  }
  return -1;
}

void call_line(const call *c, uint64_t t_exit, const char *state,
               const char *status) {
  char tail[160];
  line_out o = {tail, tail + sizeof tail, false};
  PUT(&o, "\"t_enter_ns\":");
  if (c->tn > 0)
    put(&o, c->t_enter_s, c->tn);
  else
    put_u64(&o, c->t_enter); /* entered as a short line */
  PUT(&o, ",\"t_exit_ns\":");
  put_u64(&o, t_exit);
  PUT(&o, ",\"state\":\"");
  put_str(&o, state);
  PUT(&o, "\",\"status\":\"");
  put_str(&o, status);
  PUT(&o, "\"}\n");
  if (o.full) return;
  /* A call entered as a short line has its head made here (hn 0): its
   * slot holds it until the call returns (one thread, a blocking call). */
  char head[sizeof c->head];
  const char *h = c->head;
  size_t hn = c->hn;
  if (hn == 0) {
    line_out ho = {head, head + sizeof head, false};
    PUT(&ho, "{\"seq\":");
    put_u64(&ho, c->seq);
    put(&ho, heads.slot[c->slot].rest, heads.slot[c->slot].n);
    if (ho.full) return;
    h = head;
    hn = (size_t)(ho.p - head);
  }
  struct iovec iov[4] = {{(void *)h, hn},
                         {c->ci->group_json, c->ci->group_len},
                         {(void *)c->s->json, c->s->len},
                         {tail, (size_t)(o.p - tail)}};
  rec_append(iov, 4, false);
}

/* v's decimal digits ending at end; returns where they start. */
static char *u64_back(char *end, uint64_t v) {
  while (v >= 100) {
    const unsigned d = (unsigned)(v % 100);
    v /= 100;
    *--end = digit_pairs[2 * d + 1];
    *--end = digit_pairs[2 * d];
  }
  if (v >= 10) {
    *--end = digit_pairs[2 * v + 1];
    *--end = digit_pairs[2 * v];
  } else {
    *--end = (char)('0' + v);
  }
  return end;
}

/* The start of the last seq's short lines, `{"same":` and the seq's
 * digits: a loop's next call has the next seq (one communicator), its
 * digits one increment away, and its done line the same seq, so the
 * prefix is mended in place, never formatted. (The divisions by 100 of a
 * seq's 7 digits, twice per call, were a seventh of a recorded call's
 * time.) Short lines are written by one thread at a time (under coll_lock
 * with MPI_THREAD_MULTIPLE), never from a signal handler. */
#define SAME_KEY 8 /* strlen("{\"same\":") */
static struct {
  uint64_t v;
  char text[SAME_KEY + 24]; /* not terminated */
  int n;                    /* SAME_KEY + the digits */
} same = {0, "{\"same\":0", SAME_KEY + 1};

/* same's prefix made seq's. */
static void same_prefix(uint64_t seq) {
  if (seq == same.v) return;
  char *const d = same.text + SAME_KEY;
  int nd = same.n - SAME_KEY;
  if (seq == same.v + 1) { /* one increment: a carry at most */
    int i = nd - 1;
    while (i >= 0 && d[i] == '9') d[i--] = '0';
    if (i >= 0) {
      d[i]++;
    } else { /* 99 -> 100 */
      memmove(d + 1, d, (size_t)nd);
      d[0] = '1';
      same.n++;
    }
  } else {
    char b[24];
    char *const end = b + sizeof b, *q = u64_back(end, seq);
    same.n = SAME_KEY + (int)(end - q);
    memcpy(d, q, (size_t)(end - q));
  }
  same.v = seq;
}

/* n bytes (n <= 48) from src to dst, with fixed-size copies the compiler
 * inlines (a call of memcpy, and its dispatch on the size, cost more than
 * a short line's copy itself). Overlapping stores write the same bytes. */
static inline void copy_small(unsigned char *dst, const char *src, size_t n) {
  if (n >= 16) {
    memcpy(dst, src, 16);
    if (n > 32) memcpy(dst + 16, src + 16, 16);
    memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8) {
    memcpy(dst, src, 8);
    memcpy(dst + n - 8, src + n - 8, 8);
  } else {
    for (size_t i = 0; i < n; i++) dst[i] = (unsigned char)src[i];
  }
}

/* {"same":seq,"as":k,"in":dt}\n (k >= 0) or {"same":seq,"out":dt}\n
 * appended: same's prefix, then the rest made from its end backwards (two
 * numbers of 20 digits at most), each copied into the mapping once. dt 0
 * (the coarse clock did not tick: most of a loop's calls) is left out:
 * {"same":seq,"as":k} and {"same":seq}, a quarter fewer bytes, so a
 * quarter fewer of the record's pages for the kernel to provide (1.6 us
 * each on the project's VM, measured alone: one per 100 collectives). */
static void short_line(uint64_t seq, int k, uint64_t dt) {
  char b[64];
  char *p = b + sizeof b;
  *--p = '\n';
  *--p = '}';
  if (dt > 0) {
    p = u64_back(p, dt);
    p -= k >= 0 ? 6 : 7;
    memcpy(p, k >= 0 ? ",\"in\":" : ",\"out\":", k >= 0 ? 6 : 7);
  }
  if (k >= 0) {
    p = u64_back(p, (uint64_t)k);
    p -= 6;
    memcpy(p, ",\"as\":", 6);
  }
  same_prefix(seq);
  const size_t nt = (size_t)(b + sizeof b - p), np = (size_t)same.n;
  uint64_t off;
  unsigned char *dst;
  if (!rec_take(np + nt, false, &off, &dst)) return;
  if (dst) {
    copy_small(dst, same.text, np);
    copy_small(dst + np, p, nt);
    return;
  }
  rec_pwrite(same.text, np, off);
  rec_pwrite(p, nt, off + np);
}

void call_end_line(const call *c, uint64_t t, int rc) {
  if (c->tn == 0 && rc == MPI_SUCCESS && t >= c->t_enter) {
    coll_take();
    const bool last = !g.multi || (heads.open == c &&
                                   heads.open_seq == c->seq);
    if (last) {
      short_line(c->seq, -1, t - c->t_enter);
      heads.open = NULL;
    }
    coll_give();
    if (last) return;
  }
  call_line(c, t, rc == MPI_SUCCESS ? "done" : "failed",
            rc == MPI_SUCCESS ? "VQC_OK" : "VQC_ECOMM");
}

/* Whether MPI may let blocking collective op return on a member before
 * every member entered it: a root that sends (broadcast, scatter), a
 * member that only sends to a root (reduce, gather), the first ranks of a
 * scan. The others (barrier, the all- forms, reduce_scatter) wait for
 * every member by their nature. */
static bool may_return_early(const char *op) {
  static const char *const early[] = {"broadcast", "reduce", "gather",
                                      "gatherv", "scatter", "scatterv",
                                      "scan", "exscan"};
  /* Every loop's call asks (vqcheck watch's default): the all- forms and
   * the rest of the a..z ops answer at their first letter. */
  if (!strchr("bgrse", op[0]) || strcmp(op, "barrier") == 0 ||
      strcmp(op, "reduce_scatter") == 0)
    return false;
  for (size_t i = 0; i < sizeof early / sizeof early[0]; i++)
    if (strcmp(op, early[i]) == 0) return true;
  return false;
}

/* The heartbeat, and in strict mode the agreement on a blocking call c
 * (its entered line written). Under synchronous sends (vqcheck watch's
 * default) a blocking collective that MPI may let return early waits for
 * every member first (a barrier on the communicator's duplicate): MPI
 * lets a collective synchronise or not, a correct program works either
 * way, and one that needs it not to (a root's MPI_Bcast, then an MPI_Recv
 * its peer answers only after a send of its own before the broadcast)
 * hangs here at once, as it would with larger messages or another MPI,
 * and is reported. */
static void entered(call *c, comm_info *ci, bool blocking, const char *dtype,
                    long long count, int root, const char *redop) {
  beat_at(HB_IN_COLLECTIVE, c->seq, c->op, c->t_enter);
  if (!blocking || ci->shadow == MPI_COMM_NULL) return;
  if (g.strict)
    agree(c, dtype, count, root, redop); /* an all-gather: synchronising */
  else if (g.sync_sends && may_return_early(c->op))
    PMPI_Barrier(ci->shadow);
}

/* Call c (its seq, op, site and communicator set) entered at t as a short
 * line naming kept head k (under coll_lock); the caller then releases the
 * lock and calls entered(). */
static void enter_short(call *c, int k, uint64_t t) {
  c->tn = 0;
  c->slot = k;
  c->hn = 0; /* made if a full line needs it (call_line) */
  c->t_enter = t;
  if (g.multi) { /* its own head, for a full done line (call_end_line) */
    line_out ho = {c->head, c->head + sizeof c->head, false};
    PUT(&ho, "{\"seq\":");
    put_u64(&ho, c->seq);
    put(&ho, heads.slot[k].rest, heads.slot[k].n);
    if (!ho.full) c->hn = (size_t)(ho.p - c->head);
  }
  short_line(c->seq, k, t - heads.t_enter);
  heads.t_enter = t;
  heads.open = c;
  heads.open_seq = c->seq;
}

/* Records a collective as entered; a blocking one (and communicator
 * creation) is, in strict mode, agreed on before it runs. */
void record(call *c, bool blocking, MPI_Comm comm, const char *op,
            const char *redop, MPI_Datatype dt, long long count,
            int root, uintptr_t pc) {
  c->ci = NULL;
  c->blocking = blocking;
  c->shashed = false;
  if (!g.on) return;
  if (blocking && again.ci && !g.multi && comm == again.comm &&
      dt == again.dt && count == again.count && op == again.op &&
      redop == again.redop && root == again.root && pc == again.pc &&
      heads.nfull == again.nfull && heads.slot[again.slot].ci == again.ci) {
    const uint64_t t = now_coarse_ns();
    if (t >= heads.t_enter) { /* as record_ci's short lines */
      comm_info *ci = again.ci;
      c->seq = ++ci->seq; /* one thread calls MPI */
      c->op = op;
      c->s = again.s;
      c->ci = ci;
      enter_short(c, again.slot, t);
      entered(c, ci, true, again.dtype, count * again.elems, root, redop);
      return;
    }
  }
  tinfo t;
  type_info(dt, &t);
  record_t(c, blocking, comm, op, redop, &t, count, root, pc);
  /* Kept for the next call when it was recorded as short lines. */
  if (!g.multi && blocking && c->ci && c->tn == 0 && !c->ci->inter &&
      site_last_pc == pc && site_last == c->s && dt != MPI_DATATYPE_NULL &&
      basic_of(dt))
    again = (again_call){.ci = c->ci, .comm = comm, .dt = dt,
                         .count = count, .op = op, .redop = redop,
                         .root = root, .pc = pc, .s = c->s,
                         .slot = c->slot, .nfull = heads.nfull,
                         .dtype = t.dtype, .elems = t.elems};
}

/* record() with the type already described (*tp): count items of
 * tp->elems basic elements each. */
void record_t(call *c, bool blocking, MPI_Comm comm, const char *op,
              const char *redop, const tinfo *tp, long long count,
              int root, uintptr_t pc) {
  c->ci = NULL;
  c->blocking = blocking;
  c->shashed = false;
  if (!g.on) return;
  record_ci(c, blocking, info_of(comm), op, redop, tp, count, root, pc);
}

void record_ci(call *c, bool blocking, comm_info *ci, const char *op,
               const char *redop, const tinfo *tp, long long count,
               int root, uintptr_t pc) {
  c->ci = NULL;
  c->blocking = blocking;
  c->shashed = false;
  if (!g.on || !ci || ci->skip) return;
  if (ci->inter) {
    /* An intercommunicator's collective: the groups' sides differ by
     * design (a root group passes MPI_ROOT and MPI_PROC_NULL, the other
     * the remote root; counts and types pair across the groups), so only
     * the op and its reduction (the same on every member) are compared. */
    static const tinfo none = {.dtype = "", .elems = 1};
    tp = &none;
    count = 0;
    root = -1;
  }
  c->seq = __atomic_add_fetch(&ci->seq, 1, __ATOMIC_RELAXED);
  c->op = op;
  c->s = site_of(pc);
  c->ci = ci;
  c->tn = 0;
  const int gsize = ci == &world_info ? g.size : ci->size;
  const bool negative = count < 0;
  coll_take();
  const int k = negative ? -1
                : head_find(ci, c->s, op, redop, tp, count, root, gsize);
  c->t_enter = now_coarse_ns();
  if (k >= 0 && blocking && c->t_enter >= heads.t_enter) {
    enter_short(c, k, c->t_enter);
    coll_give();
    entered(c, ci, blocking, tp->dtype, count * tp->elems, root, redop);
    return;
  }
  /* {"seq":..,"rank":..,"op":"..","redop":"..","dtype":"..","count":..,
   * "root":..,"group_size":..,"any_site":true,<mpi_type>,<mpi_count>, */
  line_out o = {c->head, c->head + sizeof c->head, false};
  PUT(&o, "{\"seq\":");
  put_u64(&o, c->seq);
  char *const rest = o.p;
  if (k >= 0) {
    put(&o, heads.slot[k].rest, heads.slot[k].n);
  } else {
    PUT(&o, ",\"rank\":");
    put_i64(&o, g.rank);
    PUT(&o, ",\"op\":\"");
    put_str(&o, op);
    PUT(&o, "\",\"redop\":\"");
    put_str(&o, redop);
    PUT(&o, "\",\"dtype\":\"");
    put_str(&o, tp->dtype);
    PUT(&o, "\",\"count\":");
    /* A negative count is an invalid argument (MPI fails the call with
     * MPI_ERR_COUNT): the record keeps a valid count, 0, and the
     * program's in "mpi_count". */
    put_i64(&o, negative ? 0 : count * tp->elems);
    PUT(&o, ",\"root\":");
    put_i64(&o, root);
    PUT(&o, ",\"group_size\":");
    put_i64(&o, gsize);
    PUT(&o, ",\"any_site\":true,");
    put_str(&o, tp->extra);
    if (negative) {
      PUT(&o, "\"mpi_count\":");
      put_i64(&o, count);
      PUT(&o, ",");
    }
  }
  if (o.full) {
    coll_give();
    c->ci = NULL;
    return;
  }
  c->hn = (size_t)(o.p - c->head);
  line_out to = {c->t_enter_s, c->t_enter_s + sizeof c->t_enter_s, false};
  put_u64(&to, c->t_enter);
  c->tn = (size_t)(to.p - c->t_enter_s);
  call_line(c, 0, "entered", "");
  heads.t_enter = c->t_enter;
  {
    /* This full entered line's slot: kept for the next calls; never a
     * negative count's (its head has "mpi_count"). */
    head_slot *h = &heads.slot[heads.nfull++ % NHEADS];
    const size_t rn = (size_t)(o.p - rest);
    h->ci = NULL;
    if (!negative && rn <= sizeof h->rest &&
        strlen(tp->extra) < sizeof h->extra) {
      *h = (head_slot){.ci = ci, .s = c->s, .op = op, .redop = redop,
                       .dtype = tp->dtype, .count = count,
                       .elems = tp->elems, .root = root, .gsize = gsize,
                       .n = rn};
      memcpy(h->rest, rest, rn);
      memcpy(h->extra, tp->extra, strlen(tp->extra) + 1);
    }
  }
  coll_give();
  if (negative) count = 0;
  entered(c, ci, blocking, tp->dtype, count * tp->elems, root, redop);
}

/* A line of the live record could not be written (a full disk, most
 * likely): said once on stderr, where the watcher passes it on, since the
 * record, and so the verdict, is incomplete from here. Async-signal-safe
 * (a handler's line may be the one lost). */
void rec_lost(int err) {
  if (__atomic_exchange_n(&rec_broken, 1, __ATOMIC_RELAXED)) return;
  char b[400];
  size_t k = cat(b, 0, sizeof b, "vqcheck (libvqcheck_mpi.so): rank ");
  k += fmt_int(b + k, g.rank);
  k = cat(b, k, sizeof b, " cannot write its live record in ");
  k = cat(b, k, sizeof b, err == ENOSPC ? "the run directory: the disk is "
          "full" : "the run directory (errno ");
  if (err != ENOSPC) {
    k += fmt_int(b + k, err);
    k = cat(b, k, sizeof b, ")");
  }
  k = cat(b, k, sizeof b, "; its record is incomplete from here, and so is "
          "vqcheck's verdict on this run\n");
  ssize_t w = write(2, b, k);
  (void)w;
}

static char incomplete_why[400]; /* record_incomplete's first reason */
static const char *incomplete_status = "VQC_OK";

void record_incomplete(const char *status, const char *fmt, ...) {
  pthread_mutex_lock(&rec_lock);
  if (!incomplete_why[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(incomplete_why, sizeof incomplete_why, fmt, ap);
    va_end(ap);
    incomplete_status = status;
  }
  pthread_mutex_unlock(&rec_lock);
}

const char *record_incomplete_why(const char **status) {
  *status = incomplete_status;
  return incomplete_why[0] ? incomplete_why : NULL;
}

/* Re-delivers sig to what was there before (OpenMPI's handler, or the
 * default) once this handler returns. */
