/* mpi_equiv.c: distributed training equals single-process training, on the
 * mpi comm backend as real processes.
 *
 * ctest starts it under mpiexec with several process counts; it works for
 * any count (1..5 tried). It runs the backend-agnostic cases of
 * tests/common/equiv_cases.h (the unit test test_bottleneck runs the same
 * bodies on the threads backend):
 *   vq_codebook      k-means init + EMA + dead-code expiry on uneven shards
 *                    (one step in three leaves rank 1 empty);
 *   rvq_dropout      residual VQ with quantize dropout (seed synced by
 *                    all_reduce);
 *   autoencoder_*    the autoencoder with a VQ, RVQ or FSQ bottleneck, DDP
 *                    gradient averaging, SGD with momentum.
 * On every rank and at every step: the codes of its own rows equal those the
 * single-process run (replayed locally on the concatenated global batch)
 * chose, codebooks are within 1e-6 relative and weights within 1e-6, and
 * every replicated tensor's digest equals rank 0's (exchanged over the side
 * channel). After each case the ranks agree on the failure count over the
 * side channel; rank 0 prints "name: ok (figures)" or "name: FAILED
 * (figures)" and finally "N passed, M failed". Failed checks are printed to
 * stderr by the rank that saw them. Exit code 0 only when every case passed
 * on every rank. */
#include "coll_cases.h"
#include "equiv_cases.h"
#include "mpi_driver.h"
#include "vqc/comm.h"

/* Per-collective deadline: generous for five ranks sharing two busy cores,
 * short enough that a hung case fails well inside ctest's 300 s. */
#define MAIN_TIMEOUT_S 30.0

int main(int argc, char **argv) {
  vqc_comm *c = vqc_driver_start("mpi_equiv", &argc, &argv, MAIN_TIMEOUT_S);
  if (!c) return 1;
  int failed = 0;
  for (int i = 0; i < vqc_equiv_case_count; i++) {
    vqc_equiv_report rep;
    const int local = vqc_equiv_cases[i].fn(c, &rep);
    char figures[512];
    vqc_equiv_format(&rep, figures, sizeof figures);
    if (!vqc_coll_case_report(c, vqc_equiv_cases[i].name, local, figures))
      failed++;
  }
  int code = vqc_driver_summary(vqc_equiv_case_count - failed, failed);
  vqc_mpi_comm_destroy(c);
  return code;
}
