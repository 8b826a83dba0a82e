/* test_ledger_record.c: the ledger line's codec (checkers/ledger_record.h):
 * a record's line is the library's dump line byte for byte, lines round
 * trip through the decoder, the optional fields come in their order, the
 * Python bridge's escapes, and the decoder's strict and lenient messages. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/ledger_internal.h"
#include "ledger_record.h"
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/status.h"

/* vqc_last_error() starts with where it was made: the message ends it. */
static bool ends_with(const char *s, const char *end) {
  const size_t n = strlen(s), k = strlen(end);
  return n >= k && strcmp(s + n - k, end) == 0;
}

static json_t *parse(const char *text) {
  json_error_t err;
  json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &err);
  cr_assert_not_null(j, "%s: %s", text, err.text);
  return j;
}

Test(ledger_record, library_dump_lines_are_the_codec_lines) {
  /* lib/src/comm/ledger.c writes the dump itself (the library cannot call
   * checkers/): its lines must be this codec's, byte for byte. */
  vqc_ledger *l = NULL;
  cr_assert_eq(vqc_ledger_create(3, 16, &l), VQC_OK);
  vqc_ledger_record recs[3];
  memset(recs, 0, sizeof recs);
  recs[0] = (vqc_ledger_record){.op = VQC_COLL_ALL_REDUCE, .redop = VQC_MAX,
                                .dtype = VQC_F32, .count = 16, .root = -1,
                                .site = {"/src/lib/a \"b\".c", 57, "f\tn"}};
  recs[1] = (vqc_ledger_record){.op = VQC_COLL_BROADCAST, .dtype = VQC_I64,
                                .count = 1, .root = 2,
                                .site = {"caf\xc3\xa9.c", 9, "g"}};
  recs[2] = (vqc_ledger_record){.op = VQC_COLL_BARRIER, .root = -1,
                                .site = {NULL, 0, NULL}};
  vqc_ledger_open(l, &recs[0]);
  vqc_ledger_close(l, &recs[0], VQC_OK);
  vqc_ledger_open(l, &recs[1]);
  vqc_ledger_close(l, &recs[1], VQC_ETIMEOUT);
  vqc_ledger_open(l, &recs[2]);

  char *dump = NULL;
  size_t dn = 0;
  FILE *f = open_memstream(&dump, &dn);
  cr_assert_not_null(f);
  cr_assert_eq(vqc_ledger_write_jsonl(l, f), VQC_OK);
  fclose(f);

  char want[4096] = "";
  size_t k = 0;
  for (uint64_t seq = 0; seq < 3; seq++) {
    vqc_ledger_record r;
    cr_assert(vqc_ledger_get(l, seq, &r));
    vqc_ledger_line line;
    vqc_ledger_line_of(&r, &line);
    k += vqc_ledger_line_format(&line, 0, want + k, sizeof want - k);
    cr_assert_lt(k, sizeof want);
  }
  cr_assert_str_eq(dump, want);
  free(dump);
  vqc_ledger_destroy(l);
}

Test(ledger_record, round_trip) {
  static const int ranks[] = {4, 0, 2};
  vqc_ledger_line in;
  memset(&in, 0, sizeof in);
  in.seq = 9223372036854775807ull;
  in.rank = 2147483647;
  in.op = "reduce_scatter";
  in.redop = "avg";
  in.dtype = "bfloat16";
  in.count = 1ull << 40;
  in.root = -1;
  in.group_size = 3;
  in.any_site = true;
  in.mpi_type = "struct {int, double}";
  in.has_group = true;
  in.group = ranks;
  in.ngroup = 3;
  in.group_name = "tp \"0\"";
  in.file = "/a/b\\c.py";
  in.line = 77;
  in.func = "step\n";
  in.t_enter_ns = 9223372036854775807ull; /* the widest numbers */
  in.t_exit_ns = 9223372036854775806ull;
  in.state = VQC_REC_FAILED;
  in.status = "RuntimeError";
  char text[1024];
  const size_t n = vqc_ledger_line_format(&in, 0, text, sizeof text);
  cr_assert_lt(n, sizeof text);
  cr_assert_eq(text[n - 1], '\n');
  cr_assert_eq(strlen(text), n);
  json_t *j = parse(text);
  vqc_ledger_line out;
  cr_assert_eq(vqc_ledger_line_decode(j, in.rank, "x", 1, 0, &out),
               VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(out.seq, in.seq);
  cr_assert_eq(out.rank, in.rank);
  cr_assert_str_eq(out.op, in.op);
  cr_assert_str_eq(out.redop, in.redop);
  cr_assert_str_eq(out.dtype, in.dtype);
  cr_assert_eq(out.count, in.count);
  cr_assert_eq(out.root, in.root);
  cr_assert_eq(out.group_size, 3);
  cr_assert(out.any_site);
  cr_assert_str_eq(out.mpi_type, in.mpi_type);
  cr_assert(out.has_group);
  cr_assert_eq(out.ngroup, 3);
  cr_assert_arr_eq(out.group, ranks, sizeof ranks);
  cr_assert_str_eq(out.group_name, in.group_name);
  cr_assert_str_eq(out.file, in.file);
  cr_assert_eq(out.line, in.line);
  cr_assert_str_eq(out.func, in.func);
  cr_assert_eq(out.t_enter_ns, 9223372036854775807ull);
  cr_assert_eq(out.t_exit_ns, 9223372036854775806ull);
  cr_assert_eq(out.state, VQC_REC_FAILED);
  cr_assert_str_eq(out.status, "RuntimeError");
  /* And back: the same bytes. */
  char again[1024];
  cr_assert_eq(vqc_ledger_line_format(&out, 0, again, sizeof again), n);
  cr_assert_str_eq(again, text);
  vqc_ledger_line_release(&out);
  json_decref(j);
}

Test(ledger_record, optional_fields_in_order) {
  static const int ranks[] = {0, 1};
  vqc_ledger_line l;
  memset(&l, 0, sizeof l);
  l.seq = 1;
  l.rank = 1;
  l.op = "all_reduce";
  l.redop = "sum";
  l.dtype = "float32";
  l.count = 8;
  l.root = -1;
  l.group_size = 2;
  l.has_group = true;
  l.group = ranks;
  l.ngroup = 2;
  l.group_name = "1";
  l.file = "t.py";
  l.line = 3;
  l.func = "<module>";
  l.t_enter_ns = 10;
  l.state = VQC_REC_ENTERED;
  l.status = "";
  char text[512];
  vqc_ledger_line_format(&l, VQC_LEDGER_PY_ESCAPES, text, sizeof text);
  /* What the bridge's json.dumps wrote (separators (",", ":")). */
  cr_assert_str_eq(text,
                   "{\"seq\":1,\"rank\":1,\"op\":\"all_reduce\",\"redop\":"
                   "\"sum\",\"dtype\":\"float32\",\"count\":8,\"root\":-1,"
                   "\"group_size\":2,\"group\":[0,1],\"group_name\":\"1\","
                   "\"file\":\"t.py\",\"line\":3,\"func\":\"<module>\","
                   "\"t_enter_ns\":10,\"t_exit_ns\":0,\"state\":\"entered\","
                   "\"status\":\"\"}\n");
}

Test(ledger_record, escapes) {
  vqc_ledger_line l;
  memset(&l, 0, sizeof l);
  l.op = "barrier";
  l.file = "a\"\\\n\t\x01\x7f\xc3\xa9";
  char c[512], py[512];
  vqc_ledger_line_format(&l, 0, c, sizeof c);
  vqc_ledger_line_format(&l, VQC_LEDGER_PY_ESCAPES, py, sizeof py);
  /* C writers: every control character as \u00XX; Python's json.dumps:
   * the short forms. Other bytes as they are (0x7f, UTF-8). */
  cr_assert(strstr(c, "\"file\":\"a\\\"\\\\\\u000a\\u0009\\u0001\x7f"
                      "\xc3\xa9\""), "%s", c);
  cr_assert(strstr(py, "\"file\":\"a\\\"\\\\\\n\\t\\u0001\x7f\xc3\xa9\""),
            "%s", py);
  /* NULL strings are "". */
  cr_assert(strstr(c, "\"redop\":\"\",\"dtype\":\"\""), "%s", c);
}

Test(ledger_record, small_buffer) {
  vqc_ledger_line l;
  memset(&l, 0, sizeof l);
  l.op = "barrier";
  l.file = "f.c";
  char whole[512], part[16];
  const size_t n = vqc_ledger_line_format(&l, 0, whole, sizeof whole);
  cr_assert_eq(vqc_ledger_line_format(&l, 0, part, sizeof part), n);
  cr_assert_eq(strlen(part), sizeof part - 1);
  cr_assert_eq(strncmp(part, whole, sizeof part - 1), 0);
  cr_assert_eq(vqc_ledger_line_format(&l, 0, NULL, 0), n);
}

Test(ledger_record, strict_messages) {
  vqc_ledger_line out;
  json_t *j = parse("{\"seq\":1,\"rank\":0,\"op\":\"barrier\",\"redop\":\"\","
                    "\"dtype\":\"\",\"count\":0,\"root\":-1,\"file\":\"f\","
                    "\"line\":1,\"func\":\"g\",\"state\":\"done\","
                    "\"status\":\"VQC_OK\"}");
  cr_assert_eq(vqc_ledger_line_decode(j, 0, "p", 7, 0, &out), VQC_OK);
  vqc_ledger_line_release(&out);
  cr_assert_eq(vqc_ledger_line_decode(j, 1, "p", 7, 0, &out), VQC_EPARSE);
  cr_assert(ends_with(vqc_last_error(),
                      "p:7: field 'rank': 0 in the dump of rank 1"),
            "%s", vqc_last_error());
  json_object_set_new(j, "state", json_string("gone"));
  cr_assert_eq(vqc_ledger_line_decode(j, 0, "p", 7, 0, &out), VQC_EPARSE);
  cr_assert(ends_with(vqc_last_error(), "p:7: field 'state': 'gone' "
                      "(expected entered, done or failed)"),
            "%s", vqc_last_error());
  json_object_del(j, "count");
  cr_assert_eq(vqc_ledger_line_decode(j, 0, "p", 7, 0, &out), VQC_EPARSE);
  cr_assert(strstr(vqc_last_error(), "p:7: field 'count': expected an "
                   "integer in 0.."), "%s", vqc_last_error());
  /* Lenient (the reports): count may be missing; state may not. */
  cr_assert_eq(vqc_ledger_line_decode(j, 0, "p", 7, VQC_LEDGER_LENIENT, &out),
               VQC_EPARSE);
  cr_assert(ends_with(vqc_last_error(), "p:7: field 'state': expected "
                      "entered, done or failed"),
            "%s", vqc_last_error());
  json_object_set_new(j, "state", json_string("entered"));
  cr_assert_eq(vqc_ledger_line_decode(j, 0, "p", 7, VQC_LEDGER_LENIENT, &out),
               VQC_OK);
  cr_assert_eq(out.count, 0);
  json_object_set_new(j, "any_site", json_string("yes"));
  cr_assert_eq(vqc_ledger_line_decode(j, 0, "p", 7, 0, &out), VQC_EPARSE);
  json_decref(j);
}

Test(ledger_record, group_shapes) {
  vqc_ledger_line out;
  char text[1024];
  size_t k = (size_t)snprintf(text, sizeof text,
                              "{\"seq\":1,\"rank\":0,\"op\":\"barrier\","
                              "\"redop\":\"\",\"dtype\":\"\",\"count\":0,"
                              "\"root\":-1,\"group\":[");
  for (int i = 0; i < 100; i++)
    k += (size_t)snprintf(text + k, sizeof text - k, i ? ",%d" : "%d",
                          i == 5 ? -3 : i);
  snprintf(text + k, sizeof text - k, ",\"x\"],\"file\":\"f\",\"line\":1,"
           "\"func\":\"g\",\"state\":\"done\",\"status\":\"VQC_OK\"}");
  json_t *j = parse(text);
  cr_assert_eq(vqc_ledger_line_decode(j, 0, "p", 1, 0, &out), VQC_OK);
  cr_assert(out.has_group);
  cr_assert_eq(out.ngroup, 101); /* past the inline storage */
  cr_assert_eq(out.group[99], 99);
  cr_assert_eq(out.group[5], -1);   /* not a rank */
  cr_assert_eq(out.group[100], -1); /* not an integer */
  cr_assert_str_eq(out.group_name, "");
  vqc_ledger_line_release(&out);
  json_object_set_new(j, "group", json_string("0,1"));
  cr_assert_eq(vqc_ledger_line_decode(j, 0, "p", 1, 0, &out), VQC_OK);
  cr_assert_eq(out.ngroup, -1);
  vqc_ledger_line_release(&out);
  json_object_set_new(j, "group", json_null());
  cr_assert_eq(vqc_ledger_line_decode(j, 0, "p", 1, 0, &out), VQC_OK);
  cr_assert(!out.has_group);
  json_decref(j);
}
