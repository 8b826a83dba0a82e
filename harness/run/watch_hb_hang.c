/* watch_hb_hang.c: the deadlock `vqcheck watch` tells from the heartbeats
 * (watch_hb_finding) when no rank left a hang marker: the watcher decided
 * that a rank made no progress for --timeout (watch_heartbeat.h has the
 * rule and vqc_hb_culprits) and handed over every rank as it knew it then
 * (vqc_watch_ctx's hb). Each rank is placed by that and by the stack it
 * dumped when asked (vqc_watch_stack_read, watch_hang.c); the culprits are
 * told first, then the others, grouped by place. Split from watch_job.c
 * (its file comment has the whole story; the rules are
 * vqc_watch_more_findings's, watch_job.h). */
#include "watch_job.h"
#include "ledger_analysis.h" /* vqc_signal_text, vqc_live_scan */
#include "watch_heartbeat.h"
#include "watch_job_internal.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* ---- a hang from the heartbeats: no progress for --timeout */

/* Whether the MPI interposer loaded into rank r (rank-<r>.preloaded). */
static bool mpi_preloaded(const char *dir, int r) {
  char path[4200];
  struct stat st;
  snprintf(path, sizeof path, "%s/rank-%d.preloaded", dir, r);
  return lstat(path, &st) == 0;
}

/* Where one rank is, from what the watcher knew at the decision and the
 * stack the rank dumped then (watch_hb_finding). */
enum {
  HB_STOPPED,    /* process state T or t */
  HB_COLLECTIVE, /* its heartbeat says: in a collective */
  HB_PROGRAM,    /* its innermost frame is the program's */
  HB_LIBRARY,    /* its innermost frame is torch's or vqcheck's */
  HB_NO_STACK,   /* no stack to tell */
  HB_NO_BEAT,    /* alive, never beat */
  HB_ENDED,      /* ended, or finished */
  HB_MOVING,     /* alive, made progress within the timeout */
  HB_EXITING     /* finished, its process still there and idle */
};
static const char *const hb_kind_names[] = {
    "stopped",  "in_collective", "program",     "torch",
    "no_stack", "no_heartbeat",  "ended",       "progressing",
    "exiting"};

typedef struct hb_place {
  const vqc_hb_rank *r;
  int kind;
  bool has_stack;
  vqc_watch_stack st;
  char stack_file[4200];
  char why[160];         /* NO_STACK: why; ENDED: how */
  vqc_live_info live;    /* its live record (live.exists false: none) */
  char p2p[1000];        /* p2p_text of it: "" when in no p2p call */
  vqc_hb_place rule;     /* vqc_hb_culprits's view */
  char key[2600];        /* places told together share it */
  bool told;
} hb_place;

/* "torch's backward (_tensor.py:623)": the owner of a library frame, its
 * function and where. */
static void library_frame_text(const vqc_watch_frame *f, char *buf,
                               size_t n) {
  char at[256];
  watch_short_site(f, false, at, sizeof at);
  const char *owner = strstr(f->file, "/torch/")     ? "torch's "
                      : strstr(f->file, "/vqcheck/") ? "vqcheck's "
                                                     : "";
  snprintf(buf, n, "%s%.60s (%s)", owner, f->func[0] ? f->func : "?", at);
}

/* " from rank 1 (tag 7)", " to rank 2 (tag 0)", " from any rank (any
 * tag)": one side of a point-to-point call; nothing for a side it lacks. */
static void p2p_side_text(const char *dir, int peer, int tag, char *buf,
                          size_t *k, size_t n) {
  if (peer == VQC_P2P_NONE) return;
  if (peer == VQC_P2P_ANY)
    watch_appendf(buf, k, n, " %s any rank", dir);
  else
    watch_appendf(buf, k, n, " %s rank %d", dir, peer);
  if (tag == VQC_P2P_ANY)
    watch_appendf(buf, k, n, " (any tag)");
  else if (tag != VQC_P2P_NONE)
    watch_appendf(buf, k, n, " (tag %d)", tag);
}

/* The last part of path (after its last '/'). */
static const char *file_base(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* "MPI_Recv from rank 1 (tag 7)", "MPI_Sendrecv to rank 1 (tag 7) and
 * from rank 2 (tag 7) on communicator world/split1": the point-to-point
 * call an MPI rank said it waits in (its live record's "p2p_wait" line,
 * libvqcheck_mpi.so); "" when it said none. Ranks are world ranks. */
static void p2p_text(const vqc_live_info *l, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = '\0';
  if (!l->p2p_call[0]) return;
  watch_appendf(buf, &k, n, "%s", l->p2p_call);
  p2p_side_text("to", l->p2p_to, l->p2p_send_tag, buf, &k, n);
  if (l->p2p_to != VQC_P2P_NONE && l->p2p_from != VQC_P2P_NONE)
    watch_appendf(buf, &k, n, " and");
  p2p_side_text("from", l->p2p_from, l->p2p_recv_tag, buf, &k, n);
  if (l->p2p_comm[0] && strcmp(l->p2p_comm, "world") != 0)
    watch_appendf(buf, &k, n, " on communicator %s", l->p2p_comm);
  /* a wait's requests: " for MPI_Irecv from rank 2 (tag 7)", two at most
   * ("..., MPI_Isend to rank 1 (tag 7) and 3 more requests"), so a cycle
   * of 3 ranks still fits the message; all kept are in the detail */
  const int told = l->p2p_nkept < 2 ? l->p2p_nkept : 2;
  for (int i = 0; i < told; i++) {
    const struct vqc_live_p2p_req *q = &l->p2p_req[i];
    watch_appendf(buf, &k, n, "%s%s", i ? (i + 1 == l->p2p_nreq ? " and "
                                                                : ", ")
                                        : " for ", q->call);
    p2p_side_text("to", q->to, q->send_tag, buf, &k, n);
    p2p_side_text("from", q->from, q->recv_tag, buf, &k, n);
    if (q->comm[0] && strcmp(q->comm, "world") != 0)
      watch_appendf(buf, &k, n, " on communicator %s", q->comm);
  }
  if (l->p2p_nreq > told)
    watch_appendf(buf, &k, n, " and %d more request%s", l->p2p_nreq - told,
                  l->p2p_nreq - told == 1 ? "" : "s");
  /* MPI_THREAD_MULTIPLE: the call may be another thread's than the stack
   * the rank is placed at, so its own line is said, and the other
   * threads' calls: "MPI_Recv from rank 1 (tag 5) at t.c:20 in a thread;
   * another thread in MPI_Send to rank 2 (tag 0) at t.c:31" */
  if (l->p2p_threads <= 0) return;
  if (l->p2p_file[0])
    watch_appendf(buf, &k, n, " at %s:%d", file_base(l->p2p_file),
                  l->p2p_line);
  watch_appendf(buf, &k, n, " in a thread");
  for (int i = 0; i < l->p2p_nother; i++) {
    const struct vqc_live_p2p_req *q = &l->p2p_other[i];
    watch_appendf(buf, &k, n, "; another thread in %s", q->call);
    p2p_side_text("to", q->to, q->send_tag, buf, &k, n);
    if (q->to != VQC_P2P_NONE && q->from != VQC_P2P_NONE)
      watch_appendf(buf, &k, n, " and");
    p2p_side_text("from", q->from, q->recv_tag, buf, &k, n);
    if (q->comm[0] && strcmp(q->comm, "world") != 0)
      watch_appendf(buf, &k, n, " on communicator %s", q->comm);
    if (q->file[0])
      watch_appendf(buf, &k, n, " at %s:%d", file_base(q->file), q->line);
  }
  if (l->p2p_threads > 1 + l->p2p_nother)
    watch_appendf(buf, &k, n, "; %d more threads in one",
                  l->p2p_threads - 1 - l->p2p_nother);
}

/* What follows "rank R " / "ranks R, S " for place p; idle: the group's
 * longest time without progress. */
static void hb_place_text(const hb_place *p, bool plural, double idle,
                          char *buf, size_t n) {
  size_t k = 0;
  char at[256], lib[400];
  const char *is = plural ? "are" : "is";
  buf[0] = '\0';
  switch (p->kind) {
  case HB_STOPPED:
    watch_appendf(buf, &k, n, "%s stopped (process state %s)", is,
                  vqc_proc_stopped_text(p->r->letter));
    break;
  case HB_COLLECTIVE:
    if (strcmp(p->r->hb.op, "rendezvous") == 0) /* the bridge's, at init */
      watch_appendf(buf, &k, n, "wait%s in init_process_group's rendezvous",
                    plural ? "" : "s");
    else if (strncmp(p->r->hb.op, "MPI_Init", 8) == 0) /* the interposer's */
      watch_appendf(buf, &k, n, "wait%s in %.16s for every rank to start",
                    plural ? "" : "s", p->r->hb.op);
    else
      watch_appendf(buf, &k, n, "wait%s in %.16s (%s collective #%llu)",
                    plural ? "" : "s",
                    p->r->hb.op[0] ? p->r->hb.op : "a collective",
                    plural ? "their" : "its",
                    (unsigned long long)p->r->hb.seq);
    if (p->has_stack) {
      watch_short_site(&p->st.where, true, at, sizeof at);
      watch_appendf(buf, &k, n, " at %s", at);
    }
    watch_appendf(buf, &k, n, " for %.1f s", idle);
    break;
  case HB_PROGRAM:
    watch_short_site(&p->st.top, true, at, sizeof at);
    if (p->p2p[0]) {
      /* an MPI rank in a blocking point-to-point call: the call, its
       * peers and the program's line (short: a cycle of 3 fits the
       * message; the seconds are in the detail) */
      watch_short_site(&p->st.where, true, at, sizeof at);
      if (p->live.p2p_threads > 0) /* a thread's call, at its own line */
        watch_appendf(buf, &k, n, "wait%s in %s (the stack taken is at %s)",
                      plural ? "" : "s", p->p2p, at);
      else
        watch_appendf(buf, &k, n, "wait%s in %s at %s", plural ? "" : "s",
                      p->p2p, at);
      break;
    }
    if (p->st.where.line != p->st.top.line ||
        strcmp(p->st.where.file, p->st.top.file) != 0) {
      /* innermost in Python's or a package's code: the program's line
       * that led there first */
      char mine[256];
      watch_short_site(&p->st.where, true, mine, sizeof mine);
      watch_appendf(buf, &k, n, "%s at %s (in %s), outside any collective "
                    "(no progress for %.1f s)", is, mine, at, idle);
    } else {
      watch_appendf(buf, &k, n, "%s at %s, outside any collective (no "
                    "progress for %.1f s)", is, at, idle);
    }
    break;
  case HB_LIBRARY:
    watch_short_site(&p->st.where, true, at, sizeof at);
    library_frame_text(p->st.has_entry ? &p->st.entry : &p->st.top, lib,
                       sizeof lib);
    if (p->st.has_entry)
      watch_appendf(buf, &k, n,
                    "%s in %s, called at %s (no progress for %.1f s)", is,
                    lib, at, idle);
    else
      watch_appendf(buf, &k, n, "%s in %s (no progress for %.1f s)", is, lib,
                    idle);
    break;
  case HB_NO_STACK:
    watch_appendf(buf, &k, n, "made no progress for %.1f s (no stack: %s)",
                  idle, p->why);
    break;
  case HB_NO_BEAT:
    watch_appendf(buf, &k, n, "never made progress (no heartbeat %.1f s "
                  "after the first rank's: %s)", idle, p->why);
    break;
  case HB_ENDED:
    watch_appendf(buf, &k, n, "had %s", p->why);
    break;
  case HB_EXITING:
    watch_appendf(buf, &k, n, "%s finished (%s end line written) but %s "
                  "process did not exit: no progress for %.1f s since",
                  is, plural ? "their" : "its", plural ? "their" : "its",
                  idle);
    if (p->has_stack) {
      watch_short_site(&p->st.where, true, at, sizeof at);
      watch_appendf(buf, &k, n, ", at %s", at);
    }
    break;
  default:
    /* Not (yet) stuck for the --timeout: say how long since its last
     * progress, no more (a rank stuck a little later reads so too). */
    watch_appendf(buf, &k, n, "last made progress %.1f s ago (within the "
                  "--timeout)", idle);
    if (p->has_stack && p->p2p[0]) {
      watch_short_site(&p->st.where, true, at, sizeof at);
      watch_appendf(buf, &k, n, " (in %s at %s)", p->p2p, at);
    } else if (p->has_stack) {
      watch_short_site(&p->st.where, true, at, sizeof at);
      watch_appendf(buf, &k, n, " (at %s)", at);
    }
    break;
  }
}

/* Why rank p has no stack (it was live, not stopped). */
static void hb_no_stack_why(const vqc_watch_ctx *c, hb_place *p) {
  const vqc_watch_proc *pr = watch_proc_of(c, p->r->rank);
  const char *why = "the bridge did not answer SIGUSR1";
  if (c->o->nproc == 0 && !p->r->asked)
    why = "not asked: not a process vqcheck watch started on this machine";
  else if (c->o->nproc > 0 && pr &&
           pr->at_hang == VQC_WATCH_AT_HANG_NO_BRIDGE)
    why = "the bridge had not started there: no live record";
  else if (pr && pr->exited && WIFSIGNALED(pr->status) &&
           WTERMSIG(pr->status) == SIGUSR1 && pr->asked_pid == pr->pid)
    why = "SIGUSR1 ended it: its bridge had set up no stack dump";
  snprintf(p->why, sizeof p->why, "%s", why);
}

/* Fills place p of rank r. */
static void hb_place_fill(const vqc_watch_ctx *c, hb_place *p,
                          const vqc_hb_rank *r) {
  memset(p, 0, sizeof *p);
  p->r = r;
  snprintf(p->stack_file, sizeof p->stack_file, "%s/rank-%d.stacks.txt",
           c->dir, r->rank);
  p->has_stack = vqc_watch_stack_read(p->stack_file, &p->st);
  if (vqc_live_scan(c->dir, r->rank, &p->live) != VQC_OK)
    memset(&p->live, 0, sizeof p->live);
  p2p_text(&p->live, p->p2p, sizeof p->p2p);
  const bool finished = r->beaten && r->hb.state == VQC_HB_FINISHED;
  if (finished && !r->ended && r->stalled) {
    p->kind = HB_EXITING; /* vqc_hb_stalled: stuck on its way out */
  } else if (r->ended || finished) {
    p->kind = HB_ENDED;
    if (r->exit_code >= 0)
      snprintf(p->why, sizeof p->why, "exited with status %d%s",
               r->exit_code, finished ? " (finished)" : "");
    else if (r->signal > 0) {
      char sig[96];
      vqc_signal_text(r->signal, sig, sizeof sig);
      snprintf(p->why, sizeof p->why, "been killed by %s", sig);
    } else
      snprintf(p->why, sizeof p->why, "%s", finished ? "finished" : "ended");
  } else if (r->proc == VQC_PROC_STOPPED) {
    p->kind = HB_STOPPED;
  } else if (!r->beaten) {
    p->kind = HB_NO_BEAT;
    const vqc_watch_proc *pr = watch_proc_of(c, r->rank);
    snprintf(p->why, sizeof p->why, "%s",
             p->live.exists ? "its bridge had started"
             : pr || c->o->nproc == 0 ? "the bridge had not started there"
                                      : "no process had this rank");
  } else if (!r->stalled) {
    p->kind = HB_MOVING;
  } else if (r->hb.state == VQC_HB_IN_COLLECTIVE) {
    p->kind = HB_COLLECTIVE;
  } else if (p->has_stack) {
    p->kind = p->st.user_top ? HB_PROGRAM : HB_LIBRARY;
  } else {
    p->kind = HB_NO_STACK;
    hb_no_stack_why(c, p);
  }
  if (p->kind == HB_ENDED) p->has_stack = false; /* an old dump tells */
  p->rule.rank = r->rank;
  p->rule.stalled = r->stalled;
  p->rule.stopped = p->kind == HB_STOPPED;
  p->rule.in_collective = p->kind == HB_COLLECTIVE;
  p->rule.user_code = p->kind == HB_PROGRAM || p->kind == HB_EXITING;
  p->rule.ended_ok = p->kind == HB_ENDED &&
                     (r->exit_code == 0 || finished);
  /* The grouping key: what the text says but the seconds. */
  char a[256] = "", b[256] = "";
  if (p->has_stack) {
    watch_full_site(&p->st.where, a, sizeof a);
    watch_full_site(p->st.has_entry ? &p->st.entry : &p->st.top, b, sizeof b);
  }
  snprintf(p->key, sizeof p->key, "%d|%c|%s|%llu|%s|%s|%s|%s", p->kind,
           r->letter ? r->letter : '-', r->hb.op,
           p->kind == HB_COLLECTIVE ? (unsigned long long)r->hb.seq : 0ULL,
           a, b, p->why, p->p2p);
}

/* One rank's detail. */
static json_t *hb_place_json(const hb_place *p) {
  const vqc_hb_rank *r = p->r;
  char letter[2] = {r->letter, '\0'};
  json_t *j = json_pack(
      "{s:i,s:s,s:b,s:o,s:o,s:f}", "rank", r->rank, "place",
      hb_kind_names[p->kind], "culprit", p->rule.culprit, "pid",
      r->pid > 0 ? json_integer(r->pid) : json_null(), "process_state",
      r->letter ? json_string(letter) : json_null(), "no_progress_s",
      r->idle_s);
  if (r->beaten)
    json_object_set_new(
        j, "heartbeat",
        json_pack("{s:i,s:I,s:I,s:I,s:s}", "state", (int)r->hb.state,
                  "beats", (json_int_t)r->hb.beats, "seq",
                  (json_int_t)r->hb.seq, "step", (json_int_t)r->hb.step,
                  "op", r->hb.op));
  else
    json_object_set_new(j, "heartbeat", json_null());
  if (p->has_stack) {
    char site[256];
    watch_full_site(&p->st.where, site, sizeof site);
    json_object_set_new(j, "site", json_string(site));
    watch_full_site(&p->st.top, site, sizeof site);
    json_object_set_new(j, "top", json_string(site));
    if (p->st.has_entry) {
      watch_full_site(&p->st.entry, site, sizeof site);
      json_object_set_new(j, "entry", json_string(site));
    }
    json_object_set_new(
        j, "stack_file",
        watch_clean_string(p->stack_file, strlen(p->stack_file)));
  }
  if (p->why[0]) json_object_set_new(j, "why", json_string(p->why));
  if (p->p2p[0]) { /* an MPI rank's point-to-point call (world ranks) */
    const vqc_live_info *l = &p->live;
    json_t *o = json_object();
    json_object_set_new(o, "call", json_string(l->p2p_call));
    json_object_set_new(o, "text", watch_clean_string(p->p2p,
                                                      strlen(p->p2p)));
    if (l->p2p_comm[0])
      json_object_set_new(o, "communicator",
                          watch_clean_string(l->p2p_comm,
                                             strlen(l->p2p_comm)));
    const char *keys[4] = {"to", "send_tag", "from", "recv_tag"};
    const int vals[4] = {l->p2p_to, l->p2p_send_tag, l->p2p_from,
                         l->p2p_recv_tag};
    for (int i = 0; i < 4; i++)
      if (vals[i] != VQC_P2P_NONE)
        json_object_set_new(o, keys[i], vals[i] == VQC_P2P_ANY
                                            ? json_string("any")
                                            : json_integer(vals[i]));
    if (l->p2p_nreq > 0) { /* a wait's requests, each with its I-call */
      json_t *reqs = json_array();
      for (int q = 0; q < l->p2p_nkept; q++) {
        const struct vqc_live_p2p_req *rq = &l->p2p_req[q];
        json_t *e = json_object();
        json_object_set_new(e, "call", watch_clean_string(
                                           rq->call, strlen(rq->call)));
        if (rq->comm[0])
          json_object_set_new(e, "communicator", watch_clean_string(
                                                     rq->comm,
                                                     strlen(rq->comm)));
        const int rv[4] = {rq->to, rq->send_tag, rq->from, rq->recv_tag};
        for (int i = 0; i < 4; i++)
          if (rv[i] != VQC_P2P_NONE)
            json_object_set_new(e, keys[i], rv[i] == VQC_P2P_ANY
                                                ? json_string("any")
                                                : json_integer(rv[i]));
        if (rq->file[0]) {
          char at[300];
          snprintf(at, sizeof at, "%s:%d", rq->file, rq->line);
          json_object_set_new(e, "site", watch_clean_string(at, strlen(at)));
        }
        json_array_append_new(reqs, e);
      }
      json_object_set_new(o, "nrequests", json_integer(l->p2p_nreq));
      json_object_set_new(o, "requests", reqs);
    }
    json_object_set_new(j, "p2p", o);
  }
  if (r->ended) {
    json_object_set_new(j, "exit_code", r->exit_code >= 0
                                            ? json_integer(r->exit_code)
                                            : json_null());
    json_object_set_new(j, "signal",
                        r->signal > 0 ? json_integer(r->signal) : json_null());
  }
  return j;
}

/* Said when a rank waits in a send the MPI interposer made synchronous
 * (docs/mpi.md "Sends run synchronously"). */
static const char hb_sync_text[] =
    " vqcheck runs MPI_Send as MPI_Ssend: a send that completes without it "
    "only because MPI buffered it waits here (--buffered-sends).";

/* Said when a rank waits in a collective the MPI interposer made wait for
 * every member (interpose/vqc_mpi_record.c, docs/mpi.md). */
static const char hb_sync_coll_text[] =
    " vqcheck makes rooted collectives wait for every member, as MPI may "
    "(--buffered-sends).";
/* Both at once, in one sentence. */
static const char hb_sync_both_text[] =
    " vqcheck runs MPI_Send as MPI_Ssend and makes rooted collectives wait "
    "for every member, as MPI may (--buffered-sends).";

/* Whether heartbeat op names a collective MPI may let return before every
 * member entered it (vqc_mpi_record.c's may_return_early). */
static bool early_op(const char *op) {
  static const char *const early[] = {"broadcast", "reduce", "gather",
                                      "gatherv", "scatter", "scatterv",
                                      "scan", "exscan"};
  for (size_t i = 0; i < sizeof early / sizeof early[0]; i++)
    if (strcmp(op, early[i]) == 0) return true;
  return false;
}

/* The rule, told in every such finding (docs/pytorch.md "Hangs"). */
static const char hb_rule_text[] =
    " A rank slower than --timeout between two signs of progress (a "
    "collective entered or left, a step end) counts as a hang.";

/* A deadlock from the heartbeats when the watcher decided one (ctx->hb)
 * and no hang marker, deadlock or collective_mismatch tells it already. */
void watch_hb_finding(const vqc_watch_ctx *c, vqc_findings *known,
                      vqc_findings *out) {
  if (!c->hb || c->hb_n <= 0 || vqc_watch_any_hang(c->dir) ||
      watch_has_kind(known, out, VQC_FINDING_DEADLOCK) ||
      watch_has_kind(known, out, VQC_FINDING_COLLECTIVE_MISMATCH))
    return;
  const int n = c->hb_n < WATCH_PLACE_MAX ? c->hb_n : WATCH_PLACE_MAX;
  hb_place *pl = calloc((size_t)n, sizeof *pl);
  vqc_hb_place *rule = calloc((size_t)n, sizeof *rule);
  if (!pl || !rule) {
    free(pl);
    free(rule);
    return;
  }
  for (int i = 0; i < n; i++) {
    hb_place_fill(c, &pl[i], &c->hb[i]);
    rule[i] = pl[i].rule;
  }
  (void)vqc_hb_culprits(rule, n);
  for (int i = 0; i < n; i++) pl[i].rule.culprit = rule[i].culprit;
  free(rule);

  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_DEADLOCK, -1, "%s", "");
  for (int i = 0; i < n; i++) {
    if (!pl[i].rule.culprit) continue;
    vqc_finding_add_rank(&x, pl[i].r->rank);
    /* An MPI program's rank (libvqcheck_mpi.so) has no steps: its
     * heartbeat's step field is 0, and the finding carries none (-1).
     * Before MPI_Init it has no live record yet, but its marker. */
    if (x.step < 0 && pl[i].r->beaten && !pl[i].live.mpi &&
        !mpi_preloaded(c->dir, pl[i].r->rank))
      x.step = (int64_t)(pl[i].r->hb.step < INT64_MAX ? pl[i].r->hb.step
                                                       : INT64_MAX);
    if (!x.site[0] && pl[i].has_stack)
      watch_full_site(&pl[i].st.where, x.site, sizeof x.site);
  }
  for (int i = 0; !x.site[0] && i < n; i++)
    if (pl[i].has_stack && pl[i].r->stalled)
      watch_full_site(&pl[i].st.where, x.site, sizeof x.site);

  /* The message: the culprits' places, then the others', grouped; the
   * rule always fits at its end. */
  size_t k = 0;
  bool sync = false; /* a rank waits in a send made synchronous */
  bool sync_coll = false; /* one waits in a collective made synchronising */
  for (int i = 0; i < n; i++) {
    sync = sync || (pl[i].p2p[0] && strstr(pl[i].p2p, "(synchronous)"));
    sync_coll = sync_coll || (pl[i].live.sync_sends &&
                              pl[i].r->hb.state == VQC_HB_IN_COLLECTIVE &&
                              early_op(pl[i].r->hb.op));
  }
  const char *sync_text = sync && sync_coll ? hb_sync_both_text
                          : sync              ? hb_sync_text
                          : sync_coll         ? hb_sync_coll_text
                                              : "";
  const size_t room = sizeof x.message - sizeof hb_rule_text -
                      strlen(sync_text);
  watch_appendf(x.message, &k, room, "no progress for %g s (the --timeout):",
                c->o->timeout);
  bool first = true;
  int untold = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n; i++) {
      if (pl[i].told || pl[i].rule.culprit != (pass == 0)) continue;
      int grp[WATCH_PLACE_MAX], ng = 0;
      double idle = 0.0;
      for (int j = i; j < n; j++) {
        if (pl[j].told || pl[j].rule.culprit != pl[i].rule.culprit ||
            strcmp(pl[j].key, pl[i].key) != 0)
          continue;
        pl[j].told = true;
        grp[ng++] = pl[j].r->rank;
        if (pl[j].r->idle_s > idle) idle = pl[j].r->idle_s;
      }
      char names[128], text[700], part[900];
      watch_rank_names(grp, ng, names, sizeof names);
      hb_place_text(&pl[i], ng > 1, idle, text, sizeof text);
      snprintf(part, sizeof part, "%s %s %s", first ? "" : ";", names, text);
      /* Room kept for "; N more ranks (see the detail)." */
      if (untold > 0 || k + strlen(part) + 40 >= room) {
        untold += ng;
        continue;
      }
      watch_appendf(x.message, &k, room, "%s", part);
      first = false;
    }
  }
  if (untold > 0)
    watch_appendf(x.message, &k, room, "; %d more rank%s (see the detail)",
                  untold, untold == 1 ? "" : "s");
  watch_appendf(x.message, &k, room, ".");
  watch_appendf(x.message, &k, sizeof x.message, "%s", sync_text);
  watch_appendf(x.message, &k, sizeof x.message, "%s", hb_rule_text);
  watch_clean_in_place(x.message);

  json_t *places = json_array(), *culprits = json_array(),
         *stacks = json_array();
  for (int i = 0; i < n; i++) {
    json_array_append_new(places, hb_place_json(&pl[i]));
    if (pl[i].rule.culprit)
      json_array_append_new(culprits, json_integer(pl[i].r->rank));
    struct stat st;
    if (lstat(pl[i].stack_file, &st) == 0 && S_ISREG(st.st_mode))
      json_array_append_new(
          stacks,
          watch_clean_string(pl[i].stack_file, strlen(pl[i].stack_file)));
  }
  json_object_set_new(x.detail, "rule",
                      json_string("no progress for timeout_s: no collective "
                                  "entered or left and no step ended"));
  json_object_set_new(x.detail, "timeout_s", json_real(c->o->timeout));
  json_object_set_new(x.detail, "culprits", culprits);
  json_object_set_new(x.detail, "places", places);
  json_object_set_new(x.detail, "stacks", stacks);
  free(pl);
  (void)vqc_findings_add(out, &x);
}
