/* digest_main.c: a program outside vqcheck's tree, built against an
 * installed vqcheck (tests/install/consumer_test.sh): prints the tensor
 * digest (vqc/digest.h) of 100000 float32 values i * 0.5, shape (100000),
 * as 16 hex digits. The test compares it with the README's formula run in
 * Python (an oracle that shares no code with the library). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "vqc/digest.h"
#include "vqc/version.h"

int main(void) {
  enum { N = 100000 }; /* two 64 KiB leaves and a partial one */
  float *x = malloc(N * sizeof *x);
  if (!x) return 3;
  for (int i = 0; i < N; i++) x[i] = (float)i * 0.5f;
  const int64_t shape[1] = {N};
  uint64_t d = 0;
  vqc_status s = vqc_digest_buffer(x, N * sizeof *x, VQC_F32, 1, shape, &d);
  free(x);
  if (s != VQC_OK) {
    fprintf(stderr, "digest: %s: %s\n", vqc_status_name(s), vqc_last_error());
    return 3;
  }
  printf("%016" PRIx64 "\n", d);
  fprintf(stderr, "linked against vqcheck %s\n", VQC_VERSION_STRING);
  return 0;
}
