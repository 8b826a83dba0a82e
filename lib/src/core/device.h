/* device.h (internal): the small set of device-memory operations that
 * tensor.c needs, so that tensor.c never includes a CUDA header.
 *
 * With VQC_WITH_CUDA these are implemented in cuda/storage_cuda.c on top of
 * the CUDA runtime API; without it, tensor.c provides stand-ins that return
 * VQC_ENODEVICE with a message saying the build has no CUDA. Every function
 * that fails records a message through vqc_error (file:line and the CUDA
 * error string) and returns VQC_ENODEVICE when there is no usable device,
 * VQC_ECUDA for any other CUDA failure.
 *
 * All pointers named `dev` are device addresses; `host` ones are CPU memory.
 * Sizes are in bytes. */
#ifndef VQC_DEVICE_H
#define VQC_DEVICE_H

#include <stddef.h>

#include "vqc/status.h"
#include "vqc/tensor.h" /* vqc_cuda_available */

/* Allocates nbytes (> 0) of device memory into *dev; the caller frees it with
 * vqc_device_free. Fails with VQC_ENODEVICE when vqc_cuda_available() is
 * false. */
vqc_status vqc_device_alloc(void **dev, size_t nbytes);
/* Frees memory from vqc_device_alloc; accepts NULL. A failure is recorded
 * with vqc_error but cannot be returned (it is called from free paths). */
void vqc_device_free(void *dev);
/* Sets nbytes of device memory to zero bytes. */
vqc_status vqc_device_memset_zero(void *dev, size_t nbytes);

/* Synchronous copies (they return once the bytes have arrived). */
vqc_status vqc_device_memcpy_h2d(void *dev, const void *host, size_t nbytes);
vqc_status vqc_device_memcpy_d2h(void *host, const void *dev, size_t nbytes);
vqc_status vqc_device_memcpy_d2d(void *dst_dev, const void *src_dev,
                                 size_t nbytes);

#endif /* VQC_DEVICE_H */
