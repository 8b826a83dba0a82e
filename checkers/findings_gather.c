/* findings_gather.c: every rank's findings in one list, over a side channel
 * (vqc_findings_gather, see findings.h). Apart from findings.c because it
 * needs the comm. */
#include <stdlib.h>
#include <string.h>

#include "findings.h"

vqc_status vqc_findings_gather(vqc_comm *side, vqc_findings *mine,
                               vqc_findings *out) {
  const int size = vqc_comm_size(side);
  /* Text, because findings differ in size (their detail objects): one
   * all_gather of the lengths, then one all_gatherv of the bytes. */
  json_t *arr = vqc_findings_to_json(mine);
  char *text = json_dumps(arr, JSON_COMPACT);
  json_decref(arr);
  if (!text) return vqc_error(VQC_ENOMEM, "findings gather: findings as JSON");
  int64_t len = (int64_t)strlen(text);
  int64_t *lens = calloc((size_t)size, sizeof *lens);
  size_t *counts = calloc((size_t)size, sizeof *counts);
  char *all = NULL;
  vqc_status s = lens && counts ? VQC_OK
                                : vqc_error(VQC_ENOMEM, "findings gather: %d "
                                            "ranks", size);
  if (s == VQC_OK) s = vqc_all_gather(side, &len, lens, 1, VQC_I64);
  size_t total = 0;
  for (int r = 0; s == VQC_OK && r < size; r++) {
    counts[r] = (size_t)lens[r];
    total += counts[r];
  }
  if (s == VQC_OK && !(all = malloc(total + 1)))
    s = vqc_error(VQC_ENOMEM, "findings gather: %zu bytes of findings", total);
  if (s == VQC_OK)
    s = vqc_all_gatherv(side, text, (size_t)len, all, counts, VQC_U8);
  size_t off = 0;
  for (int r = 0; s == VQC_OK && out && r < size; r++) {
    json_error_t err;
    json_t *a = json_loadb(all + off, counts[r], 0, &err);
    off += counts[r];
    if (!json_is_array(a)) {
      json_decref(a);
      s = vqc_error(VQC_EPARSE, "findings gather: rank %d's findings are not "
                    "a JSON array: %s", r, err.text);
      break;
    }
    for (size_t i = 0; i < json_array_size(a) && s == VQC_OK; i++) {
      vqc_finding x;
      s = vqc_finding_from_json(json_array_get(a, i), &x);
      if (s == VQC_OK) s = vqc_findings_add(out, &x);
    }
    json_decref(a);
  }
  free(text);
  free(lens);
  free(counts);
  free(all);
  return s;
}
