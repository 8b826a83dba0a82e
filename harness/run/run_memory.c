/* run_memory.c: a scenario's memory estimate and the check that refuses a
 * scenario this process cannot hold (see run_memory.h).
 *
 * The formula. Per rank: the model's own bytes, which each model's ops
 * table gives (rank_bytes in harness/models/model_<name>.c, where the
 * formula of each sits beside what run_models.c and the library allocate
 * for it: vq and rvq grow with this rank's rows B and the codebooks; fsq,
 * autoencoder and clip also with the global batch G, every rank's rows,
 * which their single-process twin recomputes and clip's loss gathers), and
 * what every rank adds:
 *
 *   every rank   + 1 MiB              checkers, trace writer, comm, the
 *                                     touched part of its thread stack
 *                                     (a rank measured 43 KiB)
 *              + 64 N                 what grows with the rank count N on
 *                                     every rank (so N^2 in all): the
 *                                     side-channel all_gathers that still
 *                                     hold a row per rank: the shape
 *                                     checker's counts (40 B a rank), the
 *                                     dead-code sampler's row counts (8 B),
 *                                     strict mode's one mismatch report (40
 *                                     B). (The step agreement and the
 *                                     divergence, collective and
 *                                     equivalence checkers' per-step
 *                                     exchanges no longer grow with N; a
 *                                     launched rank's end-of-run gathers
 *                                     of every rank's report and findings
 *                                     come after its model is freed.)
 *
 * The process: the sum of its ranks' peaks (threads: every rank at once;
 * mpi: one) + 16 MiB (code, libraries, findings) + 32 bytes per step
 * (rank 0's step summaries) + 4 KiB per rank of the world (N of them, also
 * with mpi: rank 0's analysis of every rank's dump, the per-rank detail of
 * a deadlock in run.json, the threads world's per-rank comm state). For
 * RLIMIT_AS, which counts reserved address space, each rank adds its
 * thread's stack (threads: VQC_RUN_RANK_STACK, the explicit stack
 * lib/src/comm/comm_threads.c gives each rank thread; mpi: RLIMIT_STACK, 8 MiB
 * when unlimited, the main thread's) and its collective ledger ring
 * (VQC_LEDGER_DEFAULT_CAPACITY records), reserved but mostly never
 * touched.
 *
 * At 1024 ranks (vqcheck run --ranks 1024, threads) a vq scenario of
 * batch 4, dim 4, codebook 8 peaked at 154 MiB resident (150 KiB a rank;
 * estimate 1.1 GiB: the 1 MiB a rank is the floor, sized for scenarios
 * of ordinary sizes). The fsq, autoencoder and clip models hold the global
 * batch on every rank, so their memory grows as N^2 x batch: the check
 * refuses those at high rank counts before any rank starts.
 *
 * Open files. Each rank keeps its live record and its trace open, and
 * writes its dumps: VQC_RUN_FILES_PER_RANK descriptors a rank, plus
 * VQC_RUN_FILES_BASE. Where the soft limit (ulimit -n, often 1024) is
 * below that and the hard limit is not, vqc_run_check_memory raises the
 * soft limit, as a user would with `ulimit -n`; otherwise it refuses the
 * scenario up front (1024 ranks would otherwise fail at rank ~340 with
 * "Too many open files").
 *
 * Accuracy, measured (peak RSS by /usr/bin/time -f %M, 2 steps, threads
 * backend) against this estimate:
 *   scenario                                    measured   estimate  ratio
 *   vq  8 ranks x 131072 rows, D 16, C 32        144 MiB    160 MiB   1.11
 *   vq  16 x 1048576, D 16, C 32                2185 MiB   2208 MiB   1.01
 *   vq  2 x 1024, D 256, C 65536                 654 MiB    791 MiB   1.21
 *   rvq 4 x 65536, D 16, C 32, Q 4                82 MiB     94 MiB   1.15
 *   fsq 4 x 65536, D 16, H 32                   1058 MiB   1075 MiB   1.02
 *   autoencoder 4 x 65536, D 16, H 32, C 32     1143 MiB   1155 MiB   1.01
 *   clip 2 x 2048, D 16, H 32                    282 MiB    294 MiB   1.04
 * (tests/unit/test_gate_input.c keeps the estimate within 0.9x..2x of
 * these figures), so the estimate is 1x to 1.25x the measured peak: it
 * counts transient buffers as if they were all live at once. The case that
 * motivated the check, vq 64 x 1048576, is estimated at 8.6 GiB (64 x 137
 * MiB), 4x the 16-rank figure measured above. Counting every transient
 * at once is the safety margin; no further factor is applied, and a
 * scenario is refused only when the estimate exceeds what the process can
 * get. One
 * that passes can still run short (other processes allocate too); it then
 * fails as it did before this check (VQC_ENOMEM, or the kernel's OOM
 * killer), which the check narrows but cannot rule out.
 *
 * The limits (the smallest wins): MemAvailable (not MemTotal: memory other
 * processes hold is not ours), the memory cgroup's limit minus its usage
 * (a container's MemAvailable is the host's), RLIMIT_DATA (against the
 * resident estimate plus the process's VmData: Linux counts private
 * mappings, malloc's large blocks included, there since 4.7) and RLIMIT_AS
 * (against the address estimate plus the process's VmSize: the CUDA, NCCL
 * and MPI libraries alone map 200-300 MiB). With a launched backend each
 * process checks its own rank against its own machine; ranks sharing a
 * machine each see all of it, so there a job the check lets through can
 * still not fit. */
#include "run_memory.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "model.h"
#include "vqc/ledger.h"

#define MIB ((uint64_t)1 << 20)
#define RANK_BASE (1 * MIB)
#define PROCESS_BASE (16 * MIB)
#define STEP_SUMMARY 32u
#define DEFAULT_STACK (8 * MIB)

/* What grows with the rank count N on every rank (see the formula). */
#define PER_PEER 64u
/* ... and once per process for each rank of the world. */
#define PER_WORLD_RANK (4 * 1024u)

/* Within the scenario's ranges (scenario.h, scenario_internal.h: batch <=
 * 2^20 per rank, 1024 ranks, dim and hidden <= 2^16, dim x codebook <= 2^28,
 * Q <= 64) G <= 2^30, and clip's 8 G^2 alone reaches 2^63: sums saturate at
 * UINT64_MAX (which no limit admits) instead of wrapping (vqc_sat_add,
 * vqc_sat_mul: model.h). One rank: the model's bytes (its ops table's
 * rank_bytes) + what every rank adds. */
static uint64_t rank_bytes(const vqc_scenario *sc, uint64_t B, uint64_t G) {
  const vqc_model_ops *model = vqc_model_ops_of(sc->model);
  uint64_t b = RANK_BASE;
  if (model) b = vqc_sat_add(b, model->rank_bytes(sc, B, G));
  return vqc_sat_add(b, PER_PEER * (uint64_t)sc->ranks);
}

void vqc_run_memory_estimate(const vqc_scenario *sc, int ranks_here,
                             vqc_run_memory *out) {
  memset(out, 0, sizeof *out);
  if (!sc) return;
  if (ranks_here < 1) ranks_here = 1;
  if (ranks_here > sc->ranks) ranks_here = sc->ranks;
  out->ranks_here = ranks_here;
  uint64_t G = 0, Bmax = 0;
  for (int r = 0; r < sc->ranks; r++) {
    const uint64_t b = (uint64_t)vqc_scenario_batch(sc, r);
    G += b;
    if (b > Bmax) Bmax = b;
  }
  uint64_t sum = 0;
  if (ranks_here == sc->ranks) {
    for (int r = 0; r < sc->ranks; r++) {
      const uint64_t one = rank_bytes(sc, (uint64_t)vqc_scenario_batch(sc, r), G);
      sum = vqc_sat_add(sum, one);
      if (one > out->per_rank) out->per_rank = one;
    }
  } else {
    /* Which ranks these are is the launcher's choice: size by the largest. */
    out->per_rank = rank_bytes(sc, Bmax, G);
    sum = vqc_sat_mul(out->per_rank, (uint64_t)ranks_here);
  }
  out->resident = vqc_sat_add(sum, PROCESS_BASE +
                                   STEP_SUMMARY * (uint64_t)(sc->steps + 1) +
                                   PER_WORLD_RANK * (uint64_t)sc->ranks);
  /* Several ranks in this process: the threads backend's rank threads and
   * their explicit stacks. One: a launched rank on the main thread. */
  uint64_t stack = VQC_RUN_RANK_STACK;
  if (ranks_here == 1) {
    struct rlimit rl;
    stack = DEFAULT_STACK;
    if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur > 0)
      stack = (uint64_t)rl.rlim_cur;
  }
  uint64_t ring = 1;
  while (ring < VQC_LEDGER_DEFAULT_CAPACITY) ring *= 2;
  ring *= VQC_LEDGER_SLOT_BYTES; /* a record with its seqlock and padding */
  out->address =
      vqc_sat_add(out->resident,
                  vqc_sat_mul((uint64_t)ranks_here, stack + ring));
  out->files = (uint64_t)ranks_here * VQC_RUN_FILES_PER_RANK +
               VQC_RUN_FILES_BASE;
}

/* ---- limits */

static uint64_t rlimit_of(int which) {
  struct rlimit rl;
  if (getrlimit(which, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return VQC_MEMORY_UNLIMITED;
  return (uint64_t)rl.rlim_cur;
}

/* One unsigned number from the first line of a file; false otherwise
 * (also for "max", cgroup v2's "no limit"). */
static bool read_u64_file(const char *path, uint64_t *out) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  unsigned long long v;
  const bool ok = fscanf(f, "%llu", &v) == 1;
  fclose(f);
  if (ok) *out = (uint64_t)v;
  return ok;
}

/* The memory cgroup's limit minus its usage: cgroup v2 (memory.max,
 * memory.current) or v1 (memory.limit_in_bytes, memory.usage_in_bytes) as
 * mounted in this process's namespace. v1 writes "no limit" as a number
 * near 2^63. */
static uint64_t cgroup_left(void) {
  static const char *const pairs[2][2] = {
      {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes",
       "/sys/fs/cgroup/memory/memory.usage_in_bytes"}};
  for (int i = 0; i < 2; i++) {
    uint64_t limit, used;
    if (!read_u64_file(pairs[i][0], &limit)) continue;
    if (limit >= ((uint64_t)1 << 60)) return VQC_MEMORY_UNLIMITED;
    if (!read_u64_file(pairs[i][1], &used)) used = 0;
    return limit > used ? limit - used : 0;
  }
  return VQC_MEMORY_UNLIMITED;
}

/* The "<key_a>: N kB" and "<key_b>: N kB" lines of a /proc file (meminfo,
 * self/status), in bytes, into *a and *b; left as they are when missing. */
static void read_kb_pair(const char *path, const char *key_a, uint64_t *a,
                         const char *key_b, uint64_t *b) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[256];
  const size_t la = strlen(key_a), lb = strlen(key_b);
  while (fgets(line, sizeof line, f)) {
    unsigned long long kb;
    if (strncmp(line, key_a, la) == 0 && line[la] == ':' &&
        sscanf(line + la + 1, " %llu kB", &kb) == 1)
      *a = (uint64_t)kb * 1024;
    else if (strncmp(line, key_b, lb) == 0 && line[lb] == ':' &&
             sscanf(line + lb + 1, " %llu kB", &kb) == 1)
      *b = (uint64_t)kb * 1024;
  }
  fclose(f);
}

void vqc_run_memory_limits_read(vqc_run_memory_limits *out) {
  out->mem_total = out->mem_available = VQC_MEMORY_UNLIMITED;
  read_kb_pair("/proc/meminfo", "MemTotal", &out->mem_total, "MemAvailable",
               &out->mem_available);
  out->cgroup_left = cgroup_left();
  out->rlimit_as = rlimit_of(RLIMIT_AS);
  out->rlimit_data = rlimit_of(RLIMIT_DATA);
  out->vm_size = out->vm_data = 0;
  read_kb_pair("/proc/self/status", "VmSize", &out->vm_size, "VmData",
               &out->vm_data);
}

/* ---- the check */

static void human(uint64_t bytes, char *buf, size_t n) {
  const double b = (double)bytes;
  if (bytes >= ((uint64_t)1 << 30))
    snprintf(buf, n, "%.1f GiB", b / (double)((uint64_t)1 << 30));
  else if (bytes >= MIB)
    snprintf(buf, n, "%.0f MiB", b / (double)MIB);
  else
    snprintf(buf, n, "%.0f KiB", b / 1024.0);
}

/* The first limit of lim that est exceeds, described into have (what the
 * process can get) with the figure compared against it in *need; false
 * when est fits every memory limit. */
static bool exceeded(const vqc_run_memory *est,
                     const vqc_run_memory_limits *lim, char *have, size_t n,
                     uint64_t *need) {
  /* Which limit is exceeded, and by which figure; the first in this order
   * that is exceeded is named (they are all "what this process can get"). */
  *need = est->resident;
  /* What the process already maps replaces the estimate's own base. */
  const uint64_t base = est->resident > PROCESS_BASE ? PROCESS_BASE : 0;
  const uint64_t need_data =
      lim->vm_data ? vqc_sat_add(est->resident - base, lim->vm_data)
                   : est->resident;
  const uint64_t need_as =
      lim->vm_size ? vqc_sat_add(est->address - base, lim->vm_size)
                   : est->address;
  char a[32], b[32];
  if (est->resident > lim->mem_available) {
    human(lim->mem_available, b, sizeof b);
    if (lim->mem_total != VQC_MEMORY_UNLIMITED) {
      human(lim->mem_total, a, sizeof a);
      snprintf(have, n, "this machine has %s total / %s available", a, b);
    } else {
      snprintf(have, n, "this machine has %s available", b);
    }
  } else if (est->resident > lim->cgroup_left) {
    human(lim->cgroup_left, b, sizeof b);
    snprintf(have, n, "this process's memory cgroup (container limit) "
             "leaves %s", b);
  } else if (need_data > lim->rlimit_data) {
    *need = need_data;
    human(lim->rlimit_data, b, sizeof b);
    snprintf(have, n, "the data-segment limit (RLIMIT_DATA, ulimit -d) is "
             "%s (the figure counts what this process already holds)", b);
  } else if (need_as > lim->rlimit_as) {
    *need = need_as;
    human(lim->rlimit_as, b, sizeof b);
    snprintf(have, n, "the address-space limit (RLIMIT_AS, ulimit -v) is %s "
             "(the figure counts the address space this process already "
             "maps, its libraries, and each rank's reserved thread stack and "
             "collective ledger)", b);
  } else {
    return false;
  }
  return true;
}

/* The most ranks (below sc->ranks) whose estimate fits lim with every rank
 * in this process; 0 when not even one does, or when the scenario's batch
 * list ties it to its rank count. */
static int most_ranks_that_fit(const vqc_scenario *sc,
                               const vqc_run_memory_limits *lim) {
  if (sc->nbatch > 1 || sc->ranks <= 1) return 0;
  vqc_scenario *t = malloc(sizeof *t);
  if (!t) return 0;
  memcpy(t, sc, sizeof *t);
  int lo = 0, hi = sc->ranks - 1; /* lo fits (0: trivially), hi unknown */
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    t->ranks = mid;
    vqc_run_memory e;
    vqc_run_memory_estimate(t, mid, &e);
    char have[8];
    uint64_t need;
    if (exceeded(&e, lim, have, sizeof have, &need)) hi = mid - 1;
    else lo = mid;
  }
  free(t);
  return lo;
}

vqc_status vqc_run_memory_fits(const vqc_scenario *sc,
                               const vqc_run_memory *est,
                               const vqc_run_memory_limits *lim) {
  char have[256] = "";
  uint64_t need = 0;
  if (!exceeded(est, lim, have, sizeof have, &need)) return VQC_OK;
  char a[32], b[32], fit[96] = "";
  human(need, a, sizeof a);
  human(est->per_rank, b, sizeof b);
  if (est->ranks_here == sc->ranks && sc->ranks > 1) {
    const int most = most_ranks_that_fit(sc, lim);
    if (most > 0)
      snprintf(fit, sizeof fit, "; at most %d rank%s of this size fit",
               most, most == 1 ? "" : "s");
  }
  /* The models that hold the global batch on every rank: their memory
   * grows with the square of the rank count, so say why. */
  const vqc_model_ops *model = vqc_model_ops_of(sc->model);
  const bool global = model && model->global_batch;
  return vqc_error(VQC_EINVAL, "%s: the scenario needs about %s (%d rank%s "
                   "x %s%s) but %s: lower ranks or batch (or the sizes) to "
                   "fit%s%s", sc->path, a, est->ranks_here,
                   est->ranks_here == 1 ? "" : "s", b,
                   est->ranks_here < sc->ranks ? " in this process" : "",
                   have, fit,
                   global && sc->ranks > 1
                       ? "; every rank of this model also holds the global "
                         "batch (ranks x batch), so its memory grows with "
                         "the square of the rank count"
                       : "");
}

vqc_status vqc_run_files_fit(const vqc_scenario *sc, const vqc_run_memory *est,
                             uint64_t nofile) {
  if (nofile == 0 || nofile == VQC_MEMORY_UNLIMITED || est->files <= nofile)
    return VQC_OK;
  return vqc_error(VQC_EINVAL, "%s: %d rank%s need about %" PRIu64 " open "
                   "files (%d a rank: its live record, trace and dumps) but "
                   "the open-file limit (ulimit -n) is %" PRIu64 ": raise it "
                   "(ulimit -n %" PRIu64 ") or lower ranks",
                   sc->path, est->ranks_here, est->ranks_here == 1 ? "" : "s",
                   est->files, VQC_RUN_FILES_PER_RANK, nofile, est->files);
}

vqc_status vqc_run_check_memory(const vqc_scenario *sc) {
  if (!sc) return vqc_error(VQC_EINVAL, "run: NULL scenario");
  vqc_run_memory est;
  vqc_run_memory_limits lim;
  vqc_run_memory_estimate(sc, sc->ranks, &est);
  vqc_run_memory_limits_read(&lim);
  /* Too few open files where the hard limit allows enough: raise the soft
   * one, as a user would (ulimit -n), instead of refusing. */
  uint64_t nofile = rlimit_of(RLIMIT_NOFILE);
  struct rlimit rl;
  if (nofile != VQC_MEMORY_UNLIMITED && est.files > nofile &&
      getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
      (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= est.files)) {
    rl.rlim_cur = (rlim_t)est.files;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0) nofile = est.files;
  }
  VQC_TRY(vqc_run_memory_fits(sc, &est, &lim));
  return vqc_run_files_fit(sc, &est, nofile);
}

vqc_status vqc_run_check_memory_comm(const vqc_scenario *sc, vqc_comm *c) {
  if (!sc || !c) return vqc_error(VQC_EINVAL, "run: NULL argument");
  vqc_run_memory est;
  vqc_run_memory_limits lim;
  vqc_run_memory_estimate(sc, 1, &est);
  vqc_run_memory_limits_read(&lim);
  const vqc_status mine = vqc_run_memory_fits(sc, &est, &lim);
  char why[1024];
  snprintf(why, sizeof why, "%s", mine != VQC_OK ? vqc_last_error() : "");
  /* The lowest refusing rank + 1, or 0: the same answer on every rank. */
  const int rank = vqc_comm_rank(c);
  int64_t bad = mine != VQC_OK ? (int64_t)(vqc_comm_size(c) - rank) : 0;
  int64_t worst = 0;
  VQC_TRY(vqc_all_reduce(vqc_comm_side(c), &bad, &worst, 1, VQC_I64, VQC_MAX));
  if (mine != VQC_OK) return vqc_error(mine, "%s", why);
  if (worst > 0)
    return vqc_error(VQC_EINVAL, "rank %d cannot hold the scenario (its own "
                     "message says why): lower ranks or batch",
                     vqc_comm_size(c) - (int)worst);
  return VQC_OK;
}
