/* cuda_check.h (internal): the one check of a CUDA runtime call's result in
 * libvqcheck, shared by the plain C sources that call the runtime
 * (core/cuda/storage_cuda.c, comm/nccl/comm_nccl.c) and the .cu files of
 * kernels/ (through kernels/gpu_internal.h). C and C++ include it alike;
 * it exists only in builds with CUDA (it includes the runtime's header, and
 * core/cuda/cuda_check.c is compiled only with VQC_WITH_CUDA).
 *
 * A call that failed becomes
 *   - VQC_ENODEVICE when CUDA's error means "there is no usable GPU here"
 *     (no device, a driver missing or too old, the stub library, a driver
 *     mismatch), so callers can skip cleanly;
 *   - VQC_ECUDA for any other error;
 * recorded with vqc_error_at at the caller's file:line as
 *   "WHAT failed: STRING (NAME)"
 * with WHAT the call's text (or the caller's formatted words) and CUDA's
 * error string and name. */
#ifndef VQC_CORE_CUDA_CHECK_H
#define VQC_CORE_CUDA_CHECK_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether e means "no usable GPU here" rather than "the GPU misbehaved". */
bool vqc_cuda_is_no_device_error(cudaError_t e);

/* VQC_OK when e is cudaSuccess; else the error above, WHAT = call. */
vqc_status vqc_cuda_check_at(cudaError_t e, const char *call,
                             const char *file, int line);

/* The same with WHAT formatted from fmt (e.g. "rank %d: %s", rank, call);
 * nothing is formatted when e is cudaSuccess. */
vqc_status vqc_cuda_checkf_at(cudaError_t e, const char *file, int line,
                              const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* VQC_CUDA_CHECK(call): call's result as a vqc_status, recorded at the
 * caller's file:line with the call's text. */
#define VQC_CUDA_CHECK(call) \
  vqc_cuda_check_at((call), #call, __FILE__, __LINE__)

#ifdef __cplusplus
}
#endif
#endif /* VQC_CORE_CUDA_CHECK_H */
