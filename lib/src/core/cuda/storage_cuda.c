/* storage_cuda.c: device memory for tensor storage through the CUDA runtime
 * API (device.h), compiled only when the build has CUDA (VQC_WITH_CUDA).
 *
 * Plain C: it calls cudaMalloc/cudaFree/cudaMemcpy/cudaMemset/
 * cudaGetDeviceCount through cuda_runtime_api.h, so no nvcc is needed here.
 * Every CUDA call goes through VQC_CUDA_CHECK (core/cuda/cuda_check.h, the
 * one check the library, its kernels and the nccl backend share), which
 * records the caller's file:line, the call and CUDA's error string through
 * vqc_error_at. A machine whose driver is missing or too old ("CUDA driver
 * version is insufficient") or that has no device counts as "no device"
 * (VQC_ENODEVICE), not as a CUDA failure, so callers can skip cleanly. */
#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "core/cuda/cuda_check.h"
#include "core/device.h"
#include "vqc/status.h"
#include "vqc/tensor.h"

/* The device probe runs once per process; its answer cannot change while the
 * process lives. probe_state: 0 not yet probed, 1 available, 2 not. Two
 * threads racing on the first probe both compute the same answer, so a plain
 * atomic store is enough (no lock). */
static int probe_state;
static int probe_error; /* the cudaError_t saying why not, when state is 2 */

bool vqc_cuda_available(void) {
  int state = __atomic_load_n(&probe_state, __ATOMIC_ACQUIRE);
  if (state == 0) {
    int count = 0;
    /* Not through VQC_CUDA_CHECK on purpose: this query never fails and
     * must not overwrite the caller's last error message. The reason is kept
     * for the message of a later failing request (require_device). */
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count <= 0) e = cudaErrorNoDevice;
    __atomic_store_n(&probe_error, (int)e, __ATOMIC_RELAXED);
    (void)cudaGetLastError(); /* clear CUDA's sticky last error */
    state = (e == cudaSuccess) ? 1 : 2;
    __atomic_store_n(&probe_state, state, __ATOMIC_RELEASE);
  }
  return state == 1;
}

/* Every entry point first checks that a device exists, so a machine without
 * one gets VQC_ENODEVICE with the probe's reason. */
static vqc_status require_device(const char *what) {
  if (vqc_cuda_available()) return VQC_OK;
  cudaError_t why = (cudaError_t)__atomic_load_n(&probe_error, __ATOMIC_RELAXED);
  return vqc_error(VQC_ENODEVICE, "%s: no usable CUDA device (%s: %s)", what,
                   cudaGetErrorName(why), cudaGetErrorString(why));
}

vqc_status vqc_device_alloc(void **dev, size_t nbytes) {
  if (dev == NULL) return vqc_error(VQC_EINVAL, "vqc_device_alloc: dev is NULL");
  *dev = NULL;
  VQC_TRY(require_device("device storage"));
  if (nbytes == 0)
    return vqc_error(VQC_EINVAL, "vqc_device_alloc: nbytes is 0");
  return VQC_CUDA_CHECK(cudaMalloc(dev, nbytes));
}

void vqc_device_free(void *dev) {
  if (dev == NULL) return;
  (void)VQC_CUDA_CHECK(cudaFree(dev));
}

vqc_status vqc_device_memset_zero(void *dev, size_t nbytes) {
  if (nbytes == 0) return VQC_OK;
  VQC_TRY(require_device("device memset"));
  return VQC_CUDA_CHECK(cudaMemset(dev, 0, nbytes));
}

vqc_status vqc_device_memcpy_h2d(void *dev, const void *host, size_t nbytes) {
  if (nbytes == 0) return VQC_OK;
  VQC_TRY(require_device("host-to-device copy"));
  return VQC_CUDA_CHECK(
      cudaMemcpy(dev, host, nbytes, cudaMemcpyHostToDevice));
}

vqc_status vqc_device_memcpy_d2h(void *host, const void *dev, size_t nbytes) {
  if (nbytes == 0) return VQC_OK;
  VQC_TRY(require_device("device-to-host copy"));
  return VQC_CUDA_CHECK(
      cudaMemcpy(host, dev, nbytes, cudaMemcpyDeviceToHost));
}

vqc_status vqc_device_memcpy_d2d(void *dst_dev, const void *src_dev,
                                 size_t nbytes) {
  if (nbytes == 0) return VQC_OK;
  VQC_TRY(require_device("device-to-device copy"));
  return VQC_CUDA_CHECK(
      cudaMemcpy(dst_dev, src_dev, nbytes, cudaMemcpyDeviceToDevice));
}
