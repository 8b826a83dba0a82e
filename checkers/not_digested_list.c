/* not_digested_list.c: the list of tensors left out of the digests
 * (not_digested.h): entries by (rank, tensor), their counts, the text the
 * verdict gives, and freeing it. The readers fill it: not_digested.c from
 * the live records' events, the trace comparison (trace_compare_read.c)
 * from the traces' not_digested lines. */
#include "not_digested.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* A JSON string of s cut to at most max bytes at a character's end (utf8.h;
 * s came through jansson, so it is UTF-8 already: this only cuts). */
static json_t *cut_text(const char *s, size_t max) {
  char buf[VQC_NOT_DIGESTED_WHY_MAX + 1];
  size_t len = 0;
  if (max > VQC_NOT_DIGESTED_WHY_MAX) max = VQC_NOT_DIGESTED_WHY_MAX;
  (void)vqc_utf8_copy(buf, max + 1, s, strlen(s), VQC_UTF8_NO_CONTROLS, &len);
  return vqc_json_text(buf, len);
}

/* Whether rank's entry for tensor is listed already. */
static bool listed(const json_t *list, int rank, const json_t *tensor) {
  size_t i;
  const json_t *e;
  json_array_foreach(list, i, e) {
    if (json_integer_value(json_object_get(e, "rank")) == rank &&
        json_equal(json_object_get(e, "tensor"), (json_t *)tensor))
      return true;
  }
  return false;
}

/* (not_digested.h) */
vqc_status vqc_not_digested_list(vqc_not_digested *nd, int rank,
                                 const char *tensor_name,
                                 const char *why_text, int64_t step_at,
                                 bool unchecked, bool *fresh) {
  *fresh = false;
  if (json_array_size(nd->list) >= VQC_NOT_DIGESTED_LISTED) return VQC_OK;
  json_t *tensor = cut_text(tensor_name, VQC_NOT_DIGESTED_NAME_MAX);
  if (listed(nd->list, rank, tensor)) {
    json_decref(tensor);
    return VQC_OK;
  }
  json_t *why = why_text && why_text[0]
                    ? cut_text(why_text, VQC_NOT_DIGESTED_WHY_MAX)
                    : json_string("no reason given");
  json_t *step = step_at >= 0 ? json_integer(step_at) : json_null();
  json_t *e = json_pack("{s:i,s:o,s:o,s:o,s:b}", "rank", rank, "tensor",
                        tensor, "why", why, "step", step, "unchecked",
                        unchecked);
  if (e == NULL || json_array_append_new(nd->list, e) != 0)
    return vqc_error(VQC_ENOMEM, "not_digested: no memory");
  *fresh = true;
  return VQC_OK;
}

vqc_status vqc_not_digested_init(vqc_not_digested *nd) {
  memset(nd, 0, sizeof *nd);
  nd->list = json_array();
  nd->warnings = json_array();
  if (nd->list == NULL || nd->warnings == NULL)
    return vqc_error(VQC_ENOMEM, "not_digested: no memory");
  return VQC_OK;
}

vqc_status vqc_not_digested_add(vqc_not_digested *nd, int rank,
                                const char *tensor, const char *why,
                                int64_t step, bool unchecked) {
  bool fresh;
  VQC_TRY(vqc_not_digested_list(nd, rank, tensor, why, step, unchecked,
                                &fresh));
  /* Counted once per (rank, tensor) while the list has room (a trace
   * names a tensor left out at every step); past it, every line. */
  if (fresh || json_array_size(nd->list) >= VQC_NOT_DIGESTED_LISTED) {
    nd->count++;
    if (unchecked) nd->unchecked++;
  }
  return VQC_OK;
}

vqc_status vqc_not_digested_merge(vqc_not_digested *into,
                                  const vqc_not_digested *from) {
  size_t i;
  const json_t *e;
  json_array_foreach(from->list, i, e) {
    const json_t *s = json_object_get(e, "step");
    VQC_TRY(vqc_not_digested_add(
        into, (int)json_integer_value(json_object_get(e, "rank")),
        json_string_value(json_object_get(e, "tensor")),
        json_string_value(json_object_get(e, "why")),
        json_is_integer(s) ? (int64_t)json_integer_value(s) : -1,
        json_is_true(json_object_get(e, "unchecked"))));
  }
  return VQC_OK;
}

void vqc_not_digested_free(vqc_not_digested *nd) {
  if (nd == NULL) return;
  json_decref(nd->list);
  json_decref(nd->warnings);
  memset(nd, 0, sizeof *nd);
}

/* The ranks of list entries from `from` on that name tensor t and went
 * unchecked, as "0, 1, 3" into buf (cap bytes); how many there are. */
static int ranks_of(const json_t *list, size_t from, const json_t *t,
                    char *buf, size_t cap) {
  int n = 0;
  size_t k = 0, i;
  const json_t *e;
  buf[0] = '\0';
  json_array_foreach(list, i, e) {
    if (i < from || !json_is_true(json_object_get(e, "unchecked")) ||
        !json_equal(json_object_get(e, "tensor"), (json_t *)t))
      continue;
    int w = snprintf(buf + k, k < cap ? cap - k : 0, "%s%d", n ? ", " : "",
                     (int)json_integer_value(json_object_get(e, "rank")));
    if (w > 0) k += (size_t)w;
    n++;
  }
  if (k >= cap && cap > 4) memcpy(buf + cap - 4, "...", 4);
  return n;
}

/* Whether an entry before `before` names tensor t and went unchecked. */
static bool told_before(const json_t *list, size_t before, const json_t *t) {
  for (size_t i = 0; i < before; i++) {
    const json_t *e = json_array_get(list, i);
    if (json_is_true(json_object_get(e, "unchecked")) &&
        json_equal(json_object_get(e, "tensor"), (json_t *)t))
      return true;
  }
  return false;
}

int64_t vqc_not_digested_unchecked(const vqc_not_digested *nd, char *out,
                                   size_t cap) {
  if (cap > 0) out[0] = '\0';
  if (nd == NULL || nd->unchecked == 0 || cap == 0) return 0;
  size_t k = 0, i;
  int named = 0, tensors = 0;
  const json_t *e;
  json_array_foreach(nd->list, i, e) {
    const json_t *t = json_object_get(e, "tensor");
    if (!json_is_true(json_object_get(e, "unchecked")) ||
        told_before(nd->list, i, t))
      continue;
    tensors++;
    if (named == 3) continue; /* counted, not named */
    char ranks[200];
    int nr = ranks_of(nd->list, i, t, ranks, sizeof ranks);
    int w = snprintf(out + k, k < cap ? cap - k : 0,
                     "%stensor '%s' was not digested on rank%s %s (%s)",
                     named ? "; " : "", json_string_value(t),
                     nr == 1 ? "" : "s", ranks,
                     json_string_value(json_object_get(e, "why")));
    if (w > 0) k += (size_t)w;
    named++;
  }
  if (tensors > named) {
    int w = snprintf(out + k, k < cap ? cap - k : 0, "; and %d more tensor%s",
                     tensors - named, tensors - named == 1 ? "" : "s");
    if (w > 0) k += (size_t)w;
  }
  if (nd->unchecked > 0 && tensors == 0) /* past the listed entries only */
    snprintf(out, cap, "%lld tensor lines were not digested",
             (long long)nd->unchecked);
  return nd->unchecked;
}

