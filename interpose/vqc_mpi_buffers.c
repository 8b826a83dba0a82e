/* vqc_mpi_buffers.c: the checks of a collective's own buffers before data
 * moves: send and receive buffers that overlap, a receive side too small,
 * send and receive sides of different element types. */
#include "vqc_mpi_internal.h"

/* ---- buffers: a result that cannot land
 *
 * Two checks of a call's own arguments, made after its "entered" line and
 * before PMPI moves any data, each a finding on the live record (once per
 * call site and kind: a loop does not flood the record); the call then
 * goes on as the program made it:
 *   overlap    the send and receive buffers share bytes and neither is
 *              MPI_IN_PLACE (MPI forbids aliased buffers: the result can
 *              overwrite input not yet read): lost_inplace;
 *   too small  a gather, scatter or all-to-all whose receive side takes
 *              fewer bytes from each rank than the send side gives
 *              (recvcount x size(recvtype) < sendcount x size(sendtype),
 *              where both sides are significant on this rank): the
 *              message cannot land (MPI_ERR_TRUNCATE, or the program's
 *              memory past the buffer): shape_mismatch.
 * The bytes a buffer spans: from its true lower bound to the true upper
 * bound of its last item (MPI_Type_get_true_extent), items counted up to
 * the largest displacement + count for the v forms. Buffers at MPI_BOTTOM
 * (absolute addresses in the type) are not checked. */

/* (vqc_mpi_internal.h) */
bool buf_span(const void *buf, long long n, MPI_Datatype t, uintptr_t *lo,
                 uintptr_t *hi) {
  if (!buf || buf == MPI_IN_PLACE || buf == MPI_BOTTOM || n <= 0 ||
      t == MPI_DATATYPE_NULL)
    return false;
  MPI_Aint tlb = 0, text = 0, lb = 0, ext = 0;
  const basic *b = basic_of(t);
  if (b && b->extents) {
    tlb = b->true_lb;
    text = b->true_extent;
    ext = b->extent;
  } else if (PMPI_Type_get_true_extent(t, &tlb, &text) != MPI_SUCCESS ||
             PMPI_Type_get_extent(t, &lb, &ext) != MPI_SUCCESS) {
    return false;
  }
  if (text <= 0 || ext <= 0) return false;
  *lo = (uintptr_t)buf + (uintptr_t)tlb;
  *hi = *lo + (uintptr_t)((n - 1) * (long long)ext + (long long)text);
  return true;
}

/* Items spanned by a v form's counts and displacements (one per peer:
 * peer_count). */
long long v_items(const int *counts, const int *displs, MPI_Comm c) {
  int n = 0;
  long long most = 0;
  if (!counts || !displs) return 0;
  n = peer_count(c);
  for (int i = 0; i < n; i++)
    if (counts[i] > 0 && (long long)displs[i] + counts[i] > most)
      most = (long long)displs[i] + counts[i];
  return most;
}


static void buffer_finding(const call *c, const char *kind, const char *fn,
                           const char *what, const char *detail) {
  char file[1100], func[520], name[420], msg[1400];
  json_esc(file, sizeof file, c->s->file);
  json_esc(func, sizeof func, c->s->func);
  json_esc(name, sizeof name, c->ci->name);
  const bool world = c->ci == &world_info;
  snprintf(msg, sizeof msg, "rank %d: %s #%llu%s%.100s at %.300s:%d: %s",
           g.rank, fn, (unsigned long long)c->seq,
           world ? "" : " on communicator ", world ? "" : name, file,
           c->s->line, what);
  char *b = malloc(4096);
  if (!b) return;
  const int k = snprintf(b, 4096,
      "{\"event\":\"finding\",\"finding\":{\"kind\":\"%s\",\"step\":-1,"
      "\"ranks\":[%d],\"site\":{\"file\":\"%.400s\",\"line\":%d,"
      "\"func\":\"%.200s\"},\"message\":\"%s\",\"detail\":{\"mpi_call\":"
      "\"%s\",\"op\":\"%s\",\"seq\":%llu,\"communicator\":\"%.200s\",%s}}}\n",
      kind, g.rank, file, c->s->line, func, msg, fn, c->op,
      (unsigned long long)c->seq, world ? "world" : name, detail);
  if (k > 0 && k < 4096) live_write(b, (size_t)k);
  free(b);
}


/* The last arguments check_overlap found apart (one thread calls MPI): a
 * loop's next call with the same ones is apart too, whatever its site. */
typedef struct sides {
  const void *sb, *rb;
  long long sn, rn;
  MPI_Datatype st, rt;
} sides;
static sides apart;

void check_overlap(const call *c, const char *fn, const void *sb,
                   long long sn, MPI_Datatype st, const void *rb,
                   long long rn, MPI_Datatype rt) {
  if (!c->ci) return;
  if (!g.multi && sb == apart.sb && rb == apart.rb && sn == apart.sn &&
      rn == apart.rn && st == apart.st && rt == apart.rt)
    return;
  uintptr_t slo, shi, rlo, rhi;
  const bool spans = buf_span(sb, sn, st, &slo, &shi) &&
                     buf_span(rb, rn, rt, &rlo, &rhi);
  const uintptr_t lo = !spans ? 0 : slo > rlo ? slo : rlo;
  const uintptr_t hi = !spans ? 0 : shi < rhi ? shi : rhi;
  if (lo >= hi) {
    /* Apart (or nothing to compare). Only basic types are kept: a derived
     * type's handle may name another type once freed. */
    const basic *bs = st == MPI_DATATYPE_NULL ? NULL : basic_of(st);
    const basic *br = rt == MPI_DATATYPE_NULL ? NULL : basic_of(rt);
    if (!g.multi && bs && br)
      apart = (sides){sb, rb, sn, rn, st, rt};
    return;
  }
  if (!site_first(c->s, REPORTED_OVERLAP)) return;
  /* Where MPI_IN_PLACE goes for this kind of call. */
  const char *advice =
      strncmp(op_base(c), "scatter", 7) == 0
          ? "Pass MPI_IN_PLACE as the receive buffer at the root (its "
            "share stays in the send buffer)"
      : strstr(c->op, "reduce") || strstr(c->op, "scan")
          ? "Pass MPI_IN_PLACE as the send buffer to reduce in place"
          : "Pass MPI_IN_PLACE as the send buffer (this rank's share "
            "already in its place in the receive buffer)";
  char what[700], detail[300];
  snprintf(what, sizeof what, "the send buffer (%llu bytes) and the receive "
           "buffer (%llu bytes) overlap by %llu bytes without MPI_IN_PLACE: "
           "MPI forbids aliased buffers, and the result can overwrite input "
           "not yet read. %s, or use separate buffers",
           (unsigned long long)(shi - slo), (unsigned long long)(rhi - rlo),
           (unsigned long long)(hi - lo), advice);
  snprintf(detail, sizeof detail, "\"send_bytes\":%llu,\"recv_bytes\":%llu,"
           "\"overlap_bytes\":%llu,\"in_place\":false",
           (unsigned long long)(shi - slo), (unsigned long long)(rhi - rlo),
           (unsigned long long)(hi - lo));
  buffer_finding(c, "lost_inplace", fn, what, detail);
}

/* The send and receive sides of one rank's gather, scatter or all-to-all
 * of another element type (MPI_INT sent, MPI_DOUBLE received): every
 * rank's send type must match what its peers receive, and here the rank's
 * own receive side says what its peers' sends will be read as. MPI_BYTE,
 * MPI_PACKED and types without one element are not compared. */
static void check_types(const call *c, const char *fn, int sc,
                        MPI_Datatype st, int rc, MPI_Datatype rt) {
  if (sc <= 0 || rc <= 0) return;
  const msg_sig s = msg_sig_of(st), r = msg_sig_of(rt);
  if (!s.dtype[0] || !r.dtype[0] || strcmp(s.dtype, r.dtype) == 0 ||
      !site_first(c->s, REPORTED_TYPES))
    return;
  char what[600], detail[300];
  snprintf(what, sizeof what, "it sends %s%s%s%s and receives %s%s%s%s: "
           "what one rank sends is read by its peers as their receive type, "
           "so the bytes are read as another type (MPI checks only their "
           "size). Use the same element type on both sides",
           s.dtype, s.name ? " (" : "", s.name ? s.name : "",
           s.name ? ")" : "", r.dtype, r.name ? " (" : "",
           r.name ? r.name : "", r.name ? ")" : "");
  snprintf(detail, sizeof detail, "\"send_dtype\":\"%s\",\"recv_dtype\":"
           "\"%s\"", s.dtype, r.dtype);
  buffer_finding(c, "collective_mismatch", fn, what, detail);
}

/* Per rank: sc items of st sent, rc items of rt received. */
void check_fits(const call *c, const char *fn, int sc, MPI_Datatype st,
                int rc, MPI_Datatype rt) {
  /* On an intercommunicator one group's send side meets the other's
   * receive side: a rank's own two sides need not agree. */
  if (c->ci && c->ci->inter) return;
  if (c->ci) check_types(c, fn, sc, st, rc, rt);
  if (c->ci && rc > 0) race_recv_type(fn, rt, c->s);
  int ss = 0, rs = 0;
  /* (a negative count is an invalid argument, which MPI reports) */
  if (!c->ci || sc < 0 || rc < 0 || st == MPI_DATATYPE_NULL ||
      rt == MPI_DATATYPE_NULL ||
      PMPI_Type_size(st, &ss) != MPI_SUCCESS ||
      PMPI_Type_size(rt, &rs) != MPI_SUCCESS)
    return;
  const long long sent = (long long)sc * ss, room = (long long)rc * rs;
  if (room >= sent || !site_first(c->s, REPORTED_SMALL)) return;
  char what[600], detail[300];
  snprintf(what, sizeof what, "the receive side takes %d x %d bytes from "
           "each rank but each rank sends %d x %d bytes: the receive buffer "
           "is too small for what arrives (%lld of %lld bytes; MPI_ERR_"
           "TRUNCATE, or memory past the buffer overwritten). Make recvcount "
           "x size(recvtype) equal sendcount x size(sendtype)",
           rc, rs, sc, ss, room, sent);
  snprintf(detail, sizeof detail, "\"expected_bytes\":%lld,\"actual_bytes\":"
           "%lld,\"sendcount\":%d,\"recvcount\":%d", sent, room, sc, rc);
  buffer_finding(c, "shape_mismatch", fn, what, detail);
}
