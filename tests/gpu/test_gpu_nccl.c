/* test_gpu_nccl.c: the nccl comm backend (lib/src/comm/nccl/comm_nccl.c), label
 * gpu.
 *
 * A one-GPU machine can only form size-1 NCCL communicators (NCCL refuses
 * two ranks on one device), and this test runs as one process (MPI starts
 * as a singleton), so every collective here has one rank: the expected
 * results are exact (a sum over one rank is the input; a gather is the
 * block). What it checks is the plumbing a real multi-GPU run relies on:
 * the ncclUniqueId broadcast over MPI, collectives on device buffers, the
 * ledger records comm.c writes for them, the MPI side channel, host buffers
 * refused, and the deadline: with a timeout far shorter than a 1 GiB copy,
 * the wait gives up, aborts the NCCL communicator and returns VQC_ETIMEOUT
 * (a hung collective becomes a failed ledger record, never a hang), after
 * which the comm refuses further work with VQC_EABORTED. Multi-rank NCCL
 * (a peer that never comes) needs a machine with several GPUs.
 *
 * Outputs are poisoned before every collective.
 *
 * Issue 14 adds, each of which only a device can show:
 *   stream order   memsets and copies on the legacy default stream
 *                  (asynchronous to the host), then a collective, in a
 *                  loop with no host synchronisation in between: the
 *                  collective must read what they wrote (the comm's
 *                  non-blocking stream waits for an event on the legacy
 *                  stream). A long queue of 1 GiB memsets ahead of the
 *                  producers makes a missing wait show as stale data;
 *   warm-up        a fresh comm's first collective meets a 50 ms deadline
 *                  (connection set-up happened at creation);
 *   interrupt      vqc_nccl_interrupt makes creation give up with
 *                  VQC_EABORTED, and a later creation works once cleared;
 *   poison         after a timed-out collective the receive buffer holds
 *                  0xFF bytes, not a partial result. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test_util.h"
#include "vqc/comm.h"
#include "vqc/ledger.h"

static vqc_comm *make_comm(void) {
  if (!VQC_WITH_NCCL) cr_skip_test("this build has no nccl backend");
  gpu_require();
  vqc_comm *c = NULL;
  cr_assert_eq(vqc_nccl_comm_create(NULL, NULL, &c), VQC_OK, "%s",
               vqc_last_error());
  cr_assert_eq(vqc_comm_size(c), 1, "a singleton MPI world has one rank");
  cr_assert_eq(vqc_comm_backend(c), VQC_BACKEND_NCCL);
  return c;
}

Test(gpu_nccl, size_one_collectives_on_device_buffers) {
  vqc_comm *c = make_comm();
  const size_t n = 1000;
  int32_t *host = malloc(n * 4), *back = malloc(n * 4);
  cr_assert(host && back);
  for (size_t i = 0; i < n; i++) host[i] = (int32_t)(i * 7 - 300);
  vqc_tensor src = gpu_upload(host, n * 4), dst = gpu_alloc(n * 4);

  /* all_reduce out of place, then in place: a sum over one rank */
  gpu_poison(gpu_ptr(&dst), n);
  cr_assert_eq(vqc_all_reduce(c, gpu_ptr(&src), gpu_ptr(&dst), n, VQC_I32,
                              VQC_SUM), VQC_OK, "%s", vqc_last_error());
  gpu_download(back, gpu_ptr(&dst), n * 4);
  cr_expect_eq(memcmp(back, host, n * 4), 0, "all_reduce out of place");
  cr_assert_eq(vqc_all_reduce(c, gpu_ptr(&dst), gpu_ptr(&dst), n, VQC_I32,
                              VQC_MAX), VQC_OK, "%s", vqc_last_error());
  gpu_download(back, gpu_ptr(&dst), n * 4);
  cr_expect_eq(memcmp(back, host, n * 4), 0, "all_reduce in place");

  /* all_gather, all_gatherv, broadcast, barrier */
  gpu_poison(gpu_ptr(&dst), n);
  cr_assert_eq(vqc_all_gather(c, gpu_ptr(&src), gpu_ptr(&dst), n, VQC_I32),
               VQC_OK, "%s", vqc_last_error());
  gpu_download(back, gpu_ptr(&dst), n * 4);
  cr_expect_eq(memcmp(back, host, n * 4), 0, "all_gather");
  gpu_poison(gpu_ptr(&dst), n);
  size_t counts[1] = {n};
  cr_assert_eq(vqc_all_gatherv(c, gpu_ptr(&src), n, gpu_ptr(&dst), counts,
                               VQC_I32), VQC_OK, "%s", vqc_last_error());
  gpu_download(back, gpu_ptr(&dst), n * 4);
  cr_expect_eq(memcmp(back, host, n * 4), 0, "all_gatherv");
  cr_assert_eq(vqc_broadcast(c, gpu_ptr(&src), n, VQC_I32, 0), VQC_OK, "%s",
               vqc_last_error());
  cr_assert_eq(vqc_barrier(c), VQC_OK, "%s", vqc_last_error());

  /* the ledger saw all six, in order, done */
  vqc_ledger *l = vqc_comm_ledger(c);
  cr_assert_not_null(l);
  const vqc_coll_op ops[] = {VQC_COLL_ALL_REDUCE, VQC_COLL_ALL_REDUCE,
                             VQC_COLL_ALL_GATHER, VQC_COLL_ALL_GATHERV,
                             VQC_COLL_BROADCAST,  VQC_COLL_BARRIER};
  for (uint64_t seq = 0; seq < 6; seq++) {
    vqc_ledger_record r;
    cr_assert(vqc_ledger_get(l, seq, &r), "record %llu missing",
              (unsigned long long)seq);
    cr_expect_eq(r.op, ops[seq], "record %llu", (unsigned long long)seq);
    cr_expect_eq(r.state, VQC_REC_DONE, "record %llu",
                 (unsigned long long)seq);
  }

  /* the side channel is MPI and works on host memory */
  vqc_comm *side = vqc_comm_side(c);
  cr_assert_not_null(side);
  cr_expect_eq(vqc_comm_backend(side), VQC_BACKEND_MPI);
  int32_t v = 41;
  cr_expect_eq(vqc_all_reduce(side, &v, &v, 1, VQC_I32, VQC_SUM), VQC_OK);
  cr_expect_eq(v, 41);

  /* host buffers are refused on the data comm */
  cr_expect_eq(vqc_all_reduce(c, host, back, n, VQC_I32, VQC_SUM),
               VQC_EINVAL);

  vqc_tensor_free(&src);
  vqc_tensor_free(&dst);
  free(host), free(back);
  vqc_nccl_comm_destroy(c);
}

Test(gpu_nccl, deadline_aborts_instead_of_hanging) {
  vqc_comm *c = make_comm();
  /* 1 GiB out of place: on one rank NCCL copies it (~0.3 ms on an H200),
   * far longer than a 1 us deadline, so the first poll finds it running. */
  const size_t n = (size_t)1 << 28;
  vqc_tensor a = gpu_alloc(n * 4), b = gpu_alloc(n * 4);
  vqc_comm_set_timeout(c, 1e-6);
  vqc_status s = vqc_all_reduce(c, gpu_ptr(&a), gpu_ptr(&b), n, VQC_F32,
                                VQC_SUM);
  cr_expect_eq(s, VQC_ETIMEOUT, "got %s: %s", vqc_status_name(s),
               vqc_last_error());
  vqc_ledger_record r;
  cr_assert(vqc_ledger_get(vqc_comm_ledger(c), 0, &r));
  cr_expect_eq(r.state, VQC_REC_FAILED);
  cr_expect_eq(r.status, VQC_ETIMEOUT);
  /* the receive buffer is marked undefined: 0xFF bytes (NaN floats) at
   * both ends, never a partial sum that could pass for a result */
  uint32_t head[1024], tail[1024];
  gpu_download(head, gpu_ptr(&b), sizeof head);
  gpu_download(tail, (char *)gpu_ptr(&b) + n * 4 - sizeof tail, sizeof tail);
  for (int i = 0; i < 1024; i++) {
    cr_expect_eq(head[i], 0xFFFFFFFFu, "recv[%d] = %08x", i, head[i]);
    cr_expect_eq(tail[i], 0xFFFFFFFFu, "recv[n - %d] = %08x", 1024 - i,
                 tail[i]);
  }
  /* the communicator is gone: later calls are refused, promptly */
  vqc_comm_set_timeout(c, 10.0);
  cr_expect_eq(vqc_barrier(c), VQC_EABORTED);
  vqc_tensor_free(&a);
  vqc_tensor_free(&b);
  vqc_nccl_comm_destroy(c);
}

Test(gpu_nccl, collectives_wait_for_legacy_stream_producers) {
  vqc_comm *c = make_comm();
  const size_t n = (size_t)1 << 24; /* 64 MiB of floats */
  const size_t big_bytes = (size_t)1 << 30;
  float *a = malloc(n * 4), *b = malloc(n * 4), *back = malloc(n * 4);
  cr_assert(a && b && back);
  for (size_t i = 0; i < n; i++) a[i] = (float)(i % 1000), b[i] = -a[i] - 1;
  vqc_tensor src_a = gpu_upload(a, n * 4), src_b = gpu_upload(b, n * 4);
  vqc_tensor send = gpu_alloc(n * 4), recv = gpu_alloc(n * 4);
  vqc_tensor big = gpu_alloc(big_bytes);
  for (int k = 0; k < 12; k++) {
    const float *want = k % 2 ? b : a;
    /* ~1-3 ms of legacy-stream work queued ahead of the producers */
    for (int j = 0; j < 4; j++)
      cr_assert_eq(vqc_device_memset_zero(gpu_ptr(&big), big_bytes), VQC_OK);
    cr_assert_eq(vqc_device_memset_zero(gpu_ptr(&send), n * 4), VQC_OK);
    if (k % 3 == 2) {
      /* a pageable host-to-device copy may return before the bytes land */
      gpu_copy_in(gpu_ptr(&send), want, n * 4);
    } else {
      cr_assert_eq(vqc_device_memcpy_d2d(gpu_ptr(&send),
                                         gpu_ptr(k % 2 ? &src_b : &src_a),
                                         n * 4), VQC_OK);
    }
    cr_assert_eq(vqc_all_reduce(c, gpu_ptr(&send), gpu_ptr(&recv), n,
                                VQC_F32, VQC_SUM), VQC_OK, "%s",
                 vqc_last_error());
    gpu_download(back, gpu_ptr(&recv), n * 4);
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < n; i++)
      if (test_bits(back[i]) != test_bits(want[i]) && wrong++ == 0) first = i;
    cr_assert_eq(wrong, 0, "round %d: %zu of %zu elements stale (first %zu: "
                 "%g, want %g): the collective ran before its producers",
                 k, wrong, n, first, back[first], want[first]);
  }
  vqc_tensor_free(&src_a), vqc_tensor_free(&src_b);
  vqc_tensor_free(&send), vqc_tensor_free(&recv), vqc_tensor_free(&big);
  free(a), free(b), free(back);
  vqc_nccl_comm_destroy(c);
}

Test(gpu_nccl, first_collective_meets_a_short_deadline) {
  vqc_comm *c = make_comm();
  vqc_comm_set_timeout(c, 0.05);
  float one = 1.0f, got = 0.0f;
  vqc_tensor t = gpu_upload(&one, 4);
  vqc_status s = vqc_all_reduce(c, gpu_ptr(&t), gpu_ptr(&t), 1, VQC_F32,
                                VQC_SUM);
  cr_expect_eq(s, VQC_OK, "the first collective of a warmed-up comm: %s",
               vqc_last_error());
  gpu_download(&got, gpu_ptr(&t), 4);
  cr_expect_eq(got, 1.0f);
  vqc_tensor_free(&t);
  vqc_nccl_comm_destroy(c);
}

Test(gpu_nccl, interrupt_cuts_creation_short) {
  if (!VQC_WITH_NCCL) cr_skip_test("this build has no nccl backend");
  gpu_require();
  vqc_nccl_interrupt();
  vqc_comm *c = (vqc_comm *)1;
  vqc_status s = vqc_nccl_comm_create(NULL, NULL, &c);
  vqc_nccl_interrupt_clear();
  cr_expect_eq(s, VQC_EABORTED, "got %s: %s", vqc_status_name(s),
               vqc_last_error());
  cr_expect_null(c);
  cr_expect(strstr(vqc_last_error(), "vqc_nccl_interrupt") != NULL,
            "message: %s", vqc_last_error());
  /* cleared: the next creation works */
  c = make_comm();
  cr_expect_eq(vqc_barrier(c), VQC_OK, "%s", vqc_last_error());
  vqc_nccl_comm_destroy(c);
}

Test(gpu_nccl, absent_backend_or_device_is_reported) {
  /* Runs everywhere. */
  vqc_comm *c = (vqc_comm *)1;
  vqc_status s = vqc_nccl_comm_create(NULL, NULL, &c);
  if (!VQC_WITH_NCCL) {
    cr_expect_eq(s, VQC_EUNSUPPORTED);
    cr_expect_null(c);
  } else if (!vqc_cuda_available()) {
    cr_expect_eq(s, VQC_ENODEVICE, "%s", vqc_last_error());
    cr_expect_null(c);
  } else {
    cr_expect_eq(s, VQC_OK, "%s", vqc_last_error());
    vqc_nccl_comm_destroy(c);
  }
}
