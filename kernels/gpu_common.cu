/* gpu_common.cu: the device probe, synchronisation check and scratch memory
 * every kernel wrapper uses (gpu_internal.h; the CUDA error check itself is
 * the library's, lib/src/core/cuda/cuda_check.h), and the small public
 * helpers of vqc/gpu_base.h that belong to no kernel family (built,
 * synchronize, fill). */
#include <cuda_runtime.h>

#include "gpu_internal.h"
#include "vqc/gpu.h"
#include "vqc/tensor.h"

vqc_status vqc_gpu_require(const char *what) {
  if (vqc_cuda_available()) return VQC_OK;
  return vqc_error(VQC_ENODEVICE,
                   "%s: no usable CUDA device (the runtime reports none, or "
                   "its driver is missing or too old)", what);
}

vqc_status vqc_gpu_sync_check(const char *what, const char *file, int line) {
  /* cudaGetLastError first: a launch error not yet collected would
   * otherwise be reported by whichever call comes next, far from here. */
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaStreamSynchronize(0);
  return vqc_cuda_check_at(e, what, file, line);
}

/* Whether the current device supports stream-ordered allocation. Asked on
 * every call: a cheap attribute read, and it keeps this file free of
 * process-wide state. */
static bool has_mem_pools(void) {
  int dev = 0, pools = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, dev) !=
      cudaSuccess) {
    (void)cudaGetLastError(); /* do not leave it for the next check */
    return false;
  }
  return pools != 0;
}

vqc_status vqc_gpu_scratch_alloc_on(void **p, size_t nbytes,
                                    cudaStream_t stream, const char *file,
                                    int line) {
  *p = NULL;
  if (nbytes == 0) nbytes = 1; /* a valid pointer for empty work */
  cudaError_t e = has_mem_pools() ? cudaMallocAsync(p, nbytes, stream)
                                  : cudaMalloc(p, nbytes);
  if (e != cudaSuccess) *p = NULL;
  return vqc_cuda_check_at(e, "scratch allocation", file, line);
}

void vqc_gpu_scratch_free_on(void *p, cudaStream_t stream) {
  if (p == NULL) return;
  cudaError_t e = has_mem_pools() ? cudaFreeAsync(p, stream) : cudaFree(p);
  /* Free paths cannot return a status; the message is still recorded. */
  (void)vqc_cuda_check_at(e, "scratch free", __FILE__, __LINE__);
}

vqc_status vqc_gpu_scratch_alloc(void **p, size_t nbytes, const char *file,
                                 int line) {
  return vqc_gpu_scratch_alloc_on(p, nbytes, 0, file, line);
}

void vqc_gpu_scratch_free(void *p) { vqc_gpu_scratch_free_on(p, 0); }

/* ---- public helpers */

bool vqc_gpu_built(void) { return true; }

int vqc_gpu_device_count(void) {
  int count = 0;
  if (!vqc_cuda_available() || cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError(); /* a query: leave no sticky error behind */
    return 0;
  }
  return count;
}

vqc_status vqc_gpu_check_device_buffer(const char *fn, const char *arg,
                                       const void *p, size_t nbytes) {
  return vqc_gpu_check_device_ptr(fn, arg, p, nbytes);
}

vqc_status vqc_gpu_synchronize(void) {
  VQC_TRY(vqc_gpu_require("vqc_gpu_synchronize"));
  return GPU_CHECK(cudaDeviceSynchronize());
}

/* One thread per word, grid-stride so any n fits one launch. */
__global__ static void fill_u32_kernel(uint32_t *p, size_t n,
                                       uint32_t pattern) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride)
    p[i] = pattern;
}

vqc_status vqc_gpu_fill_u32(void *dev, size_t nwords, uint32_t pattern) {
  VQC_TRY(vqc_gpu_require("vqc_gpu_fill_u32"));
  if (nwords == 0) return VQC_OK;
  VQC_TRY(vqc_gpu_check_device_ptr("vqc_gpu_fill_u32", "dev", dev,
                                   nwords * 4));
  unsigned blocks = vqc_gpu_blocks((int64_t)(nwords < 65536 * 256
                                                 ? nwords
                                                 : 65536 * 256),
                                   256);
  fill_u32_kernel<<<blocks, 256>>>((uint32_t *)dev, nwords, pattern);
  VQC_TRY(GPU_LAUNCH_CHECK("fill_u32_kernel"));
  return GPU_SYNC("fill_u32_kernel");
}
