/* p2p_messages.c: sends paired with receives (p2p_messages.h says what is
 * found and why the pairing holds). */
#include "p2p_messages.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rundir.h"
#include "trace.h" /* vqc_trace_read_line */

#define MAX_FINDINGS 32 /* findings told; the rest counted in a warning */

/* One message of a channel as a file tells it ("first", "other"). */
typedef struct at {
  bool has;
  char call[40], dtype[24], type[64], file[256], func[128];
  int line;
  uint64_t ordinal;
} at;

enum { SEND, RECV, PENDING };

/* The tag of a many-tags channel (interpose/vqc_mpi_msgs.c TAG_MANY). */
#define TAG_MANY (-2)

/* What pairing needs of a channel's "first" or "other" message; the rest
 * (call, call site) is read again from the file for a finding only. */
typedef struct brief {
  bool has;
  char dtype[24];
  uint64_t ordinal;
} brief;

/* One line of a file (small: a job of many ranks has many). src/dst are
 * world ranks (PENDING: dst the file's rank, src the peer or -1 for any;
 * tag -1 for any). */
typedef struct ent {
  int kind;
  const char *comm; /* interned: names[] */
  int src, dst, tag;
  uint64_t count, untyped;
  char seqhash[20];
  brief first, other;
  int rank;         /* whose file, and its line: for the details */
  long lineno;
} ent;

/* The ranks' files hold at most this many channel lines in all; past it
 * nothing is paired (a warning says so): about 100 bytes each. */
#define MAX_ENTRIES ((size_t)1 << 21)

/* Communicator names, interned (a job has few). */
static char **names;
static size_t n_names;

static const char *intern(const char *name) {
  for (size_t i = 0; i < n_names; i++)
    if (strcmp(names[i], name) == 0) return names[i];
  char **grown = realloc(names, (n_names + 1) * sizeof *names);
  if (!grown) return NULL;
  names = grown;
  if (!(names[n_names] = strdup(name))) return NULL;
  return names[n_names++];
}

static void free_names(void) {
  for (size_t i = 0; i < n_names; i++) free(names[i]);
  free(names);
  names = NULL;
  n_names = 0;
}

typedef struct rank_file {
  bool read;        /* the file was there and parsed */
  bool uncounted;   /* its counts are incomplete */
  char why[200];    /* the head line's "uncounted" */
  int64_t messages;
} rank_file;

static void copy_str(char *dst, size_t n, const json_t *v) {
  snprintf(dst, n, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static void read_at(const json_t *o, at *a) {
  memset(a, 0, sizeof *a);
  if (!json_is_object(o)) return;
  a->has = true;
  copy_str(a->call, sizeof a->call, json_object_get(o, "call"));
  copy_str(a->dtype, sizeof a->dtype, json_object_get(o, "dtype"));
  copy_str(a->type, sizeof a->type, json_object_get(o, "type"));
  copy_str(a->file, sizeof a->file, json_object_get(o, "file"));
  copy_str(a->func, sizeof a->func, json_object_get(o, "func"));
  const json_t *v = json_object_get(o, "line");
  a->line = json_is_integer(v) ? (int)json_integer_value(v) : 0;
  v = json_object_get(o, "ordinal");
  a->ordinal = json_is_integer(v) && json_integer_value(v) >= 0
                   ? (uint64_t)json_integer_value(v) : 0;
}

static void read_brief(const json_t *o, brief *b) {
  memset(b, 0, sizeof *b);
  if (!json_is_object(o)) return;
  b->has = true;
  copy_str(b->dtype, sizeof b->dtype, json_object_get(o, "dtype"));
  const json_t *v = json_object_get(o, "ordinal");
  b->ordinal = json_is_integer(v) && json_integer_value(v) >= 0
                   ? (uint64_t)json_integer_value(v) : 0;
}

static uint64_t u64(const json_t *v) {
  return json_is_integer(v) && json_integer_value(v) >= 0
             ? (uint64_t)json_integer_value(v) : 0;
}

/* The entries of rank r's file appended to *all; false (and a warning)
 * when it cannot be read. */
static bool read_rank(const char *dir, int r, rank_file *rf, ent **all,
                      size_t *n, size_t *cap, json_t *warnings,
                      char *unchecked, size_t nu) {
  char path[4200];
  snprintf(path, sizeof path, "%s/rank-%d.p2p.jsonl", dir, r);
  FILE *f = fopen(path, "r");
  if (!f) return false; /* the rank did not reach MPI_Finalize */
  char *buf = NULL, why[600] = "";
  size_t bcap = 0, len = 0;
  bool head = false;
  for (long lineno = 1; !why[0]; lineno++) {
    if (vqc_trace_read_line(f, path, lineno, &buf, &bcap, &len) != VQC_OK) {
      snprintf(why, sizeof why, "line %ld cannot be read", lineno);
      break;
    }
    if (len == 0) break;
    json_error_t je;
    json_t *j = json_loadb(buf, len, 0, &je);
    if (!json_is_object(j)) {
      snprintf(why, sizeof why, "line %ld is not a JSON object", lineno);
      json_decref(j);
      break;
    }
    if (!head) {
      head = true;
      rf->uncounted = json_is_string(json_object_get(j, "uncounted"));
      copy_str(rf->why, sizeof rf->why, json_object_get(j, "uncounted"));
      rf->messages = (int64_t)u64(json_object_get(j, "messages"));
      json_decref(j);
      continue;
    }
    const char *d = json_string_value(json_object_get(j, "dir"));
    const json_t *peer = json_object_get(j, "peer"),
                 *tag = json_object_get(j, "tag");
    if (!d || !json_is_integer(peer) || !json_is_integer(tag) ||
        !json_is_string(json_object_get(j, "comm"))) {
      snprintf(why, sizeof why, "line %ld lacks dir, comm, peer or tag",
               lineno);
      json_decref(j);
      break;
    }
    if (*n == MAX_ENTRIES) {
      snprintf(why, sizeof why, "the ranks' files hold more than %zu "
               "channels in all, more than the analysis pairs", MAX_ENTRIES);
      json_decref(j);
      break;
    }
    if (*n == *cap) {
      const size_t c = *cap ? 2 * *cap : 256;
      ent *e = realloc(*all, c * sizeof *e);
      if (!e) {
        snprintf(why, sizeof why, "no memory");
        json_decref(j);
        break;
      }
      *all = e;
      *cap = c;
    }
    ent *e = &(*all)[*n];
    memset(e, 0, sizeof *e);
    e->kind = strcmp(d, "send") == 0 ? SEND
              : strcmp(d, "recv") == 0 ? RECV : PENDING;
    e->comm = intern(json_string_value(json_object_get(j, "comm")));
    e->rank = r;
    e->lineno = lineno;
    const int p = (int)json_integer_value(peer);
    e->src = e->kind == SEND ? r : p;
    e->dst = e->kind == SEND ? p : r;
    e->tag = (int)json_integer_value(tag);
    e->count = u64(json_object_get(j, "count"));
    e->untyped = u64(json_object_get(j, "untyped"));
    copy_str(e->seqhash, sizeof e->seqhash, json_object_get(j, "seqhash"));
    read_brief(json_object_get(j, "first"), &e->first);
    read_brief(json_object_get(j, "other"), &e->other);
    json_decref(j);
    if (!e->comm) {
      snprintf(why, sizeof why, "no memory");
      break;
    }
    (*n)++;
  }
  free(buf);
  fclose(f);
  if (!head && !why[0]) snprintf(why, sizeof why, "it is empty");
  if (why[0]) {
    char msg[5000];
    snprintf(msg, sizeof msg, "rank %d's point-to-point messages were not "
             "checked: %s: %s", r, path, why);
    json_array_append_new(warnings, json_string(msg));
    if (!unchecked[0])
      snprintf(unchecked, nu, "rank %d's point-to-point messages were not "
               "paired with other ranks' (rank-%d.p2p.jsonl: %s)", r, r, why);
    return false;
  }
  rf->read = true;
  return true;
}

/* The full "first" and "other" of e, read again from its rank's file
 * (for a finding's message); what cannot be read stays empty. */
static void details(const char *dir, const ent *e, at *first, at *other) {
  memset(first, 0, sizeof *first);
  memset(other, 0, sizeof *other);
  char path[4200];
  snprintf(path, sizeof path, "%s/rank-%d.p2p.jsonl", dir, e->rank);
  FILE *f = fopen(path, "r");
  if (!f) return;
  char *buf = NULL;
  size_t cap = 0, len = 0;
  for (long lineno = 1; lineno <= e->lineno; lineno++) {
    if (vqc_trace_read_line(f, path, lineno, &buf, &cap, &len) != VQC_OK ||
        len == 0)
      break;
    if (lineno < e->lineno) continue;
    json_t *j = json_loadb(buf, len, 0, NULL);
    read_at(json_object_get(j, "first"), first);
    read_at(json_object_get(j, "other"), other);
    json_decref(j);
  }
  free(buf);
  fclose(f);
  if (!first->call[0]) snprintf(first->call, sizeof first->call, "a call");
  if (!first->dtype[0]) snprintf(first->dtype, sizeof first->dtype, "%s",
                                 e->first.dtype);
}

static int cmp_ent(const void *pa, const void *pb) {
  const ent *a = pa, *b = pb;
  int c = a->comm == b->comm ? 0 : strcmp(a->comm, b->comm);
  if (c) return c;
  if (a->src != b->src) return a->src < b->src ? -1 : 1;
  if (a->dst != b->dst) return a->dst < b->dst ? -1 : 1;
  if (a->tag != b->tag) return a->tag < b->tag ? -1 : 1;
  return a->kind - b->kind;
}

/* " on communicator NAME", or "" for the world. */
static const char *on_comm(const char *comm, char *buf, size_t n) {
  if (strcmp(comm, "world") == 0) return "";
  snprintf(buf, n, " on communicator %s", comm);
  return buf;
}

/* "file:line (func)" of a, or its function alone without a file. */
static void where(const at *a, char *buf, size_t n) {
  const char *base = strrchr(a->file, '/');
  base = base ? base + 1 : a->file;
  if (base[0]) snprintf(buf, n, "%s:%d (%s)", base, a->line, a->func);
  else snprintf(buf, n, "%s", a->func[0] ? a->func : "an unknown place");
}

/* "float32 (MPI_FLOAT)", or "a derived type of float32". */
static void type_text(const at *a, char *buf, size_t n) {
  if (a->type[0]) snprintf(buf, n, "%s (%s)", a->dtype, a->type);
  else snprintf(buf, n, "a derived type of %s", a->dtype);
}

static void set_site(vqc_finding *x, const at *a) {
  vqc_finding_set_site(x, (vqc_site){a->file, a->line, a->func});
}

static json_t *base_detail(const char *what, const ent *e) {
  return json_pack("{s:s,s:i,s:i,s:i,s:s}", "p2p", what, "from", e->src,
                   "to", e->dst, "tag", e->tag, "communicator", e->comm);
}

/* Whether rank e->dst's own finding already tells a receive it never
 * completed that could have been for e (same communicator, source and
 * tag, or wildcards; e->tag TAG_MANY: any tag). */
static bool pending_for(const ent *es, size_t n, const ent *e) {
  for (size_t i = 0; i < n; i++) {
    const ent *p = &es[i];
    if (p->kind == PENDING && p->dst == e->dst &&
        strcmp(p->comm, e->comm) == 0 && (p->src < 0 || p->src == e->src) &&
        (p->tag < 0 || e->tag == TAG_MANY || p->tag == e->tag))
      return true;
  }
  return false;
}

/* Whether both sides of e (its source's and destination's files) were
 * read and counted every message. */
static bool both_counted(const rank_file *rf, int ranks, const ent *e) {
  return e->src >= 0 && e->src < ranks && e->dst >= 0 && e->dst < ranks &&
         rf[e->src].read && rf[e->dst].read && !rf[e->src].uncounted &&
         !rf[e->dst].uncounted;
}

/* x (its message made) completed as a message never received: its ranks,
 * its site (the first send's), its detail (tag null when all_tags), and
 * added to fresh. */
static void add_never_received(vqc_finding *x, const ent *s, const at *first,
                               uint64_t sent, uint64_t received,
                               bool all_tags, vqc_findings *fresh) {
  vqc_finding_add_rank(x, s->src);
  vqc_finding_add_rank(x, s->dst);
  set_site(x, first);
  json_decref(x->detail);
  x->detail = base_detail("never_received", s);
  if (all_tags) json_object_set_new(x->detail, "tag", json_null());
  json_object_set_new(x->detail, "sent", json_integer((json_int_t)sent));
  json_object_set_new(x->detail, "received",
                      json_integer((json_int_t)received));
  json_object_set_new(x->detail, "call", json_string(first->call));
  (void)vqc_findings_add(fresh, x);
}

static void lost(const char *dir, const ent *s, uint64_t received,
                 vqc_findings *fresh) {
  at first, other;
  details(dir, s, &first, &other);
  char w[420], c[300];
  where(&first, w, sizeof w);
  const uint64_t missing = s->count - received;
  vqc_finding x;
  if (received == 0)
    vqc_finding_init(&x, VQC_FINDING_DEADLOCK, -1,
        "rank %d sent %" PRIu64 " message%s to rank %d (tag %d)%s with %s at "
        "%s that rank %d never received: both ranks reached MPI_Finalize "
        "with %s unmatched (MPI requires every message to be received; a "
        "message too large to be sent eagerly blocks its sender forever)",
        s->src, s->count, s->count == 1 ? "" : "s", s->dst, s->tag,
        on_comm(s->comm, c, sizeof c), first.call, w, s->dst,
        s->count == 1 ? "it" : "them");
  else
    vqc_finding_init(&x, VQC_FINDING_DEADLOCK, -1,
        "rank %d sent %" PRIu64 " messages to rank %d (tag %d)%s, the first "
        "with %s at %s, and rank %d received only %" PRIu64 " of them: %"
        PRIu64 " reached MPI_Finalize unmatched (MPI requires every message "
        "to be received; a message too large to be sent eagerly blocks its "
        "sender forever)",
        s->src, s->count, s->dst, s->tag, on_comm(s->comm, c, sizeof c),
        first.call, w, s->dst, received, missing);
  add_never_received(&x, s, &first, s->count, received, false, fresh);
}

/* rank src's messages to rank dst on comm, compared in all: either side
 * counted some of them in a many-tags channel (the interposer's, past its
 * channels kept one by one: a program that numbers its tags), so its
 * counts per tag are not the other side's. s: the pair's first send
 * channel (its call and site name the finding). */
static void lost_in_all(const char *dir, const ent *s, uint64_t sent,
                        uint64_t received, vqc_findings *fresh) {
  at first, other;
  details(dir, s, &first, &other);
  char w[420], c[300];
  where(&first, w, sizeof w);
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_DEADLOCK, -1,
      "rank %d sent %" PRIu64 " message%s to rank %d%s (over more tags than "
      "vqcheck pairs one by one; the first with %s at %s), and rank %d "
      "received only %" PRIu64 " of them: %" PRIu64 " reached MPI_Finalize "
      "unmatched (MPI requires every message to be received; a message too "
      "large to be sent eagerly blocks its sender forever)",
      s->src, sent, sent == 1 ? "" : "s", s->dst,
      on_comm(s->comm, c, sizeof c), first.call, w, s->dst, received,
      sent - received);
  add_never_received(&x, s, &first, sent, received, true, fresh);
}


/* What side e had at message o (first, or other from its ordinal on). */
static const at *at_ordinal(const ent *e, const at *first, const at *other,
                            uint64_t o) {
  return e->other.has && o >= e->other.ordinal ? other : first;
}

/* Element types of s and r disagree: the first message known to differ. */
static void mistyped(const char *dir, const ent *s, const ent *r,
                     vqc_findings *fresh) {
  uint64_t o = 0;
  if (strcmp(s->first.dtype, r->first.dtype) == 0) {
    o = UINT64_MAX;
    if (s->other.has) o = s->other.ordinal;
    if (r->other.has && r->other.ordinal < o) o = r->other.ordinal;
    if (o == UINT64_MAX) o = 0; /* a later difference the hashes saw */
  }
  at s_first, s_other, r_first, r_other;
  details(dir, s, &s_first, &s_other);
  details(dir, r, &r_first, &r_other);
  const at *sa = at_ordinal(s, &s_first, &s_other, o),
           *ra = at_ordinal(r, &r_first, &r_other, o);
  char c[300], ws[420], wr[420], ts[100], tr[100];
  where(sa, ws, sizeof ws);
  where(ra, wr, sizeof wr);
  type_text(sa, ts, sizeof ts);
  type_text(ra, tr, sizeof tr);
  vqc_finding x;
  if (strcmp(sa->dtype, ra->dtype) != 0)
    vqc_finding_init(&x, VQC_FINDING_COLLECTIVE_MISMATCH, -1,
        "rank %d received message %" PRIu64 " of tag %d from rank %d%s as %s "
        "with %s at %s, but rank %d sent it as %s with %s at %s: the bytes "
        "are read as another type (MPI checks only that they fit)",
        r->dst, o + 1, r->tag, r->src, on_comm(r->comm, c, sizeof c), tr,
        ra->call, wr, s->src, ts, sa->call, ws);
  else
    vqc_finding_init(&x, VQC_FINDING_COLLECTIVE_MISMATCH, -1,
        "rank %d received some of the %" PRIu64 " messages of tag %d from "
        "rank %d%s (the first at %s) as another element type than rank %d "
        "sent them (the first at %s): the bytes are read as another type "
        "(MPI checks only that they fit)",
        r->dst, r->count, r->tag, r->src, on_comm(r->comm, c, sizeof c), wr,
        s->src, ws);
  vqc_finding_add_rank(&x, s->src);
  vqc_finding_add_rank(&x, s->dst);
  set_site(&x, ra);
  json_decref(x.detail);
  x.detail = base_detail("type_mismatch", s);
  json_object_set_new(x.detail, "message", json_integer((json_int_t)o + 1));
  json_object_set_new(x.detail, "sent_dtype", json_string(sa->dtype));
  json_object_set_new(x.detail, "received_dtype", json_string(ra->dtype));
  json_object_set_new(x.detail, "sent_call", json_string(sa->call));
  json_object_set_new(x.detail, "received_call", json_string(ra->call));
  json_object_set_new(x.detail, "send_site", json_string(ws));
  (void)vqc_findings_add(fresh, &x);
}

int64_t vqc_p2p_messages_recorded(const char *dir, int ranks) {
  if (ranks <= 0) ranks = vqc_run_dir_rank_span(dir, ".p2p.jsonl");
  int64_t total = 0;
  for (int r = 0; r < ranks; r++) {
    char path[4200], line[1024];
    snprintf(path, sizeof path, "%s/rank-%d.p2p.jsonl", dir, r);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(line, sizeof line, f)) {
      json_t *j = json_loads(line, 0, NULL);
      total += (int64_t)u64(json_object_get(j, "messages"));
      json_decref(j);
    }
    fclose(f);
  }
  return total;
}

void vqc_p2p_messages(const char *dir, int ranks, vqc_findings *fresh,
                      json_t *warnings, int64_t *messages, char *unchecked,
                      size_t nu) {
  if (messages) *messages = 0;
  if (nu > 0) unchecked[0] = '\0';
  if (ranks <= 0) ranks = vqc_run_dir_rank_span(dir, ".p2p.jsonl");
  if (ranks <= 0) return;
  rank_file *rf = calloc((size_t)ranks, sizeof *rf);
  if (!rf) return;
  ent *es = NULL;
  size_t n = 0, cap = 0;
  for (int r = 0; r < ranks; r++)
    (void)read_rank(dir, r, &rf[r], &es, &n, &cap, warnings, unchecked, nu);
  /* What was not paired, and why (the interposer's reason). */
  int told_uncounted = 0;
  for (int r = 0; r < ranks; r++) {
    if (!rf[r].read || !rf[r].uncounted) continue;
    if (told_uncounted++ == 8) {
      json_array_append_new(warnings, json_string(
          "more ranks' point-to-point messages were not paired (the first "
          "8 are told)"));
      break;
    }
    char msg[400];
    snprintf(msg, sizeof msg, "rank %d's point-to-point messages were not "
             "paired with its peers': %s", r, rf[r].why);
    json_array_append_new(warnings, json_string(msg));
  }
  if (n > 0) qsort(es, n, sizeof *es, cmp_ent); /* es is NULL when n is 0 */
  int told = 0, more = 0;
  int64_t compared = 0;
  for (size_t i = 0; i < n;) {
    /* The messages of one (communicator, source, destination): compared
     * in all when either side has a many-tags channel (TAG_MANY). */
    size_t k = i;
    bool many = false;
    uint64_t sent = 0, got = 0;
    const ent *first_send = NULL;
    for (; k < n && es[k].src == es[i].src && es[k].dst == es[i].dst &&
           strcmp(es[k].comm, es[i].comm) == 0;
         k++) {
      if (es[k].kind == PENDING) continue;
      many = many || es[k].tag == TAG_MANY;
      if (es[k].kind == SEND) {
        sent += es[k].count;
        if (!first_send) first_send = &es[k];
      } else {
        got += es[k].count;
      }
    }
    if (many) {
      const ent any = {.comm = es[i].comm, .src = es[i].src,
                       .dst = es[i].dst, .tag = TAG_MANY};
      const bool paired = both_counted(rf, ranks, &any);
      if (paired) compared += (int64_t)(got < sent ? got : sent);
      if (paired && first_send && got < sent && !pending_for(es, n, &any)) {
        if (told < MAX_FINDINGS)
          lost_in_all(dir, first_send, sent, got, fresh), told++;
        else
          more++;
      }
      i = k;
      continue;
    }
    /* One channel: its send (if any), then its receive (if any). */
    const ent *s = NULL, *r = NULL;
    size_t j = i;
    for (; j < n && es[j].kind != PENDING && es[j].src == es[i].src &&
           es[j].dst == es[i].dst && es[j].tag == es[i].tag &&
           strcmp(es[j].comm, es[i].comm) == 0;
         j++)
      if (es[j].kind == SEND) s = &es[j];
      else r = &es[j];
    if (j == i) j = i + 1; /* a PENDING line: used by pending_for only */
    i = j;
    const ent *e = s ? s : r;
    if (!e || !both_counted(rf, ranks, e)) continue;
    const uint64_t received = r ? r->count : 0;
    if (s) compared += (int64_t)(received < s->count ? received : s->count);
    if (s && received < s->count && !pending_for(es, n, s)) {
      if (told < MAX_FINDINGS) lost(dir, s, received, fresh), told++;
      else more++;
    }
    if (s && r && s->untyped == 0 && r->untyped == 0 && s->first.has &&
        r->first.has && s->first.dtype[0] && r->first.dtype[0] &&
        (strcmp(s->first.dtype, r->first.dtype) != 0 ||
         (s->count == r->count && strcmp(s->seqhash, r->seqhash) != 0))) {
      if (told < MAX_FINDINGS) mistyped(dir, s, r, fresh), told++;
      else more++;
    }
  }
  if (more > 0) {
    char msg[200];
    snprintf(msg, sizeof msg, "%d more findings of lost or mistyped "
             "point-to-point messages not told (the first %d are)", more,
             MAX_FINDINGS);
    json_array_append_new(warnings, json_string(msg));
  }
  if (messages) *messages = compared;
  free(es);
  free_names();
  free(rf);
}
