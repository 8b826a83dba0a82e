/* digest.c: the tensor digest (vqc/digest.h) on the CPU, with xxHash XXH3-64.
 *
 * The definition lives in digest.h (and README "Tensor digest"): the bytes are
 * cut into 64 KiB chunks, each chunk is hashed to a 64-bit leaf, and the digest
 * is XXH3-64 of a small header followed by the leaves. This file computes it
 * four ways that must agree bit for bit: one-shot (vqc_digest_buffer), across
 * threads (vqc_digest_buffer_parallel), streamed in pieces (vqc_digest_update)
 * and from a strided tensor (vqc_digest_tensor).
 *
 * Reproducing the digest from another language: for a contiguous C-order
 * little-endian buffer, Python with the `xxhash` package needs only this
 * (dtype codes are the third column of VQC_DIGEST_TYPE_LIST in digest.h:
 * float32 1, float64 2, int32 3, int64 4, uint8 5, bool 6, ...):
 *
 *   import struct, xxhash
 *   def vqc_digest(buf: bytes, dtype_code: int, shape: tuple) -> int:
 *       CHUNK = 65536
 *       header = b"VQCD" + bytes([1, dtype_code, len(shape), 0]) \
 *                + struct.pack("<%dq" % len(shape), *shape)
 *       # range(0, max(n, 1), CHUNK): an empty buffer still has one leaf
 *       leaves = [xxhash.xxh3_64_intdigest(buf[i:i + CHUNK])
 *                 for i in range(0, max(len(buf), 1), CHUNK)]
 *       return xxhash.xxh3_64_intdigest(
 *           header + struct.pack("<%dQ" % len(leaves), *leaves))
 *
 *   # a float32 numpy array a (a CPU torch tensor: a = t.numpy()):
 *   # vqc_digest(np.ascontiguousarray(a, dtype="<f4").tobytes(), 1, a.shape)
 *
 * Speed: the leaves go through libxxhash's XXH3_64bits_dispatch and
 * XXH3_64bits_update_dispatch (xxh_x86dispatch.h), which pick the AVX2 (or
 * AVX-512) kernel at run time. Plain XXH3_64bits in Debian's build is the SSE2
 * kernel: ~15 GB/s on a 64 KiB chunk in L2 against ~55 GB/s dispatched, and
 * 0.61x of a plain read of a buffer in DRAM on one core. Large buffers are
 * hashed several chunks at a time (hash_chunk_group), which keeps up with a
 * plain in-order read (bench/bench_digest.c measures it against the fastest
 * read it knows). The values are
 * identical whichever kernel runs and however the bytes are fed. */
#include "vqc/digest.h"
#include "vqc/gpu_base.h" /* the device path */

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* XXH_STATIC_LINKING_ONLY exposes XXH3_state_t so the one-shot and threaded
 * paths keep their states on the stack; header and library are the same
 * Debian package, so the layout matches. XXH_DISPATCH_DISABLE_REPLACE keeps the
 * dispatch header from silently renaming XXH3_64bits: we call the _dispatch
 * names explicitly so a reader sees which kernel runs. */
#define XXH_STATIC_LINKING_ONLY
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxhash.h>
#include <xxh_x86dispatch.h>

/* Leaves are fed to the root state in batches of this many so that the
 * one-shot path needs no allocation (255 leaves = 2040 bytes of stack, ~16
 * MiB of input per batch; a multiple of GROUP, below). */
#define LEAF_BATCH 255

/* ---- small helpers */

static void store_le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Number of leaves for n bytes: ceil(n / CHUNK), and 1 for an empty buffer. */
static size_t leaf_count(size_t n) {
  if (n == 0) return 1;
  return (n - 1) / VQC_DIGEST_CHUNK + 1;
}

/* Large buffers: GROUP chunks at a time, interleaved in 2 KiB pieces.
 *
 * Measured with bench/bench_digest.c and a sweep of variants on the same
 * buffers (AMD EPYC Zen 3 VM, 2 vCPUs, libxxhash 0.8.1; 256 MiB, cold, one
 * thread; medians of per-repetition ratios against the in-order AVX2 read,
 * 4 KiB / 2 MiB pages, over 180 interleaved repetitions each):
 *   one-shot XXH3 per chunk                                   0.85 / 0.84
 *   the same in 4 KiB steps, prefetching 8 KiB ahead into L2
 *     (what this file did before)                             0.87 / 0.88
 *   GROUP = 3 chunks, 2 KiB of each in turn (this code)       1.03 / 1.00
 *   2 chunks 1.00 / 0.98; 4 chunks 1.00 / 0.94; 3 chunks in 1.5 KiB
 *   pieces 1.00 / 0.94; 2 chunks with the next pieces prefetched 0.87 / 0.82.
 * Shorter runs: 2 chunks in pieces of 1 KiB 0.88 (each streaming update has
 * a fixed cost), 2.5 KiB 0.86, 3-4 KiB 0.78-0.80; 3 chunks with a prefetch
 * into each next page 0.77. Software prefetch lost every time, so there is
 * none. Why the order helps: a read is itself 1.1-1.5x faster taking 4
 * chunks 1 KiB at a time than in order (the hardware prefetchers follow
 * several streams, each inside its 4 KiB page, and run ahead in one while
 * the others are read); XXH3 alone issues too few loads for one stream to
 * keep DRAM busy. Against that faster read (the bench's baseline; 13 runs)
 * the digest is 0.82-0.86x on one thread with 4 KiB pages (1.15-1.26x of
 * the in-order read), 0.85-0.88x with huge pages, and 0.77-0.97x on two
 * threads, where the spread is the machine's other load. The code before
 * this (prefetch within each chunk) ran alternately with it in the same
 * bench, on a loaded machine: 0.56-0.63x against 0.74-0.91x. The value is
 * unaffected: streaming XXH3 equals one-shot XXH3, whatever the pieces.
 *
 * On data still in the caches the pieces cost about a third (libxxhash
 * 0.8.1's streaming update: 33 GB/s against 48 GB/s one-shot over a buffer
 * in L2 or L3). Hashed warm, buffers of 16 MiB and more were already faster
 * in groups (25-27 against 22-30 GB/s at 16 MiB, 20 against 17 GB/s at 32
 * MiB; the L3 here is 32 MiB, shared) and smaller ones slower (31 against
 * 38 GB/s at 12 MiB), so buffers (and streamed pieces) under
 * GROUP_MIN_BYTES, which may have just been written and still be cached,
 * are hashed one-shot per chunk. */
#define GROUP 3
#define GROUP_PIECE ((size_t)2048)
#define GROUP_MIN_BYTES ((size_t)16 << 20)
_Static_assert(LEAF_BATCH % GROUP == 0, "a batch of leaves is whole groups");

/* The leaves of the GROUP full chunks that start at p. */
static void hash_chunk_group(const uint8_t *p, uint64_t leaves[GROUP]) {
  XXH3_state_t st[GROUP]; /* stack states: INITSTATE defines their seed */
  for (int g = 0; g < GROUP; g++) {
    XXH3_INITSTATE(&st[g]);
    (void)XXH3_64bits_reset(&st[g]);
  }
  for (size_t off = 0; off < VQC_DIGEST_CHUNK; off += GROUP_PIECE)
    for (int g = 0; g < GROUP; g++)
      (void)XXH3_64bits_update_dispatch(
          &st[g], p + (size_t)g * VQC_DIGEST_CHUNK + off, GROUP_PIECE);
  for (int g = 0; g < GROUP; g++) leaves[g] = XXH3_64bits_digest(&st[g]);
}

/* Leaves [first, first + count) of the n-byte buffer `data` (the last chunk
 * may be short), written to out as (count * 8) LE bytes: GROUP at a time
 * where GROUP full chunks follow in a buffer of GROUP_MIN_BYTES or more,
 * one-shot otherwise. */
static void hash_leaves(const uint8_t *data, size_t n, size_t first,
                        size_t count, uint8_t *out) {
  size_t nfull = n / VQC_DIGEST_CHUNK; /* leaves of full chunks */
  bool grouped = n >= GROUP_MIN_BYTES;
  size_t k = 0;
  while (k < count) {
    size_t i = first + k;
    if (grouped && k + GROUP <= count && i + GROUP <= nfull) {
      uint64_t leaves[GROUP];
      hash_chunk_group(data + i * VQC_DIGEST_CHUNK, leaves);
      for (int g = 0; g < GROUP; g++)
        store_le64(out + 8 * (k + (size_t)g), leaves[g]);
      k += GROUP;
      continue;
    }
    size_t begin = i * VQC_DIGEST_CHUNK;
    size_t len = n - begin < VQC_DIGEST_CHUNK ? n - begin : VQC_DIGEST_CHUNK;
    store_le64(out + 8 * k, XXH3_64bits_dispatch(data + begin, len));
    k++;
  }
}

/* ---- layouts: what the header encodes
 *
 * Every entry point turns its arguments into a layout (validated once, here,
 * so the error messages agree); the hashing below reads only layouts. */
typedef struct {
  uint8_t code;  /* digest code (VQC_DIGEST_TYPE_LIST) */
  size_t esize;  /* bytes per element */
  int ndim;      /* 0 .. VQC_DIGEST_MAX_DIMS */
  int64_t shape[VQC_DIGEST_MAX_DIMS];
  size_t nbytes; /* numel * esize */
} layout;

/* The type table, generated from the list in digest.h. */
static const vqc_digest_type digest_types[] = {
#define X(name, str, code, size) {str, code, size},
    VQC_DIGEST_TYPE_LIST(X)
#undef X
};
#define N_DIGEST_TYPES (sizeof digest_types / sizeof digest_types[0])

/* Fills *l from (code, ndim, shape), accepting at most max_dims dims. */
static vqc_status layout_from_code(uint8_t code, int ndim, const int64_t *shape,
                                   int max_dims, layout *l) {
  vqc_digest_type t = {0};
  if (vqc_digest_type_by_code(code, &t) != VQC_OK)
    return vqc_error(VQC_EINVAL, "digest: unknown type code %d", (int)code);
  if (ndim < 0 || ndim > max_dims)
    return vqc_error(VQC_EINVAL, "digest: ndim %d outside 0..%d", ndim,
                     max_dims);
  if (ndim > 0 && shape == NULL)
    return vqc_error(VQC_EINVAL, "digest: shape is NULL with ndim %d", ndim);
  *l = (layout){.code = code, .esize = t.size, .ndim = ndim};
  size_t total = t.size;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0)
      return vqc_error(VQC_EINVAL, "digest: shape[%d] = %lld is negative", d,
                       (long long)shape[d]);
    size_t extent = (size_t)shape[d];
    if (extent != 0 && total > SIZE_MAX / extent)
      return vqc_error(VQC_EINVAL, "digest: shape overflows size_t at dim %d",
                       d);
    total *= extent;
    l->shape[d] = shape[d];
  }
  l->nbytes = total;
  return VQC_OK;
}

/* The same for the library's own dtypes, which have at most VQC_MAX_DIMS. */
static vqc_status layout_from_dtype(vqc_dtype dt, int ndim,
                                    const int64_t *shape, layout *l) {
  if (vqc_dtype_digest_code(dt) == 0)
    return vqc_error(VQC_EINVAL, "digest: bad dtype %d", (int)dt);
  return layout_from_code(vqc_dtype_digest_code(dt), ndim, shape,
                          VQC_MAX_DIMS, l);
}

/* Checks what the buffer entry points take besides the layout. */
static vqc_status check_buffer_args(const void *data, size_t n,
                                    const layout *l, const uint64_t *out) {
  if (out == NULL) return vqc_error(VQC_EINVAL, "digest: out is NULL");
  if (data == NULL && n > 0)
    return vqc_error(VQC_EINVAL, "digest: data is NULL with %zu bytes", n);
  if (n != l->nbytes) {
    vqc_digest_type t = {"?", 0, 0};
    (void)vqc_digest_type_by_code(l->code, &t);
    return vqc_error(VQC_EINVAL,
                     "digest: %zu bytes given but dtype %s and shape need %zu",
                     n, t.name, l->nbytes);
  }
  return VQC_OK;
}

/* ---- public: types, leaf function and header */

vqc_status vqc_digest_type_by_code(uint8_t code, vqc_digest_type *out) {
  for (size_t i = 0; i < N_DIGEST_TYPES; i++) {
    if (digest_types[i].code == code) {
      if (out != NULL) *out = digest_types[i];
      return VQC_OK;
    }
  }
  return vqc_error(VQC_EINVAL, "digest: unknown type code %d", (int)code);
}

vqc_status vqc_digest_type_by_name(const char *name, vqc_digest_type *out) {
  if (name == NULL) return vqc_error(VQC_EINVAL, "digest: type name is NULL");
  for (size_t i = 0; i < N_DIGEST_TYPES; i++) {
    if (strcmp(digest_types[i].name, name) == 0) {
      if (out != NULL) *out = digest_types[i];
      return VQC_OK;
    }
  }
  char known[512];
  size_t used = 0;
  known[0] = '\0';
  for (size_t i = 0; i < N_DIGEST_TYPES && used < sizeof known; i++)
    used += (size_t)snprintf(known + used, sizeof known - used, "%s%s",
                             i ? ", " : "", digest_types[i].name);
  return vqc_error(VQC_EINVAL,
                   "digest: no digest type is called '%.64s' (known: %s)",
                   name, known);
}

uint64_t vqc_xxh3_64(const void *data, size_t n) {
  return XXH3_64bits_dispatch(data, n);
}

/* The header of a validated layout; returns its length (8 + 8 * ndim). */
static size_t layout_header(const layout *l,
                            uint8_t out[8 + 8 * VQC_DIGEST_MAX_DIMS]) {
  memcpy(out, "VQCD", 4);
  out[4] = (uint8_t)VQC_DIGEST_VERSION;
  out[5] = l->code;
  out[6] = (uint8_t)l->ndim;
  out[7] = 0;
  for (int d = 0; d < l->ndim; d++)
    store_le64(out + 8 + 8 * d, (uint64_t)l->shape[d]);
  return 8 + 8 * (size_t)l->ndim;
}

size_t vqc_digest_header(vqc_dtype dt, int ndim, const int64_t *shape,
                         uint8_t out[8 + 8 * VQC_MAX_DIMS]) {
  /* Returns 0 (no header) for arguments the definition cannot encode,
   * without recording an error: tests probe it with bad arguments. */
  if (out == NULL || vqc_dtype_digest_code(dt) == 0 || ndim < 0 ||
      ndim > VQC_MAX_DIMS || (ndim > 0 && shape == NULL))
    return 0;
  layout l = {.code = vqc_dtype_digest_code(dt), .ndim = ndim};
  for (int d = 0; d < ndim; d++) l.shape[d] = shape[d];
  uint8_t full[8 + 8 * VQC_DIGEST_MAX_DIMS];
  size_t len = layout_header(&l, full);
  memcpy(out, full, len);
  return len;
}

/* Starts a root state with the header of a validated layout. */
static void root_begin(XXH3_state_t *root, const layout *l) {
  uint8_t header[8 + 8 * VQC_DIGEST_MAX_DIMS];
  size_t hlen = layout_header(l, header);
  (void)XXH3_64bits_reset(root);
  (void)XXH3_64bits_update_dispatch(root, header, hlen);
}

vqc_status vqc_digest_from_leaves(uint8_t code, int ndim, const int64_t *shape,
                                  const uint64_t *leaves, size_t nleaves,
                                  uint64_t *out) {
  layout l;
  VQC_TRY(layout_from_code(code, ndim, shape, VQC_DIGEST_MAX_DIMS, &l));
  if (out == NULL || leaves == NULL)
    return vqc_error(VQC_EINVAL, "digest: leaves or out is NULL");
  if (nleaves != leaf_count(l.nbytes))
    return vqc_error(VQC_EINVAL,
                     "digest: %zu leaves given but %zu bytes have %zu",
                     nleaves, l.nbytes, leaf_count(l.nbytes));
  XXH3_state_t root;
  XXH3_INITSTATE(&root);
  root_begin(&root, &l);
  uint8_t batch[LEAF_BATCH * 8];
  for (size_t first = 0; first < nleaves; first += LEAF_BATCH) {
    size_t count = nleaves - first < LEAF_BATCH ? nleaves - first : LEAF_BATCH;
    for (size_t k = 0; k < count; k++)
      store_le64(batch + 8 * k, leaves[first + k]);
    (void)XXH3_64bits_update_dispatch(&root, batch, 8 * count);
  }
  *out = XXH3_64bits_digest(&root);
  return VQC_OK;
}

/* ---- one thread */

/* The digest of n = l->nbytes contiguous bytes, one thread. */
static uint64_t digest_contiguous(const uint8_t *bytes, const layout *l) {
  size_t n = l->nbytes;
  XXH3_state_t root; /* a stack state: INITSTATE defines its seed */
  XXH3_INITSTATE(&root);
  root_begin(&root, l);

  /* leaves (LE bytes) of one batch, fed to the root together */
  uint8_t batch[LEAF_BATCH * 8];
  size_t nleaves = leaf_count(n);
  for (size_t first = 0; first < nleaves; first += LEAF_BATCH) {
    size_t count = nleaves - first < LEAF_BATCH ? nleaves - first : LEAF_BATCH;
    hash_leaves(bytes, n, first, count, batch);
    (void)XXH3_64bits_update_dispatch(&root, batch, 8 * count);
  }
  return XXH3_64bits_digest(&root);
}

vqc_status vqc_digest_buffer(const void *data, size_t n, vqc_dtype dt,
                             int ndim, const int64_t *shape, uint64_t *out) {
  layout l;
  VQC_TRY(layout_from_dtype(dt, ndim, shape, &l));
  VQC_TRY(check_buffer_args(data, n, &l, out));
  *out = digest_contiguous(data, &l);
  return VQC_OK;
}

/* ---- several threads: each hashes a contiguous run of leaves */

typedef struct {
  const uint8_t *data;
  size_t n;
  size_t first, count; /* leaves [first, first + count) */
  uint8_t *leaves;     /* (nleaves * 8) LE bytes, shared; each job writes
                          only its own run, so no locking */
} leaf_job;

static void *leaf_job_run(void *arg) {
  leaf_job *job = arg;
  hash_leaves(job->data, job->n, job->first, job->count,
              job->leaves + 8 * job->first);
  return NULL;
}

/* The digest of l->nbytes contiguous bytes with the leaves hashed by up to
 * nthreads (>= 1) threads. */
static vqc_status digest_contiguous_parallel(const uint8_t *data,
                                             const layout *l, int nthreads,
                                             uint64_t *out) {
  size_t n = l->nbytes;
  size_t nleaves = leaf_count(n);
  size_t njobs = (size_t)nthreads < nleaves ? (size_t)nthreads : nleaves;
  if (njobs <= 1) {
    *out = digest_contiguous(data, l);
    return VQC_OK;
  }

  /* Owned here, freed before return: the leaves (8 bytes per 64 KiB, so
   * 1/8192 of the input), the jobs and their thread handles. The leaves are
   * zeroed so that a leaf no job wrote (a bug in the split) gives a wrong
   * digest every time, instead of a stale right one from recycled memory. */
  uint8_t *leaves = calloc(nleaves, 8);
  leaf_job *jobs = calloc(njobs, sizeof *jobs);
  pthread_t *threads = calloc(njobs, sizeof *threads);
  bool *started = calloc(njobs, sizeof *started);
  vqc_status s = VQC_OK;
  if (leaves == NULL || jobs == NULL || threads == NULL || started == NULL) {
    s = vqc_error(VQC_ENOMEM, "digest: no memory for %zu leaves", nleaves);
    goto done;
  }

  /* Split the leaves as evenly as possible: the first (nleaves % njobs) jobs
   * take one extra. */
  size_t base = nleaves / njobs, extra = nleaves % njobs, next = 0;
  for (size_t j = 0; j < njobs; j++) {
    jobs[j] = (leaf_job){.data = data, .n = n, .first = next,
                         .count = base + (j < extra ? 1 : 0), .leaves = leaves};
    next += jobs[j].count;
  }
  /* Job 0 runs on the calling thread. A thread that cannot be created is not
   * an error: its job runs here afterwards, and the value is the same. */
  for (size_t j = 1; j < njobs; j++)
    started[j] = pthread_create(&threads[j], NULL, leaf_job_run, &jobs[j]) == 0;
  leaf_job_run(&jobs[0]);
  for (size_t j = 1; j < njobs; j++) {
    if (started[j])
      pthread_join(threads[j], NULL);
    else
      leaf_job_run(&jobs[j]);
  }

  XXH3_state_t root;
  XXH3_INITSTATE(&root);
  root_begin(&root, l);
  (void)XXH3_64bits_update_dispatch(&root, leaves, nleaves * 8);
  *out = XXH3_64bits_digest(&root);

done:
  free(started);
  free(threads);
  free(jobs);
  free(leaves);
  return s;
}

vqc_status vqc_digest_buffer_parallel(const void *data, size_t n, vqc_dtype dt,
                                      int ndim, const int64_t *shape,
                                      int nthreads, uint64_t *out) {
  layout l;
  VQC_TRY(layout_from_dtype(dt, ndim, shape, &l));
  VQC_TRY(check_buffer_args(data, n, &l, out));
  if (nthreads < 1)
    return vqc_error(VQC_EINVAL, "digest: nthreads %d must be >= 1", nthreads);
  return digest_contiguous_parallel(data, &l, nthreads, out);
}

/* ---- streaming */

struct vqc_digest_state {
  XXH3_state_t *leaf; /* the chunk in progress (owned, XXH3_createState) */
  XXH3_state_t *root; /* header, then the leaves so far (owned) */
  size_t chunk_fill;  /* bytes of the chunk in progress already in `leaf` */
  size_t nleaves;     /* leaves already fed to `root` */
  size_t fed;         /* bytes accepted so far */
  size_t expected;    /* numel * element size */
  bool finished;      /* vqc_digest_final ran: no more updates */
};

static void push_leaf(vqc_digest_state *st, uint64_t leaf) {
  uint8_t le[8];
  store_le64(le, leaf);
  (void)XXH3_64bits_update_dispatch(st->root, le, 8);
  st->nleaves++;
}

/* A streaming state for a validated layout. */
static vqc_status state_create(vqc_digest_state **st, const layout *l) {

  vqc_digest_state *s = calloc(1, sizeof *s);
  if (s == NULL) goto fail;
  /* XXH3_createState returns the 64-byte alignment the state needs. */
  s->leaf = XXH3_createState();
  s->root = XXH3_createState();
  if (s->leaf == NULL || s->root == NULL) goto fail;
  (void)XXH3_64bits_reset(s->leaf);
  root_begin(s->root, l);
  s->expected = l->nbytes;
  *st = s;
  return VQC_OK;

fail:
  vqc_digest_destroy(s);
  return vqc_error(VQC_ENOMEM, "digest: no memory for a streaming state");
}

vqc_status vqc_digest_create(vqc_digest_state **st, vqc_dtype dt, int ndim,
                             const int64_t *shape) {
  if (st == NULL) return vqc_error(VQC_EINVAL, "digest: state pointer is NULL");
  *st = NULL;
  layout l;
  VQC_TRY(layout_from_dtype(dt, ndim, shape, &l));
  return state_create(st, &l);
}

vqc_status vqc_digest_update(vqc_digest_state *st, const void *data, size_t n) {
  if (st == NULL) return vqc_error(VQC_EINVAL, "digest: state is NULL");
  if (st->finished)
    return vqc_error(VQC_EINVAL, "digest: update after vqc_digest_final");
  if (data == NULL && n > 0)
    return vqc_error(VQC_EINVAL, "digest: data is NULL with %zu bytes", n);
  /* Refused before anything is consumed, so the state stays usable. */
  if (n > st->expected - st->fed)
    return vqc_error(VQC_EINVAL,
                     "digest: %zu more bytes would pass the %zu the shape has "
                     "(%zu fed)", n, st->expected, st->fed);

  const uint8_t *p = data;
  st->fed += n;
  /* A piece as large as a buffer the one-shot path hashes in groups is
   * hashed in groups too (see hash_chunk_group). */
  bool grouped = n >= GROUP_MIN_BYTES;
  while (n > 0) {
    if (st->chunk_fill == 0 && grouped && n >= GROUP * VQC_DIGEST_CHUNK) {
      uint64_t leaves[GROUP];
      hash_chunk_group(p, leaves);
      for (int g = 0; g < GROUP; g++) push_leaf(st, leaves[g]);
      p += GROUP * VQC_DIGEST_CHUNK;
      n -= GROUP * VQC_DIGEST_CHUNK;
      continue;
    }
    if (st->chunk_fill == 0 && n >= VQC_DIGEST_CHUNK) {
      /* A whole chunk straight from the caller's memory. */
      push_leaf(st, XXH3_64bits_dispatch(p, VQC_DIGEST_CHUNK));
      p += VQC_DIGEST_CHUNK;
      n -= VQC_DIGEST_CHUNK;
      continue;
    }
    size_t room = VQC_DIGEST_CHUNK - st->chunk_fill;
    size_t take = n < room ? n : room;
    (void)XXH3_64bits_update_dispatch(st->leaf, p, take);
    st->chunk_fill += take;
    p += take;
    n -= take;
    if (st->chunk_fill == VQC_DIGEST_CHUNK) {
      push_leaf(st, XXH3_64bits_digest(st->leaf));
      (void)XXH3_64bits_reset(st->leaf);
      st->chunk_fill = 0;
    }
  }
  return VQC_OK;
}

/* Finishes the digest; the state then accepts no more updates or finals
 * (VQC_EINVAL), only vqc_digest_destroy. A short stream fails and leaves the
 * state as it was, so the caller may feed the rest and finish again. */
vqc_status vqc_digest_final(vqc_digest_state *st, uint64_t *out) {
  if (st == NULL || out == NULL)
    return vqc_error(VQC_EINVAL, "digest: state or out is NULL");
  if (st->finished)
    return vqc_error(VQC_EINVAL, "digest: vqc_digest_final called twice");
  if (st->fed != st->expected)
    return vqc_error(VQC_EINVAL, "digest: %zu bytes fed but the shape has %zu",
                     st->fed, st->expected);
  /* The ragged last chunk, or the single leaf of an empty buffer. */
  if (st->chunk_fill > 0 || st->nleaves == 0)
    push_leaf(st, XXH3_64bits_digest(st->leaf));
  st->finished = true;
  *out = XXH3_64bits_digest(st->root);
  return VQC_OK;
}

void vqc_digest_destroy(vqc_digest_state *st) {
  if (st == NULL) return;
  XXH3_freeState(st->leaf);
  XXH3_freeState(st->root);
  free(st);
}

/* ---- strided layouts */

/* Bytes of the scratch buffer a strided walk gathers into: one chunk, so each
 * full scratch is hashed straight to a leaf by vqc_digest_update. */
#define GATHER_BYTES VQC_DIGEST_CHUNK

/* Feeds the logical contents of the strided layout l at `base` (element
 * [0, ..., 0]; byte_strides has l->ndim entries) to `st` in row-major order,
 * gathering through `scratch` (GATHER_BYTES, caller-owned). The innermost
 * dim is copied as a run when its elements are adjacent, element by element
 * otherwise; the outer index is an odometer over dims 0..ndim-2. */
static vqc_status feed_strided(vqc_digest_state *st, const uint8_t *base,
                               const layout *l, const int64_t *byte_strides,
                               uint8_t *scratch) {
  if (l->nbytes == 0) return VQC_OK;
  size_t esize = l->esize;
  int ndim = l->ndim;

  /* A scalar or 1-d tensor is one row; otherwise rows run along the last dim
   * and the outer dims are counted by idx. */
  int64_t row_len = ndim == 0 ? 1 : l->shape[ndim - 1];
  int64_t row_step = ndim == 0 ? (int64_t)esize : byte_strides[ndim - 1];
  int64_t idx[VQC_DIGEST_MAX_DIMS] = {0};
  size_t fill = 0;

  for (;;) {
    int64_t off = 0; /* bytes from base to the row's first element */
    for (int d = 0; d < ndim - 1; d++) off += idx[d] * byte_strides[d];
    const uint8_t *row = base + off;

    int64_t j = 0;
    while (j < row_len) {
      if (fill == GATHER_BYTES) {
        VQC_TRY(vqc_digest_update(st, scratch, fill));
        fill = 0;
      }
      /* Element sizes (1..16, powers of two) divide GATHER_BYTES. */
      size_t room = (GATHER_BYTES - fill) / esize;
      int64_t take = row_len - j < (int64_t)room ? row_len - j : (int64_t)room;
      if (row_step == (int64_t)esize) {
        memcpy(scratch + fill, row + j * row_step, (size_t)take * esize);
      } else {
        for (int64_t k = 0; k < take; k++)
          memcpy(scratch + fill + (size_t)k * esize, row + (j + k) * row_step,
                 esize);
      }
      fill += (size_t)take * esize;
      j += take;
    }

    /* next row: advance the odometer over dims ndim-2 .. 0 */
    int d = ndim - 2;
    while (d >= 0) {
      if (++idx[d] < l->shape[d]) break;
      idx[d] = 0;
      d--;
    }
    if (d < 0) break;
  }
  if (fill > 0) VQC_TRY(vqc_digest_update(st, scratch, fill));
  return VQC_OK;
}

/* Whether byte_strides describe the row-major contiguous layout of l (dims
 * of extent 1 may have any stride; an empty tensor is contiguous). */
static bool is_row_major(const layout *l, const int64_t *byte_strides) {
  if (byte_strides == NULL || l->nbytes == 0) return true;
  int64_t expect = (int64_t)l->esize;
  for (int d = l->ndim - 1; d >= 0; d--) {
    if (l->shape[d] != 1 && byte_strides[d] != expect) return false;
    expect *= l->shape[d];
  }
  return true;
}

/* The digest of a validated layout at `base` through a streaming state and
 * a 64 KiB gather buffer, both freed here. */
static vqc_status digest_gathered(const uint8_t *base, const layout *l,
                                  const int64_t *byte_strides, uint64_t *out) {
  vqc_digest_state *st = NULL;
  uint8_t *scratch = NULL;
  vqc_status s = state_create(&st, l);
  if (s != VQC_OK) goto done;
  scratch = malloc(GATHER_BYTES);
  if (scratch == NULL) {
    s = vqc_error(VQC_ENOMEM, "digest: no memory for the gather buffer");
    goto done;
  }
  s = feed_strided(st, base, l, byte_strides, scratch);
  if (s == VQC_OK) s = vqc_digest_final(st, out);
done:
  free(scratch);
  vqc_digest_destroy(st);
  return s;
}

vqc_status vqc_digest_strided(const void *data, uint8_t code, int ndim,
                              const int64_t *shape,
                              const int64_t *byte_strides, int nthreads,
                              uint64_t *out) {
  layout l;
  VQC_TRY(layout_from_code(code, ndim, shape, VQC_DIGEST_MAX_DIMS, &l));
  if (out == NULL) return vqc_error(VQC_EINVAL, "digest: out is NULL");
  if (data == NULL && l.nbytes > 0)
    return vqc_error(VQC_EINVAL, "digest: data is NULL with %zu bytes",
                     l.nbytes);
  if (nthreads < 1)
    return vqc_error(VQC_EINVAL, "digest: nthreads %d must be >= 1", nthreads);
  if (is_row_major(&l, byte_strides))
    return digest_contiguous_parallel(data, &l, nthreads, out);
  return digest_gathered(data, &l, byte_strides, out);
}

/* ---- tensors */

vqc_status vqc_digest_tensor(const vqc_tensor *t, uint64_t *out) {
  if (t == NULL || out == NULL)
    return vqc_error(VQC_EINVAL, "digest: tensor or out is NULL");
  if (t->storage == NULL)
    return vqc_error(VQC_EINVAL,
                     "digest: the tensor is empty (freed or zeroed)");
  layout l; /* validates dtype, ndim and shape before any walk */
  VQC_TRY(layout_from_dtype(t->dtype, t->ndim, t->shape, &l));

  if (t->storage->device == VQC_DEVICE_CUDA) {
    /* Hashed on the device (kernels/digest.cu, one warp per leaf; only the
     * leaves, 8 bytes per 64 KiB, come back for the root hash). A strided
     * view is first made contiguous on the device. vqc_tensor_contiguous
     * counts the read when it copies, vqc_tensor_data when it does not
     * (then c shares t's storage), as the CPU paths count. The CPU paths
     * above and below are the kernel's twin: tests/gpu compare them. */
    vqc_tensor c = {0};
    VQC_TRY(vqc_tensor_contiguous(t, &c));
    vqc_status s = vqc_gpu_digest_buffer(vqc_tensor_data(&c), l.nbytes,
                                         t->dtype, t->ndim, t->shape, out);
    vqc_tensor_free(&c);
    return s;
  }

  if (vqc_tensor_is_contiguous(t)) {
    *out = digest_contiguous(vqc_tensor_data(t), &l);
    return VQC_OK;
  }

  /* Strided: walk it without a full copy. The walk reads the storage
   * directly, so it counts the access itself (the contiguous path counts
   * through vqc_tensor_data). */
  vqc_tensor_note_access(t);
  int64_t byte_strides[VQC_DIGEST_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++)
    byte_strides[d] = t->strides[d] * (int64_t)l.esize;
  const uint8_t *base =
      (const uint8_t *)t->storage->data + t->offset * l.esize;
  return digest_gathered(base, &l, byte_strides, out);
}
