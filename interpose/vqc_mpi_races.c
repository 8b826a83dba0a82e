/* vqc_mpi_races.c: the buffers of point-to-point requests in flight.
 *
 * Between a non-blocking call (MPI_Isend, MPI_Irecv, ...) and the wait or
 * test that completes it, its buffer belongs to MPI: the program must not
 * change a send's buffer (MPI may send the old bytes, the new ones or a
 * mix) and must not use a receive's buffer at all (MPI writes into it at a
 * moment the program does not know). Two checks, each a lost_inplace
 * finding on the live record, once per call site:
 *   overlap   a call that writes bytes (a receive) shares them with a
 *             request in flight, or a call that reads them (a send) shares
 *             them with a receive in flight: MPI_Irecv(buf) then
 *             MPI_Isend(buf) before the wait, two MPI_Irecv into one
 *             buffer, MPI_Recv into the buffer of a pending MPI_Isend.
 *             Checked at every point-to-point call while requests are in
 *             flight (a scan of them; skipped past SCAN_MAX requests);
 *   changed   a send's buffer hashed at its I-call differs when a wait or
 *             test completes it: the program wrote into it meanwhile.
 *             Buffers up to FULL_MAX bytes are hashed whole; larger ones
 *             by samples (the first and last 4 KiB and 256 blocks of 64
 *             bytes between), read with process_vm_readv so that a buffer
 *             the program freed too early is not a crash here.
 * A request let go with MPI_Request_free is not compared (the program
 * learns of its completion by other means). Only buffers without holes
 * are checked (basic types, contiguous derived ones: solid_span): a
 * vector type's span covers bytes it does not move, which the program
 * may use meanwhile. */
#include "vqc_mpi_internal.h" /* first: it defines _GNU_SOURCE */

#include <limits.h>
#include <sys/uio.h> /* process_vm_readv */

#define SCAN_MAX 256         /* requests in flight scanned per call */
#define FULL_MAX (64u << 10) /* bytes hashed whole; past it, samples */
#define EDGE 4096u           /* sampled: this many at each end ... */
#define BLOCKS 256u          /* ... and this many blocks between */
#define BLOCK 64u


static uint64_t mix64(uint64_t h, uint64_t w) {
  h ^= w * 0x9e3779b97f4a7c15ull;
  h = (h << 27 | h >> 37) * 0xbf58476d1ce4e5b9ull;
  return h;
}

static uint64_t hash_bytes(uint64_t h, const unsigned char *p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = mix64(h, w);
  }
  uint64_t w = 0;
  memcpy(&w, p + i, n - i);
  return mix64(h, w ^ (uint64_t)n);
}

/* The hash of [lo, hi); false when it cannot be read (not mapped). */
bool hash_span(uintptr_t lo, uintptr_t hi, uint64_t *out) {
  const size_t n = hi - lo;
  if (n <= FULL_MAX) {
    *out = hash_bytes(0x5bd1e995u, (const unsigned char *)lo, n);
    return true;
  }
  /* Samples, copied by the kernel: EFAULT rather than a fault here. */
  static unsigned char buf[2 * EDGE + BLOCKS * BLOCK];
  struct iovec remote[2 + BLOCKS];
  int k = 0;
  remote[k++] = (struct iovec){(void *)lo, EDGE};
  const size_t stride = (n - 2 * EDGE) / BLOCKS;
  for (unsigned b = 0; b < BLOCKS; b++)
    remote[k++] = (struct iovec){(void *)(lo + EDGE + b * stride), BLOCK};
  remote[k++] = (struct iovec){(void *)(hi - EDGE), EDGE};
  struct iovec local = {buf, sizeof buf};
  if (process_vm_readv(getpid(), &local, 1, remote, (unsigned long)k, 0) !=
      (ssize_t)sizeof buf)
    return false;
  *out = hash_bytes(0x5bd1e995u ^ n, buf, sizeof buf);
  return true;
}

/* The bytes count items of dt at buf cover, when they are all the span's
 * bytes (no holes: a basic type or a contiguous derived one); false
 * otherwise. Halo exchanges send and receive columns of one array with
 * vector types whose spans interleave but whose bytes do not, and compute
 * in the holes meanwhile: neither check applies to them. */
bool solid_span(const void *buf, int count, MPI_Datatype dt, uintptr_t *lo,
                uintptr_t *hi) {
  if (!buf_span(buf, count, dt, lo, hi)) return false;
  const basic *b = basic_of(dt);
  if (b) return b->extents && b->true_extent == b->extent;
  int size = 0;
  return PMPI_Type_size(dt, &size) == MPI_SUCCESS && size > 0 &&
         (uintptr_t)size * (uintptr_t)count == *hi - *lo;
}

void race_note(vqc_p2p_req *v, const void *buf, int count, MPI_Datatype dt) {
  v->lo = v->hi = 0;
  v->hashed = false;
  if (!solid_span(buf, count, dt, &v->lo, &v->hi)) v->lo = v->hi = 0;
  if (!v->recv && v->hi > v->lo)
    v->hashed = hash_span(v->lo, v->hi, &v->hash);
}

void race_restart(vqc_p2p_req *v) {
  v->hashed = !v->recv && v->hi > v->lo && hash_span(v->lo, v->hi, &v->hash);
}

void race_finding(const site *s, const char *msg, const char *detail) {
  char file[1100], func[520], m[2800];
  json_esc(file, sizeof file, s->file);
  json_esc(func, sizeof func, s->func);
  json_esc(m, sizeof m, msg);
  char *b = malloc(8192);
  if (!b) return;
  const int k = snprintf(b, 8192,
      "{\"event\":\"finding\",\"finding\":{\"kind\":\"lost_inplace\","
      "\"step\":-1,\"ranks\":[%d],\"site\":{\"file\":\"%.400s\",\"line\":%d,"
      "\"func\":\"%.200s\"},\"message\":\"%s\",\"detail\":{%s}}}\n",
      g.rank, file, s->line, func, m, detail);
  if (k > 0 && k < 8192) live_write(b, (size_t)k);
  free(b);
}

/* "file:line (func)" of s. */
void site_at(const site *s, char *b, size_t n) {
  if (s->file[0]) snprintf(b, n, "%.300s:%d (%.200s)", base_name(s->file),
                           s->line, s->func);
  else snprintf(b, n, "%.200s", s->func);
}

void race_check(const char *fn, const void *buf, int count, MPI_Datatype dt,
                bool recv, const site *s, MPI_Request skip) {
  const size_t n = __atomic_load_n(&p2p_reqs.n, __ATOMIC_RELAXED);
  if (!g.on || !s || n == 0 || n > SCAN_MAX) return;
  uintptr_t lo, hi;
  if (!solid_span(buf, count, dt, &lo, &hi)) return;
  vqc_p2p_req other;
  bool hit = false;
  uintptr_t shared = 0;
  lock();
  for (size_t i = 0; i < p2p_reqs.cap && !hit; i++) {
    const vqc_reqs_slot *q = &p2p_reqs.slots[i];
    if (q->key == MPI_REQUEST_NULL || q->key == skip) continue;
    if (!recv && !q->v.recv) continue; /* two reads: no conflict */
    const uintptr_t a = lo > q->v.lo ? lo : q->v.lo;
    const uintptr_t b = hi < q->v.hi ? hi : q->v.hi;
    if (a < b) {
      hit = true;
      other = q->v;
      shared = b - a;
    }
  }
  const bool tell = hit && site_first_locked(s, REPORTED_RACE);
  unlock();
  if (!tell) return;
  const site *os = other.site ? other.site : &overflow_site;
  char here[600], there[600], msg[2600], detail[800];
  site_at(s, here, sizeof here);
  site_at(os, there, sizeof there);
  snprintf(msg, sizeof msg,
           "rank %d's %s at %s %s %llu bytes of the buffer of its %s at %s, "
           "which no wait or test has completed yet: %s",
           g.rank, fn, here, recv ? "writes" : "reads",
           (unsigned long long)shared, other.call, there,
           other.recv ? "MPI writes into a receive's buffer at a moment the "
                        "program does not know, so these bytes may be "
                        "overwritten or half written (complete the request "
                        "first, or use another buffer)"
                      : "MPI may still be reading the send's buffer, so the "
                        "message may carry the old bytes, the new ones or a "
                        "mix (complete the request first, or use another "
                        "buffer)");
  snprintf(detail, sizeof detail,
           "\"mpi_call\":\"%s\",\"in_flight\":\"%s\",\"in_flight_site\":"
           "\"%.300s\",\"overlap_bytes\":%llu,\"race\":true",
           fn, other.call, there, (unsigned long long)shared);
  race_finding(s, msg, detail);
}

void race_completed(const vqc_p2p_req *q, uintptr_t pc) {
  if (!g.on || q->recv || !q->hashed || q->hi <= q->lo) return;
  uint64_t now;
  if (!hash_span(q->lo, q->hi, &now) || now == q->hash) return;
  const site *s = q->site ? q->site : &overflow_site;
  if (!site_first(s, REPORTED_CHANGED)) return;
  char here[600], done[600], msg[2600], detail[800];
  site_at(s, here, sizeof here);
  site_at(site_of(pc), done, sizeof done);
  snprintf(msg, sizeof msg,
           "rank %d changed the buffer of its %s (%llu bytes) at %s before "
           "the request completed (completed at %s): MPI may send the old "
           "bytes, the new ones or a mix (a non-blocking send's buffer must "
           "not change until a wait or test completes it)",
           g.rank, q->call, (unsigned long long)(q->hi - q->lo), here, done);
  snprintf(detail, sizeof detail,
           "\"mpi_call\":\"%s\",\"completed_at\":\"%.300s\",\"bytes\":%llu,"
           "\"changed_in_flight\":true", q->call, done,
           (unsigned long long)(q->hi - q->lo));
  race_finding(s, msg, detail);
}

void race_note_coll(call *c, const char *fn, const void *buf,
                    long long count, MPI_Datatype dt) {
  c->shashed = false;
  c->fn = fn;
  if (!c->ci || count <= 0 || count > INT_MAX ||
      !solid_span(buf, (int)count, dt, &c->slo, &c->shi) || c->shi <= c->slo)
    return;
  c->shashed = hash_span(c->slo, c->shi, &c->shash);
}

void race_coll_completed(const call *c, uintptr_t pc) {
  if (!g.on || !c->shashed || c->shi <= c->slo) return;
  uint64_t now;
  if (!hash_span(c->slo, c->shi, &now) || now == c->shash) return;
  if (!site_first(c->s, REPORTED_CHANGED)) return;
  char here[600], done[600], msg[2600], detail[800];
  site_at(c->s, here, sizeof here);
  site_at(site_of(pc), done, sizeof done);
  snprintf(msg, sizeof msg,
           "rank %d changed the %s of its %s (%llu bytes) at %s "
           "before the request completed (completed at %s): MPI may use "
           "the old bytes, the new ones or a mix (a non-blocking "
           "collective's buffers must not change until a wait or test "
           "completes it)",
           g.rank, strncmp(c->fn, "MPI_File_", 9) == 0 ? "buffer"
                                                       : "send buffer",
           c->fn, (unsigned long long)(c->shi - c->slo), here, done);
  snprintf(detail, sizeof detail,
           "\"mpi_call\":\"%s\",\"completed_at\":\"%.300s\",\"bytes\":%llu,"
           "\"changed_in_flight\":true", c->fn, done,
           (unsigned long long)(c->shi - c->slo));
  race_finding(c->s, msg, detail);
}

/* A receive into a derived type whose elements overlap (more bytes of data
 * than the type spans: an hvector whose byte stride is smaller than its
 * block, struct displacements too close): MPI forbids it for a receive
 * (the type map of a receive must not write a byte twice), and the
 * message's bytes then land on one another. A finding once per site. */
void race_recv_type(const char *fn, MPI_Datatype dt, const site *s) {
  if (!g.on || !s || dt == MPI_DATATYPE_NULL || basic_of(dt)) return;
  int size = 0;
  MPI_Aint tlb = 0, text = 0;
  if (PMPI_Type_size(dt, &size) != MPI_SUCCESS ||
      PMPI_Type_get_true_extent(dt, &tlb, &text) != MPI_SUCCESS ||
      size <= 0 || (MPI_Aint)size <= text)
    return;
  if (!site_first(s, REPORTED_OVERLAID)) return;
  char here[600], msg[1400], detail[300];
  site_at(s, here, sizeof here);
  snprintf(msg, sizeof msg,
           "rank %d's %s at %s receives into a datatype whose elements "
           "overlap (%d bytes of data in a span of %ld bytes): MPI forbids "
           "it for a receive, and the message's bytes land on one another "
           "(check the type's stride or displacements)",
           g.rank, fn, here, size, (long)text);
  snprintf(detail, sizeof detail,
           "\"mpi_call\":\"%s\",\"type_size\":%d,\"true_extent\":%ld,"
           "\"overlapping_type\":true", fn, size, (long)text);
  race_finding(s, msg, detail);
}
