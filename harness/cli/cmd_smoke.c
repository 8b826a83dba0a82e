/* cmd_smoke.c: `vqcheck smoke`, the smallest honest end-to-end check.
 *
 * Every rank trains the same linear model y = x.w with data-parallel SGD:
 * replicated weights w (D floats) start from the seed, each rank draws its own
 * shard from (seed, step, rank), computes the MSE gradient, all_reduces it
 * (SUM, then / W) and steps. After each step every rank digests w and the
 * digests are all_gathered over the side channel; any disagreement is a
 * divergence (first step, and which ranks disagree with rank 0).
 *
 * --fault skip_weight_sync makes the last rank step with its local gradient
 * from step 1 on (it still joins the all_reduce, so nothing hangs): the
 * PyTorch/XLA DDP bug in miniature, which the digest comparison must catch. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "vqc/vqc.h"

typedef struct smoke_opts {
  int ranks;
  int steps;
  uint64_t seed;
  int dim;
  int batch;
  double timeout;
  vqc_backend backend;
  bool fault_skip_sync;
  bool progress; /* a line per step: stdout is a terminal, no --quiet */
} smoke_opts;

typedef struct smoke_result {
  int first_bad_step; /* -1: all steps agreed */
  int bad_rank;
} smoke_result;

typedef struct smoke_ctx {
  const smoke_opts *o;
  smoke_result result; /* written by rank 0 */
} smoke_ctx;

/* One rank's training loop. */
static vqc_status smoke_rank(vqc_comm *c, void *arg) {
  smoke_ctx *ctx = arg;
  const smoke_opts *o = ctx->o;
  const int rank = vqc_comm_rank(c), size = vqc_comm_size(c);
  const int D = o->dim, B = o->batch;
  vqc_status s = VQC_OK;
  float *w = malloc(sizeof(float) * (size_t)D);        /* (D,) replicated */
  float *grad = malloc(sizeof(float) * (size_t)D);     /* (D,) */
  float *local = malloc(sizeof(float) * (size_t)D);    /* (D,) this rank's */
  float *x = malloc(sizeof(float) * (size_t)B * D);    /* (B, D) shard */
  float *y = malloc(sizeof(float) * (size_t)B);        /* (B,) targets */
  uint64_t *digests = malloc(sizeof(uint64_t) * (size_t)size);
  if (!w || !grad || !local || !x || !y || !digests) {
    s = vqc_error(VQC_ENOMEM, "rank %d: cannot allocate smoke buffers", rank);
    goto done;
  }
  vqc_comm_set_timeout(c, o->timeout);

  vqc_rng rng;
  vqc_rng_init(&rng, o->seed, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
  vqc_rng_normal(&rng, w, D, 0.0f, 0.1f);

  for (int step = 0; step < o->steps; step++) {
    /* Shard: x ~ N(0,1), y = sum(x) (the model should learn w = 1). */
    vqc_rng_init(&rng, o->seed, vqc_rng_stream_for((uint64_t)step,
                                                   VQC_RNG_DATA, rank));
    vqc_rng_normal(&rng, x, (int64_t)B * D, 0.0f, 1.0f);
    for (int b = 0; b < B; b++) {
      float t = 0;
      for (int d = 0; d < D; d++) t += x[(size_t)b * D + d];
      y[b] = t;
    }
    /* grad = 2/B * X^T (Xw - y) */
    memset(local, 0, sizeof(float) * (size_t)D);
    for (int b = 0; b < B; b++) {
      float pred = 0;
      for (int d = 0; d < D; d++) pred += x[(size_t)b * D + d] * w[d];
      float e = 2.0f * (pred - y[b]) / (float)B;
      for (int d = 0; d < D; d++) local[d] += e * x[(size_t)b * D + d];
    }
    memcpy(grad, local, sizeof(float) * (size_t)D);
    s = vqc_all_reduce(c, grad, grad, (size_t)D, VQC_F32, VQC_SUM);
    if (s != VQC_OK) goto done;
    const bool skip = o->fault_skip_sync && rank == size - 1 && step >= 1;
    const float *g = skip ? local : grad; /* the fault: local gradient */
    const float scale = skip ? 1.0f : 1.0f / (float)size;
    for (int d = 0; d < D; d++) w[d] -= 0.01f * g[d] * scale;

    uint64_t mine;
    int64_t shape[1] = {D};
    s = vqc_digest_buffer(w, sizeof(float) * (size_t)D, VQC_F32, 1, shape,
                          &mine);
    if (s != VQC_OK) goto done;
    s = vqc_all_gather(vqc_comm_side(c), &mine, digests, 1, VQC_I64);
    if (s != VQC_OK) goto done;
    int bad = -1;
    for (int r = 1; r < size && bad < 0; r++)
      if (digests[r] != digests[0]) bad = r;
    if (rank == 0 && o->progress)
      printf("step %3d  w digest %016" PRIx64 "  %s\n", step, digests[0],
             bad < 0 ? "all ranks agree" : "DIVERGED");
    if (bad >= 0) {
      if (rank == 0) {
        ctx->result.first_bad_step = step;
        ctx->result.bad_rank = bad;
      }
      break; /* every rank saw the same digests, so all stop together */
    }
  }
done:
  free(w);
  free(grad);
  free(local);
  free(x);
  free(y);
  free(digests);
  return s;
}

static void smoke_help(FILE *f) {
  fprintf(f,
          "usage: vqcheck smoke [--ranks N] [--steps N] [--seed S] "
          "[--backend threads|mpi]\n"
          "                     [--timeout S] [--fault skip_weight_sync] "
          "[--quiet]\n                     [--verbose]\n\n"
          "Trains a tiny data-parallel model on N ranks and checks after every "
          "step that\nthe replicated weights have the same digest on every "
          "rank. Under mpiexec the\nmpi backend is the default (--ranks is "
          "then the launcher's -n).\nPrints a line per step when stdout is a "
          "terminal, then one verdict line.\n\n"
          "  --ranks N (default 4)   --steps N (20)   --seed S (1)   "
          "--timeout S (30)\n"
          "  --fault skip_weight_sync  the last rank steps on its local "
          "gradient from\n                            step 1 on (must be "
          "caught); 'none' for no fault\n"
          "  --quiet    no per-step lines     --verbose  full internal error "
          "text\n\n"
          "exit: 0 all ranks agree, 1 divergence found, 2 bad usage, 3 "
          "environment error\n");
}

int vqc_cmd_smoke(int argc, char **argv) {
  bool quiet = false;
  smoke_opts o = {.ranks = 4, .steps = 20, .seed = 1, .dim = 256,
                  .batch = 32, .timeout = 30,
                  .backend = vqc_mpi_launched() ? VQC_BACKEND_MPI
                                                : VQC_BACKEND_THREADS};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      smoke_help(stdout);
      return 0;
    } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
      quiet = true;
      continue;
    } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
      vqc_cli_set_verbose(true);
      continue;
    }
    static const char *const with_value[] = {"--ranks", "--steps", "--seed",
                                             "--timeout", "--backend",
                                             "--fault"};
    bool known = false;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
      known = known || strcmp(a, with_value[k]) == 0;
    if (!known)
      return vqc_cli_usage_error("smoke", a[0] == '-' ? "unknown option '%s'"
                                                      : "unexpected argument "
                                                        "'%s'", a);
    if (i + 1 >= argc)
      return vqc_cli_usage_error("smoke", "%s needs a value", a);
    const char *v = argv[i + 1];
    bool ok = true;
    long n = 0;
    if (strcmp(a, "--ranks") == 0) {
      ok = vqc_cli_parse_long(v, 1, 1024, &n);
      if (ok) o.ranks = (int)n;
    } else if (strcmp(a, "--steps") == 0) {
      ok = vqc_cli_parse_long(v, 1, 1000000, &n);
      if (ok) o.steps = (int)n;
    } else if (strcmp(a, "--seed") == 0) {
      char *end;
      o.seed = strtoull(v, &end, 10);
      ok = *v >= '0' && *v <= '9' && *end == '\0'; /* no sign */
    } else if (strcmp(a, "--timeout") == 0) {
      char *end;
      o.timeout = strtod(v, &end);
      ok = *v && *end == '\0' && o.timeout > 0;
    } else if (strcmp(a, "--backend") == 0) {
      ok = vqc_backend_from_name(v, &o.backend) == VQC_OK &&
           o.backend != VQC_BACKEND_NCCL;
    } else if (strcmp(a, "--fault") == 0) {
      ok = strcmp(v, "skip_weight_sync") == 0 || strcmp(v, "none") == 0;
      o.fault_skip_sync = strcmp(v, "skip_weight_sync") == 0;
    }
    if (!ok)
      return vqc_cli_usage_error("smoke", "bad value for %s: '%s'", a, v);
    i++;
  }
  o.progress = vqc_cli_show_progress(quiet, false);

  smoke_ctx ctx = {.o = &o, .result = {.first_bad_step = -1}};
  vqc_status s;
  int rank = 0, size = o.ranks;
  if (o.backend == VQC_BACKEND_MPI) {
    vqc_comm *c = NULL;
    s = vqc_mpi_comm_create(&argc, &argv, &c);
    if (s == VQC_OK) {
      rank = vqc_comm_rank(c);
      size = vqc_comm_size(c);
      s = smoke_rank(c, &ctx);
    }
    vqc_mpi_comm_destroy(c);
  } else {
    s = vqc_threads_run(o.ranks, o.timeout, smoke_rank, &ctx, NULL);
  }
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck smoke: %s\n", vqc_cli_error_text());
    return vqc_status_exit_code(s);
  }
  if (rank != 0) return ctx.result.first_bad_step >= 0 ? 1 : 0;
  if (ctx.result.first_bad_step >= 0) {
    printf("divergence: replicated weights 'w' differ at step %d: rank %d "
           "disagrees with rank 0 (%d ranks, %s backend)\n",
           ctx.result.first_bad_step, ctx.result.bad_rank, size,
           vqc_backend_name(o.backend));
    return 1;
  }
  printf("%d ranks agree on the weights after %d steps (%s backend)\n", size,
         o.steps, vqc_backend_name(o.backend));
  return 0;
}
