/* ddp_instrumented.c: someone else's data-parallel training loop, checked by
 * vqcheck through checkers/include/vqc/instrument.h.
 *
 * The model, data and optimizer below are plain C arrays and loops, written
 * the way a small training program outside vqcheck would be (llm.c style:
 * every parameter in one flat array, named slices into it). Each rank
 * trains a 2-layer MLP on its own shard of a synthetic regression task and
 * averages the gradients with one all_reduce per step, as DDP does; the only
 * vqcheck calls are the session (create, register, start, step_end, finish)
 * and the ledgered collectives (vqc_broadcast, vqc_all_reduce) in place of
 * MPI's.
 *
 * --bug plants this program's own bug: from step 2 on, the last rank keeps
 * its local gradient instead of the averaged one (PyTorch/XLA DDP's
 * replicas that stepped on unsynced gradients). It still joins the
 * all_reduce: a rank that skips the call altogether leaves the others
 * waiting, which the collective checker reports as a `deadlock` instead.
 * vqcheck's divergence checker sees the replicas' weights differ after step
 * 2 and names the step, the tensor and the rank; the program prints the
 * findings and exits 1. Without --bug it exits 0.
 *
 * Usage:
 *   ddp_instrumented [--ranks N] [--steps S] [--bug] [--out DIR]
 *   mpiexec -n N ddp_instrumented --backend mpi [--bug] [--out DIR]
 * Exit codes (DESIGN.md): 0 clean, 1 findings, 2 usage, 3 environment. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/instrument.h"

/* ---- the model: y = W2 tanh(W1 x + b1) + b2 */

enum { D = 8, H = 32, O = 1, BATCH = 16 }; /* BATCH: rows per rank per step */

/* Offsets of each tensor in the flat parameter array. */
enum {
  OFF_W1 = 0,               /* (H, D) */
  OFF_B1 = OFF_W1 + H * D,  /* (H) */
  OFF_W2 = OFF_B1 + H,      /* (O, H) */
  OFF_B2 = OFF_W2 + O * H,  /* (O) */
  NPARAMS = OFF_B2 + O
};

#define LR 0.05f
#define MOMENTUM 0.9f

typedef struct model {
  float param[NPARAMS];    /* replicated */
  float momentum[NPARAMS]; /* replicated optimizer state */
  float grad[NPARAMS];     /* this rank's, then the average */
  float grad_sum[NPARAMS]; /* the all_reduce's output */
} model;

/* A uniform number in [-1, 1) from (seed, a, b, c): the data of any rank
 * and step regenerate on their own (a 64-bit integer mix, then 24 bits). */
static float uniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t z = seed + a * 0x9E3779B97F4A7C15u + b * 0xD1B54A32D192ED03u +
               c * 0x8CB92BA72F3D8DD7u;
  z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 29)) * 0x94D049BB133111EBu;
  z ^= z >> 32;
  return (float)(z >> 40) / (float)(1u << 23) - 1.0f;
}

/* Same initial weights on every rank (rank 0's are broadcast anyway). */
static void model_init(model *m, uint64_t seed) {
  memset(m, 0, sizeof *m);
  for (int i = 0; i < NPARAMS; i++)
    m->param[i] = 0.3f * uniform(seed, 0, 0, (uint64_t)i);
}

/* Rank `rank`'s batch of `step`: x (BATCH, D), target (BATCH). */
static void make_batch(uint64_t seed, int64_t step, int rank, float *x,
                       float *target) {
  for (int r = 0; r < BATCH; r++) {
    float sum = 0.0f;
    for (int k = 0; k < D; k++) {
      float v = uniform(seed, (uint64_t)step + 1, (uint64_t)rank + 1,
                        (uint64_t)(r * D + k));
      x[r * D + k] = v;
      sum += v;
    }
    target[r] = 0.5f * sinf(sum);
  }
}

/* Forward and backward of the mean squared error over the batch: fills
 * m->grad and returns the loss. */
static float forward_backward(model *m, const float *x, const float *target) {
  const float *w1 = m->param + OFF_W1, *b1 = m->param + OFF_B1;
  const float *w2 = m->param + OFF_W2, *b2 = m->param + OFF_B2;
  float *dw1 = m->grad + OFF_W1, *db1 = m->grad + OFF_B1;
  float *dw2 = m->grad + OFF_W2, *db2 = m->grad + OFF_B2;
  memset(m->grad, 0, sizeof m->grad);
  float loss = 0.0f;
  for (int r = 0; r < BATCH; r++) {
    const float *xr = x + r * D;
    float h[H];
    for (int j = 0; j < H; j++) {
      float z = b1[j];
      for (int k = 0; k < D; k++) z += w1[j * D + k] * xr[k];
      h[j] = tanhf(z);
    }
    float y = b2[0];
    for (int j = 0; j < H; j++) y += w2[j] * h[j];
    const float err = y - target[r];
    loss += err * err / BATCH;
    const float dy = 2.0f * err / BATCH;
    db2[0] += dy;
    for (int j = 0; j < H; j++) {
      dw2[j] += dy * h[j];
      const float dz = dy * w2[j] * (1.0f - h[j] * h[j]);
      db1[j] += dz;
      for (int k = 0; k < D; k++) dw1[j * D + k] += dz * xr[k];
    }
  }
  return loss;
}

/* ---- one rank */

typedef struct args {
  int ranks;
  int64_t steps;
  bool bug;
  const char *out;
  uint64_t seed;
  int *exit_codes; /* (ranks) threads: each rank's verdict */
} args;

/* One training step on this rank: local gradient, gradient average over the
 * ranks, SGD with momentum. *loss: the mean loss over the ranks. */
static vqc_status train_step(vqc_comm *c, const args *a, model *m,
                             int64_t step, float *loss) {
  const int rank = vqc_comm_rank(c), size = vqc_comm_size(c);
  float x[BATCH * D], target[BATCH];
  make_batch(a->seed, step, rank, x, target);
  float local = forward_backward(m, x, target);

  /* The gradient all_reduce (out of place), then the average. */
  VQC_TRY(vqc_all_reduce(c, m->grad, m->grad_sum, NPARAMS, VQC_F32, VQC_SUM));
  /* THE BUG (--bug): from step 2 the last rank keeps its local gradient. */
  const bool keep_local = a->bug && rank == size - 1 && step >= 2;
  if (!keep_local)
    for (int i = 0; i < NPARAMS; i++) m->grad[i] = m->grad_sum[i] / size;

  for (int i = 0; i < NPARAMS; i++) {
    m->momentum[i] = MOMENTUM * m->momentum[i] + m->grad[i];
    m->param[i] -= LR * m->momentum[i];
  }
  VQC_TRY(vqc_all_reduce(c, &local, loss, 1, VQC_F32, VQC_SUM));
  *loss /= size;
  return VQC_OK;
}

/* Registers every replicated tensor: the parameters with their gradients,
 * then their momentum buffers. */
static vqc_status register_model(vqc_instr *s, model *m) {
  static const struct {
    const char *name;
    int off, ndim;
    int64_t shape[2];
  } t[] = {{"fc1.weight", OFF_W1, 2, {H, D}}, {"fc1.bias", OFF_B1, 1, {H}},
           {"fc2.weight", OFF_W2, 2, {O, H}}, {"fc2.bias", OFF_B2, 1, {O}}};
  const int n = (int)(sizeof t / sizeof *t);
  for (int i = 0; i < n; i++)
    VQC_TRY(vqc_instr_register(s, t[i].name, VQC_F32, m->param + t[i].off,
                               m->grad + t[i].off, t[i].ndim, t[i].shape));
  for (int i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s.momentum", t[i].name);
    VQC_TRY(vqc_instr_register(s, name, VQC_F32, m->momentum + t[i].off,
                               NULL, t[i].ndim, t[i].shape));
  }
  return VQC_OK;
}

/* The whole run on one rank; returns its exit code. */
static int run_rank(vqc_comm *c, const args *a) {
  const int rank = vqc_comm_rank(c);
  model *m = malloc(sizeof *m);
  if (!m) return 3;
  model_init(m, a->seed);

  vqc_instr_options o = {0};
  o.name = "ddp_instrumented";
  o.run_dir = a->out;
  o.timeout_s = 30;
  vqc_instr *s = NULL;
  vqc_status st = vqc_instr_create(c, &o, &s);
  if (st != VQC_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, vqc_last_error());
    free(m);
    return 3;
  }
  st = register_model(s, m);
  if (st == VQC_OK) st = vqc_instr_start(s);
  /* DDP starts from rank 0's weights. */
  if (st == VQC_OK) st = vqc_broadcast(c, m->param, NPARAMS, VQC_F32, 0);
  for (int64_t step = 0; st == VQC_OK && step < a->steps; step++) {
    float loss = 0.0f;
    st = train_step(c, a, m, step, &loss);
    if (st == VQC_OK) st = vqc_instr_step_end(s, step);
    if (st == VQC_OK && rank == 0)
      printf("step %" PRId64 "  loss %.6f\n", step, (double)loss);
  }
  if (st != VQC_OK)
    fprintf(stderr, "rank %d: training stopped: %s\n", rank, vqc_last_error());

  int nfindings = 0;
  vqc_status f = vqc_instr_finish(s, st, &nfindings);
  if (f != VQC_OK)
    fprintf(stderr, "rank %d: checks: %s\n", rank, vqc_last_error());
  if (rank == 0) {
    fflush(stdout);
    vqc_instr_print_findings(s, stdout);
  }
  int code = vqc_instr_exit_code(s);
  vqc_instr_destroy(s);
  free(m);
  return code;
}

static vqc_status thread_rank(vqc_comm *c, void *arg) {
  args *a = arg;
  a->exit_codes[vqc_comm_rank(c)] = run_rank(c, a);
  /* Always OK: an error return would abort the other ranks' side channels
   * while they finish; the verdict is in exit_codes. */
  return VQC_OK;
}

/* ---- main */

static int usage(FILE *f, int code) {
  fprintf(f,
          "usage: ddp_instrumented [--ranks N] [--steps S] [--bug] [--out DIR]\n"
          "       mpiexec -n N ddp_instrumented --backend mpi [--bug] "
          "[--out DIR]\n"
          "  --backend threads|mpi  threads: N ranks in this process "
          "(default)\n"
          "  --ranks N              threads backend ranks (default 3)\n"
          "  --steps S              training steps (default 6)\n"
          "  --bug                  the last rank keeps its local gradient "
          "from step 2\n"
          "  --out DIR              run directory (default "
          "vqcheck-runs/ddp_instrumented-<time>)\n"
          "exit: 0 clean, 1 findings, 2 usage, 3 environment\n");
  return code;
}

int main(int argc, char **argv) {
  args a = {.ranks = 3, .steps = 6, .seed = 1234};
  vqc_backend backend = VQC_BACKEND_THREADS;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      return usage(stdout, 0);
    } else if (!strcmp(argv[i], "--bug")) {
      a.bug = true;
    } else if (!strcmp(argv[i], "--ranks") && v) {
      a.ranks = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--steps") && v) {
      a.steps = atoll(argv[++i]);
    } else if (!strcmp(argv[i], "--out") && v) {
      a.out = argv[++i];
    } else if (!strcmp(argv[i], "--backend") && v) {
      if (vqc_backend_from_name(argv[++i], &backend) != VQC_OK ||
          backend == VQC_BACKEND_NCCL) {
        fprintf(stderr, "ddp_instrumented: --backend %s: expected threads or "
                "mpi\n", argv[i]);
        return 2;
      }
    } else {
      fprintf(stderr, "ddp_instrumented: unknown or incomplete argument '%s'\n",
              argv[i]);
      return usage(stderr, 2);
    }
  }
  if (a.ranks < 1 || a.ranks > 64 || a.steps < 1) {
    fprintf(stderr, "ddp_instrumented: need 1..64 ranks and at least 1 step\n");
    return 2;
  }

  if (backend == VQC_BACKEND_MPI) {
    vqc_comm *c = NULL;
    if (vqc_mpi_comm_create(&argc, &argv, &c) != VQC_OK) {
      fprintf(stderr, "ddp_instrumented: %s\n", vqc_last_error());
      return 3;
    }
    int code = run_rank(c, &a);
    vqc_mpi_comm_destroy(c);
    return code;
  }

  int codes[64] = {0};
  a.exit_codes = codes;
  if (vqc_threads_run(a.ranks, 30, thread_rank, &a, NULL) != VQC_OK) {
    fprintf(stderr, "ddp_instrumented: %s\n", vqc_last_error());
    return 3;
  }
  return codes[0];
}
