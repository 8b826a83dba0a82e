/* rundir.h: the run directory and its run.json (DESIGN.md "Run directory"),
 * in one place for everything that writes one: the scenario runner and
 * `vqcheck suite` (harness/), the instrumentation API (instrument.h, this
 * layer), and the offline commands `vqcheck compare` and `analyze`
 * (harness/). It lives in checkers/ because the instrumentation API is here
 * and the harness sits above; lib/ knows nothing of runs.
 *
 * run.json, schema_version 1, whoever writes it:
 *   {"schema_version": 1,
 *    <the writer's subject: "scenario" (runner, compare, analyze), or
 *     "program" and "check" (instrumentation API)>,
 *    "environment": {"hostname", "backend", ["device",] "ranks", "pid"},
 *    "build": {"version", "build_type", "compiler", "mpi", "cuda"},
 *    "finished": ISO time (UTC), "duration_s",
 *    "training": {"status", "failed_rank", "message", "steps_done"},
 *    "findings": [finding, ...], "steps": [...], "exit_code",
 *    <anything a writer adds after: "compare", "checks", "analysis">}
 * vqc_run_json_new builds all but the subject and the steps' contents; the
 * writers differ only there. */
#ifndef VQC_RUNDIR_H
#define VQC_RUNDIR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "findings.h"
#include "vqc/status.h"

/* ---- the directory
 *
 * vqcheck deletes only what it wrote (DESIGN.md "Never lose a user's
 * file"), and two commands never write one directory at once. So:
 *
 * Ownership. A directory vqcheck prepares gets a marker file of its own,
 * VQC_RUN_DIR_MARKER (".vqcheck-run", saying what made it and when). Only a
 * directory that holds the marker, or is empty (new), may be used: any
 * other is refused with VQC_EINVAL ("refusing to use out as a run
 * directory: it is not empty and vqcheck did not create it (found
 * rank-0.pt); pass a new or empty directory"), which the CLI turns into
 * exit 2. vqcheck's own bookkeeping files (the marker, the lock file and an
 * interrupted marker write) do not make a directory non-empty.
 *
 * Links. No file in a run directory is ever written through a symbolic
 * link (vqc/fsutil.h "Links": every open has O_NOFOLLOW and O_CLOEXEC,
 * vqc_open_write; every atomic write refuses a link at its name). A link
 * at a name a run writes (the list below) makes
 * vqc_run_dir_clear, and so every command that prepares a directory (run,
 * suite, watch, compare, the instrumentation API), refuse it with
 * VQC_EINVAL naming it ("refusing to write through the link DIR/NAME:
 * remove it (vqcheck never follows links in a run directory)"), before
 * anything is removed or written.
 *
 * Commands that write into a directory, and how each takes it:
 *   run, suite, watch, compare --out (a new or vqcheck's directory), the
 *     instrumentation API: vqc_run_dir_prepare (marker, lock, clear);
 *   compare (into its TRACE_DIR), analyze, report: a directory another
 *     program may have made: vqc_run_dir_claim_outputs for the names they
 *     write, then vqc_run_dir_lock;
 *   compare into a directory it made and then failed in: it takes it back
 *     with vqc_run_dir_abandon, never another process's marker or lock.
 * `compare --out` also refuses a directory whose run.json is not a
 * comparison (another run's verdict: cmd_compare.c).
 *
 * The marker is made whole and once (a written temporary, link()ed to its
 * name: of several processes, one makes it and none replaces it).
 *
 * Clearing removes, from a directory vqcheck owns, only the exact names a
 * run writes, when they are regular files (never a link or a directory):
 *   run.json, report.md, report.html, junit.xml;
 *   rank-<r>.trace.jsonl, rank-<r>.ledger.jsonl, rank-<r>.status.json,
 *   rank-<r>.live.jsonl (r in plain decimal, as the writers print it);
 *   the temporaries of an atomic write of those that was interrupted
 *   ("<name>.tmp.<pid>", vqc/fsutil.h).
 * Not vqcheck.log: `vqcheck suite` writes it before its child `vqcheck run`
 * prepares the directory, and truncates it itself.
 *
 * Locking. VQC_RUN_DIR_LOCK (".vqcheck.lock") inside the directory is
 * flock()ed exclusively by the process that prepares it and names the
 * holder ("pid 1234 (vqcheck suite, started 2026-11-24T03:30:00Z, host
 * h)"). A second process is refused with VQC_EINVAL ("out is in use by pid
 * 1234 (...); wait for it to end or pass another --out"). The lock belongs
 * to the process (taking it again there only counts), is not inherited
 * across exec, and ends with vqc_run_dir_unlock or the process: a killed
 * holder never leaves a stale lock. */

#define VQC_RUN_DIR_MARKER ".vqcheck-run"
#define VQC_RUN_DIR_LOCK ".vqcheck.lock"
/* The names vqcheck wrote into a directory that is not its own
 * (vqc_run_dir_claim_outputs), one per line. */
#define VQC_RUN_DIR_WRITTEN ".vqcheck-written"

/* "vqcheck-runs/<name>-<YYYYmmdd-HHMMSS>" into buf (local time). */
void vqc_run_default_dir(const char *name, char *buf, size_t n);

/* The run directory to use, into buf: `wanted` when it is neither NULL nor
 * "", else vqc_run_default_dir(name) with -2, -3, ... appended when that
 * name is taken (a run of the same second). Callers that take a directory
 * from the user refuse "" first (cli.h vqc_cli_check_out). */
void vqc_run_dir_choose(const char *wanted, const char *name, char *buf,
                        size_t n);

/* VQC_OK when vqcheck may use dir (an existing directory): it holds the
 * marker, or nothing but vqcheck's bookkeeping files. VQC_EINVAL naming the
 * first other entry otherwise; VQC_EIO when dir cannot be read. Makes and
 * changes nothing. */
vqc_status vqc_run_dir_check(const char *dir);

/* Before vqcheck writes the files `names` (n of them) into dir, a
 * directory another program may have made (`vqcheck compare` writing into
 * TRACE_DIR, `vqcheck analyze` on a foreign job's traces): VQC_OK when dir
 * is vqcheck's (vqc_run_dir_check), or each name is absent or listed in
 * dir's VQC_RUN_DIR_WRITTEN (the names vqcheck wrote there before). The
 * names are then added to that list, so the next such command may replace
 * them. dir is never marked as vqcheck's: its other files stay out of
 * vqc_run_dir_clear's reach. VQC_EINVAL naming a file vqcheck did not
 * write; VQC_EIO when the list cannot be read or written. */
vqc_status vqc_run_dir_claim_outputs(const char *dir,
                                     const char *const *names, size_t n);

/* Takes the run directory lock of dir (an existing directory), creating
 * the lock file, and writes this process into it as the holder. Held until
 * vqc_run_dir_unlock(dir) (as often as it was taken) or until the process
 * ends. VQC_EINVAL naming the holder when another process holds it;
 * VQC_EIO when the lock file cannot be made or locked. */
vqc_status vqc_run_dir_lock(const char *dir);

/* Gives back one hold of dir's lock taken by this process; the last one
 * releases it. Nothing happens when this process does not hold it. */
void vqc_run_dir_unlock(const char *dir);

/* Removes what an earlier run left in dir of the files a run writes (the
 * list above), so they cannot be taken for this run's: a stale ledger dump
 * would be analysed as part of this run, a stale run.json or report read
 * as its verdict. Refuses (VQC_EINVAL, nothing removed) a directory that
 * vqc_run_dir_check refuses, whose lock another process holds, or that
 * holds a symbolic link at a name a run writes; marks an
 * empty one as vqcheck's. Safe to call without holding the lock, but only
 * the lock keeps another process from starting in dir right after: take it
 * (vqc_run_dir_lock, or vqc_run_dir_prepare) for as long as dir is
 * written. VQC_EIO naming the file that cannot be read or removed. */
vqc_status vqc_run_dir_clear(const char *dir);

/* Makes dir (and its missing parents, vqc_mkdir_p) for a command that
 * may have to take it back (vqc_run_dir_abandon). *created: whether this
 * call made dir itself -- one mkdir(2), so of several processes making it
 * at once exactly one is told so; the others, and any call on an existing
 * directory, get false. VQC_EIO when it cannot be made or is not a
 * directory; VQC_EINVAL for an empty or too long name. */
vqc_status vqc_run_dir_make(const char *dir, bool *created);

/* Takes back a directory this process made (vqc_run_dir_make said
 * created) after its command failed, without ever taking another
 * process's: only while holding dir's lock (this process's own hold, which
 * ends here, or one taken now; when another process holds it, nothing is
 * touched), and only when dir holds nothing but the marker and the lock
 * file. Then the marker, the lock file and dir go (rmdir: never a file
 * some other process put there since). A directory some run has written
 * into (run.json, reports, rank files) keeps its marker and lock file, so
 * it stays vqcheck's. Best effort: reports nothing. */
void vqc_run_dir_abandon(const char *dir);

/* Makes dir ready for a run: vqc_mkdir_p(dir), vqc_run_dir_check (before
 * anything is written into it), vqc_run_dir_lock, then vqc_run_dir_clear.
 * On success this process holds the lock (vqc_run_dir_unlock, or the end of
 * the process, gives it back); on failure it does not. On several ranks
 * only one prepares (the others vqc_mkdir_p, after it). */
vqc_status vqc_run_dir_prepare(const char *dir);

/* ---- run.json */

#define VQC_RUN_JSON_SCHEMA 1

/* The members every run.json has (see the file comment). */
typedef struct vqc_run_json_info {
  const char *backend;   /* environment.backend ("threads", "mpi", "traces") */
  const char *device;    /* environment.device ("cpu", "cuda"); NULL: none */
  int ranks;             /* environment.ranks */
  double duration_s;
  vqc_status training;   /* training.status: how training ended */
  int failed_rank;       /* training.failed_rank; -1 when none */
  const char *message;   /* training.message; NULL: "" */
  int64_t steps_done;    /* training.steps_done */
  vqc_findings *findings; /* NULL: an empty array */
  int exit_code;
} vqc_run_json_info;

/* A new run.json document (new reference): schema_version, then the
 * members of `head` in their order (the writer's subject; the reference is
 * taken, head may be NULL), then environment (this host and process),
 * build (this build), finished (now), duration_s, training, findings,
 * "steps": [] (the writer appends its steps) and exit_code, from info.
 * Every string of info is made valid UTF-8 (utf8.h: bytes replaced by '?';
 * training.message then ends with VQC_UTF8_NOTE_TEXT), so no member is
 * ever missing; a NULL or "" backend is "unknown". */
json_t *vqc_run_json_new(json_t *head, const vqc_run_json_info *info);

/* "2024-05-01T12:00:00Z" (now, UTC) into buf: run.json's time stamps. */
void vqc_run_json_time(char *buf, size_t n);

/* Writes j to path atomically (vqc_write_atomic) with jansson's dump
 * `flags`. VQC_EIO naming the file otherwise. */
vqc_status vqc_json_write_atomic(const char *path, const json_t *j,
                                 size_t flags);

/* The most "steps" entries a run.json holds. A longer run (a scenario of up
 * to 1,000,000 steps, a foreign program's any number) keeps the first and
 * the last step, the steps whose "findings" differs from the step before
 * (where something was found; half the budget), and evenly spaced steps
 * between (the other half), and says how many it left out as
 * "steps_omitted". */
#define VQC_RUN_JSON_MAX_STEPS 100000

/* Writes j as run_dir/run.json, atomically, indented and ASCII (what every
 * run.json writer uses, so the files diff cleanly). Its "steps" are thinned
 * to VQC_RUN_JSON_MAX_STEPS in what is written (j itself is not changed),
 * so every run.json vqcheck writes is one it reads
 * (VQC_RUN_JSON_MAX_BYTES). */
vqc_status vqc_run_json_write(const char *run_dir, const json_t *j);

/* Whether name (a directory entry) is "rank-<r><suffix>", e.g.
 * suffix ".findings.jsonl", with r in plain decimal as the writers print it
 * ("0", "17"; not "01" or "+1") and below 1000000; *rank gets r. */
bool vqc_run_dir_rank_file(const char *name, const char *suffix, int *rank);

/* The ranks r with a file "rank-<r><suffix>" in dir (vqc_run_dir_rank_file),
 * increasing, into a new array *ranks (the caller frees it; NULL when none)
 * of *n entries. VQC_EIO when dir cannot be read, VQC_ENOMEM. */
vqc_status vqc_run_dir_rank_list(const char *dir, const char *suffix,
                                 int **ranks, int *n);

/* The highest rank r with a file "rank-<r><suffix>" in dir, + 1; 0 when
 * there is none or dir cannot be read. */
int vqc_run_dir_rank_span(const char *dir, const char *suffix);

/* ---- reading run.json, bounded
 *
 * Every reader of a run.json (the reports, the runner's read-back, `vqcheck
 * run --json`, the suite, `vqcheck analyze`) goes through
 * vqc_run_json_load, so a file that is not one vqcheck wrote (a link, a
 * device, a 200 MB file, which jansson turns into about 1 GB of memory) is
 * refused with its name and why, before it is parsed.
 *
 * VQC_RUN_JSON_MAX_BYTES: above anything vqcheck writes. vqc_run_json_write
 * keeps at most VQC_RUN_JSON_MAX_STEPS entries of "steps" (about 145 bytes
 * each: under 15 MiB however long the run); the rest is findings, a few
 * KiB each. 64 MiB leaves room for thousands of those, and bounds a parse
 * (about 5x the text in jansson's objects) near 320 MB. Traces (trace.h)
 * and scenario files (1 MiB) have their own caps. */
#define VQC_RUN_JSON_MAX_BYTES ((long long)64 * 1024 * 1024)

/* Reads the run.json at path into *out (a new reference; the caller
 * json_decref()s it; NULL on failure). The file must be a regular file, not
 * a symbolic link (lstat), of at most VQC_RUN_JSON_MAX_BYTES, holding one
 * JSON object without duplicate keys (JSON_REJECT_DUPLICATES). Errors,
 * each naming path:
 *   VQC_EINVAL  no such file; a link or not a regular file; too big (its
 *               size and the cap) -- the CLI's exit 2;
 *   VQC_EPARSE  not valid JSON ("path:line:column: not valid JSON: ..."),
 *               or not an object at the top -- exit 2;
 *   VQC_EIO     it cannot be opened or read -- exit 3. */
vqc_status vqc_run_json_load(const char *path, json_t **out);

#endif /* VQC_RUNDIR_H */
