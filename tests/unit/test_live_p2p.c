/* test_live_p2p.c: a "p2p_wait" line of an MPI_THREAD_MULTIPLE rank
 * (libvqcheck_mpi.so at SIGUSR1, ledger_analysis.h "The live record"):
 * "threads" (how many of its threads are in a blocking point-to-point
 * call), the first's call with its own site, and "other_threads", read by
 * vqc_live_scan into vqc_live_info:
 *
 *   threads_and_their_calls   3 threads in calls: the first's call, peers
 *                             and site, the two others' likewise;
 *   one_thread_says_nothing   a line without "threads" (a rank with one
 *                             thread in MPI) leaves them 0;
 *   the_latest_line_wins      a later line without other threads clears
 *                             the earlier's. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ledger_analysis.h"
#include "test_paths.h"

static char dir[256];

static void setup(void) {
  cr_assert_not_null(vqc_test_temp_dir(dir, sizeof dir,
                                       "/tmp/vqc-live-p2p-XXXXXX"));
}

static void teardown(void) { vqc_test_remove_dir(dir); }

TestSuite(live_p2p, .init = setup, .fini = teardown, .timeout = 60);

static void live(const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/rank-0.live.jsonl", dir);
  FILE *f = fopen(path, "a");
  cr_assert_not_null(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

#define START "{\"event\":\"start\",\"rank\":0,\"size\":2,\"pid\":7,\"host\":" \
              "\"h\",\"mpi\":true}\n"
#define THREE                                                               \
  "{\"event\":\"p2p_wait\",\"call\":\"MPI_Recv\",\"communicator\":"         \
  "\"world\",\"from\":1,\"from_comm_rank\":1,\"recv_tag\":5,\"file\":"      \
  "\"/src/t.c\",\"line\":17,\"func\":\"receiver\",\"threads\":3,"           \
  "\"other_threads\":[{\"call\":\"MPI_Send\",\"communicator\":\"world\","   \
  "\"to\":1,\"to_comm_rank\":1,\"send_tag\":6,\"file\":\"/src/t.c\","       \
  "\"line\":31,\"func\":\"main\"},{\"call\":\"MPI_Recv\",\"from\":\"any\","  \
  "\"recv_tag\":\"any\",\"file\":\"/src/u.c\",\"line\":9,\"func\":\"w\"}],"  \
  "\"t_ns\":5}\n"

static vqc_live_info scan(void) {
  vqc_live_info info;
  cr_assert_eq(vqc_live_scan(dir, 0, &info), VQC_OK, "%s", vqc_last_error());
  return info;
}

Test(live_p2p, threads_and_their_calls) {
  live(START THREE);
  const vqc_live_info l = scan();
  cr_expect_str_eq(l.p2p_call, "MPI_Recv");
  cr_expect_eq(l.p2p_from, 1);
  cr_expect_eq(l.p2p_recv_tag, 5);
  cr_expect_str_eq(l.p2p_file, "/src/t.c");
  cr_expect_eq(l.p2p_line, 17);
  cr_expect_eq(l.p2p_threads, 3);
  cr_assert_eq(l.p2p_nother, 2);
  cr_expect_str_eq(l.p2p_other[0].call, "MPI_Send");
  cr_expect_eq(l.p2p_other[0].to, 1);
  cr_expect_eq(l.p2p_other[0].send_tag, 6);
  cr_expect_eq(l.p2p_other[0].line, 31);
  cr_expect_str_eq(l.p2p_other[1].call, "MPI_Recv");
  cr_expect_eq(l.p2p_other[1].from, VQC_P2P_ANY);
  cr_expect_eq(l.p2p_other[1].recv_tag, VQC_P2P_ANY);
  cr_expect_str_eq(l.p2p_other[1].file, "/src/u.c");
}

Test(live_p2p, one_thread_says_nothing) {
  live(START "{\"event\":\"p2p_wait\",\"call\":\"MPI_Recv\",\"from\":1,"
       "\"recv_tag\":5,\"file\":\"/src/t.c\",\"line\":17,\"func\":\"f\","
       "\"t_ns\":5}\n");
  const vqc_live_info l = scan();
  cr_expect_str_eq(l.p2p_call, "MPI_Recv");
  cr_expect_eq(l.p2p_threads, 0);
  cr_expect_eq(l.p2p_nother, 0);
}

Test(live_p2p, the_latest_line_wins) {
  live(START THREE "{\"event\":\"p2p_wait\",\"call\":null,\"threads\":0,"
       "\"t_ns\":9}\n");
  const vqc_live_info l = scan();
  cr_expect_str_eq(l.p2p_call, "");
  cr_expect_eq(l.p2p_nother, 0);
  cr_expect_eq(l.p2p_threads, 0);
}
