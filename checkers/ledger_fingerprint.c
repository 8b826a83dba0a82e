/* ledger_fingerprint.c: a collective's fingerprint (what strict mode and
 * the analysis compare across ranks), the call site's hash and texts
 * (ledger_analysis.h; split out of ledger_analysis.c, see
 * ledger_analysis_internal.h). */
#include "ledger_analysis_internal.h"

#include <stdio.h>
#include <string.h>

#include "vqc/digest.h"
#include "vqc/tensor.h"

/* ---- fingerprints */

/* Distinct odd multipliers (from splitmix64) so that swapping file and func,
 * or moving a call one line, changes the hash. */
#define MIX_FUNC 0x9E3779B97F4A7C15ull
#define MIX_LINE 0xBF58476D1CE4E5B9ull

uint64_t site_hash_parts(const char *file, int line, const char *func) {
  file = file ? file : "";
  func = func ? func : "";
  uint64_t hf = vqc_xxh3_64(file, strlen(file));
  uint64_t hg = vqc_xxh3_64(func, strlen(func));
  return hf ^ (hg * MIX_FUNC) ^ ((uint64_t)(uint32_t)line * MIX_LINE);
}

uint64_t vqc_site_hash(vqc_site site) {
  return site_hash_parts(site.file, site.line, site.func);
}

void vqc_fingerprint_of(const vqc_ledger_record *r, vqc_coll_fingerprint *out) {
  memset(out, 0, sizeof *out); /* padding too: fingerprints travel as bytes */
  out->op = (int32_t)r->op;
  out->dtype = (int32_t)r->dtype;
  out->redop = r->op == VQC_COLL_ALL_REDUCE ? (int32_t)r->redop : -1;
  out->root = r->op == VQC_COLL_BROADCAST ? r->root : -1;
  /* all_gatherv: each rank sends its own count by design (a variably
   * sized gather); only the other fields must agree. */
  out->count = r->op == VQC_COLL_ALL_GATHERV ? 0 : r->count;
  out->site_hash = vqc_site_hash(r->site);
}

bool vqc_fingerprint_equal(const vqc_coll_fingerprint *a,
                           const vqc_coll_fingerprint *b) {
  return a->op == b->op && a->dtype == b->dtype && a->redop == b->redop &&
         a->root == b->root && a->count == b->count &&
         a->site_hash == b->site_hash;
}

void vqc_coll_describe(vqc_coll_op op, vqc_dtype dt, size_t count, int root,
                       vqc_redop redop, char *buf, size_t n) {
  const char *name = vqc_coll_name(op);
  switch (op) {
    case VQC_COLL_BARRIER:
      snprintf(buf, n, "%s()", name);
      break;
    case VQC_COLL_BROADCAST:
      snprintf(buf, n, "%s(%s, count %zu, root %d)", name, vqc_dtype_name(dt),
               count, root);
      break;
    case VQC_COLL_ALL_REDUCE:
      /* sum is what nearly every call uses: only other ops are spelled. */
      if (redop != VQC_SUM) {
        snprintf(buf, n, "%s(%s, count %zu, %s)", name, vqc_dtype_name(dt),
                 count, vqc_redop_name(redop));
        break;
      }
      /* fall through */
    default:
      snprintf(buf, n, "%s(%s, count %zu)", name, vqc_dtype_name(dt), count);
      break;
  }
}

void vqc_site_text(vqc_site site, char *buf, size_t n) {
  const char *file = site.file && site.file[0] ? site.file : "?";
  /* The same rule as vqc_finding_set_site, so detail and site agree. */
  const char *rel = strstr(file, "/lib/");
  if (!rel) rel = strstr(file, "/harness/");
  if (!rel) rel = strstr(file, "/examples/");
  snprintf(buf, n, "%s:%d %s", rel ? rel + 1 : file, site.line,
           site.func && site.func[0] ? site.func : "?");
}

int vqc_pick_expected(const vqc_coll_fingerprint *groups, const int *nranks,
                      const int *low_rank, int ngroups,
                      const vqc_coll_fingerprint *history, size_t nhistory) {
  /* What came after the last collective the last time it was called. */
  if (nhistory >= 2) {
    const vqc_coll_fingerprint *last = &history[nhistory - 1];
    for (size_t j = nhistory - 1; j-- > 0;) {
      if (!vqc_fingerprint_equal(&history[j], last)) continue;
      for (int g = 0; g < ngroups; g++)
        if (vqc_fingerprint_equal(&history[j + 1], &groups[g])) return g;
      break; /* the loop changed shape: no prediction */
    }
  }
  int best = 0;
  for (int g = 1; g < ngroups; g++)
    if (nranks[g] > nranks[best] ||
        (nranks[g] == nranks[best] && low_rank[g] < low_rank[best]))
      best = g;
  return best;
}
