/* ledger_internal.h: the ledger's writer side (not a public header), used
 * by comm.c, which opens and closes a record around every collective. The
 * ledger needs nothing of the comm: everything it records is handed to it
 * (the record's fields, and the times, taken on the core clock).
 *
 * The ring's layout and the writer are here, inline, rather than in
 * ledger.c: open and close run around every collective, and as calls into
 * another file they were two more stretches of code to fetch, usually cold
 * again by the next collective (bench/bench_comm.c). ledger.c has the
 * readers and the seqlock's description. */
#ifndef VQC_LEDGER_INTERNAL_H
#define VQC_LEDGER_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vqc/clock.h" /* vqc_now_coarse_ns */
#include "vqc/ledger.h"
#include "vqc/status.h"

#define VQC_LEDGER_REC_WORDS (sizeof(vqc_ledger_record) / sizeof(uint64_t))
_Static_assert(sizeof(vqc_ledger_record) % sizeof(uint64_t) == 0,
               "a ledger record must be a whole number of 64-bit words");

/* A slot is two whole cache lines (version + 13 words = 112 bytes, padded
 * to 128, and the ring starts on a line): a record written touches two
 * lines, where unpadded 112-byte slots straddle three every other record.
 * The ring (8 MiB at the default capacity) is far larger than the caches,
 * so each new record's lines are misses; fewer lines, fewer misses.
 * VQC_LEDGER_SLOT_BYTES is in vqc/ledger.h, for memory estimates. */
typedef struct vqc_ledger_slot {
  _Atomic uint64_t version; /* odd while being rewritten */
  _Atomic uint64_t words[VQC_LEDGER_REC_WORDS]; /* a record's bytes */
  unsigned char pad[VQC_LEDGER_SLOT_BYTES -
                    (1 + VQC_LEDGER_REC_WORDS) * sizeof(uint64_t)];
} vqc_ledger_slot;
_Static_assert(sizeof(vqc_ledger_slot) == VQC_LEDGER_SLOT_BYTES,
               "a ledger slot is two 64-byte cache lines");

/* The words close rewrites (the rest of the record is as open wrote it):
 * t_exit_ns, and state with status. */
#define VQC_LEDGER_EXIT_WORD \
  (offsetof(vqc_ledger_record, t_exit_ns) / sizeof(uint64_t))
#define VQC_LEDGER_STATE_WORD \
  (offsetof(vqc_ledger_record, state) / sizeof(uint64_t))
_Static_assert(offsetof(vqc_ledger_record, t_exit_ns) % sizeof(uint64_t) == 0,
               "t_exit_ns is a word of its own");
_Static_assert(offsetof(vqc_ledger_record, status) / sizeof(uint64_t) ==
                       VQC_LEDGER_STATE_WORD &&
                   VQC_LEDGER_STATE_WORD != VQC_LEDGER_EXIT_WORD,
               "state and status share one word, after t_exit_ns's");

struct vqc_ledger {
  int rank;
  uint64_t mask;              /* capacity - 1; capacity a power of two */
  vqc_ledger_slot *ring;      /* ring[seq & mask], capacity slots */
  _Atomic uint64_t next_seq;  /* records ever opened; written by the owner */
  _Atomic uint64_t open_mark; /* seq + 1 of the ENTERED record; 0 if none */
};

/* capacity 0 means the default; it is
 * rounded up to a power of two (the slot of seq is then seq & mask). */
vqc_status vqc_ledger_create(int rank, size_t capacity, vqc_ledger **out);
void vqc_ledger_destroy(vqc_ledger *l);

/* ---- the seqlock's writer (one writer: the owner thread; ledger.c) */

/* The whole record (open). */
static inline void vqc_ledger_slot_write(vqc_ledger_slot *s,
                                         const vqc_ledger_record *r) {
  const unsigned char *src = (const unsigned char *)r;
  uint64_t v = atomic_load_explicit(&s->version, memory_order_relaxed);
  atomic_store_explicit(&s->version, v + 1, memory_order_relaxed);
  for (size_t i = 0; i < VQC_LEDGER_REC_WORDS; i++) {
    /* Word by word: the caller has just stored some fields, and a wide
     * (vector) copy of freshly stored bytes stalls store forwarding. */
    uint64_t w;
    memcpy(&w, src + i * sizeof w, sizeof w);
    atomic_store_explicit(&s->words[i], w, memory_order_release);
  }
  atomic_store_explicit(&s->version, v + 2, memory_order_release);
}

/* Only the words close changes (the slot's other words already hold what
 * open wrote): the same seqlock, 2 word stores instead of 13. */
static inline void vqc_ledger_slot_write_exit(vqc_ledger_slot *s,
                                              const vqc_ledger_record *r) {
  const unsigned char *src = (const unsigned char *)r;
  uint64_t v = atomic_load_explicit(&s->version, memory_order_relaxed);
  uint64_t exit_word, state_word;
  memcpy(&exit_word, src + VQC_LEDGER_EXIT_WORD * sizeof exit_word,
         sizeof exit_word);
  memcpy(&state_word, src + VQC_LEDGER_STATE_WORD * sizeof state_word,
         sizeof state_word);
  atomic_store_explicit(&s->version, v + 1, memory_order_relaxed);
  atomic_store_explicit(&s->words[VQC_LEDGER_EXIT_WORD], exit_word,
                        memory_order_release);
  atomic_store_explicit(&s->words[VQC_LEDGER_STATE_WORD], state_word,
                        memory_order_release);
  atomic_store_explicit(&s->version, v + 2, memory_order_release);
}

/* Opens a record: the caller fills op, redop, dtype, count, root, site and
 * the buffers of *r (its own memory, e.g. on the stack: this is what event
 * handlers see); open sets seq, rank, t_enter_ns, t_exit_ns = 0, state
 * ENTERED and status VQC_OK in *r and publishes a copy to the ring. Only the
 * thread driving the comm may open and close (the ledger's single writer). */
static inline void vqc_ledger_open(vqc_ledger *l, vqc_ledger_record *r) {
  /* Only this thread stores next_seq, so a relaxed load reads our own. */
  uint64_t seq = atomic_load_explicit(&l->next_seq, memory_order_relaxed);
  r->seq = seq;
  r->rank = l->rank;
  r->t_enter_ns = vqc_now_coarse_ns();
  r->t_exit_ns = 0;
  r->state = VQC_REC_ENTERED;
  r->status = VQC_OK;
  vqc_ledger_slot_write(&l->ring[seq & l->mask], r);
  /* Published after the slot: a reader that sees the count or the mark
   * finds the record (or a newer one) in the slot. */
  atomic_store_explicit(&l->next_seq, seq + 1, memory_order_release);
  atomic_store_explicit(&l->open_mark, seq + 1, memory_order_release);
}

/* Sets *r's t_exit_ns, status and state (DONE or FAILED) and publishes it;
 * *r is the record open was given, unchanged since but for those fields. */
static inline void vqc_ledger_close(vqc_ledger *l, vqc_ledger_record *r,
                                    vqc_status s) {
  r->t_exit_ns = vqc_now_coarse_ns();
  r->status = s;
  r->state = s == VQC_OK ? VQC_REC_DONE : VQC_REC_FAILED;
  /* The slot needs only the fields that changed (event handlers see *r
   * const). If records opened meanwhile (inside a handler) went round the
   * whole ring (capacity = mask + 1 records opened after *r), the slot is
   * a newer record's and *r is older than the ring keeps: left alone, like
   * any record the ring has dropped. Decided from next_seq (this thread's
   * own, on the ledger's line) rather than the slot's seq word: a load
   * that misses would stall here, where the stores below need not. */
  const uint64_t next =
      atomic_load_explicit(&l->next_seq, memory_order_relaxed);
  if (next - r->seq <= l->mask + 1)
    vqc_ledger_slot_write_exit(&l->ring[r->seq & l->mask], r);
  /* A record opened inside an event handler (nested) closes first; the
   * mark then names no record, as before this one was opened. */
  if (atomic_load_explicit(&l->open_mark, memory_order_relaxed) == r->seq + 1)
    atomic_store_explicit(&l->open_mark, 0, memory_order_release);
}

#endif /* VQC_LEDGER_INTERNAL_H */
