/* ledger_analysis.h: the per-rank dump files of a stuck or failed run, and
 * the analysis that names the collective the ranks disagree on.
 *
 * When a rank's training ends badly (timeout, abort, mismatch) or its
 * watchdog sees a collective stuck, the collective checker writes two files
 * into the run directory (each to a temporary name, then renamed, so a crash
 * never leaves half a file; on a shared filesystem this works across nodes):
 *
 *   rank-<r>.ledger.jsonl  the rank's ledger, one record per line
 *                          (ledger_record.h's line; the library's
 *                          vqc_ledger_write_jsonl writes it);
 *   rank-<r>.status.json   {"rank","size","status","step","last_seq",
 *                          "watchdog","in_flight": record or null}: how the
 *                          rank's training ended and where it was.
 *
 * vqc_ledger_analyze is a pure function of those files, so it runs on rank 0
 * at the end of a run and again offline (`vqcheck analyze RUN_DIR`). It finds
 * the lowest sequence number that is not DONE on every rank, or whose
 * collective (op, dtype, count, root, redop, call site) differs across
 * ranks, and reports ONE finding about it:
 *   deadlock      the ranks that entered it (op, dtype, count, site) and the
 *                 ranks that did not, with where they are instead (the other
 *                 collective they wait in, or their last completed one);
 *   rank_failure  for ranks without a ledger dump (crashed, killed) whose
 *                 live record (below) does not say they reached their end:
 *                 named with their last step and last collective when the
 *                 live record has them, how the process ended when its
 *                 supervisor recorded it (the signal or exit status and
 *                 its last stderr lines, vqc_live_mark_end; else the
 *                 possibilities: killed, crashed, stopped), and the last
 *                 sequence number the others completed. When the only ranks missing from the
 *                 stuck collective are such ranks (or, once a rank failed,
 *                 ranks that others then terminated), rank_failure is the
 *                 whole story and no deadlock is reported.
 *   collective_mismatch  the same call site calling the same collective
 *                 with other arguments on different ranks (count, dtype,
 *                 root or reduction: `torch.ones(4 + rank)` all_reduced),
 *                 however that ended: both returned (the backend paired
 *                 them), one failed, one waits, or the backend aborted the
 *                 process on it (gloo: "Received data size doesn't match
 *                 expected size", SIGABRT). Named at that site with every
 *                 rank's call and how it ended; the ranks named are those
 *                 outside a strict majority, else all of them. A rank that
 *                 died in it (its record stops there) is part of this
 *                 story: no rank_failure of its own. Not when every
 *                 call there is one the common history already holds (a
 *                 line that all_reduces each gradient in turn, 8 floats
 *                 then 2, where one rank skipped one): that is a misaligned
 *                 call, a deadlock as below. Also: ranks that
 *                 completed DIFFERENT collectives (another site or op) at
 *                 that sequence number in a run where no rank was left
 *                 waiting (a backend that pairs any calls, gloo or NCCL):
 *                 named at the odd call's site. Other misaligned
 *                 collectives that did end in a wait stay a deadlock
 *                 ("misaligned": true).
 * A rank whose dump exists but has fewer collectives than the others (it
 * left its training loop) is "missing" from the deadlock, not failed; when
 * every missing rank ended cleanly (status VQC_OK, or a live record that
 * says finished VQC_OK) the message starts "rank R left early" and the
 * detail has "left_early": true.
 *
 * Ledger lines may name torch.distributed's collectives, dtypes and
 * reductions as well as vqcheck's own: the Python bridge (`vqcheck watch`,
 * python/vqcheck/_bridge/_records.py) writes them through the same codec
 * (ledger_record.h, by vqcheck._core.ledger_line). They are
 * compared, never replayed (ledger_read.c, record_ops). So does the
 * MPI interposer (interpose/vqc_mpi.c, libvqcheck_mpi.so), with MPI's
 * collectives and reductions, "mpi_type" (a derived type's readable name;
 * not compared), and "any_site": true: MPI pairs a communicator's calls by
 * order alone, so their call sites are told but not compared. The bridge
 * sets "any_site" too on a collective torch issues itself (Join, FSDP,
 * pipelining: its site is the torch function): torch pairs different
 * functions of its own by design, so only what such a call moves is
 * compared.
 *
 * The live record. A dump is written at the end, by a rank that is still
 * alive; a rank killed with SIGKILL (or stopped, or a whole job killed by its
 * launcher) writes none. So every rank also appends, as it goes, to
 *
 *   rank-<r>.live.jsonl    one JSON object per line, each line one write(2)
 *                          on an O_APPEND descriptor (a kill between lines
 *                          never leaves half a line):
 *     {"event":"start","rank","size","pid","host"[,"timeout_s"]}  when
 *                                   the rank starts (timeout_s: its
 *                                   collective deadline, when it has one);
 *     a ledger line (the dump's format, no "event") when a collective is
 *       entered and again when it ends (the later line for a seq wins);
 *     {"same":SEQ,"as":K,"in":DT} / {"same":SEQ,"out":DT}  short lines
 *                                   (libvqcheck_mpi.so's, for a loop's
 *                                   blocking collectives; "in" and "out"
 *                                   left out when DT is 0): collective SEQ
 *                                   with every other field of the full
 *                                   "entered" line kept in head slot K (the
 *                                   start line's "heads"), entered DT ns
 *                                   after the last collective entered (full
 *                                   or short line) / done (VQC_OK) DT ns
 *                                   after it entered; read as those full
 *                                   lines (ledger_read.c read_short), and
 *                                   refused (VQC_EPARSE) where no full
 *                                   entered line, or for "out" no entered
 *                                   SEQ, comes before;
 *     {"event":"step","step"}       step `step` is complete;
 *     {"event":"finding","finding":{...}}  a finding this rank made, as it
 *                                   made it (findings.h's JSON; checker.h
 *                                   vqc_check_report), so the run's findings
 *                                   outlive a run.json that was never
 *                                   written (findings_record.h reads them);
 *     {"event":"finished","status","step"}  the rank's run is over, whatever
 *                                   its status (it reached its end);
 *     {"event":"signal","signal"[,"t_ns"]}  it was terminated by a signal
 *                                   it could catch (SIGTERM, SIGINT,
 *                                   SIGHUP): a launcher cleaning up after
 *                                   another rank, or the whole job ended
 *                                   from outside (scancel, Ctrl-C); t_ns:
 *                                   when, on the clock of its t_enter_ns;
 *     {"event":"p2p_wait","call","communicator","to","to_comm_rank",
 *      "send_tag","from","from_comm_rank","recv_tag","file","line","func",
 *      "t_ns"}                      an MPI program's rank (libvqcheck_mpi.so)
 *                                   asked where it is (SIGUSR1, at a hang):
 *                                   the blocking point-to-point call it
 *                                   waits in ("call": null when none);
 *                                   peers as world ranks, "any" for
 *                                   MPI_ANY_SOURCE / MPI_ANY_TAG; only the
 *                                   sides the call has; a wait's
 *                                   "nrequests" and "requests":[{"call",
 *                                   "communicator","to"|"from",..,"file",
 *                                   "line","func"}]: the point-to-point
 *                                   requests it waits on (MPI_Irecv, ...,
 *                                   the first 4, each with its I-call's
 *                                   site); under MPI_THREAD_MULTIPLE
 *                                   "threads": how many of its threads
 *                                   are in such a call (the call above is
 *                                   the first's) and "other_threads":
 *                                   [{"call",..,"file","line","func"}]
 *                                   the next 4 threads' calls;
 *     {"event":"lost"|"killed","by","why"}  appended by whoever supervised
 *                                   the job (`vqcheck run --backend mpi`
 *                                   without a launcher, harness/cli/supervise.h):
 *                                   lost: the rank was seen stopped or gone
 *                                   unfinished; killed: it was alive and
 *                                   running when the job had to be ended.
 *                                   A "lost" line of a supervisor that saw
 *                                   the process end (vqc_live_mark_end:
 *                                   `vqcheck watch`) adds "signal" (the one
 *                                   that killed it) or "exit_code", and
 *                                   "last_words" (its last stderr lines),
 *                                   so the findings name them.
 *
 * Which rank failed, when no dump says so: a rank without a dump and status
 * file whose live record has no end line ("finished", "signal", "killed"),
 * or that was marked "lost". A SIGKILLed rank writes nothing more; the ranks
 * the launcher then terminates write "signal"; so the rank whose record just
 * stops is the one that died. A rank with no file at all failed too (it died
 * before it started). The live records of a rank without a dump stand in for
 * its dump, so the analysis can say where it was (its last step and its last
 * collective) and the others' records where they waited.
 *
 * Process groups. A ledger line may carry "group" (the world ranks of the
 * process group it ran on, in group-rank order) and "group_name": a torch
 * sub-group (a DeviceMesh dimension, DDP(process_group=g), a pipeline
 * stage's replicas), whose calls only its members make, in their own
 * order. Its "seq" then counts that group's collectives only ("group_size"
 * is the group's). After the world's analysis above, each group (same name
 * and ranks) is analysed the same way among its members: one deadlock or
 * collective_mismatch per group at most, its message starting "in process
 * group NAME (ranks ...): " and its detail holding "process_group":
 * {"name", "ranks"}; how each rank ended (failed, killed, finished) is the
 * world's story, told once by the world's rank_failure. A line naming a
 * group without its own rank, or ranks outside the run, is VQC_EPARSE.
 *
 * The fingerprint helpers are shared with strict mode (collective.c), which
 * compares the same fields before each collective. */
#ifndef VQC_LEDGER_ANALYSIS_H
#define VQC_LEDGER_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "findings.h"
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/status.h"

/* ---- fingerprints: what must agree across ranks for one collective */

typedef struct vqc_coll_fingerprint {
  int32_t op;         /* vqc_coll_op */
  int32_t dtype;      /* vqc_dtype */
  int32_t redop;      /* vqc_redop for ALL_REDUCE; -1 otherwise */
  int32_t root;       /* BROADCAST's root; -1 otherwise */
  uint64_t count;     /* elements this rank contributes */
  uint64_t site_hash; /* vqc_site_hash of the call site */
} vqc_coll_fingerprint;

/* xxh3 over "file", line and "func": equal for the same call site in every
 * process of the same build (string contents are hashed, not pointers). */
uint64_t vqc_site_hash(vqc_site site);
void vqc_fingerprint_of(const vqc_ledger_record *r, vqc_coll_fingerprint *out);
bool vqc_fingerprint_equal(const vqc_coll_fingerprint *a,
                           const vqc_coll_fingerprint *b);

/* "all_reduce(float32, count 16)", "all_reduce(int64, count 1, max)",
 * "broadcast(float32, count 4, root 0)", "barrier()". */
void vqc_coll_describe(vqc_coll_op op, vqc_dtype dt, size_t count, int root,
                       vqc_redop redop, char *buf, size_t n);
/* "lib/src/quant/vq_ema.c:57 vqc_vq_ema_update": the same text as
 * vqc_finding_set_site (paths relative to the repository where it can). */
void vqc_site_text(vqc_site site, char *buf, size_t n);

/* When ranks entered different collectives at the same sequence number,
 * which one is "the" collective (the others skipped it, or called another)?
 * `groups` holds the ngroups distinct fingerprints, with how many ranks
 * entered each and the lowest such rank. `history` is the common record
 * before that sequence number, oldest first (every rank agreed on it). The
 * history predicts the answer: the last time the latest collective was
 * called, what came next? (A training loop repeats itself, so for a rank
 * that skipped the seed all_reduce this names the seed all_reduce, even in
 * a two-against-two split.) Without a prediction that matches a group: the
 * larger group, then the group holding the lowest rank. Returns the
 * group's index. */
int vqc_pick_expected(const vqc_coll_fingerprint *groups, const int *nranks,
                      const int *low_rank, int ngroups,
                      const vqc_coll_fingerprint *history, size_t nhistory);

/* ---- the dump files */

/* run_dir/rank-<r>.ledger.jsonl and run_dir/rank-<r>.status.json. */
vqc_status vqc_ledger_dump_path(const char *run_dir, int rank, char *buf,
                                size_t n);
vqc_status vqc_status_dump_path(const char *run_dir, int rank, char *buf,
                                size_t n);

/* How a rank ended, for rank-<r>.status.json. */
typedef struct vqc_rank_end {
  int rank, size;
  vqc_status status;     /* how its training ended (VQC_ETIMEOUT while a
                            watchdog reports it stuck) */
  int64_t step;          /* the step it was in; -1 if unknown */
  bool watchdog;         /* written by the watchdog (the rank is stuck) */
  bool has_in_flight;
  vqc_ledger_record in_flight; /* the record ENTERED at dump time */
} vqc_rank_end;

/* Writes rank-<r>.ledger.jsonl (vqc_ledger_dump) then rank-<r>.status.json
 * (temporary file + rename). The status file is written last: once it
 * exists, the rank's dump is complete. Safe from a watchdog thread. */
vqc_status vqc_rank_dump_write(const char *run_dir, vqc_ledger *ledger,
                               const vqc_rank_end *end);

/* ---- the live record (see the top) */

/* run_dir/rank-<r>.live.jsonl. */
vqc_status vqc_live_path(const char *run_dir, int rank, char *buf, size_t n);

/* A rank's open live record. */
typedef struct vqc_live vqc_live;

/* Creates (truncates) rank-<r>.live.jsonl and writes its start line (with
 * "timeout_s", the rank's collective deadline, when timeout_s > 0). After
 * vqc_live_signals, the descriptor also becomes the one vqc_live_note_signal
 * writes to (the last opened one in the process), and stays open until the
 * process ends. Caller closes with vqc_live_close. A link (or a file that
 * is not regular, or has other hard links) at that name is VQC_EINVAL
 * naming it, and left as it is (vqc/fsutil.h vqc_open_write). */
vqc_status vqc_live_open(const char *run_dir, int rank, int size,
                         double timeout_s, vqc_live **out);
/* Appends one line. Best effort after open (a full disk must not stop the
 * run): a failed write is remembered and the file left as it is. */
void vqc_live_record(vqc_live *l, const vqc_ledger_record *r);
void vqc_live_step(vqc_live *l, int64_t step);
void vqc_live_finished(vqc_live *l, vqc_status status, int64_t step);
/* Appends {"event":"finding","finding":<vqc_finding_to_json(x)>} in one
 * write (a finding that cannot be written as JSON is written with its kind,
 * step, ranks, tensor and site only). Safe from any thread of the rank. */
void vqc_live_finding(vqc_live *l, const vqc_finding *x);
/* Closes; NULL is fine. */
void vqc_live_close(vqc_live *l);

/* Main-level code that will call vqc_live_note_signal from a handler calls
 * this first (once per process; a process that runs one rank). */
void vqc_live_signals(void);
/* From a signal handler (async-signal-safe: one write(2)): appends
 * {"event":"signal","signal":sig} to the process's live record, if any.
 * Main-level code installs the handler (the library never does). */
void vqc_live_note_signal(int sig);

/* Appends {"event":event,"by":by,"why":why} to rank r's live record (made if
 * missing). For a supervisor, once the rank's process is gone. Never
 * through a link: VQC_EINVAL naming it (vqc_open_write). */
vqc_status vqc_live_mark(const char *run_dir, int rank, const char *event,
                         const char *by, const char *why);

/* Appends {"event":"lost","by":by,"why":"killed by signal 6 (SIGABRT,
 * Aborted)" | "exited with status 3","signal"|"exit_code",
 * "last_words":last_words} to rank r's live record (made if missing): how
 * its process ended, for a supervisor that saw it end (waitpid) before the
 * rank wrote an end line of its own. signal > 0: killed by it (exit_code
 * unused); else exited with exit_code. last_words (NULL: none) is kept to
 * its last VQC_LIVE_LAST_WORDS - 1 bytes, made valid UTF-8 with control
 * characters other than newline as '?'. Never through a link. */
#define VQC_LIVE_LAST_WORDS 512
vqc_status vqc_live_mark_end(const char *run_dir, int rank, const char *by,
                             int signal, int exit_code,
                             const char *last_words);

/* "signal 6 (SIGABRT, Aborted)", "signal 9 (SIGKILL, Killed)"; a signal
 * without a SIG name here: "signal 40 (Real-time signal 6)". */
void vqc_signal_text(int sig, char *buf, size_t n);

/* What a rank's live record says (vqc_live_scan). */
typedef struct vqc_live_info {
  bool exists;          /* rank-<r>.live.jsonl exists */
  bool started;         /* it has a start line */
  int size;             /* the start line's "size"; 0 if none */
  long pid;             /* the start line's "pid"; 0 if none */
  char host[256];       /* the start line's "host" */
  bool finished;        /* a "finished" line */
  bool mpi;             /* the start line says "mpi": true (an unmodified
                           MPI program, interpose/vqc_mpi.c) */
  bool sync_sends;      /* and "sync_sends": true (its sends synchronous,
                           its rooted collectives synchronising) */
  char status[24];      /* its "status" */
  int signal;           /* a "signal" line's signal; 0 if none */
  uint64_t signal_t_ns; /* its "t_ns": when the rank noted it, on the
                           clock of its records' t_enter_ns; 0 if none */
  long signal_from_pid; /* its "from_pid": who sent it; 0 if not told */
  double timeout_s;     /* the start line's "timeout_s": the collective
                           deadline the rank ran with; 0 if unknown */
  bool killed;          /* a "killed" line */
  bool lost;            /* a "lost" line */
  char why[256];        /* the "lost" (else "killed") line's "why" */
  /* The end line's "unchecked": what the rank's checks could not see
   * (libvqcheck_mpi.so: a record it could not write, processes it
   * spawned), and its "unchecked_status" ("VQC_EIO", ...); "" if none. */
  char unchecked[400];
  char unchecked_status[24];
  int end_signal;       /* a "lost" line's "signal": what killed the
                           process (vqc_live_mark_end); 0 if none */
  char last_words[VQC_LIVE_LAST_WORDS]; /* a "lost" line's "last_words" */
  int64_t steps_done;   /* last "step" line's step + 1; 0 if none */
  uint64_t records;     /* ledger lines */
  /* The last "p2p_wait" line (libvqcheck_mpi.so, at SIGUSR1): the
   * blocking point-to-point call the rank was in when vqcheck watch asked
   * where it is. p2p_call "" when none (no line, or "call": null). Peers
   * are world ranks: VQC_P2P_ANY for MPI_ANY_SOURCE / MPI_ANY_TAG,
   * VQC_P2P_NONE where the call has no such side or the line gives none
   * (the four ints mean nothing while p2p_call is ""). */
  char p2p_call[32];    /* "MPI_Recv", "MPI_Send", "MPI_Wait", ... */
  char p2p_comm[200];   /* its communicator's name; "" unknown */
  int p2p_to, p2p_send_tag, p2p_from, p2p_recv_tag;
  /* A wait's point-to-point requests (the line's "nrequests" and
   * "requests"): how many (p2p_nreq), and the first p2p_nkept (at most
   * VQC_P2P_REQS) of them, each as its I-call made it (peers and tags as
   * above, the I-call's site). */
  int p2p_nreq, p2p_nkept;
  struct vqc_live_p2p_req {
    char call[32];      /* "MPI_Irecv", "MPI_Isend", ... */
    char comm[200];     /* "" unknown */
    int to, send_tag, from, recv_tag;
    char file[256];     /* its I-call's site; "" unknown */
    int line;
  } p2p_req[4];
  /* Under MPI_THREAD_MULTIPLE ("threads" in the line): how many of the
   * rank's threads were in a blocking point-to-point call (0: not said,
   * a rank with one thread in MPI), the call above being the first's, at
   * p2p_file:p2p_line, and the next p2p_nother of them ("other_threads",
   * at most VQC_P2P_REQS), each as a request above (its call's peers, tags
   * and site). */
  int p2p_threads, p2p_nother;
  char p2p_file[256];
  int p2p_line;
  struct vqc_live_p2p_req p2p_other[4];
} vqc_live_info;
#define VQC_P2P_REQS 4
#define VQC_P2P_ANY (-1)
#define VQC_P2P_NONE (-2)

/* Reads rank r's live record into *out (exists false when there is none).
 * Lenient: a line that does not parse is skipped (the analysis proper
 * reports malformed lines). */
vqc_status vqc_live_scan(const char *run_dir, int rank, vqc_live_info *out);

/* ---- the analysis */

/* Reads the dumps of ranks 0..size-1 in run_dir (for a rank without a
 * dump: its live record, see the top) and appends at most one
 * deadlock finding and at most one rank_failure finding to `out` (how many
 * in *nadded, which may be NULL). size <= 0: taken from the status files'
 * "size" (else from the highest rank-<r> file found). step >= 0 is the step
 * of the findings; < 0: the step in the status files (that of the lowest
 * rank that entered the collective). Consistent dumps with nothing stuck
 * add nothing. Errors: VQC_EPARSE "file:line: ..." for a malformed dump or
 * live record, VQC_EINVAL when no rank left a dump or live record, VQC_EIO,
 * VQC_ENOMEM. */
vqc_status vqc_ledger_analyze(const char *run_dir, int size, int64_t step,
                              vqc_findings *out, int *nadded);

#endif /* VQC_LEDGER_ANALYSIS_H */
