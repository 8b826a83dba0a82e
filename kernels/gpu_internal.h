/* gpu_internal.h: what the .cu files of kernels/ share (not a public header):
 * the check macros every CUDA call and launch goes through, the device
 * probe, the pointer checks and stream-ordered scratch memory.
 *
 * Error style (STYLE.md habit 2): a CUDA call that fails becomes VQC_ECUDA
 * (VQC_ENODEVICE for "no usable device") recorded with vqc_error_at at the
 * caller's file:line, with the call's text and CUDA's error name and string:
 * the library's one CUDA check (lib/src/core/cuda/cuda_check.h), which
 * tensor storage uses too. A launch is checked twice: cudaGetLastError right
 * after it (bad configuration, no kernel image for this GPU) and the
 * synchronisation at the end of the wrapper (a fault while it ran). */
#ifndef VQC_KERNELS_GPU_INTERNAL_H
#define VQC_KERNELS_GPU_INTERNAL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/cuda/cuda_check.h" /* lib/src: vqc_cuda_check_at */
#include "vqc/status.h"

/* GPU_CHECK(call): a vqc_status, VQC_OK or the error recorded as described
 * above. GPU_TRY(call): returns it when not OK. */
#define GPU_CHECK(call) VQC_CUDA_CHECK(call)
#define GPU_TRY(call) VQC_TRY(GPU_CHECK(call))
/* After every <<<...>>>: the launch itself (the wrapper's final
 * synchronisation checks the execution). `name` names the kernel. */
#define GPU_LAUNCH_CHECK(name) \
  vqc_cuda_check_at(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)

/* VQC_OK when a device answers; VQC_ENODEVICE naming `what` otherwise. */
vqc_status vqc_gpu_require(const char *what);

/* Waits for the default stream and checks what ran there. */
vqc_status vqc_gpu_sync_check(const char *what, const char *file, int line);
#define GPU_SYNC(what) vqc_gpu_sync_check((what), __FILE__, __LINE__)

/* Scratch device memory ordered on the default stream (cudaMallocAsync from
 * the device's pool, so a per-call allocation costs microseconds; plain
 * cudaMalloc where the device has no pools). *p is NULL on failure.
 * vqc_gpu_scratch_free accepts NULL. */
vqc_status vqc_gpu_scratch_alloc(void **p, size_t nbytes, const char *file,
                                 int line);
void vqc_gpu_scratch_free(void *p);
#define GPU_SCRATCH(p, nbytes) \
  vqc_gpu_scratch_alloc((void **)(p), (nbytes), __FILE__, __LINE__)

/* The same ordered on `stream` (a caller's stream, e.g. a framework's
 * current stream, which may be non-blocking: memory ordered on the default
 * stream would not be ordered with it). */
vqc_status vqc_gpu_scratch_alloc_on(void **p, size_t nbytes,
                                    cudaStream_t stream, const char *file,
                                    int line);
void vqc_gpu_scratch_free_on(void *p, cudaStream_t stream);

/* ---- pointer checks
 *
 * Every public wrapper checks each array argument before it launches
 * anything: a host pointer handed to a kernel is an illegal-address fault,
 * which is sticky (the CUDA context is unusable afterwards, for every later
 * call of the process), so it must be refused with a clear VQC_EINVAL
 * instead. A buffer passes when its first and its last byte are device (or
 * managed) memory; NULL passes only when nbytes is 0. `attrs` is how the
 * memory is asked about: cudaPointerGetAttributes on a device, a stand-in
 * in kernels/emu (which tests this classification without a GPU). */
typedef cudaError_t (*vqc_gpu_attr_fn)(cudaPointerAttributes *, const void *);

static inline vqc_status vqc_gpu_classify_ptr(vqc_gpu_attr_fn attrs,
                                              const char *fn, const char *arg,
                                              const void *p, size_t nbytes) {
  if (nbytes == 0) return VQC_OK;
  if (p == NULL)
    return vqc_error(VQC_EINVAL, "%s: %s is NULL (%zu bytes expected)", fn,
                     arg, nbytes);
  const char *ends[2] = {(const char *)p, (const char *)p + nbytes - 1};
  for (int k = 0; k < 2; k++) {
    cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t e = attrs(&a, ends[k]);
    if (e != cudaSuccess) {
      (void)cudaGetLastError(); /* a query: leave no sticky error behind */
      return vqc_error(VQC_EINVAL, "%s: %s (%p) is not CUDA memory (%s)", fn,
                       arg, p, cudaGetErrorString(e));
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
      return vqc_error(
          VQC_EINVAL,
          k == 0 ? "%s: %s (%p) is host memory; pass device memory "
                   "(vqc_tensor_data of a VQC_DEVICE_CUDA tensor, or "
                   "cudaMalloc)"
                 : "%s: %s (%p) ends outside device memory: its %zu bytes "
                   "run past the allocation (check the sizes passed)",
          fn, arg, p, nbytes);
  }
  return VQC_OK;
}

/* The check on the device: VQC_OK, or VQC_EINVAL naming fn and arg. */
static inline vqc_status vqc_gpu_check_device_ptr(const char *fn,
                                                  const char *arg,
                                                  const void *p,
                                                  size_t nbytes) {
  return vqc_gpu_classify_ptr(cudaPointerGetAttributes, fn, arg, p, nbytes);
}

/* Grid size for n items at `per_block` items per block, capped at the
 * 2^31 - 1 blocks of gridDim.x. */
static inline unsigned vqc_gpu_blocks(int64_t n, int64_t per_block) {
  int64_t b = (n + per_block - 1) / per_block;
  if (b < 1) b = 1;
  if (b > 2147483647) b = 2147483647;
  return (unsigned)b;
}

#endif /* VQC_KERNELS_GPU_INTERNAL_H */
