/* vqc_mpi_comms.c: communicators: the attribute the interposer keeps on
 * each (its name, group and counters), and the MPI calls that make one
 * (collectives over the parent, recorded as such). */
#include "vqc_mpi_internal.h"

/* ---- communicators */

comm_info world_info = {.refs = 1, .name = "world",
                        .group_json = (char *)"",
                        .shadow = MPI_COMM_NULL};

void info_unref(comm_info *ci) {
  if (!ci || ci == &world_info) return;
  if (__atomic_sub_fetch(&ci->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    if (ci->shadow != MPI_COMM_NULL) PMPI_Comm_free(&ci->shadow);
    rec_forget_comm(ci);
    free(ci->world);
    free(ci->remote);
    free(ci->group_json);
    free(ci);
  }
}

int info_delete(MPI_Comm c, int keyval, void *attr, void *extra) {
  /* The handle goes (MPI may give it to the next communicator) even when
   * the attribute lives on (a window or file made from it holds it): the
   * record's last-call cache, which knows the call by its handle, and the
   * kept heads let it go now. */
  rec_forget_comm(attr);
  obj_freed(OBJ_COMM, OBJ_KEY(c));
  info_unref(attr);
  return MPI_SUCCESS;
}

/* Communicators met without their making seen: a hash of their ranks and
 * how many of that hash came before. */
typedef struct anon { uint32_t hash; unsigned n; } anon;
static anon anons[256];
static int nanons;

/* ci->group_json for world ranks out[0..n) and ci->name; ci->skip when
 * there is no memory for it. */
static void set_group(comm_info *ci, const int *out, int n) {
  char esc[sizeof ci->name * 2];
  json_esc(esc, sizeof esc, ci->name);
  const size_t cap = (size_t)n * 12 + strlen(esc) + 48;
  ci->group_json = malloc(cap);
  if (!ci->group_json) {
    ci->skip = true;
    return;
  }
  size_t k = (size_t)snprintf(ci->group_json, cap, "\"group\":[");
  for (int i = 0; i < n; i++)
    k += (size_t)snprintf(ci->group_json + k, cap - k, "%s%d",
                          i ? "," : "", out[i]);
  k += (size_t)snprintf(ci->group_json + k, cap - k,
                        "],\"group_name\":\"%s\",", esc);
  ci->group_len = k;
}

/* The world ranks of group grp's n ranks, in its rank order (malloc'd);
 * NULL when a rank is not of this world (a spawned one) or no memory. */
static int *world_ranks(MPI_Group grp, int n) {
  int *in = calloc((size_t)(n > 0 ? n : 1), sizeof *in);
  int *out = malloc(sizeof *out * (size_t)(n > 0 ? n : 1));
  bool ok = in && out;
  for (int i = 0; ok && i < n; i++) in[i] = i;
  ok = ok && PMPI_Group_translate_ranks(grp, n, in, g.world_group, out) ==
                 MPI_SUCCESS;
  for (int i = 0; ok && i < n; i++) ok = out[i] != MPI_UNDEFINED;
  free(in);
  if (!ok) {
    free(out);
    return NULL;
  }
  return out;
}

static int cmp_int(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* An intercommunicator's groups into ci (remote, remote_size, size) and
 * *out: the world ranks of both, ascending (the same list on every member
 * of either group: its name and "group"). False: not recorded. */
static bool inter_groups(MPI_Comm c, comm_info *ci, int **out) {
  int nl = 0, nr = 0;
  MPI_Group lg, rg;
  if (PMPI_Comm_size(c, &nl) != MPI_SUCCESS ||
      PMPI_Comm_remote_size(c, &nr) != MPI_SUCCESS)
    return false;
  if (PMPI_Comm_group(c, &lg) != MPI_SUCCESS) return false;
  int *local = world_ranks(lg, nl);
  PMPI_Group_free(&lg);
  if (PMPI_Comm_remote_group(c, &rg) != MPI_SUCCESS) {
    free(local);
    return false;
  }
  int *remote = world_ranks(rg, nr);
  PMPI_Group_free(&rg);
  int *both = malloc(sizeof *both * (size_t)(nl + nr));
  if (!local || !remote || !both) {
    free(local), free(remote), free(both);
    return false;
  }
  memcpy(both, local, sizeof *both * (size_t)nl);
  memcpy(both + nl, remote, sizeof *both * (size_t)nr);
  qsort(both, (size_t)(nl + nr), sizeof *both, cmp_int);
  free(local);
  ci->remote = remote;
  ci->remote_size = nr;
  ci->size = nl + nr;
  *out = both;
  return true;
}

static comm_info *attach(MPI_Comm c, const char *name) {
  comm_info *ci = calloc(1, sizeof *ci);
  if (!ci) return NULL;
  ci->refs = 1;
  ci->shadow = MPI_COMM_NULL;
  int inter = 0, n = 0;
  PMPI_Comm_test_inter(c, &inter);
  PMPI_Comm_size(c, &n);
  ci->size = n;
  ci->inter = inter;
  int *out = NULL;
  if (inter) {
    ci->skip = !inter_groups(c, ci, &out);
    n = ci->size;
  } else {
    ci->skip = n <= 1;
    MPI_Group grp;
    if (!ci->skip && PMPI_Comm_group(c, &grp) == MPI_SUCCESS) {
      out = world_ranks(grp, n);
      PMPI_Group_free(&grp);
    }
    ci->skip = ci->skip || !out;
  }
  if (!ci->skip) {
    if (name) {
      snprintf(ci->name, sizeof ci->name, "%s", name);
    } else {
      uint32_t h = 2166136261u;
      for (int i = 0; i < n; i++) h = (h ^ (uint32_t)out[i]) * 16777619u;
      unsigned k = 0;
      lock();
      int i = 0;
      while (i < nanons && anons[i].hash != h) i++;
      if (i < nanons) k = ++anons[i].n;
      else if (nanons < 256) anons[nanons++] = (anon){h, k = 1};
      unlock();
      snprintf(ci->name, sizeof ci->name, "%s-%08x.%u",
               inter ? "inter" : "comm", h, k);
    }
    set_group(ci, out, n);
  }
  if (!ci->skip) ci->world = out; /* kept: vqc_mpi_p2p.c's peers */
  else free(out);
  if (!ci->group_json) ci->group_json = strdup("");
  if (g.keyval != MPI_KEYVAL_INVALID)
    PMPI_Comm_set_attr(c, g.keyval, ci);
  return ci;
}

/* A communicator just made: its comm_info named name (NULL: by its
 * ranks), attached now; NULL when there is no keyval. One set by a lookup
 * in between is replaced: the name is this one. */
static comm_info *attach_made(MPI_Comm c, const char *name) {
  if (g.keyval == MPI_KEYVAL_INVALID) return NULL;
  void *v = NULL;
  int flag = 0;
  if (PMPI_Comm_get_attr(c, g.keyval, &v, &flag) == MPI_SUCCESS && flag)
    PMPI_Comm_delete_attr(c, g.keyval);
  return attach(c, name);
}

comm_info *info_lookup(MPI_Comm c) {
  if (c == MPI_COMM_WORLD) return &world_info;
  if (c == MPI_COMM_NULL || g.keyval == MPI_KEYVAL_INVALID) return NULL;
  void *v = NULL;
  int flag = 0;
  if (PMPI_Comm_get_attr(c, g.keyval, &v, &flag) == MPI_SUCCESS && flag)
    return v;
  return attach(c, NULL);
}

/* (vqc_mpi_internal.h) */
comm_info *info_derived(comm_info *parent, const char *what) {
  if (!parent || parent->skip || parent->inter) return NULL;
  const int n = parent == &world_info ? g.size : parent->size;
  comm_info *ci = calloc(1, sizeof *ci);
  int *world = malloc(sizeof *world * (size_t)(n > 0 ? n : 1));
  if (!ci || !world) {
    free(ci);
    free(world);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    world[i] = parent == &world_info ? i : parent->world[i];
  ci->refs = 1;
  ci->size = n;
  ci->shadow = MPI_COMM_NULL;
  ci->world = world;
  const unsigned long long k =
      __atomic_add_fetch(&parent->derived, 1, __ATOMIC_RELAXED);
  snprintf(ci->name, sizeof ci->name, "%.150s/%s%llu", parent->name, what, k);
  set_group(ci, world, n);
  if (ci->skip) {
    free(world);
    free(ci);
    return NULL;
  }
  return ci;
}

/* After a communicator-making call on parent that returned rc: the
 * parent's count goes up on every rank (those given MPI_COMM_NULL too), and
 * the new one is named after it. */
void made(MPI_Comm parent, MPI_Comm *nc, const char *how, int rc,
          const char *fn, uintptr_t pc) {
  if (!g.on || rc != MPI_SUCCESS) return;
  comm_info *p = info_of(parent);
  const unsigned long long k =
      p ? __atomic_add_fetch(&p->children, 1, __ATOMIC_RELAXED) : 0;
  if (!nc || *nc == MPI_COMM_NULL) return;
  char name[sizeof p->name];
  snprintf(name, sizeof name, "%.150s/%s%llu", p ? p->name : "?", how, k);
  if (strlen(name) >= 150) { /* deep nesting: keep it short and unique */
    uint32_t h = 2166136261u;
    for (const char *s = name; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    snprintf(name, sizeof name, "comm-%08x/%s%llu", h, how, k);
  }
  comm_info *ci = attach_made(*nc, name);
  /* Followed while its attribute lives: info_delete says when it goes. */
  if (ci) obj_made(OBJ_COMM, OBJ_KEY(*nc), fn, pc);
  /* Strict mode and synchronous collectives (record.c): the new
   * communicator's duplicate, made by every member now (they are all in
   * this call). */
  if ((g.strict || g.sync_sends) && ci && !ci->skip && !ci->inter &&
      PMPI_Comm_dup(*nc, &ci->shadow) != MPI_SUCCESS)
    ci->shadow = MPI_COMM_NULL;
}

/* ---- communicators made (collective over the parent) */

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
  call c;
  begin(&c, comm, "comm_dup", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Comm_dup(comm, newcomm);
  end(&c, rc);
  made(comm, newcomm, "dup", rc, "MPI_Comm_dup", RA);
  return rc;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
  call c;
  begin(&c, comm, "comm_dup", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);
  end(&c, rc);
  made(comm, newcomm, "dup", rc, "MPI_Comm_dup_with_info", RA);
  return rc;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  call c;
  begin(&c, comm, "comm_split", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Comm_split(comm, color, key, newcomm);
  end(&c, rc);
  made(comm, newcomm, "split", rc, "MPI_Comm_split", RA);
  return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                        MPI_Comm *newcomm) {
  call c;
  begin(&c, comm, "comm_split", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
  end(&c, rc);
  made(comm, newcomm, "split", rc, "MPI_Comm_split_type", RA);
  return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
  call c;
  begin(&c, comm, "comm_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Comm_create(comm, group, newcomm);
  end(&c, rc);
  made(comm, newcomm, "create", rc, "MPI_Comm_create", RA);
  return rc;
}

int MPI_Cart_create(MPI_Comm old_comm, int ndims, const int dims[],
                    const int periods[], int reorder, MPI_Comm *comm_cart) {
  call c;
  begin(&c, old_comm, "comm_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Cart_create(old_comm, ndims, dims, periods, reorder,
                                  comm_cart);
  end(&c, rc);
  made(old_comm, comm_cart, "cart", rc, "MPI_Cart_create", RA);
  return rc;
}

int MPI_Graph_create(MPI_Comm old_comm, int nnodes, const int index[],
                     const int edges[], int reorder, MPI_Comm *comm_graph) {
  call c;
  begin(&c, old_comm, "comm_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Graph_create(old_comm, nnodes, index, edges, reorder,
                                   comm_graph);
  end(&c, rc);
  made(old_comm, comm_graph, "graph", rc, "MPI_Graph_create", RA);
  return rc;
}

int MPI_Dist_graph_create(MPI_Comm old_comm, int n, const int sources[],
                          const int degrees[], const int destinations[],
                          const int weights[], MPI_Info info, int reorder,
                          MPI_Comm *comm_dist_graph) {
  call c;
  begin(&c, old_comm, "comm_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Dist_graph_create(old_comm, n, sources, degrees,
                                        destinations, weights, info, reorder,
                                        comm_dist_graph);
  end(&c, rc);
  made(old_comm, comm_dist_graph, "graph", rc, "MPI_Dist_graph_create", RA);
  return rc;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm old_comm, int indegree,
                                   const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[],
                                   const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm *comm_dist_graph) {
  call c;
  begin(&c, old_comm, "comm_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Dist_graph_create_adjacent(
      old_comm, indegree, sources, sourceweights, outdegree, destinations,
      destweights, info, reorder, comm_dist_graph);
  end(&c, rc);
  made(old_comm, comm_dist_graph, "graph", rc,
       "MPI_Dist_graph_create_adjacent", RA);
  return rc;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *new_comm) {
  call c;
  begin(&c, comm, "comm_split", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Cart_sub(comm, remain_dims, new_comm);
  end(&c, rc);
  made(comm, new_comm, "sub", rc, "MPI_Cart_sub", RA);
  return rc;
}

/* ---- intercommunicators
 *
 * MPI_Intercomm_create is collective over each side's local communicator
 * (recorded there). The two sides name their local communicators
 * differently, so the intercommunicator is named by its two groups
 * ("inter-<hash of their world ranks>.<k>", k counting such on this
 * process: every member makes them in the same order), made now, not at
 * first use. What is made from it (MPI_Comm_dup, MPI_Intercomm_merge)
 * is named after it as usual. */

int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader,
                         MPI_Comm peer_comm, int remote_leader, int tag,
                         MPI_Comm *newintercomm) {
  call c;
  begin(&c, local_comm, "comm_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Intercomm_create(local_comm, local_leader, peer_comm,
                                       remote_leader, tag, newintercomm);
  end(&c, rc);
  if (!g.on || rc != MPI_SUCCESS) return rc;
  comm_info *p = info_of(local_comm);
  if (p) __atomic_add_fetch(&p->children, 1, __ATOMIC_RELAXED);
  if (newintercomm && *newintercomm != MPI_COMM_NULL &&
      attach_made(*newintercomm, NULL))
    obj_made(OBJ_COMM, OBJ_KEY(*newintercomm), "MPI_Intercomm_create", RA);
  return rc;
}

/* MPI_Comm_spawn (and _multiple) is collective over comm, rooted: the
 * ranks must agree on the root, and one that never calls it leaves the
 * others waiting (recorded as "comm_spawn"). The processes it starts
 * have an MPI_COMM_WORLD of their own, whose rank numbers the job's ranks
 * have too: they are not recorded (vqc_mpi.c, spawned_unwatched), so the
 * root, which started them, says in its end line that they went
 * unchecked, and the verdict is incomplete, never green: a collective
 * mismatch among the workers would otherwise pass unseen. */
static void spawned_unchecked(MPI_Comm comm, int root, int rc, int nprocs,
                              const char *fn, uintptr_t pc) {
  int me = -1;
  if (!g.on || rc != MPI_SUCCESS || PMPI_Comm_rank(comm, &me) != MPI_SUCCESS
      || me != root)
    return;
  char where[600];
  site_at(site_of(pc), where, sizeof where);
  record_incomplete("VQC_EUNSUPPORTED", "it started %d process%s with %s "
                    "at %s, which vqcheck does not check (their "
                    "MPI_COMM_WORLD is not the job's); the job's own ranks "
                    "were checked", nprocs, nprocs == 1 ? "" : "es", fn,
                    where);
}

int MPI_Comm_spawn(const char *command, char *argv[], int maxprocs,
                   MPI_Info info, int root, MPI_Comm comm,
                   MPI_Comm *intercomm, int array_of_errcodes[]) {
  const uintptr_t pc = RA;
  call c;
  begin(&c, comm, "comm_spawn", "", MPI_DATATYPE_NULL, 0, root, pc);
  const int rc = PMPI_Comm_spawn(command, argv, maxprocs, info, root, comm,
                                 intercomm, array_of_errcodes);
  end(&c, rc);
  spawned_unchecked(comm, root, rc, maxprocs, "MPI_Comm_spawn", pc);
  return rc;
}

int MPI_Comm_spawn_multiple(int count, char *array_of_commands[],
                            char **array_of_argv[],
                            const int array_of_maxprocs[],
                            const MPI_Info array_of_info[], int root,
                            MPI_Comm comm, MPI_Comm *intercomm,
                            int array_of_errcodes[]) {
  const uintptr_t pc = RA;
  call c;
  begin(&c, comm, "comm_spawn", "", MPI_DATATYPE_NULL, 0, root, pc);
  const int rc = PMPI_Comm_spawn_multiple(count, array_of_commands,
                                          array_of_argv, array_of_maxprocs,
                                          array_of_info, root, comm,
                                          intercomm, array_of_errcodes);
  end(&c, rc);
  int n = 0; /* significant at the root only, which is who counts them */
  for (int i = 0; array_of_maxprocs && i < count; i++)
    n += array_of_maxprocs[i];
  spawned_unchecked(comm, root, rc, n, "MPI_Comm_spawn_multiple", pc);
  return rc;
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm) {
  call c;
  begin(&c, intercomm, "comm_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Intercomm_merge(intercomm, high, newintracomm);
  end(&c, rc);
  made(intercomm, newintracomm, "merge", rc, "MPI_Intercomm_merge", RA);
  return rc;
}
