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
 *       "finished","status":"VQC_OK","step":-1} in MPI_Finalize (with
 *       "unchecked":why and "unchecked_status":"VQC_EIO" when a record of
 *       the checks could not be written, rank-<r>.rma.jsonl or .p2p.jsonl,
 *       or "VQC_EUNSUPPORTED" when it spawned processes: the verdict is
 *       then incomplete); {"event":
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
 *            (vqc_mpi_coll.c, "the w-form and the neighbourhood collectives");
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
 *            that communicator's collectives. An intercommunicator's
 *            group is both of its groups (world ranks ascending), its
 *            name "inter-<hash of them>.<k>" (MPI_Intercomm_create is
 *            collective over each side's own communicator, named apart),
 *            and only the op and reduction of its collectives are
 *            recorded (the groups' counts, types and roots differ by
 *            design). Communicators of one rank are not recorded;
 *   any_site true: MPI pairs calls by their order on the communicator, and
 *            a program may call one collective from different lines on
 *            different ranks (the root's branch and the others'), so the
 *            analysis tells the site but does not compare it;
 *   file, line, func  the call site: the return address (__builtin_
 *            return_address, or the stack unwound past the MPI libraries
 *            when the caller is one: a Fortran binding, whose PMPI_* calls
 *            vqc_mpi_fortran.c routes here) resolved once per site
 *            with libdw where the program has debug information (libdw.so.1
 *            opened at run time: no build dependency), else dladdr: the
 *            object's name, line 0, "symbol+0xoffset" (the same on every
 *            rank of one build).
 * A non-blocking collective is entered at its I-call and done when MPI_Wait,
 * MPI_Test or their any/some/all forms complete its request; one still
 * pending at MPI_Finalize gets a "failed" line (status VQC_EINVAL).
 * Non-blocking point-to-point requests (MPI_Isend, _Ibsend, _Issend,
 * _Irsend, MPI_Irecv, and persistent requests once started) are not
 * recorded; they are kept by handle
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
 * (no system call), two heartbeat stores, two coarse clock reads and a
 * table lookup (docs/mpi.md, "What it costs").
 * The attribute it keeps on each communicator (a keyval of its own, copied
 * by nobody) holds the communicator's name and counters.
 *
 * The parts, one job each (vqc_mpi_internal.h: what they share, and the
 * hot path's helpers, inline); only the MPI_* wrappers are exported:
 *   vqc_mpi.c          this contract, the state, MPI_Init and MPI_Finalize
 *                      (what was never completed is a finding there);
 *   vqc_mpi_coll.c     the collective wrappers (blocking, non-blocking,
 *                      the w-form and the neighbourhood collectives);
 *   vqc_mpi_record.c   the live record and its lines;
 *   vqc_mpi_sites.c    call sites: a return address made file:line;
 *   vqc_mpi_types.c    datatypes and reductions as a ledger line says them;
 *   vqc_mpi_comms.c    communicators: names, groups, counters, and the
 *                      calls that make one;
 *   vqc_mpi_buffers.c  the checks of a collective's own buffers;
 *   vqc_mpi_strict.c   strict mode's agreement before data moves;
 *   vqc_mpi_p2p.c      point-to-point: where a rank waits, its requests;
 *   vqc_mpi_wait.c     requests' completion (MPI_Wait, MPI_Test, ...) and
 *                      the non-blocking collectives pending until then;
 *   vqc_mpi_signals.c  the signal handlers (SIGUSR1's stack, a fault);
 *   vqc_mpi_errors.c   MPI errors: the rank's last words;
 *   vqc_mpi_reqs.c     the table of point-to-point requests by handle;
 *   vqc_mpi_races.c    the buffers of requests in flight: changed or
 *                      used again before their wait;
 *   vqc_mpi_msgs.c     messages counted per channel, written at
 *                      MPI_Finalize to rank-<r>.p2p.jsonl for the
 *                      analysis to pair sends with receives;
 *   vqc_mpi_persist.c  persistent point-to-point requests (_init,
 *                      MPI_Start): kept, and in flight from each start;
 *   vqc_mpi_rma.c      RMA windows: their collectives, their operations
 *                      kept until completed, origin buffers checked;
 *   vqc_mpi_rma_record.c  rank-<r>.rma.jsonl, each completed operation's
 *                      accesses, for the analysis to find races across
 *                      ranks (harness/run/rma_races.h);
 *   vqc_mpi_io.c       MPI-IO: a file's collectives;
 *   vqc_mpi_fortran.c  the Fortran bindings' PMPI_* calls routed through
 *                      the wrappers (at load). */
#include "vqc_mpi_internal.h"

#include <link.h>

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

static void unlink_file(const char *suffix) {
  char path[4200];
  snprintf(path, sizeof path, "%s/rank-%d%s", g.dir, g.rank, suffix);
  (void)unlink(path);
}

/* Whether the constructor made rank-<r>.preloaded (no process of this
 * rank number had). */
static bool made_marker;

/* The heartbeat's shared mapping (rank-<r>.heartbeat of g.dir, g.rank),
 * made once: at load (exclusive: a new file only), else at MPI_Init. */
static void heartbeat_open(bool exclusive) {
  if (g.hb) return;
  const int hb = open_file(".heartbeat", O_RDWR | O_CREAT |
                                             (exclusive ? O_EXCL : O_TRUNC));
  if (hb >= 0 && ftruncate(hb, HB_SIZE) == 0) {
    void *m = mmap(NULL, HB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, hb, 0);
    if (m != MAP_FAILED) g.hb = m;
  }
  if (hb >= 0) close(hb);
}

/* Loaded into a rank of a watched job (its launcher's rank variable
 * set): rank-<r>.preloaded in the run directory, so that `vqcheck watch`
 * can tell a program whose ranks all ended before MPI_Init (a program
 * bug, such as an MPI call before it) from an interposer that never
 * loaded (an environment problem). And the rank's heartbeat, in state
 * "setting up" (HB_SETUP), with the SIGUSR1 stack dump set up first: a
 * rank that hangs before MPI_Init returns (in the program, or in MPI_Init
 * itself: a peer that never started, a network that never connects) is
 * then a hang by the watcher's rule like any other, where before nothing
 * was watched until MPI_Init returned and such a job hung vqcheck watch
 * with it. The launcher and its daemons, which load it too, have no rank
 * variable. */
/* Whether the program itself (the main executable) links an MPI library:
 * a process a rank starts (system("cp ..."): the shell, cp) inherits the
 * preload and the rank variable, and must not take the rank's heartbeat
 * or stack dump. */
static int needs_mpi(struct dl_phdr_info *info, size_t size, void *out) {
  (void)size;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = (const ElfW(Dyn) *)(info->dlpi_addr +
                                info->dlpi_phdr[i].p_vaddr);
  const char *strtab = NULL;
  for (const ElfW(Dyn) *d = dyn; d && d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_STRTAB) {
      const uintptr_t p = (uintptr_t)d->d_un.d_ptr;
      strtab = (const char *)(p < info->dlpi_addr ? info->dlpi_addr + p : p);
    }
  for (const ElfW(Dyn) *d = dyn; strtab && d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_NEEDED &&
        strncmp(strtab + d->d_un.d_val, "libmpi", 6) == 0)
      *(bool *)out = true;
  return 1; /* the first object is the main program: no further */
}

static bool program_links_mpi(void) {
  bool yes = false;
  dl_iterate_phdr(needs_mpi, &yes);
  return yes;
}

__attribute__((constructor)) static void preloaded(void) {
  fortran_route(); /* vqc_mpi_fortran.c: before any Fortran MPI call */
  const char *dir = getenv("VQC_WATCH_DIR");
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  if (!r) r = getenv("PMIX_RANK");
  if (!r) r = getenv("PMI_RANK");
  if (!dir || !dir[0] || strlen(dir) >= sizeof g.dir || !r || !r[0] ||
      strlen(r) > 9 || strspn(r, "0123456789") != strlen(r))
    return;
  snprintf(g.dir, sizeof g.dir, "%s", dir);
  g.rank = atoi(r); /* MPI_Init tells it again */
  g.pid = (uint32_t)getpid();
  int fd = open_file(".preloaded", O_WRONLY | O_CREAT | O_EXCL);
  made_marker = fd >= 0;
  if (fd < 0) fd = open_file(".preloaded", O_WRONLY | O_CREAT);
  if (fd >= 0) close(fd);
  if (!program_links_mpi()) return;
  /* The heartbeat, exclusively (a second process with this rank number
   * leaves it to the first); then the stack dump, set up before the
   * heartbeat's first beat lets the watcher ask for it. */
  heartbeat_open(true);
  if (!g.hb) return;
  void *fr[2];
  (void)backtrace(fr, 2); /* loads libgcc_s now, not in a handler */
  g.stacks_fd = open_file(".stacks.txt", O_WRONLY | O_CREAT | O_APPEND);
  install_stack_signal();
  beat(HB_SETUP, 0, "");
}

/* The process ends while MPI is still initialised (a rank that returns
 * from main or calls exit() without MPI_Finalize): its record says so,
 * so the report names what happened instead of guessing at a kill. Not
 * after MPI_Abort, which says it itself. */
static bool aborting;
static void at_exit(void) {
  if (!g.on || aborting) return;
  static const char line[] =
      "{\"event\":\"lost\",\"by\":\"libvqcheck_mpi\",\"why\":\"it exited "
      "without calling MPI_Finalize (main returned, or exit() was called, "
      "while MPI was initialised)\"}\n";
  live_write(line, sizeof line - 1);
  g.on = false;
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
  if (g.on) {
    aborting = true;
    const site *s = site_of(RA);
    char file[1100], func[520], b[2048];
    json_esc(file, sizeof file, base_name(s->file));
    json_esc(func, sizeof func, s->func);
    const int k = snprintf(b, sizeof b,
        "{\"event\":\"lost\",\"by\":\"libvqcheck_mpi\",\"why\":\"it called "
        "MPI_Abort (error code %d) at %.400s:%d (%.200s)\"}\n", errorcode,
        file, s->line, func);
    if (k > 0 && (size_t)k < sizeof b) live_write(b, (size_t)k);
  }
  return PMPI_Abort(comm, errorcode);
}

/* A process started by MPI_Comm_spawn (or _multiple) has an
 * MPI_COMM_WORLD of its own, whose rank numbers the job's ranks have too:
 * its record would overwrite theirs (the watcher then read a corrupt
 * record and wrote no report). It is not recorded, and what its loading
 * made under its rank number (a heartbeat, a stack file, the marker: only
 * where no rank of the job had that number) is taken back. */
static void spawned_unwatched(void) {
  if (g.stacks_fd >= 0) close(g.stacks_fd);
  g.stacks_fd = -1;
  if (g.hb) { /* made at load, exclusively: no rank of the job has it */
    munmap(g.hb, HB_SIZE);
    g.hb = NULL;
    unlink_file(".heartbeat");
    unlink_file(".stacks.txt");
  }
  if (made_marker) unlink_file(".preloaded");
  fprintf(stderr, "libvqcheck_mpi: pid %ld was started by MPI_Comm_spawn: "
          "it is not checked (its MPI_COMM_WORLD is not the job's)\n",
          (long)getpid());
}

/* This rank's live record exists already (the watcher starts from an
 * empty run directory): another process of the job wrote it. An MPI
 * program's rank of the same number (a second mpiexec under the same
 * vqcheck watch, one after the other: its record would have replaced the
 * first job's, and a bug found only there was green) leaves that record
 * as it is and adds a "lost" line to it, so that the verdict is never
 * green and says why; the Python bridge's record (--mpi on a torch job)
 * is left alone. Either way this process is not recorded. */
static void record_taken(void) {
  char head[512] = "";
  const int fd = open_file(".live.jsonl", O_RDONLY);
  if (fd >= 0) {
    const ssize_t n = pread(fd, head, sizeof head - 1, 0);
    head[n > 0 ? n : 0] = '\0';
    close(fd);
  }
  if (!strstr(head, "\"mpi\":true")) {
    fprintf(stderr, "libvqcheck_mpi: rank %d: its live record is the "
            "Python bridge's; the MPI interposer does not record this "
            "rank\n", g.rank);
    return;
  }
  char line[600];
  const int k = snprintf(line, sizeof line,
      "{\"event\":\"lost\",\"by\":\"libvqcheck_mpi\",\"why\":\"another MPI "
      "job's rank %d (pid %ld) started under the same vqcheck watch after "
      "this one; it was not checked (run each mpiexec under a vqcheck "
      "watch of its own)\"}\n", g.rank, (long)getpid());
  const int out = open_file(".live.jsonl", O_WRONLY | O_APPEND);
  if (out >= 0 && k > 0 && (size_t)k < sizeof line)
    (void)!write(out, line, (size_t)k);
  if (out >= 0) close(out);
  fprintf(stderr, "libvqcheck_mpi: rank %d (pid %ld) of another MPI job "
          "under the same vqcheck watch: it is not checked (run each "
          "mpiexec under a vqcheck watch of its own)\n", g.rank,
          (long)getpid());
}

static void started(int provided) {
  const char *dir = getenv("VQC_WATCH_DIR");
  if (!dir || !dir[0] || strlen(dir) >= sizeof g.dir) return;
  int init = 0;
  PMPI_Initialized(&init);
  if (!init) return;
  MPI_Comm parent = MPI_COMM_NULL;
  if (PMPI_Comm_get_parent(&parent) == MPI_SUCCESS &&
      parent != MPI_COMM_NULL) {
    if (g.dir[0]) spawned_unwatched(); /* g.dir: set at load */
    return;
  }
  snprintf(g.dir, sizeof g.dir, "%s", dir);
  g.multi = provided == MPI_THREAD_MULTIPLE;
  g.pid = (uint32_t)getpid();
  const int loaded_as = g.rank;
  PMPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
  if (g.hb && g.rank != loaded_as) { /* not the launcher's rank number */
    munmap(g.hb, HB_SIZE);
    g.hb = NULL;
    if (g.stacks_fd >= 0) close(g.stacks_fd);
    g.stacks_fd = -1;
  }
  PMPI_Comm_size(MPI_COMM_WORLD, &g.size);
  PMPI_Comm_group(MPI_COMM_WORLD, &g.world_group);
  init_basics();
  overflow_site.len = strlen(overflow_site.json);
  if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, info_delete, &g.keyval,
                              NULL) != MPI_SUCCESS)
    g.keyval = MPI_KEYVAL_INVALID;
  g.live_fd = open_file(".live.jsonl", O_RDWR | O_CREAT | O_EXCL);
  if (g.live_fd < 0 && errno == EEXIST) { /* the run directory was empty */
    record_taken();
    return;
  }
  if (g.live_fd < 0) {
    fprintf(stderr, "libvqcheck_mpi: rank %d: cannot write its live record "
            "into %s: %s; this rank is not recorded\n", g.rank, g.dir,
            strerror(errno));
    return;
  }
  rec_open();
  heartbeat_open(false); /* unless made at load */
  char host[256] = "", esc[520];
  gethostname(host, sizeof host - 1);
  json_esc(esc, sizeof esc, host);
  char line[760], tmo[48] = "";
  /* The watcher's --timeout: the deadline a hang is measured against. */
  const char *ts = getenv("VQC_WATCH_TIMEOUT");
  const double timeout_s = ts ? strtod(ts, NULL) : 0.0;
  if (timeout_s > 0 && timeout_s < 1e9)
    snprintf(tmo, sizeof tmo, ",\"timeout_s\":%g", timeout_s);
  const char *sync = getenv("VQC_MPI_SYNC_SENDS");
  g.sync_sends = sync && strcmp(sync, "1") == 0;
  int n = snprintf(line, sizeof line, "{\"event\":\"start\",\"rank\":%d,"
                   "\"size\":%d,\"pid\":%ld,\"host\":\"%s\","
                   "\"mpi\":true%s,\"sync_sends\":%s,\"heads\":%d}\n",
                   g.rank, g.size, (long)getpid(), esc, tmo,
                   g.sync_sends ? "true" : "false", rec_heads());
  if (n > 0 && (size_t)n < sizeof line) live_write(line, (size_t)n);
  beat(HB_RUNNING, 0, "");
  /* Warm backtrace() up (it loads libgcc_s once) before a handler needs it. */
  void *fr[2];
  (void)backtrace(fr, 2);
  if (g.stacks_fd < 0)
    g.stacks_fd = open_file(".stacks.txt", O_WRONLY | O_CREAT | O_APPEND);
  install_error_handler();
  atexit(at_exit);
  const char *strict = getenv("VQC_MPI_STRICT");
  g.strict = strict && strcmp(strict, "1") == 0;
  if ((g.strict || g.sync_sends) &&
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
      g.rank, file, c->s->line, func, g.rank, op_base(c),
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
  /* MPI_Init waits for every rank (a collective over the world, in
   * effect): a rank stuck in it is told so, not as in the program. */
  beat(HB_IN_COLLECTIVE, 0, "MPI_Init");
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) started(MPI_THREAD_SINGLE);
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  beat(HB_IN_COLLECTIVE, 0, "MPI_Init_thread"); /* as MPI_Init's */
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
  int world_peer = peer_world(ci, q->peer);
  if (world_peer < 0) world_peer = q->peer;
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
      if (q.recv) msgs_pending_recv(q.ci, q.peer, q.tag);
      info_unref(q.ci);
    }
    vqc_reqs_clear(&p2p_reqs);
    unlock();
    persist_clear();
    rma_finalize(); /* windows never freed: operations never completed */
    io_finalize();
    /* Non-blocking collectives never completed: a finding. */
    call c;
    while (pending_pop(&c)) {
      call_line(&c, now_ns(), "failed", "VQC_EINVAL");
      never_completed(&c);
    }
    msgs_write(); /* rank-<r>.p2p.jsonl: the messages, per channel */
    leaks_write(); /* objects never freed: the "leaks" line */
    /* The end line; with what went unchecked, if anything did (a record
     * of the checks that could not be written, processes spawned), so
     * the verdict says so and is never green. */
    const char *status = NULL;
    const char *lost = record_incomplete_why(&status);
    char fin[900], why[700];
    json_esc(why, sizeof why, lost ? lost : "");
    const int k = snprintf(fin, sizeof fin, "{\"event\":\"finished\","
                           "\"status\":\"VQC_OK\",\"step\":-1%s%s%s%s%s}\n",
                           lost ? ",\"unchecked\":\"" : "", why,
                           lost ? "\",\"unchecked_status\":\"" : "",
                           lost ? status : "", lost ? "\"" : "");
    if (k > 0 && (size_t)k < sizeof fin) live_write(fin, (size_t)k);
    rec_close();
    beat(HB_FINISHED, world_info.seq, "");
    if (world_info.shadow != MPI_COMM_NULL)
      PMPI_Comm_free(&world_info.shadow);
    g.on = false;
  }
  return PMPI_Finalize();
}
