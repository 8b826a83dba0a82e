/* watch_heartbeat.h: the ranks' heartbeats and process states, and the rule
 * `vqcheck watch` (cmd_watch.c) turns them into a hang with: a rank that
 * made no progress for --timeout is hung, wherever it is.
 *
 * Each rank's bridge keeps rank-<r>.heartbeat in the run directory
 * (python/vqcheck/_heartbeat.py has the format: 64 bytes, little-endian,
 * "VQHB", version 1, pid, state, beats, last_ns, seq, step, op), rewritten
 * at every sign of progress: a collective entered or left, a step end. A
 * rank looping in Python, waiting in a collective torch issues from C++
 * (DDP's gradient all_reduce) or in the wait of a functional collective
 * makes none; nor does a stopped one.
 *
 * The rule (vqc_hb_stalled; cmd_watch.c's file comment tells it whole):
 *   - a rank's clock starts at its first heartbeat: a slow start before the
 *     bridge writes one is not a hang; but once any rank has beaten, a rank
 *     with none counts from then;
 *   - progress is a heartbeat that changed (its beat count, time or pid):
 *     the watcher notes when, on its own clock (the heartbeat's time where
 *     that is this machine's and fits, else the moment it saw the change:
 *     a rank on another machine is never hung early by its clock);
 *   - ranks that finished (state 2) or whose process ended are not hung;
 *   - a live rank, stopped or not, whose last progress is --timeout old or
 *     older is hung. A rank slower than --timeout between two signs of
 *     progress is hung by that definition.
 *   - setting up (waiting in init_process_group's rendezvous, or past it
 *     with no collective or step end yet: state 3; an MPI program's rank
 *     from the interposer's load until MPI_Init returns, state 3 and then
 *     state 1 with op "MPI_Init" or "MPI_Init_thread"), or not yet beaten
 *     with its process known, a rank whose process used at least a tenth
 *     of a core over the last second is making progress (it imports,
 *     builds its model, compiles); and a rank setting up is hung only when
 *     no rank of the job made progress for --timeout (a rank in the
 *     rendezvous waits for one still importing torch). A rank idle in its
 *     setup (a data loader stuck on a read while its peer waits in DDP's
 *     first gradient all_reduce) is hung like any other. (A rank not yet
 *     beaten keeps its own clock: from the first heartbeat of any, or its
 *     last busy second.)
 * Who caused it (vqc_hb_culprits), once every live rank told its stack:
 * the stopped ranks; else the hung ranks not in a collective whose
 * innermost Python frame is the program's (not torch's or vqcheck's); else
 * the ranks that ended cleanly (status 0, or finished) while others wait;
 * else every hung rank.
 *
 * The reader, the decision and the culprit rule are pure functions of what
 * they are given (unit tests feed them files and made-up process states);
 * vqc_hb_watch_poll is the part that looks at the machine. */
#ifndef VQC_WATCH_HEARTBEAT_H
#define VQC_WATCH_HEARTBEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "watch_job.h"

/* The file's size and its states (python/vqcheck/_heartbeat.py). */
#define VQC_HB_SIZE 64
enum {
  VQC_HB_RUNNING = 0,
  VQC_HB_IN_COLLECTIVE = 1, /* op "rendezvous": in init_process_group */
  VQC_HB_FINISHED = 2,
  VQC_HB_SETUP = 3 /* init_process_group returned; no collective or step
                      end since (the job builds its model, data, ...) */
};

/* The most ranks a launcher's job is watched at (rank-<r>.heartbeat files
 * of higher ranks are left alone): bounds what a stray file can make this
 * process allocate. */
#define VQC_HB_MAX_RANKS 65536

/* One heartbeat as read. */
typedef struct vqc_heartbeat {
  uint32_t version;
  uint32_t pid;
  uint32_t state;     /* VQC_HB_* */
  uint64_t beats;     /* signs of progress so far */
  uint64_t last_ns;   /* CLOCK_MONOTONIC of the last, on the rank's machine */
  uint64_t seq;       /* the collective in flight (state 1), else the last */
  uint64_t step;      /* optimizer steps so far */
  char op[17];        /* state 1: the collective; printable ASCII only */
} vqc_heartbeat;

/* Decodes the n bytes at b (a heartbeat file's first bytes) into *hb;
 * false, *hb untouched, when they are not one: fewer than VQC_HB_SIZE
 * bytes, another magic or version, a state past 2. The op's bytes that are
 * not printable ASCII become '?'. */
bool vqc_heartbeat_decode(const unsigned char *b, size_t n,
                          vqc_heartbeat *hb);

/* Reads the heartbeat at path: two reads of its first VQC_HB_SIZE bytes
 * that agree (a rank may be rewriting it; a few tries), decoded. False when
 * there is none to trust: no file, not a regular file (a link, a FIFO: not
 * followed, never blocks), short, garbage, or reads that never agreed. */
bool vqc_heartbeat_read(const char *path, vqc_heartbeat *hb);

/* A process as /proc shows it. */
typedef enum vqc_proc_state {
  VQC_PROC_UNKNOWN = 0, /* no pid, or a process not of this machine */
  VQC_PROC_RUNNING,     /* running or sleeping (R, S, D, I, ...) */
  VQC_PROC_STOPPED,     /* T: a stop signal (SIGSTOP, SIGTSTP); t: traced */
  VQC_PROC_ZOMBIE,      /* Z: ended, not yet reaped */
  VQC_PROC_GONE         /* no such process (X: dead) */
} vqc_proc_state;

/* The state in the text of a /proc/<pid>/stat ("123 (comm) S 1 ..."; the
 * comm may hold spaces and ')'), its letter in *letter and its parent in
 * *ppid (either may be NULL). VQC_PROC_UNKNOWN when the text does not
 * parse. */
vqc_proc_state vqc_proc_state_parse(const char *text, char *letter,
                                    pid_t *ppid);

/* /proc/<pid>/stat's state (VQC_PROC_GONE when there is none; pid <= 0:
 * VQC_PROC_UNKNOWN), letter and parent as vqc_proc_state_parse. */
vqc_proc_state vqc_proc_state_of(pid_t pid, char *letter, pid_t *ppid);

/* Whether pid is a descendant of this process (its parents, read from
 * /proc, lead here within 64 generations): only such a process is ever
 * signalled on a heartbeat's word. */
bool vqc_proc_is_descendant(pid_t pid);

/* One rank as the watcher knows it. */
typedef struct vqc_hb_rank {
  int rank;
  bool beaten;          /* a heartbeat of it was read */
  vqc_heartbeat hb;     /* the latest read */
  double since;         /* the watcher's clock (s): its last progress */
  pid_t pid;            /* its Python process, 0 unknown: the heartbeat's
                         * when that is the rank's process or of its group
                         * (--nproc), or our descendant (a launcher's) */
  vqc_proc_state proc;  /* at the last look */
  char letter;          /* /proc's state letter, '\0' unknown */
  bool ended;           /* its process ended (or is a zombie, or is gone) */
  int exit_code;        /* when ended and known: >= 0; else -1 */
  int signal;           /* when ended by a signal and known; else 0 */
  /* Its process's CPU use, sampled about once a second while it sets up:
   * cpu_s at the watcher's time cpu_at (0: none yet); busy_at: the last
   * time a sample showed it busy (a tenth of a core or more), 0 never. */
  double cpu_s, cpu_at, busy_at;
  /* What the watcher learnt of it once (a launcher's ranks). */
  bool host_known;      /* its live record's start line was read */
  bool local;           /* that line names this machine */
  /* At a hang (cmd_watch.c). */
  bool stalled;         /* no progress for the timeout at the decision */
  double idle_s;        /* seconds without progress at the decision, to
                         * the millisecond */
  bool asked;           /* sent SIGUSR1 for its stacks */
  long long stacks0;    /* rank-<r>.stacks.txt's size then, -1 none */
} vqc_hb_rank;

/* Notes a heartbeat read of rank r at the watcher's time now (seconds of
 * CLOCK_MONOTONIC): progress when it is the first, or its beats, last_ns or
 * pid changed; r->since then becomes its last_ns when that lies in the
 * second before now (this machine's clock, seen in time), else now. */
void vqc_hb_note(vqc_hb_rank *r, const vqc_heartbeat *hb, double now);

/* The decision: the rank (an index into r) that has gone longest without
 * progress, when that is timeout seconds or more, and how long in *idle_s;
 * -1 when none has. Ranks that ended, or whose heartbeat says finished,
 * are skipped; a rank that never beat counts from first_beat (the first
 * heartbeat of any rank; 0: none yet, and nothing is hung). Sets every
 * rank's stalled and idle_s. */
int vqc_hb_stalled(vqc_hb_rank *r, int n, double now, double timeout,
                   double first_beat, double *idle_s);

/* Where a rank is at a hang, for vqc_hb_culprits. */
typedef struct vqc_hb_place {
  int rank;
  bool stalled;        /* live, no progress for the timeout */
  bool stopped;        /* process state T or t */
  bool in_collective;  /* its heartbeat, or a hang marker, says so */
  bool user_code;      /* its stack's innermost frame is the program's */
  bool ended_ok;       /* it ended with status 0, or finished */
  bool culprit;        /* set by vqc_hb_culprits */
} vqc_hb_place;

/* Marks the culprits of a hang among p[0..n) (the rule in the file
 * comment) and returns how many. */
int vqc_hb_culprits(vqc_hb_place *p, int n);

/* What the watcher reads every few tenths of a second (cmd_watch.c). */
typedef struct vqc_hb_watch {
  const char *dir;      /* the run directory (borrowed) */
  int nproc;            /* --nproc; 0: a launcher's job */
  int n;                /* ranks known: 0..n-1 */
  vqc_hb_rank *ranks;   /* n of them, rank i at [i] */
  int cap;
  double first_beat;    /* the watcher's time of the first heartbeat; 0 */
  int size;             /* a launcher's job: its size from a live record */
  char host[256];       /* this machine's name */
} vqc_hb_watch;

/* Starts an empty watcher of dir (borrowed) for a job of nproc ranks (0: a
 * launcher's). Free with vqc_hb_watch_free. False when out of memory. */
bool vqc_hb_watch_init(vqc_hb_watch *w, const char *dir, int nproc);
void vqc_hb_watch_free(vqc_hb_watch *w);

/* One look at time now: every rank's heartbeat (with --nproc ranks
 * 0..nproc-1; with a launcher every rank-<r>.heartbeat, and ranks up to
 * the job's size once a live record tells it), and every rank's process:
 * with --nproc its process among procs[0..nprocs) (ended as waitpid saw
 * it), with a launcher the heartbeat's pid when that is our descendant, or
 * gone when its live record says this machine and /proc has no such pid. */
void vqc_hb_watch_poll(vqc_hb_watch *w, const vqc_watch_proc *procs,
                       int nprocs, double now);

/* Whether rank r is setting up (the rule in the file comment): its
 * heartbeat says so (state 3, or the "rendezvous"). */
bool vqc_hb_setting_up(const vqc_hb_rank *r);

/* The CPU time (user + system, seconds) of the text of a /proc/<pid>/stat;
 * negative when it does not parse. */
double vqc_proc_cpu_parse(const char *text);

/* Notes a CPU sample of rank r at time now (vqc_hb_watch_poll's, made
 * testable): one at least a second after the last that shows a tenth of a
 * core or more used between them sets r->busy_at, and so r->since when
 * the rank has beaten and sets up. */
void vqc_hb_note_cpu(vqc_hb_rank *r, double cpu_s, double now);

/* Why a rank is stopped, by its state letter, for a message: "T: a stop
 * signal such as SIGSTOP", "t: a debugger". */
const char *vqc_proc_stopped_text(char letter);

#endif /* VQC_WATCH_HEARTBEAT_H */
