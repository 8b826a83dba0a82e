/* mpi_nccl.c: the nccl comm backend across real processes, one GPU each.
 *
 * ctest starts it under mpiexec with 2, 3 and 4 ranks like every mpi driver.
 * NCCL needs a distinct GPU per rank of a communicator, so the run is
 * skipped (rank 0 prints why and "0 passed, 0 failed", exit 0) when the
 * build has no nccl backend, when no device answers, or when the node has
 * fewer GPUs than ranks (a one-GPU machine can only form size-1 NCCL
 * communicators: tests/gpu/test_gpu_nccl.c covers that case). With enough
 * GPUs it runs, on device buffers, with inputs whose results are exact:
 *   collectives   all_reduce SUM of rank-dependent integers, in and out of
 *                 place; all_gather; all_gatherv with counts 1..size;
 *                 broadcast from the last rank; barrier; the ledger holds
 *                 the same sequence of ops on every rank;
 *   deadline      on a second nccl comm, rank 0 skips an all_reduce: the
 *                 other ranks' call returns VQC_ETIMEOUT within the 1 s
 *                 timeout plus slack (a hung NCCL collective ends, it does
 *                 not hang), their comm is aborted, and every later call on
 *                 it returns VQC_EABORTED; rank 0, once told over the side
 *                 channel, finds its next collective on that comm time out
 *                 (or fail) in turn, since its peers have gone.
 *   float sums    all_reduce SUM of F32 and F64 values of mixed magnitude
 *                 and sign: every rank gets, bit for bit, the sum in rank
 *                 order (((x_0 + x_1) + x_2) + ...) that the threads
 *                 backend computes, whatever algorithm NCCL picks;
 *   interrupt     creation whose peers come late is cut short by
 *                 vqc_nccl_interrupt (a thread of each rank calls it 0.5 s
 *                 after the rank starts creating; ranks other than 0 start
 *                 2 s late): every rank gets VQC_EABORTED within seconds,
 *                 not at the creation timeout.
 * After each case the ranks agree on the failure count over the MPI side
 * channel; rank 0 prints "name: ok" / "name: FAILED" and "N passed, M
 * failed". Exit code 0 only when every case passed on every rank. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_cases.h"
#include "mpi_driver.h"
#include "vqc/comm.h"
#include "vqc/gpu.h"
#include "vqc/ledger.h"
#include "vqc/tensor.h"
#include "vqc/version.h"

/* A device int32 buffer of n elements holding host[0..n) (host may be NULL:
 * then poisoned). Freed with vqc_tensor_free. */
static vqc_tensor dev_ints(const int32_t *host, size_t n) {
  vqc_tensor t = {0};
  int64_t shape[1] = {(int64_t)n};
  vqc_status s;
  if (host) {
    vqc_tensor h;
    s = vqc_tensor_wrap(&h, (void *)host, VQC_I32, 1, shape);
    if (s == VQC_OK) s = vqc_tensor_to(&h, VQC_DEVICE_CUDA, &t);
    vqc_tensor_free(&h);
  } else {
    s = vqc_tensor_empty(&t, VQC_I32, 1, shape, VQC_DEVICE_CUDA);
    if (s == VQC_OK)
      s = vqc_gpu_fill_u32(vqc_tensor_data_untracked(&t), n, 0xA5A5A5A5u);
  }
  CHECK_OK(s, "device buffer");
  return t;
}

/* The n ints of device tensor t, into host. */
static void to_host(const vqc_tensor *t, int32_t *host, size_t n) {
  vqc_tensor h = {0};
  vqc_status s = vqc_tensor_to(t, VQC_DEVICE_CPU, &h);
  CHECK_OK(s, "download");
  if (s == VQC_OK) memcpy(host, vqc_tensor_data(&h), n * 4);
  vqc_tensor_free(&h);
}

/* ---- cases */

static int case_collectives(vqc_comm *c) {
  vqc_driver_failures = 0;
  const int r = vqc_comm_rank(c), size = vqc_comm_size(c);
  enum { N = 4096 };
  int32_t *host = malloc(N * 4), *back = malloc((size_t)N * 4 * size);
  if (!host || !back) return 1;
  for (int i = 0; i < N; i++) host[i] = (r + 1) * 1000 + i;
  /* sum over ranks of (r + 1) * 1000 + i */
  const int32_t base = 1000 * size * (size + 1) / 2;

  vqc_tensor src = dev_ints(host, N), dst = dev_ints(NULL, N);
  CHECK_OK(vqc_all_reduce(c, vqc_tensor_data_untracked(&src),
                          vqc_tensor_data_untracked(&dst), N, VQC_I32,
                          VQC_SUM), "all_reduce");
  to_host(&dst, back, N);
  for (int i = 0; i < N; i++)
    CHECK(back[i] == base + size * i, "all_reduce[%d] = %d", i, back[i]);
  CHECK_OK(vqc_all_reduce(c, vqc_tensor_data_untracked(&src),
                          vqc_tensor_data_untracked(&src), N, VQC_I32,
                          VQC_MAX), "all_reduce in place");
  to_host(&src, back, N);
  for (int i = 0; i < N; i++)
    CHECK(back[i] == size * 1000 + i, "max[%d] = %d", i, back[i]);
  vqc_tensor_free(&dst);
  vqc_tensor_free(&src);

  /* all_gather: block r holds (r + 1) * 1000 + i */
  src = dev_ints(host, N);
  dst = dev_ints(NULL, (size_t)N * size);
  CHECK_OK(vqc_all_gather(c, vqc_tensor_data_untracked(&src),
                          vqc_tensor_data_untracked(&dst), N, VQC_I32),
           "all_gather");
  to_host(&dst, back, (size_t)N * size);
  for (int q = 0; q < size; q++)
    for (int i = 0; i < N; i += 511)
      CHECK(back[q * N + i] == (q + 1) * 1000 + i, "gather[%d][%d]", q, i);
  vqc_tensor_free(&dst);

  /* all_gatherv: rank q sends q + 1 elements */
  size_t counts[64], total = 0;
  for (int q = 0; q < size && q < 64; q++) total += counts[q] = (size_t)q + 1;
  dst = dev_ints(NULL, total);
  CHECK_OK(vqc_all_gatherv(c, vqc_tensor_data_untracked(&src), (size_t)r + 1,
                           vqc_tensor_data_untracked(&dst), counts, VQC_I32),
           "all_gatherv");
  to_host(&dst, back, total);
  size_t at = 0;
  for (int q = 0; q < size; q++)
    for (int i = 0; i <= q; i++, at++)
      CHECK(back[at] == (q + 1) * 1000 + i, "gatherv[%zu] = %d", at, back[at]);
  vqc_tensor_free(&dst);

  /* broadcast from the last rank, then a barrier */
  CHECK_OK(vqc_broadcast(c, vqc_tensor_data_untracked(&src), N, VQC_I32,
                         size - 1), "broadcast");
  to_host(&src, back, N);
  for (int i = 0; i < N; i += 97)
    CHECK(back[i] == size * 1000 + i, "broadcast[%d] = %d", i, back[i]);
  CHECK_OK(vqc_barrier(c), "barrier");
  vqc_tensor_free(&src);

  vqc_ledger_record rec;
  const vqc_coll_op ops[] = {VQC_COLL_ALL_REDUCE, VQC_COLL_ALL_REDUCE,
                             VQC_COLL_ALL_GATHER, VQC_COLL_ALL_GATHERV,
                             VQC_COLL_BROADCAST, VQC_COLL_BARRIER};
  for (uint64_t seq = 0; seq < 6; seq++) {
    bool have = vqc_ledger_get(vqc_comm_ledger(c), seq, &rec);
    CHECK(have && rec.op == ops[seq] && rec.state == VQC_REC_DONE,
          "ledger record %llu", (unsigned long long)seq);
  }
  free(host), free(back);
  return vqc_driver_failures;
}

static int case_deadline(vqc_comm *unused) {
  (void)unused;
  vqc_driver_failures = 0;
  vqc_comm *c = NULL;
  vqc_status s = vqc_nccl_comm_create(NULL, NULL, &c);
  CHECK_OK(s, "second nccl comm");
  if (s != VQC_OK) return vqc_driver_failures;
  vqc_comm_set_timeout(c, 1.0);
  int32_t one = 1;
  vqc_tensor buf = dev_ints(&one, 1);
  void *p = vqc_tensor_data_untracked(&buf);
  /* NCCL matches collectives by order, not by kind: had rank 0 called any
   * 1-int collective (its barrier is one) while the others wait, it would
   * have completed theirs. So rank 0 waits on the MPI side channel (with a
   * long timeout of its own) until they have timed out. */
  vqc_comm *side = vqc_comm_side(c);
  vqc_comm_set_timeout(side, 60.0);
  if (vqc_comm_rank(c) != 0) {
    double t0 = vqc_driver_now_s();
    s = vqc_all_reduce(c, p, p, 1, VQC_I32, VQC_SUM);
    double waited = vqc_driver_now_s() - t0;
    CHECK(s == VQC_ETIMEOUT, "skipped collective returned %s: %s",
          vqc_status_name(s), vqc_last_error());
    CHECK(waited < 20.0, "the timeout took %.1f s", waited);
    CHECK(vqc_barrier(c) == VQC_EABORTED, "after the timeout: %s",
          vqc_last_error());
    CHECK_OK(vqc_barrier(side), "side barrier");
  } else {
    CHECK_OK(vqc_barrier(side), "side barrier");
    /* its peers' communicators are gone: its next collective times out */
    s = vqc_barrier(c);
    CHECK(s == VQC_ETIMEOUT || s == VQC_ECOMM, "rank 0 alone: %s: %s",
          vqc_status_name(s), vqc_last_error());
  }
  vqc_tensor_free(&buf);
  vqc_nccl_comm_destroy(c);
  return vqc_driver_failures;
}

/* Element i of rank q's block: mixed magnitudes and signs, so that adding
 * the ranks in another order rounds differently. */
static double mixed_value(int q, size_t i) {
  uint64_t z = (uint64_t)q * 0x9E3779B97F4A7C15ULL + i * 0xBF58476D1CE4E5B9ULL;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBULL;
  z ^= z >> 29;
  double u = (double)(z >> 11) / 9007199254740992.0 - 0.5;
  return ldexp(u, (int)(z % 41) - 20);
}

static int case_float_sums(vqc_comm *c) {
  vqc_driver_failures = 0;
  const int size = vqc_comm_size(c), r = vqc_comm_rank(c);
  enum { N = 100003 }; /* not a multiple of anything NCCL likes */
  float *mine = malloc(N * 4), *want = malloc(N * 4), *got = malloc(N * 4);
  double *mine_d = malloc(N * 8), *want_d = malloc(N * 8), *got_d = malloc(N * 8);
  if (!mine || !want || !got || !mine_d || !want_d || !got_d) return 1;
  for (size_t i = 0; i < N; i++) {
    mine[i] = (float)mixed_value(r, i);
    mine_d[i] = mixed_value(r, i) * 1e-3;
    want[i] = (float)mixed_value(0, i);
    want_d[i] = mixed_value(0, i) * 1e-3;
    for (int q = 1; q < size; q++) {
      want[i] += (float)mixed_value(q, i); /* the threads backend's order */
      want_d[i] += mixed_value(q, i) * 1e-3;
    }
  }
  int64_t shape[1] = {N};
  vqc_tensor h = {0}, f = {0}, d = {0};
  CHECK_OK(vqc_tensor_wrap(&h, mine, VQC_F32, 1, shape), "wrap");
  CHECK_OK(vqc_tensor_to(&h, VQC_DEVICE_CUDA, &f), "upload f32");
  vqc_tensor_free(&h);
  CHECK_OK(vqc_tensor_wrap(&h, mine_d, VQC_F64, 1, shape), "wrap");
  CHECK_OK(vqc_tensor_to(&h, VQC_DEVICE_CUDA, &d), "upload f64");
  vqc_tensor_free(&h);
  void *fp = vqc_tensor_data_untracked(&f), *dp = vqc_tensor_data_untracked(&d);
  CHECK_OK(vqc_all_reduce(c, fp, fp, N, VQC_F32, VQC_SUM), "f32 sum");
  CHECK_OK(vqc_all_reduce(c, dp, dp, N, VQC_F64, VQC_SUM), "f64 sum");
  vqc_tensor back = {0};
  if (vqc_tensor_to(&f, VQC_DEVICE_CPU, &back) == VQC_OK)
    memcpy(got, vqc_tensor_data(&back), N * 4);
  else
    CHECK(0, "download: %s", vqc_last_error());
  vqc_tensor_free(&back);
  if (vqc_tensor_to(&d, VQC_DEVICE_CPU, &back) == VQC_OK)
    memcpy(got_d, vqc_tensor_data(&back), N * 8);
  else
    CHECK(0, "download: %s", vqc_last_error());
  vqc_tensor_free(&back);
  size_t bad = 0, bad_d = 0;
  for (size_t i = 0; i < N; i++) {
    bad += memcmp(&got[i], &want[i], 4) != 0;
    bad_d += memcmp(&got_d[i], &want_d[i], 8) != 0;
  }
  CHECK(bad == 0, "f32: %zu of %d sums differ from the rank-order sum", bad,
        N);
  CHECK(bad_d == 0, "f64: %zu of %d sums differ from the rank-order sum",
        bad_d, N);
  vqc_tensor_free(&f), vqc_tensor_free(&d);
  free(mine), free(want), free(got), free(mine_d), free(want_d), free(got_d);
  return vqc_driver_failures;
}

static void *interrupt_later(void *arg) {
  (void)arg;
  usleep(500 * 1000);
  vqc_nccl_interrupt();
  return NULL;
}

static int case_interrupt(vqc_comm *c) {
  vqc_driver_failures = 0;
  if (vqc_comm_rank(c) != 0) sleep(2); /* rank 0's peers come late */
  pthread_t th;
  pthread_create(&th, NULL, interrupt_later, NULL);
  double t0 = vqc_driver_now_s();
  vqc_comm *late = (vqc_comm *)1;
  vqc_status s = vqc_nccl_comm_create(NULL, NULL, &late);
  double took = vqc_driver_now_s() - t0;
  pthread_join(th, NULL);
  CHECK(s == VQC_EABORTED, "creation returned %s: %s", vqc_status_name(s),
        vqc_last_error());
  CHECK(late == NULL, "no comm after a failed creation");
  CHECK(took < 10.0, "the interrupted creation took %.1f s", took);
  if (s == VQC_OK) vqc_nccl_comm_destroy(late);
  /* every rank is past its creation before the flag is cleared */
  CHECK_OK(vqc_barrier(vqc_comm_side(c)), "side barrier");
  vqc_nccl_interrupt_clear();
  return vqc_driver_failures;
}

int main(int argc, char **argv) {
  /* The MPI comm first: it says the rank and size, and keeps MPI alive
   * while nccl comms come and go. */
  vqc_comm *mpi = vqc_driver_start("mpi_nccl", &argc, &argv, 0);
  if (!mpi) return 1;
  int size = vqc_comm_size(mpi), ndev = vqc_gpu_device_count();
  const char *skip = NULL;
  if (!VQC_WITH_NCCL)
    skip = "the build has no nccl backend";
  else if (!vqc_cuda_available())
    skip = "no usable CUDA device";
  else if (ndev < size)
    skip = "fewer GPUs than ranks (NCCL needs one GPU per rank)";
  if (skip) {
    if (vqc_driver_rank == 0)
      printf("SKIP: %s (%d ranks, %d GPUs)\n0 passed, 0 failed\n", skip, size,
             ndev);
    vqc_mpi_comm_destroy(mpi);
    return 0;
  }

  vqc_comm *c = NULL;
  vqc_status s = vqc_nccl_comm_create(&argc, &argv, &c);
  if (s != VQC_OK) {
    fprintf(stderr, "[rank %d] mpi_nccl: cannot create the nccl comm: %s\n",
            vqc_driver_rank, vqc_last_error());
    vqc_mpi_comm_destroy(mpi);
    return 1;
  }
  vqc_comm_set_timeout(c, 30.0);
  static const vqc_coll_case cases[] = {{"collectives", case_collectives},
                                        {"float sums", case_float_sums},
                                        {"interrupt", case_interrupt},
                                        {"deadline", case_deadline}};
  const int ncases = (int)(sizeof cases / sizeof cases[0]);
  int failed = vqc_run_case_list(c, cases, ncases);
  int code = vqc_driver_summary(ncases - failed, failed);
  vqc_nccl_comm_destroy(c);
  vqc_mpi_comm_destroy(mpi);
  return code;
}
