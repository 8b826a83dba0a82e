/* vqc_mpi_internal.h: what the parts of libvqcheck_mpi.so share (the PMPI
 * interposer; vqc_mpi.c's opening comment is its contract, and says which
 * file holds what). Only the MPI_* wrappers are exported from the library:
 * everything declared here is VQC_MPI_HIDDEN, so no name here can clash
 * with the program's or its MPI library's.
 *
 * The helpers on a recorded collective's path (the clock, the lock, the
 * heartbeat store, the call-site cache, begin and end) are static inline
 * here, as they were inlinable when the interposer was one file: each
 * collective pays for them twice or more (docs/mpi.md, "What it costs").
 *
 * Not thread-safe by itself: under MPI_THREAD_MULTIPLE (g.multi) the
 * shared tables are used under lock(). */
#ifndef VQC_MPI_INTERNAL_H
#define VQC_MPI_INTERNAL_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "vqc_mpi_reqs.h"

#define VQC_MPI_HIDDEN __attribute__((visibility("hidden")))

/* The heartbeat's size and states (python/vqcheck/_heartbeat.py). */
#define HB_SIZE 64
enum { HB_RUNNING = 0, HB_IN_COLLECTIVE = 1, HB_FINISHED = 2,
       HB_SETUP = 3 /* loaded, MPI_Init not yet returned */ };

/* The wrapper's return address: the call site (a macro, so that it is the
 * MPI_* wrapper's own). */
#define RA ((uintptr_t)__builtin_return_address(0))

/* ---- state (vqc_mpi.c) */

/* The process's: set by MPI_Init (started), read everywhere. One per
 * process, never freed (the mappings and files live until exit). */
typedef struct vqc_mpi_state {
  bool on;              /* recording: $VQC_WATCH_DIR set and MPI started */
  int rank, size;
  int live_fd, stacks_fd;
  unsigned char *hb;    /* the heartbeat's shared mapping */
  uint64_t beats;
  const char *beat_op;  /* the op beat_op16 holds, NUL-padded (one
                           thread: a loop's beats copy it, no loop) */
  char beat_op16[16];
  uint32_t pid;
  bool multi;           /* MPI_THREAD_MULTIPLE: locks around the tables */
  bool strict;          /* $VQC_MPI_STRICT=1: agree before data moves */
  bool sync_sends;      /* $VQC_MPI_SYNC_SENDS=1: MPI_Send as MPI_Ssend,
                           MPI_Isend as MPI_Issend (vqc_mpi_p2p.c) */
  int keyval;
  MPI_Group world_group;
  char dir[4096];
} vqc_mpi_state;

extern VQC_MPI_HIDDEN vqc_mpi_state g;
extern VQC_MPI_HIDDEN pthread_mutex_t g_lock;

static inline void lock(void) {
  if (g.multi) pthread_mutex_lock(&g_lock);
}
static inline void unlock(void) {
  if (g.multi) pthread_mutex_unlock(&g_lock);
}

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* now_ns's clock as of its last tick (CLOCK_MONOTONIC_COARSE: 1 to 4 ms
 * behind, never ahead): a recorded collective's two times and its
 * heartbeats. They order a rank's calls and tell a hang's seconds, which a
 * tick does not change, and this read costs 10 ns on the project's VM
 * where now_ns's costs 48 (docs/mpi.md "What it costs"); every
 * heartbeat's time too (the watcher counts seconds). Whatever needs
 * two ranks' instants ordered (the RMA races' times in flight) reads
 * now_ns. */
static inline uint64_t now_coarse_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the heartbeat */

/* The heartbeat's 64 bytes as stored (python/vqcheck/_heartbeat.py's
 * layout, little-endian: the targets here are x86-64 and aarch64 Linux;
 * a big-endian build stops at the _Static_assert below). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
_Static_assert(0, "the heartbeat is little-endian: swap its fields here");
#endif
typedef struct hb_layout {
  char magic[4];          /* "VQHB" */
  uint32_t version, pid, state;
  uint64_t beats, last_ns, seq, step;
  char op[16];            /* NUL-padded */
} hb_layout;
_Static_assert(sizeof(hb_layout) == HB_SIZE, "the heartbeat is 64 bytes");

/* A sign of progress at time t (now_ns's clock): the whole 64 bytes in
 * one copy, so a reader (which reads twice) sees one state or the next. */
static inline void beat_at(uint32_t state, uint64_t seq, const char *op,
                           uint64_t t) {
  if (!g.hb) return;
  if (g.multi) {
    hb_layout b = {.magic = {'V', 'Q', 'H', 'B'}, .version = 1,
                   .pid = g.pid, .state = state, .last_ns = t, .seq = seq};
    b.beats = __atomic_add_fetch(&g.beats, 1, __ATOMIC_RELAXED);
    /* step: an MPI program has none */
    for (int i = 0; op && op[i] && i < 16; i++) b.op[i] = op[i];
    memcpy(g.hb, &b, sizeof b);
    return;
  }
  /* One thread calls MPI (no other writer; a signal handler never
   * beats): the fields stored in place, the op's 16 bytes copied from
   * beat_op16. (A copy through a struct on the stack read back its
   * fresh narrow stores as wide loads: a store-forwarding stall that
   * was a tenth of a recorded call.) */
  hb_layout *h = (hb_layout *)(void *)g.hb;
  memcpy(h->magic, "VQHB", 4);
  h->version = 1;
  h->pid = g.pid;
  h->state = state;
  h->beats = ++g.beats;
  h->last_ns = t;
  h->seq = seq;
  h->step = 0; /* an MPI program has none */
  if (op && op[0]) {
    if (op != g.beat_op) {
      memset(g.beat_op16, 0, sizeof g.beat_op16);
      for (int i = 0; op[i] && i < 16; i++) g.beat_op16[i] = op[i];
      g.beat_op = op;
    }
    memcpy(h->op, g.beat_op16, sizeof h->op);
  } else {
    memset(h->op, 0, sizeof h->op);
  }
}

static inline void beat(uint32_t state, uint64_t seq, const char *op) {
  if (g.hb) beat_at(state, seq, op, now_coarse_ns());
}

/* ---- call sites (vqc_mpi_sites.c) */

/* One call site, resolved once; the table's slots are never freed. */
typedef struct site {
  uintptr_t pc;         /* the return address; 0: free slot */
  bool lib;             /* inside an MPI library: look further up */
  char file[512], func[256];
  int line;
  char json[1000];      /* "file":"...","line":N,"func":"...", */
  size_t len;
  unsigned reported;    /* buffer findings made here (REPORTED_*) */
} site;

/* The findings made once per call site (site.reported bits). */
enum {
  REPORTED_OVERLAP = 1,    /* send and receive buffers overlap (buffers.c) */
  REPORTED_SMALL = 2,      /* a receive side too small (buffers.c) */
  REPORTED_RACE = 4,       /* a buffer a request in flight owns (races.c) */
  REPORTED_CHANGED = 8,    /* a send's buffer changed in flight (races.c) */
  REPORTED_TYPES = 16,     /* two sides of other element types (buffers.c) */
  REPORTED_FREED = 32,     /* an active receive request freed (p2p.c) */
  REPORTED_OVERLAID = 64,  /* a receive type writing a byte twice (races.c) */
  REPORTED_EPOCH = 128     /* RMA epochs of two kinds at once (rma.c) */
};

#define NSITES 1024
/* The table (on_usr1 scans it for a stack's frames). */
extern VQC_MPI_HIDDEN site sites[NSITES];
/* The site of a call when the table is full or a site cannot be told. */
extern VQC_MPI_HIDDEN site overflow_site;
/* site_of's last answer (single-threaded MPI only). */
extern VQC_MPI_HIDDEN uintptr_t site_last_pc;
extern VQC_MPI_HIDDEN const site *site_last;

VQC_MPI_HIDDEN const char *base_name(const char *p);
/* Whether path is an MPI library's (or this one's). */
VQC_MPI_HIDDEN bool mpi_object(const char *path);
/* Whether path is a Fortran binding library of an MPI (whose calls are
 * the program's: vqc_mpi_fortran.c). */
VQC_MPI_HIDDEN bool fortran_bindings(const char *path);
/* site_of past its cache: the lookup, resolving a new site. */
VQC_MPI_HIDDEN const site *site_of_lookup(uintptr_t pc);

/* ---- Fortran bindings (vqc_mpi_fortran.c) */

/* Points the loaded Fortran binding libraries' PMPI_* slots at this
 * library's MPI_* wrappers (once, from the load-time constructor). */
VQC_MPI_HIDDEN void fortran_route(void);

/* Whether site s has no finding of kind bit yet (and now has); the caller
 * holds lock(). */
static inline bool site_first_locked(const site *s, unsigned bit) {
  site *w = (site *)s; /* the table's slots: only `reported` changes */
  const bool first = !(w->reported & bit);
  w->reported |= bit;
  return first;
}

static inline bool site_first(const site *s, unsigned bit) {
  lock();
  const bool first = site_first_locked(s, bit);
  unlock();
  return first;
}

/* The call site of a collective whose wrapper returns to pc: pc's, or the
 * first frame above it outside the MPI libraries. Never NULL. */
static inline const site *site_of(uintptr_t pc) {
  /* The last answer, when one thread calls MPI (a loop calls from one
   * site): no lookup. Under MPI_THREAD_MULTIPLE every call looks up. */
  if (!g.multi && pc == site_last_pc && site_last) return site_last;
  return site_of_lookup(pc);
}

/* ---- datatypes (vqc_mpi_types.c) */

/* An MPI basic type: its names and extents (asked once, in init_basics). */
typedef struct basic {
  MPI_Datatype h;
  const char *dtype, *name;
  bool extents;             /* the four below were told (init_basics) */
  MPI_Aint lb, extent, true_lb, true_extent; /* for the buffer checks */
} basic;

/* What a ledger line says of a datatype. */
typedef struct tinfo {
  const char *dtype;   /* digest name, or "" */
  long long elems;     /* basic elements per item */
  char extra[200];     /* "mpi_type":"...", or "" */
} tinfo;

/* The basic types, nbasics of them (set once by init_basics). */
#define NBASICS 80
extern VQC_MPI_HIDDEN basic basics[NBASICS];
extern VQC_MPI_HIDDEN int nbasics;

VQC_MPI_HIDDEN void init_basics(void);

/* The basic types by handle: an open-addressed table of BASIC_SLOTS (a
 * power of two, over 3 times NBASICS), each slot an index into basics
 * plus one, 0 empty (set once by init_basics, read only after). A derived
 * type's miss used to scan all of them, three times per collective. */
#define BASIC_SLOTS 256
extern VQC_MPI_HIDDEN unsigned char basic_slots[BASIC_SLOTS];

static inline unsigned basic_slot(MPI_Datatype t) {
  uint64_t h = (uint64_t)(uintptr_t)t * 0x9E3779B97F4A7C15ull;
  return (unsigned)(h >> 56) & (BASIC_SLOTS - 1);
}

/* t's entry, or NULL when t is not a basic type (entries never freed). */
static inline const basic *basic_of(MPI_Datatype t) {
  for (unsigned i = basic_slot(t);; i = (i + 1) & (BASIC_SLOTS - 1)) {
    const unsigned k = basic_slots[i];
    if (k == 0) return NULL;
    if (basics[k - 1].h == t) return &basics[k - 1];
  }
}

/* *out for datatype t, whatever it is (vqc_mpi_types.c). */
VQC_MPI_HIDDEN void type_info_full(MPI_Datatype t, tinfo *out);

/* The digest name of the one basic element derived type t is made of,
 * "" when mixed or unnamed (type_info_full's dtype, without the readable
 * form it also builds: per message, vqc_mpi_msgs.c). */
VQC_MPI_HIDDEN const char *type_element(MPI_Datatype t);

/* What a ledger line says of t: a basic type with a digest name here, the
 * rest (decoded) by type_info_full. */
static inline void type_info(MPI_Datatype t, tinfo *out) {
  const basic *b = t == MPI_DATATYPE_NULL ? NULL : basic_of(t);
  if (b && b->dtype[0]) {
    out->dtype = b->dtype;
    out->elems = 1;
    out->extra[0] = '\0';
    return;
  }
  type_info_full(t, out);
}
/* The analysis' name of a reduction (a literal). */
VQC_MPI_HIDDEN const char *redop_name(MPI_Op op);

/* ---- communicators (vqc_mpi_comms.c) */

/* What the interposer keeps on a communicator (its attribute). Freed by
 * info_unref when the last reference goes; world_info never is. */
typedef struct comm_info {
  bool skip;             /* not recorded: of one rank, or its group could
                            not be told */
  bool inter;            /* an intercommunicator: its "group" is both
                            groups (world ranks in ascending order), its
                            collectives are compared by op alone, and a
                            point-to-point peer is a rank of the remote
                            group (remote) */
  int refs;              /* the attribute + pending requests */
  int size;
  uint64_t seq;          /* its collectives so far */
  uint64_t children;     /* communicators made from it so far */
  uint64_t derived;      /* groups made from it so far: RMA windows,
                          * open files (info_derived) */
  char name[200];
  char *group_json;      /* "group":[...],"group_name":"...", or "" */
  size_t group_len;
  int *world;            /* its ranks' world ranks, size of them (owned);
                          * NULL when skipped or for the world itself */
  int *remote;           /* an intercommunicator's remote group's world
                          * ranks, remote_size of them (owned); NULL else */
  int remote_size;
  MPI_Comm shadow;       /* strict mode: its duplicate for the agreement */
  uint64_t msgs_key;     /* its name's hash for vqc_mpi_msgs.c; 0 until
                          * its first message */
} comm_info;

extern VQC_MPI_HIDDEN comm_info world_info;

VQC_MPI_HIDDEN void info_unref(comm_info *ci);
/* The keyval's delete function: gives the attribute's reference back. */
VQC_MPI_HIDDEN int info_delete(MPI_Comm c, int keyval, void *attr,
                               void *extra);
/* A new comm_info with parent's members, named "<parent>/<what><k>" (the
 * k-th so made from parent): an RMA window's group, whose collectives are
 * numbered apart from the communicator's. NULL: none (parent skipped, no
 * memory). The caller holds its one reference. */
VQC_MPI_HIDDEN comm_info *info_derived(comm_info *parent, const char *what);
/* info_of past MPI_COMM_WORLD: the attribute, or a new one. */
VQC_MPI_HIDDEN comm_info *info_lookup(MPI_Comm c);

/* The world rank of point-to-point peer r of ci (a rank of its group, or
 * of an intercommunicator's remote group); -1 when there is no map for it
 * (ci NULL or skipped, r negative or past the group). Async-signal-safe
 * (plain memory reads). */
static inline int peer_world(const comm_info *ci, int r) {
  if (!ci || r < 0) return -1;
  if (ci == &world_info) return r < g.size ? r : -1;
  if (ci->inter) return ci->remote && r < ci->remote_size ? ci->remote[r] : -1;
  return ci->world && r < ci->size ? ci->world[r] : -1;
}

/* c's comm_info (made and attached when first seen); NULL: none. The
 * attribute holds the reference: take one to keep it past the call. */
static inline comm_info *info_of(MPI_Comm c) {
  if (c == MPI_COMM_WORLD) return &world_info;
  return info_lookup(c);
}
/* After a communicator-making call on parent that returned rc: fn (its
 * MPI name) at pc, followed until it is freed (vqc_mpi_leaks.c). */
VQC_MPI_HIDDEN void made(MPI_Comm parent, MPI_Comm *nc, const char *how,
                         int rc, const char *fn, uintptr_t pc);

/* ---- objects never freed (vqc_mpi_leaks.c) */

typedef enum obj_kind {
  OBJ_COMM, OBJ_GROUP, OBJ_TYPE, OBJ_OP, OBJ_REQUEST, OBJ_WIN, OBJ_FILE,
  OBJ_KINDS
} obj_kind;
/* A handle's bytes as the table's key (MPI handles are pointers in Open
 * MPI, ints in MPICH). */
#define OBJ_KEY(h) obj_key(&(h), sizeof(h))
static inline uint64_t obj_key(const void *h, size_t n) {
  uint64_t k = 0;
  memcpy(&k, h, n < sizeof k ? n : sizeof k);
  return k;
}
/* Object `handle` of kind k just made by MPI call fn returning to pc;
 * followed when the call was the program's (not an MPI library's). */
VQC_MPI_HIDDEN void obj_made(obj_kind k, uint64_t handle, const char *fn,
                             uintptr_t pc);
/* Object `handle` of kind k freed (one reference of it). */
VQC_MPI_HIDDEN void obj_freed(obj_kind k, uint64_t handle);
/* At MPI_Finalize: the objects never freed, as the live record's "leaks"
 * line (none when there are none); the table is let go. */
VQC_MPI_HIDDEN void leaks_write(void);

/* ---- the live record (vqc_mpi_record.c) */

/* One collective as recorded (on the caller's stack; a pending
 * non-blocking one copied into the pending table). */
typedef struct call {
  comm_info *ci;         /* NULL: not recorded */
  const site *s;
  uint64_t seq, t_enter;
  const char *op;
  char head[512];        /* {"seq":..,"rank":..,...,"group_size":N, */
  size_t hn;
  char t_enter_s[24];    /* t_enter's digits, for both of its lines */
  size_t tn;             /* 0: entered as a short line (its done is one
                          * too), its head in slot `slot` (hn 0) */
  int slot;
  bool blocking;
  /* A non-blocking collective's send buffer, hashed at its I-call
   * (race_note_coll; compared when a wait or test completes it). */
  const char *fn;        /* its MPI call: "MPI_Ibcast" */
  uintptr_t slo, shi;
  uint64_t shash;
  bool shashed;
} call;

/* JSON string contents of s into out (n bytes, NUL-terminated; cut short
 * rather than overflow). Control bytes become '?'. */
VQC_MPI_HIDDEN void json_esc(char *out, size_t n, const char *s);
/* A whole line (n bytes, its newline included) appended to the record. */
VQC_MPI_HIDDEN void live_write(const char *s, size_t n);
/* From a signal handler: pwrite only. */
VQC_MPI_HIDDEN void live_write_signal(const char *s, size_t n);
VQC_MPI_HIDDEN void rec_open(void);
VQC_MPI_HIDDEN void rec_close(void);
/* A line could not be written: said once on stderr. Async-signal-safe. */
VQC_MPI_HIDDEN void rec_lost(int err);
/* Something the checks needed is missing: a record of this rank's other
 * than the live one (rank-<r>.rma.jsonl, rank-<r>.p2p.jsonl) could not be
 * made or written (a full disk: status "VQC_EIO"), or the rank started
 * processes that are not checked ("VQC_EUNSUPPORTED"). The first such
 * reason (printf format, "its RMA accesses ...") goes into the rank's end
 * line, so the verdict is incomplete, never green. */
VQC_MPI_HIDDEN void record_incomplete(const char *status, const char *fmt,
                                      ...)
    __attribute__((format(printf, 2, 3)));
/* The first reason given to record_incomplete, and its status; NULL when
 * there was none. */
VQC_MPI_HIDDEN const char *record_incomplete_why(const char **status);
/* Call c's line at t_exit in state ("entered", "done", "failed"). */
VQC_MPI_HIDDEN void call_line(const call *c, uint64_t t_exit,
                              const char *state, const char *status);
/* Blocking call c's line as it returns rc at t: done (a short line when
 * it was entered as one) or failed. */
VQC_MPI_HIDDEN void call_end_line(const call *c, uint64_t t, int rc);
/* comm_info ci is being freed: no kept head may stand for a later call
 * (a new one can have its address). */
VQC_MPI_HIDDEN void rec_forget_comm(const comm_info *ci);
/* How many heads of full entered lines are kept ("heads" of the start
 * line: vqc_mpi_record.c, short lines). */
VQC_MPI_HIDDEN int rec_heads(void);
/* Records a collective as entered (c->ci NULL: not recorded); a blocking
 * one is, in strict mode, agreed on before it runs. */
VQC_MPI_HIDDEN void record(call *c, bool blocking, MPI_Comm comm,
                           const char *op, const char *redop,
                           MPI_Datatype dt, long long count, int root,
                           uintptr_t pc);
/* record() with the type already described (*tp). */
VQC_MPI_HIDDEN void record_t(call *c, bool blocking, MPI_Comm comm,
                             const char *op, const char *redop,
                             const tinfo *tp, long long count, int root,
                             uintptr_t pc);
/* record_t() on a comm_info without a communicator of its own (an RMA
 * window's group, vqc_mpi_rma.c). */
VQC_MPI_HIDDEN void record_ci(call *c, bool blocking, comm_info *ci,
                              const char *op, const char *redop,
                              const tinfo *tp, long long count, int root,
                              uintptr_t pc);

/* A collective's name without the 'i' of a non-blocking one ("igather":
 * "gather"). Non-blocking collectives are recorded under their own names:
 * MPI never matches one with a blocking call (MPI 4.1, 6.12), so a rank's
 * MPI_Igather against another's MPI_Gather is a mismatch of the op. */
static inline const char *op_base(const call *c) {
  return c->blocking ? c->op : c->op + 1;
}

static inline void begin(call *c, MPI_Comm comm, const char *op,
                         const char *redop, MPI_Datatype dt, long long count,
                         int root, uintptr_t pc) {
  record(c, true, comm, op, redop, dt, count, root, pc);
}

/* A non-blocking collective: recorded at its I-call, never agreed on
 * there (the call must not block: strict mode checks blocking ones). */
static inline void begin_nb(call *c, MPI_Comm comm, const char *op,
                            const char *redop, MPI_Datatype dt,
                            long long count, int root, uintptr_t pc) {
  record(c, false, comm, op, redop, dt, count, root, pc);
}

static inline void end(call *c, int rc) {
  if (!c->ci) return;
  /* one clock read: the line's and the beat's */
  const uint64_t t = now_coarse_ns();
  call_end_line(c, t, rc);
  beat_at(HB_RUNNING, c->seq, "", t);
}

/* ---- strict mode (vqc_mpi_strict.c) */

/* Agrees with the other members on call c before it runs; stops the job
 * when they disagree. */
VQC_MPI_HIDDEN void agree(const call *c, const char *dtype, long long count,
                          int root, const char *redop);

/* ---- buffers (vqc_mpi_buffers.c) */

/* The bytes [*lo, *hi) that n items of t at buf span (from the type's
 * true lower bound to the true upper bound of the last item); false when
 * there is nothing to check (NULL, MPI_IN_PLACE, MPI_BOTTOM, n <= 0). */
VQC_MPI_HIDDEN bool buf_span(const void *buf, long long n, MPI_Datatype t,
                             uintptr_t *lo, uintptr_t *hi);
/* How many peers a collective on c has, the length of its per-peer
 * arrays (counts, displacements, types): c's size, or on an
 * intercommunicator the remote group's. */
static inline int peer_count(MPI_Comm c) {
  int inter = 0, n = 0;
  if (PMPI_Comm_test_inter(c, &inter) == MPI_SUCCESS && inter)
    PMPI_Comm_remote_size(c, &n);
  else
    PMPI_Comm_size(c, &n);
  return n;
}
/* Items spanned by a v form's counts and displacements. */
VQC_MPI_HIDDEN long long v_items(const int *counts, const int *displs,
                                 MPI_Comm c);
VQC_MPI_HIDDEN void check_overlap(const call *c, const char *fn,
                                  const void *sb, long long sn,
                                  MPI_Datatype st, const void *rb,
                                  long long rn, MPI_Datatype rt);
VQC_MPI_HIDDEN void check_fits(const call *c, const char *fn, int sc,
                               MPI_Datatype st, int rc, MPI_Datatype rt);

/* ---- requests: pending collectives and completion (vqc_mpi_wait.c) */

/* Copies of the requests a wait or test is given (they become
 * MPI_REQUEST_NULL when done). */
typedef struct req_copy {
  MPI_Request small[16];
  MPI_Request *r;        /* small, or n of them (owned): free_reqs */
  /* Statuses in place of the program's MPI_STATUS(ES)_IGNORE, so that a
   * completed receive's source and tag can be counted (vqc_mpi_msgs.c). */
  MPI_Status st_small[16];
  MPI_Status *st;        /* st_small, or n of them (owned); NULL: none */
} req_copy;

/* After a non-blocking collective's I-call that returned rc with *req. */
VQC_MPI_HIDDEN void posted(call *c, int rc, const MPI_Request *req);
/* Takes the last pending collective out into *out; false when none. */
VQC_MPI_HIDDEN bool pending_pop(call *out);

/* ---- signals (vqc_mpi_signals.c) */

/* Async-signal-safe formatting: v's digits at b (returns how many), and s
 * appended at b[k] within cap (returns the new k). */
VQC_MPI_HIDDEN size_t fmt_int(char *b, long long v);
VQC_MPI_HIDDEN size_t cat(char *b, size_t k, size_t cap, const char *s);
/* The handlers for SIGUSR1, the notes and the faults. */
VQC_MPI_HIDDEN void install_signals(void);
/* SIGUSR1's stack dump alone (at load, before MPI_Init). */
VQC_MPI_HIDDEN void install_stack_signal(void);

/* ---- MPI errors (vqc_mpi_errors.c) */

VQC_MPI_HIDDEN void install_error_handler(void);

/* ---- point-to-point (vqc_mpi_p2p.c) */

/* Point-to-point requests in flight, by handle, under lock(); each entry
 * holds a reference on its communicator's comm_info. */
extern VQC_MPI_HIDDEN vqc_reqs p2p_reqs;

/* The blocking point-to-point call this rank is in, as text ("in MPI_Recv
 * from rank 0 (tag 5) at prog.c:12 (main)"); "" when none. */
VQC_MPI_HIDDEN void p2p_where(char *b, size_t n);
/* At SIGUSR1: the point-to-point call this rank is in. */
VQC_MPI_HIDDEN void p2p_wait_line(void);
VQC_MPI_HIDDEN void p2p_enter_wait(const char *name, const MPI_Request *reqs,
                                   int n, uintptr_t pc);
/* Forgets request r, freed by MPI_Request_free (returning to pc), if it is
 * one (a receive still active is a finding); p2p_cancelled: r was
 * cancelled (a send's message may never arrive: the counts are
 * incomplete). */
VQC_MPI_HIDDEN void p2p_forget(MPI_Request r, uintptr_t pc);
VQC_MPI_HIDDEN void p2p_cancelled(MPI_Request r);
/* After a wait or test that returned rc on reqs[0..n), which were
 * was[0..n) before it: those MPI set to MPI_REQUEST_NULL completed (a
 * non-blocking request is freed when it completes), whatever the call's
 * form; so did the started persistent requests it completed, which MPI
 * leaves as they are: every one when all (MPI_Wait, MPI_Waitall, and
 * MPI_Test, MPI_Testall that set their flag), else those of idx[0..nidx)
 * (the any and some forms). A completed receive is counted with its
 * status: st[i] for request i when idx is NULL, else st[j] for request
 * idx[j] (j < nidx); st NULL: no status. */
VQC_MPI_HIDDEN void p2p_done(const req_copy *was, const MPI_Request *reqs,
                             int n, int rc, const MPI_Status *st,
                             const int *idx, int nidx, bool all,
                             uintptr_t pc);

/* ---- RMA windows (vqc_mpi_rma.c) */

/* MPI_Finalize: the windows never freed let go, an operation of theirs
 * never completed told as a finding. */
VQC_MPI_HIDDEN void rma_finalize(void);

/* One RMA operation of this rank, from its call until a synchronisation
 * completes it (vqc_mpi_rma.c keeps them per window). */
typedef struct rma_op {
  const char *call;      /* "MPI_Put" */
  const site *s;
  uint64_t id;           /* this rank's k-th operation (from 1) */
  int target;            /* the target's rank in the window's group */
  char access;           /* at the target: 'w' MPI_Put, 'r' MPI_Get, 'a' an
                            accumulate (atomic against the others) */
  long long disp;        /* target_disp, in the target's disp units */
  long long off, bytes;  /* the target type's true lower bound and the
                            bytes it covers; bytes 0: a type with holes
                            (or none): not recorded */
  uintptr_t rlo, rhi;    /* origin bytes it reads (a Put's, an
                            accumulate's operand; rhi 0: none) ... */
  uint64_t rhash;        /* ... hashed when issued (rhashed) */
  bool rhashed;
  uintptr_t wlo, whi;    /* origin bytes it writes (a Get's, a result
                            buffer; whi 0: none) */
  uint64_t t0;           /* issued (now_ns) */
  uint64_t epoch;        /* the window's fences returned before it */
  bool excl;             /* under this rank's exclusive lock on target */
  bool unrecorded;       /* its accesses not recorded: an MPI_Rget, whose
                            MPI_Wait ends its read before any unlock */
} rma_op;

/* ---- the record of RMA accesses (vqc_mpi_rma_record.c) */

/* A window named name made with this rank's disp_unit. */
VQC_MPI_HIDDEN void rma_record_window(const char *name, int disp_unit);
/* One access of operation o on window win, completed at t1 (by a fence:
 * fence): bytes [disp*unit + off, + bytes) of world rank target's window
 * memory (unit 0: the target's disp_unit), access 'w', 'r' or 'a'. */
VQC_MPI_HIDDEN void rma_record_access(const char *win, const rma_op *o,
                                      char access, int target,
                                      long long disp, int unit,
                                      long long off, long long bytes,
                                      bool fence, uint64_t t1);
/* The lines kept so far written out (at each synchronisation). */
VQC_MPI_HIDDEN void rma_record_flush(void);
/* MPI_Finalize: the rest written, the file closed. */
VQC_MPI_HIDDEN void rma_record_close(void);

/* ---- MPI-IO (vqc_mpi_io.c) */

/* MPI_Finalize: the files never closed let go. */
VQC_MPI_HIDDEN void io_finalize(void);

/* ---- persistent requests (vqc_mpi_persist.c) */

/* Whether r is a started persistent request in flight (in p2p_reqs). */
VQC_MPI_HIDDEN bool p2p_started_persistent(MPI_Request r);
/* MPI_Request_free: r, if a persistent request, is no longer kept. */
VQC_MPI_HIDDEN void persist_freed(MPI_Request r);
/* MPI_Finalize: every persistent request let go. */
VQC_MPI_HIDDEN void persist_clear(void);

/* ---- buffers of requests in flight (vqc_mpi_races.c) */

/* The bytes count items of dt at buf cover, [*lo, *hi), when they are all
 * the span's bytes (a basic type or a contiguous derived one); false for
 * a type with holes, or no buffer. */
VQC_MPI_HIDDEN bool solid_span(const void *buf, int count, MPI_Datatype dt,
                               uintptr_t *lo, uintptr_t *hi);
/* The hash of the bytes [lo, hi) (sampled past 64 KiB); false when they
 * cannot be read. */
VQC_MPI_HIDDEN bool hash_span(uintptr_t lo, uintptr_t hi, uint64_t *out);
/* A lost_inplace finding of this rank at s on the live record: message
 * msg, detail the JSON members of its "detail" object. */
VQC_MPI_HIDDEN void race_finding(const site *s, const char *msg,
                                 const char *detail);
/* "file:line (func)" of s into b (n bytes). */
VQC_MPI_HIDDEN void site_at(const site *s, char *b, size_t n);

/* Sets v's buffer span (and, for a send, the hash of its bytes) for the
 * request of an I-call on count items of dt at buf. */
VQC_MPI_HIDDEN void race_note(vqc_p2p_req *v, const void *buf, int count,
                              MPI_Datatype dt);
/* A call (fn at s) about to use count items of dt at buf, a receive
 * (writes) or a send (reads): a finding when those bytes are also a
 * request's in flight and one of the two writes them. skip: the call's
 * own request (MPI_REQUEST_NULL for a blocking call). */
VQC_MPI_HIDDEN void race_check(const char *fn, const void *buf, int count,
                               MPI_Datatype dt, bool recv, const site *s,
                               MPI_Request skip);
/* A receive (fn at s) into datatype dt: a finding when dt's elements
 * overlap (a receive type must not write a byte twice). */
VQC_MPI_HIDDEN void race_recv_type(const char *fn, MPI_Datatype dt,
                                   const site *s);
/* Send request q completed (by a wait or test whose wrapper returns to
 * pc): a finding when its buffer changed since its I-call. */
VQC_MPI_HIDDEN void race_completed(const vqc_p2p_req *q, uintptr_t pc);
/* A persistent send's buffer (its span from race_note) hashed again as an
 * MPI_Start leaves it. */
VQC_MPI_HIDDEN void race_restart(vqc_p2p_req *v);
/* A non-blocking collective's send side (count items of dt at buf) hashed
 * at its I-call into c; compared by race_coll_completed when a wait or
 * test at pc completes it: a buffer changed in flight is a finding. */
VQC_MPI_HIDDEN void race_note_coll(call *c, const char *fn, const void *buf,
                                   long long count, MPI_Datatype dt);
VQC_MPI_HIDDEN void race_coll_completed(const call *c, uintptr_t pc);
VQC_MPI_HIDDEN int p2p_leave(int rc);

/* ---- messages counted per channel (vqc_mpi_msgs.c) */

/* What a message's type says for the comparison: its element's name (the
 * ledger's: "float64", ...; "" when not compared: MPI_BYTE, MPI_PACKED,
 * mixed or unnamed types) and the basic type's MPI name (NULL: derived). */
typedef struct msg_sig {
  const char *dtype;
  const char *name;
} msg_sig;

VQC_MPI_HIDDEN msg_sig msg_sig_of(MPI_Datatype dt);
/* A message posted to dest (a rank of comm) with tag. */
VQC_MPI_HIDDEN void msg_sent(MPI_Comm comm, int dest, int tag,
                             MPI_Datatype dt, const char *fn,
                             const site *s);
/* msg_sent with the communicator's comm_info and the type's signature
 * (a persistent send's, taken when it was made). */
VQC_MPI_HIDDEN void msg_sent_on(comm_info *ci, int dest, int tag,
                                msg_sig sig, const char *fn,
                                const site *s);
/* A receive on ci completed with *st (its source and tag). */
VQC_MPI_HIDDEN void msg_received(comm_info *ci, msg_sig sig,
                                 const MPI_Status *st, const char *fn,
                                 const site *s);
/* This rank's counts are incomplete from here (why: a literal). */
VQC_MPI_HIDDEN void msgs_uncounted(const char *why);
/* MPI_Finalize: a receive request never completed (peer a rank of ci or
 * MPI_ANY_SOURCE, tag or MPI_ANY_TAG): its own finding already; the
 * analysis does not also call the message it was for never received. */
VQC_MPI_HIDDEN void msgs_pending_recv(const comm_info *ci, int peer, int tag);
/* MPI_Finalize: rank-<r>.p2p.jsonl. */
VQC_MPI_HIDDEN void msgs_write(void);

#endif /* VQC_MPI_INTERNAL_H */
