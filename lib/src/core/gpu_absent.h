/* gpu_absent.h: the one error every kernel entry point of a build without
 * CUDA returns (core/gpu_base_absent.c, quant/gpu_absent.c); not public. */
#ifndef VQC_CORE_GPU_ABSENT_H
#define VQC_CORE_GPU_ABSENT_H

#include "vqc/status.h"

/* VQC_EUNSUPPORTED, recorded with a message that names fn and says how to
 * build the kernels. */
vqc_status vqc_gpu_absent(const char *fn);

#endif /* VQC_CORE_GPU_ABSENT_H */
