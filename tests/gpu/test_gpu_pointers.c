/* test_gpu_pointers.c: every public kernel wrapper (vqc/gpu.h) refuses a
 * host pointer with VQC_EINVAL naming the function and the argument,
 * before anything runs, and the CUDA context stays usable afterwards (a
 * kernel handed a host pointer would fault with an illegal address, which
 * ruins the context for the rest of the process). Label gpu; skips without
 * a device. The classification itself (device, managed, host, past the
 * allocation, a failing query) is checked without a GPU in
 * kernels/emu/test_kernels_emulated.cpp. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpu_test_util.h"
#include "vqc/fsq.h"
#include "vqc/gpu.h"
#include "vqc/vq.h"

/* The call returned VQC_EINVAL and the message names fn and arg. */
#define EXPECT_REFUSED(call, fn, arg)                                       \
  do {                                                                      \
    vqc_status s_ = (call);                                                 \
    cr_expect_eq(s_, VQC_EINVAL, "%s: got %s", #call, vqc_status_name(s_)); \
    cr_expect(strstr(vqc_last_error(), fn) && strstr(vqc_last_error(), arg), \
              "%s: message %s", #call, vqc_last_error());                   \
  } while (0)

Test(gpu_pointers, host_pointers_are_refused_and_the_context_survives) {
  gpu_require();
  enum { M = 64, C = 16, D = 8 };
  static float hx[M * D], hE[C * D], hout[M * D], hcs[C];
  static int64_t hidx[M];
  static int32_t hi32[M];
  vqc_tensor x = gpu_upload(hx, sizeof hx), E = gpu_upload(hE, sizeof hE);
  vqc_tensor out = gpu_alloc(sizeof hout), idx = gpu_alloc(sizeof hidx);
  vqc_tensor cs = gpu_alloc(sizeof hcs), avg = gpu_alloc(sizeof hE),
             emb = gpu_alloc(sizeof hE);
  cr_assert_eq(vqc_device_memset_zero(gpu_ptr(&idx), sizeof hidx), VQC_OK);
  float *dx = gpu_ptr(&x), *dE = gpu_ptr(&E), *dout = gpu_ptr(&out);
  int64_t *didx = gpu_ptr(&idx);
  vqc_vq_params p;
  vqc_vq_params_default(&p, D, C);
  uint64_t leaves[1];

  EXPECT_REFUSED(vqc_gpu_fill_u32(hx, 4, 0), "vqc_gpu_fill_u32", "dev");
  EXPECT_REFUSED(vqc_gpu_digest_leaves(hx, sizeof hx, leaves), "gpu digest",
                 "dev");
  EXPECT_REFUSED(vqc_gpu_vq_sqnorms(hx, M, D, dout), "gpu vq sqnorms", "A");
  EXPECT_REFUSED(vqc_gpu_vq_sqnorms(dx, M, D, hout), "gpu vq sqnorms", "out");
  EXPECT_REFUSED(vqc_gpu_vq_nearest(dx, M, hE, C, D, didx, NULL),
                 "gpu vq nearest", "E");
  EXPECT_REFUSED(vqc_gpu_vq_nearest(dx, M, dE, C, D, hidx, NULL),
                 "gpu vq nearest", "indices");
  EXPECT_REFUSED(vqc_gpu_vq_nearest(dx, M, dE, C, D, didx, hout),
                 "gpu vq nearest", "neg_dist");
  EXPECT_REFUSED(vqc_gpu_vq_gather(dE, C, D, didx, M, hout), "gpu vq gather",
                 "quantized");
  EXPECT_REFUSED(vqc_gpu_vq_stats(hx, M, D, didx, C, gpu_ptr(&cs),
                                  gpu_ptr(&avg)),
                 "gpu vq stats", "x");
  EXPECT_REFUSED(vqc_gpu_vq_stats(dx, M, D, didx, C, hcs, gpu_ptr(&avg)),
                 "gpu vq stats", "counts");
  EXPECT_REFUSED(vqc_gpu_lerp(hcs, gpu_ptr(&cs), C, 0.5f), "gpu lerp", "a");
  EXPECT_REFUSED(vqc_gpu_vq_renormalize(gpu_ptr(&cs), hE, C, D, p.eps,
                                        gpu_ptr(&emb)),
                 "gpu vq renormalize", "embed_avg");
  vqc_fsq q;
  const int32_t levels[3] = {8, 5, 5};
  cr_assert_eq(vqc_fsq_init(&q, levels, 3, 1, false, 1e-3), VQC_OK, "%s",
               vqc_last_error());
  EXPECT_REFUSED(vqc_gpu_fsq_quantize(&q, hx, 4, dout, NULL, NULL),
                 "gpu fsq quantize", "z");
  EXPECT_REFUSED(vqc_gpu_fsq_quantize(&q, dx, 4, dout, hi32, NULL),
                 "gpu fsq quantize", "indices");

  /* nothing faulted: the context still runs kernels */
  cr_expect_eq(vqc_gpu_vq_nearest(dx, M, dE, C, D, didx, NULL), VQC_OK, "%s",
               vqc_last_error());
  cr_expect_eq(vqc_gpu_synchronize(), VQC_OK, "%s", vqc_last_error());
  vqc_tensor_free(&x), vqc_tensor_free(&E), vqc_tensor_free(&out);
  vqc_tensor_free(&idx), vqc_tensor_free(&cs), vqc_tensor_free(&avg);
  vqc_tensor_free(&emb);
}
