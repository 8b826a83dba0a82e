/* vqc_mpi_reqs.h: the interposer's table of point-to-point requests in
 * flight (MPI_Isend, MPI_Ibsend, MPI_Issend, MPI_Irsend, MPI_Irecv), keyed
 * by the request handle: what each is (call, peer, tag, communicator,
 * call site) from its I-call until a wait or test completes it or
 * MPI_Request_free / MPI_Cancel lets it go. vqc_mpi.c is its only user:
 * a wait names the requests it blocks on, MPI_Finalize reports those
 * never completed.
 *
 * One open-addressing hash (linear probing, backward-shift deletion, no
 * tombstones), kept at most half full: a lookup is one or two probes.
 * Not thread-safe: under MPI_THREAD_MULTIPLE the caller holds its lock.
 * Hidden: nothing here is exported from libvqcheck_mpi.so, so no name can
 * clash with the program's. */
#ifndef VQC_MPI_REQS_H
#define VQC_MPI_REQS_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VQC_REQS_API __attribute__((visibility("hidden")))

/* What one request is. ci and site are the interposer's (comm_info and
 * site of vqc_mpi.c): the table stores the pointers and never follows
 * them; whoever puts an entry holds a reference on ci, and whoever takes
 * it out gives that reference back. */
typedef struct vqc_p2p_req {
  const char *call;  /* "MPI_Irecv", ... (a literal) */
  void *ci;          /* its communicator's comm_info; NULL: not known */
  int peer;          /* dest or source as the program passed it (a rank of
                        the communicator, MPI_ANY_SOURCE, MPI_PROC_NULL) */
  int tag;           /* as passed (MPI_ANY_TAG on a receive) */
  bool recv;         /* a receive (peer is "from"), else a send ("to") */
  const void *site;  /* its call site (never freed) */
  /* A receive's type as vqc_mpi_msgs.c compares it (taken at the I-call:
   * the program may free the datatype before the request completes):
   * element name and MPI name, static strings (name NULL: derived). */
  const char *dtype, *tname;
  /* Its buffer's bytes [lo, hi) (lo == hi: not known), and for a send the
   * hash of those bytes at the I-call (hashed: taken), so that a change
   * before completion is seen (vqc_mpi_races.c). */
  uintptr_t lo, hi;
  uint64_t hash;
  bool hashed;
  /* A persistent request (MPI_Send_init, ...: vqc_mpi_persist.c): MPI
   * leaves its handle as it is when it completes. */
  bool persistent;
} vqc_p2p_req;

typedef struct vqc_reqs_slot {
  MPI_Request key;   /* MPI_REQUEST_NULL: empty */
  vqc_p2p_req v;
} vqc_reqs_slot;

/* Zero-initialised is empty; vqc_reqs_clear frees the slots. */
typedef struct vqc_reqs {
  vqc_reqs_slot *slots; /* cap of them (owned); NULL until the first put */
  size_t cap, n;        /* cap a power of two, n <= cap / 2 */
} vqc_reqs;

/* Puts r -> *v. An entry already under r (a request completed where the
 * interposer did not see it, its handle now reused) is replaced and
 * copied into *old (true returned in *replaced): its ci reference is the
 * caller's to give back. Returns false (nothing stored) when r is
 * MPI_REQUEST_NULL or memory ran out. */
VQC_REQS_API bool vqc_reqs_put(vqc_reqs *t, MPI_Request r,
                               const vqc_p2p_req *v, vqc_p2p_req *old,
                               bool *replaced);

/* The entry of r, or NULL (valid until the next put or take). */
VQC_REQS_API const vqc_p2p_req *vqc_reqs_find(const vqc_reqs *t,
                                              MPI_Request r);

/* Takes r's entry out into *out; false when r has none. */
VQC_REQS_API bool vqc_reqs_take(vqc_reqs *t, MPI_Request r,
                                vqc_p2p_req *out);

/* Takes any one entry out into *out (the table's order); false when
 * empty. For MPI_Finalize: what is left was never completed. */
VQC_REQS_API bool vqc_reqs_pop(vqc_reqs *t, vqc_p2p_req *out);

/* Frees the slots (entries dropped as they are: take them out first to
 * give their references back). Accepts an empty table. */
VQC_REQS_API void vqc_reqs_clear(vqc_reqs *t);

#endif /* VQC_MPI_REQS_H */
