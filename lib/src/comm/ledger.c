/* ledger.c: the per-rank ring of collective records (see vqc/ledger.h).
 *
 * One writer, any number of readers, no lock. The thread driving the comm is
 * the only one that opens and closes records (comm.c); a watchdog thread, or
 * anyone holding the ledger, may read at any time. Each ring slot is a small
 * seqlock: a version that is odd while the writer rewrites the slot, and the
 * record itself as 64-bit words. The writer makes the version odd, stores the
 * words, makes it even again; a reader reads the version, the words, the
 * version again, and keeps its copy only if both versions are the same even
 * number, else it retries (a torn copy is thrown away, never returned).
 *
 * Why atomics for the words too: a reader may copy a slot while the writer
 * rewrites it, and with plain loads and stores that is a data race (undefined
 * behaviour in C11, and what ThreadSanitizer reports) even though the torn
 * copy is discarded. Relaxed or release/acquire atomics on x86-64 compile to
 * the same plain moves, so this costs nothing. The ordering follows Boehm's
 * seqlock recipe without fences: the writer's word stores are release and
 * the reader's word loads acquire, so a reader that sees any word of a
 * rewrite also sees that rewrite's odd version in its second version read.
 *
 * Per call the writer stores two versions and 13 words at open and two
 * versions and the 2 words that change at close, a few nanoseconds, instead
 * of two mutex round trips; the two clock reads (t_enter_ns, t_exit_ns) and
 * the cache misses on the new record's two lines are most of the ledger's
 * cost (bench/bench_comm.c measures it). The writer (open, close) is inline
 * in ledger_internal.h; this file has the readers. */
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "comm/ledger_internal.h"
#include "vqc/clock.h" /* vqc_now_ns, vqc_now_coarse_ns */
#include "vqc/fsutil.h"
#include "vqc/ledger.h"

/* ---- the record's vocabulary (vqc/ledger.h) */

const char *vqc_redop_name(vqc_redop op) {
  switch (op) {
#define X(name, str) case VQC_##name: return str;
    VQC_REDOP_LIST(X)
#undef X
    default: return "?";
  }
}

const char *vqc_coll_name(vqc_coll_op op) {
  switch (op) {
#define X(name, str) case VQC_COLL_##name: return str;
    VQC_COLL_LIST(X)
#undef X
    default: return "?";
  }
}

const char *vqc_record_state_name(vqc_record_state s) {
  switch (s) {
    case VQC_REC_ENTERED: return "entered";
    case VQC_REC_DONE: return "done";
    case VQC_REC_FAILED: return "failed";
  }
  return "?";
}

vqc_status vqc_ledger_create(int rank, size_t capacity, vqc_ledger **out) {
  *out = NULL;
  if (capacity == 0) capacity = VQC_LEDGER_DEFAULT_CAPACITY;
  size_t cap = 1;
  while (cap < capacity && cap <= SIZE_MAX / 2) cap *= 2;
  vqc_ledger *l = calloc(1, sizeof *l);
  if (!l) goto fail;
  /* Zeroed: every version 0 (even) and every word 0, which is what
   * atomic_init would store on these targets. Page-aligned (so each slot
   * is exactly two cache lines, VQC_LEDGER_SLOT_BYTES) and zeroed by the
   * kernel as each page is first touched: a ring is reserved whole (8 MiB)
   * but costs memory only for the records written (1024 thread ranks that
   * each make a few collectives must not hold 8 GiB; run_memory.c counts
   * on this). */
  if (cap > SIZE_MAX / sizeof *l->ring) goto fail;
  void *ring = mmap(NULL, cap * sizeof *l->ring, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ring == MAP_FAILED) goto fail;
  l->ring = ring;
  l->rank = rank;
  l->mask = (uint64_t)cap - 1;
  atomic_init(&l->next_seq, 0);
  atomic_init(&l->open_mark, 0);
  *out = l;
  return VQC_OK;
fail:
  free(l);
  return vqc_error(VQC_ENOMEM, "cannot allocate a ledger of %zu records",
                   cap);
}

void vqc_ledger_destroy(vqc_ledger *l) {
  if (!l) return;
  if (l->ring) munmap(l->ring, (size_t)(l->mask + 1) * sizeof *l->ring);
  free(l);
}

/* ---- the seqlock (one writer: the owner thread) */

/* A consistent copy of the slot (spins only while the writer is inside
 * vqc_ledger_slot_write, a few nanoseconds unless it was descheduled
 * there). */
static void slot_read(vqc_ledger_slot *s, vqc_ledger_record *out) {
  uint64_t w[VQC_LEDGER_REC_WORDS];
  for (;;) {
    uint64_t v1 = atomic_load_explicit(&s->version, memory_order_acquire);
    if (v1 & 1) {
      sched_yield(); /* the writer may need this core to finish */
      continue;
    }
    for (size_t i = 0; i < VQC_LEDGER_REC_WORDS; i++)
      w[i] = atomic_load_explicit(&s->words[i], memory_order_acquire);
    uint64_t v2 = atomic_load_explicit(&s->version, memory_order_relaxed);
    if (v1 == v2) break;
  }
  memcpy(out, w, sizeof w);
}

/* Oldest sequence number still in the ring, given next = next_seq. */
static uint64_t oldest_kept(const vqc_ledger *l, uint64_t next) {
  uint64_t cap = l->mask + 1;
  return next > cap ? next - cap : 0;
}

/* Copies record seq if the ring still holds it (the slot may already hold a
 * newer record, or, for a seq not opened yet, an older one). */
static bool read_seq(vqc_ledger *l, uint64_t seq, vqc_ledger_record *out) {
  slot_read(&l->ring[seq & l->mask], out);
  return out->seq == seq;
}

/* ---- readers (any thread) */

uint64_t vqc_ledger_count(vqc_ledger *l) {
  return atomic_load_explicit(&l->next_seq, memory_order_acquire);
}

bool vqc_ledger_get(vqc_ledger *l, uint64_t seq, vqc_ledger_record *out) {
  uint64_t next = atomic_load_explicit(&l->next_seq, memory_order_acquire);
  if (seq >= next || seq < oldest_kept(l, next)) return false;
  vqc_ledger_record r;
  if (!read_seq(l, seq, &r)) return false; /* overwritten meanwhile */
  *out = r;
  return true;
}

bool vqc_ledger_in_flight(vqc_ledger *l, vqc_ledger_record *out) {
  /* The owner may close the record and open the next one while we read; a
   * few retries catch up with it (each retry means it made progress, so
   * giving up after 100 of them reports "nothing stuck", which is true). */
  for (int tries = 0; tries < 100; tries++) {
    uint64_t mark = atomic_load_explicit(&l->open_mark, memory_order_acquire);
    if (mark == 0) return false;
    vqc_ledger_record r;
    if (read_seq(l, mark - 1, &r) && r.state == VQC_REC_ENTERED) {
      *out = r;
      return true;
    }
    if (atomic_load_explicit(&l->open_mark, memory_order_acquire) == mark)
      return false; /* closed, not reopened: nothing in flight */
  }
  return false;
}

bool vqc_ledger_last_done(vqc_ledger *l, vqc_ledger_record *out) {
  uint64_t next = atomic_load_explicit(&l->next_seq, memory_order_acquire);
  for (uint64_t s = next; s > oldest_kept(l, next); s--) {
    vqc_ledger_record r;
    if (!read_seq(l, s - 1, &r)) return false; /* the ring wrapped past us */
    if (r.state == VQC_REC_DONE) {
      *out = r;
      return true;
    }
  }
  return false;
}

size_t vqc_ledger_snapshot(vqc_ledger *l, vqc_ledger_record *out, size_t max) {
  uint64_t next = atomic_load_explicit(&l->next_seq, memory_order_acquire);
  uint64_t first = oldest_kept(l, next);
  if (next - first > max) first = next - max;
  size_t n = 0;
  for (uint64_t s = first; s < next; s++) {
    /* A record the owner overwrote while we copied (the ring wrapped) is
     * gone: left out, like any record older than the ring. */
    if (read_seq(l, s, &out[n])) n++;
  }
  return n;
}

/* Writes s as a JSON string literal (quotes and escapes). */
static void write_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

vqc_status vqc_ledger_write_jsonl(vqc_ledger *l, FILE *f) {
  /* Copied first (a consistent snapshot), written after: the owner keeps
   * running meanwhile. */
  uint64_t next = vqc_ledger_count(l);
  size_t want = (size_t)(next - oldest_kept(l, next));
  vqc_ledger_record *copy = malloc((want ? want : 1) * sizeof *copy);
  if (!copy)
    return vqc_error(VQC_ENOMEM, "cannot copy %zu ledger records", want);
  size_t kept = vqc_ledger_snapshot(l, copy, want);

  for (size_t i = 0; i < kept; i++) {
    const vqc_ledger_record *r = &copy[i];
    fprintf(f, "{\"seq\":%" PRIu64 ",\"rank\":%d,\"op\":\"%s\",", r->seq,
            r->rank, vqc_coll_name(r->op));
    fprintf(f, "\"redop\":\"%s\",\"dtype\":\"%s\",\"count\":%zu,\"root\":%d,",
            r->op == VQC_COLL_ALL_REDUCE ? vqc_redop_name(r->redop) : "",
            vqc_dtype_name(r->dtype), r->count, r->root);
    fputs("\"file\":", f);
    write_json_string(f, r->site.file);
    fprintf(f, ",\"line\":%d,\"func\":", r->site.line);
    write_json_string(f, r->site.func);
    fprintf(f,
            ",\"t_enter_ns\":%" PRIu64 ",\"t_exit_ns\":%" PRIu64
            ",\"state\":\"%s\",\"status\":\"%s\"}\n",
            r->t_enter_ns, r->t_exit_ns, vqc_record_state_name(r->state),
            vqc_status_name(r->status));
  }
  free(copy);
  return ferror(f) ? vqc_error(VQC_EIO, "write error in ledger dump") : VQC_OK;
}

/* vqc_ledger_write_jsonl as a writer for vqc_write_atomic. */
static vqc_status write_ledger(FILE *f, void *ledger) {
  return vqc_ledger_write_jsonl(ledger, f);
}

vqc_status vqc_ledger_dump(vqc_ledger *l, const char *path) {
  return vqc_write_atomic(path, write_ledger, l);
}
