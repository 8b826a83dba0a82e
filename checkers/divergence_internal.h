/* divergence_internal.h: what the divergence checker's sources share; not
 * a public header (checkers.h declares vqc_checker_divergence). The checker
 * was one file, divergence.c, split by job:
 *   divergence_exchange.c  steps 1 to 3 of the protocol: digest and scan the
 *                          state, write the trace, agree on the registry and
 *                          run the two-phase all_reduce on the side channel;
 *   divergence_locate.c    step 4: when the agreement shows a problem, find
 *                          and describe it (which ranks, which tensor, the
 *                          first differing element) and record the
 *                          `nonfinite` and `divergence` findings;
 *   divergence.c           the protocol (its opening comment), the
 *                          synchronous and overlapped checks and the
 *                          checker ops.
 * The functions declared here were static in that one file: each is defined
 * (with its comment) in the file named above its declaration, and none is
 * exported from libvqcheck_checkers.so (hidden visibility); the two one-line
 * helpers that cross files (local_word, is_float) are static inline here. */
#ifndef VQC_DIVERGENCE_INTERNAL_H
#define VQC_DIVERGENCE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkers.h"
#include "trace.h"

#pragma GCC visibility push(hidden)

/* What each rank sends per tensor in the digest exchange (u64 words). */
enum { W_DIGEST, W_NAN, W_INF, W_FIRST, W_COUNT };
#define NO_INDEX UINT64_MAX

/* What each rank sends per rank in the non-finite exchange (i64 words). */
enum { NF_TENSOR, NF_NAN, NF_INF, NF_FIRST, NF_COUNT };

typedef struct div_impl {
  vqc_trace_writer *trace; /* NULL when ctx->run_dir is NULL */
  int size;
  int ntensors;            /* ctx->state->count at attach */
  bool registry_agreed;    /* compared with the other ranks' registries */
  bool *reported;          /* (ntensors) divergence already reported */
  bool *nonfinite_done;    /* (size) rank's nonfinite already reported */
  uint64_t *local;         /* (ntensors, W_COUNT) this rank's words */
  int64_t *agree_send;     /* (AGREE_WORDS) the two-phase message */
  int64_t *agree_min;      /* (AGREE_WORDS) its MIN over the ranks */
  int64_t last_seen;       /* last step passed to step_end; -1 none */
  int64_t last_checked;    /* last step checked; -1 none */
  /* Overlap (opts.overlap): step_end starts `worker` digesting the state
   * of `pending_step`; settle joins it and runs the exchange. */
  bool pending;            /* a step was digested (or is being) and awaits
                              its exchange */
  bool worker_running;     /* worker started and not joined */
  int64_t pending_step;
  const vqc_check_ctx *worker_ctx; /* the caller's, alive for the run */
  pthread_t worker;
  vqc_status worker_status;
  char worker_error[512];
  bool hooked;             /* side_hook set on the side channel */
  int insert_at;           /* where the next finding goes in the list: the
                              count at the pending step's end, so findings
                              keep the synchronous order; -1: append */
} div_impl;

/* The two-phase message, in i64 words, all reduced with MIN:
 *   [2t], [2t+1]   digest of entry t and its complement (min and max)
 *   [2T]           ~(this rank has non-finite values not yet reported)
 *   [2T+1]         this rank's number if its training failed, else size
 *   [2T+2]         ~(this rank could not digest its state)
 *   [2T+3]         ~(where an overlapped check's findings go: insert_at);
 *                  the threads backend's ranks share one findings list and
 *                  take the largest, where the synchronous check's
 *                  findings would have landed (after every rank's step
 *                  end) */
#define AGREE_WORDS(nt) (2 * (size_t)(nt) + 4)

/* Word w of tensor t on this rank. */
static inline uint64_t local_word(const div_impl *d, int t, int w) {
  return d->local[(size_t)t * W_COUNT + (size_t)w];
}

static inline bool is_float(vqc_dtype dt) {
  return dt == VQC_F32 || dt == VQC_F64;
}

/* ---- divergence_exchange.c */

vqc_status div_digest_state(div_impl *d, const vqc_check_ctx *ctx,
                            int64_t step);
vqc_status div_exchange(div_impl *d, const vqc_check_ctx *ctx, int64_t step,
                        bool failed, bool digested);

/* ---- divergence_locate.c */

void div_nonfinite_summary(const div_impl *d, int rank, int64_t *w);
vqc_status div_report_nonfinite(div_impl *d, const vqc_check_ctx *ctx,
                                int64_t step);
vqc_status div_report_divergence(div_impl *d, const vqc_check_ctx *ctx,
                                 int64_t step);

#pragma GCC visibility pop

#endif /* VQC_DIVERGENCE_INTERNAL_H */
