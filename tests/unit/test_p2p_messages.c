/* test_p2p_messages.c: an MPI program's messages paired across ranks
 * (harness/run/p2p_messages.h), fed rank-<r>.p2p.jsonl files written by
 * hand in the interposer's format (interpose/vqc_mpi_msgs.c):
 *
 *   matched_*     equal counts and hashes: nothing; a communicator's
 *                 channels paired by name, not mixed with the world's;
 *   lost_*        a message sent, not received: a deadlock naming both
 *                 ranks, the send's site and the counts; not told when
 *                 the receiver's own never-completed receive covers it
 *                 (pending_recv, wildcards too), nor when a rank's counts
 *                 are incomplete ("uncounted"), nor for a rank without a
 *                 file (it never reached MPI_Finalize);
 *   typed_*       first message of another element type, a later one
 *                 (the "other" ordinal), untyped messages not compared;
 *   bad_*         a file of garbage is a warning, never a finding, and
 *                 the other ranks are still paired. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "p2p_messages.h"

static char dir[64];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/vqc_p2p_XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  (void)system(cmd);
}

static void file(int rank, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/rank-%d.p2p.jsonl", dir, rank);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

#define HEAD(r, u) "{\"rank\":" #r ",\"size\":2,\"channels\":1,\"messages\":1," \
                   "\"uncounted\":" u "}\n"
#define AT(call, dtype, type, line)                                        \
  "{\"call\":\"" call "\",\"dtype\":\"" dtype "\",\"type\":\"" type        \
  "\",\"file\":\"/src/prog.c\",\"line\":" #line ",\"func\":\"main\"}"
#define CHAN(dir, comm, peer, tag, count, untyped, hash, first)            \
  "{\"dir\":\"" dir "\",\"comm\":\"" comm "\",\"peer\":" #peer ",\"tag\":" \
  #tag ",\"count\":" #count ",\"untyped\":" #untyped ",\"seqhash\":\""     \
  hash "\",\"first\":" first "}\n"

static char unchecked[600]; /* the last call's */

static vqc_findings run(json_t **warnings) {
  vqc_findings f;
  vqc_findings_init(&f);
  *warnings = json_array();
  snprintf(unchecked, sizeof unchecked, "(not set)");
  vqc_p2p_messages(dir, 2, &f, *warnings, NULL, unchecked, sizeof unchecked);
  return f;
}

TestSuite(p2p, .init = setup, .fini = teardown);

Test(p2p, matched_is_clean) {
  file(0, HEAD(0, "null")
          CHAN("send", "world", 1, 7, 3, 0, "00000000000000aa",
               AT("MPI_Send", "float64", "MPI_DOUBLE", 10))
          CHAN("send", "world/split1", 1, 7, 1, 0, "00000000000000bb",
               AT("MPI_Send", "int32", "MPI_INT", 11)));
  file(1, HEAD(1, "null")
          CHAN("recv", "world", 0, 7, 3, 0, "00000000000000aa",
               AT("MPI_Recv", "float64", "MPI_DOUBLE", 20))
          CHAN("recv", "world/split1", 0, 7, 1, 0, "00000000000000bb",
               AT("MPI_Recv", "int32", "MPI_INT", 21)));
  json_t *w;
  vqc_findings f = run(&w);
  cr_expect_eq(f.count, 0);
  cr_expect_eq(json_array_size(w), 0);
  cr_expect_str_empty(unchecked);
  json_decref(w);
  vqc_findings_free(&f);
}

Test(p2p, lost_is_a_deadlock_naming_both) {
  file(0, HEAD(0, "null")
          CHAN("send", "world", 1, 4, 2, 0, "00000000000000aa",
               AT("MPI_Send", "int32", "MPI_INT", 48)));
  file(1, HEAD(1, "null")
          CHAN("recv", "world", 0, 4, 1, 0, "00000000000000cc",
               AT("MPI_Recv", "int32", "MPI_INT", 50)));
  json_t *w;
  vqc_findings f = run(&w);
  cr_assert_eq(f.count, 1);
  const vqc_finding *x = &f.items[0];
  cr_expect_eq(x->kind, VQC_FINDING_DEADLOCK);
  cr_expect_eq(x->nranks, 2);
  cr_expect(strstr(x->message, "rank 0 sent 2 messages to rank 1 (tag 4)"));
  cr_expect(strstr(x->message, "rank 1 received only 1 of them"));
  cr_expect(strstr(x->site, "prog.c:48"));
  cr_expect_eq(json_integer_value(json_object_get(x->detail, "sent")), 2);
  cr_expect_eq(json_integer_value(json_object_get(x->detail, "received")), 1);
  json_decref(w);
  vqc_findings_free(&f);
}

Test(p2p, lost_on_a_communicator_says_which) {
  file(0, HEAD(0, "null")
          CHAN("send", "world/split1", 1, 9, 1, 0, "00000000000000aa",
               AT("MPI_Isend", "uint8", "MPI_BYTE", 30)));
  file(1, HEAD(1, "null"));
  json_t *w;
  vqc_findings f = run(&w);
  cr_assert_eq(f.count, 1);
  cr_expect(strstr(f.items[0].message, "(tag 9) on communicator "
                                       "world/split1 with MPI_Isend"));
  cr_expect(strstr(f.items[0].message, "that rank 1 never received"));
  json_decref(w);
  vqc_findings_free(&f);
}

Test(p2p, lost_not_told_twice_after_a_pending_receive) {
  file(0, HEAD(0, "null")
          CHAN("send", "world", 1, 4, 1, 0, "00000000000000aa",
               AT("MPI_Send", "int32", "MPI_INT", 48)));
  file(1, HEAD(1, "null")
          "{\"dir\":\"pending_recv\",\"comm\":\"world\",\"peer\":-1,"
          "\"tag\":-1}\n");
  json_t *w;
  vqc_findings f = run(&w);
  cr_expect_eq(f.count, 0);
  json_decref(w);
  vqc_findings_free(&f);
}

Test(p2p, lost_not_told_when_uncounted_or_gone) {
  file(0, HEAD(0, "null")
          CHAN("send", "world", 1, 4, 1, 0, "00000000000000aa",
               AT("MPI_Send", "int32", "MPI_INT", 48)));
  file(1, HEAD(1, "\"it uses persistent requests (MPI_Recv_init)\""));
  json_t *w;
  vqc_findings f = run(&w);
  cr_expect_eq(f.count, 0);
  cr_assert_eq(json_array_size(w), 1); /* what was not paired is told */
  cr_expect(strstr(json_string_value(json_array_get(w, 0)),
                   "rank 1's point-to-point messages were not paired with "
                   "its peers': it uses persistent requests"));
  json_decref(w);
  vqc_findings_free(&f);
  /* rank 1 never reached MPI_Finalize: no file, nothing paired */
  char path[128];
  snprintf(path, sizeof path, "%s/rank-1.p2p.jsonl", dir);
  unlink(path);
  f = run(&w);
  cr_expect_eq(f.count, 0);
  json_decref(w);
  vqc_findings_free(&f);
}

Test(p2p, typed_first_message) {
  file(0, HEAD(0, "null")
          CHAN("send", "world", 1, 7, 1, 0, "00000000000000aa",
               AT("MPI_Send", "int32", "MPI_INT", 10)));
  file(1, HEAD(1, "null")
          CHAN("recv", "world", 0, 7, 1, 0, "00000000000000bb",
               AT("MPI_Recv", "float32", "MPI_FLOAT", 20)));
  json_t *w;
  vqc_findings f = run(&w);
  cr_assert_eq(f.count, 1);
  cr_expect_eq(f.items[0].kind, VQC_FINDING_COLLECTIVE_MISMATCH);
  cr_expect(strstr(f.items[0].message, "rank 1 received message 1 of tag 7 "
                                       "from rank 0 as float32 (MPI_FLOAT)"));
  cr_expect(strstr(f.items[0].message, "rank 0 sent it as int32 (MPI_INT) "
                                       "with MPI_Send at prog.c:10"));
  cr_expect(strstr(f.items[0].site, "prog.c:20"));
  json_decref(w);
  vqc_findings_free(&f);
}

Test(p2p, typed_later_message_by_its_ordinal) {
  file(0, HEAD(0, "null")
          CHAN("send", "world", 1, 7, 4, 0, "00000000000000aa",
               AT("MPI_Send", "float64", "MPI_DOUBLE", 10)));
  file(1, HEAD(1, "null")
          "{\"dir\":\"recv\",\"comm\":\"world\",\"peer\":0,\"tag\":7,"
          "\"count\":4,\"untyped\":0,\"seqhash\":\"00000000000000bb\","
          "\"first\":" AT("MPI_Recv", "float64", "MPI_DOUBLE", 20) ","
          "\"other\":{\"call\":\"MPI_Recv\",\"dtype\":\"int64\",\"type\":"
          "\"MPI_LONG\",\"file\":\"/src/prog.c\",\"line\":21,\"func\":"
          "\"main\",\"ordinal\":2}}\n");
  json_t *w;
  vqc_findings f = run(&w);
  cr_assert_eq(f.count, 1);
  cr_expect(strstr(f.items[0].message, "received message 3 of tag 7 from "
                                       "rank 0 as int64 (MPI_LONG)"));
  cr_expect(strstr(f.items[0].site, "prog.c:21"));
  json_decref(w);
  vqc_findings_free(&f);
}

Test(p2p, typed_untyped_not_compared) {
  file(0, HEAD(0, "null")
          CHAN("send", "world", 1, 7, 2, 1, "00000000000000aa",
               AT("MPI_Send", "int32", "MPI_INT", 10)));
  file(1, HEAD(1, "null")
          CHAN("recv", "world", 0, 7, 2, 0, "00000000000000bb",
               AT("MPI_Recv", "int32", "MPI_INT", 20)));
  json_t *w;
  vqc_findings f = run(&w);
  cr_expect_eq(f.count, 0);
  json_decref(w);
  vqc_findings_free(&f);
}

Test(p2p, bad_file_is_a_warning) {
  file(0, "this is not json\n");
  file(1, HEAD(1, "null")
          CHAN("send", "world", 0, 4, 1, 0, "00000000000000aa",
               AT("MPI_Send", "int32", "MPI_INT", 48)));
  json_t *w;
  vqc_findings f = run(&w);
  cr_expect_eq(f.count, 0); /* rank 0 unread: nothing paired with it */
  cr_assert_eq(json_array_size(w), 1);
  cr_expect(strstr(json_string_value(json_array_get(w, 0)),
                   "rank 0's point-to-point messages were not checked"));
  cr_expect(strstr(unchecked, "rank 0's point-to-point messages were not "
                              "paired"), "%s", unchecked);
  json_decref(w);
  vqc_findings_free(&f);
}
