/* cuda_check.c: the one CUDA error check (core/cuda/cuda_check.h), compiled
 * only when the build has CUDA (VQC_WITH_CUDA). Plain C on
 * cuda_runtime_api.h: no nvcc needed here. */
#include "core/cuda/cuda_check.h"

#include <stdarg.h>
#include <stdio.h>

bool vqc_cuda_is_no_device_error(cudaError_t e) {
  return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
         e == cudaErrorStubLibrary || e == cudaErrorSystemDriverMismatch ||
         e == cudaErrorCompatNotSupportedOnDevice;
}

static vqc_status record(cudaError_t e, const char *file, int line,
                         const char *what) {
  vqc_status s = vqc_cuda_is_no_device_error(e) ? VQC_ENODEVICE : VQC_ECUDA;
  return vqc_error_at(s, file, line, "%s failed: %s (%s)", what,
                      cudaGetErrorString(e), cudaGetErrorName(e));
}

vqc_status vqc_cuda_check_at(cudaError_t e, const char *call,
                             const char *file, int line) {
  if (e == cudaSuccess) return VQC_OK;
  return record(e, file, line, call);
}

vqc_status vqc_cuda_checkf_at(cudaError_t e, const char *file, int line,
                              const char *fmt, ...) {
  if (e == cudaSuccess) return VQC_OK;
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return record(e, file, line, what);
}
