/* analyze.c: the offline analysis of a run directory (see analyze.h), the
 * work of `vqcheck analyze RUN_DIR`: re-analyses what a job left in its run
 * directory, offline: typically after the job was killed (by a
 * scheduler's time limit, or by hand while it hung) before rank 0 could
 * write run.json, or to re-check a run directory copied off a cluster.
 *
 *   ledger dumps  rank-<r>.ledger.jsonl / rank-<r>.status.json
 *                 (checkers/ledger_analysis.h): deadlock, rank_failure;
 *   traces        rank-<r>.trace.jsonl (checkers/trace_compare.h):
 *                 divergence, from digests only;
 *   bridge        rank-<r>.findings.jsonl (bridge_findings.h): what the
 *                 Python bridge of `vqcheck watch` found in-process
 *                 (lost_inplace, ...), merged across ranks;
 *   not compared  what could not be checked, said rather than hidden
 *                 (issue 24), in run.json's "analysis" for the reports and
 *                 never a finding or an exit code: the tensors whose
 *                 replica group is one rank (trace_compare.h), and the
 *                 tensors a rank could not digest, from the not_digested
 *                 events of the live records (not_digested.h);
 *   run.json      the findings the run itself recorded, when it got that
 *                 far (validated: a corrupt one is exit 2, named by
 *                 file:line or field).
 *
 * New findings that repeat one run.json already has are dropped: same kind
 * and same step and tensor, or for deadlock and rank_failure (which the
 * ledger analysis reports at most once per run) the same kind; a deadlock
 * also repeats a collective_mismatch (strict mode vetoed that collective,
 * and the run reports nothing more about its end). An exception that
 * ended a rank (the bridge's rank_failure with detail.exception) goes
 * before the ledger's rank_failure, unless it came out of a collective:
 * then it repeats a deadlock or collective_mismatch (exceptions_first).
 * So the run's
 * own finding, with its element-level detail, wins over the digest-only one
 * from the traces, and analysing twice changes nothing. run.json is then
 * rewritten (temporary file + rename; created in the runner's schema if it
 * was missing) with an "analysis" section, and the reports regenerated.
 * Findings that need the live state (gradient_mismatch, lost_inplace,
 * shape_mismatch, nonfinite, a divergence's element-level detail) cannot
 * be found anew offline; each rank put them on its live record as it made
 * them ({"event":"finding"}, findings_record.h), so they come back from
 * there, merged as the run merged them, when run.json was never written.
 *
 * Live records (rank-<r>.live.jsonl, ledger_analysis.h), which every rank
 * appends as it goes, stand in for the dumps of ranks that left none: a
 * rank whose record stops without an end line is a rank_failure, with its
 * last step and collective. A directory with live records, no run.json and
 * a rank that never wrote "finished" (or ended cleanly after fewer steps
 * than another rank's record shows) is never clean: training is marked
 * VQC_EABORTED (exit 3 unless a finding explains it, then 1). Nor is a
 * directory without run.json whose files compared nothing (no finding, no
 * two ranks' digests of one step): VQC_EUNSUPPORTED, exit 3.
 *
 * vqcheck's own output is always valid (issue 23): every string from
 * outside (a rank's stderr, the bridge's files, paths) goes into run.json
 * through checkers/utf8.h, findings through vqc_finding_to_json. The
 * run.json written is then checked with the validator every reader uses
 * (the reports'); should it fail anyway, it is rebuilt from what is known
 * (write_checked below), the reports are written from that, and the exit
 * code stays the verdict's, never 2.
 *
 * The exit code: 0 clean, 1 findings, 2 bad input, 3 I/O error or (as for
 * `vqcheck run`) training that stopped with an error no finding explains.
 * Nothing is printed here: the CLI prints the result (cmd_analyze.c,
 * vqc_cli_analyze). */
#include "analyze.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bridge_findings.h"
#include "findings_record.h"
#include "ledger_analysis.h"
#include "not_digested.h"
#include "offline.h"
#include "report.h"
#include "trace_compare.h"
#include "mpi_leaks.h"
#include "p2p_messages.h"
#include "rma_races.h"
#include "uneven_ends.h"
#include "utf8.h"
#include "watch_checks.h"


/* The calling thread's last library error as o words it (analyze.h). */
static const char *error_text(const vqc_analyze_opts *o) {
  return o->error_text ? o->error_text() : vqc_last_error();
}

/* Ranks with a file "rank-<r><suffix>" in dir: how many, and the highest
 * (-1 when none). */
static int count_rank_files(const char *dir, const char *suffix,
                            int *max_rank) {
  *max_rank = -1;
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  const size_t ls = strlen(suffix);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    size_t len = strlen(name);
    if (strncmp(name, "rank-", 5) != 0 || len <= 5 + ls ||
        strcmp(name + len - ls, suffix) != 0)
      continue;
    char *end;
    long r = strtol(name + 5, &end, 10);
    if (end != name + len - ls || r < 0 || r > 1000000) continue;
    n++;
    if (r > *max_rank) *max_rank = (int)r;
  }
  closedir(d);
  return n;
}

/* Loads and validates an existing run.json into *doc and its findings into
 * fl. VQC_EPARSE naming file:line:column or the field otherwise. */
static vqc_status load_run_json(const char *path, json_t **doc,
                                vqc_findings *fl) {
  *doc = NULL;
  json_t *j = NULL;
  /* Bounded and checked (rundir.h): a link, a special file or one over
   * VQC_RUN_JSON_MAX_BYTES is refused before it is parsed. */
  vqc_status s = vqc_run_json_load(path, &j);
  if (s != VQC_OK) {
    if (s == VQC_EIO) return s;
    char why[1024]; /* vqc_error overwrites the message it would quote */
    snprintf(why, sizeof why, "%s", vqc_last_error());
    return vqc_error(s, "%s (not a run.json vqcheck can use: move it away "
                     "to analyse the dumps and traces alone)", why);
  }
  const json_t *v = json_object_get(j, "schema_version");
  const json_t *fs = json_object_get(j, "findings");
  if (!json_is_object(j))
    s = vqc_error(VQC_EPARSE, "%s: expected a JSON object at the top", path);
  else if (!json_is_integer(v))
    s = vqc_error(VQC_EPARSE, "%s: field 'schema_version': %s", path,
                  v ? "expected an integer" : "missing");
  else if (json_integer_value(v) != 1)
    s = vqc_error(VQC_EPARSE, "%s: field 'schema_version': version %" 
                  JSON_INTEGER_FORMAT " is not supported (this vqcheck "
                  "reads version 1)", path, json_integer_value(v));
  else if (!json_is_array(fs))
    s = vqc_error(VQC_EPARSE, "%s: field 'findings': %s", path,
                  fs ? "expected an array" : "missing");
  for (size_t i = 0; s == VQC_OK && i < json_array_size(fs); i++) {
    vqc_finding x;
    s = vqc_finding_from_json(json_array_get(fs, i), &x);
    if (s != VQC_OK) {
      char why[1024]; /* vqc_error overwrites the message it would quote */
      snprintf(why, sizeof why, "%s", vqc_last_error());
      s = vqc_error(VQC_EPARSE, "%s: field 'findings[%zu]': %s", path, i, why);
      break;
    }
    s = vqc_findings_add(fl, &x);
  }
  if (s != VQC_OK) {
    json_decref(j);
    return s;
  }
  *doc = j;
  return VQC_OK;
}

/* Whether x reports what y already reports (see the file comment). */
/* The process group a ledger finding is about (detail.process_group: a
 * sub-group's pass, ledger_analysis.h), NULL for the world. */
static const json_t *process_group_of(const vqc_finding *x) {
  return json_object_get(x->detail, "process_group");
}

static bool same_group(const vqc_finding *x, const vqc_finding *y) {
  const json_t *a = process_group_of(x), *b = process_group_of(y);
  return (!a && !b) || (a && b && json_equal(a, b));
}

/* The bridge's note of an exception that ended a rank
 * (vqc_bridge_is_exception) that came out of a collective call
 * (detail.in_collective: most often a peer's failure seen from this side). */
static bool from_collective(const vqc_finding *x) {
  return vqc_bridge_is_exception(x) &&
         json_is_string(json_object_get(x->detail, "in_collective"));
}

/* Whether some deadlock or collective_mismatch names rank r (a rank that
 * never entered a collective the others wait in, or called another). */
static bool named_by_collectives(const vqc_findings *f, int r) {
  for (int i = 0; i < f->count; i++) {
    const vqc_finding *x = &f->items[i];
    if (x->kind != VQC_FINDING_DEADLOCK &&
        x->kind != VQC_FINDING_COLLECTIVE_MISMATCH)
      continue;
    for (int k = 0; k < x->nranks; k++)
      if (x->ranks[k] == r) return true;
  }
  return false;
}

/* The rank's own account of what ended it, an exception raised in its
 * code, goes before the ledger's rank_failure (which sees only a record
 * that stops: a rank torn down by the launcher after its peer raised
 * looks "killed"), so that one repeats it. An exception that came out of
 * a collective stays where it is: a deadlock, collective_mismatch or the
 * ledger's rank_failure tells that story, and it repeats them; so does
 * one of a rank that a deadlock or collective_mismatch names (an extra
 * all_reduce on rank 0 pairs with rank 1's DDP all_reduce issued from
 * C++, and rank 1 raises "Connection reset by peer": the collective is
 * the cause). */
static void exceptions_first(vqc_findings *fresh) {
  for (int i = 0; i < fresh->count; i++) {
    const vqc_finding *x = &fresh->items[i];
    if (!vqc_bridge_is_exception(x) || from_collective(x)) continue;
    /* A rank the collectives name raised in consequence (its next
     * collective, from C++, met the others' misaligned call): the
     * collective finding tells the cause and stays first. */
    if (x->nranks > 0 && named_by_collectives(fresh, x->ranks[0])) break;
    vqc_finding moved = *x;
    memmove(&fresh->items[1], &fresh->items[0], (size_t)i * sizeof *x);
    fresh->items[0] = moved;
    break; /* bridge_findings.c folds them into one */
  }
}

/* A finding of an MPI program's messages (p2p_messages.h): one per
 * channel, each its own problem. */
static bool of_messages(const vqc_finding *x) {
  return json_object_get(x->detail, "p2p") != NULL;
}

static bool same_problem(const vqc_finding *x, const vqc_finding *y) {
  if (of_messages(x) || of_messages(y))
    return x->kind == y->kind && strcmp(x->message, y->message) == 0;
  if (from_collective(x) && (y->kind == VQC_FINDING_DEADLOCK ||
                             y->kind == VQC_FINDING_COLLECTIVE_MISMATCH))
    return true;
  /* A strict-mode mismatch is the run's account of its end: the collective
   * checker skips the ledger analysis after one, so analyze does too. Each
   * process group's collectives are a story of their own. */
  if (x->kind == VQC_FINDING_DEADLOCK &&
      y->kind == VQC_FINDING_COLLECTIVE_MISMATCH)
    return same_group(x, y);
  if (x->kind != y->kind) return false;
  if (x->kind == VQC_FINDING_DEADLOCK || x->kind == VQC_FINDING_RANK_FAILURE)
    return same_group(x, y);
  /* Without a step or a tensor (an MPI program's buffer findings), the
   * call site tells two problems apart. */
  if (x->step < 0 && !x->tensor[0] && !y->tensor[0] &&
      strcmp(x->site, y->site) != 0)
    return false;
  return x->step == y->step && strcmp(x->tensor, y->tensor) == 0;
}

/* An integer member of object o in [lo, hi], or fallback. */
static int64_t int_member(const json_t *o, const char *key, int64_t lo,
                          int64_t hi, int64_t fallback) {
  const json_t *v = json_object_get(o, key);
  if (!json_is_integer(v)) return fallback;
  json_int_t x = json_integer_value(v);
  return x >= lo && x <= hi ? (int64_t)x : fallback;
}

/* The last path component of dir (for a run.json made from scratch). */
static void base_name(const char *dir, char *buf, size_t n) {
  size_t len = strlen(dir);
  while (len > 1 && dir[len - 1] == '/') len--;
  size_t start = len;
  while (start > 0 && dir[start - 1] != '/') start--;
  snprintf(buf, n, "%.*s", (int)(len - start), dir + start);
}

/* Appends ", r" (or "r" first) to the list in buf (n bytes) at *k. */
static void list_rank(char *buf, size_t n, size_t *k, int r) {
  int w = snprintf(buf + *k, *k < n ? n - *k : 0, "%s%d", *k ? ", " : "", r);
  if (w > 0 && *k + (size_t)w < n) *k += (size_t)w;
}

/* Ranks 0..size-1 that left a live record but no clean end (a "finished"
 * line with VQC_OK, or a status dump, which a rank writes at its end too),
 * as "0, 2" into buf; how many. *nlive gets how many ranks left a live
 * record. Ranks that did end cleanly but after fewer steps than another
 * rank's record shows go into `few` ("1 (1 of 3 steps)"), counted in
 * *nfew: every rank of a run trains every step. *most: the most steps a
 * rank's record shows done. Ranks that ended cleanly but whose end line
 * says what their checks could not see (its "unchecked") go into
 * `unchecked` ("rank 0: <why>; rank 1: <why>"), the first one's status
 * into *unchecked_status (NULL when none did). */
static int unfinished_ranks(const char *dir, int size, int *nlive, char *buf,
                            size_t n, char *few, size_t nf, int *nfew,
                            int64_t *most_steps, char *unchecked, size_t nu,
                            const char **unchecked_status) {
  int count = 0;
  size_t k = 0, kf = 0, ku = 0;
  *nlive = 0;
  *nfew = 0;
  *unchecked_status = NULL;
  buf[0] = few[0] = unchecked[0] = '\0';
  /* Each record read once: the most steps any shows, then each rank. */
  vqc_live_info *infos = calloc(size > 0 ? (size_t)size : 1, sizeof *infos);
  bool *scanned = calloc(size > 0 ? (size_t)size : 1, sizeof *scanned);
  int64_t most = 0; /* the most steps a rank's record shows */
  for (int r = 0; infos && scanned && r < size; r++) {
    scanned[r] = vqc_live_scan(dir, r, &infos[r]) == VQC_OK;
    if (scanned[r] && infos[r].steps_done > most) most = infos[r].steps_done;
  }
  *most_steps = most;
  if (!infos || !scanned) { /* no memory to tell: never clean */
    free(infos);
    free(scanned);
    for (int r = 0; r < size; r++) list_rank(buf, n, &k, r);
    return size;
  }
  for (int r = 0; r < size; r++) {
    const vqc_live_info info = infos[r];
    char path[4200];
    if (!scanned[r]) continue;
    if (info.exists) (*nlive)++;
    struct stat st;
    bool status = vqc_status_dump_path(dir, r, path, sizeof path) == VQC_OK &&
                  stat(path, &st) == 0;
    /* A clean end: a status dump, or a "finished" line with VQC_OK (the
     * Python bridge ends with another status when one of its checks had
     * to stop, e.g. on a full disk: the rest of that rank went unchecked). */
    if ((info.finished && strcmp(info.status, "VQC_OK") == 0) || status) {
      /* A clean end whose checks did not see everything. */
      if (info.finished && info.unchecked[0]) {
        int w = snprintf(unchecked + ku, ku < nu ? nu - ku : 0,
                         "%srank %d: %s", ku ? "; " : "", r, info.unchecked);
        if (w > 0 && ku + (size_t)w < nu) ku += (size_t)w;
        if (!*unchecked_status)
          *unchecked_status =
              strcmp(info.unchecked_status, "VQC_EUNSUPPORTED") == 0
                  ? "VQC_EUNSUPPORTED" : "VQC_EIO";
      }
      if (info.exists && !status && info.steps_done < most) {
        (*nfew)++;
        char one[96];
        snprintf(one, sizeof one, "%s%d (%" PRId64 " of %" PRId64 " steps)",
                 kf ? ", " : "", r, info.steps_done, most);
        if (kf + strlen(one) < nf) {
          memcpy(few + kf, one, strlen(one) + 1);
          kf += strlen(one);
        }
      }
      continue;
    }
    count++;
    list_rank(buf, n, &k, r);
  }
  free(infos);
  free(scanned);
  return count;
}

/* ---- when vqcheck's own run.json fails its own validation
 *
 * Everything that goes into run.json is made valid on the way in (utf8.h,
 * findings.h vqc_finding_to_json), so this should never happen; should it
 * anyway (a member of an existing run.json that analyze keeps but never
 * reads, a writer's bug), the verdict is still delivered: run.json is
 * rebuilt from what is known -- the findings (the list the verdict was
 * made from), the exit code, and each member of the first document that
 * passes the validator's rules on its own -- with "validation_error"
 * saying what the first one failed, and the reports are written from it.
 * The exit code stays the verdict's (1 with findings), never 2: the input
 * was fine, the fault is vqcheck's. Should the rebuilt one fail too (not
 * known to happen), no reports are written, an error says so, and the exit
 * code is 1 with findings, else 3. */

/* Whether v is a string other than "". */
static bool nonempty_string(const json_t *v) {
  return json_is_string(v) && json_string_value(v)[0] != '\0';
}

/* Member key of src, when ok(member), set on dst (a new reference). */
static void keep_if(json_t *dst, const json_t *src, const char *key,
                    bool (*ok)(const json_t *)) {
  json_t *v = json_object_get(src, key);
  if (v && ok(v)) json_object_set(dst, key, v);
}

static bool any_json(const json_t *v) { return v != NULL; }
static bool is_string(const json_t *v) { return json_is_string(v); }
static bool is_number(const json_t *v) { return json_is_number(v); }
static bool is_int(const json_t *v) { return json_is_integer(v); }
static bool is_count(const json_t *v) {
  return json_is_integer(v) && json_integer_value(v) >= 0;
}

/* run.json rebuilt from what is known (see above), a new reference: the
 * skeleton of vqc_offline_run_json named as doc names its run, the
 * findings `known`, exit_code `code`, "validation_error" `why`, and those
 * members of doc that keep to run.json's rules. */
static json_t *rebuilt_run_json(const char *dir, const json_t *doc,
                                vqc_findings *known, int code,
                                const char *why) {
  const json_t *subject = json_object_get(doc, "scenario");
  if (!json_is_object(subject)) subject = json_object_get(doc, "program");
  const json_t *env = json_object_get(doc, "environment");
  const json_t *name = json_object_get(subject, "name");
  const json_t *path = json_object_get(subject, "path");
  const json_t *backend = json_object_get(env, "backend");
  char base[256];
  base_name(dir, base, sizeof base);
  json_t *j = vqc_offline_run_json(
      nonempty_string(name) ? json_string_value(name)
                            : base[0] ? base : "run",
      json_is_string(path) ? json_string_value(path) : dir,
      "rebuilt by vqcheck: its first run.json failed its own validation",
      nonempty_string(backend) ? json_string_value(backend) : "unknown",
      (int)int_member(env, "ranks", 1, 1000000, 1));
  /* The skeleton's training, with what of doc's keeps to the rules. */
  const json_t *tr = json_object_get(doc, "training");
  json_t *tr_new = json_object_get(j, "training");
  if (nonempty_string(json_object_get(tr, "status")))
    json_object_set(tr_new, "status", json_object_get(tr, "status"));
  keep_if(tr_new, tr, "message", is_string);
  keep_if(tr_new, tr, "failed_rank", is_int);
  keep_if(tr_new, tr, "steps_done", is_count);
  keep_if(j, doc, "duration_s", is_number);
  keep_if(j, doc, "finished", is_string);
  json_object_set_new(j, "findings", vqc_findings_to_json(known));
  json_t *steps = json_object_get(j, "steps");
  size_t i;
  const json_t *x;
  json_array_foreach(json_object_get(doc, "steps"), i, x) {
    if (json_is_object(x) && is_count(json_object_get(x, "step")))
      json_array_append(steps, (json_t *)x);
  }
  json_object_set_new(j, "exit_code", json_integer(code));
  /* Informative sections the reports read leniently, or not at all. */
  static const char *const sections[] = {"job", "analysis", "checks",
                                         "checks_not_run", "compare"};
  for (size_t k = 0; k < sizeof sections / sizeof sections[0]; k++)
    keep_if(j, doc, sections[k], any_json);
  json_object_set_new(j, "validation_error",
                      vqc_json_text(why, strlen(why)));
  return j;
}

/* Writes *doc as dir/run.json and checks it with the validator every
 * reader of run.json uses (the reports', vqc_report_run_exit_code). When
 * it fails, *doc is replaced by rebuilt_run_json, written and checked
 * again (see above), and r->invalid says why. *valid: whether dir/run.json
 * is valid now (the reports can be made from it); when even the rebuilt
 * one is not, r->rebuilt_invalid says why and *code becomes 3 if it was 0.
 * VQC_OK, or the error of a write (VQC_EIO) or of memory. */
static vqc_status write_checked(const vqc_analyze_opts *o, json_t **doc,
                                vqc_findings *known, int *code, bool *valid,
                                vqc_analyze_result *r) {
  const char *dir = o->run_dir;
  *valid = false;
  VQC_TRY(vqc_run_json_write(dir, *doc));
  int run_code = 0;
  vqc_status s = vqc_report_run_exit_code(dir, &run_code);
  *valid = s == VQC_OK;
  if (s == VQC_OK || s == VQC_EIO || s == VQC_ENOMEM) return s;
  /* (Copied now: vqc_error overwrites the message it would quote.) */
  snprintf(r->invalid, sizeof r->invalid, "%s", error_text(o));
  json_t *re = rebuilt_run_json(dir, *doc, known, *code, r->invalid);
  json_decref(*doc);
  *doc = re;
  VQC_TRY(vqc_run_json_write(dir, re));
  s = vqc_report_run_exit_code(dir, &run_code);
  *valid = s == VQC_OK;
  if (s == VQC_OK || s == VQC_EIO || s == VQC_ENOMEM) return s;
  snprintf(r->rebuilt_invalid, sizeof r->rebuilt_invalid, "%s",
           error_text(o));
  if (*code == 0) *code = 3; /* no verdict to show is no clean run */
  return VQC_OK;
}

void vqc_analyze_result_free(vqc_analyze_result *r) {
  if (!r) return;
  json_decref(r->run_json);
  json_decref(r->warnings);
  r->run_json = r->warnings = NULL;
  vqc_findings_free(&r->findings);
}

vqc_status vqc_analyze_run_dir(const vqc_analyze_opts *ao,
                               vqc_analyze_result *r) {
  memset(r, 0, sizeof *r);
  vqc_findings_init(&r->findings);
  r->warnings = json_array();
  r->run_dir = ao->run_dir;
  const char *const dir = ao->run_dir;
  struct stat st;
  char path[4200];
  int n = snprintf(path, sizeof path, "%s/run.json", dir);
  if (n < 0 || (size_t)n >= sizeof path) {
    snprintf(r->error, sizeof r->error, "run directory path too long");
    r->exit_code = vqc_status_exit_code(VQC_EINVAL);
    return VQC_EINVAL;
  }
  vqc_findings *const known = &r->findings; /* run.json's, in the end */
  vqc_findings fresh;
  vqc_findings_init(&fresh);
  json_t *doc = NULL, *warnings = r->warnings;
  vqc_trace_set *set = NULL;
  vqc_trace_compare_result res;
  memset(&res, 0, sizeof res);
  vqc_not_digested skipped; /* the tensors left out of the digests */
  memset(&skipped, 0, sizeof skipped);
  vqc_status s = VQC_OK;
  int code = 0;
  const bool had_run_json = stat(path, &st) == 0;
  bool locked = false;
  int job_ranks = 0; /* the job's size as the files show it (no run.json) */

  /* Before anything is read or written: one writer per run directory, and
   * a foreign job's directory keeps its own reports (an existing run.json
   * is validated as vqcheck's own format before it is rewritten). */
  static const char *const outputs[] = {"report.md", "report.html",
                                        "junit.xml", "run.json"};
  /* The claim first: a directory analyze refuses gets no lock file. */
  s = vqc_run_dir_claim_outputs(dir, outputs, had_run_json ? 3 : 4);
  if (s == VQC_OK) {
    s = vqc_run_dir_lock(dir);
    locked = s == VQC_OK;
  }
  if (s != VQC_OK) goto fail;

  if (had_run_json) {
    s = load_run_json(path, &doc, known);
    if (s != VQC_OK) goto fail;
  }
  const json_t *env = doc ? json_object_get(doc, "environment") : NULL;
  int ranks = ao->ranks > 0 ? ao->ranks
                            : (int)int_member(env, "ranks", 1,
                                              VQC_TRACE_COMPARE_MAX_RANKS, 0);

  /* The findings the ranks put on record as they made them: first, so
   * they win over what the dumps and traces show of the same problem
   * (they carry the run's own detail). With run.json they repeat its
   * findings; without it they are the run's findings. */
  int nrecorded = 0;
  s = vqc_recorded_findings_read(dir, &fresh, &nrecorded);
  if (s != VQC_OK) goto fail;

  /* Ledger dumps and live records: deadlock and rank_failure. */
  int max_ledger = -1, max_status = -1, max_trace = -1, max_live = -1;
  int nledger = count_rank_files(dir, ".ledger.jsonl", &max_ledger);
  int nstatus = count_rank_files(dir, ".status.json", &max_status);
  int ntrace = count_rank_files(dir, ".trace.jsonl", &max_trace);
  int nlivef = count_rank_files(dir, ".live.jsonl", &max_live);
  int from_ledger = 0;
  if (nledger + nstatus + nlivef > 0) {
    s = vqc_ledger_analyze(dir, ranks, -1, &fresh, &from_ledger);
    if (s != VQC_OK) goto fail;
  }

  /* Traces: divergence. Ranks without a trace are left out (the ledger
   * analysis speaks for ranks that died). */
  vqc_trace_set_options so = {.allow_missing_ranks = true,
                              .expected_ranks = ranks,
                              .allow_empty = true};
  s = vqc_trace_set_open(dir, &so, &set);
  if (s == VQC_OK) s = vqc_trace_set_compare(set, NULL, &fresh, &res);
  if (res.warnings) json_array_extend(warnings, res.warnings);
  if (s != VQC_OK) goto fail;

  /* The Python bridge's own findings (vqcheck watch). */
  int nbridge = 0;
  s = vqc_bridge_findings_read(dir, &fresh, &nbridge);
  if (s != VQC_OK) goto fail;
  exceptions_first(&fresh);
  /* Ranks that ended cleanly after fewer steps than others: uneven inputs
   * when every rank did, the cause of the others' error when one failed. */
  if (nlivef > 0)
    vqc_uneven_ends(dir, ranks > 0 ? ranks : max_live + 1, &fresh, warnings);
  /* What the two checks below could not compare (a file unread, more
   * than they hold) makes the verdict incomplete, as a rank's own end
   * line does. */
  char p2p_cut[600] = "", rma_cut[600] = "";
  /* An MPI program's messages: each rank's sends paired with their
   * receiver's receives (rank-<r>.p2p.jsonl, written at MPI_Finalize). */
  if (nlivef > 0)
    vqc_p2p_messages(dir, ranks > 0 ? ranks : max_live + 1, &fresh, warnings,
                     NULL, p2p_cut, sizeof p2p_cut);
  /* The MPI objects it never freed: warnings (mpi_leaks.h). */
  if (nlivef > 0)
    vqc_mpi_leaks(dir, ranks > 0 ? ranks : max_live + 1, warnings);
  /* Its one-sided accesses: two ranks' unordered conflicting accesses to
   * one window location (rank-<r>.rma.jsonl, written as they complete). */
  if (nlivef > 0)
    vqc_rma_races(dir, ranks > 0 ? ranks : max_live + 1, &fresh, warnings,
                  NULL, rma_cut, sizeof rma_cut);

  /* The tensors the bridge could not digest: told in the reports; those
   * whose contents went unchecked make the verdict incomplete (below). A
   * record that cannot be read here is a warning: the ranks' end lines
   * and the traces are read on their own. */
  if (vqc_not_digested_read(dir, &skipped) != VQC_OK) {
    const char *why = error_text(ao);
    char msg[1400];
    snprintf(msg, sizeof msg, "the tensors not digested could not be read "
             "from the live records: %s", why);
    json_array_append_new(warnings, vqc_json_text(msg, strlen(msg)));
  }
  json_array_extend(warnings, skipped.warnings);
  /* And those the traces name (a trace written without vqcheck watch, by
   * vqcheck.torch.watch() or another writer, has no live record). */
  if (res.not_digested.list && skipped.list &&
      vqc_not_digested_merge(&skipped, &res.not_digested) != VQC_OK) {
    s = VQC_ENOMEM;
    goto fail;
  }

  /* Merge: keep what run.json has, add what is new. */
  if (!doc) {
    char name[256];
    base_name(dir, name, sizeof name);
    if (!name[0]) /* "/": run.json's readers need a name */
      snprintf(name, sizeof name, "run");
    int guess = ranks;
    job_ranks = -1; /* set below, once every file was counted */
    if (max_trace + 1 > guess) guess = max_trace + 1;
    if (max_ledger + 1 > guess) guess = max_ledger + 1;
    if (max_status + 1 > guess) guess = max_status + 1;
    if (max_live + 1 > guess) guess = max_live + 1;
    if (ao->ranks > 0) guess = ao->ranks;
    job_ranks = guess;
    doc = vqc_offline_run_json(ao->name ? ao->name : name,
                               ao->path ? ao->path : dir,
                               ao->description
                                   ? ao->description
                                   : "no run.json: rebuilt by vqcheck analyze "
                                     "from the dumps and traces the job left",
                               ao->backend ? ao->backend : "unknown",
                               guess > 0 ? guess : 1);
    if (doc && ao->duration_s > 0)
      json_object_set_new(doc, "duration_s", json_real(ao->duration_s));
    /* Never clean: a job whose ranks did not all reach their end. */
    char which[512], few[512], unchecked[2300];
    const char *unchecked_status = NULL;
    int nlive = 0, nfew = 0;
    int64_t live_steps = 0;
    int nun = unfinished_ranks(dir, guess, &nlive, which,
                               sizeof which, few, sizeof few, &nfew,
                               &live_steps, unchecked, sizeof unchecked,
                               &unchecked_status);
    /* The analysis' own: what the cross-rank checks could not compare,
     * and the tensors whose contents no digest read. */
    char tensors_cut[1200] = "";
    vqc_not_digested_unchecked(&skipped, tensors_cut, sizeof tensors_cut);
    for (int c = 0; c < 3; c++) {
      const char *cut = c == 0 ? p2p_cut : c == 1 ? rma_cut : tensors_cut;
      if (!cut[0]) continue;
      const size_t k = strlen(unchecked);
      snprintf(unchecked + k, sizeof unchecked - k, "%s%s", k ? "; " : "",
               cut);
      if (!unchecked_status) unchecked_status = "VQC_EUNSUPPORTED";
    }
    /* Uneven clean ends are legal in a watched job (uneven_ends.h); in
     * another, a rank was expected to train every step. */
    if (ao->job) nfew = 0;
    if (nlive > 0 && (nun > 0 || nfew > 0)) {
      char msg[1400];
      /* A job under watch never writes one; another job's was expected. */
      const char *no_run_json = ao->job ? "" : ", and wrote no run.json";
      if (nun > 0)
        snprintf(msg, sizeof msg, "%s%sthe job ended before rank%s %s "
                 "reached a clean end (no end record, or one that tells a "
                 "failure)%s",
                 ao->why ? ao->why : "", ao->why ? ": " : "",
                 nun == 1 ? "" : "s", which, no_run_json);
      else
        snprintf(msg, sizeof msg, "%s%srank%s %s ended cleanly but did not "
                 "train every step another rank's record shows%s",
                 ao->why ? ao->why : "", ao->why ? ": " : "",
                 nfew == 1 ? "" : "s", few, no_run_json);
      json_t *tr0 = json_object_get(doc, "training");
      json_object_set_new(tr0, "status",
                          json_string(vqc_status_name(VQC_EABORTED)));
      json_object_set_new(tr0, "message",
                          vqc_json_text_opts(msg, strlen(msg), VQC_UTF8_NOTE,
                                             NULL));
    } else if (unchecked_status) {
      /* Every rank reached its end, and some of what they did went
       * unchecked: no verdict but a finding (a record cut short by a full
       * disk hid the races it would have shown). */
      char msg[2600];
      snprintf(msg, sizeof msg, "%s%snot everything was checked: %s",
               ao->why ? ao->why : "", ao->why ? ": " : "", unchecked);
      json_t *tr0 = json_object_get(doc, "training");
      json_object_set_new(tr0, "status", json_string(unchecked_status));
      json_object_set_new(tr0, "message",
                          vqc_json_text_opts(msg, strlen(msg), VQC_UTF8_NOTE,
                                             NULL));
    }
    /* Steps done, as the runner counts them: through the last step any
     * record shows (traces hold only the checked steps: at interval > 1,
     * far fewer than were trained). */
    int64_t done = live_steps;
    if (res.nsteps > 0 && res.steps[res.nsteps - 1].step + 1 > done)
      done = res.steps[res.nsteps - 1].step + 1;
    json_object_set_new(json_object_get(doc, "training"), "steps_done",
                        json_integer(done));
    json_t *steps = json_object_get(doc, "steps");
    for (int64_t i = 0; i < res.nsteps; i++)
      json_array_append_new(
          steps, json_pack("{s:I,s:f,s:n,s:i}", "step",
                           (json_int_t)res.steps[i].step, "seconds", 0.0,
                           "loss", "findings", res.steps[i].findings));
  }
  json_t *fs = json_object_get(doc, "findings");
  int added = 0, repeated = 0;
  for (int i = 0; i < fresh.count; i++) {
    const vqc_finding *x = &fresh.items[i];
    /* The caller's hang report says where every rank waits; a process
     * group's ledger adds which member never entered its call. */
    if (ao->caller_reports_hangs && x->kind == VQC_FINDING_DEADLOCK &&
        !json_is_true(json_object_get(x->detail, "misaligned")) &&
        !process_group_of(x))
      continue;
    bool dup = false;
    for (int k = 0; k < known->count && !dup; k++)
      dup = same_problem(x, &known->items[k]);
    if (dup) {
      repeated++;
      continue;
    }
    json_array_append_new(fs, vqc_finding_to_json(x));
    vqc_finding copy = *x;
    copy.detail = json_incref(x->detail);
    if ((s = vqc_findings_add(known, &copy)) != VQC_OK) goto fail;
    added++;
  }
  /* The caller's findings, decided knowing the others (watch). */
  if (ao->more_findings) {
    vqc_findings more;
    vqc_findings_init(&more);
    ao->more_findings(ao->more_ctx, known, &more);
    for (int i = 0; i < more.count && s == VQC_OK; i++) {
      json_array_append_new(fs, vqc_finding_to_json(&more.items[i]));
      vqc_finding copy = more.items[i];
      copy.detail = json_incref(more.items[i].detail);
      s = vqc_findings_add(known, &copy);
      added++;
    }
    vqc_findings_free(&more);
    if (s != VQC_OK) goto fail;
  }
  if (ao->job) json_object_set(doc, "job", (json_t *)ao->job);
  if (ao->unchecked) {
    json_t *tr0 = json_object_get(doc, "training");
    json_object_set_new(tr0, "status",
                        json_string(vqc_status_name(VQC_EUNSUPPORTED)));
    json_object_set_new(tr0, "message",
                        vqc_json_text_opts(ao->unchecked,
                                           strlen(ao->unchecked),
                                           VQC_UTF8_NOTE, NULL));
  }
  /* A run.json made here names the rank that failed, as the runner's does
   * (the first rank of the first rank_failure). */
  for (int i = 0; !had_run_json && i < known->count; i++) {
    if (known->items[i].kind != VQC_FINDING_RANK_FAILURE ||
        known->items[i].nranks < 1)
      continue;
    json_object_set_new(json_object_get(doc, "training"), "failed_rank",
                        json_integer(known->items[i].ranks[0]));
    break;
  }

  const json_t *tr = json_object_get(doc, "training");
  const char *status = json_string_value(json_object_get(tr, "status"));
  if (known->count > 0) code = 1;
  else if (status && strcmp(status, "VQC_OK") != 0) code = 3;
  else code = 0;
  if (ao->unchecked && !(ao->unchecked_found && known->count > 0)) code = 3;
  /* A verdict rebuilt from files that compared nothing (no two ranks'
   * digests, no finding on record) is no verdict: never clean. A job of
   * one rank has no second copy to compare by nature: as `run --ranks 1`,
   * its divergence check is not run, and that is not an error. */
  /* (With ledger_checks, collectives two ranks recorded were compared.
   * An MPI program whose every rank reached MPI_Finalize was also
   * watched all along, for crashes, hangs and its buffers: with no
   * collective in it there is nothing to compare, and that is said, not
   * an error.) */
  int ledger_ranks = 0, finished_ranks = 0;
  for (int k = 0; ao->ledger_checks && k < job_ranks; k++) {
    vqc_live_info li;
    if (vqc_live_scan(dir, k, &li) != VQC_OK) continue;
    if (li.records > 0) ledger_ranks++;
    if (li.started && li.finished && strcmp(li.status, "VQC_OK") == 0)
      finished_ranks++;
  }
  const bool watched_to_end = ao->ledger_checks && job_ranks > 1 &&
                              finished_ranks == job_ranks;
  if (!had_run_json && code == 0 && res.digests_compared == 0 &&
      ledger_ranks < 2 && watched_to_end) {
    json_object_set_new(json_object_get(doc, "training"), "message",
                        json_string("no collective to compare: every rank "
                                    "ran to MPI_Finalize, watched for "
                                    "crashes, hangs and its buffers"));
  } else if (!had_run_json && code == 0 && res.digests_compared == 0 &&
             job_ranks != 1 && ledger_ranks < 2) {
    json_t *tr0 = json_object_get(doc, "training");
    json_object_set_new(tr0, "status",
                        json_string(vqc_status_name(VQC_EUNSUPPORTED)));
    /* Why, when the live records can tell: ranks that ran and never
     * ended a step (a training loop with no torch.optim optimizer under
     * `vqcheck watch`; an MPI program has no steps by nature). */
    int ran = 0, stepped = 0;
    for (int k = 0; k < job_ranks; k++) {
      vqc_live_info li;
      if (vqc_live_scan(dir, k, &li) != VQC_OK || !li.started) continue;
      ran++;
      if (li.steps_done > 0) stepped++;
    }
    char why[640];
    if (!ao->ledger_checks && ran >= 2 && stepped == 0) {
      snprintf(why, sizeof why,
               "nothing was compared: no rank recorded a step end, so no "
               "state was digested (under `vqcheck watch` a step ends at "
               "each torch.optim optimizer's step(); a loop that updates "
               "its weights by hand ends one with vqcheck.torch.step()); "
               "the collectives the ranks recorded were checked and showed "
               "no mismatch or deadlock; a run that checked no state is "
               "not clean");
      json_object_set_new(tr0, "message", json_string(why));
    } else
    json_object_set_new(
        tr0, "message",
        json_string(res.no_replica > 0
                        ? "nothing was compared: the directory holds no "
                          "run.json, no finding on record and no digests of "
                          "two ranks for one step: every traced tensor's "
                          "replica group is one rank (no replica, see "
                          "analysis.no_replica_tensors); a run that checked "
                          "nothing is not clean"
                        : "nothing was compared: the directory holds no "
                          "run.json, no finding on record and no digests of "
                          "two ranks for one step (rank-<r>.trace.jsonl); a "
                          "run that checked nothing is not clean"));
    code = 3;
  }
  json_object_set_new(doc, "exit_code", json_integer(code));
  /* A watched job's run.json says which checks ran (watch_checks.h); an
   * existing run.json keeps its writer's. */
  if (ao->job && !had_run_json)
    vqc_watch_checks(doc, dir, job_ranks, ao->ledger_checks,
                     res.digests_compared, ao->unchecked);

  char when[64];
  vqc_run_json_time(when, sizeof when);
  json_object_set_new(
      doc, "analysis",
      json_pack("{s:s,s:b,s:i,s:i,s:i,s:i,s:i,s:i,s:I,s:I,s:I,s:i,s:i,s:O}",
                "analyzed", when, "had_run_json", had_run_json,
                "ledger_dumps", nledger, "status_dumps", nstatus,
                "live_records", nlivef, "recorded_findings", nrecorded,
                "trace_files", ntrace,
                "findings_files", nbridge,
                "digests_compared", (json_int_t)res.digests_compared,
                "lines_not_compared", (json_int_t)res.lines_not_compared,
                "no_replica", (json_int_t)res.no_replica, "added", added,
                "already_known", repeated, "warnings", warnings));
  /* What was not compared, by name (issue 24; docs/trace-format.md). */
  json_t *an = json_object_get(doc, "analysis");
  json_object_set_new(an, "no_replica_tensors",
                      vqc_trace_no_replica_json(&res));
  json_object_set_new(an, "no_replica_tensor_count",
                      json_integer(res.no_replica_tensors));
  if (res.no_replica_tensors_capped)
    json_object_set_new(an, "no_replica_tensor_count_capped", json_true());
  json_object_set_new(an, "not_digested", skipped.list
                                              ? json_incref(skipped.list)
                                              : json_array());
  json_object_set_new(an, "not_digested_count", json_integer(skipped.count));
  bool valid = false;
  s = write_checked(ao, &doc, known, &code, &valid, r);
  if (s == VQC_OK && valid) s = vqc_offline_write_reports(dir);
  if (s != VQC_OK) goto fail;

  r->run_json = doc;
  doc = NULL;
  r->had_run_json = had_run_json;
  r->ledger_dumps = nledger;
  r->status_dumps = nstatus;
  r->live_records = nlivef;
  r->recorded_findings = nrecorded;
  r->trace_files = ntrace;
  r->findings_files = nbridge;
  r->digests_compared = res.digests_compared;
  r->no_replica = res.no_replica;
  r->no_replica_tensors = res.no_replica_tensors;
  r->not_digested = skipped.count;
  r->added = added;
  r->already_known = repeated;
  goto done;

fail:
  /* (Copied now: what is freed below may set another error.) */
  snprintf(r->error, sizeof r->error, "%s", error_text(ao));
  code = vqc_status_exit_code(s);
done:
  r->exit_code = code;
  if (locked) vqc_run_dir_unlock(dir);
  vqc_trace_set_close(set);
  vqc_trace_compare_result_free(&res);
  vqc_not_digested_free(&skipped);
  json_decref(doc);
  vqc_findings_free(&fresh);
  return s;
}
