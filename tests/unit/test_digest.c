/* test_digest.c: the tensor digest (vqc/digest.h).
 *
 * Three layers, each checked against something independent of digest.c:
 *  1. the leaf function is XXH3-64: xxHash's own published sanity vectors;
 *  2. the tree: the definition in digest.h restated here from plain
 *     XXH3_64bits calls (libxxhash's SSE2 build, not the dispatcher digest.c
 *     uses) over a hand-built header;
 *  3. every way of computing agrees with (2): one-shot, streamed in random
 *     pieces and byte by byte, across 1, 2, 3 and 7 threads, and from strided
 *     tensors whose row-major contents the test builds itself. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h> /* plain XXH3_64bits: the test's own oracle */

#include "vqc/digest.h"
#include "vqc/tensor.h"

#define CHUNK VQC_DIGEST_CHUNK

/* ---- helpers */

/* xxHash's sanity-test buffer (cli/xsum_sanity_check.c, XSUM_fillTestBuffer):
 * a 64-bit generator starting at PRIME32, multiplied by PRIME64 per byte,
 * each byte its top 8 bits. */
static void fill_sanity_buffer(uint8_t *buf, size_t len) {
  uint64_t gen = 2654435761U;                       /* PRIME32 */
  for (size_t i = 0; i < len; i++) {
    buf[i] = (uint8_t)(gen >> 56);
    gen *= 11400714785074694797ULL;                 /* PRIME64 */
  }
}

/* splitmix64: a fixed-seed source of bytes and piece sizes. */
static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* n fixed-seed random bytes; the caller frees them. */
static uint8_t *random_bytes(size_t n, uint64_t seed) {
  uint8_t *p = malloc(n > 0 ? n : 1);
  cr_assert_not_null(p);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t r = splitmix64(&seed);
    for (size_t b = 0; b < 8 && i + b < n; b++)
      p[i + b] = (uint8_t)(r >> (8 * b));
  }
  return p;
}

/* The definition in digest.h, written out independently: header bytes by
 * hand, one XXH3_64bits per 64 KiB chunk (one leaf for an empty buffer), then
 * XXH3_64bits over header | leaves as u64 LE. */
static uint64_t reference_digest(const uint8_t *data, size_t n, uint8_t code,
                                 int ndim, const int64_t *shape) {
  size_t nleaves = n == 0 ? 1 : (n + CHUNK - 1) / CHUNK;
  size_t len = 8 + 8 * (size_t)ndim + 8 * nleaves;
  uint8_t *msg = malloc(len);
  cr_assert_not_null(msg);
  uint8_t *p = msg;
  *p++ = 'V'; *p++ = 'Q'; *p++ = 'C'; *p++ = 'D';
  *p++ = 1; *p++ = code; *p++ = (uint8_t)ndim; *p++ = 0;
  for (int d = 0; d < ndim; d++)
    for (int b = 0; b < 8; b++) *p++ = (uint8_t)((uint64_t)shape[d] >> (8 * b));
  for (size_t i = 0; i < nleaves; i++) {
    size_t begin = i * CHUNK;
    size_t cl = n - begin < CHUNK ? n - begin : CHUNK;
    uint64_t leaf = XXH3_64bits(data + begin, cl);
    for (int b = 0; b < 8; b++) *p++ = (uint8_t)(leaf >> (8 * b));
  }
  uint64_t d = XXH3_64bits(msg, len);
  free(msg);
  return d;
}

/* Streams data in pieces of random size 0 .. max_piece (fixed seed). */
static uint64_t streamed_digest(const uint8_t *data, size_t n, vqc_dtype dt,
                                int ndim, const int64_t *shape,
                                size_t max_piece, uint64_t seed) {
  vqc_digest_state *st = NULL;
  cr_assert_eq(vqc_digest_create(&st, dt, ndim, shape), VQC_OK);
  size_t pos = 0;
  while (pos < n) {
    size_t piece = (size_t)(splitmix64(&seed) % (max_piece + 1));
    if (piece > n - pos) piece = n - pos;
    cr_assert_eq(vqc_digest_update(st, data + pos, piece), VQC_OK);
    pos += piece;
  }
  uint64_t d = 0;
  cr_assert_eq(vqc_digest_final(st, &d), VQC_OK);
  vqc_digest_destroy(st);
  return d;
}

static uint64_t bytewise_digest(const uint8_t *data, size_t n, vqc_dtype dt,
                                int ndim, const int64_t *shape) {
  vqc_digest_state *st = NULL;
  cr_assert_eq(vqc_digest_create(&st, dt, ndim, shape), VQC_OK);
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(vqc_digest_update(st, data + i, 1), VQC_OK);
  uint64_t d = 0;
  cr_assert_eq(vqc_digest_final(st, &d), VQC_OK);
  vqc_digest_destroy(st);
  return d;
}

/* ---- 1. the leaf function */

/* XXH3_64bits, seed 0, on the sanity buffer: the published values in xxHash's
 * cli/xsum_sanity_check.c (XSUM_XXH3_testdata, seed-0 rows; unchanged since
 * v0.8.0, Debian ships 0.8.1). The lengths cover every internal code path:
 * 1-3, 4-8, 9-16, 17-128, 129-240, one block, block and stripe boundaries. */
static const struct { size_t len; uint64_t hash; } xxh3_vectors[] = {
    {0, 0x2D06800538D394C2ULL},    {1, 0xC44BDFF4074EECDBULL},
    {6, 0x27B56A84CD2D7325ULL},    {12, 0xA713DAF0DFBB77E7ULL},
    {24, 0xA3FE70BF9D3510EBULL},   {48, 0x397DA259ECBA1F11ULL},
    {80, 0xBCDEFBBB2C47C90AULL},   {195, 0xCD94217EE362EC3AULL},
    {403, 0xCDEB804D65C6DEA4ULL},  {512, 0x617E49599013CB6BULL},
    {2048, 0xDD59E2C3A5F038E0ULL}, {2240, 0x6E73A90539CF2948ULL},
    {2367, 0xCB37AEB9E5D361EDULL},
};

Test(digest, leaf_is_xxh3_published_vectors) {
  uint8_t buf[2367];
  fill_sanity_buffer(buf, sizeof buf);
  for (size_t k = 0; k < sizeof xxh3_vectors / sizeof xxh3_vectors[0]; k++) {
    size_t len = xxh3_vectors[k].len;
    uint64_t want = xxh3_vectors[k].hash;
    cr_expect_eq(vqc_xxh3_64(buf, len), want, "vqc_xxh3_64 len %zu: %016llx",
                 len, (unsigned long long)vqc_xxh3_64(buf, len));
    /* the oracle used below must agree with the published values too */
    cr_expect_eq(XXH3_64bits(buf, len), want, "XXH3_64bits len %zu", len);
  }
  cr_assert_eq(vqc_xxh3_64(NULL, 0), 0x2D06800538D394C2ULL);
}

/* ---- 2. the header and the tree */

Test(digest, header_bytes) {
  int64_t shape[3] = {2, 65537, 0x0102030405060708LL};
  uint8_t h[8 + 8 * VQC_MAX_DIMS];
  cr_assert_eq(vqc_digest_header(VQC_F64, 3, shape, h), 32);
  const uint8_t want[32] = {
      'V', 'Q', 'C', 'D', 1, 2 /* float64 */, 3, 0,
      2, 0, 0, 0, 0, 0, 0, 0,
      0x01, 0x00, 0x01, 0, 0, 0, 0, 0,         /* 65537 = 0x10001 */
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
  cr_assert_arr_eq(h, want, sizeof want);

  cr_assert_eq(vqc_digest_header(VQC_U8, 0, NULL, h), 8);
  cr_assert_eq(h[5], 5, "uint8 has digest code 5");
  cr_assert_eq(h[6], 0);
  /* arguments the definition cannot encode give no header */
  cr_assert_eq(vqc_digest_header(VQC_DTYPE_COUNT, 1, shape, h), 0);
  cr_assert_eq(vqc_digest_header(VQC_F32, VQC_MAX_DIMS + 1, shape, h), 0);
  cr_assert_eq(vqc_digest_header(VQC_F32, -1, shape, h), 0);
  cr_assert_eq(vqc_digest_header(VQC_F32, 1, NULL, h), 0);
}

Test(digest, tree_definition_several_chunks_and_ragged_tail) {
  /* float32 (3, 65543): 786516 bytes = 12 full chunks + a 84-byte tail */
  int64_t shape[2] = {3, 65543};
  size_t n = 3 * 65543 * 4;
  uint8_t *buf = random_bytes(n, 1);
  uint64_t want = reference_digest(buf, n, 1, 2, shape);
  uint64_t got = 0;
  cr_assert_eq(vqc_digest_buffer(buf, n, VQC_F32, 2, shape, &got), VQC_OK);
  cr_assert_eq(got, want, "got %016llx want %016llx", (unsigned long long)got,
               (unsigned long long)want);

  /* the leaves really are per chunk: changing the last byte of chunk 5
   * changes the digest */
  buf[6 * CHUNK - 1] ^= 1;
  uint64_t changed = 0;
  cr_assert_eq(vqc_digest_buffer(buf, n, VQC_F32, 2, shape, &changed), VQC_OK);
  cr_assert_neq(changed, got);
  cr_assert_eq(changed, reference_digest(buf, n, 1, 2, shape));
  free(buf);
}

Test(digest, large_buffer_many_leaves) {
  /* 516 leaves (~33 MiB): more leaves than digest.c feeds to the root in one
   * batch (255), so the one-shot path crosses batch boundaries; and at least
   * 16 MiB, where full chunks are hashed three at a time in interleaved
   * pieces (515 full chunks, not a multiple of 3, then the tail: the last
   * full chunks are left without a group, in every thread's run too) */
  size_t n = 515 * CHUNK + 12;
  int64_t shape[1] = {(int64_t)n / 4};
  uint8_t *buf = random_bytes(n, 11);
  uint64_t want = reference_digest(buf, n, 3, 1, shape);
  uint64_t one = 0, par = 0;
  cr_assert_eq(vqc_digest_buffer(buf, n, VQC_I32, 1, shape, &one), VQC_OK);
  cr_expect_eq(one, want, "one-shot");
  cr_assert_eq(vqc_digest_buffer_parallel(buf, n, VQC_I32, 1, shape, 3, &par),
               VQC_OK);
  cr_expect_eq(par, want, "3 threads");
  cr_expect_eq(streamed_digest(buf, n, VQC_I32, 1, shape, 5 * CHUNK, 13), want,
               "random pieces <= 5 chunks");
  cr_expect_eq(streamed_digest(buf, n, VQC_I32, 1, shape, 80 * CHUNK, 17),
               want, "random pieces <= 80 chunks (5 MiB)");

  /* pieces of 16 MiB and more take the grouped path of vqc_digest_update:
   * the whole buffer at once; and 1000 bytes, then 24 MiB + 1 byte (which
   * first completes the open chunk, then hashes groups of three, then
   * single chunks, then leaves a chunk open), then the rest */
  const size_t splits[2][3] = {{n, 0, 0},
                               {1000, ((size_t)24 << 20) + 1,
                                n - 1000 - ((size_t)24 << 20) - 1}};
  for (int k = 0; k < 2; k++) {
    vqc_digest_state *st = NULL;
    cr_assert_eq(vqc_digest_create(&st, VQC_I32, 1, shape), VQC_OK);
    size_t pos = 0;
    for (int j = 0; j < 3; j++) {
      cr_assert_eq(vqc_digest_update(st, buf + pos, splits[k][j]), VQC_OK);
      pos += splits[k][j];
    }
    uint64_t got = 0;
    cr_assert_eq(vqc_digest_final(st, &got), VQC_OK);
    vqc_digest_destroy(st);
    cr_expect_eq(got, want, "large pieces, split %d", k);
  }
  free(buf);
}

Test(digest, empty_buffer_has_one_leaf) {
  int64_t shape[2] = {0, 7};
  uint64_t got = 0;
  cr_assert_eq(vqc_digest_buffer(NULL, 0, VQC_I64, 2, shape, &got), VQC_OK);
  /* header | XXH3(empty) written out by hand */
  uint8_t msg[8 + 16 + 8] = {'V', 'Q', 'C', 'D', 1, 4 /* int64 */, 2, 0,
                             0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0,
                             0xC2, 0x94, 0xD3, 0x38, 0x05, 0x80, 0x06, 0x2D};
  cr_assert_eq(got, XXH3_64bits(msg, sizeof msg));
}

/* ---- 3. every way of computing agrees */

Test(digest, all_ways_agree_at_chunk_boundaries) {
  const size_t lengths[] = {0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17};
  const int threads[] = {1, 2, 3, 7};
  for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
    size_t n = lengths[k];
    int64_t shape[1] = {(int64_t)n};
    uint8_t *buf = random_bytes(n, 100 + k);
    uint64_t want = reference_digest(buf, n, 5, 1, shape);

    uint64_t one = 0;
    cr_assert_eq(vqc_digest_buffer(buf, n, VQC_U8, 1, shape, &one), VQC_OK);
    cr_expect_eq(one, want, "one-shot, n = %zu", n);

    /* pieces up to 3 chunks: some start mid-chunk and cross several
     * boundaries, some land on a boundary and take the whole-chunk path */
    cr_expect_eq(streamed_digest(buf, n, VQC_U8, 1, shape, 3 * CHUNK, 7 + k),
                 want, "random pieces <= 3 chunks, n = %zu", n);
    cr_expect_eq(streamed_digest(buf, n, VQC_U8, 1, shape, 1000, 9 + k), want,
                 "random pieces <= 1000 bytes, n = %zu", n);
    cr_expect_eq(bytewise_digest(buf, n, VQC_U8, 1, shape), want,
                 "byte by byte, n = %zu", n);

    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
      uint64_t par = 0;
      cr_assert_eq(vqc_digest_buffer_parallel(buf, n, VQC_U8, 1, shape,
                                              threads[t], &par), VQC_OK);
      cr_expect_eq(par, want, "%d threads, n = %zu", threads[t], n);
    }
    free(buf);
  }
}

Test(digest, parallel_with_more_leaves_than_threads) {
  /* 37 leaves over 7 threads: uneven runs (6,6,5,5,5,5,5) */
  size_t n = 36 * CHUNK + 4;
  int64_t shape[2] = {(int64_t)n / 4, 4};
  uint8_t *buf = random_bytes(n, 3);
  uint64_t want = reference_digest(buf, n, 5, 2, shape);
  for (int t = 1; t <= 8; t++) {
    uint64_t par = 0;
    cr_assert_eq(vqc_digest_buffer_parallel(buf, n, VQC_U8, 2, shape, t, &par),
                 VQC_OK);
    cr_expect_eq(par, want, "%d threads", t);
  }
  free(buf);
}

Test(digest, dtype_and_shape_change_the_digest) {
  /* the same 24 bytes under seven layouts: every digest differs */
  uint8_t buf[24];
  for (int i = 0; i < 24; i++) buf[i] = (uint8_t)(i * 37 + 1);
  struct { vqc_dtype dt; int ndim; int64_t shape[2]; } layouts[] = {
      {VQC_U8, 1, {24}},    {VQC_I32, 1, {6}},    {VQC_F32, 1, {6}},
      {VQC_F32, 2, {2, 3}}, {VQC_F32, 2, {3, 2}}, {VQC_F64, 1, {3}},
      {VQC_I64, 1, {3}},
  };
  size_t count = sizeof layouts / sizeof layouts[0];
  uint64_t d[7];
  for (size_t i = 0; i < count; i++)
    cr_assert_eq(vqc_digest_buffer(buf, 24, layouts[i].dt, layouts[i].ndim,
                                   layouts[i].shape, &d[i]), VQC_OK);
  for (size_t i = 0; i < count; i++)
    for (size_t j = i + 1; j < count; j++)
      cr_expect_neq(d[i], d[j], "layouts %zu and %zu collide", i, j);

  /* a scalar and a one-element vector of the same 4 bytes differ */
  int64_t one[1] = {1};
  uint64_t scalar = 0, vector = 0;
  cr_assert_eq(vqc_digest_buffer(buf, 4, VQC_F32, 0, NULL, &scalar), VQC_OK);
  cr_assert_eq(vqc_digest_buffer(buf, 4, VQC_F32, 1, one, &vector), VQC_OK);
  cr_expect_neq(scalar, vector);
}

/* ---- tensors */

/* An F32 (rows, cols) tensor holding a[i][j] = i * cols + j (exact in float
 * for the sizes used, < 2^24). */
static void make_counting_tensor(vqc_tensor *t, int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  cr_assert_eq(vqc_tensor_empty(t, VQC_F32, 2, shape, VQC_DEVICE_CPU), VQC_OK);
  float *a = vqc_tensor_data(t);
  for (int64_t i = 0; i < rows * cols; i++) a[i] = (float)i;
}

Test(digest, contiguous_tensor_equals_buffer) {
  vqc_tensor a = {0};
  make_counting_tensor(&a, 300, 257); /* 308400 bytes: 4 chunks + a tail */
  uint64_t dt = 0, db = 0;
  cr_assert_eq(vqc_digest_tensor(&a, &dt), VQC_OK);
  cr_assert_eq(vqc_digest_buffer(vqc_tensor_data(&a), 300 * 257 * 4, VQC_F32,
                                 2, a.shape, &db), VQC_OK);
  cr_assert_eq(dt, db);
  vqc_tensor_free(&a);
}

Test(digest, transposed_tensor_equals_its_contiguous_copy) {
  const int64_t rows = 300, cols = 257;
  vqc_tensor a = {0}, at = {0}, copy = {0};
  make_counting_tensor(&a, rows, cols);
  cr_assert_eq(vqc_tensor_transpose(&a, 0, 1, &at), VQC_OK);
  cr_assert(!vqc_tensor_is_contiguous(&at), "the transpose must be strided");

  /* expected row-major contents of the transpose, built here:
   * b[j][i] = a[i][j] */
  float *b = malloc((size_t)(rows * cols) * sizeof *b);
  cr_assert_not_null(b);
  for (int64_t j = 0; j < cols; j++)
    for (int64_t i = 0; i < rows; i++) b[j * rows + i] = (float)(i * cols + j);
  int64_t tshape[2] = {cols, rows};
  uint64_t want = reference_digest((const uint8_t *)b,
                                   (size_t)(rows * cols) * 4, 1, 2, tshape);

  uint64_t strided = 0, contiguous = 0, original = 0;
  cr_assert_eq(vqc_digest_tensor(&at, &strided), VQC_OK);
  cr_expect_eq(strided, want, "strided walk");
  cr_assert_eq(vqc_tensor_contiguous(&at, &copy), VQC_OK);
  cr_assert_eq(vqc_digest_tensor(&copy, &contiguous), VQC_OK);
  cr_expect_eq(contiguous, strided, "contiguous copy");
  cr_assert_eq(vqc_digest_tensor(&a, &original), VQC_OK);
  cr_expect_neq(original, strided, "the transpose has other contents");

  free(b);
  vqc_tensor_free(&copy);
  vqc_tensor_free(&at);
  vqc_tensor_free(&a);
}

Test(digest, sliced_tensors_walk_in_row_major_order) {
  const int64_t rows = 300, cols = 257;
  vqc_tensor a = {0}, cs = {0}, rs = {0};
  make_counting_tensor(&a, rows, cols);

  /* columns 1, 4, 7, ... : inner stride 3 (element by element) */
  cr_assert_eq(vqc_tensor_slice(&a, 1, 1, cols, 3, &cs), VQC_OK);
  int64_t ncs = (cols - 1 + 2) / 3;
  /* columns 5 .. 250: inner stride 1 with gaps between rows (run copies) */
  cr_assert_eq(vqc_tensor_slice(&a, 1, 5, 250, 1, &rs), VQC_OK);

  float *b = malloc((size_t)(rows * cols) * sizeof *b);
  cr_assert_not_null(b);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t k = 0; k < ncs; k++)
      b[i * ncs + k] = (float)(i * cols + 1 + 3 * k);
  int64_t s1[2] = {rows, ncs};
  uint64_t want1 =
      reference_digest((const uint8_t *)b, (size_t)(rows * ncs) * 4, 1, 2, s1);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t k = 0; k < 245; k++)
      b[i * 245 + k] = (float)(i * cols + 5 + k);
  int64_t s2[2] = {rows, 245};
  uint64_t want2 =
      reference_digest((const uint8_t *)b, (size_t)(rows * 245) * 4, 1, 2, s2);

  uint64_t got1 = 0, got2 = 0;
  cr_assert_eq(vqc_digest_tensor(&cs, &got1), VQC_OK);
  cr_expect_eq(got1, want1, "step-3 column slice");
  cr_assert_eq(vqc_digest_tensor(&rs, &got2), VQC_OK);
  cr_expect_eq(got2, want2, "column range slice");

  free(b);
  vqc_tensor_free(&rs);
  vqc_tensor_free(&cs);
  vqc_tensor_free(&a);
}

Test(digest, device_tensor_equals_host_digest) {
  if (!vqc_cuda_available()) cr_skip_test("no CUDA device");
  vqc_tensor a = {0}, at = {0}, dev = {0};
  make_counting_tensor(&a, 300, 257);
  cr_assert_eq(vqc_tensor_transpose(&a, 0, 1, &at), VQC_OK);
  cr_assert_eq(vqc_tensor_to(&at, VQC_DEVICE_CUDA, &dev), VQC_OK);
  uint64_t host = 0, device = 0;
  cr_assert_eq(vqc_digest_tensor(&at, &host), VQC_OK);
  cr_assert_eq(vqc_digest_tensor(&dev, &device), VQC_OK);
  cr_expect_eq(device, host);
  vqc_tensor_free(&dev);
  vqc_tensor_free(&at);
  vqc_tensor_free(&a);
}

/* ---- bad arguments */

Test(digest, bad_arguments_are_einval) {
  uint8_t buf[16] = {0};
  int64_t shape[1] = {16}, neg[1] = {-16};
  uint64_t d = 0;
  cr_expect_eq(vqc_digest_buffer(buf, 16, VQC_U8, 1, shape, NULL), VQC_EINVAL);
  cr_expect_eq(vqc_digest_buffer(NULL, 16, VQC_U8, 1, shape, &d), VQC_EINVAL);
  cr_expect_eq(vqc_digest_buffer(buf, 16, VQC_DTYPE_COUNT, 1, shape, &d),
               VQC_EINVAL);
  cr_expect_eq(vqc_digest_buffer(buf, 16, VQC_U8, -1, shape, &d), VQC_EINVAL);
  cr_expect_eq(vqc_digest_buffer(buf, 16, VQC_U8, VQC_MAX_DIMS + 1, shape, &d),
               VQC_EINVAL);
  cr_expect_eq(vqc_digest_buffer(buf, 16, VQC_U8, 1, NULL, &d), VQC_EINVAL);
  cr_expect_eq(vqc_digest_buffer(buf, 16, VQC_U8, 1, neg, &d), VQC_EINVAL);
  cr_expect_eq(vqc_digest_buffer(buf, 15, VQC_U8, 1, shape, &d), VQC_EINVAL,
               "n must be numel * element size");
  cr_expect_eq(vqc_digest_buffer(buf, 16, VQC_F32, 1, shape, &d), VQC_EINVAL,
               "16 float32 elements are 64 bytes");
  cr_expect_eq(vqc_digest_buffer_parallel(buf, 16, VQC_U8, 1, shape, 0, &d),
               VQC_EINVAL);
  cr_expect_eq(vqc_digest_buffer_parallel(buf, 15, VQC_U8, 1, shape, 2, &d),
               VQC_EINVAL);
  cr_expect_eq(vqc_digest_tensor(NULL, &d), VQC_EINVAL);
  vqc_tensor empty = {0};
  cr_expect_eq(vqc_digest_tensor(&empty, &d), VQC_EINVAL);

  vqc_digest_state *st = NULL;
  cr_expect_eq(vqc_digest_create(NULL, VQC_U8, 1, shape), VQC_EINVAL);
  cr_expect_eq(vqc_digest_create(&st, VQC_DTYPE_COUNT, 1, shape), VQC_EINVAL);
  cr_expect_null(st);
  vqc_digest_destroy(NULL); /* accepted */
}

Test(digest, stream_length_is_checked) {
  uint8_t buf[16];
  for (int i = 0; i < 16; i++) buf[i] = (uint8_t)i;
  int64_t shape[1] = {16};
  uint64_t want = 0, d = 0;
  cr_assert_eq(vqc_digest_buffer(buf, 16, VQC_U8, 1, shape, &want), VQC_OK);

  vqc_digest_state *st = NULL;
  cr_assert_eq(vqc_digest_create(&st, VQC_U8, 1, shape), VQC_OK);
  cr_expect_eq(vqc_digest_update(st, NULL, 3), VQC_EINVAL);
  cr_expect_eq(vqc_digest_update(st, buf, 17), VQC_EINVAL, "past the shape");
  cr_assert_eq(vqc_digest_update(st, buf, 10), VQC_OK);
  cr_expect_eq(vqc_digest_final(st, &d), VQC_EINVAL, "6 bytes short");
  /* the refusals consumed nothing: feeding the rest gives the right value */
  cr_assert_eq(vqc_digest_update(st, buf + 10, 6), VQC_OK);
  cr_expect_eq(vqc_digest_update(st, buf, 1), VQC_EINVAL, "one past the end");
  cr_assert_eq(vqc_digest_final(st, &d), VQC_OK);
  cr_expect_eq(d, want);
  cr_expect_eq(vqc_digest_final(st, &d), VQC_EINVAL, "final twice");
  cr_expect_eq(vqc_digest_update(st, buf, 0), VQC_EINVAL, "update after final");
  vqc_digest_destroy(st);
}

/* ---- element types of other frameworks (VQC_DIGEST_TYPE_LIST) and any
 * strides (vqc_digest_strided): the layout is built here by hand, element by
 * element, and its row-major bytes go to the restated definition. */

Test(digest, type_table_codes_are_unique_and_round_trip) {
  static const struct { const char *name; int code, size; } want[] = {
      {"float32", 1, 4},  {"float64", 2, 8},   {"int32", 3, 4},
      {"int64", 4, 8},    {"uint8", 5, 1},     {"bool", 6, 1},
      {"int8", 7, 1},     {"int16", 8, 2},     {"float16", 9, 2},
      {"bfloat16", 10, 2}, {"complex64", 11, 8}, {"complex128", 12, 16},
      {"float8_e4m3fn", 13, 1}, {"float8_e5m2", 14, 1},
      {"float8_e4m3fnuz", 15, 1}, {"float8_e5m2fnuz", 16, 1},
      {"uint16", 17, 2},  {"uint32", 18, 4},   {"uint64", 19, 8},
      {"complex32", 20, 4}, {"float8_e8m0fnu", 21, 1},
      {"float4_e2m1fn_x2", 22, 1}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    vqc_digest_type t = {0}, u = {0};
    cr_assert_eq(vqc_digest_type_by_name(want[i].name, &t), VQC_OK, "%s",
                 want[i].name);
    cr_assert_eq(t.code, want[i].code, "%s", want[i].name);
    cr_assert_eq(t.size, want[i].size, "%s", want[i].name);
    cr_assert_eq(vqc_digest_type_by_code(t.code, &u), VQC_OK);
    cr_assert_str_eq(u.name, want[i].name);
  }
  /* the library's own dtypes keep their codes */
  for (int dt = 0; dt < VQC_DTYPE_COUNT; dt++) {
    vqc_digest_type t = {0};
    cr_assert_eq(vqc_digest_type_by_name(vqc_dtype_name(dt), &t), VQC_OK);
    cr_assert_eq(t.code, vqc_dtype_digest_code(dt));
    cr_assert_eq(t.size, vqc_dtype_size(dt));
  }
  cr_assert_eq(vqc_digest_type_by_code(0, NULL), VQC_EINVAL);
  cr_assert_eq(vqc_digest_type_by_code(23, NULL), VQC_EINVAL);
  cr_assert_eq(vqc_digest_type_by_name("qint8", NULL), VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "'qint8'") != NULL, "%s",
            vqc_last_error());
  cr_assert(strstr(vqc_last_error(), "bfloat16") != NULL,
            "the message lists the known names: %s", vqc_last_error());
}

/* A contiguous layout through vqc_digest_strided is the definition, for
 * every type, with 1 and 3 threads and with strides NULL or spelled out. */
Test(digest, strided_contiguous_matches_definition_for_every_type) {
  int64_t shape[2] = {3, 70000 / 16 + 1}; /* > 1 leaf for the wide types */
  for (uint8_t code = 1; code <= 22; code++) {
    vqc_digest_type t = {0};
    cr_assert_eq(vqc_digest_type_by_code(code, &t), VQC_OK);
    size_t n = (size_t)(shape[0] * shape[1]) * t.size;
    uint8_t *buf = random_bytes(n, code);
    uint64_t want = reference_digest(buf, n, code, 2, shape);
    int64_t strides[2] = {shape[1] * t.size, t.size};
    uint64_t a = 0, b = 0, c = 0;
    cr_assert_eq(vqc_digest_strided(buf, code, 2, shape, NULL, 1, &a), VQC_OK);
    cr_assert_eq(vqc_digest_strided(buf, code, 2, shape, strides, 3, &b),
                 VQC_OK);
    cr_assert_eq(vqc_digest_strided(buf, code, 2, shape, NULL, 7, &c), VQC_OK);
    cr_assert_eq(a, want, "code %d", code);
    cr_assert_eq(b, want, "code %d", code);
    cr_assert_eq(c, want, "code %d", code);
    free(buf);
  }
}

/* Copies the row-major contents of a strided layout into out (the test's
 * own odometer, dims up to 8). */
static void gather_reference(const uint8_t *base, size_t esize, int ndim,
                             const int64_t *shape, const int64_t *bstrides,
                             uint8_t *out) {
  int64_t idx[8] = {0}, numel = 1;
  for (int d = 0; d < ndim; d++) numel *= shape[d];
  for (int64_t e = 0; e < numel; e++) {
    int64_t off = 0, rem = e;
    for (int d = ndim - 1; d >= 0; d--) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
      off += idx[d] * bstrides[d];
    }
    memcpy(out + e * (int64_t)esize, base + off, esize);
  }
}

Test(digest, strided_views_transposed_reversed_broadcast_eight_dims) {
  /* storage: 8 x 40000 bfloat16-sized elements (640000 bytes, 10 leaves) */
  const size_t esize = 2;
  const int64_t R = 8, C = 40000;
  uint8_t *store = random_bytes((size_t)(R * C) * esize, 99);
  uint8_t *flat = malloc((size_t)(R * C) * esize * 2);
  struct {
    const char *what;
    int64_t offset; /* bytes from store to element [0,...,0] */
    int ndim;
    int64_t shape[8], strides[8];
  } views[] = {
      {"transpose", 0, 2, {C, R}, {2, 2 * C}},
      {"rows reversed", 2 * C * (R - 1), 2, {R, C}, {-2 * C, 2}},
      {"columns reversed, step 3", 2 * (C - 1), 2, {R, C / 3}, {2 * C, -6}},
      {"broadcast row", 0, 3, {4, 1, C}, {0, 2 * C, 2}},
      {"broadcast inner", 0, 2, {R, 5}, {2 * C, 0}},
      {"eight dims", 0, 8, {2, 2, 2, 5, 2, 2, 2, 3},
       {2 * C * 4, 2 * C * 2, 2 * C, 2 * 7, 2 * 3, 2, 2 * 1000, 2 * 10000}},
  };
  for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
    int64_t numel = 1;
    for (int d = 0; d < views[v].ndim; d++) numel *= views[v].shape[d];
    const uint8_t *base = store + views[v].offset;
    gather_reference(base, esize, views[v].ndim, views[v].shape,
                     views[v].strides, flat);
    uint64_t want = reference_digest(flat, (size_t)numel * esize, 10,
                                     views[v].ndim, views[v].shape);
    uint64_t got = 0;
    cr_assert_eq(vqc_digest_strided(base, 10, views[v].ndim, views[v].shape,
                                    views[v].strides, 2, &got),
                 VQC_OK, "%s: %s", views[v].what, vqc_last_error());
    cr_assert_eq(got, want, "%s", views[v].what);
  }
  free(flat);
  free(store);
}

Test(digest, from_leaves_is_the_root_step) {
  size_t n = 5 * CHUNK + 123;
  uint8_t *buf = random_bytes(n, 5);
  int64_t shape[1] = {(int64_t)n / 2 + 0};
  size_t used = (size_t)shape[0] * 2; /* float16 elements */
  size_t nleaves = (used - 1) / CHUNK + 1;
  uint64_t leaves[8];
  for (size_t i = 0; i < nleaves; i++) {
    size_t len = used - i * CHUNK < CHUNK ? used - i * CHUNK : CHUNK;
    leaves[i] = XXH3_64bits(buf + i * CHUNK, len);
  }
  uint64_t got = 0;
  cr_assert_eq(vqc_digest_from_leaves(9, 1, shape, leaves, nleaves, &got),
               VQC_OK);
  cr_assert_eq(got, reference_digest(buf, used, 9, 1, shape));
  cr_assert_eq(vqc_digest_from_leaves(9, 1, shape, leaves, nleaves - 1, &got),
               VQC_EINVAL, "a leaf count that does not fit the shape");
  free(buf);
}

Test(digest, strided_bad_arguments) {
  int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  uint8_t b[16] = {0};
  uint64_t out = 0;
  cr_assert_eq(vqc_digest_strided(b, 6, 9, shape, NULL, 1, &out), VQC_EINVAL,
               "nine dims");
  cr_assert_eq(vqc_digest_strided(b, 0, 1, shape, NULL, 1, &out), VQC_EINVAL);
  cr_assert_eq(vqc_digest_strided(b, 6, 1, shape, NULL, 0, &out), VQC_EINVAL);
  cr_assert_eq(vqc_digest_strided(NULL, 6, 1, shape, NULL, 1, &out),
               VQC_EINVAL);
  cr_assert_eq(vqc_digest_strided(b, 6, 1, shape, NULL, 1, NULL), VQC_EINVAL);
  cr_assert_eq(vqc_digest_strided(b, 6, 8, shape, NULL, 1, &out), VQC_OK,
               "eight dims are allowed");
}
