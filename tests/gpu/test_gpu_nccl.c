/* test_gpu_nccl.c: the nccl comm backend (lib/src/nccl/comm_nccl.c), label
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
 * Outputs are poisoned before every collective. */
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
  /* the communicator is gone: later calls are refused, promptly */
  vqc_comm_set_timeout(c, 10.0);
  cr_expect_eq(vqc_barrier(c), VQC_EABORTED);
  vqc_tensor_free(&a);
  vqc_tensor_free(&b);
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
