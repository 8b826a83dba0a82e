/* vqc_mpi.c: libvqcheck_mpi.so, the PMPI interposer that lets `vqcheck
 * watch -- mpiexec -n N ./prog` check an unmodified MPI program (no
 * recompile, no relink: LD_PRELOAD, which `vqcheck watch` sets for an MPI
 * launcher; harness/cli/cmd_watch.c).
 *
 * The contract is the Python bridge's (cmd_watch.c's file comment), so one
 * analysis serves both: with $VQC_WATCH_DIR set, MPI_Init(_thread) opens in
 * it, per world rank r,
 *   rank-<r>.live.jsonl  (checkers/ledger_analysis.h's format) a start
 *       line {"event":"start","rank","size","pid","host","mpi":true,
 *       "timeout_s"} (an MPI program's: its reports speak of MPI_Finalize,
 *       not of training; timeout_s: the watcher's --timeout); one ledger line per collective when entered and again
 *       when done or failed (copied
 *       into a shared mapping of the file: "the live record" in vqc_mpi_record.c; a kill
 *       leaves every line copied, and zeros after them); {"event":
 *       "finished","status":"VQC_OK","step":-1} in MPI_Finalize; {"event":
 *       "signal","signal","t_ns"} when SIGTERM, SIGINT or SIGHUP ends it (a
 *       launcher stopping the others after one failed; t_ns on the clock
 *       of t_enter_ns), and {"event":"lost",
 *       "by","why","signal"} when a fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 *       SIGABRT) ends it, so the rank that died is the one named;
 *   rank-<r>.heartbeat   the 64 bytes python/vqcheck/_heartbeat.py lays out,
 *       kept in a shared mapping (a store per sign, no system call): state
 *       1 while in a collective (a non-blocking one: while waiting for it),
 *       0 between, 2 from MPI_Finalize on;
 *   rank-<r>.stacks.txt  at SIGUSR1 (which `vqcheck watch` sends at a
 *       hang, and the program does not handle itself), the calling thread's
 *       stack in faulthandler's layout, from the program's first frame
 *       outside MPI and libc, so the report says where the rank is; before
 *       it, a {"event":"p2p_wait",...} line in the live record: the
 *       blocking point-to-point call the rank is in, with its peers and
 *       tags (p2p_wait_line), so the report names them too.
 * Without $VQC_WATCH_DIR every function only calls its PMPI_ twin.
 *
 * A ledger line, per collective on any intracommunicator:
 *   op       the analysis' names (checkers/ledger_read.c record_ops):
 *            barrier, broadcast, reduce, all_reduce, gather, gatherv,
 *            scatter, scatterv, all_gather, all_gatherv, all_to_all,
 *            all_to_allv, reduce_scatter (both MPI forms), scan, exscan,
 *            all_to_allw, neighbor_all_gather(v), neighbor_all_to_all(v|w)
 *            (the section "the w-form and the neighbourhood collectives");
 *            communicator creation (split, dup, create, cart, graph) as
 *            comm_split, comm_dup, comm_create: they are collectives too;
 *   dtype    the digest's name of an MPI basic type (MPI_FLOAT float32,
 *            MPI_INT int32, ...); a derived type made of one basic type is
 *            named by it, its readable form in "mpi_type"; a mixed or
 *            unnamed type is "" with "mpi_type";
 *   count    the type signature's length: count x the basic elements of
 *            one item, so MPI_INT x 8 equals a contiguous(8, MPI_INT) x 1.
 *            Of the rank's own contribution (Gather's send side, Scatter's
 *            receive side, Reduce_scatter's whole vector); MPI_IN_PLACE
 *            takes the other side's. The v-forms' counts may differ by rank
 *            and are not compared;
 *   root     as the program passed it: a rank of the communicator; -1 for
 *            collectives without one;
 *   redop    sum, product, max, min, land, band, lor, bor, lxor, bxor,
 *            maxloc, minloc, replace, no_op; "user" for MPI_Op_create's;
 *   group, group_name  for every communicator but MPI_COMM_WORLD: its
 *            world ranks in its rank order (MPI_Group_translate_ranks) and
 *            a name equal on every member: the parent's name, "/", how it
 *            was made and the parent's count of communicators made so far
 *            ("world/split1/dup1"; split, dup and create are collective
 *            over the parent, so the counts agree). A communicator made
 *            otherwise (MPI_Comm_create_group, MPI_Intercomm_merge,
 *            MPI_Comm_idup) is named when first seen, by a hash of its
 *            ranks and how many such this rank saw before. "seq" counts
 *            that communicator's collectives. Intercommunicators and
 *            communicators of one rank are not recorded;
 *   any_site true: MPI pairs calls by their order on the communicator, and
 *            a program may call one collective from different lines on
 *            different ranks (the root's branch and the others'), so the
 *            analysis tells the site but does not compare it;
 *   file, line, func  the call site: the return address (__builtin_
 *            return_address, or backtrace() past the MPI libraries when
 *            the caller is one: Fortran bindings) resolved once per site
 *            with libdw where the program has debug information (libdw.so.1
 *            opened at run time: no build dependency), else dladdr: the
 *            object's name, line 0, "symbol+0xoffset" (the same on every
 *            rank of one build).
 * A non-blocking collective is entered at its I-call and done when MPI_Wait,
 * MPI_Test or their any/some/all forms complete its request; one still
 * pending at MPI_Finalize gets a "failed" line (status VQC_EINVAL).
 * Non-blocking point-to-point requests (MPI_Isend, _Ibsend, _Issend,
 * _Irsend, MPI_Irecv) are not recorded; they are kept by handle
 * (vqc_mpi_reqs.h) until complete, freed or cancelled, so a wait names
 * them in its p2p_wait line and MPI_Finalize reports, as a finding, each
 * one never completed (vqc_mpi_p2p.c, "non-blocking point-to-point").
 *
 * Before data moves, each call's own buffers are checked (vqc_mpi_buffers.c):
 * send and receive buffers that overlap without
 * MPI_IN_PLACE, and a receive side smaller than the send side; each is a
 * finding on the live record.
 *
 * It adds no communication of its own (no collective, no message on any
 * communicator), never touches a buffer, and returns what PMPI returned.
 * What it does add per collective: two lines copied into a shared mapping
 * (no system call), two heartbeat stores, two clock reads and a table
 * lookup (docs/mpi.md, "What it costs").
 * The attribute it keeps on each communicator (a keyval of its own, copied
 * by nobody) holds the communicator's name and counters. */
#include "vqc_mpi_internal.h"

/* The size of c's communicator (for the checks' spans). */
static int comm_size(MPI_Comm c) {
  int n = 0;
  PMPI_Comm_size(c, &n);
  return n;
}

/* ---- state (vqc_mpi_internal.h says what each field is) */

vqc_mpi_state g = {.live_fd = -1, .stacks_fd = -1,
                   .keyval = MPI_KEYVAL_INVALID};
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- start and end */

static int open_file(const char *suffix, int flags) {
  char path[4200];
  snprintf(path, sizeof path, "%s/rank-%d%s", g.dir, g.rank, suffix);
  return open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0644);
}

static void started(int provided) {
  const char *dir = getenv("VQC_WATCH_DIR");
  if (!dir || !dir[0] || strlen(dir) >= sizeof g.dir) return;
  int init = 0;
  PMPI_Initialized(&init);
  if (!init) return;
  snprintf(g.dir, sizeof g.dir, "%s", dir);
  g.multi = provided == MPI_THREAD_MULTIPLE;
  g.pid = (uint32_t)getpid();
  PMPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g.size);
  PMPI_Comm_group(MPI_COMM_WORLD, &g.world_group);
  init_basics();
  overflow_site.len = strlen(overflow_site.json);
  if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, info_delete, &g.keyval,
                              NULL) != MPI_SUCCESS)
    g.keyval = MPI_KEYVAL_INVALID;
  g.live_fd = open_file(".live.jsonl", O_RDWR | O_CREAT | O_TRUNC);
  if (g.live_fd < 0) {
    fprintf(stderr, "libvqcheck_mpi: rank %d: cannot write its live record "
            "into %s: %s; this rank is not recorded\n", g.rank, g.dir,
            strerror(errno));
    return;
  }
  rec_open();
  const int hb = open_file(".heartbeat", O_RDWR | O_CREAT | O_TRUNC);
  if (hb >= 0 && ftruncate(hb, HB_SIZE) == 0) {
    void *m = mmap(NULL, HB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, hb, 0);
    if (m != MAP_FAILED) g.hb = m;
  }
  if (hb >= 0) close(hb);
  char host[256] = "", esc[520];
  gethostname(host, sizeof host - 1);
  json_esc(esc, sizeof esc, host);
  char line[760], tmo[48] = "";
  /* The watcher's --timeout: the deadline a hang is measured against. */
  const char *ts = getenv("VQC_WATCH_TIMEOUT");
  const double timeout_s = ts ? strtod(ts, NULL) : 0.0;
  if (timeout_s > 0 && timeout_s < 1e9)
    snprintf(tmo, sizeof tmo, ",\"timeout_s\":%g", timeout_s);
  int n = snprintf(line, sizeof line, "{\"event\":\"start\",\"rank\":%d,"
                   "\"size\":%d,\"pid\":%ld,\"host\":\"%s\","
                   "\"mpi\":true%s}\n", g.rank, g.size, (long)getpid(), esc,
                   tmo);
  if (n > 0 && (size_t)n < sizeof line) live_write(line, (size_t)n);
  beat(HB_RUNNING, 0, "");
  /* Warm backtrace() up (it loads libgcc_s once) before a handler needs it. */
  void *fr[2];
  (void)backtrace(fr, 2);
  g.stacks_fd = open_file(".stacks.txt", O_WRONLY | O_CREAT | O_APPEND);
  install_error_handler();
  const char *strict = getenv("VQC_MPI_STRICT");
  g.strict = strict && strcmp(strict, "1") == 0;
  if (g.strict &&
      PMPI_Comm_dup(MPI_COMM_WORLD, &world_info.shadow) != MPI_SUCCESS)
    world_info.shadow = MPI_COMM_NULL;
  install_signals();
  g.on = true;
}

/* A non-blocking collective whose request no wait or test completed
 * before MPI_Finalize: a finding on the live record (findings_record.h
 * reads it back): a deadlock of this rank's own making, at its I-call. */
static void never_completed(const call *c) {
  char file[1100], func[520], name[420];
  json_esc(file, sizeof file, c->s->file);
  json_esc(func, sizeof func, c->s->func);
  json_esc(name, sizeof name, c->ci->name);
  const bool world = c->ci == &world_info;
  const int n = 4096 + (int)c->ci->group_len;
  char *b = malloc((size_t)n);
  if (!b) return;
  int k = snprintf(b, (size_t)n,
      "{\"event\":\"finding\",\"finding\":{\"kind\":\"deadlock\","
      "\"step\":-1,\"ranks\":[%d],\"site\":{\"file\":\"%.400s\","
      "\"line\":%d,\"func\":\"%.200s\"},\"message\":\"rank %d reached "
      "MPI_Finalize with its non-blocking %s #%llu%s%.100s%s (started at "
      "%.300s:%d) never completed: no MPI_Wait or MPI_Test completed its "
      "request\",\"detail\":{\"op\":\"%s\",\"seq\":%llu,"
      "\"never_completed\":true",
      g.rank, file, c->s->line, func, g.rank, c->op,
      (unsigned long long)c->seq, world ? "" : " on communicator ",
      world ? "" : name, "", file, c->s->line, c->op,
      (unsigned long long)c->seq);
  if (k > 0 && k < n && !world && c->ci->group_len > 0) {
    /* "group":[..],"group_name":"..", -> "process_group":{"name","ranks"} */
    const char *g0 = c->ci->group_json + 9; /* past "group":[ */
    const char *close = strchr(g0, ']');
    if (close)
      k += snprintf(b + k, (size_t)(n - k),
                    ",\"process_group\":{\"name\":\"%s\",\"ranks\":[%.*s]}",
                    name, (int)(close - g0), g0);
  }
  if (k > 0 && k < n) k += snprintf(b + k, (size_t)(n - k), "}}}\n");
  if (k > 0 && k < n) live_write(b, (size_t)k);
  free(b);
}

int MPI_Init(int *argc, char ***argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) started(MPI_THREAD_SINGLE);
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) started(provided ? *provided : required);
  return rc;
}

/* A point-to-point request (MPI_Isend, MPI_Irecv, ...) that no wait or
 * test completed, and that was neither freed nor cancelled, before
 * MPI_Finalize: a finding on the live record, as never_completed's, at
 * its I-call ("rank 0 reached MPI_Finalize with its MPI_Irecv from rank 2
 * (tag 7) (started at leak.c:14) never completed: ..."). */
static void p2p_never_completed(const vqc_p2p_req *q) {
  const site *s = q->site ? q->site : &overflow_site;
  const comm_info *ci = q->ci;
  char file[1100], func[520], name[420] = "", peer[64], tag[32];
  json_esc(file, sizeof file, s->file);
  json_esc(func, sizeof func, s->func);
  if (ci && ci != &world_info && !ci->skip)
    json_esc(name, sizeof name, ci->name);
  int world_peer = q->peer;
  if (q->peer >= 0 && ci && ci != &world_info && ci->world &&
      q->peer < ci->size)
    world_peer = ci->world[q->peer];
  if (q->peer == MPI_ANY_SOURCE)
    snprintf(peer, sizeof peer, "any rank");
  else if (q->peer == MPI_PROC_NULL)
    snprintf(peer, sizeof peer, "MPI_PROC_NULL");
  else
    snprintf(peer, sizeof peer, "rank %d", world_peer);
  if (q->tag == MPI_ANY_TAG) snprintf(tag, sizeof tag, "any tag");
  else snprintf(tag, sizeof tag, "tag %d", q->tag);
  /* the detail's peer and tag: world rank and tag, "any", or null */
  char peer_j[24], tag_j[24];
  if (q->peer == MPI_ANY_SOURCE) snprintf(peer_j, sizeof peer_j, "\"any\"");
  else if (world_peer < 0) snprintf(peer_j, sizeof peer_j, "null");
  else snprintf(peer_j, sizeof peer_j, "%d", world_peer);
  if (q->tag == MPI_ANY_TAG) snprintf(tag_j, sizeof tag_j, "\"any\"");
  else snprintf(tag_j, sizeof tag_j, "%d", q->tag);
  char b[4096];
  const int k = snprintf(b, sizeof b,
      "{\"event\":\"finding\",\"finding\":{\"kind\":\"deadlock\","
      "\"step\":-1,\"ranks\":[%d],\"site\":{\"file\":\"%.400s\","
      "\"line\":%d,\"func\":\"%.200s\"},\"message\":\"rank %d reached "
      "MPI_Finalize with its %s %s %s (%s)%s%.100s (started at %.300s:%d) "
      "never completed: no MPI_Wait or MPI_Test completed its request, and "
      "no MPI_Request_free or MPI_Cancel let it go\",\"detail\":{"
      "\"call\":\"%s\",\"%s\":%s,\"%s\":%s%s%.100s%s,"
      "\"never_completed\":true}}}\n",
      g.rank, file, s->line, func, g.rank, q->call, q->recv ? "from" : "to",
      peer, tag, name[0] ? " on communicator " : "", name, file, s->line,
      q->call, q->recv ? "from" : "to", peer_j,
      q->recv ? "recv_tag" : "send_tag", tag_j,
      name[0] ? ",\"communicator\":\"" : "", name, name[0] ? "\"" : "");
  if (k > 0 && (size_t)k < sizeof b) live_write(b, (size_t)k);
}

int MPI_Finalize(void) {
  if (g.on) {
    /* Point-to-point requests never completed: a finding each. */
    vqc_p2p_req q;
    lock();
    while (vqc_reqs_pop(&p2p_reqs, &q)) {
      p2p_never_completed(&q);
      info_unref(q.ci);
    }
    vqc_reqs_clear(&p2p_reqs);
    unlock();
    /* Non-blocking collectives never completed: a finding. */
    call c;
    while (pending_pop(&c)) {
      call_line(&c, now_ns(), "failed", "VQC_EINVAL");
      never_completed(&c);
    }
    static const char fin[] = "{\"event\":\"finished\",\"status\":\"VQC_OK\","
                              "\"step\":-1}\n";
    live_write(fin, sizeof fin - 1);
    rec_close();
    beat(HB_FINISHED, world_info.seq, "");
    if (world_info.shadow != MPI_COMM_NULL)
      PMPI_Comm_free(&world_info.shadow);
    g.on = false;
  }
  return PMPI_Finalize();
}

/* ---- blocking collectives */

/* The communicator rank of this process (for MPI_IN_PLACE at a root). */
static int my_rank(MPI_Comm c) {
  int r = -1;
  PMPI_Comm_rank(c, &r);
  return r;
}

static long long sum_counts(const int *c, MPI_Comm comm) {
  int n = 0;
  long long s = 0;
  PMPI_Comm_size(comm, &n);
  for (int i = 0; c && i < n; i++) s += c[i];
  return s;
}

int MPI_Barrier(MPI_Comm comm) {
  call c;
  begin(&c, comm, "barrier", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Barrier(comm);
  end(&c, rc);
  return rc;
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root,
              MPI_Comm comm) {
  call c;
  begin(&c, comm, "broadcast", "", datatype, count, root, RA);
  const int rc = PMPI_Bcast(buffer, count, datatype, root, comm);
  end(&c, rc);
  return rc;
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
               MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  call c;
  begin(&c, comm, "reduce", redop_name(op), datatype, count, root, RA);
  if (c.ci && my_rank(comm) == root)
    check_overlap(&c, "MPI_Reduce", sendbuf, count, datatype, recvbuf, count,
                  datatype);
  const int rc = PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root,
                             comm);
  end(&c, rc);
  return rc;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  call c;
  begin(&c, comm, "all_reduce", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Allreduce", sendbuf, count, datatype, recvbuf, count,
                datatype);
  const int rc = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  end(&c, rc);
  return rc;
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count,
             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  call c;
  begin(&c, comm, "scan", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Scan", sendbuf, count, datatype, recvbuf, count,
                datatype);
  const int rc = PMPI_Scan(sendbuf, recvbuf, count, datatype, op, comm);
  end(&c, rc);
  return rc;
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count,
               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  call c;
  begin(&c, comm, "exscan", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Exscan", sendbuf, count, datatype, recvbuf, count,
                datatype);
  const int rc = PMPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm);
  end(&c, rc);
  return rc;
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf,
                       const int recvcounts[], MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm) {
  call c;
  begin(&c, comm, "reduce_scatter", redop_name(op), datatype,
        g.on ? sum_counts(recvcounts, comm) : 0, -1, RA);
  if (c.ci && recvcounts)
    check_overlap(&c, "MPI_Reduce_scatter", sendbuf,
                  sum_counts(recvcounts, comm), datatype, recvbuf,
                  recvcounts[my_rank(comm)], datatype);
  const int rc =
      PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
  end(&c, rc);
  return rc;
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf,
                             int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  call c;
  int n = 0;
  if (g.on) PMPI_Comm_size(comm, &n);
  begin(&c, comm, "reduce_scatter", redop_name(op), datatype,
        (long long)recvcount * n, -1, RA);
  if (c.ci)
    check_overlap(&c, "MPI_Reduce_scatter_block", sendbuf,
                  (long long)recvcount * comm_size(comm), datatype, recvbuf,
                  recvcount, datatype);
  const int rc = PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount,
                                           datatype, op, comm);
  end(&c, rc);
  return rc;
}

/* Gather's side that this rank contributes: its send side, or at a root
 * with MPI_IN_PLACE the receive side. */
#define SEND_SIDE(sendbuf, sc, st, rc_, rt)                                 \
  (sendbuf) == MPI_IN_PLACE ? (rt) : (st), (sendbuf) == MPI_IN_PLACE ? (rc_) \
                                                                     : (sc)

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
               MPI_Comm comm) {
  call c;
  begin(&c, comm, "gather", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                          recvcount, recvtype), root, RA);
  if (c.ci && my_rank(comm) == root && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Gather", sendbuf, sendcount, sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Gather", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                             recvtype, root, comm);
  end(&c, rc);
  return rc;
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, const int recvcounts[], const int displs[],
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  call c;
  const int own = g.on && sendbuf == MPI_IN_PLACE && recvcounts
                      ? recvcounts[my_rank(comm)] : 0;
  begin(&c, comm, "gatherv", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                           own, recvtype), root, RA);
  if (c.ci && my_rank(comm) == root && sendbuf != MPI_IN_PLACE && recvcounts) {
    check_overlap(&c, "MPI_Gatherv", sendbuf, sendcount, sendtype, recvbuf,
                  v_items(recvcounts, displs, comm), recvtype);
    check_fits(&c, "MPI_Gatherv", sendcount, sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc = PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                              displs, recvtype, root, comm);
  end(&c, rc);
  return rc;
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
  call c;
  const bool in = recvbuf == MPI_IN_PLACE;
  begin(&c, comm, "scatter", "", in ? sendtype : recvtype,
        in ? sendcount : recvcount, root, RA);
  if (c.ci && my_rank(comm) == root && recvbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Scatter", sendbuf,
                  (long long)sendcount * comm_size(comm), sendtype, recvbuf,
                  recvcount, recvtype);
    check_fits(&c, "MPI_Scatter", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf,
                              recvcount, recvtype, root, comm);
  end(&c, rc);
  return rc;
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[],
                 const int displs[], MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root,
                 MPI_Comm comm) {
  call c;
  const bool in = recvbuf == MPI_IN_PLACE;
  const int own = g.on && in && sendcounts ? sendcounts[my_rank(comm)] : 0;
  begin(&c, comm, "scatterv", "", in ? sendtype : recvtype,
        in ? own : recvcount, root, RA);
  if (c.ci && my_rank(comm) == root && recvbuf != MPI_IN_PLACE && sendcounts) {
    check_overlap(&c, "MPI_Scatterv", sendbuf,
                  v_items(sendcounts, displs, comm), sendtype, recvbuf,
                  recvcount, recvtype);
    check_fits(&c, "MPI_Scatterv", sendcounts[my_rank(comm)], sendtype,
               recvcount, recvtype);
  }
  const int rc = PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf,
                               recvcount, recvtype, root, comm);
  end(&c, rc);
  return rc;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm) {
  call c;
  begin(&c, comm, "all_gather", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                              recvcount, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Allgather", sendbuf, sendcount, sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Allgather", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf,
                                recvcount, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int displs[],
                   MPI_Datatype recvtype, MPI_Comm comm) {
  call c;
  const int own = g.on && sendbuf == MPI_IN_PLACE && recvcounts
                      ? recvcounts[my_rank(comm)] : 0;
  begin(&c, comm, "all_gatherv", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                               own, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE && recvcounts) {
    check_overlap(&c, "MPI_Allgatherv", sendbuf, sendcount, sendtype, recvbuf,
                  v_items(recvcounts, displs, comm), recvtype);
    check_fits(&c, "MPI_Allgatherv", sendcount, sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc = PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf,
                                 recvcounts, displs, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 MPI_Comm comm) {
  call c;
  begin(&c, comm, "all_to_all", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                              recvcount, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Alltoall", sendbuf,
                  (long long)sendcount * comm_size(comm), sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Alltoall", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[],
                  const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                  const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm) {
  call c;
  const bool in = sendbuf == MPI_IN_PLACE;
  begin(&c, comm, "all_to_allv", "", in ? recvtype : sendtype,
        g.on ? sum_counts(in ? recvcounts : sendcounts, comm) : 0, -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE && sendcounts && recvcounts) {
    check_overlap(&c, "MPI_Alltoallv", sendbuf,
                  v_items(sendcounts, sdispls, comm), sendtype, recvbuf,
                  v_items(recvcounts, rdispls, comm), recvtype);
    check_fits(&c, "MPI_Alltoallv", sendcounts[my_rank(comm)], sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc = PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype,
                                recvbuf, recvcounts, rdispls, recvtype, comm);
  end(&c, rc);
  return rc;
}

/* ---- the w-form and the neighbourhood collectives
 *
 * MPI_Alltoallw takes a type per peer; the neighbourhood collectives
 * (MPI_Neighbor_*, MPI_Ineighbor_*) exchange with the neighbours of a
 * communicator's topology only (cart: 2 per dimension; graph; dist graph:
 * in- and out-degree). Each is recorded as the others are (entered, done;
 * the non-blocking forms until their request completes), on that
 * communicator: op all_to_allw, neighbor_all_gather(v), neighbor_all_to_
 * all(v|w); dtype: the send type's element (for a w form, the one element
 * every peer's type is made of, else ""); count: the type signature's
 * length of what the rank sends (to each neighbour for neighbor_all_gather
 * and neighbor_all_to_all, as Allgather and Alltoall; summed over the
 * peers for the v and w forms). The analysis compares op and dtype, not
 * the count (a rank's counts need only match its neighbours'), and pairs
 * them in the communicator's order, so a rank that skips one or calls
 * another is a deadlock or collective_mismatch. Their buffers are not
 * checked (no overlap or size finding). */

/* The in- and out-degree of c's topology; false (0, 0) without one. */
static bool neighbours(MPI_Comm c, int *in, int *out) {
  int topo = MPI_UNDEFINED;
  *in = *out = 0;
  if (PMPI_Topo_test(c, &topo) != MPI_SUCCESS) return false;
  if (topo == MPI_CART) {
    int nd = 0;
    if (PMPI_Cartdim_get(c, &nd) != MPI_SUCCESS) return false;
    *in = *out = 2 * nd;
    return true;
  }
  if (topo == MPI_GRAPH) {
    int n = 0;
    if (PMPI_Graph_neighbors_count(c, my_rank(c), &n) != MPI_SUCCESS)
      return false;
    *in = *out = n;
    return true;
  }
  if (topo == MPI_DIST_GRAPH) {
    int weighted = 0;
    return PMPI_Dist_graph_neighbors_count(c, in, out, &weighted) ==
           MPI_SUCCESS;
  }
  return false;
}

/* The out-degree of a neighbourhood collective's communicator. */
static int out_degree(MPI_Comm c) {
  int in = 0, out = 0;
  (void)neighbours(c, &in, &out);
  return out;
}

/* *t and the summed count of n peers' counts[i] items of types[i] (a w
 * form): the type signature's length in basic elements, the element
 * every type is made of (else ""). Returns the count. */
static long long w_info(const int *counts, const MPI_Datatype *types, int n,
                        tinfo *t) {
  t->dtype = "";
  t->elems = 1;
  snprintf(t->extra, sizeof t->extra, "\"mpi_type\":\"a type per peer\",");
  if (!counts || !types) return 0;
  long long total = 0;
  const char *common = NULL;
  bool mixed = false;
  MPI_Datatype last = MPI_DATATYPE_NULL;
  tinfo one = {.dtype = "", .elems = 0};
  for (int i = 0; i < n; i++) {
    if (counts[i] <= 0) continue;
    if (types[i] != last) { /* one decode per run of equal types */
      type_info(types[i], &one);
      last = types[i];
    }
    total += (long long)counts[i] * one.elems;
    if (!one.dtype[0] || (common && strcmp(common, one.dtype) != 0))
      mixed = true;
    common = one.dtype;
  }
  if (common && !mixed) t->dtype = common;
  return total;
}

int MPI_Alltoallw(const void *sendbuf, const int sendcounts[],
                  const int sdispls[], const MPI_Datatype sendtypes[],
                  void *recvbuf, const int recvcounts[], const int rdispls[],
                  const MPI_Datatype recvtypes[], MPI_Comm comm) {
  call c;
  c.ci = NULL;
  if (g.on) {
    const bool in = sendbuf == MPI_IN_PLACE;
    tinfo t;
    const long long n = w_info(in ? recvcounts : sendcounts,
                               in ? recvtypes : sendtypes, comm_size(comm),
                               &t);
    record_t(&c, true, comm, "all_to_allw", "", &t, n, -1, RA);
  }
  const int rc = PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes,
                                recvbuf, recvcounts, rdispls, recvtypes, comm);
  end(&c, rc);
  return rc;
}

int MPI_Neighbor_allgather(const void *sendbuf, int sendcount,
                           MPI_Datatype sendtype, void *recvbuf,
                           int recvcount, MPI_Datatype recvtype,
                           MPI_Comm comm) {
  call c;
  begin(&c, comm, "neighbor_all_gather", "", sendtype, sendcount, -1, RA);
  const int rc = PMPI_Neighbor_allgather(sendbuf, sendcount, sendtype,
                                         recvbuf, recvcount, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Neighbor_allgatherv(const void *sendbuf, int sendcount,
                            MPI_Datatype sendtype, void *recvbuf,
                            const int recvcounts[], const int displs[],
                            MPI_Datatype recvtype, MPI_Comm comm) {
  call c;
  begin(&c, comm, "neighbor_all_gatherv", "", sendtype, sendcount, -1, RA);
  const int rc = PMPI_Neighbor_allgatherv(sendbuf, sendcount, sendtype,
                                          recvbuf, recvcounts, displs,
                                          recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Neighbor_alltoall(const void *sendbuf, int sendcount,
                          MPI_Datatype sendtype, void *recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm) {
  call c;
  begin(&c, comm, "neighbor_all_to_all", "", sendtype, sendcount, -1, RA);
  const int rc = PMPI_Neighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf,
                                        recvcount, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Neighbor_alltoallv(const void *sendbuf, const int sendcounts[],
                           const int sdispls[], MPI_Datatype sendtype,
                           void *recvbuf, const int recvcounts[],
                           const int rdispls[], MPI_Datatype recvtype,
                           MPI_Comm comm) {
  call c;
  long long n = 0;
  for (int i = 0, d = g.on && sendcounts ? out_degree(comm) : 0; i < d; i++)
    n += sendcounts[i];
  begin(&c, comm, "neighbor_all_to_allv", "", sendtype, n, -1, RA);
  const int rc = PMPI_Neighbor_alltoallv(sendbuf, sendcounts, sdispls,
                                         sendtype, recvbuf, recvcounts,
                                         rdispls, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Neighbor_alltoallw(const void *sendbuf, const int sendcounts[],
                           const MPI_Aint sdispls[],
                           const MPI_Datatype sendtypes[], void *recvbuf,
                           const int recvcounts[], const MPI_Aint rdispls[],
                           const MPI_Datatype recvtypes[], MPI_Comm comm) {
  call c;
  c.ci = NULL;
  if (g.on) {
    tinfo t;
    const long long n = w_info(sendcounts, sendtypes, out_degree(comm), &t);
    record_t(&c, true, comm, "neighbor_all_to_allw", "", &t, n, -1, RA);
  }
  const int rc = PMPI_Neighbor_alltoallw(sendbuf, sendcounts, sdispls,
                                         sendtypes, recvbuf, recvcounts,
                                         rdispls, recvtypes, comm);
  end(&c, rc);
  return rc;
}

/* ---- non-blocking collectives */

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "barrier", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Ibarrier(comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root,
               MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "broadcast", "", datatype, count, root, RA);
  const int rc = PMPI_Ibcast(buffer, count, datatype, root, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count,
                MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "reduce", redop_name(op), datatype, count, root, RA);
  if (c.ci && my_rank(comm) == root)
    check_overlap(&c, "MPI_Ireduce", sendbuf, count, datatype, recvbuf, count,
                  datatype);
  const int rc = PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root,
                              comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count,
                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "all_reduce", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Iallreduce", sendbuf, count, datatype, recvbuf, count,
                datatype);
  const int rc = PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm,
                                 request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iscan(const void *sendbuf, void *recvbuf, int count,
              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "scan", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Iscan", sendbuf, count, datatype, recvbuf, count,
                datatype);
  const int rc = PMPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm,
                            request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count,
                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "exscan", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Iexscan", sendbuf, count, datatype, recvbuf, count,
                datatype);
  const int rc = PMPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm,
                              request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf,
                        const int recvcounts[], MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "reduce_scatter", redop_name(op), datatype,
        g.on ? sum_counts(recvcounts, comm) : 0, -1, RA);
  if (c.ci && recvcounts)
    check_overlap(&c, "MPI_Ireduce_scatter", sendbuf,
                  sum_counts(recvcounts, comm), datatype, recvbuf,
                  recvcounts[my_rank(comm)], datatype);
  const int rc = PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype,
                                      op, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf,
                              int recvcount, MPI_Datatype datatype,
                              MPI_Op op, MPI_Comm comm,
                              MPI_Request *request) {
  call c;
  int n = 0;
  if (g.on) PMPI_Comm_size(comm, &n);
  begin_nb(&c, comm, "reduce_scatter", redop_name(op), datatype,
        (long long)recvcount * n, -1, RA);
  if (c.ci)
    check_overlap(&c, "MPI_Ireduce_scatter_block", sendbuf,
                  (long long)recvcount * comm_size(comm), datatype, recvbuf,
                  recvcount, datatype);
  const int rc = PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount,
                                            datatype, op, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "gather", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                          recvcount, recvtype), root, RA);
  if (c.ci && my_rank(comm) == root && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Igather", sendbuf, sendcount, sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Igather", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf,
                              recvcount, recvtype, root, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, const int recvcounts[], const int displs[],
                 MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request *request) {
  call c;
  const int own = g.on && sendbuf == MPI_IN_PLACE && recvcounts
                      ? recvcounts[my_rank(comm)] : 0;
  begin_nb(&c, comm, "gatherv", "", SEND_SIDE(sendbuf, sendcount, sendtype, own,
                                           recvtype), root, RA);
  if (c.ci && my_rank(comm) == root && sendbuf != MPI_IN_PLACE && recvcounts) {
    check_overlap(&c, "MPI_Igatherv", sendbuf, sendcount, sendtype, recvbuf,
                  v_items(recvcounts, displs, comm), recvtype);
    check_fits(&c, "MPI_Igatherv", sendcount, sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc =
      PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                    recvtype, root, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm, MPI_Request *request) {
  call c;
  const bool in = recvbuf == MPI_IN_PLACE;
  begin_nb(&c, comm, "scatter", "", in ? sendtype : recvtype,
        in ? sendcount : recvcount, root, RA);
  if (c.ci && my_rank(comm) == root && recvbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Iscatter", sendbuf,
                  (long long)sendcount * comm_size(comm), sendtype, recvbuf,
                  recvcount, recvtype);
    check_fits(&c, "MPI_Iscatter", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, root, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iscatterv(const void *sendbuf, const int sendcounts[],
                  const int displs[], MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, int root,
                  MPI_Comm comm, MPI_Request *request) {
  call c;
  const bool in = recvbuf == MPI_IN_PLACE;
  const int own = g.on && in && sendcounts ? sendcounts[my_rank(comm)] : 0;
  begin_nb(&c, comm, "scatterv", "", in ? sendtype : recvtype,
        in ? own : recvcount, root, RA);
  if (c.ci && my_rank(comm) == root && recvbuf != MPI_IN_PLACE && sendcounts) {
    check_overlap(&c, "MPI_Iscatterv", sendbuf,
                  v_items(sendcounts, displs, comm), sendtype, recvbuf,
                  recvcount, recvtype);
    check_fits(&c, "MPI_Iscatterv", sendcounts[my_rank(comm)], sendtype,
               recvcount, recvtype);
  }
  const int rc = PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf,
                                recvcount, recvtype, root, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                   void *recvbuf, int recvcount, MPI_Datatype recvtype,
                   MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "all_gather", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                              recvcount, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Iallgather", sendbuf, sendcount, sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Iallgather", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf,
                                 recvcount, recvtype, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                    void *recvbuf, const int recvcounts[], const int displs[],
                    MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request *request) {
  call c;
  const int own = g.on && sendbuf == MPI_IN_PLACE && recvcounts
                      ? recvcounts[my_rank(comm)] : 0;
  begin_nb(&c, comm, "all_gatherv", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                               own, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE && recvcounts) {
    check_overlap(&c, "MPI_Iallgatherv", sendbuf, sendcount, sendtype, recvbuf,
                  v_items(recvcounts, displs, comm), recvtype);
    check_fits(&c, "MPI_Iallgatherv", sendcount, sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc = PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf,
                                  recvcounts, displs, recvtype, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "all_to_all", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                              recvcount, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Ialltoall", sendbuf,
                  (long long)sendcount * comm_size(comm), sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Ialltoall", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf,
                                recvcount, recvtype, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[],
                   const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int rdispls[],
                   MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request) {
  call c;
  const bool in = sendbuf == MPI_IN_PLACE;
  begin_nb(&c, comm, "all_to_allv", "", in ? recvtype : sendtype,
        g.on ? sum_counts(in ? recvcounts : sendcounts, comm) : 0, -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE && sendcounts && recvcounts) {
    check_overlap(&c, "MPI_Ialltoallv", sendbuf,
                  v_items(sendcounts, sdispls, comm), sendtype, recvbuf,
                  v_items(recvcounts, rdispls, comm), recvtype);
    check_fits(&c, "MPI_Ialltoallv", sendcounts[my_rank(comm)], sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc = PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype,
                                 recvbuf, recvcounts, rdispls, recvtype, comm,
                                 request);
  posted(&c, rc, request);
  return rc;
}

/* ---- non-blocking w-form and neighbourhood collectives (as above;
 * done when their request completes) */

int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[],
                   const int sdispls[], const MPI_Datatype sendtypes[],
                   void *recvbuf, const int recvcounts[], const int rdispls[],
                   const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request *request) {
  call c;
  c.ci = NULL;
  if (g.on) {
    const bool in = sendbuf == MPI_IN_PLACE;
    tinfo t;
    const long long n = w_info(in ? recvcounts : sendcounts,
                               in ? recvtypes : sendtypes, comm_size(comm),
                               &t);
    record_t(&c, false, comm, "all_to_allw", "", &t, n, -1, RA);
  }
  const int rc = PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes,
                                 recvbuf, recvcounts, rdispls, recvtypes,
                                 comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ineighbor_allgather(const void *sendbuf, int sendcount,
                            MPI_Datatype sendtype, void *recvbuf,
                            int recvcount, MPI_Datatype recvtype,
                            MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "neighbor_all_gather", "", sendtype, sendcount, -1, RA);
  const int rc = PMPI_Ineighbor_allgather(sendbuf, sendcount, sendtype,
                                          recvbuf, recvcount, recvtype, comm,
                                          request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ineighbor_allgatherv(const void *sendbuf, int sendcount,
                             MPI_Datatype sendtype, void *recvbuf,
                             const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, MPI_Comm comm,
                             MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "neighbor_all_gatherv", "", sendtype, sendcount, -1,
           RA);
  const int rc = PMPI_Ineighbor_allgatherv(sendbuf, sendcount, sendtype,
                                           recvbuf, recvcounts, displs,
                                           recvtype, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ineighbor_alltoall(const void *sendbuf, int sendcount,
                           MPI_Datatype sendtype, void *recvbuf,
                           int recvcount, MPI_Datatype recvtype,
                           MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "neighbor_all_to_all", "", sendtype, sendcount, -1, RA);
  const int rc = PMPI_Ineighbor_alltoall(sendbuf, sendcount, sendtype,
                                         recvbuf, recvcount, recvtype, comm,
                                         request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ineighbor_alltoallv(const void *sendbuf, const int sendcounts[],
                            const int sdispls[], MPI_Datatype sendtype,
                            void *recvbuf, const int recvcounts[],
                            const int rdispls[], MPI_Datatype recvtype,
                            MPI_Comm comm, MPI_Request *request) {
  call c;
  long long n = 0;
  for (int i = 0, d = g.on && sendcounts ? out_degree(comm) : 0; i < d; i++)
    n += sendcounts[i];
  begin_nb(&c, comm, "neighbor_all_to_allv", "", sendtype, n, -1, RA);
  const int rc = PMPI_Ineighbor_alltoallv(sendbuf, sendcounts, sdispls,
                                          sendtype, recvbuf, recvcounts,
                                          rdispls, recvtype, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ineighbor_alltoallw(const void *sendbuf, const int sendcounts[],
                            const MPI_Aint sdispls[],
                            const MPI_Datatype sendtypes[], void *recvbuf,
                            const int recvcounts[], const MPI_Aint rdispls[],
                            const MPI_Datatype recvtypes[], MPI_Comm comm,
                            MPI_Request *request) {
  call c;
  c.ci = NULL;
  if (g.on) {
    tinfo t;
    const long long n = w_info(sendcounts, sendtypes, out_degree(comm), &t);
    record_t(&c, false, comm, "neighbor_all_to_allw", "", &t, n, -1, RA);
  }
  const int rc = PMPI_Ineighbor_alltoallw(sendbuf, sendcounts, sdispls,
                                          sendtypes, recvbuf, recvcounts,
                                          rdispls, recvtypes, comm, request);
  posted(&c, rc, request);
  return rc;
}
