/* vqc_mpi_leaks.c: MPI objects the program made and never freed before
 * MPI_Finalize: communicators, groups, derived datatypes, reduction
 * operations, persistent requests, RMA windows and MPI-IO files.
 *
 * MPI keeps each such object (a context id, a group's rank table, a type's
 * description) until the program frees it: one made in a loop and never
 * freed runs MPI out of them after some thousands of iterations ("Too
 * many communicators"), far from the line that made them. Each object is
 * followed from the call that made it (its handle, that call's name and
 * site) to the call that frees it. At MPI_Finalize those still alive are
 * written to the live record as one "leaks" line, counted by the site and
 * call that made them (the analysis, harness/run/mpi_leaks.c, tells them
 * as warnings: bugs.md has no finding kind for a leak).
 *
 * What is followed: only objects the program made (not an MPI library's
 * own, programs_call) through a call wrapped here, while recording
 * (g.on): MPI_Comm_dup, _split, _create, the topology calls and
 * MPI_Intercomm_create/_merge (freed when MPI deletes their attribute:
 * MPI_Comm_free or MPI_Comm_disconnect); MPI_Comm_group and the group
 * constructors (MPI_Group_free); the derived datatype constructors
 * (MPI_Type_free); MPI_Op_create (MPI_Op_free); the persistent requests'
 * _init calls (MPI_Request_free); the window-making calls (MPI_Win_free,
 * vqc_mpi_rma.c); MPI_File_open (MPI_File_close, vqc_mpi_io.c). A handle
 * MPI returns more than once while alive (MPI_Comm_group of one
 * communicator, twice) is counted as often as it was returned, as MPI
 * counts its references. Predefined handles
 * (MPI_GROUP_EMPTY) are not objects of the program's. A free of a handle
 * not followed is ignored. Past TABLE_MAX live objects, the later ones are
 * counted as not followed and said so in the line, never told as leaks.
 *
 * The table: open addressing on (kind, handle), under its own lock
 * (objects are made and freed outside the hot path). */
#include "vqc_mpi_internal.h"

typedef struct obj_slot {
  uint64_t key;       /* the handle's bytes */
  uint32_t kind;      /* obj_kind + 1; 0: empty; TOMB: freed */
  uint32_t n;         /* times MPI returned it, less the frees */
  const site *s;      /* where it was made */
  const char *call;   /* by what: "MPI_Comm_dup" */
} obj_slot;
#define TOMB 0xffffffffu
#define TABLE_MIN 256u
#define TABLE_MAX ((size_t)1 << 21) /* slots: 64 MiB */

static struct {
  obj_slot *slot;
  size_t cap, live, used;             /* used: live + tombstones */
  unsigned long long not_followed;    /* made past TABLE_MAX */
  /* Slots alive per kind (written under objs_lock, read without it): a
   * free of a kind with none alive returns at once, so a program's
   * MPI_Request_free of every MPI_Isend request takes no lock. */
  size_t live_of[OBJ_KINDS];
} objs;
static pthread_mutex_t objs_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const kind_name[OBJ_KINDS] = {
    "communicator", "group", "datatype", "reduction operation",
    "persistent request", "window", "file"};
static const char *const kind_plural[OBJ_KINDS] = {
    "communicators", "groups", "datatypes", "reduction operations",
    "persistent requests", "windows", "files"};
static const char *const kind_free[OBJ_KINDS] = {
    "MPI_Comm_free", "MPI_Group_free", "MPI_Type_free", "MPI_Op_free",
    "MPI_Request_free", "MPI_Win_free", "MPI_File_close"};

static size_t slot_of(uint64_t key, uint32_t kind, size_t cap) {
  uint64_t h = key ^ ((uint64_t)kind * 0x9e3779b97f4a7c15u);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdu;
  h ^= h >> 33;
  return (size_t)h & (cap - 1);
}

/* The table rebuilt with room for one more live object (load <= 3/8);
 * false: past TABLE_MAX, or no memory. */
static bool objs_room(void) {
  if (objs.cap && (objs.used + 1) * 4 <= objs.cap * 3) return true;
  size_t cap = TABLE_MIN;
  while ((objs.live + 1) * 8 > cap * 3) cap *= 2;
  if (cap > TABLE_MAX) return false;
  obj_slot *fresh = calloc(cap, sizeof *fresh);
  if (!fresh) return false;
  for (size_t i = 0; i < objs.cap; i++) {
    const obj_slot *o = &objs.slot[i];
    if (o->kind == 0 || o->kind == TOMB) continue;
    size_t j = slot_of(o->key, o->kind, cap);
    while (fresh[j].kind) j = (j + 1) & (cap - 1);
    fresh[j] = *o;
  }
  free(objs.slot);
  objs.slot = fresh;
  objs.cap = cap;
  objs.used = objs.live;
  return true;
}

/* The live slot of (key, kind); NULL: none. */
static obj_slot *objs_find(uint64_t key, uint32_t kind) {
  if (!objs.cap) return NULL;
  for (size_t j = slot_of(key, kind, objs.cap);; j = (j + 1) & (objs.cap - 1)) {
    obj_slot *o = &objs.slot[j];
    if (o->kind == 0) return NULL;
    if (o->kind == kind && o->key == key) return o;
  }
}

/* Whether a call returning to pc is the program's: an MPI library's own
 * calls (an I/O component building its file views) make and free objects
 * of their own, which are not the program's to free; a Fortran binding's
 * calls are the program's. */
static bool programs_call(uintptr_t pc) {
  Dl_info di;
  if (dladdr((void *)(pc - 1), &di) == 0 || !di.dli_fname) return true;
  return !mpi_object(di.dli_fname) || fortran_bindings(di.dli_fname);
}

/* (vqc_mpi_internal.h) */
void obj_made(obj_kind k, uint64_t handle, const char *fn, uintptr_t pc) {
  if (!g.on || k >= OBJ_KINDS || !programs_call(pc)) return;
  const site *s = site_of(pc);
  const uint32_t kind = (uint32_t)k + 1;
  pthread_mutex_lock(&objs_lock);
  obj_slot *o = objs_find(handle, kind);
  if (o) {
    o->n++; /* another reference to one object (MPI_Comm_group) */
  } else if (!objs_room()) {
    objs.not_followed++;
  } else {
    size_t j = slot_of(handle, kind, objs.cap);
    while (objs.slot[j].kind && objs.slot[j].kind != TOMB)
      j = (j + 1) & (objs.cap - 1);
    if (objs.slot[j].kind == 0) objs.used++;
    objs.slot[j] = (obj_slot){handle, kind, 1, s, fn};
    objs.live++;
    __atomic_store_n(&objs.live_of[k], objs.live_of[k] + 1,
                     __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&objs_lock);
}

/* (vqc_mpi_internal.h) */
void obj_freed(obj_kind k, uint64_t handle) {
  /* (a handle being freed is not being made by another thread at once) */
  if (k >= OBJ_KINDS ||
      __atomic_load_n(&objs.live_of[k], __ATOMIC_RELAXED) == 0)
    return;
  pthread_mutex_lock(&objs_lock);
  obj_slot *o = objs_find(handle, (uint32_t)k + 1);
  if (o && --o->n == 0) {
    o->kind = TOMB;
    objs.live--;
    __atomic_store_n(&objs.live_of[k], objs.live_of[k] - 1,
                     __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&objs_lock);
}

/* The objects still alive, counted by kind, call and site. */
typedef struct leak_group {
  uint32_t kind;
  const site *s;
  const char *call;
  unsigned long long count;
} leak_group;
#define GROUPS_MAX 64  /* kept apart; the rest counted together */
#define GROUPS_WRITTEN 16

/* Most objects first; ties in a fixed order (kind, call, site), so the
 * line reads the same from run to run. */
static int by_count(const void *a, const void *b) {
  const leak_group *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? 1 : -1;
  if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
  const int c = strcmp(x->call, y->call);
  if (c) return c;
  if (x->s->line != y->s->line) return x->s->line < y->s->line ? -1 : 1;
  return strcmp(x->s->file, y->s->file);
}

/* (vqc_mpi_internal.h) */
void leaks_write(void) {
  leak_group grp[GROUPS_MAX];
  int ngrp = 0;
  unsigned long long rest = 0, not_followed;
  pthread_mutex_lock(&objs_lock);
  for (size_t i = 0; i < objs.cap; i++) {
    const obj_slot *o = &objs.slot[i];
    if (o->kind == 0 || o->kind == TOMB) continue;
    int k = 0;
    while (k < ngrp && !(grp[k].kind == o->kind && grp[k].s == o->s &&
                         grp[k].call == o->call))
      k++;
    if (k < ngrp) {
      grp[k].count += o->n;
    } else if (ngrp < GROUPS_MAX) {
      grp[ngrp++] = (leak_group){o->kind, o->s, o->call, o->n};
    } else {
      rest += o->n;
    }
  }
  not_followed = objs.not_followed;
  free(objs.slot);
  objs.slot = NULL;
  objs.cap = objs.live = objs.used = 0;
  memset(objs.live_of, 0, sizeof objs.live_of);
  pthread_mutex_unlock(&objs_lock);
  if (ngrp == 0 && not_followed == 0) return;
  qsort(grp, (size_t)ngrp, sizeof grp[0], by_count);
  for (int k = GROUPS_WRITTEN; k < ngrp; k++) rest += grp[k].count;
  const size_t cap = 4096 + (size_t)GROUPS_WRITTEN * 1300;
  char *b = malloc(cap);
  if (!b) return;
  size_t n = (size_t)snprintf(b, cap, "{\"event\":\"leaks\",\"objects\":[");
  for (int k = 0; k < ngrp && k < GROUPS_WRITTEN && n < cap; k++) {
    const leak_group *x = &grp[k];
    const int kind = (int)x->kind - 1;
    /* site json: "file":"..","line":N,"func":"..", (its comma dropped) */
    const int sl = x->s->len > 0 ? (int)x->s->len - 1 : 0;
    n += (size_t)snprintf(b + n, cap - n,
                          "%s{\"object\":\"%s\",\"objects\":\"%s\","
                          "\"free_with\":\"%s\",\"count\":%llu,"
                          "\"call\":\"%s\",\"site\":{%.*s}}",
                          k ? "," : "", kind_name[kind], kind_plural[kind],
                          kind_free[kind], x->count, x->call, sl,
                          x->s->json);
  }
  if (n < cap)
    n += (size_t)snprintf(b + n, cap - n, "],\"more_count\":%llu,"
                          "\"not_followed\":%llu}\n", rest, not_followed);
  if (n < cap) live_write(b, n);
  free(b);
}

/* After call fn returned rc with *h, an object of kind k made at pc. */
#define FOLLOW(k, rc, h, fn, pc)                                  \
  do {                                                            \
    if ((rc) == MPI_SUCCESS && (h))                               \
      obj_made((k), OBJ_KEY(*(h)), (fn), (pc));                   \
  } while (0)

/* ---- derived datatypes (freed by MPI_Type_free, vqc_mpi_types.c) */

int MPI_Type_contiguous(int count, MPI_Datatype oldtype,
                        MPI_Datatype *newtype) {
  const int rc = PMPI_Type_contiguous(count, oldtype, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_contiguous", RA);
  return rc;
}

int MPI_Type_vector(int count, int blocklength, int stride,
                    MPI_Datatype oldtype, MPI_Datatype *newtype) {
  const int rc =
      PMPI_Type_vector(count, blocklength, stride, oldtype, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_vector", RA);
  return rc;
}

int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride,
                            MPI_Datatype oldtype, MPI_Datatype *newtype) {
  const int rc =
      PMPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_create_hvector", RA);
  return rc;
}

int MPI_Type_indexed(int count, const int array_of_blocklengths[],
                     const int array_of_displacements[], MPI_Datatype oldtype,
                     MPI_Datatype *newtype) {
  const int rc = PMPI_Type_indexed(count, array_of_blocklengths,
                                   array_of_displacements, oldtype, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_indexed", RA);
  return rc;
}

int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[],
                             const MPI_Aint array_of_displacements[],
                             MPI_Datatype oldtype, MPI_Datatype *newtype) {
  const int rc = PMPI_Type_create_hindexed(
      count, array_of_blocklengths, array_of_displacements, oldtype, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_create_hindexed", RA);
  return rc;
}

int MPI_Type_create_indexed_block(int count, int blocklength,
                                  const int array_of_displacements[],
                                  MPI_Datatype oldtype,
                                  MPI_Datatype *newtype) {
  const int rc = PMPI_Type_create_indexed_block(
      count, blocklength, array_of_displacements, oldtype, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_create_indexed_block", RA);
  return rc;
}

int MPI_Type_create_hindexed_block(int count, int blocklength,
                                   const MPI_Aint array_of_displacements[],
                                   MPI_Datatype oldtype,
                                   MPI_Datatype *newtype) {
  const int rc = PMPI_Type_create_hindexed_block(
      count, blocklength, array_of_displacements, oldtype, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_create_hindexed_block", RA);
  return rc;
}

int MPI_Type_create_struct(int count, const int array_of_blocklengths[],
                           const MPI_Aint array_of_displacements[],
                           const MPI_Datatype array_of_types[],
                           MPI_Datatype *newtype) {
  const int rc =
      PMPI_Type_create_struct(count, array_of_blocklengths,
                              array_of_displacements, array_of_types, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_create_struct", RA);
  return rc;
}

int MPI_Type_create_subarray(int ndims, const int array_of_sizes[],
                             const int array_of_subsizes[],
                             const int array_of_starts[], int order,
                             MPI_Datatype oldtype, MPI_Datatype *newtype) {
  const int rc =
      PMPI_Type_create_subarray(ndims, array_of_sizes, array_of_subsizes,
                                array_of_starts, order, oldtype, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_create_subarray", RA);
  return rc;
}

int MPI_Type_create_darray(int size, int rank, int ndims,
                           const int array_of_gsizes[],
                           const int array_of_distribs[],
                           const int array_of_dargs[],
                           const int array_of_psizes[], int order,
                           MPI_Datatype oldtype, MPI_Datatype *newtype) {
  const int rc = PMPI_Type_create_darray(
      size, rank, ndims, array_of_gsizes, array_of_distribs, array_of_dargs,
      array_of_psizes, order, oldtype, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_create_darray", RA);
  return rc;
}

int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb,
                            MPI_Aint extent, MPI_Datatype *newtype) {
  const int rc = PMPI_Type_create_resized(oldtype, lb, extent, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_create_resized", RA);
  return rc;
}

int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype) {
  const int rc = PMPI_Type_dup(oldtype, newtype);
  FOLLOW(OBJ_TYPE, rc, newtype, "MPI_Type_dup", RA);
  return rc;
}

/* ---- groups */

/* A group made at pc, unless it is MPI_GROUP_EMPTY (predefined: MPI may
 * answer it for any empty result, and it is nobody's to free). */
static void group_made(int rc, const MPI_Group *grp, const char *fn,
                       uintptr_t pc) {
  if (rc == MPI_SUCCESS && grp && *grp != MPI_GROUP_EMPTY &&
      *grp != MPI_GROUP_NULL)
    obj_made(OBJ_GROUP, OBJ_KEY(*grp), fn, pc);
}

int MPI_Comm_group(MPI_Comm comm, MPI_Group *group) {
  const int rc = PMPI_Comm_group(comm, group);
  group_made(rc, group, "MPI_Comm_group", RA);
  return rc;
}

int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group *group) {
  const int rc = PMPI_Comm_remote_group(comm, group);
  group_made(rc, group, "MPI_Comm_remote_group", RA);
  return rc;
}

int MPI_Win_get_group(MPI_Win win, MPI_Group *group) {
  const int rc = PMPI_Win_get_group(win, group);
  group_made(rc, group, "MPI_Win_get_group", RA);
  return rc;
}

int MPI_File_get_group(MPI_File fh, MPI_Group *group) {
  const int rc = PMPI_File_get_group(fh, group);
  group_made(rc, group, "MPI_File_get_group", RA);
  return rc;
}

int MPI_Group_incl(MPI_Group group, int n, const int ranks[],
                   MPI_Group *newgroup) {
  const int rc = PMPI_Group_incl(group, n, ranks, newgroup);
  group_made(rc, newgroup, "MPI_Group_incl", RA);
  return rc;
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[],
                   MPI_Group *newgroup) {
  const int rc = PMPI_Group_excl(group, n, ranks, newgroup);
  group_made(rc, newgroup, "MPI_Group_excl", RA);
  return rc;
}

int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3],
                         MPI_Group *newgroup) {
  const int rc = PMPI_Group_range_incl(group, n, ranges, newgroup);
  group_made(rc, newgroup, "MPI_Group_range_incl", RA);
  return rc;
}

int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3],
                         MPI_Group *newgroup) {
  const int rc = PMPI_Group_range_excl(group, n, ranges, newgroup);
  group_made(rc, newgroup, "MPI_Group_range_excl", RA);
  return rc;
}

int MPI_Group_union(MPI_Group group1, MPI_Group group2,
                    MPI_Group *newgroup) {
  const int rc = PMPI_Group_union(group1, group2, newgroup);
  group_made(rc, newgroup, "MPI_Group_union", RA);
  return rc;
}

int MPI_Group_intersection(MPI_Group group1, MPI_Group group2,
                           MPI_Group *newgroup) {
  const int rc = PMPI_Group_intersection(group1, group2, newgroup);
  group_made(rc, newgroup, "MPI_Group_intersection", RA);
  return rc;
}

int MPI_Group_difference(MPI_Group group1, MPI_Group group2,
                         MPI_Group *newgroup) {
  const int rc = PMPI_Group_difference(group1, group2, newgroup);
  group_made(rc, newgroup, "MPI_Group_difference", RA);
  return rc;
}

int MPI_Group_free(MPI_Group *group) {
  const MPI_Group h = group ? *group : MPI_GROUP_NULL;
  const int rc = PMPI_Group_free(group);
  if (rc == MPI_SUCCESS && h != MPI_GROUP_NULL)
    obj_freed(OBJ_GROUP, OBJ_KEY(h));
  return rc;
}

/* ---- reduction operations */

int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op) {
  const int rc = PMPI_Op_create(user_fn, commute, op);
  FOLLOW(OBJ_OP, rc, op, "MPI_Op_create", RA);
  return rc;
}

int MPI_Op_free(MPI_Op *op) {
  const MPI_Op h = op ? *op : MPI_OP_NULL;
  const int rc = PMPI_Op_free(op);
  if (rc == MPI_SUCCESS && h != MPI_OP_NULL) obj_freed(OBJ_OP, OBJ_KEY(h));
  return rc;
}
