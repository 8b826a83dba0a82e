/* test_gpu_tensor.c: device storage on a real GPU (label gpu).
 *
 * Every test skips, with the reason, where no CUDA device answers (this
 * includes CUDA builds on machines whose driver is too old: the runtime then
 * says "driver version is insufficient", which vqcheck treats as no device).
 * Outputs are poisoned before each copy so a copy that did nothing fails. */
#include <criterion/criterion.h>
#include <string.h>

#include "vqc/vqc.h"

static void require_device(void) {
  if (!vqc_cuda_available())
    cr_skip_test("no usable CUDA device (build has CUDA: %s)",
                 VQC_WITH_CUDA ? "yes" : "no");
}

Test(gpu_tensor, round_trip_every_dtype) {
  require_device();
  for (int dt = 0; dt < VQC_DTYPE_COUNT; dt++) {
    int64_t shape[2] = {37, 129}; /* odd sizes: no accidental alignment */
    vqc_tensor host, dev, back;
    cr_assert_eq(vqc_tensor_empty(&host, (vqc_dtype)dt, 2, shape,
                                  VQC_DEVICE_CPU), VQC_OK);
    unsigned char *h = vqc_tensor_data(&host);
    for (size_t i = 0; i < vqc_tensor_nbytes(&host); i++)
      h[i] = (unsigned char)(i * 31 + 7);
    cr_assert_eq(vqc_tensor_to(&host, VQC_DEVICE_CUDA, &dev), VQC_OK, "%s",
                 vqc_last_error());
    cr_assert_eq(dev.storage->device, VQC_DEVICE_CUDA);
    cr_assert_eq(vqc_tensor_empty(&back, (vqc_dtype)dt, 2, shape,
                                  VQC_DEVICE_CPU), VQC_OK);
    memset(vqc_tensor_data(&back), 0xA5, vqc_tensor_nbytes(&back)); /* poison */
    vqc_tensor tmp;
    cr_assert_eq(vqc_tensor_to(&dev, VQC_DEVICE_CPU, &tmp), VQC_OK);
    cr_assert_eq(vqc_tensor_copy(&back, &tmp), VQC_OK);
    cr_expect_eq(memcmp(vqc_tensor_data(&back), h, vqc_tensor_nbytes(&host)),
                 0, "dtype %s did not survive the round trip",
                 vqc_dtype_name((vqc_dtype)dt));
    vqc_tensor_free(&tmp);
    vqc_tensor_free(&back);
    vqc_tensor_free(&dev);
    vqc_tensor_free(&host);
  }
}

Test(gpu_tensor, strided_device_copy_and_digest) {
  require_device();
  int64_t shape[2] = {64, 48};
  vqc_tensor host, dev;
  cr_assert_eq(vqc_tensor_empty(&host, VQC_F32, 2, shape, VQC_DEVICE_CPU),
               VQC_OK);
  float *h = vqc_tensor_data(&host);
  for (int i = 0; i < 64 * 48; i++) h[i] = (float)i;
  cr_assert_eq(vqc_tensor_to(&host, VQC_DEVICE_CUDA, &dev), VQC_OK);
  /* A transposed device view, made contiguous on the device, then digested:
   * must equal the digest of the same transpose made on the host. */
  vqc_tensor tview, tdev_c, hview;
  cr_assert_eq(vqc_tensor_transpose(&dev, 0, 1, &tview), VQC_OK);
  cr_assert_eq(vqc_tensor_contiguous(&tview, &tdev_c), VQC_OK, "%s",
               vqc_last_error());
  cr_assert_eq(vqc_tensor_transpose(&host, 0, 1, &hview), VQC_OK);
  uint64_t dg_dev = 0, dg_host = 1;
  cr_assert_eq(vqc_digest_tensor(&tdev_c, &dg_dev), VQC_OK, "%s",
               vqc_last_error());
  cr_assert_eq(vqc_digest_tensor(&hview, &dg_host), VQC_OK);
  cr_expect_eq(dg_dev, dg_host);
  vqc_tensor_free(&tdev_c);
  vqc_tensor_free(&tview);
  vqc_tensor_free(&hview);
  vqc_tensor_free(&dev);
  vqc_tensor_free(&host);
}

Test(gpu_tensor, no_device_is_reported_not_crashed) {
  /* Runs everywhere: without a device the request fails cleanly. */
  int64_t shape[1] = {4};
  vqc_tensor t;
  vqc_status s = vqc_tensor_empty(&t, VQC_F32, 1, shape, VQC_DEVICE_CUDA);
  if (vqc_cuda_available()) {
    cr_expect_eq(s, VQC_OK, "%s", vqc_last_error());
    vqc_tensor_free(&t);
  } else {
    cr_expect_eq(s, VQC_ENODEVICE, "got %s", vqc_status_name(s));
    cr_expect_neq(vqc_last_error()[0], '\0', "the error must say why");
  }
}
