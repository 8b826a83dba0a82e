/* rank_sum.cu: the nccl backend's floating-point SUM in rank order
 * (vqc_gpu_sum_in_rank_order_async, vqc/gpu.h).
 *
 * Why. NCCL's all_reduce adds the ranks' values in an order that depends on
 * its algorithm (ring, tree, NVLS), the protocol and the topology, so a
 * float sum can differ in its last bits between a threads or mpi run and an
 * nccl run of the same job, or between two clusters; digest comparisons
 * across such runs would then flag a difference that is no bug. The threads
 * backend defines the order (comm.h: element i is send_0[i] + send_1[i] +
 * ... in rank order, each add rounded in the element type). comm_nccl.c
 * therefore all_gathers the ranks' blocks and this kernel adds them in that
 * order, so every backend gives the same bits on the same inputs. */
#include <cuda_runtime.h>

#include "gpu_internal.h"
#include "vqc/gpu.h"

/* The kernel itself (device code only; kernels/emu runs the same source on
 * the CPU). */
#include "rank_sum_kernels.cuh"

vqc_status vqc_gpu_sum_in_rank_order_async(const void *gathered, int nranks,
                                           size_t count, vqc_dtype dt,
                                           void *out, void *stream) {
  const char *fn = "sum in rank order";
  if (nranks < 1 || (dt != VQC_F32 && dt != VQC_F64))
    return vqc_error(VQC_EINVAL, "%s: %d ranks of %s (float or double only)",
                     fn, nranks, vqc_dtype_name(dt));
  if (count == 0) return VQC_OK;
  if (gathered == NULL || out == NULL)
    return vqc_error(VQC_EINVAL, "%s: NULL buffer", fn);
  const int64_t work = count < (size_t)65536 * RANK_SUM_THREADS
                           ? (int64_t)count
                           : (int64_t)65536 * RANK_SUM_THREADS;
  const unsigned blocks = vqc_gpu_blocks(work, RANK_SUM_THREADS);
  cudaStream_t st = (cudaStream_t)stream;
  if (dt == VQC_F32)
    rank_sum_kernel<float><<<blocks, RANK_SUM_THREADS, 0, st>>>(
        (const float *)gathered, nranks, count, (float *)out);
  else
    rank_sum_kernel<double><<<blocks, RANK_SUM_THREADS, 0, st>>>(
        (const double *)gathered, nranks, count, (double *)out);
  return GPU_LAUNCH_CHECK("rank_sum_kernel");
}
