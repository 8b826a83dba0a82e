/* gpu_base.h: what every user of the CUDA kernels (kernels/) shares, below
 * the quantizers: whether the build has them, device count and
 * synchronisation, the tensor digest on the device, and the rank-order
 * float sum the nccl backend uses. core/ (digest.c) and comm/ (the nccl
 * backend) include this; the FSQ and VQ kernels are in vqc/gpu.h, which
 * includes it.
 *
 * Pointers named *_dev (and every array argument below unless it says
 * "host") are device addresses from vqc_tensor_data of a VQC_DEVICE_CUDA
 * tensor or cudaMalloc. Every wrapper checks that a device exists
 * (VQC_ENODEVICE otherwise, with the runtime's reason) and that each array
 * argument's first and last byte are device (or managed) memory, before
 * anything runs: a host pointer is VQC_EINVAL naming the function and the
 * argument, never a kernel fault (an illegal address makes the process's
 * CUDA context unusable for good). A failed launch or a kernel that
 * faulted is VQC_ECUDA with file:line and CUDA's error string (recorded
 * with vqc_error). A build without CUDA (VQC_WITH_CUDA 0) has the same
 * functions; they return VQC_EUNSUPPORTED (lib/src/core/gpu_base_absent.c,
 * lib/src/quant/gpu_absent.c).
 *
 * Streams: one policy for the whole device path.
 *   - vqcheck's own device work runs on the LEGACY default stream: every
 *     wrapper below (unless it names a stream: the _on digest, and the
 *     _async rank sum the nccl backend calls) and the tensor storage
 *     functions (vqc_tensor_zeros / copies of VQC_DEVICE_CUDA tensors,
 *     lib/src/core/cuda/storage_cuda.c).
 *   - The wrappers below are host-synchronous: when one returns, its work
 *     and everything queued before it on the legacy stream has finished,
 *     and its outputs may be read from any stream or copied to the host.
 *   - The storage functions are NOT all host-synchronous: a device memset
 *     and a device-to-device copy return once queued, and a host-to-device
 *     copy from pageable memory may return before the bytes land. They are
 *     ordered on the legacy stream, so any later legacy-stream work (every
 *     wrapper here) sees their result; other streams must be ordered after
 *     them.
 *   - The nccl backend (comm_nccl.c) runs NCCL on a non-blocking stream of
 *     its own, which does NOT synchronise with the legacy stream by itself.
 *     Before every collective it records an event on the legacy stream and
 *     makes its stream wait for it, so a collective reads its buffers only
 *     after every legacy-stream producer (memset, copies, kernels) queued
 *     before the call; the call returns after the collective finished.
 *   - A caller on another stream (e.g. a framework's current stream) orders
 *     its work before a call itself (synchronise the stream or record an
 *     event the legacy stream waits for); vqc_gpu_digest_leaves_on takes
 *     the caller's stream instead. */
#ifndef VQC_GPU_BASE_H
#define VQC_GPU_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vqc/status.h"
#include "vqc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether this build has the kernels (VQC_WITH_CUDA). Whether a device is
 * present is vqc_cuda_available() (tensor.h). Never fails. */
bool vqc_gpu_built(void);

/* How many CUDA devices answer (0 without CUDA, driver or device). Never
 * fails. */
int vqc_gpu_device_count(void);

/* The check every wrapper makes of its array arguments (see the top):
 * VQC_OK when the first and the last of the nbytes at p are device or
 * managed memory (nbytes 0: always), else VQC_EINVAL naming fn and arg.
 * The nccl backend checks its buffers with it too. */
vqc_status vqc_gpu_check_device_buffer(const char *fn, const char *arg,
                                       const void *p, size_t nbytes);

/* Waits for all device work. VQC_ECUDA names an asynchronous failure. */
vqc_status vqc_gpu_synchronize(void);

/* Fills nwords 32-bit words at dev with `pattern` (tests poison outputs so
 * a kernel that wrote nothing fails; 0x7FC00001 is a NaN for floats,
 * 0xA5A5A5A5 a nonsense index). */
vqc_status vqc_gpu_fill_u32(void *dev, size_t nwords, uint32_t pattern);

/* ---- tensor digest (digest.h's definition) */

/* The leaves of the n bytes at dev: leaves (host, max(1, ceil(n / 65536))
 * entries) receives XXH3-64 of each 64 KiB chunk, hashed on the device (one
 * warp per chunk). */
vqc_status vqc_gpu_digest_leaves(const void *dev, size_t n, uint64_t *leaves);

/* The same on `stream` (a cudaStream_t; NULL is the legacy default stream):
 * the kernel runs after the work already queued there (e.g. PyTorch's
 * current stream, where the bytes were produced), and the call waits for
 * that stream only. */
vqc_status vqc_gpu_digest_leaves_on(const void *dev, size_t n,
                                    uint64_t *leaves, void *stream);

/* The tensor digest of a contiguous device buffer: leaves on the device,
 * then the root hash over header | leaves on the host (libxxhash). Equal to
 * vqc_digest_buffer of the same bytes. */
vqc_status vqc_gpu_digest_buffer(const void *dev, size_t n, vqc_dtype dt,
                                 int ndim, const int64_t *shape,
                                 uint64_t *out);

/* XXH3-64 of n host bytes computed on the CPU by the DEVICE algorithm: the
 * warp's 32 lanes, their key offsets, partial sums and shuffle reductions
 * run one after another in plain loops. Lets a machine without a GPU check
 * how the kernel reorganises XXH3 (tests compare it with libxxhash). */
vqc_status vqc_gpu_xxh3_64_emulated(const void *data, size_t n, uint64_t *out);

/* ---- the nccl backend's float sums (lib/src/nccl/comm_nccl.c)
 *
 * out (count) = gathered[0] + gathered[1] + ... + gathered[nranks - 1],
 * element by element in rank order with every add rounded in dt (VQC_F32
 * or VQC_F64), where gathered (nranks, count) holds the ranks' blocks (an
 * all_gather's output): the threads backend's order (comm.h), so an nccl
 * run's float sums equal a threads run's bit for bit. Queued on `stream`
 * (a cudaStream_t) and NOT waited for: the caller waits for the stream.
 * out must not overlap gathered. Pointers are not checked here (the
 * backend checked the user's buffers; gathered is its own). */
vqc_status vqc_gpu_sum_in_rank_order_async(const void *gathered, int nranks,
                                           size_t count, vqc_dtype dt,
                                           void *out, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* VQC_GPU_BASE_H */
