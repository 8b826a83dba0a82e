/* test_mpi_reqs.c: the interposer's table of point-to-point requests
 * (interpose/vqc_mpi_reqs.c) against a plain array that holds the same
 * entries: after every put and take, each handle ever used is found in
 * the table exactly when the array has it, with its value. Handles are
 * fake pointers 16 bytes apart, as OpenMPI's (heap objects) are, so they
 * share low bits and collide in the hash; deletions in the middle of
 * probe runs exercise the backward shift. No MPI library call is made
 * (the table only compares handles), so no mpiexec is needed. */
#include "vqc_mpi_reqs.h"

#include <criterion/criterion.h>
#include <stdint.h>

#define NH 4096 /* distinct handles; the table grows through 8192 slots */

static MPI_Request handle(int i) {
  return (MPI_Request)(uintptr_t)(0x10000 + 16 * (uintptr_t)i);
}

/* The reference: value tag of handle i, or -1 when absent. */
static int ref[NH];

static void agree(const vqc_reqs *t) {
  size_t n = 0;
  for (int i = 0; i < NH; i++) {
    const vqc_p2p_req *q = vqc_reqs_find(t, handle(i));
    if (ref[i] < 0) {
      cr_assert_null(q, "handle %d found after it was taken", i);
    } else {
      cr_assert_not_null(q, "handle %d (tag %d) lost", i, ref[i]);
      cr_assert_eq(q->tag, ref[i], "handle %d: tag %d, expected %d", i,
                   q->tag, ref[i]);
      n++;
    }
  }
  cr_assert_eq(t->n, n, "the table counts %zu entries, holds %zu", t->n, n);
  cr_assert(t->n == 0 || 2 * t->n <= t->cap, "more than half full");
}

Test(mpi_reqs, matches_a_plain_array_through_puts_and_takes) {
  vqc_reqs t = {0};
  for (int i = 0; i < NH; i++) ref[i] = -1;
  /* (seed, counter) LCG: the same sequence every run */
  uint64_t x = 26;
  for (int step = 0; step < 6 * NH; step++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int i = (int)((x >> 33) % NH);
    if (ref[i] < 0 || (x >> 20) % 3 == 0) { /* put (or replace) */
      const vqc_p2p_req v = {.call = "MPI_Irecv", .peer = i, .tag = step};
      vqc_p2p_req old;
      bool replaced;
      cr_assert(vqc_reqs_put(&t, handle(i), &v, &old, &replaced));
      cr_assert_eq(replaced, ref[i] >= 0, "handle %d: replaced %d", i,
                   replaced);
      if (replaced) cr_assert_eq(old.tag, ref[i]);
      ref[i] = step;
    } else { /* take */
      vqc_p2p_req out;
      cr_assert(vqc_reqs_take(&t, handle(i), &out), "handle %d not taken", i);
      cr_assert_eq(out.tag, ref[i]);
      cr_assert_eq(out.peer, i);
      ref[i] = -1;
    }
    if (step % 997 == 0) agree(&t);
  }
  agree(&t);
  /* pop empties it, each entry once */
  vqc_p2p_req out;
  size_t popped = 0;
  while (vqc_reqs_pop(&t, &out)) {
    cr_assert_geq(ref[out.peer], 0, "handle %d popped twice", out.peer);
    ref[out.peer] = -1;
    popped++;
  }
  agree(&t);
  cr_assert_gt(popped, 0);
  vqc_reqs_clear(&t);
  vqc_reqs_clear(&t); /* accepts an empty table */
}

Test(mpi_reqs, null_handle_is_never_stored) {
  vqc_reqs t = {0};
  const vqc_p2p_req v = {.call = "MPI_Isend", .tag = 1};
  vqc_p2p_req old, out;
  bool replaced;
  cr_assert_not(vqc_reqs_put(&t, MPI_REQUEST_NULL, &v, &old, &replaced));
  cr_assert_null(vqc_reqs_find(&t, MPI_REQUEST_NULL));
  cr_assert_not(vqc_reqs_take(&t, MPI_REQUEST_NULL, &out));
  cr_assert_not(vqc_reqs_pop(&t, &out));
  vqc_reqs_clear(&t);
}
