/* vqc_mpi_msgs.c: point-to-point messages counted per channel, so that the
 * analysis can pair each rank's sends with their receiver's receives
 * (harness/run/p2p_messages.c) and find
 *   - a message sent and never received before MPI_Finalize (MPI requires
 *     every message to be received; eagerly sent small ones let the program
 *     end "cleanly" with the message lost, larger ones hang the sender);
 *   - a message received as another type than it was sent (MPI_INT sent,
 *     MPI_FLOAT received: the same bytes read as another type; MPI checks
 *     only the size).
 *
 * A channel is (communicator, peer, tag, direction): the peer a world rank,
 * the tag the message's (a receive's status says which source and tag a
 * wildcard receive matched). MPI keeps the messages of one channel in order
 * (non-overtaking), so the k-th message a rank sends on a channel is the
 * k-th its peer receives on it: each side keeps, per channel,
 *   count     the messages (a send counted when posted, a receive when it
 *             completes, from its status; a cancelled one not at all);
 *   seqhash   the sum over messages k of mix(k, hash(element type)), equal
 *             on both sides when every message's element type is;
 *   untyped   messages whose type is not compared (MPI_BYTE, MPI_PACKED,
 *             mixed structs, types without an element name): the hashes
 *             are then not compared either;
 *   first     the first message's call, element type and call site, and
 *   other     the first message whose element type differs from the
 *             first's, with its ordinal (so the first difference between
 *             the two sides can be named).
 * Nothing is written per message. At MPI_Finalize the table is written to
 * rank-<r>.p2p.jsonl (a temporary name, then renamed): a head line
 * {"rank","size","channels","messages","uncounted"} and one line per
 * channel {"dir","comm","peer","tag","count","untyped","seqhash","first",
 * "other"}. A rank that never reaches MPI_Finalize writes none, and the
 * analysis pairs only ranks that both did.
 *
 * What is not counted makes the rank's counts incomplete ("uncounted"
 * says why, and the analysis then compares no count of a channel of that
 * rank): matched receives (MPI_Mrecv, MPI_Imrecv), a send request
 * cancelled, a persistent request that could not be kept, a table grown
 * past MSGS_MAX channels and MANY_MAX many-tags ones (channel(), below)
 * or out of memory. (Persistent requests are
 * counted at each start and completion: vqc_mpi_persist.c.)
 *
 * The cost per message: a type lookup (a scan of the basic types; a
 * derived type is decoded), a string hash of its element name and one
 * probe of an open-addressing table, under lock(). */
#include "vqc_mpi_internal.h"

#define MSGS_MAX (1u << 16) /* channels kept one by one (about 40 MiB at
                               * most); past it, new ones are counted in a
                               * many-tags channel of their communicator,
                               * peer and direction (tag TAG_MANY), MANY_MAX
                               * of those at most; past those: uncounted */
#define MANY_MAX (1u << 12)
#define TAG_MANY (-2) /* the file's tag of a many-tags channel */

typedef struct msg_at {
  const char *call;   /* "MPI_Send", ... (a literal); NULL: none */
  msg_sig sig;
  const site *s;
  uint64_t ordinal;   /* other's: which message (0-based) */
} msg_at;

typedef struct chan {
  bool used;          /* false: a free slot */
  uint64_t comm_key;  /* hash of the communicator's name (a comm_info may
                         be freed and its address reused) */
  const char *comm;   /* its name (interned, never freed) */
  int peer, tag;
  bool recv;
  uint64_t count, untyped, seqhash;
  msg_at first, other;
} chan;

static chan *chans;
static size_t cap_chans, n_chans;
static const char *uncounted; /* why this rank's counts are incomplete */

/* Communicator names, interned: a channel outlives its communicator. */
#define MAX_NAMES 4096
static const char *names[MAX_NAMES];
static int n_names;

static uint64_t fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static const char *intern(const char *name) {
  for (int i = n_names - 1; i >= 0; i--)
    if (strcmp(names[i], name) == 0) return names[i];
  if (n_names == MAX_NAMES) return "(a communicator)";
  char *c = strdup(name);
  if (!c) return "(a communicator)";
  names[n_names++] = c;
  return c;
}

void msgs_uncounted(const char *why) {
  if (!g.on) return;
  lock();
  if (!uncounted) uncounted = why;
  unlock();
}

msg_sig msg_sig_of(MPI_Datatype dt) {
  msg_sig s = {.dtype = "", .name = NULL};
  if (dt == MPI_DATATYPE_NULL || dt == MPI_BYTE || dt == MPI_PACKED) {
    s.name = dt == MPI_BYTE ? "MPI_BYTE" : dt == MPI_PACKED ? "MPI_PACKED"
                                                             : NULL;
    return s;
  }
  const basic *b = basic_of(dt);
  if (b) {
    s.dtype = b->dtype;
    s.name = b->name;
    return s;
  }
  s.dtype = type_element(dt); /* a derived type's one element, or "" */
  return s;
}

static size_t slot_of(uint64_t key, int peer, int tag, bool recv) {
  uint64_t h = mix(key ^ ((uint64_t)(uint32_t)peer << 1) ^
                   ((uint64_t)(uint32_t)tag << 33) ^ (recv ? 1u : 0u));
  return (size_t)h & (cap_chans - 1);
}

static bool grow(void) {
  const size_t cap = cap_chans ? 2 * cap_chans : 256;
  if (cap > 4 * MSGS_MAX) return false;
  chan *t = calloc(cap, sizeof *t);
  if (!t) return false;
  chan *old = chans;
  const size_t old_cap = cap_chans;
  chans = t;
  cap_chans = cap;
  for (size_t i = 0; i < old_cap; i++) {
    if (!old[i].used) continue;
    size_t j = slot_of(old[i].comm_key, old[i].peer, old[i].tag, old[i].recv);
    while (chans[j].used) j = (j + 1) & (cap_chans - 1);
    chans[j] = old[i];
  }
  free(old);
  return true;
}

/* The channel of (ci, peer, tag, recv): found, or made while fewer than
 * `most` channels are kept; NULL past that. Under lock(). */
static chan *find_or_make(comm_info *ci, int peer, int tag, bool recv,
                          size_t most) {
  const char *name = ci == &world_info ? "world" : ci->name;
  if (!ci->msgs_key) ci->msgs_key = fnv(name) | 1;
  if (cap_chans == 0 && !grow()) return NULL;
  size_t j = slot_of(ci->msgs_key, peer, tag, recv);
  while (chans[j].used) {
    chan *c = &chans[j];
    if (c->comm_key == ci->msgs_key && c->peer == peer && c->tag == tag &&
        c->recv == recv)
      return c;
    j = (j + 1) & (cap_chans - 1);
  }
  if (n_chans >= most) return NULL;
  if (n_chans + 1 > cap_chans / 2) {
    if (!grow()) return NULL;
    return find_or_make(ci, peer, tag, recv, most); /* slots moved */
  }
  chan *c = &chans[j];
  memset(c, 0, sizeof *c);
  c->used = true;
  c->comm = intern(name);
  c->comm_key = ci->msgs_key;
  c->peer = peer;
  c->tag = tag;
  c->recv = recv;
  n_chans++;
  return c;
}

/* The channel a message on (ci, peer, tag) is counted in, or NULL (no
 * room at all: uncounted). A program that numbers its tags (a tag per
 * step) makes a channel per message: past MSGS_MAX the new tags of a
 * communicator and peer share one many-tags channel, and the analysis
 * compares that pair's messages in all (every tag) instead of tag by tag
 * (harness/run/p2p_messages.c), so such a program is still checked (it
 * was "not everything was checked"). Under lock(). */
static chan *channel(comm_info *ci, int peer, int tag, bool recv) {
  chan *c = find_or_make(ci, peer, tag, recv, MSGS_MAX);
  if (!c) c = find_or_make(ci, peer, TAG_MANY, recv, MSGS_MAX + MANY_MAX);
  if (!c && !uncounted) {
    uncounted = "more point-to-point channels (communicator, peer, tag) "
                "than the interposer keeps";
    record_incomplete("VQC_EUNSUPPORTED", "it used more point-to-point "
                      "channels (communicator, peer, tag) than the "
                      "interposer keeps (%u, and %u for many tags), so its "
                      "messages were not all paired with other ranks'",
                      MSGS_MAX, MANY_MAX);
  }
  return c;
}

/* One message on (ci, peer as a rank of ci, tag). */
static void count(comm_info *ci, int peer, int tag, bool recv,
                  const char *fn, msg_sig sig, const site *s) {
  if (!ci || ci->skip || peer < 0) return;
  peer = peer_world(ci, peer);
  if (peer < 0) return; /* no map: cannot pair it */
  lock();
  chan *c = channel(ci, peer, tag, recv);
  if (!c) {
    unlock();
    return;
  }
  const uint64_t k = c->count++;
  if (k == 0) c->first = (msg_at){.call = fn, .sig = sig, .s = s};
  if (!sig.dtype[0]) {
    c->untyped++;
  } else {
    c->seqhash += mix(k * 0x9e3779b97f4a7c15ull ^ fnv(sig.dtype));
    if (!c->other.call && k > 0 &&
        strcmp(sig.dtype, c->first.sig.dtype) != 0)
      c->other = (msg_at){.call = fn, .sig = sig, .s = s, .ordinal = k};
  }
  unlock();
}

void msg_sent(MPI_Comm comm, int dest, int tag, MPI_Datatype dt,
              const char *fn, const site *s) {
  if (!g.on || dest == MPI_PROC_NULL) return;
  count(info_of(comm), dest, tag, false, fn, msg_sig_of(dt), s);
}

void msg_sent_on(comm_info *ci, int dest, int tag, msg_sig sig,
                 const char *fn, const site *s) {
  if (!g.on || dest == MPI_PROC_NULL) return;
  count(ci, dest, tag, false, fn, sig, s);
}

void msg_received(comm_info *ci, msg_sig sig, const MPI_Status *st,
                  const char *fn, const site *s) {
  /* (a cancelled receive never gets here: MPI_Cancel takes its request
   * out of the table, and a blocking receive cannot be cancelled) */
  if (!g.on || !st || st->MPI_SOURCE == MPI_PROC_NULL ||
      st->MPI_SOURCE < 0)
    return;
  count(ci, st->MPI_SOURCE, st->MPI_TAG, true, fn, sig, s);
}

/* Receive requests never completed, told at MPI_Finalize. */
#define MAX_PENDING 64
static struct {
  const char *comm;
  int peer, tag; /* world rank or -1 (any); tag or -1 (any) */
} pending[MAX_PENDING];
static int n_pending;

void msgs_pending_recv(const comm_info *ci, int peer, int tag) {
  if (!g.on || !ci || ci->skip || n_pending == MAX_PENDING) return;
  peer = peer_world(ci, peer); /* -1: any, or not told */
  pending[n_pending].comm = intern(ci == &world_info ? "world" : ci->name);
  pending[n_pending].peer = peer;
  pending[n_pending].tag = tag == MPI_ANY_TAG ? -1 : tag;
  n_pending++;
}

/* ---- rank-<r>.p2p.jsonl at MPI_Finalize */

static size_t put_at(char *b, size_t k, size_t cap, const char *key,
                     const msg_at *m, bool ordinal) {
  const site *s = m->s ? m->s : &overflow_site;
  char file[1100], func[520];
  json_esc(file, sizeof file, s->file);
  json_esc(func, sizeof func, s->func);
  int w = snprintf(b + k, cap - k,
                   ",\"%s\":{\"call\":\"%s\",\"dtype\":\"%s\",\"type\":%s%s%s,"
                   "\"file\":\"%.400s\",\"line\":%d,\"func\":\"%.200s\"",
                   key, m->call, m->sig.dtype, m->sig.name ? "\"" : "",
                   m->sig.name ? m->sig.name : "null",
                   m->sig.name ? "\"" : "", file, s->line, func);
  if (w < 0 || (size_t)w >= cap - k) return cap;
  k += (size_t)w;
  if (ordinal) {
    w = snprintf(b + k, cap - k, ",\"ordinal\":%llu",
                 (unsigned long long)m->ordinal);
    if (w < 0 || (size_t)w >= cap - k) return cap;
    k += (size_t)w;
  }
  return k + 1 < cap ? (b[k] = '}', k + 1) : cap;
}

/* path could not be written (err): this rank's messages are not paired,
 * and its end line says so. */
static void not_written(const char *path, int err) {
  fprintf(stderr, "libvqcheck_mpi: rank %d: cannot write %s: %s; its "
          "point-to-point messages are not checked\n", g.rank, path,
          strerror(err));
  record_incomplete("VQC_EIO", "its point-to-point messages were not "
                    "checked: rank-%d.p2p.jsonl could not be written (%s)",
                    g.rank, strerror(err));
}

void msgs_write(void) {
  if (!g.on) return;
  char path[4200], tmp[4300];
  snprintf(path, sizeof path, "%s/rank-%d.p2p.jsonl", g.dir, g.rank);
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "we");
  if (!f) {
    not_written(tmp, errno);
    return;
  }
  lock();
  uint64_t messages = 0;
  for (size_t i = 0; i < cap_chans; i++)
    if (chans[i].used) messages += chans[i].count;
  char why[600] = "null";
  if (uncounted) {
    char esc[500];
    json_esc(esc, sizeof esc, uncounted);
    snprintf(why, sizeof why, "\"%s\"", esc);
  }
  fprintf(f, "{\"rank\":%d,\"size\":%d,\"channels\":%zu,\"messages\":%llu,"
          "\"uncounted\":%s}\n", g.rank, g.size, n_chans,
          (unsigned long long)messages, why);
  char line[4096];
  for (int i = 0; i < n_pending; i++) {
    char comm[420];
    json_esc(comm, sizeof comm, pending[i].comm);
    fprintf(f, "{\"dir\":\"pending_recv\",\"comm\":\"%s\",\"peer\":%d,"
            "\"tag\":%d}\n", comm, pending[i].peer, pending[i].tag);
  }
  for (size_t i = 0; i < cap_chans; i++) {
    const chan *c = &chans[i];
    if (!c->used) continue;
    char comm[420];
    json_esc(comm, sizeof comm, c->comm);
    int w = snprintf(line, sizeof line,
                     "{\"dir\":\"%s\",\"comm\":\"%s\",\"peer\":%d,\"tag\":%d,"
                     "\"count\":%llu,\"untyped\":%llu,\"seqhash\":\"%016llx\"",
                     c->recv ? "recv" : "send", comm, c->peer, c->tag,
                     (unsigned long long)c->count,
                     (unsigned long long)c->untyped,
                     (unsigned long long)c->seqhash);
    if (w < 0 || (size_t)w >= sizeof line) continue;
    size_t k = put_at(line, (size_t)w, sizeof line - 3, "first", &c->first,
                      false);
    if (c->other.call)
      k = put_at(line, k, sizeof line - 3, "other", &c->other, true);
    if (k >= sizeof line - 3) continue;
    line[k++] = '}';
    line[k++] = '\n';
    fwrite(line, 1, k, f);
  }
  unlock();
  const bool ok = fflush(f) == 0 && !ferror(f);
  if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
    not_written(path, errno);
    unlink(tmp);
  }
}
