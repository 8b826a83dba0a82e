/* test_ledger.c: the ledger's lock-free readers against its running writer.
 *
 * The ledger has one writer (the thread driving the comm) and readers on
 * other threads (a watchdog, a dump) that copy records through a per-record
 * seqlock (lib/src/comm/ledger.c). Here two ranks run many small all_reduces
 * whose every field is a function of the sequence number, while a third
 * thread reads continuously with every reader (in_flight, get, last_done,
 * snapshot); any torn or mixed copy breaks that function and is counted.
 * Also: count, get and snapshot agree with what was called, a ring that
 * wrapped keeps exactly the newest VQC_LEDGER_DEFAULT_CAPACITY records, and
 * the writer (ledger_internal.h), which at close rewrites only the fields
 * that change, still publishes every field, and leaves alone a slot that
 * records opened meanwhile have taken over. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/ledger_internal.h" /* the writer: open, close */
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/status.h"

#define ROUNDS 20000

/* Record k of rank 0 all_reduces count(k) elements of buf[k % 2]: a reader
 * can check any record it copies against its seq alone. */
static size_t count_of(uint64_t k) { return (size_t)(k % 7) + 1; }

typedef struct rw_arg {
  vqc_comm *c;
  int64_t buf[2][8], out[8];
  vqc_status st;
  atomic_int done;
  /* reader's: the call site of the first record it copied (one site
   * made them all), and its tallies */
  int line;
  long copies, torn, in_flight_seen, snapshot_bad;
} rw_arg;

static void *writer(void *p) {
  rw_arg *a = p;
  vqc_status s = VQC_OK;
  for (uint64_t k = 0; k < ROUNDS && s == VQC_OK; k++)
    s = vqc_all_reduce(a->c, a->buf[k % 2], a->out, count_of(k), VQC_I64,
                       VQC_MAX);
  a->st = s;
  atomic_store(&a->done, 1);
  return NULL;
}

/* Whether r is a whole record of writer(): every field matches its seq. */
static bool consistent(rw_arg *a, const vqc_ledger_record *r) {
  if (a->line == 0) a->line = r->site.line;
  return r->count == count_of(r->seq) && r->sendbuf == a->buf[r->seq % 2] &&
         r->recvbuf == a->out && r->op == VQC_COLL_ALL_REDUCE &&
         r->redop == VQC_MAX && r->dtype == VQC_I64 && r->root == -1 &&
         r->rank == 0 && r->site.line == a->line && r->t_enter_ns > 0 &&
         (r->state == VQC_REC_ENTERED ? r->t_exit_ns == 0
                                      : r->state == VQC_REC_DONE &&
                                            r->t_exit_ns >= r->t_enter_ns &&
                                            r->status == VQC_OK);
}

static void *reader(void *p) {
  rw_arg *a = p;
  vqc_ledger *l = vqc_comm_ledger(a->c);
  vqc_ledger_record snap[16], r;
  while (!atomic_load(&a->done)) {
    if (vqc_ledger_in_flight(l, &r)) {
      a->in_flight_seen++;
      a->copies++;
      if (!consistent(a, &r) || r.state != VQC_REC_ENTERED) a->torn++;
    }
    uint64_t n = vqc_ledger_count(l);
    if (n > 0 && vqc_ledger_get(l, n - 1, &r)) {
      a->copies++;
      if (!consistent(a, &r) || r.seq != n - 1) a->torn++;
    }
    if (vqc_ledger_last_done(l, &r)) {
      a->copies++;
      if (!consistent(a, &r) || r.state != VQC_REC_DONE) a->torn++;
    }
    size_t got = vqc_ledger_snapshot(l, snap, 16);
    for (size_t i = 0; i < got; i++) {
      a->copies++;
      if (!consistent(a, &snap[i])) a->torn++;
      if (i > 0 && snap[i].seq <= snap[i - 1].seq) a->snapshot_bad++;
    }
  }
  return NULL;
}

/* Rank 1 of the world: matches rank 0's calls (its own ledger is not read). */
static void *peer(void *p) {
  vqc_comm *c = p;
  int64_t in[8] = {0}, out[8];
  for (uint64_t k = 0; k < ROUNDS; k++)
    if (vqc_all_reduce(c, in, out, count_of(k), VQC_I64, VQC_MAX) != VQC_OK)
      break;
  return NULL;
}

Test(ledger, readers_never_see_torn_records, .timeout = 60) {
  vqc_threads_world *w = NULL;
  cr_assert_eq(vqc_threads_world_create(2, &w), VQC_OK);
  static rw_arg a;
  memset(&a, 0, sizeof a);
  a.c = vqc_threads_world_comm(w, 0);
  pthread_t tw, tp, tr;
  cr_assert_eq(pthread_create(&tr, NULL, reader, &a), 0);
  cr_assert_eq(pthread_create(&tp, NULL, peer, vqc_threads_world_comm(w, 1)),
               0);
  cr_assert_eq(pthread_create(&tw, NULL, writer, &a), 0);
  pthread_join(tw, NULL);
  pthread_join(tp, NULL);
  pthread_join(tr, NULL);

  cr_expect_eq(a.st, VQC_OK, "%s", vqc_status_name(a.st));
  cr_expect_eq(a.torn, 0, "%ld of %ld copies were torn or mixed", a.torn,
               a.copies);
  cr_expect_eq(a.snapshot_bad, 0, "snapshots out of order %ld times",
               a.snapshot_bad);
  cr_expect_gt(a.copies, 100, "the reader copied only %ld records", a.copies);

  /* After the run: every record is there and DONE. */
  vqc_ledger *l = vqc_comm_ledger(a.c);
  cr_expect_eq(vqc_ledger_count(l), ROUNDS);
  vqc_ledger_record r;
  cr_expect(!vqc_ledger_in_flight(l, &r), "a record is still in flight");
  cr_assert(vqc_ledger_get(l, ROUNDS - 1, &r));
  cr_expect(consistent(&a, &r) && r.state == VQC_REC_DONE);
  cr_expect_str_eq(r.site.func, "writer");
  cr_expect_gt(r.site.line, 0);
  cr_expect(!vqc_ledger_get(l, ROUNDS, &r), "got a record never opened");
  vqc_threads_world_destroy(w);
}

/* One rank, more calls than the ring holds: the oldest are dropped. */
Test(ledger, ring_keeps_the_newest, .timeout = 60) {
  vqc_threads_world *w = NULL;
  cr_assert_eq(vqc_threads_world_create(1, &w), VQC_OK);
  vqc_comm *c = vqc_threads_world_comm(w, 0);
  const uint64_t cap = VQC_LEDGER_DEFAULT_CAPACITY, n = cap + 100;
  for (uint64_t k = 0; k < n; k++)
    cr_assert_eq(vqc_barrier(c), VQC_OK);
  vqc_ledger *l = vqc_comm_ledger(c);
  vqc_ledger_record r;
  cr_expect_eq(vqc_ledger_count(l), n);
  cr_expect(!vqc_ledger_get(l, 99, &r), "record 99 should be overwritten");
  cr_expect(vqc_ledger_get(l, 100, &r) && r.seq == 100, "oldest kept");
  cr_expect(vqc_ledger_get(l, n - 1, &r) && r.seq == n - 1, "newest");
  vqc_ledger_record *all = malloc((size_t)cap * 2 * sizeof *all);
  cr_assert_not_null(all);
  size_t got = vqc_ledger_snapshot(l, all, (size_t)cap * 2);
  cr_expect_eq(got, cap);
  cr_expect(got > 0 && all[0].seq == 100 && all[got - 1].seq == n - 1,
            "snapshot spans %llu..%llu", (unsigned long long)all[0].seq,
            (unsigned long long)all[got - 1].seq);
  free(all);
  vqc_threads_world_destroy(w);
}

/* A record with every field set to something open and close leave alone. */
static vqc_ledger_record filled(size_t count) {
  static int bufs[2];
  vqc_ledger_record r;
  memset(&r, 0, sizeof r);
  r.op = VQC_COLL_ALL_REDUCE;
  r.redop = VQC_MAX;
  r.dtype = VQC_I32;
  r.count = count;
  r.root = -1;
  r.site = (vqc_site){"a.c", 41, "fn"};
  r.sendbuf = &bufs[0];
  r.recvbuf = &bufs[1];
  return r;
}

/* Close writes only t_exit_ns, state and status into the slot; what a
 * reader gets must still be the caller's whole record. */
Test(ledger, close_publishes_every_field) {
  vqc_ledger *l = NULL;
  cr_assert_eq(vqc_ledger_create(5, 4, &l), VQC_OK);
  vqc_ledger_record r = filled(3), got;
  vqc_ledger_open(l, &r);
  cr_assert(vqc_ledger_get(l, 0, &got));
  cr_expect_eq(got.state, VQC_REC_ENTERED);
  cr_expect_eq(got.t_exit_ns, 0);
  vqc_ledger_close(l, &r, VQC_ETIMEOUT);
  cr_assert(vqc_ledger_get(l, 0, &got));
  cr_expect_eq(got.seq, 0);
  cr_expect_eq(got.rank, 5);
  cr_expect_eq(got.op, r.op);
  cr_expect_eq(got.redop, r.redop);
  cr_expect_eq(got.dtype, r.dtype);
  cr_expect_eq(got.count, r.count);
  cr_expect_eq(got.root, r.root);
  cr_expect_eq(got.site.file, r.site.file);
  cr_expect_eq(got.site.line, r.site.line);
  cr_expect_eq(got.site.func, r.site.func);
  cr_expect_eq(got.sendbuf, r.sendbuf);
  cr_expect_eq(got.recvbuf, r.recvbuf);
  cr_expect_eq(got.t_enter_ns, r.t_enter_ns);
  cr_expect_gt(got.t_enter_ns, 0);
  cr_expect_eq(got.t_exit_ns, r.t_exit_ns);
  cr_expect_geq(got.t_exit_ns, got.t_enter_ns);
  cr_expect_eq(got.state, VQC_REC_FAILED);
  cr_expect_eq(got.status, VQC_ETIMEOUT);
  vqc_ledger_destroy(l);
}

/* Records opened while one is in flight (from an event handler) that go
 * round the whole ring take its slot; its late close must not put the old
 * record back over the newer one. */
Test(ledger, a_late_close_leaves_the_newer_record) {
  vqc_ledger *l = NULL;
  cr_assert_eq(vqc_ledger_create(0, 4, &l), VQC_OK);
  vqc_ledger_record first = filled(100);
  vqc_ledger_open(l, &first); /* seq 0, slot 0 */
  for (size_t k = 1; k <= 4; k++) { /* seq 4 takes slot 0 */
    vqc_ledger_record r = filled(k);
    vqc_ledger_open(l, &r);
    vqc_ledger_close(l, &r, VQC_OK);
  }
  vqc_ledger_close(l, &first, VQC_OK);
  vqc_ledger_record got;
  cr_expect(!vqc_ledger_get(l, 0, &got), "record 0 is older than the ring");
  cr_assert(vqc_ledger_get(l, 4, &got), "record 4 was overwritten");
  cr_expect_eq(got.count, 4);
  cr_expect_eq(got.state, VQC_REC_DONE);
  cr_expect(!vqc_ledger_in_flight(l, &got), "nothing is in flight");
  vqc_ledger_destroy(l);
}
