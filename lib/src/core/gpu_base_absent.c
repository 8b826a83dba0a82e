/* gpu_base_absent.c: vqc/gpu_base.h in a build without CUDA
 * (VQC_WITH_CUDA 0). Every entry point exists, so callers compile and link
 * the same way in every build, and says how to get the kernels instead of
 * failing to link. With CUDA the real wrappers live in the .cu files of
 * kernels/ and this file holds nothing. */
#include "core/gpu_absent.h"
#include "vqc/gpu_base.h"
#include "vqc/version.h"

#if !VQC_WITH_CUDA

vqc_status vqc_gpu_absent(const char *fn) {
  return vqc_error(VQC_EUNSUPPORTED,
                   "%s: this build has no CUDA kernels; install the CUDA "
                   "toolkit (nvcc) and reconfigure with -DVQC_WITH_CUDA=ON",
                   fn);
}


bool vqc_gpu_built(void) { return false; }

int vqc_gpu_device_count(void) { return 0; }

vqc_status vqc_gpu_check_device_buffer(const char *fn, const char *arg,
                                       const void *p, size_t nbytes) {
  (void)fn, (void)arg, (void)p, (void)nbytes;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_synchronize(void) { return vqc_gpu_absent(__func__); }

vqc_status vqc_gpu_fill_u32(void *dev, size_t nwords, uint32_t pattern) {
  (void)dev, (void)nwords, (void)pattern;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_digest_leaves(const void *dev, size_t n, uint64_t *leaves) {
  (void)dev, (void)n, (void)leaves;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_digest_leaves_on(const void *dev, size_t n,
                                    uint64_t *leaves, void *stream) {
  (void)dev, (void)n, (void)leaves, (void)stream;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_digest_buffer(const void *dev, size_t n, vqc_dtype dt,
                                 int ndim, const int64_t *shape,
                                 uint64_t *out) {
  (void)dev, (void)n, (void)dt, (void)ndim, (void)shape, (void)out;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_xxh3_64_emulated(const void *data, size_t n,
                                    uint64_t *out) {
  (void)data, (void)n, (void)out;
  return vqc_gpu_absent(__func__);
}

vqc_status vqc_gpu_sum_in_rank_order_async(const void *gathered, int nranks,
                                           size_t count, vqc_dtype dt,
                                           void *out, void *stream) {
  (void)gathered, (void)nranks, (void)count, (void)dt, (void)out, (void)stream;
  return vqc_gpu_absent(__func__);
}

#endif /* !VQC_WITH_CUDA */
