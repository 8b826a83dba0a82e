/* vqc_mpi_reqs.c: the table of point-to-point requests in flight, by
 * handle (vqc_mpi_reqs.h says what it holds and who owns what). Linear
 * probing in a power-of-two table at most half full; a deletion shifts
 * the entries after it back into place (Knuth 6.4, algorithm R), so there
 * are no tombstones and a long-running program that posts and completes
 * millions of requests keeps short probes. */
#include "vqc_mpi_reqs.h"

#include <stdint.h>
#include <stdlib.h>

/* The home slot of r: a multiplicative hash of the handle (OpenMPI's is a
 * pointer, aligned: its low bits say little, the high bits of the product
 * mix them all). */
static size_t home(const vqc_reqs *t, MPI_Request r) {
  const uint64_t h = (uint64_t)(uintptr_t)r * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 32) & (t->cap - 1);
}

/* The slot holding r, or the empty slot where it would go. cap > 0. */
static size_t probe(const vqc_reqs *t, MPI_Request r) {
  size_t i = home(t, r);
  while (t->slots[i].key != MPI_REQUEST_NULL && t->slots[i].key != r)
    i = (i + 1) & (t->cap - 1);
  return i;
}

/* Doubles the table (16 slots first). false: out of memory, t unchanged. */
static bool grow(vqc_reqs *t) {
  const size_t cap = t->cap ? 2 * t->cap : 16;
  vqc_reqs_slot *s = malloc(sizeof *s * cap);
  if (!s) return false;
  for (size_t i = 0; i < cap; i++) s[i].key = MPI_REQUEST_NULL;
  vqc_reqs old = *t;
  t->slots = s;
  t->cap = cap;
  for (size_t i = 0; i < old.cap; i++)
    if (old.slots[i].key != MPI_REQUEST_NULL)
      t->slots[probe(t, old.slots[i].key)] = old.slots[i];
  free(old.slots);
  return true;
}

bool vqc_reqs_put(vqc_reqs *t, MPI_Request r, const vqc_p2p_req *v,
                  vqc_p2p_req *old, bool *replaced) {
  *replaced = false;
  if (r == MPI_REQUEST_NULL) return false;
  if (2 * (t->n + 1) > t->cap && !grow(t)) return false;
  const size_t i = probe(t, r);
  if (t->slots[i].key == r) {
    *old = t->slots[i].v;
    *replaced = true;
  } else {
    t->slots[i].key = r;
    t->n++;
  }
  t->slots[i].v = *v;
  return true;
}

const vqc_p2p_req *vqc_reqs_find(const vqc_reqs *t, MPI_Request r) {
  if (t->n == 0 || r == MPI_REQUEST_NULL) return NULL;
  const size_t i = probe(t, r);
  return t->slots[i].key == r ? &t->slots[i].v : NULL;
}

/* Empties slot i, moving back each later entry of the run whose home lies
 * at or before the hole (cyclically), so every entry stays reachable from
 * its home without crossing an empty slot. */
static void remove_at(vqc_reqs *t, size_t i) {
  const size_t mask = t->cap - 1;
  size_t j = i;
  for (;;) {
    t->slots[i].key = MPI_REQUEST_NULL;
    size_t h;
    do {
      j = (j + 1) & mask;
      if (t->slots[j].key == MPI_REQUEST_NULL) {
        t->n--;
        return;
      }
      h = home(t, t->slots[j].key);
      /* j's entry may stay when its home h lies cyclically in (i, j] */
    } while (i <= j ? (i < h && h <= j) : (i < h || h <= j));
    t->slots[i] = t->slots[j];
    i = j;
  }
}

bool vqc_reqs_take(vqc_reqs *t, MPI_Request r, vqc_p2p_req *out) {
  if (t->n == 0 || r == MPI_REQUEST_NULL) return false;
  const size_t i = probe(t, r);
  if (t->slots[i].key != r) return false;
  *out = t->slots[i].v;
  remove_at(t, i);
  return true;
}

bool vqc_reqs_pop(vqc_reqs *t, vqc_p2p_req *out) {
  for (size_t i = 0; t->n > 0 && i < t->cap; i++)
    if (t->slots[i].key != MPI_REQUEST_NULL) {
      *out = t->slots[i].v;
      remove_at(t, i);
      return true;
    }
  return false;
}

void vqc_reqs_clear(vqc_reqs *t) {
  free(t->slots);
  t->slots = NULL;
  t->cap = t->n = 0;
}
