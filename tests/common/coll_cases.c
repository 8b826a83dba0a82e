/* coll_cases.c: backend-agnostic collective test bodies (see coll_cases.h).
 *
 * Every case is collective: all ranks make the same calls in the same order,
 * whatever they find, so a failed check on one rank never desynchronises the
 * others. A failed check is counted and printed (case_tally.h: at most
 * MAX_PRINTS per case per rank, so a broken backend does not flood the
 * log). */
#include "coll_cases.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "case_tally.h"
#include "vqc/ledger.h"
#include "vqc/status.h"
#include "vqc/tensor.h"

#define MAX_PRINTS 12

/* One rank's tally for one case, with the comm it runs on. */
typedef struct ctx {
  vqc_comm *c;
  int rank;
  int size;
  vqc_case_tally tally;
} ctx;

static ctx ctx_make(vqc_comm *c, const char *name) {
  ctx x = {c, vqc_comm_rank(c), vqc_comm_size(c),
           {vqc_comm_rank(c), name, 0, MAX_PRINTS}};
  return x;
}

#define CHECK(x, cond, ...)                                \
  do {                                                     \
    if (!(cond)) vqc_case_failf(&(x)->tally, __VA_ARGS__); \
  } while (0)

/* True when st is VQC_OK; otherwise counts a failure naming `what`. */
static bool check_ok(ctx *x, vqc_status st, const char *what) {
  if (st == VQC_OK) return true;
  vqc_case_failf(&x->tally, "%s returned %s: %s", what, vqc_status_name(st),
                 vqc_last_error());
  return false;
}

static bool check_status(ctx *x, vqc_status st, vqc_status want,
                         const char *what) {
  if (st == want) return true;
  vqc_case_failf(&x->tally, "%s returned %s, expected %s (%s)", what,
                 vqc_status_name(st), vqc_status_name(want), vqc_last_error());
  return false;
}

/* ---- buffers and element access (values travel as double: every value
 * used here is a small integer or a multiple of 1/8, exact in every dtype) */

static const vqc_dtype ALL_DTYPES[] = {VQC_F32, VQC_F64, VQC_I32, VQC_I64,
                                       VQC_U8};
#define N_DTYPES (sizeof ALL_DTYPES / sizeof ALL_DTYPES[0])

static void *xalloc(ctx *x, size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) vqc_case_failf(&x->tally, "cannot allocate %zu bytes", bytes);
  return p;
}

static void put(vqc_dtype dt, void *buf, size_t i, double v) {
  switch (dt) {
    case VQC_F32: ((float *)buf)[i] = (float)v; break;
    case VQC_F64: ((double *)buf)[i] = v; break;
    case VQC_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case VQC_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case VQC_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    default: break;
  }
}

static double get(vqc_dtype dt, const void *buf, size_t i) {
  switch (dt) {
    case VQC_F32: return ((const float *)buf)[i];
    case VQC_F64: return ((const double *)buf)[i];
    case VQC_I32: return ((const int32_t *)buf)[i];
    case VQC_I64: return (double)((const int64_t *)buf)[i];
    case VQC_U8: return ((const uint8_t *)buf)[i];
    default: return 0;
  }
}

/* Counts elements where got differs from want (bitwise, via memcmp per
 * element: every expected value is exact) and prints the first. */
static size_t compare(ctx *x, vqc_dtype dt, const void *got, const void *want,
                      size_t n, const char *label) {
  size_t esz = vqc_dtype_size(dt), wrong = 0, first = 0;
  const char *g = got, *w = want;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(g + i * esz, w + i * esz, esz) != 0) {
      if (wrong == 0) first = i;
      wrong++;
    }
  }
  if (wrong)
    vqc_case_failf(&x->tally,
                   "%s: %zu of %zu elements wrong, first at %zu: got %.17g, "
                   "expected %.17g",
                   label, wrong, n, first, get(dt, got, first),
                   get(dt, want, first));
  return wrong;
}

/* i64 values above 2^32 catch a 32-bit path; f64 values with a fraction
 * catch an integer path; every sum below stays under 2^53 (exact). */
static double scale_of(vqc_dtype dt) {
  if (dt == VQC_I64) return 8589934592.0; /* 2^33 */
  if (dt == VQC_F64) return 0.125;
  return 1.0;
}

/* Sum input, element i on rank r: (r+1) * (i%97 - 48) (u8: (r+i)%4, so the
 * sum stays below 256 for up to 85 ranks). */
static double sum_input(vqc_dtype dt, int r, size_t i) {
  if (dt == VQC_U8) return (double)(((size_t)r + i) % 4);
  return (r + 1) * ((double)(i % 97) - 48) * scale_of(dt);
}

static double sum_expected(vqc_dtype dt, int size, size_t i) {
  if (dt == VQC_U8) {
    unsigned s = 0;
    for (int r = 0; r < size; r++) s += (unsigned)(((size_t)r + i) % 4);
    return (double)(s & 0xffu); /* u8 sums wrap; none does below 86 ranks */
  }
  return (double)size * (size + 1) / 2 * ((double)(i % 97) - 48) *
         scale_of(dt);
}

/* Min/max input: a pattern whose extreme moves between ranks with i. */
static double minmax_input(vqc_dtype dt, int r, size_t i) {
  double v = (double)((i * 7 + (size_t)r * 13) % 101);
  return dt == VQC_U8 ? v : (v - 50) * scale_of(dt);
}

static double reduce_input(vqc_redop op, vqc_dtype dt, int r, size_t i) {
  return op == VQC_SUM ? sum_input(dt, r, i) : minmax_input(dt, r, i);
}

static double reduce_expected(vqc_redop op, vqc_dtype dt, int size,
                              size_t i) {
  if (op == VQC_SUM) return sum_expected(dt, size, i);
  double best = minmax_input(dt, 0, i);
  for (int r = 1; r < size; r++) {
    double v = minmax_input(dt, r, i);
    if (op == VQC_MIN ? v < best : v > best) best = v;
  }
  return best;
}

/* Gather input: distinct per (rank, index), exact in every dtype. */
static double gather_input(vqc_dtype dt, int r, size_t i) {
  if (dt == VQC_U8) return (double)(((size_t)r * 31 + i) % 256);
  return ((double)r * 1000 + (double)(i % 1000)) * scale_of(dt);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- all_reduce */

/* Element counts per dtype: 0, 1, 7, 1024 and one large count, 1<<20 for
 * f32 (the training dtype) and 1<<16 for the others, which keeps a 5-rank
 * run of every case near a second on two cores. */
#define N_COUNTS 5
static size_t count_at(vqc_dtype dt, size_t k) {
  static const size_t small[N_COUNTS - 1] = {0, 1, 7, 1024};
  if (k < N_COUNTS - 1) return small[k];
  return dt == VQC_F32 ? (size_t)1 << 20 : (size_t)1 << 16;
}

static int run_all_reduce(vqc_comm *c, vqc_redop op, const char *name) {
  ctx x = ctx_make(c, name);
  for (size_t d = 0; d < N_DTYPES; d++) {
    vqc_dtype dt = ALL_DTYPES[d];
    for (size_t k = 0; k < N_COUNTS; k++) {
      size_t n = count_at(dt, k), nb = n * vqc_dtype_size(dt);
      void *input = xalloc(&x, nb), *send = xalloc(&x, nb);
      void *recv = xalloc(&x, nb), *want = xalloc(&x, nb);
      if (!input || !send || !recv || !want) goto next;
      for (size_t i = 0; i < n; i++) {
        put(dt, input, i, reduce_input(op, dt, x.rank, i));
        put(dt, want, i, reduce_expected(op, dt, x.size, i));
      }
      char label[128];

      /* Out of place: recv starts as garbage; send must come back intact. */
      snprintf(label, sizeof label,
               "all_reduce(%s, %s, count=%zu) out-of-place",
               vqc_dtype_name(dt), vqc_redop_name(op), n);
      memcpy(send, input, nb);
      memset(recv, 0xA5, nb);
      if (check_ok(&x, vqc_all_reduce(c, send, recv, n, dt, op), label)) {
        compare(&x, dt, recv, want, n, label);
        snprintf(label, sizeof label,
                 "all_reduce(%s, %s, count=%zu) out-of-place send buffer",
                 vqc_dtype_name(dt), vqc_redop_name(op), n);
        compare(&x, dt, send, input, n, label);
      }

      /* In place: the result replaces the input. */
      snprintf(label, sizeof label, "all_reduce(%s, %s, count=%zu) in-place",
               vqc_dtype_name(dt), vqc_redop_name(op), n);
      memcpy(recv, input, nb);
      if (check_ok(&x, vqc_all_reduce(c, recv, recv, n, dt, op), label))
        compare(&x, dt, recv, want, n, label);
    next:
      free(input);
      free(send);
      free(recv);
      free(want);
    }
  }
  return x.tally.failures;
}

int vqc_case_all_reduce_sum(vqc_comm *c) {
  return run_all_reduce(c, VQC_SUM, "all_reduce_sum");
}
int vqc_case_all_reduce_min(vqc_comm *c) {
  return run_all_reduce(c, VQC_MIN, "all_reduce_min");
}
int vqc_case_all_reduce_max(vqc_comm *c) {
  return run_all_reduce(c, VQC_MAX, "all_reduce_max");
}

/* ---- all_gather */

/* 1<<20 elements only for u8: the receive buffer is size * count. */
static size_t gather_max_count(vqc_dtype dt) {
  return dt == VQC_U8 ? (size_t)1 << 20 : (size_t)1 << 16;
}

int vqc_case_all_gather(vqc_comm *c) {
  ctx x = ctx_make(c, "all_gather");
  for (size_t d = 0; d < N_DTYPES; d++) {
    vqc_dtype dt = ALL_DTYPES[d];
    size_t esz = vqc_dtype_size(dt);
    const size_t counts[] = {0, 1, 7, 1024, gather_max_count(dt)};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
      size_t n = counts[k], total = n * (size_t)x.size;
      void *send = xalloc(&x, n * esz), *recv = xalloc(&x, total * esz);
      void *want = xalloc(&x, total * esz);
      if (!send || !recv || !want) goto next;
      for (int r = 0; r < x.size; r++)
        for (size_t i = 0; i < n; i++)
          put(dt, want, (size_t)r * n + i, gather_input(dt, r, i));
      for (size_t i = 0; i < n; i++)
        put(dt, send, i, gather_input(dt, x.rank, i));
      char label[128];

      snprintf(label, sizeof label, "all_gather(%s, count=%zu) out-of-place",
               vqc_dtype_name(dt), n);
      memset(recv, 0xA5, total * esz);
      if (check_ok(&x, vqc_all_gather(c, send, recv, n, dt), label))
        compare(&x, dt, recv, want, total, label);

      /* In place: this rank's block of recv is the send buffer. */
      snprintf(label, sizeof label, "all_gather(%s, count=%zu) in-place",
               vqc_dtype_name(dt), n);
      memset(recv, 0x5A, total * esz);
      char *mine = (char *)recv + (size_t)x.rank * n * esz;
      memcpy(mine, send, n * esz);
      if (check_ok(&x, vqc_all_gather(c, mine, recv, n, dt), label))
        compare(&x, dt, recv, want, total, label);
    next:
      free(send);
      free(recv);
      free(want);
    }
  }
  return x.tally.failures;
}

/* ---- all_gatherv */

/* Count patterns, each uneven; every pattern with size > 1 has a rank that
 * sends nothing. */
static size_t gatherv_count(int pattern, int r, int size) {
  switch (pattern) {
    case 0: return (size > 1 && r == size - 1) ? 0 : (size_t)r * 5 + 3;
    case 1: return r == 0 ? 0 : 1000 + (size_t)r;
    case 2: return 0; /* everyone sends nothing */
    default: return r % 2 == 0 ? (size_t)1 << 16 : 3;
  }
}
#define N_GATHERV_PATTERNS 4

int vqc_case_all_gatherv(vqc_comm *c) {
  ctx x = ctx_make(c, "all_gatherv");
  size_t *counts = calloc((size_t)x.size, sizeof *counts);
  size_t *displ = calloc((size_t)x.size, sizeof *displ);
  if (!counts || !displ) {
    vqc_case_failf(&x.tally, "no memory");
    free(counts);
    free(displ);
    return x.tally.failures;
  }
  for (size_t d = 0; d < N_DTYPES; d++) {
    vqc_dtype dt = ALL_DTYPES[d];
    size_t esz = vqc_dtype_size(dt);
    for (int p = 0; p < N_GATHERV_PATTERNS; p++) {
      size_t total = 0;
      for (int r = 0; r < x.size; r++) {
        counts[r] = gatherv_count(p, r, x.size);
        displ[r] = total;
        total += counts[r];
      }
      size_t n = counts[x.rank];
      void *send = xalloc(&x, n * esz), *recv = xalloc(&x, total * esz);
      void *want = xalloc(&x, total * esz);
      if (!send || !recv || !want) goto next;
      for (int r = 0; r < x.size; r++)
        for (size_t i = 0; i < counts[r]; i++)
          put(dt, want, displ[r] + i, gather_input(dt, r, i));
      for (size_t i = 0; i < n; i++)
        put(dt, send, i, gather_input(dt, x.rank, i));
      char label[128];

      snprintf(label, sizeof label,
               "all_gatherv(%s, pattern %d, total=%zu) out-of-place",
               vqc_dtype_name(dt), p, total);
      memset(recv, 0xA5, total * esz);
      if (check_ok(&x, vqc_all_gatherv(c, send, n, recv, counts, dt), label))
        compare(&x, dt, recv, want, total, label);

      snprintf(label, sizeof label,
               "all_gatherv(%s, pattern %d, total=%zu) in-place",
               vqc_dtype_name(dt), p, total);
      memset(recv, 0x5A, total * esz);
      char *mine = (char *)recv + displ[x.rank] * esz;
      memcpy(mine, send, n * esz);
      if (check_ok(&x, vqc_all_gatherv(c, mine, n, recv, counts, dt), label))
        compare(&x, dt, recv, want, total, label);
    next:
      free(send);
      free(recv);
      free(want);
    }
  }
  free(counts);
  free(displ);
  return x.tally.failures;
}

/* ---- broadcast */

int vqc_case_broadcast(vqc_comm *c) {
  ctx x = ctx_make(c, "broadcast");
  for (int root = 0; root < x.size; root++) {
    for (size_t d = 0; d < N_DTYPES; d++) {
      vqc_dtype dt = ALL_DTYPES[d];
      size_t esz = vqc_dtype_size(dt);
      for (size_t k = 0; k < N_COUNTS; k++) {
        size_t n = count_at(dt, k);
        void *buf = xalloc(&x, n * esz), *want = xalloc(&x, n * esz);
        if (buf && want) {
          /* Non-roots start from their own values, so a rank that kept its
           * buffer is caught. */
          for (size_t i = 0; i < n; i++) {
            put(dt, want, i, gather_input(dt, root, i));
            put(dt, buf, i, gather_input(dt, x.rank, i));
          }
          char label[128];
          snprintf(label, sizeof label, "broadcast(%s, count=%zu, root=%d)",
                   vqc_dtype_name(dt), n, root);
          if (check_ok(&x, vqc_broadcast(c, buf, n, dt, root), label))
            compare(&x, dt, buf, want, n, label);
        }
        free(buf);
        free(want);
      }
    }
  }
  return x.tally.failures;
}

/* ---- barrier */

/* A barrier must hold every rank until the last one arrives: rank 0 arrives
 * DELAY_MS late, so every other rank must spend at least most of that in
 * the barrier. The margin (half the delay) absorbs a rank being scheduled
 * late after the aligning barrier. */
#define BARRIER_DELAY_MS 100

int vqc_case_barrier(vqc_comm *c) {
  ctx x = ctx_make(c, "barrier");
  for (int i = 0; i < 10; i++) check_ok(&x, vqc_barrier(c), "barrier");
  if (!check_ok(&x, vqc_barrier(c), "aligning barrier"))
    return x.tally.failures;
  if (x.rank == 0) sleep_ms(BARRIER_DELAY_MS);
  double t0 = now_s();
  vqc_status st = vqc_barrier(c);
  double waited = now_s() - t0;
  if (check_ok(&x, st, "barrier after rank 0's delay") && x.rank != 0)
    CHECK(&x, waited >= BARRIER_DELAY_MS / 2 / 1e3,
          "left the barrier after %.3f s although rank 0 arrived %d ms late",
          waited, BARRIER_DELAY_MS);
  return x.tally.failures;
}

/* ---- ledger */

/* Checks the record at `seq` against what this rank passed. */
static void check_record(ctx *x, vqc_ledger *l, uint64_t seq, vqc_coll_op op,
                         vqc_dtype dt, size_t count, int root, int line,
                         const char *func, const void *send, const void *recv) {
  vqc_ledger_record r;
  if (!vqc_ledger_get(l, seq, &r)) {
    vqc_case_failf(&x->tally, "record %llu is missing",
                   (unsigned long long)seq);
    return;
  }
  const char *what = vqc_coll_name(op);
  CHECK(x, r.seq == seq, "%s: seq %llu, expected %llu", what,
        (unsigned long long)r.seq, (unsigned long long)seq);
  CHECK(x, r.rank == x->rank, "%s: record rank %d", what, r.rank);
  CHECK(x, r.op == op, "%s: recorded op %s", what, vqc_coll_name(r.op));
  if (op != VQC_COLL_BARRIER) {
    CHECK(x, r.dtype == dt, "%s: recorded dtype %s", what,
          vqc_dtype_name(r.dtype));
    CHECK(x, r.sendbuf == send && r.recvbuf == recv,
          "%s: recorded buffers %p %p, passed %p %p", what, r.sendbuf,
          r.recvbuf, send, recv);
  }
  CHECK(x, r.count == count, "%s: recorded count %zu, expected %zu", what,
        r.count, count);
  CHECK(x, r.root == root, "%s: recorded root %d, expected %d", what, r.root,
        root);
  CHECK(x, r.site.file && strcmp(r.site.file, __FILE__) == 0,
        "%s: recorded file %s", what, r.site.file ? r.site.file : "(null)");
  CHECK(x, r.site.line == line, "%s: recorded line %d, expected %d", what,
        r.site.line, line);
  CHECK(x, r.site.func && strcmp(r.site.func, func) == 0,
        "%s: recorded func %s, expected %s", what,
        r.site.func ? r.site.func : "(null)", func);
  CHECK(x, r.state == VQC_REC_DONE && r.status == VQC_OK,
        "%s: state %s status %s", what, vqc_record_state_name(r.state),
        vqc_status_name(r.status));
  CHECK(x, r.t_enter_ns > 0 && r.t_exit_ns >= r.t_enter_ns,
        "%s: times enter %llu exit %llu", what,
        (unsigned long long)r.t_enter_ns, (unsigned long long)r.t_exit_ns);
}

int vqc_case_ledger(vqc_comm *c) {
  ctx x = ctx_make(c, "ledger");
  vqc_ledger *l = vqc_comm_ledger(c);
  if (!l) {
    vqc_case_failf(&x.tally, "data comm has no ledger");
    return x.tally.failures;
  }
  CHECK(&x, vqc_comm_ledger(vqc_comm_side(c)) == NULL,
        "side channel has a ledger");
  uint64_t n0 = vqc_ledger_count(l);
  float send[7] = {0}, recv[7 * 8];
  float *gathered = malloc((size_t)x.size * 7 * sizeof *gathered);
  size_t *counts = malloc((size_t)x.size * sizeof *counts);
  if (!gathered || !counts) {
    vqc_case_failf(&x.tally, "no memory");
    goto done;
  }
  for (int r = 0; r < x.size; r++) counts[r] = (size_t)(r % 3);

  /* Each call sits on one line, the line after the one that notes it. */
  int lines[5];
  vqc_status st;
  lines[0] = __LINE__ + 1;
  st = vqc_all_reduce(c, send, recv, 7, VQC_F32, VQC_MAX);
  check_ok(&x, st, "all_reduce");
  lines[1] = __LINE__ + 1;
  st = vqc_all_gather(c, send, gathered, 7, VQC_F32);
  check_ok(&x, st, "all_gather");
  lines[2] = __LINE__ + 1;
  st = vqc_all_gatherv(c, send, counts[x.rank], gathered, counts, VQC_F32);
  check_ok(&x, st, "all_gatherv");
  lines[3] = __LINE__ + 1;
  st = vqc_broadcast(c, recv, 5, VQC_F32, x.size - 1);
  check_ok(&x, st, "broadcast");
  lines[4] = __LINE__ + 1;
  st = vqc_barrier(c);
  check_ok(&x, st, "barrier");

  CHECK(&x, vqc_ledger_count(l) == n0 + 5,
        "ledger count %llu after 5 collectives from %llu",
        (unsigned long long)vqc_ledger_count(l), (unsigned long long)n0);
  check_record(&x, l, n0, VQC_COLL_ALL_REDUCE, VQC_F32, 7, -1, lines[0],
               __func__, send, recv);
  vqc_ledger_record r;
  if (vqc_ledger_get(l, n0, &r))
    CHECK(&x, r.redop == VQC_MAX, "all_reduce: recorded redop %s",
          vqc_redop_name(r.redop));
  check_record(&x, l, n0 + 1, VQC_COLL_ALL_GATHER, VQC_F32, 7, -1, lines[1],
               __func__, send, gathered);
  check_record(&x, l, n0 + 2, VQC_COLL_ALL_GATHERV, VQC_F32, counts[x.rank],
               -1, lines[2], __func__, send, gathered);
  check_record(&x, l, n0 + 3, VQC_COLL_BROADCAST, VQC_F32, 5, x.size - 1,
               lines[3], __func__, recv, recv);
  check_record(&x, l, n0 + 4, VQC_COLL_BARRIER, VQC_U8, 0, -1, lines[4],
               __func__, NULL, NULL);

  CHECK(&x, !vqc_ledger_in_flight(l, &r), "a record is still in flight");
  if (!vqc_ledger_last_done(l, &r) || r.seq != n0 + 4)
    vqc_case_failf(&x.tally, "last done record is not seq %llu",
                   (unsigned long long)n0 + 4);
  vqc_ledger_record snap[5];
  size_t got = vqc_ledger_snapshot(l, snap, 5);
  CHECK(&x, got == 5, "snapshot of 5 returned %zu", got);
  for (size_t i = 0; i < got; i++)
    CHECK(&x, snap[i].seq == n0 + i, "snapshot[%zu].seq %llu", i,
          (unsigned long long)snap[i].seq);

  /* A call rejected by validation moves nothing and records nothing (every
   * rank makes it, so none waits). */
  check_status(&x, vqc_broadcast(c, recv, 1, VQC_F32, x.size), VQC_EINVAL,
               "broadcast with root == size");
  check_status(&x, vqc_all_reduce(c, send, recv, 1, VQC_F32, VQC_REDOP_COUNT),
               VQC_EINVAL, "all_reduce with a bad redop");
  CHECK(&x, vqc_ledger_count(l) == n0 + 5,
        "rejected calls were recorded (count %llu)",
        (unsigned long long)vqc_ledger_count(l));
done:
  free(gathered);
  free(counts);
  return x.tally.failures;
}

/* ---- events */

typedef struct event_entry {
  int tag;                 /* which handler saw it */
  vqc_event_phase phase;
  uint64_t seq;
  vqc_record_state state;
  vqc_coll_op op;
  vqc_comm *comm;
  const size_t *counts;
  vqc_tensor *tensor;
  bool has_origin;
  vqc_storage *origin_storage;
  double recv0;            /* recv[0] (as f64) when the event fired */
} event_entry;

typedef struct event_log {
  int n;
  event_entry e[16];
  vqc_status before_ret;   /* what a BEFORE call returns (veto if non-OK) */
  vqc_status after_ret;
} event_log;

typedef struct event_sub {
  event_log *log;
  int tag;
} event_sub;

static vqc_status log_event(const vqc_coll_event *ev, void *user) {
  event_sub *sub = user;
  event_log *log = sub->log;
  if (log->n < 16) {
    event_entry *e = &log->e[log->n];
    const vqc_ledger_record *r = ev->record;
    e->tag = sub->tag;
    e->phase = ev->phase;
    e->seq = r->seq;
    e->state = r->state;
    e->op = r->op;
    e->comm = ev->comm;
    e->counts = ev->counts;
    e->tensor = ev->tensor;
    e->has_origin = ev->tensor && vqc_tensor_has_origin(ev->tensor);
    e->origin_storage = ev->tensor ? ev->tensor->origin.storage : NULL;
    e->recv0 = (r->count > 0 && r->recvbuf && r->op == VQC_COLL_ALL_REDUCE)
                   ? get(r->dtype, r->recvbuf, 0)
                   : 0;
  }
  log->n++;
  return ev->phase == VQC_EVENT_BEFORE ? log->before_ret : log->after_ret;
}

/* The two events of one collective, in order, from handler `tag`. */
static void check_pair(ctx *x, const event_log *log, int first, int tag,
                       uint64_t seq, vqc_coll_op op, vqc_comm *c,
                       vqc_record_state after_state, const char *what) {
  if (log->n < first + 2) {
    vqc_case_failf(&x->tally, "%s: %d events, expected at least %d", what,
                   log->n, first + 2);
    return;
  }
  const event_entry *b = &log->e[first], *a = &log->e[first + 1];
  CHECK(x, b->tag == tag && b->phase == VQC_EVENT_BEFORE &&
               b->state == VQC_REC_ENTERED,
        "%s: event %d is tag %d phase %d state %s, expected BEFORE/entered",
        what, first, b->tag, (int)b->phase, vqc_record_state_name(b->state));
  CHECK(x, a->tag == tag && a->phase == VQC_EVENT_AFTER &&
               a->state == after_state,
        "%s: event %d is tag %d phase %d state %s, expected AFTER/%s", what,
        first + 1, a->tag, (int)a->phase, vqc_record_state_name(a->state),
        vqc_record_state_name(after_state));
  CHECK(x, b->seq == seq && a->seq == seq, "%s: events carry seq %llu/%llu, "
        "expected %llu", what, (unsigned long long)b->seq,
        (unsigned long long)a->seq, (unsigned long long)seq);
  CHECK(x, b->op == op && a->op == op, "%s: events carry op %s/%s", what,
        vqc_coll_name(b->op), vqc_coll_name(a->op));
  CHECK(x, b->comm == c && a->comm == c, "%s: event comm is not the caller's",
        what);
}

int vqc_case_events(vqc_comm *c) {
  ctx x = ctx_make(c, "events");
  vqc_ledger *l = vqc_comm_ledger(c);
  event_log log = {0};
  event_sub s1 = {&log, 1}, s2 = {&log, 2};
  size_t *counts = calloc((size_t)x.size, sizeof *counts);
  double *gathered = calloc((size_t)x.size + 1, sizeof *gathered);
  if (!l || !counts || !gathered) {
    vqc_case_failf(&x.tally, "no ledger or no memory");
    goto done;
  }
  if (!check_ok(&x, vqc_comm_subscribe(c, log_event, &s1), "subscribe"))
    goto done;

  /* all_reduce out of place: BEFORE sees recv untouched, AFTER the sum. */
  double send[3] = {x.rank + 1.0, 0, 0}, recv[3] = {-1, -1, -1};
  uint64_t seq = vqc_ledger_count(l);
  check_ok(&x, vqc_all_reduce(c, send, recv, 3, VQC_F64, VQC_SUM),
           "all_reduce");
  CHECK(&x, log.n == 2, "all_reduce raised %d events, expected 2", log.n);
  check_pair(&x, &log, 0, 1, seq, VQC_COLL_ALL_REDUCE, c, VQC_REC_DONE,
             "all_reduce");
  CHECK(&x, log.e[0].recv0 == -1,
        "BEFORE saw recv[0] = %g: data moved before the event", log.e[0].recv0);
  CHECK(&x, log.e[1].recv0 == x.size * (x.size + 1) / 2.0,
        "AFTER saw recv[0] = %g, expected the sum %g", log.e[1].recv0,
        x.size * (x.size + 1) / 2.0);
  CHECK(&x, log.e[0].counts == NULL && log.e[0].tensor == NULL,
        "all_reduce event carries counts or a tensor");

  /* all_gatherv: the events carry the counts array. */
  for (int r = 0; r < x.size; r++) counts[r] = r == 0 ? 1 : 0;
  log.n = 0;
  seq = vqc_ledger_count(l);
  check_ok(&x, vqc_all_gatherv(c, send, counts[x.rank], gathered, counts,
                               VQC_F64),
           "all_gatherv");
  check_pair(&x, &log, 0, 1, seq, VQC_COLL_ALL_GATHERV, c, VQC_REC_DONE,
             "all_gatherv");
  CHECK(&x, log.e[0].counts == counts && log.e[1].counts == counts,
        "all_gatherv events do not carry the counts array");

  /* Two handlers run in subscription order, for BEFORE and for AFTER. */
  if (check_ok(&x, vqc_comm_subscribe(c, log_event, &s2), "subscribe 2")) {
    log.n = 0;
    seq = vqc_ledger_count(l);
    check_ok(&x, vqc_barrier(c), "barrier");
    CHECK(&x, log.n == 4, "barrier with 2 handlers raised %d events", log.n);
    if (log.n == 4)
      CHECK(&x, log.e[0].tag == 1 && log.e[1].tag == 2 && log.e[2].tag == 1 &&
                    log.e[3].tag == 2 && log.e[0].phase == VQC_EVENT_BEFORE &&
                    log.e[1].phase == VQC_EVENT_BEFORE &&
                    log.e[2].phase == VQC_EVENT_AFTER &&
                    log.e[3].phase == VQC_EVENT_AFTER,
            "handler order: tags %d %d %d %d", log.e[0].tag, log.e[1].tag,
            log.e[2].tag, log.e[3].tag);
    vqc_comm_unsubscribe(c, log_event, &s2);
  }

  /* After unsubscribing, no events. */
  vqc_comm_unsubscribe(c, log_event, &s1);
  log.n = 0;
  check_ok(&x, vqc_barrier(c), "barrier");
  CHECK(&x, log.n == 0, "%d events after unsubscribing", log.n);
done:
  free(counts);
  free(gathered);
  return x.tally.failures;
}

/* ---- veto */

int vqc_case_veto(vqc_comm *c) {
  ctx x = ctx_make(c, "veto");
  vqc_ledger *l = vqc_comm_ledger(c);
  event_log log = {0};
  event_sub sub = {&log, 1};
  if (!l || !check_ok(&x, vqc_comm_subscribe(c, log_event, &sub), "subscribe"))
    return x.tally.failures;

  /* Every rank vetoes, so no rank waits for a peer that never comes. */
  log.before_ret = VQC_EMISMATCH;
  int32_t send[4] = {1, 2, 3, 4}, recv[4] = {-7, -7, -7, -7};
  uint64_t seq = vqc_ledger_count(l);
  check_status(&x, vqc_all_reduce(c, send, recv, 4, VQC_I32, VQC_SUM),
               VQC_EMISMATCH, "vetoed all_reduce");
  for (int i = 0; i < 4; i++)
    CHECK(&x, recv[i] == -7 && send[i] == i + 1,
          "vetoed all_reduce moved data: recv[%d] = %d send[%d] = %d", i,
          recv[i], i, send[i]);
  check_pair(&x, &log, 0, 1, seq, VQC_COLL_ALL_REDUCE, c, VQC_REC_FAILED,
             "vetoed all_reduce");
  vqc_ledger_record r;
  if (vqc_ledger_get(l, seq, &r))
    CHECK(&x, r.state == VQC_REC_FAILED && r.status == VQC_EMISMATCH,
          "vetoed record: state %s status %s", vqc_record_state_name(r.state),
          vqc_status_name(r.status));
  else
    vqc_case_failf(&x.tally, "vetoed collective left no record");

  /* A vetoed broadcast leaves non-root buffers alone. */
  int32_t buf[2] = {x.rank, x.rank};
  check_status(&x, vqc_broadcast(c, buf, 2, VQC_I32, 0), VQC_EMISMATCH,
               "vetoed broadcast");
  CHECK(&x, buf[0] == x.rank && buf[1] == x.rank,
        "vetoed broadcast changed the buffer to %d %d", buf[0], buf[1]);

  /* An AFTER error becomes the status of a collective that succeeded; the
   * data has moved. */
  log.before_ret = VQC_OK;
  log.after_ret = VQC_EIO;
  check_status(&x, vqc_all_reduce(c, send, recv, 4, VQC_I32, VQC_SUM),
               VQC_EIO, "all_reduce with an AFTER error");
  for (int i = 0; i < 4; i++)
    CHECK(&x, recv[i] == (i + 1) * x.size,
          "all_reduce with an AFTER error: recv[%d] = %d, expected %d", i,
          recv[i], (i + 1) * x.size);

  /* The comm is still in step after the vetoes. */
  vqc_comm_unsubscribe(c, log_event, &sub);
  int64_t one = 1, total = 0;
  if (check_ok(&x, vqc_all_reduce(c, &one, &total, 1, VQC_I64, VQC_SUM),
               "all_reduce after vetoes"))
    CHECK(&x, total == x.size, "all_reduce after vetoes gave %lld",
          (long long)total);
  return x.tally.failures;
}

/* ---- tensors */

int vqc_case_tensor(vqc_comm *c) {
  ctx x = ctx_make(c, "tensor");
  event_log log = {0};
  event_sub sub = {&log, 1};
  vqc_tensor t = {0}, tt = {0}, copy = {0};
  const int64_t shape[2] = {3, 5};
  if (!check_ok(&x, vqc_tensor_zeros(&t, VQC_F32, 2, shape, VQC_DEVICE_CPU),
                "tensor_zeros"))
    return x.tally.failures;
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 5; j++)
      vqc_tensor_set(&t, (int64_t[]){i, j}, (x.rank + 1) * (i * 5 + j + 1.0));
  if (!check_ok(&x, vqc_tensor_transpose(&t, 0, 1, &tt), "transpose") ||
      !check_ok(&x, vqc_tensor_contiguous(&tt, &copy), "contiguous"))
    goto done;
  CHECK(&x, vqc_tensor_has_origin(&copy), "contiguous copy has no origin");
  vqc_ledger *l = vqc_comm_ledger(c);
  uint64_t n0 = vqc_ledger_count(l);

  /* A strided tensor is refused before anything is recorded or moved. */
  check_status(&x, vqc_all_reduce_tensor(c, &tt, VQC_SUM), VQC_ESHAPE,
               "all_reduce_tensor on a transposed view");
  CHECK(&x, vqc_ledger_count(l) == n0, "refused call was recorded");

  if (!check_ok(&x, vqc_comm_subscribe(c, log_event, &sub), "subscribe"))
    goto done;
  check_ok(&x, vqc_all_reduce_tensor(c, &copy, VQC_SUM), "all_reduce_tensor");
  vqc_comm_unsubscribe(c, log_event, &sub);
  check_pair(&x, &log, 0, 1, n0, VQC_COLL_ALL_REDUCE, c, VQC_REC_DONE,
             "all_reduce_tensor");
  for (int k = 0; k < 2 && k < log.n; k++)
    CHECK(&x, log.e[k].tensor == &copy && log.e[k].has_origin &&
                  log.e[k].origin_storage == t.storage,
          "event %d: tensor %p (expected %p), origin %d, origin storage is %s",
          k, (void *)log.e[k].tensor, (void *)&copy, log.e[k].has_origin,
          log.e[k].origin_storage == t.storage ? "t's" : "not t's");
  vqc_ledger_record r;
  if (vqc_ledger_get(l, n0, &r))
    CHECK(&x, r.count == 15 && r.dtype == VQC_F32 &&
                  r.sendbuf == vqc_tensor_data(&copy) &&
                  r.recvbuf == vqc_tensor_data(&copy),
          "tensor record: count %zu dtype %s buffers not the copy's", r.count,
          vqc_dtype_name(r.dtype));

  /* The copy holds the sum; the original does not (the #101 bug) until the
   * copy is written back. */
  double tri = x.size * (x.size + 1) / 2.0;
  int wrong_copy = 0, wrong_orig = 0, wrong_back = 0;
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 5; j++) {
      double base = i * 5 + j + 1.0;
      if (vqc_tensor_get(&copy, (int64_t[]){j, i}) != base * tri) wrong_copy++;
      if (vqc_tensor_get(&t, (int64_t[]){i, j}) != base * (x.rank + 1))
        wrong_orig++;
    }
  CHECK(&x, wrong_copy == 0, "%d elements of the reduced copy wrong",
        wrong_copy);
  CHECK(&x, wrong_orig == 0, "%d elements of the original changed",
        wrong_orig);
  if (check_ok(&x, vqc_tensor_copy_to_origin(&copy), "copy_to_origin")) {
    for (int64_t i = 0; i < 3; i++)
      for (int64_t j = 0; j < 5; j++)
        if (vqc_tensor_get(&t, (int64_t[]){i, j}) != (i * 5 + j + 1.0) * tri)
          wrong_back++;
    CHECK(&x, wrong_back == 0, "%d elements wrong after copy_to_origin",
          wrong_back);
  }
done:
  vqc_tensor_free(&copy);
  vqc_tensor_free(&tt);
  vqc_tensor_free(&t);
  return x.tally.failures;
}

/* ---- side channel */

int vqc_case_side_channel(vqc_comm *c) {
  ctx x = ctx_make(c, "side_channel");
  vqc_comm *side = vqc_comm_side(c);
  if (!side || side == c) {
    vqc_case_failf(&x.tally, "no side channel");
    return x.tally.failures;
  }
  CHECK(&x, vqc_comm_rank(side) == x.rank && vqc_comm_size(side) == x.size &&
                vqc_comm_backend(side) == vqc_comm_backend(c),
        "side channel rank/size/backend differ");
  CHECK(&x, vqc_comm_ledger(side) == NULL, "side channel has a ledger");
  CHECK(&x, vqc_comm_side(side) == NULL, "side channel has a side channel");
  vqc_ledger *l = vqc_comm_ledger(c);
  event_log log = {0};
  event_sub sub = {&log, 1};
  check_ok(&x, vqc_comm_subscribe(c, log_event, &sub), "subscribe");
  uint64_t n0 = vqc_ledger_count(l);

  int64_t v = (int64_t)(x.rank + 1) << 33, sum = 0;
  if (check_ok(&x, vqc_all_reduce(side, &v, &sum, 1, VQC_I64, VQC_SUM),
               "side all_reduce"))
    CHECK(&x, sum == ((int64_t)x.size * (x.size + 1) / 2) << 33,
          "side all_reduce gave %lld", (long long)sum);
  int32_t *all = calloc((size_t)x.size, sizeof *all);
  int32_t me = 100 + x.rank;
  if (all && check_ok(&x, vqc_all_gather(side, &me, all, 1, VQC_I32),
                      "side all_gather"))
    for (int r = 0; r < x.size; r++)
      CHECK(&x, all[r] == 100 + r, "side all_gather[%d] = %d", r, all[r]);
  free(all);
  int32_t b = x.rank == x.size - 1 ? 77 : -1;
  if (check_ok(&x, vqc_broadcast(side, &b, 1, VQC_I32, x.size - 1),
               "side broadcast"))
    CHECK(&x, b == 77, "side broadcast gave %d", b);
  check_ok(&x, vqc_barrier(side), "side barrier");

  /* Interleaved with data collectives, only the data ones are recorded. */
  check_ok(&x, vqc_barrier(c), "data barrier");
  check_ok(&x, vqc_all_reduce(side, &v, &sum, 1, VQC_I64, VQC_SUM),
           "side all_reduce");
  check_ok(&x, vqc_barrier(c), "data barrier");
  CHECK(&x, vqc_ledger_count(l) == n0 + 2,
        "ledger grew by %llu for 2 data and 5 side collectives",
        (unsigned long long)(vqc_ledger_count(l) - n0));
  CHECK(&x, log.n == 4, "%d events for 2 data and 5 side collectives",
        log.n);
  vqc_comm_unsubscribe(c, log_event, &sub);
  check_status(&x, vqc_comm_subscribe(side, log_event, &sub), VQC_EINVAL,
               "subscribe on a side channel");
  return x.tally.failures;
}

/* ---- sequence */

#define SEQ_ROUNDS 200

int vqc_case_sequence(vqc_comm *c) {
  ctx x = ctx_make(c, "sequence");
  vqc_ledger *l = vqc_comm_ledger(c);
  uint64_t n0 = vqc_ledger_count(l);
  int line = 0;
  for (int k = 0; k < SEQ_ROUNDS; k++) {
    /* Round k's value names the round, so ranks out of step would sum
     * different rounds and miss (k+1) * size(size+1)/2. */
    int64_t v = (int64_t)(k + 1) * (x.rank + 1), sum = 0;
    line = __LINE__ + 1;
    vqc_status st = vqc_all_reduce(c, &v, &sum, 1, VQC_I64, VQC_SUM);
    if (!check_ok(&x, st, "all_reduce")) continue;
    CHECK(&x, sum == (int64_t)(k + 1) * x.size * (x.size + 1) / 2,
          "round %d: sum %lld", k, (long long)sum);
  }
  CHECK(&x, vqc_ledger_count(l) == n0 + SEQ_ROUNDS,
        "ledger count grew by %llu, expected %d",
        (unsigned long long)(vqc_ledger_count(l) - n0), SEQ_ROUNDS);
  for (uint64_t s = n0; s < n0 + SEQ_ROUNDS; s++) {
    vqc_ledger_record r;
    if (!vqc_ledger_get(l, s, &r)) {
      vqc_case_failf(&x.tally, "record %llu missing", (unsigned long long)s);
      break;
    }
    CHECK(&x, r.seq == s && r.site.line == line && r.state == VQC_REC_DONE,
          "record %llu: seq %llu line %d state %s", (unsigned long long)s,
          (unsigned long long)r.seq, r.site.line,
          vqc_record_state_name(r.state));
  }
  return x.tally.failures;
}

/* ---- runner */

const vqc_coll_case vqc_coll_cases[] = {
    {"all_reduce_sum", vqc_case_all_reduce_sum},
    {"all_reduce_min", vqc_case_all_reduce_min},
    {"all_reduce_max", vqc_case_all_reduce_max},
    {"all_gather", vqc_case_all_gather},
    {"all_gatherv", vqc_case_all_gatherv},
    {"broadcast", vqc_case_broadcast},
    {"barrier", vqc_case_barrier},
    {"ledger", vqc_case_ledger},
    {"events", vqc_case_events},
    {"veto", vqc_case_veto},
    {"tensor", vqc_case_tensor},
    {"side_channel", vqc_case_side_channel},
    {"sequence", vqc_case_sequence},
};
const int vqc_coll_case_count =
    (int)(sizeof vqc_coll_cases / sizeof vqc_coll_cases[0]);

int vqc_coll_global_failures(vqc_comm *c, int local) {
  int64_t mine = local, total = 0;
  vqc_status st =
      vqc_all_reduce(vqc_comm_side(c), &mine, &total, 1, VQC_I64, VQC_SUM);
  if (st != VQC_OK) {
    fprintf(stderr, "[rank %d] cannot agree on failures: %s: %s\n",
            vqc_comm_rank(c), vqc_status_name(st), vqc_last_error());
    return local + 1;
  }
  return (int)total;
}

bool vqc_coll_case_report(vqc_comm *c, const char *name, int local,
                          const char *figures) {
  int global = vqc_coll_global_failures(c, local);
  if (vqc_comm_rank(c) == 0) {
    const char *verdict = global ? "FAILED" : "ok";
    if (figures) printf("%s: %s (%s)\n", name, verdict, figures);
    else printf("%s: %s\n", name, verdict);
    fflush(stdout);
  }
  return global == 0;
}

int vqc_run_case_list(vqc_comm *c, const vqc_coll_case *cases, int n) {
  int failed_cases = 0;
  for (int i = 0; i < n; i++) {
    int local = cases[i].fn(c);
    if (!vqc_coll_case_report(c, cases[i].name, local, NULL)) failed_cases++;
  }
  return failed_cases;
}

int vqc_run_coll_cases(vqc_comm *c) {
  return vqc_run_case_list(c, vqc_coll_cases, vqc_coll_case_count);
}
