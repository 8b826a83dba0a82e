/* fault.c: names of the catalogue faults, generated from VQC_FAULT_LIST. */
#include "vqc/fault.h"

#include <string.h>

static const char *const names[] = {
#define X(e, name, where) name,
    VQC_FAULT_LIST(X)
#undef X
};
static const char *const origins[] = {
#define X(e, name, where) where,
    VQC_FAULT_LIST(X)
#undef X
};

const char *vqc_fault_name(vqc_fault f) {
  return (unsigned)f < VQC_FAULT_COUNT ? names[f] : "?";
}

const char *vqc_fault_origin(vqc_fault f) {
  return (unsigned)f < VQC_FAULT_COUNT ? origins[f] : "?";
}

vqc_status vqc_fault_from_name(const char *name, vqc_fault *out) {
  for (int f = 0; f < VQC_FAULT_COUNT; f++) {
    if (name && strcmp(name, names[f]) == 0) {
      *out = (vqc_fault)f;
      return VQC_OK;
    }
  }
  char list[512] = "";
  for (int f = 0; f < VQC_FAULT_COUNT; f++) {
    strncat(list, names[f], sizeof list - strlen(list) - 3);
    if (f + 1 < VQC_FAULT_COUNT) strncat(list, ", ", sizeof list - strlen(list) - 1);
  }
  return vqc_error(VQC_EINVAL, "unknown fault '%s' (known: %s)",
                   name ? name : "(null)", list);
}
