/* probe.c: named facts raised by library code for checkers (vqc/probe.h).
 *
 * The handler table lives in struct vqc_comm (comm_internal.h) next to the
 * collective event subscribers, so a probe reaches exactly the checkers
 * attached to that rank's comm and nothing global is involved. */
#include "vqc/probe.h"

#include <string.h>

#include "comm/comm_internal.h"

vqc_status vqc_probe_subscribe(vqc_comm *c, vqc_probe_fn fn, void *user) {
  if (!c || !fn) return vqc_error(VQC_EINVAL, "probe_subscribe: comm or "
                                  "handler is NULL");
  if (!c->ledger)
    return vqc_error(VQC_EINVAL, "probe_subscribe: probes are raised on data "
                     "comms, not on side channels");
  if (c->nprobes == VQC_MAX_PROBE_SUBSCRIBERS)
    return vqc_error(VQC_ENOMEM, "at most %d probe handlers per comm",
                     VQC_MAX_PROBE_SUBSCRIBERS);
  c->probes[c->nprobes].fn = fn;
  c->probes[c->nprobes].user = user;
  c->nprobes++;
  return VQC_OK;
}

void vqc_probe_unsubscribe(vqc_comm *c, vqc_probe_fn fn, void *user) {
  if (!c) return;
  for (int i = 0; i < c->nprobes; i++) {
    if (c->probes[i].fn == fn && c->probes[i].user == user) {
      memmove(&c->probes[i], &c->probes[i + 1],
              (size_t)(c->nprobes - i - 1) * sizeof c->probes[0]);
      c->nprobes--;
      return;
    }
  }
}

vqc_status vqc_probe_set(vqc_probe *p, const char *key, int64_t value) {
  if (!p || !key) return vqc_error(VQC_EINVAL, "probe_set: probe or key is NULL");
  for (int i = 0; i < p->n; i++) {
    if (strcmp(p->keys[i], key) == 0) {
      p->values[i] = value;
      return VQC_OK;
    }
  }
  if (p->n < 0 || p->n >= VQC_PROBE_MAX_KEYS)
    return vqc_error(VQC_ENOMEM, "probe '%s': no room for key '%s' (at most "
                     "%d keys)", p->name ? p->name : "?", key,
                     VQC_PROBE_MAX_KEYS);
  p->keys[p->n] = key;
  p->values[p->n] = value;
  p->n++;
  return VQC_OK;
}

bool vqc_probe_get(const vqc_probe *p, const char *key, int64_t *value) {
  if (!p || !key) return false;
  for (int i = 0; i < p->n && i < VQC_PROBE_MAX_KEYS; i++) {
    if (p->keys[i] && strcmp(p->keys[i], key) == 0) {
      if (value) *value = p->values[i];
      return true;
    }
  }
  return false;
}

vqc_status vqc_probe_emit_at(vqc_comm *c, const vqc_probe *p) {
  if (!c || c->nprobes == 0) return VQC_OK;
  if (!p) return vqc_error(VQC_EINVAL, "probe_emit: probe is NULL");
  for (int i = 0; i < c->nprobes; i++) {
    vqc_status s = c->probes[i].fn(c, p, c->probes[i].user);
    if (s != VQC_OK) return s;
  }
  return VQC_OK;
}

vqc_status vqc_probe_emit_site(vqc_comm *c, const vqc_probe *p, vqc_site site) {
  if (!c || c->nprobes == 0) return VQC_OK;
  if (!p) return vqc_error(VQC_EINVAL, "probe_emit: probe is NULL");
  vqc_probe q = *p;
  q.site = site;
  return vqc_probe_emit_at(c, &q);
}
