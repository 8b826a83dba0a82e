/* vqc_mpi_p2p.c: point-to-point: the blocking call a rank is in (told at
 * SIGUSR1 as a "p2p_wait" line), and the non-blocking requests in flight. */
#include "vqc_mpi_internal.h"

/* Point-to-point requests in flight, by handle (vqc_mpi_reqs.h), under
 * lock(): put at MPI_Isend/_Ibsend/_Issend/_Irsend/MPI_Irecv, taken out
 * when a wait or test sets the handle to MPI_REQUEST_NULL (complete), at
 * MPI_Request_free and MPI_Cancel; what is left at MPI_Finalize was never
 * completed (p2p_never_completed). Each entry holds a reference on its
 * communicator's comm_info. */
vqc_reqs p2p_reqs;

/* ---- where a rank waits in point-to-point (for SIGUSR1) */

/* The blocking point-to-point call a thread is in, kept for SIGUSR1: at a
 * hang, on_usr1 writes it into the live record as a "p2p_wait" line
 * (p2p_wait_line), so the deadlock names the call and its peers ("rank 0
 * waits in MPI_Recv from rank 1 (tag 7) at ring.c:31"). Set on the way in
 * and cleared on the way out: plain stores, no system call (its fields
 * first, then `call`, which the handler reads first). One slot per
 * process, and under MPI_THREAD_MULTIPLE one per thread that calls MPI
 * (the first P2P_THREADS of them; later threads share the process's), so
 * a thread's wait is not hidden by another thread's calls. Peers are the
 * communicator's ranks as the program passed them (MPI_ANY_SOURCE,
 * MPI_ANY_TAG as such; P2P_NONE: the call has no such side); the handler
 * turns them into world ranks with ci->world. */
#define P2P_NONE (-1000)
#define P2P_REQS 4 /* a wait's requests told by name; the rest counted */
#define P2P_THREADS 64
typedef struct p2p_slot {
  const char *call;     /* "MPI_Recv", ...; NULL: in none */
  const comm_info *ci;  /* its communicator; NULL: not known */
  int to, send_tag;     /* where it sends, or P2P_NONE */
  int from, recv_tag;   /* whence it receives, or P2P_NONE */
  const site *s;
  /* A wait's: how many of its requests are point-to-point ones in
   * p2p_reqs (above), and copies of the first P2P_REQS of them (their ci
   * held by the table's entries, alive while the wait is in MPI). */
  int nreq;
  vqc_p2p_req req[P2P_REQS];
} p2p_slot;

static p2p_slot process_slot;
/* Threads' slots (MPI_THREAD_MULTIPLE), never freed: a handler may read
 * one while its thread ends. */
static p2p_slot *thread_slots[P2P_THREADS];
static int nthread_slots;
static __thread p2p_slot *my_slot;

/* The calling thread's slot. */
static p2p_slot *slot_mine(void) {
  if (!g.multi) return &process_slot;
  if (my_slot) return my_slot;
  p2p_slot *s = &process_slot;
  lock();
  if (nthread_slots < P2P_THREADS) {
    p2p_slot *t = calloc(1, sizeof *t);
    if (t) {
      thread_slots[nthread_slots] = t;
      __atomic_store_n(&nthread_slots, nthread_slots + 1, __ATOMIC_RELEASE);
      s = t;
    }
  }
  unlock();
  my_slot = s;
  return s;
}

/* A peer as text: "rank 3" (a world rank), "any rank". */
static void peer_text(char *b, size_t n, const comm_info *ci, int r) {
  if (r == MPI_ANY_SOURCE) {
    snprintf(b, n, "any rank");
    return;
  }
  const int w = peer_world(ci, r);
  snprintf(b, n, "rank %d", w >= 0 ? w : r);
}

/* A tag as text: "tag 7", "any tag". */
static void tag_text(char *b, size_t n, int tag) {
  if (tag == MPI_ANY_TAG) snprintf(b, n, "any tag");
  else snprintf(b, n, "tag %d", tag);
}

/* Appends ",\"KEY\":" and world rank of communicator rank r (r itself
 * where ci has no map: the world, or a communicator not recorded), "any"
 * for MPI_ANY_SOURCE, null for another negative rank (MPI_PROC_NULL).
 * Async-signal-safe (plain memory reads). */
static size_t put_peer(char *b, size_t k, size_t cap, const char *key,
                       const comm_info *ci, int r) {
  k = cat(b, k, cap, ",\"");
  k = cat(b, k, cap, key);
  k = cat(b, k, cap, "\":");
  if (r == MPI_ANY_SOURCE) return cat(b, k, cap, "\"any\"");
  if (r < 0 || k + 24 >= cap) return cat(b, k, cap, "null");
  const int w = peer_world(ci, r);
  return k + fmt_int(b + k, w >= 0 ? w : r);
}

static size_t put_tag(char *b, size_t k, size_t cap, const char *key,
                      int tag) {
  k = cat(b, k, cap, ",\"");
  k = cat(b, k, cap, key);
  k = cat(b, k, cap, "\":");
  if (tag == MPI_ANY_TAG) return cat(b, k, cap, "\"any\"");
  if (k + 24 >= cap) return k;
  return k + fmt_int(b + k, tag);
}

/* A wait's point-to-point requests: ,"nrequests":N,"requests":[{"call":
 * "MPI_Irecv","communicator":"world","from":2,"from_comm_rank":2,
 * "recv_tag":7,"file","line","func"},...] (the first P2P_REQS; a send's
 * "to", "to_comm_rank", "send_tag"; "file" and the rest: its I-call's
 * site). Async-signal-safe (plain memory reads). */
static size_t put_requests(const p2p_slot *p, char *b, size_t k,
                           size_t cap) {
  const int n = p->nreq < P2P_REQS ? p->nreq : P2P_REQS;
  k = cat(b, k, cap, ",\"nrequests\":");
  if (k + 24 < cap) k += fmt_int(b + k, p->nreq);
  k = cat(b, k, cap, ",\"requests\":[");
  for (int i = 0; i < n; i++) {
    const vqc_p2p_req *q = &p->req[i];
    const comm_info *ci = q->ci;
    const site *s = q->site;
    k = cat(b, k, cap, i ? ",{\"call\":\"" : "{\"call\":\"");
    k = cat(b, k, cap, q->call);
    k = cat(b, k, cap, "\"");
    if (ci && !ci->skip) {
      k = cat(b, k, cap, ",\"communicator\":\"");
      k = cat(b, k, cap, ci->name);
      k = cat(b, k, cap, "\"");
    }
    k = put_peer(b, k, cap, q->recv ? "from" : "to", ci, q->peer);
    k = put_peer(b, k, cap, q->recv ? "from_comm_rank" : "to_comm_rank", NULL,
                 q->peer);
    k = put_tag(b, k, cap, q->recv ? "recv_tag" : "send_tag", q->tag);
    /* the site's "file":..,"func":.., without its trailing comma */
    if (s && s->len > 1 && k + s->len + 8 < cap) {
      b[k++] = ',';
      memcpy(b + k, s->json, s->len - 1);
      k += s->len - 1;
    }
    k = cat(b, k, cap, "}");
  }
  return cat(b, k, cap, "]");
}

/* The fields of slot p's call (in `name`) after "call": "MPI_Recv",
 * "communicator", peers, a wait's requests, the site's "file":..,"func":..,
 * (with its trailing comma). Async-signal-safe (plain memory reads). */
static size_t put_call(const p2p_slot *p, const char *name, char *b,
                       size_t k, size_t cap) {
  const comm_info *ci = p->ci;
  k = cat(b, k, cap, "\"");
  k = cat(b, k, cap, name);
  k = cat(b, k, cap, "\"");
  if (ci && !ci->skip) { /* names are vqcheck's own: no escapes needed */
    k = cat(b, k, cap, ",\"communicator\":\"");
    k = cat(b, k, cap, ci->name);
    k = cat(b, k, cap, "\"");
  }
  if (p->to != P2P_NONE) {
    k = put_peer(b, k, cap, "to", ci, p->to);
    k = put_peer(b, k, cap, "to_comm_rank", NULL, p->to);
    k = put_tag(b, k, cap, "send_tag", p->send_tag);
  }
  if (p->from != P2P_NONE) {
    k = put_peer(b, k, cap, "from", ci, p->from);
    k = put_peer(b, k, cap, "from_comm_rank", NULL, p->from);
    k = put_tag(b, k, cap, "recv_tag", p->recv_tag);
  }
  if (p->nreq > 0) k = put_requests(p, b, k, cap);
  k = cat(b, k, cap, ",");
  if (p->s && k + p->s->len + 64 < cap) {
    memcpy(b + k, p->s->json, p->s->len); /* "file":..,"func":.., */
    k += p->s->len;
  }
  return k;
}

/* At SIGUSR1: {"event":"p2p_wait","call":"MPI_Recv","communicator":"world",
 * "from":1,"from_comm_rank":1,"recv_tag":7,"file","line","func","t_ns"}
 * (sends: "to", "to_comm_rank", "send_tag"; the waits: the call and the
 * point-to-point requests it waits on, put_requests;
 * "call": null when the rank is in no blocking point-to-point call), so
 * the analysis names the call and its peers. Peers are world ranks ("any":
 * MPI_ANY_SOURCE, MPI_ANY_TAG). Under MPI_THREAD_MULTIPLE, "threads": how
 * many threads are in one; the call is the first's found, and the others'
 * follow in "other_threads": [{"call":..,...},...] (the next P2P_REQS).
 * Async-signal-safe: pwrite only. */
void p2p_wait_line(void) {
  char b[16384];
  const size_t cap = sizeof b;
  size_t k = cat(b, 0, cap, "{\"event\":\"p2p_wait\",\"call\":");
  const p2p_slot *in[P2P_THREADS + 1];
  const char *names[P2P_THREADS + 1];
  int n = 0;
  const int nt = __atomic_load_n(&nthread_slots, __ATOMIC_ACQUIRE);
  for (int i = -1; i < nt; i++) {
    const p2p_slot *p = i < 0 ? &process_slot : thread_slots[i];
    const char *name = p ? __atomic_load_n(&p->call, __ATOMIC_ACQUIRE) : NULL;
    if (!name) continue;
    in[n] = p;
    names[n++] = name;
  }
  if (n == 0) {
    k = cat(b, k, cap, "null,");
  } else {
    k = put_call(in[0], names[0], b, k, cap);
  }
  if (g.multi) { /* the call may be another thread's than the stack's */
    k = cat(b, k, cap, "\"threads\":");
    if (k + 24 < cap) k += fmt_int(b + k, n);
    k = cat(b, k, cap, ",");
  }
  if (n > 1) {
    k = cat(b, k, cap, "\"other_threads\":[");
    for (int i = 1; i < n && i <= P2P_REQS; i++) {
      k = cat(b, k, cap, i > 1 ? ",{\"call\":" : "{\"call\":");
      const size_t before = k;
      k = put_call(in[i], names[i], b, k, cap);
      if (k > before && b[k - 1] == ',') k--; /* the site's comma */
      k = cat(b, k, cap, "}");
    }
    k = cat(b, k, cap, "],");
  }
  k = cat(b, k, cap, "\"t_ns\":");
  if (k + 24 < cap) k += fmt_int(b + k, (long long)now_ns());
  k = cat(b, k, cap, "}\n");
  if (k + 1 < cap) live_write_signal(b, k);
}

/* ---- point-to-point: where a rank waits
 *
 * Blocking point-to-point calls (and the waits, vqc_mpi_wait.c) are not
 * recorded; their call site is resolved (once per site, as for
 * collectives) so that a rank stuck in one, at a hang, has its stack
 * named by file and line
 * (on_usr1 looks the frames up in the site table), and the call itself
 * (with its peers and tags, the communicator) is kept in `p2p` for the
 * "p2p_wait" line on_usr1 writes: "rank 0 waits in MPI_Recv from rank 2
 * (tag 7) at ring.c:10 (main), outside any collective". Each one that
 * returns is a sign of progress (a heartbeat), as a collective's end is:
 * a program that only exchanges messages for longer than --timeout is not
 * a hang. The cost per call is one table lookup, a communicator lookup
 * (none for MPI_COMM_WORLD), six stores and one heartbeat store. */

static const site *p2p_enter(const char *name, MPI_Comm comm, int to,
                             int send_tag, int from, int recv_tag,
                             uintptr_t pc) {
  if (!g.on) return NULL;
  const site *s = site_of(pc);
  p2p_slot *p = slot_mine();
  p->s = s;
  p->ci = comm == MPI_COMM_NULL ? NULL : info_of(comm);
  p->to = to;
  p->send_tag = send_tag;
  p->from = from;
  p->recv_tag = recv_tag;
  p->nreq = 0;
  __atomic_store_n(&p->call, name, __ATOMIC_RELEASE);
  return s;
}

/* A wait (or MPI_Probe's kin) on reqs[0..n): as p2p_enter, with the
 * point-to-point requests among them kept for the "p2p_wait" line (a
 * lookup per request; none while no such request is in flight). */
void p2p_enter_wait(const char *name, const MPI_Request *reqs, int n,
                    uintptr_t pc) {
  if (!g.on) return;
  p2p_slot *p = slot_mine();
  p->s = site_of(pc);
  p->ci = NULL;
  p->to = p->send_tag = p->from = p->recv_tag = P2P_NONE;
  p->nreq = 0;
  if (__atomic_load_n(&p2p_reqs.n, __ATOMIC_RELAXED) > 0 && reqs) {
    lock();
    for (int i = 0; i < n; i++) {
      const vqc_p2p_req *q = vqc_reqs_find(&p2p_reqs, reqs[i]);
      if (!q) continue;
      if (p->nreq < P2P_REQS) p->req[p->nreq] = *q;
      p->nreq++;
    }
    unlock();
  }
  __atomic_store_n(&p->call, name, __ATOMIC_RELEASE);
}

/* (vqc_mpi_internal.h) */
void p2p_where(char *b, size_t n) {
  b[0] = '\0';
  const p2p_slot *p = slot_mine();
  const char *fn = __atomic_load_n(&p->call, __ATOMIC_ACQUIRE);
  if (!fn) return;
  char to[80] = "", from[80] = "", at[800] = "";
  if (p->to != P2P_NONE) {
    char who[32];
    peer_text(who, sizeof who, p->ci, p->to);
    snprintf(to, sizeof to, " to %s (tag %d)", who, p->send_tag);
  }
  if (p->from != P2P_NONE) {
    char who[32], tag[24];
    peer_text(who, sizeof who, p->ci, p->from);
    tag_text(tag, sizeof tag, p->recv_tag);
    snprintf(from, sizeof from, " from %s (%s)", who, tag);
  }
  if (p->s && p->s->file[0])
    snprintf(at, sizeof at, " at %.400s:%d (%.200s)", base_name(p->s->file),
             p->s->line, p->s->func);
  snprintf(b, n, "in %s%s%s%s", fn, to, from, at);
}

/* After an I-call that returned rc with *req: the request kept until it
 * completes. peer and tag as the program passed them. */
static void p2p_posted(const char *name, int rc, const MPI_Request *req,
                       const void *buf, int count, MPI_Comm comm, int peer,
                       int tag, MPI_Datatype dt, bool recv, uintptr_t pc) {
  if (!g.on || rc != MPI_SUCCESS || !req || *req == MPI_REQUEST_NULL) return;
  comm_info *ci = info_of(comm);
  const site *s = site_of(pc);
  race_check(name, buf, count, dt, recv, s, *req);
  if (recv) race_recv_type(name, dt, s);
  msg_sig sig = {.dtype = "", .name = NULL};
  if (recv) sig = msg_sig_of(dt);
  else msg_sent(comm, peer, tag, dt, name, s); /* counted when posted */
  if (ci && ci != &world_info)
    __atomic_add_fetch(&ci->refs, 1, __ATOMIC_RELAXED);
  vqc_p2p_req v = {.call = name, .ci = ci, .peer = peer, .tag = tag,
                   .recv = recv, .site = s, .dtype = sig.dtype,
                   .tname = sig.name};
  race_note(&v, buf, count, dt);
  vqc_p2p_req old;
  bool replaced = false;
  lock();
  const bool kept = vqc_reqs_put(&p2p_reqs, *req, &v, &old, &replaced);
  unlock();
  if (!kept) info_unref(ci); /* out of memory: not told at a wait */
  if (replaced) info_unref(old.ci);
  beat(HB_RUNNING, 0, ""); /* a point-to-point call returned: progress */
}

/* Forgets request r (freed, cancelled or complete) if it is one; a
 * receive completed with status *st (NULL: not complete, or no status)
 * is counted as a message received (vqc_mpi_msgs.c). A send request
 * cancelled (cancel) makes this rank's message counts incomplete. */
/* Takes request r's entry out of p2p_reqs into *q; false when r has none
 * (its ci reference is then the caller's to give back). */
static bool take_req(MPI_Request r, vqc_p2p_req *q) {
  if (__atomic_load_n(&p2p_reqs.n, __ATOMIC_RELAXED) == 0) return false;
  lock();
  const bool had = vqc_reqs_take(&p2p_reqs, r, q);
  unlock();
  return had;
}

static void forget(MPI_Request r, const MPI_Status *st, bool cancel,
                   uintptr_t completed_at) {
  vqc_p2p_req q;
  if (!take_req(r, &q)) return;
  if (q.recv && st && q.ci)
    msg_received(q.ci, (msg_sig){.dtype = q.dtype ? q.dtype : "",
                                 .name = q.tname},
                 st, q.call, q.site);
  if (!q.recv && completed_at) race_completed(&q, completed_at);
  if (cancel && !q.recv)
    msgs_uncounted("a send request was cancelled (MPI_Cancel)");
  info_unref(q.ci);
}

/* A receive request let go with MPI_Request_free before it completed (at
 * the call returning to pc): a finding on the live record, once per call
 * site. MPI lets it complete unseen, so nothing tells the program when
 * the message has landed in its buffer (MPICH's own tests free one only
 * when not built for strict MPI). It also makes this rank's message
 * counts incomplete (vqc_mpi_msgs.c). */
static void freed_receive(const vqc_p2p_req *q, uintptr_t pc) {
  msgs_uncounted("a receive request was let go (MPI_Request_free)");
  const site *s = site_of(pc);
  if (!site_first(s, REPORTED_FREED)) return;
  const site *from = q->site ? q->site : &overflow_site;
  char file[1100], func[520], at[700], who[64], tag[32];
  json_esc(file, sizeof file, s->file);
  json_esc(func, sizeof func, s->func);
  char esc_from[600];
  json_esc(esc_from, sizeof esc_from, base_name(from->file));
  snprintf(at, sizeof at, "%.400s:%d", esc_from, from->line);
  peer_text(who, sizeof who, q->ci, q->peer);
  tag_text(tag, sizeof tag, q->tag);
  char b[4096];
  const int k = snprintf(b, sizeof b,
      "{\"event\":\"finding\",\"finding\":{\"kind\":\"deadlock\","
      "\"step\":-1,\"ranks\":[%d],\"site\":{\"file\":\"%.400s\","
      "\"line\":%d,\"func\":\"%.200s\"},\"message\":\"rank %d let its "
      "%s from %s (%s) (started at %s) go with MPI_Request_free before it "
      "completed: MPI completes it unseen, so nothing tells the program when "
      "the message has landed in its buffer (complete it with a wait or "
      "test instead)\",\"detail\":{\"call\":\"%s\",\"freed_active\":true,"
      "\"started_at\":\"%s\"}}}\n",
      g.rank, file, s->line, func, g.rank, q->call, who, tag, at, q->call,
      at);
  if (k > 0 && (size_t)k < sizeof b) live_write(b, (size_t)k);
}

/* MPI_Request_free (returning to pc): request r let go. */
void p2p_forget(MPI_Request r, uintptr_t pc) {
  vqc_p2p_req q;
  if (!take_req(r, &q)) return;
  if (q.recv) freed_receive(&q, pc);
  info_unref(q.ci);
}

void p2p_cancelled(MPI_Request r) { forget(r, NULL, true, 0); }

/* (vqc_mpi_internal.h) */
void p2p_done(const req_copy *was, const MPI_Request *reqs, int n,
              int rc, const MPI_Status *st, const int *idx, int nidx,
              bool all, uintptr_t pc) {
  if (!was->r) return;
  const bool all_done = all && (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS);
  for (int i = 0; i < n; i++) {
    if (was->r[i] == MPI_REQUEST_NULL) continue;
    if (reqs[i] != MPI_REQUEST_NULL) {
      /* still a handle: complete only if a started persistent request
       * that this call completed (MPI leaves those inactive, not NULL) */
      bool listed = all_done;
      for (int j = 0; idx && j < nidx && !listed; j++) listed = idx[j] == i;
      if (!listed || reqs[i] != was->r[i] ||
          !p2p_started_persistent(was->r[i]))
        continue;
    }
    /* request i's status: st[i] (idx NULL), or st[j] where idx[j] == i */
    const MPI_Status *si = NULL;
    if (st && !idx) si = &st[i];
    for (int j = 0; st && idx && j < nidx && !si; j++)
      if (idx[j] == i) si = &st[j];
    bool ok = rc == MPI_SUCCESS;
    if (rc == MPI_ERR_IN_STATUS && si) ok = si->MPI_ERROR == MPI_SUCCESS;
    forget(was->r[i], ok ? si : NULL, false, ok ? pc : 0);
  }
}

/* The call returned: progress. */
int p2p_leave(int rc) {
  if (!g.on) return rc;
  __atomic_store_n(&slot_mine()->call, NULL, __ATOMIC_RELEASE);
  beat(HB_RUNNING, 0, "");
  return rc;
}

/* A blocking send: counted once MPI took it (vqc_mpi_msgs.c). */
static int sent(int rc, const char *fn, MPI_Comm comm, int dest, int tag,
                MPI_Datatype dt, const site *s) {
  if (s && rc == MPI_SUCCESS) msg_sent(comm, dest, tag, dt, fn, s);
  return p2p_leave(rc);
}

/* A blocking receive into *st (the program's status, or ours where it
 * passed MPI_STATUS_IGNORE: its source and tag name the channel). */
static void received(int rc, const char *fn, MPI_Comm comm,
                     MPI_Datatype dt, const MPI_Status *st, const site *s) {
  if (s && rc == MPI_SUCCESS)
    msg_received(info_of(comm), msg_sig_of(dt), st, fn, s);
}

/* One of the blocking sends: told as `label` while the rank is in it,
 * its buffer checked, sent with `send`, counted as `fn` (vqc_mpi_msgs.c).
 * pc: the MPI_* wrapper's return address (the call site). */
typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
static int blocking_send(const char *fn, const char *label, send_fn send,
                         const void *buf, int count, MPI_Datatype datatype,
                         int dest, int tag, MPI_Comm comm, uintptr_t pc) {
  const site *s = p2p_enter(label, comm, dest, tag, P2P_NONE, P2P_NONE, pc);
  race_check(fn, buf, count, datatype, false, s, MPI_REQUEST_NULL);
  return sent(send(buf, count, datatype, dest, tag, comm), fn, comm, dest,
              tag, datatype, s);
}

/* MPI_Send as MPI_Ssend when g.sync_sends (vqcheck watch's default): MPI
 * may buffer a standard send or not, as it likes; a program that needs it
 * to (two ranks that send to each other before either receives) works
 * with small messages and hangs with larger ones or another MPI. Run
 * synchronously, it hangs here, where the deadlock is told (its call
 * named "MPI_Send (synchronous)"). The same for MPI_Isend's completion. */
int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest,
             int tag, MPI_Comm comm) {
  const bool sync = g.on && g.sync_sends;
  return blocking_send("MPI_Send", sync ? "MPI_Send (synchronous)" : "MPI_Send",
                       sync ? PMPI_Ssend : PMPI_Send, buf, count, datatype,
                       dest, tag, comm, RA);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm) {
  return blocking_send("MPI_Ssend", "MPI_Ssend", PMPI_Ssend, buf, count,
                       datatype, dest, tag, comm, RA);
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm) {
  return blocking_send("MPI_Bsend", "MPI_Bsend", PMPI_Bsend, buf, count,
                       datatype, dest, tag, comm, RA);
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm) {
  return blocking_send("MPI_Rsend", "MPI_Rsend", PMPI_Rsend, buf, count,
                       datatype, dest, tag, comm, RA);
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source,
             int tag, MPI_Comm comm, MPI_Status *status) {
  const site *s =
      p2p_enter("MPI_Recv", comm, P2P_NONE, P2P_NONE, source, tag, RA);
  race_check("MPI_Recv", buf, count, datatype, true, s, MPI_REQUEST_NULL);
  race_recv_type("MPI_Recv", datatype, s);
  MPI_Status mine;
  MPI_Status *st = status == MPI_STATUS_IGNORE && s ? &mine : status;
  const int rc = PMPI_Recv(buf, count, datatype, source, tag, comm, st);
  received(rc, "MPI_Recv", comm, datatype, st, s);
  return p2p_leave(rc);
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 int dest, int sendtag, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status) {
  const site *s =
      p2p_enter("MPI_Sendrecv", comm, dest, sendtag, source, recvtag, RA);
  race_check("MPI_Sendrecv", sendbuf, sendcount, sendtype, false, s,
             MPI_REQUEST_NULL);
  race_check("MPI_Sendrecv", recvbuf, recvcount, recvtype, true, s,
             MPI_REQUEST_NULL);
  race_recv_type("MPI_Sendrecv", recvtype, s);
  MPI_Status mine;
  MPI_Status *st = status == MPI_STATUS_IGNORE && s ? &mine : status;
  const int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag,
                               recvbuf, recvcount, recvtype, source, recvtag,
                               comm, st);
  received(rc, "MPI_Sendrecv", comm, recvtype, st, s);
  return sent(rc, "MPI_Sendrecv", comm, dest, sendtag, sendtype, s);
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype,
                         int dest, int sendtag, int source, int recvtag,
                         MPI_Comm comm, MPI_Status *status) {
  const site *s = p2p_enter("MPI_Sendrecv_replace", comm, dest, sendtag,
                            source, recvtag, RA);
  race_check("MPI_Sendrecv_replace", buf, count, datatype, true, s,
             MPI_REQUEST_NULL);
  MPI_Status mine;
  MPI_Status *st = status == MPI_STATUS_IGNORE && s ? &mine : status;
  const int rc = PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag,
                                       source, recvtag, comm, st);
  received(rc, "MPI_Sendrecv_replace", comm, datatype, st, s);
  return sent(rc, "MPI_Sendrecv_replace", comm, dest, sendtag, datatype, s);
}

/* ---- matched probes: MPI_Mprobe and MPI_Improbe take a message out of
 * matching; MPI_Mrecv and MPI_Imrecv receive it by its handle. Each
 * message matched and not yet received is kept with the communicator,
 * source and tag the probe found, so that its receive is counted like any
 * other (vqc_mpi_msgs.c); past MATCHED_MAX at once, or a handle not seen
 * probed, this rank's counts are incomplete. */

#define MATCHED_MAX 64
static struct matched {
  MPI_Message m;
  MPI_Comm comm;
  int source, tag;
} matched[MATCHED_MAX];
static int nmatched;

static void matched_keep(MPI_Message m, MPI_Comm comm, const MPI_Status *st) {
  if (!g.on || m == MPI_MESSAGE_NULL || m == MPI_MESSAGE_NO_PROC) return;
  lock();
  const bool room = nmatched < MATCHED_MAX;
  if (room)
    matched[nmatched++] = (struct matched){m, comm, st->MPI_SOURCE,
                                           st->MPI_TAG};
  unlock();
  if (!room) {
    msgs_uncounted("more than 64 matched messages (MPI_Mprobe) at once");
    record_incomplete("VQC_EUNSUPPORTED", "it held more than %d matched "
                      "messages (MPI_Mprobe) at once, so its messages were "
                      "not all paired with other ranks'", MATCHED_MAX);
  }
}

/* Message m's entry taken out into *out; false when it has none. */
static bool matched_take(MPI_Message m, struct matched *out) {
  bool found = false;
  lock();
  for (int i = 0; i < nmatched && !found; i++)
    if (matched[i].m == m) {
      *out = matched[i];
      matched[i] = matched[--nmatched];
      found = true;
    }
  unlock();
  return found;
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message,
               MPI_Status *status) {
  p2p_enter("MPI_Mprobe", comm, P2P_NONE, P2P_NONE, source, tag, RA);
  MPI_Status mine;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;
  const int rc = PMPI_Mprobe(source, tag, comm, message, st);
  if (rc == MPI_SUCCESS) matched_keep(*message, comm, st);
  return p2p_leave(rc);
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag,
                MPI_Message *message, MPI_Status *status) {
  MPI_Status mine;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;
  const int rc = PMPI_Improbe(source, tag, comm, flag, message, st);
  if (rc == MPI_SUCCESS && *flag) matched_keep(*message, comm, st);
  return rc;
}

/* The probe of the message *message, taken out into *mt, for a matched
 * receive; false when none (MPI_MESSAGE_NO_PROC, or a message not
 * seen probed: this rank's counts are then incomplete). */
static bool matched_receive(const MPI_Message *message, const char *why,
                            struct matched *mt) {
  const MPI_Message m = message ? *message : MPI_MESSAGE_NULL;
  if (!g.on || m == MPI_MESSAGE_NO_PROC) return false;
  if (matched_take(m, mt)) return true;
  msgs_uncounted(why);
  return false;
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype datatype,
              MPI_Message *message, MPI_Status *status) {
  struct matched mt;
  const bool known = matched_receive(
      message, "it receives a matched message it was not seen probe "
               "(MPI_Mrecv)", &mt);
  if (!known) return PMPI_Mrecv(buf, count, datatype, message, status);
  const site *s = site_of(RA);
  race_recv_type("MPI_Mrecv", datatype, s);
  MPI_Status mine;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;
  const int rc = PMPI_Mrecv(buf, count, datatype, message, st);
  received(rc, "MPI_Mrecv", mt.comm, datatype, st, s);
  return rc;
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype datatype,
               MPI_Message *message, MPI_Request *request) {
  struct matched mt;
  const bool known = matched_receive(
      message, "it receives a matched message it was not seen probe "
               "(MPI_Imrecv)", &mt);
  const int rc = PMPI_Imrecv(buf, count, datatype, message, request);
  /* in flight like an MPI_Irecv from the probed source and tag: a wait
   * names it, its completion counts the message from its status */
  if (known)
    p2p_posted("MPI_Imrecv", rc, request, buf, count, mt.comm, mt.source,
               mt.tag, datatype, true, RA);
  return rc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  p2p_enter("MPI_Probe", comm, P2P_NONE, P2P_NONE, source, tag, RA);
  return p2p_leave(PMPI_Probe(source, tag, comm, status));
}

/* ---- non-blocking point-to-point: kept until complete (p2p_reqs), so
 * that a wait names what it waits for ("rank 0 waits in MPI_Wait for
 * MPI_Irecv from rank 2 (tag 7)") and MPI_Finalize what was never
 * completed. The cost per I-call: a call-site lookup, a communicator
 * lookup (none for MPI_COMM_WORLD), one hash insertion and a heartbeat
 * store; per wait, one hash lookup per request. */

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm, MPI_Request *request) {
  const bool sync = g.on && g.sync_sends; /* see MPI_Send */
  const int rc =
      sync ? PMPI_Issend(buf, count, datatype, dest, tag, comm, request)
           : PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
  p2p_posted(sync ? "MPI_Isend (synchronous)" : "MPI_Isend", rc, request,
             buf, count, comm, dest, tag, datatype, false, RA);
  return rc;
}

int MPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest,
               int tag, MPI_Comm comm, MPI_Request *request) {
  const int rc = PMPI_Ibsend(buf, count, datatype, dest, tag, comm, request);
  p2p_posted("MPI_Ibsend", rc, request, buf, count, comm, dest, tag,
             datatype, false, RA);
  return rc;
}

int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest,
               int tag, MPI_Comm comm, MPI_Request *request) {
  const int rc = PMPI_Issend(buf, count, datatype, dest, tag, comm, request);
  p2p_posted("MPI_Issend", rc, request, buf, count, comm, dest, tag,
             datatype, false, RA);
  return rc;
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest,
               int tag, MPI_Comm comm, MPI_Request *request) {
  const int rc = PMPI_Irsend(buf, count, datatype, dest, tag, comm, request);
  p2p_posted("MPI_Irsend", rc, request, buf, count, comm, dest, tag,
             datatype, false, RA);
  return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source,
              int tag, MPI_Comm comm, MPI_Request *request) {
  const int rc = PMPI_Irecv(buf, count, datatype, source, tag, comm, request);
  p2p_posted("MPI_Irecv", rc, request, buf, count, comm, source, tag,
             datatype, true, RA);
  return rc;
}
