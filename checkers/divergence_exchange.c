/* divergence_exchange.c: steps 1 to 3 of the divergence checker's protocol
 * (divergence.c's opening comment): digest every entry of the state and
 * count its NaN and Inf in one pass, append the rank's trace lines, agree on
 * the registry once, then the two-phase all_reduce on the side channel,
 * which hands any problem it shows to divergence_locate.c (step 4). Split
 * out of divergence.c; see divergence_internal.h. */
#include "divergence_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/digest.h"

/* ---- step 1: digest and non-finite scan in one pass */

typedef struct nonfinite_count {
  uint64_t nan, inf;
  uint64_t first; /* flat index of the first NaN or Inf, NO_INDEX if none */
} nonfinite_count;

/* Scans n values of dt (F32 or F64) starting at flat index `base`. The first
 * pass only counts values whose exponent bits are all ones (NaN or Inf),
 * without branches, in blocks of SCAN_BLOCK values: a loop of constant trip
 * count is one that GCC's -O2 vectoriser takes (a plain loop over n is not:
 * its cheap cost model refuses loops that need a remainder), which made a
 * clean 64 MiB state cost one streaming read instead of two and a half. Only
 * when it finds some does the second pass split NaN from Inf and find the
 * first index. memcpy reads the bits without breaking aliasing rules (it
 * compiles to a plain load). */
#define SCAN_BLOCK 64
static size_t count_f32_exp_ones(const unsigned char *p, size_t n) {
  size_t hits = 0, i = 0;
  for (; i + SCAN_BLOCK <= n; i += SCAN_BLOCK) {
    uint32_t block = 0;
    for (size_t k = 0; k < SCAN_BLOCK; k++) {
      uint32_t b;
      memcpy(&b, p + 4 * (i + k), 4);
      block += (b & 0x7f800000u) == 0x7f800000u;
    }
    hits += block;
  }
  for (; i < n; i++) {
    uint32_t b;
    memcpy(&b, p + 4 * i, 4);
    hits += (b & 0x7f800000u) == 0x7f800000u;
  }
  return hits;
}

static size_t count_f64_exp_ones(const unsigned char *p, size_t n) {
  size_t hits = 0, i = 0;
  for (; i + SCAN_BLOCK <= n; i += SCAN_BLOCK) {
    uint64_t block = 0;
    for (size_t k = 0; k < SCAN_BLOCK; k++) {
      uint64_t b;
      memcpy(&b, p + 8 * (i + k), 8);
      block += (b & 0x7ff0000000000000u) == 0x7ff0000000000000u;
    }
    hits += block;
  }
  for (; i < n; i++) {
    uint64_t b;
    memcpy(&b, p + 8 * i, 8);
    hits += (b & 0x7ff0000000000000u) == 0x7ff0000000000000u;
  }
  return hits;
}

static void scan_nonfinite(const void *data, size_t n, vqc_dtype dt,
                           uint64_t base, nonfinite_count *c) {
  const unsigned char *p = data;
  size_t hits = dt == VQC_F32 ? count_f32_exp_ones(p, n)
                              : count_f64_exp_ones(p, n);
  if (hits == 0) return;
  for (size_t i = 0; i < n; i++) {
    double v;
    if (dt == VQC_F32) {
      float f;
      memcpy(&f, p + 4 * i, 4);
      v = f;
    } else {
      memcpy(&v, p + 8 * i, 8);
    }
    if (isfinite(v)) continue;
    if (isnan(v)) c->nan++;
    else c->inf++;
    if (c->first == NO_INDEX) c->first = base + i;
  }
}

/* The entry's digest (equal to vqc_param_digest) and, for float entries, its
 * non-finite count. The bytes are fed to a streaming digest one 64 KiB chunk
 * at a time right after the scan read them, so the hash reads them from
 * cache rather than from memory a second time. */
static vqc_status digest_entry(const vqc_param *p, uint64_t *digest,
                               nonfinite_count *c) {
  c->nan = c->inf = 0;
  c->first = NO_INDEX;
  if (!is_float(p->dtype)) return vqc_param_digest(p, digest);

  size_t esize = vqc_dtype_size(p->dtype);
  size_t nbytes = (size_t)p->numel * esize;
  vqc_digest_state *st = NULL;
  VQC_TRY(vqc_digest_create(&st, p->dtype, p->ndim, p->shape));
  const unsigned char *bytes = p->data;
  vqc_status s = VQC_OK;
  for (size_t off = 0; off < nbytes && s == VQC_OK; off += VQC_DIGEST_CHUNK) {
    size_t len = nbytes - off < VQC_DIGEST_CHUNK ? nbytes - off
                                                 : VQC_DIGEST_CHUNK;
    scan_nonfinite(bytes + off, len / esize, p->dtype, off / esize, c);
    s = vqc_digest_update(st, bytes + off, len);
  }
  if (s == VQC_OK) s = vqc_digest_final(st, digest);
  vqc_digest_destroy(st);
  return s;
}

/* ---- one check */

/* A hash of the registry's names, dtypes and order: ranks must register the
 * same entries in the same order, or the table compares unrelated tensors. */
static uint64_t registry_signature(const vqc_param_list *l) {
  uint64_t h = (uint64_t)l->count;
  for (int i = 0; i < l->count; i++) {
    uint64_t pair[2] = {h, vqc_xxh3_64(l->items[i].name,
                                       strlen(l->items[i].name))};
    pair[0] ^= (uint64_t)l->items[i].dtype << 56;
    h = vqc_xxh3_64(pair, sizeof pair);
  }
  return h;
}

/* Once per run: every rank registered the same entries. A 4-word MIN
 * all_reduce (signature and entry count, each with its complement) says
 * whether they agree; only when they do not are the signatures gathered, to
 * name a rank that differs. */
static vqc_status agree_registry(div_impl *d, const vqc_check_ctx *ctx) {
  vqc_comm *side = vqc_comm_side(ctx->comm);
  uint64_t sig = registry_signature(ctx->state);
  int64_t mine[4] = {(int64_t)sig, ~(int64_t)sig, d->ntensors, ~d->ntensors};
  int64_t min[4];
  VQC_TRY(vqc_all_reduce(side, mine, min, 4, VQC_I64, VQC_MIN));
  if (min[0] == ~min[1] && min[2] == ~min[3]) {
    d->registry_agreed = true;
    return VQC_OK;
  }
  uint64_t *sigs = malloc((size_t)d->size * sizeof *sigs);
  if (sigs == NULL)
    return vqc_error(VQC_ENOMEM, "divergence: no memory for %d ranks", d->size);
  vqc_status s = vqc_all_gather(side, &sig, sigs, 1, VQC_I64);
  int odd = -1;
  for (int r = 0; s == VQC_OK && r < d->size && odd < 0; r++)
    if (sigs[r] != sig) odd = r;
  free(sigs);
  if (s != VQC_OK) return s;
  return vqc_error(VQC_EINVAL,
                   "divergence: rank %d registered other tensors (names, "
                   "dtypes or order) than rank %d; the replicated state "
                   "must be registered identically on every rank",
                   odd >= 0 ? odd : ctx->rank, ctx->rank);
}

/* Step 1 and 2: this rank's digests and non-finite counts, and its trace
 * lines. Reads the state; no exchange. */
vqc_status div_digest_state(div_impl *d, const vqc_check_ctx *ctx,
                            int64_t step) {
  const vqc_param_list *state = ctx->state;
  for (int t = 0; t < d->ntensors; t++) {
    const vqc_param *p = &state->items[t];
    nonfinite_count c;
    uint64_t *w = d->local + (size_t)t * W_COUNT;
    VQC_TRY(digest_entry(p, &w[W_DIGEST], &c));
    w[W_NAN] = c.nan;
    w[W_INF] = c.inf;
    w[W_FIRST] = c.first;
    if (d->trace) {
      vqc_trace_record rec;
      memset(&rec, 0, sizeof rec);
      rec.rank = ctx->rank;
      rec.step = step;
      snprintf(rec.tensor, sizeof rec.tensor, "%s", p->name);
      snprintf(rec.dtype, sizeof rec.dtype, "%s", vqc_dtype_name(p->dtype));
      rec.ndim = p->ndim;
      for (int k = 0; k < p->ndim; k++) rec.shape[k] = p->shape[k];
      snprintf(rec.digest_algo, sizeof rec.digest_algo, "%s",
               VQC_TRACE_DIGEST_ALGO);
      rec.digest = w[W_DIGEST];
      VQC_TRY(vqc_trace_write(d->trace, &rec));
    }
  }
  if (d->trace) VQC_TRY(vqc_trace_flush(d->trace));
  return VQC_OK;
}

/* Steps 3 and 4: the two-phase agreement over the side channel, for the
 * digests of `step` in d->local. `failed`: this rank's training stopped
 * (it still takes part, so the others learn it and its digests still count:
 * they are of the state before the failure). `digested`: this rank's
 * digests are valid; if any rank's are not, nothing is reported. */
vqc_status div_exchange(div_impl *d, const vqc_check_ctx *ctx, int64_t step,
                        bool failed, bool digested) {
  if (!d->registry_agreed) VQC_TRY(agree_registry(d, ctx));

  const int nt = d->ntensors;
  for (int t = 0; t < nt; t++) {
    int64_t digest = (int64_t)local_word(d, t, W_DIGEST);
    d->agree_send[2 * t] = digested ? digest : 0;
    d->agree_send[2 * t + 1] = digested ? ~digest : ~(int64_t)0;
  }
  int64_t nf[NF_COUNT];
  div_nonfinite_summary(d, ctx->rank, nf);
  int64_t new_nonfinite = digested && nf[NF_TENSOR] >= 0 ? 1 : 0;
  d->agree_send[2 * nt] = ~new_nonfinite; /* MIN of ~x is ~MAX of x */
  d->agree_send[2 * nt + 1] = failed ? ctx->rank : d->size;
  d->agree_send[2 * nt + 2] = ~(int64_t)(digested ? 0 : 1);
  d->agree_send[2 * nt + 3] = ~(int64_t)d->insert_at;
  VQC_TRY(vqc_all_reduce(vqc_comm_side(ctx->comm), d->agree_send,
                         d->agree_min, AGREE_WORDS(nt), VQC_I64, VQC_MIN));
  if (~d->agree_min[2 * nt + 2] != 0)
    return digested ? vqc_error(VQC_EABORTED, "divergence: another rank "
                                "could not digest its state at step %" PRId64,
                                step)
                    : VQC_OK; /* the caller reports its own error */
  if (d->insert_at >= 0 &&
      vqc_comm_backend(ctx->comm) == VQC_BACKEND_THREADS)
    d->insert_at = (int)~d->agree_min[2 * nt + 3];
  if (~d->agree_min[2 * nt] != 0)
    VQC_TRY(div_report_nonfinite(d, ctx, step));
  if (nt > 0) VQC_TRY(div_report_divergence(d, ctx, step));
  int64_t first_failed = d->agree_min[2 * nt + 1];
  if (!failed && first_failed < d->size)
    return vqc_error(VQC_EABORTED, "rank %d stopped training after step %"
                     PRId64, (int)first_failed, step);
  return VQC_OK;
}
