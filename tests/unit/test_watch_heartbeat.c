/* test_watch_heartbeat.c: `vqcheck watch`'s no-progress rule
 * (harness/run/watch_heartbeat.h) and the deadlock it reports
 * (harness/run/watch_job.c), fed heartbeat files, /proc texts and process
 * states made by hand:
 *
 *   decode_* / read_*   the 64-byte format, golden bytes from the Python
 *                       writer (struct.pack of _heartbeat._FORMAT); a file
 *                       absent, short, of garbage, a link, a FIFO or a
 *                       directory is no heartbeat, and never blocks;
 *   proc_*              /proc/<pid>/stat's state (a comm holding ") T "),
 *                       and real children stopped, zombie and gone;
 *   note_* / stalled_*  progress and its time (a foreign clock never makes
 *                       a rank hung early), the decision: the slow start,
 *                       a rank that never beat counted from the first beat,
 *                       finished and ended ranks never hung;
 *   culprits_*          stopped first, then the program's own code outside
 *                       a collective, then a rank that left cleanly, else
 *                       every hung rank;
 *   poll_*              the watcher on a run directory (--nproc and a
 *                       launcher's: a pid that is not ours is never taken);
 *   finding_*           the message and detail, exact, and the marker's
 *                       account kept when there is one;
 *   rundir_*            a reused run directory loses an earlier run's
 *                       heartbeats (they would read as ranks that beat
 *                       long ago). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rundir.h"
#include "test_paths.h"
#include "watch_heartbeat.h"
#include "watch_job.h"

static char dir[256];

static void setup(void) {
  cr_assert_not_null(vqc_test_temp_dir(dir, sizeof dir,
                                       "/tmp/vqc-heartbeat-XXXXXX"));
}

static void teardown(void) { vqc_test_remove_dir(dir); }

TestSuite(heartbeat, .init = setup, .fini = teardown, .timeout = 60);

/* struct.pack("<4sIII QQQQ 16s", b"VQHB", 1, 4242, 1, 7, 123456789012345,
 * 9, 3, b"all_reduce"): what python/vqcheck/_heartbeat.py writes. */
static const unsigned char golden[VQC_HB_SIZE] = {
    0x56, 0x51, 0x48, 0x42, 0x01, 0x00, 0x00, 0x00, 0x92, 0x10, 0x00,
    0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x79, 0xdf, 0x0d, 0x86, 0x48, 0x70, 0x00, 0x00, 0x09,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x61, 0x6c, 0x6c, 0x5f, 0x72, 0x65, 0x64,
    0x75, 0x63, 0x65, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

static void put32(unsigned char *b, uint32_t v) {
  for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *b, uint64_t v) {
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

/* A heartbeat's bytes, as the bridge writes them. */
static void beat_bytes(unsigned char *b, uint32_t pid, uint32_t state,
                       uint64_t beats, uint64_t last_ns, uint64_t seq,
                       uint64_t step, const char *op) {
  memset(b, 0, VQC_HB_SIZE);
  memcpy(b, "VQHB", 4);
  put32(b + 4, 1);
  put32(b + 8, pid);
  put32(b + 12, state);
  put64(b + 16, beats);
  put64(b + 24, last_ns);
  put64(b + 32, seq);
  put64(b + 40, step);
  memcpy(b + 48, op, strlen(op) < 16 ? strlen(op) : 16);
}

static void path_of(const char *name, char *buf, size_t n) {
  snprintf(buf, n, "%s/%s", dir, name);
}

static void write_bytes(const char *name, const void *b, size_t n) {
  char path[512];
  path_of(name, path, sizeof path);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "cannot write %s", path);
  cr_assert_eq(fwrite(b, 1, n, f), n);
  fclose(f);
}

static void write_text(const char *name, const char *text) {
  write_bytes(name, text, strlen(text));
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- the format */

Test(heartbeat, decode_golden_bytes_of_the_python_writer) {
  vqc_heartbeat hb;
  cr_assert(vqc_heartbeat_decode(golden, sizeof golden, &hb));
  cr_expect_eq(hb.version, 1);
  cr_expect_eq(hb.pid, 4242);
  cr_expect_eq(hb.state, VQC_HB_IN_COLLECTIVE);
  cr_expect_eq(hb.beats, 7);
  cr_expect_eq(hb.last_ns, 123456789012345ULL);
  cr_expect_eq(hb.seq, 9);
  cr_expect_eq(hb.step, 3);
  cr_expect_str_eq(hb.op, "all_reduce");
}

Test(heartbeat, decode_refuses_what_is_not_one) {
  unsigned char b[VQC_HB_SIZE];
  vqc_heartbeat hb = {.pid = 77};
  cr_expect_not(vqc_heartbeat_decode(golden, VQC_HB_SIZE - 1, &hb), "short");
  cr_expect_not(vqc_heartbeat_decode(NULL, 0, &hb));
  memcpy(b, golden, sizeof b);
  b[0] = 'X';
  cr_expect_not(vqc_heartbeat_decode(b, sizeof b, &hb), "magic");
  memcpy(b, golden, sizeof b);
  put32(b + 4, 2);
  cr_expect_not(vqc_heartbeat_decode(b, sizeof b, &hb), "version 2");
  memcpy(b, golden, sizeof b);
  put32(b + 12, 4);
  cr_expect_not(vqc_heartbeat_decode(b, sizeof b, &hb), "state 4");
  cr_expect_eq(hb.pid, 77, "a refused read leaves *hb as it was");
}

Test(heartbeat, decode_op_of_16_bytes_and_unprintable_bytes) {
  unsigned char b[VQC_HB_SIZE];
  beat_bytes(b, 1, 1, 1, 1, 1, 1, "reduce_scatter_t");
  vqc_heartbeat hb;
  cr_assert(vqc_heartbeat_decode(b, sizeof b, &hb));
  cr_expect_str_eq(hb.op, "reduce_scatter_t", "16 bytes, no NUL: all kept");
  b[48] = 0xff;
  b[49] = '\n';
  cr_assert(vqc_heartbeat_decode(b, sizeof b, &hb));
  cr_expect_str_eq(hb.op, "??duce_scatter_t");
}

Test(heartbeat, read_a_file_and_a_longer_one) {
  write_bytes("rank-0.heartbeat", golden, sizeof golden);
  char path[512];
  path_of("rank-0.heartbeat", path, sizeof path);
  vqc_heartbeat hb;
  cr_assert(vqc_heartbeat_read(path, &hb));
  cr_expect_eq(hb.pid, 4242);
  unsigned char longer[100];
  memcpy(longer, golden, sizeof golden);
  memset(longer + 64, 'x', 36);
  write_bytes("rank-0.heartbeat", longer, sizeof longer);
  cr_expect(vqc_heartbeat_read(path, &hb), "its first 64 bytes count");
}

Test(heartbeat, read_nothing_short_garbage_link_fifo_directory) {
  char path[512];
  vqc_heartbeat hb;
  path_of("rank-0.heartbeat", path, sizeof path);
  cr_expect_not(vqc_heartbeat_read(path, &hb), "absent");
  write_bytes("rank-0.heartbeat", golden, 63);
  cr_expect_not(vqc_heartbeat_read(path, &hb), "short");
  write_bytes("rank-0.heartbeat", "", 0);
  cr_expect_not(vqc_heartbeat_read(path, &hb), "empty");
  unsigned char junk[64];
  for (int i = 0; i < 64; i++) junk[i] = (unsigned char)(i * 37 + 11);
  write_bytes("rank-0.heartbeat", junk, sizeof junk);
  cr_expect_not(vqc_heartbeat_read(path, &hb), "garbage");
  /* A link to a good heartbeat is not followed. */
  write_bytes("good", golden, sizeof golden);
  char good[512], link[512];
  path_of("good", good, sizeof good);
  path_of("rank-1.heartbeat", link, sizeof link);
  cr_assert_eq(symlink(good, link), 0);
  cr_expect_not(vqc_heartbeat_read(link, &hb), "a link");
  /* A FIFO nobody writes: no block, no heartbeat. */
  path_of("rank-2.heartbeat", path, sizeof path);
  cr_assert_eq(mkfifo(path, 0600), 0);
  cr_expect_not(vqc_heartbeat_read(path, &hb), "a FIFO");
  path_of("rank-3.heartbeat", path, sizeof path);
  cr_assert_eq(mkdir(path, 0700), 0);
  cr_expect_not(vqc_heartbeat_read(path, &hb), "a directory");
}

/* ---- process states */

Test(heartbeat, proc_stat_texts) {
  char c;
  pid_t pp;
  cr_expect_eq(vqc_proc_state_parse("123 (python) S 1 123 0", &c, &pp),
               VQC_PROC_RUNNING);
  cr_expect_eq(c, 'S');
  cr_expect_eq(pp, 1);
  /* A comm may hold ") T ": the last ')' ends it. */
  cr_expect_eq(vqc_proc_state_parse("9 (a) T (b) R 42 9", &c, &pp),
               VQC_PROC_RUNNING);
  cr_expect_eq(pp, 42);
  cr_expect_eq(vqc_proc_state_parse("9 (x) T 2", &c, NULL),
               VQC_PROC_STOPPED);
  cr_expect_eq(c, 'T');
  cr_expect_eq(vqc_proc_state_parse("9 (x) t 2", NULL, NULL),
               VQC_PROC_STOPPED, "tracing stop: a debugger");
  cr_expect_eq(vqc_proc_state_parse("9 (x) Z 2", NULL, NULL),
               VQC_PROC_ZOMBIE);
  cr_expect_eq(vqc_proc_state_parse("9 (x) X 2", NULL, NULL), VQC_PROC_GONE);
  cr_expect_eq(vqc_proc_state_parse("9 (x) D 2", NULL, NULL),
               VQC_PROC_RUNNING);
  cr_expect_eq(vqc_proc_state_parse("", &c, &pp), VQC_PROC_UNKNOWN);
  cr_expect_eq(c, '\0');
  cr_expect_eq(vqc_proc_state_parse("9 (x)", NULL, NULL), VQC_PROC_UNKNOWN);
  cr_expect_eq(vqc_proc_state_parse("9 (x) ? 1", NULL, NULL),
               VQC_PROC_UNKNOWN);
  cr_expect_eq(vqc_proc_state_parse(NULL, NULL, NULL), VQC_PROC_UNKNOWN);
}

/* A child that sleeps until killed. */
static pid_t sleeper(void) {
  const pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    for (;;) pause();
  }
  return pid;
}

Test(heartbeat, proc_real_children_stopped_zombie_gone) {
  char c;
  pid_t pp;
  cr_expect_eq(vqc_proc_state_of(getpid(), &c, &pp), VQC_PROC_RUNNING);
  cr_expect_eq(pp, getppid());
  cr_expect_eq(vqc_proc_state_of(0, NULL, NULL), VQC_PROC_UNKNOWN);

  const pid_t a = sleeper();
  cr_expect(vqc_proc_is_descendant(a));
  cr_expect_not(vqc_proc_is_descendant(getppid()));
  cr_expect_not(vqc_proc_is_descendant(1));
  kill(a, SIGSTOP);
  int st;
  cr_assert_eq(waitpid(a, &st, WUNTRACED), a);
  cr_assert(WIFSTOPPED(st));
  cr_expect_eq(vqc_proc_state_of(a, &c, NULL), VQC_PROC_STOPPED);
  cr_expect_eq(c, 'T');
  kill(a, SIGKILL); /* works on a stopped process */
  /* Until reaped, a zombie. */
  for (int i = 0; i < 200 && vqc_proc_state_of(a, NULL, NULL) !=
                                 VQC_PROC_ZOMBIE; i++)
    usleep(10000);
  cr_expect_eq(vqc_proc_state_of(a, NULL, NULL), VQC_PROC_ZOMBIE);
  cr_assert_eq(waitpid(a, &st, 0), a);
  cr_expect_eq(vqc_proc_state_of(a, NULL, NULL), VQC_PROC_GONE);
  cr_expect_not(vqc_proc_is_descendant(a));
}

/* ---- the rule */

static vqc_heartbeat hb_of(uint32_t pid, uint32_t state, uint64_t beats,
                           uint64_t last_ns) {
  vqc_heartbeat h;
  memset(&h, 0, sizeof h);
  h.version = 1;
  h.pid = pid;
  h.state = state;
  h.beats = beats;
  h.last_ns = last_ns;
  return h;
}

Test(heartbeat, note_progress_and_its_time) {
  vqc_hb_rank r;
  memset(&r, 0, sizeof r);
  /* This machine's clock, seen in time: the beat's own time. */
  vqc_heartbeat h = hb_of(5, 0, 1, 99500000000ULL); /* 99.5 s */
  vqc_hb_note(&r, &h, 100.0);
  cr_expect(r.beaten);
  cr_expect_float_eq(r.since, 99.5, 1e-9);
  /* Nothing new: no progress, however late the look. */
  vqc_hb_note(&r, &h, 130.0);
  cr_expect_float_eq(r.since, 99.5, 1e-9);
  /* A new beat whose clock is not ours (another machine): when seen. */
  h = hb_of(5, 1, 2, 5000000000000ULL);
  vqc_hb_note(&r, &h, 131.0);
  cr_expect_float_eq(r.since, 131.0, 1e-9);
  cr_expect_eq(r.hb.state, 1);
  /* Seen late (a beat of 3 s ago): when seen, never earlier. */
  h = hb_of(5, 0, 3, 137000000000ULL);
  vqc_hb_note(&r, &h, 140.0);
  cr_expect_float_eq(r.since, 140.0, 1e-9);
  /* Another process of the rank (a restart), same count: progress. */
  h = hb_of(6, 0, 3, 137000000000ULL);
  vqc_hb_note(&r, &h, 150.0);
  cr_expect_float_eq(r.since, 150.0, 1e-9);
}

static vqc_hb_rank ranks[8];

static void rank_at(int i, bool beaten, double since, uint32_t state) {
  memset(&ranks[i], 0, sizeof ranks[i]);
  ranks[i].rank = i;
  ranks[i].beaten = beaten;
  ranks[i].since = since;
  ranks[i].hb.state = state;
  ranks[i].exit_code = -1;
  ranks[i].proc = VQC_PROC_RUNNING;
}

Test(heartbeat, stalled_slow_start_is_not_a_hang) {
  rank_at(0, false, 0, 0);
  rank_at(1, false, 0, 0);
  double idle = -1;
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 1000.0, 5.0, 0.0, &idle), -1,
               "nobody beat yet: however long, no hang");
  cr_expect_float_eq(idle, 0.0, 0);
}

Test(heartbeat, stalled_rank_without_beat_counts_from_the_first_beat) {
  rank_at(0, true, 103.0, VQC_HB_RUNNING);
  rank_at(1, false, 0, 0);
  /* Rank 0 beat at 100 (first_beat), then at 103; rank 1 never. */
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 104.9, 5.0, 100.0, NULL), -1);
  double idle;
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 105.0, 5.0, 100.0, &idle), 1,
               "exactly the timeout counts");
  cr_expect_float_eq(idle, 5.0, 1e-9);
  cr_expect(ranks[1].stalled);
  cr_expect_not(ranks[0].stalled);
  cr_expect_float_eq(ranks[0].idle_s, 2.0, 1e-9);
}

/* ---- setting up: init_process_group's rendezvous and what follows it
 * before the first collective or step end (state 3) */

static void setting_up(int i, double since, uint32_t state, const char *op) {
  rank_at(i, true, since, state);
  snprintf(ranks[i].hb.op, sizeof ranks[i].hb.op, "%s", op);
}

Test(heartbeat, setup_waits_on_the_job_not_on_itself) {
  /* Rank 0 waits in the rendezvous since 100; rank 1 set up at 100 and
   * is busy (its process used CPU at 109: importing, building its
   * model): nobody is hung at 110 with a timeout of 5. */
  setting_up(0, 100.0, VQC_HB_IN_COLLECTIVE, "rendezvous");
  setting_up(1, 100.0, VQC_HB_SETUP, "");
  vqc_hb_note_cpu(&ranks[1], 10.0, 108.0);
  vqc_hb_note_cpu(&ranks[1], 10.9, 109.0); /* 0.9 of a core */
  cr_expect_float_eq(ranks[1].busy_at, 109.0, 1e-9);
  cr_expect_float_eq(ranks[1].since, 109.0, 1e-9);
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 110.0, 5.0, 100.0, NULL), -1);
  cr_expect_not(ranks[0].stalled, "the rendezvous waits for a busy rank");
  /* Both idle from then on: both hung 5 s after the last busy second. */
  vqc_hb_note_cpu(&ranks[1], 10.91, 111.0); /* 0.005 of a core: idle */
  cr_expect_float_eq(ranks[1].busy_at, 109.0, 1e-9);
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 113.9, 5.0, 100.0, NULL), -1);
  cr_expect_neq(vqc_hb_stalled(ranks, 2, 114.0, 5.0, 100.0, NULL), -1);
  cr_expect(ranks[0].stalled && ranks[1].stalled);
}

Test(heartbeat, mpi_init_is_setting_up) {
  /* An MPI rank waits in MPI_Init (the interposer's heartbeat: state 1,
   * op "MPI_Init") since 100 for a rank that is still busy starting (its
   * own heartbeat from the interposer's load, state 3): not hung while
   * that rank is busy; both hung once nobody made progress for 5 s. A
   * rank in a real collective stays hung by its own clock. */
  setting_up(0, 100.0, VQC_HB_IN_COLLECTIVE, "MPI_Init");
  setting_up(1, 100.0, VQC_HB_SETUP, "");
  cr_expect(vqc_hb_setting_up(&ranks[0]));
  setting_up(2, 100.0, VQC_HB_IN_COLLECTIVE, "MPI_Init_thread");
  cr_expect(vqc_hb_setting_up(&ranks[2]));
  setting_up(2, 100.0, VQC_HB_IN_COLLECTIVE, "all_reduce");
  cr_expect_not(vqc_hb_setting_up(&ranks[2]));
  vqc_hb_note_cpu(&ranks[1], 10.0, 107.0);
  vqc_hb_note_cpu(&ranks[1], 10.9, 108.0); /* 0.9 of a core */
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 110.0, 5.0, 100.0, NULL), -1);
  cr_expect_not(ranks[0].stalled, "MPI_Init waits for a busy rank");
  cr_expect_neq(vqc_hb_stalled(ranks, 2, 113.0, 5.0, 100.0, NULL), -1);
  cr_expect(ranks[0].stalled && ranks[1].stalled);
}

Test(heartbeat, a_wait_that_polls_is_no_progress) {
  /* Open MPI's MPI_Init polls while it waits for a peer (15% of a core
   * here): rank 0 in MPI_Init since 100, busy by its CPU, and rank 1 idle
   * before MPI_Init (a missing input file): both hung at 105, as in
   * tests/mpi_programs/init_wait.c. Its CPU had kept the job "busy"
   * forever, and vqcheck watch hung with it. The same for a rendezvous. */
  for (int pass = 0; pass < 2; pass++) {
    setting_up(0, 100.0, VQC_HB_IN_COLLECTIVE,
               pass ? "rendezvous" : "MPI_Init");
    setting_up(1, 100.0, VQC_HB_SETUP, "");
    ranks[0].cpu_at = 0.0;
    vqc_hb_note_cpu(&ranks[0], 1.0, 101.0);
    for (int t = 102; t <= 106; t++)
      vqc_hb_note_cpu(&ranks[0], 1.0 + 0.15 * (t - 101), (double)t);
    cr_expect_float_eq(ranks[0].since, 100.0, 1e-9, "pass %d", pass);
    cr_expect_neq(vqc_hb_stalled(ranks, 2, 106.0, 5.0, 100.0, NULL), -1);
    cr_expect(ranks[0].stalled && ranks[1].stalled, "pass %d", pass);
  }
}

Test(heartbeat, a_process_stuck_on_its_way_out) {
  /* Rank 0 ended; rank 1 wrote its end line at 100 (finished) and its
   * process (ours: pid known) is still there: hung at 105, not before. */
  rank_at(0, true, 90.0, VQC_HB_FINISHED);
  ranks[0].ended = true;
  rank_at(1, true, 100.0, VQC_HB_FINISHED);
  ranks[1].pid = 4711;
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 104.9, 5.0, 50.0, NULL), -1);
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 105.0, 5.0, 50.0, NULL), 1);
  cr_expect(ranks[1].stalled && !ranks[0].stalled);
  /* Busy tearing down (a tenth of a core at 103): counted from there. */
  ranks[1].busy_at = 103.0;
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 107.9, 5.0, 50.0, NULL), -1);
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 108.0, 5.0, 50.0, NULL), 1);
  ranks[1].busy_at = 0.0;
  /* Another rank still training: a rank done early waits for nobody. */
  rank_at(0, true, 104.0, VQC_HB_RUNNING);
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 106.0, 5.0, 50.0, NULL), -1);
  cr_expect_not(ranks[1].stalled);
  /* A process not seen (another machine's rank): never told hung. */
  rank_at(0, true, 90.0, VQC_HB_FINISHED);
  ranks[0].ended = true;
  ranks[1].pid = 0;
  cr_expect_eq(vqc_hb_stalled(ranks, 2, 200.0, 5.0, 50.0, NULL), -1);
}

Test(heartbeat, cpu_samples_a_second_apart_and_a_tenth_of_a_core) {
  rank_at(0, true, 100.0, VQC_HB_SETUP);
  vqc_hb_note_cpu(&ranks[0], -1.0, 100.0); /* unknown: nothing */
  cr_expect_float_eq(ranks[0].cpu_at, 0.0, 0);
  vqc_hb_note_cpu(&ranks[0], 5.0, 100.0);
  vqc_hb_note_cpu(&ranks[0], 5.5, 100.5); /* half a second: no sample */
  cr_expect_float_eq(ranks[0].busy_at, 0.0, 0);
  vqc_hb_note_cpu(&ranks[0], 5.09, 101.0); /* 0.09 of a core */
  cr_expect_float_eq(ranks[0].busy_at, 0.0, 0);
  vqc_hb_note_cpu(&ranks[0], 5.2, 102.0); /* 0.11 */
  cr_expect_float_eq(ranks[0].busy_at, 102.0, 1e-9);
  /* Past its setup, CPU is no progress: a rank looping in Python is hung
   * (its clock is its own heartbeat's). */
  rank_at(1, true, 100.0, VQC_HB_RUNNING);
  vqc_hb_note_cpu(&ranks[1], 1.0, 104.0);
  vqc_hb_note_cpu(&ranks[1], 3.0, 106.0);
  cr_expect_float_eq(ranks[1].since, 100.0, 1e-9);
}

Test(heartbeat, setup_rank_idle_is_hung_like_any_other) {
  /* A data loader stuck on rank 1 (set up at 100, idle since) while rank 0
   * waits in DDP's first gradient all_reduce, issued from C++ (no sign:
   * still set up at 100): both hung at 105; an unbeaten rank 2 that is busy
   * keeps its own clock and is not. */
  setting_up(0, 100.0, VQC_HB_SETUP, "");
  setting_up(1, 100.0, VQC_HB_SETUP, "");
  rank_at(2, false, 0, 0);
  ranks[2].busy_at = 104.5;
  cr_expect_eq(vqc_hb_stalled(ranks, 3, 104.9, 5.0, 100.0, NULL), -1);
  cr_expect_neq(vqc_hb_stalled(ranks, 3, 109.6, 5.0, 100.0, NULL), -1);
  cr_expect(ranks[0].stalled && ranks[1].stalled);
  cr_expect(ranks[2].stalled, "idle since 104.5");
  ranks[2].busy_at = 109.5; /* busy: the set-up ranks wait for it */
  cr_expect_eq(vqc_hb_stalled(ranks, 3, 109.6, 5.0, 100.0, NULL), -1);
}

Test(heartbeat, proc_cpu_parse_reads_utime_and_stime) {
  const double hz = (double)sysconf(_SC_CLK_TCK);
  cr_expect_float_eq(vqc_proc_cpu_parse("42 (py thon) S 1 42 42 0 -1 4194560 "
                                        "100 0 0 0 250 50 0 0 20 0 3"),
                     300.0 / hz, 1e-9);
  cr_expect_lt(vqc_proc_cpu_parse("42 (x) S 1 2 3"), 0.0, "short");
  cr_expect_lt(vqc_proc_cpu_parse("no paren"), 0.0);
  cr_expect_lt(vqc_proc_cpu_parse(NULL), 0.0);
}

Test(heartbeat, stalled_the_longest_and_not_ended_or_finished) {
  rank_at(0, true, 90.0, VQC_HB_FINISHED);   /* done long ago */
  rank_at(1, true, 91.0, VQC_HB_RUNNING);
  ranks[1].ended = true;                    /* its process ended */
  rank_at(2, true, 94.0, VQC_HB_IN_COLLECTIVE);
  rank_at(3, true, 93.5, VQC_HB_RUNNING);
  ranks[3].proc = VQC_PROC_STOPPED;          /* stopped ranks count too */
  rank_at(4, true, 99.0, VQC_HB_RUNNING);
  double idle;
  cr_expect_eq(vqc_hb_stalled(ranks, 5, 100.0, 5.0, 80.0, &idle), 3);
  cr_expect_float_eq(idle, 6.5, 1e-9);
  cr_expect_not(ranks[0].stalled);
  cr_expect_not(ranks[1].stalled);
  cr_expect(ranks[2].stalled && ranks[3].stalled);
  cr_expect_not(ranks[4].stalled);
  cr_expect_float_eq(ranks[2].idle_s, 6.0, 1e-9);
  cr_expect_float_eq(ranks[0].idle_s, 0.0, 0);
  /* A rank slower than the timeout between two signs is hung: no
   * allowance past it. */
  rank_at(0, true, 100.0 - 5.0 - 1e-6, VQC_HB_RUNNING);
  cr_expect_eq(vqc_hb_stalled(ranks, 1, 100.0, 5.0, 80.0, NULL), 0);
}

/* ---- the culprits */

static vqc_hb_place pl[4];

static void place(int i, bool stalled, bool stopped, bool coll, bool user,
                  bool ended_ok) {
  pl[i] = (vqc_hb_place){.rank = i, .stalled = stalled, .stopped = stopped,
                         .in_collective = coll, .user_code = user,
                         .ended_ok = ended_ok};
}

Test(heartbeat, culprits_stopped_first) {
  place(0, true, false, false, true, false); /* the program's code */
  place(1, true, true, false, false, false); /* stopped */
  place(2, false, false, false, false, true); /* left cleanly */
  cr_expect_eq(vqc_hb_culprits(pl, 3), 1);
  cr_expect(pl[1].culprit);
  cr_expect_not(pl[0].culprit || pl[2].culprit);
}

Test(heartbeat, culprits_program_code_outside_a_collective) {
  place(0, true, false, true, false, false);  /* in a collective */
  place(1, true, false, false, true, false);  /* its own loop */
  place(2, true, false, true, true, false);   /* in one, program frames */
  place(3, false, false, false, false, true); /* left cleanly */
  cr_expect_eq(vqc_hb_culprits(pl, 4), 1);
  cr_expect(pl[1].culprit);
  cr_expect_not(pl[0].culprit || pl[2].culprit || pl[3].culprit);
}

Test(heartbeat, culprits_a_rank_that_left_while_others_wait) {
  place(0, true, false, true, false, false);  /* waits */
  place(1, false, false, false, false, true); /* exited 0 */
  place(2, true, false, false, false, false); /* inside torch */
  cr_expect_eq(vqc_hb_culprits(pl, 3), 1);
  cr_expect(pl[1].culprit);
}

Test(heartbeat, culprits_else_every_hung_rank) {
  place(0, true, false, true, false, false);
  place(1, true, false, false, false, false);
  place(2, false, false, false, false, false); /* still moving */
  cr_expect_eq(vqc_hb_culprits(pl, 3), 2);
  cr_expect(pl[0].culprit && pl[1].culprit);
  cr_expect_not(pl[2].culprit);
}

/* ---- the watcher on a run directory */

static void heartbeat_file(int rank, uint32_t pid, uint32_t state,
                           uint64_t beats, uint64_t last_ns) {
  unsigned char b[VQC_HB_SIZE];
  beat_bytes(b, pid, state, beats, last_ns, 4, 2, "");
  char name[64];
  snprintf(name, sizeof name, "rank-%d.heartbeat", rank);
  write_bytes(name, b, sizeof b);
}

Test(heartbeat, poll_nproc_states_and_ended_ranks) {
  const pid_t a = sleeper();
  kill(a, SIGSTOP);
  int st;
  cr_assert_eq(waitpid(a, &st, WUNTRACED), a);
  vqc_watch_proc procs[3];
  memset(procs, 0, sizeof procs);
  procs[0] = (vqc_watch_proc){.pid = a, .rank = 0, .err_fd = -1};
  procs[1] = (vqc_watch_proc){.pid = 999999, .rank = 1, .err_fd = -1,
                              .exited = true, .status = 3 << 8};
  procs[2] = (vqc_watch_proc){.pid = getpid(), .rank = 2, .err_fd = -1};
  const double now = (double)now_ns() * 1e-9;
  heartbeat_file(0, (uint32_t)a, VQC_HB_RUNNING, 5, now_ns());
  heartbeat_file(1, 999999, VQC_HB_IN_COLLECTIVE, 9, now_ns());
  write_text("rank-2.heartbeat", "not a heartbeat");
  vqc_hb_watch w;
  cr_assert(vqc_hb_watch_init(&w, dir, 3));
  vqc_hb_watch_poll(&w, procs, 3, now);
  cr_assert_eq(w.n, 3);
  cr_expect_float_eq(w.first_beat, now, 1e-9);
  cr_expect(w.ranks[0].beaten);
  cr_expect_eq(w.ranks[0].pid, a);
  cr_expect_eq(w.ranks[0].proc, VQC_PROC_STOPPED);
  cr_expect_eq(w.ranks[0].letter, 'T');
  cr_expect(w.ranks[1].ended);
  cr_expect_eq(w.ranks[1].exit_code, 3);
  cr_expect_not(w.ranks[2].beaten, "garbage is no heartbeat");
  cr_expect_eq(w.ranks[2].proc, VQC_PROC_RUNNING);
  /* Five seconds on: rank 0 (stopped) and rank 2 (never beat) are hung,
   * rank 1 ended. */
  double idle;
  const int hr = vqc_hb_stalled(w.ranks, w.n, now + 5.5, 5.0, w.first_beat,
                                &idle);
  cr_expect(hr == 0 || hr == 2, "%d", hr);
  cr_expect(w.ranks[0].stalled && w.ranks[2].stalled);
  cr_expect_not(w.ranks[1].stalled);
  vqc_hb_watch_free(&w);
  vqc_hb_watch_free(&w); /* twice is fine */
  kill(a, SIGKILL);
  waitpid(a, &st, 0);
}

Test(heartbeat, poll_launcher_takes_only_our_own_pids) {
  const pid_t a = sleeper();
  heartbeat_file(1, (uint32_t)a, VQC_HB_RUNNING, 2, now_ns());
  heartbeat_file(3, 1, VQC_HB_RUNNING, 2, now_ns()); /* init: not ours */
  write_text("rank-2.live.jsonl",
             "{\"event\":\"start\",\"rank\":2,\"size\":6,\"pid\":1,"
             "\"host\":\"elsewhere\"}\n");
  heartbeat_file(2, 1, VQC_HB_RUNNING, 2, now_ns());
  vqc_hb_watch w;
  cr_assert(vqc_hb_watch_init(&w, dir, 0));
  vqc_hb_watch_poll(&w, NULL, 0, (double)now_ns() * 1e-9);
  cr_expect_eq(w.n, 6, "ranks up to the live record's size");
  cr_expect_eq(w.size, 6);
  cr_expect_eq(w.ranks[1].pid, a);
  cr_expect_eq(w.ranks[1].proc, VQC_PROC_RUNNING);
  cr_expect_eq(w.ranks[3].pid, 0, "a pid that is not ours is never taken");
  cr_expect_eq(w.ranks[3].proc, VQC_PROC_UNKNOWN);
  cr_expect_not(w.ranks[3].ended);
  cr_expect(w.ranks[2].host_known);
  cr_expect_not(w.ranks[2].local);
  cr_expect_eq(w.ranks[2].proc, VQC_PROC_UNKNOWN, "another machine's");
  cr_expect_not(w.ranks[0].beaten);
  vqc_hb_watch_free(&w);
  int st;
  kill(a, SIGKILL);
  waitpid(a, &st, 0);
}

/* ---- the finding */

static const char rule[] =
    " A rank slower than --timeout between two signs of progress (a "
    "collective entered or left, a step end) counts as a hang.";

static char *argv_job[] = {"python", "train.py", NULL};
static vqc_watch_opts opts = {.nproc = 2, .interval = 1, .timeout = 5,
                              .cmd_argc = 2, .cmd_argv = argv_job};
static vqc_watch_proc procs2[64];
static vqc_findings known, more;

/* faulthandler's dump of a rank in torch's backward, called at
 * train.py:15, a helper thread beside it. */
static const char in_backward[] =
    "Thread 0x00007f0000000002 (most recent call first):\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
    "\n"
    "Current thread 0x00007f0000000001 (most recent call first):\n"
    "  File \"/env/torch/autograd/graph.py\", line 829 in "
    "_engine_run_backward\n"
    "  File \"/env/torch/_tensor.py\", line 623 in backward\n"
    "  File \"/job/train.py\", line 15 in main\n"
    "  File \"/job/train.py\", line 20 in <module>\n";

static const char in_loop[] =
    "Current thread 0x00007f0000000001 (most recent call first):\n"
    "  File \"/job/eval.py\", line 9 in evaluate\n"
    "  File \"/job/train.py\", line 18 in main\n"
    "  File \"/job/train.py\", line 20 in <module>\n";

static void stacks(int rank, const char *text) {
  char name[64];
  snprintf(name, sizeof name, "rank-%d.stacks.txt", rank);
  write_text(name, text);
}

static void hb_rank(int i, uint32_t state, uint64_t step, double idle) {
  memset(&ranks[i], 0, sizeof ranks[i]);
  ranks[i].rank = i;
  ranks[i].beaten = true;
  ranks[i].hb = hb_of(4000 + (uint32_t)i, state, 3, 0);
  ranks[i].hb.step = step;
  ranks[i].hb.seq = 7;
  ranks[i].pid = 4000 + i;
  ranks[i].proc = VQC_PROC_RUNNING;
  ranks[i].letter = 'S';
  ranks[i].exit_code = -1;
  ranks[i].stalled = idle >= 5.0;
  ranks[i].idle_s = idle;
}

static void live_procs(int n) {
  for (int i = 0; i < n; i++) {
    memset(&procs2[i], 0, sizeof procs2[i]);
    procs2[i].pid = 4000 + i;
    procs2[i].rank = i;
    procs2[i].err_fd = -1;
    procs2[i].stopped = true; /* vqcheck stopped them */
    procs2[i].at_hang = VQC_WATCH_AT_HANG_ASKED;
  }
}

/* The command's findings with ranks[0..n) as the heartbeat snapshot. */
static void findings(int n, bool with_hb) {
  vqc_findings_init(&more);
  vqc_watch_ctx ctx = {.dir = dir, .o = &opts, .procs = procs2,
                       .nprocs = n, .hb = with_hb ? ranks : NULL,
                       .hb_n = with_hb ? n : 0};
  vqc_watch_more_findings(&ctx, &known, &more);
}

static void done_all(void) {
  vqc_findings_free(&known);
  vqc_findings_free(&more);
}

Test(heartbeat, finding_stopped_rank_and_one_in_torch) {
  vqc_findings_init(&known);
  live_procs(2);
  hb_rank(0, VQC_HB_RUNNING, 12, 5.2);
  hb_rank(1, VQC_HB_RUNNING, 12, 5.3);
  ranks[1].proc = VQC_PROC_STOPPED;
  ranks[1].letter = 'T';
  stacks(0, in_backward);
  findings(2, true);
  cr_assert_eq(more.count, 1);
  const vqc_finding *x = &more.items[0];
  cr_expect_eq(x->kind, VQC_FINDING_DEADLOCK);
  cr_expect_str_eq(
      x->message,
      "no progress for 5 s (the --timeout): rank 1 is stopped (process "
      "state T: a stop signal such as SIGSTOP); rank 0 is in torch's "
      "backward (_tensor.py:623), called at train.py:15 (main) (no progress "
      "for 5.2 s). A rank slower than --timeout between two signs of "
      "progress (a collective entered or left, a step end) counts as a "
      "hang.");
  cr_expect_eq(x->nranks, 1);
  cr_expect_eq(x->ranks[0], 1);
  cr_expect_eq(x->step, 12);
  cr_expect_str_eq(x->site, "/job/train.py:15 main",
                   "the stopped rank has no stack: a hung rank's site");
  const json_t *places = json_object_get(x->detail, "places");
  cr_assert_eq(json_array_size(places), 2);
  const json_t *p0 = json_array_get(places, 0), *p1 = json_array_get(places, 1);
  cr_expect_str_eq(json_string_value(json_object_get(p0, "place")), "torch");
  cr_expect_str_eq(json_string_value(json_object_get(p0, "entry")),
                   "/env/torch/_tensor.py:623 backward");
  cr_expect_str_eq(json_string_value(json_object_get(p0, "top")),
                   "/env/torch/autograd/graph.py:829 _engine_run_backward");
  cr_expect_str_eq(json_string_value(json_object_get(p1, "place")),
                   "stopped");
  cr_expect_str_eq(json_string_value(json_object_get(p1, "process_state")),
                   "T");
  cr_expect(json_is_true(json_object_get(p1, "culprit")));
  cr_expect_eq(json_integer_value(json_array_get(
                   json_object_get(x->detail, "culprits"), 0)), 1);
  cr_expect_eq(json_array_size(json_object_get(x->detail, "stacks")), 1);
  done_all();
}

Test(heartbeat, finding_program_loop_and_a_rank_that_exited) {
  vqc_findings_init(&known);
  live_procs(2);
  hb_rank(0, VQC_HB_RUNNING, 0, 6.25);
  hb_rank(1, VQC_HB_FINISHED, 0, 0.0);
  ranks[1].ended = true;
  ranks[1].exit_code = 0;
  procs2[1].at_hang = VQC_WATCH_AT_HANG_ENDED;
  stacks(0, in_loop);
  findings(2, true);
  cr_assert_eq(more.count, 1);
  cr_expect_str_eq(more.items[0].message,
                   "no progress for 5 s (the --timeout): rank 0 is at "
                   "eval.py:9 (evaluate), outside any collective (no "
                   "progress for 6.2 s); rank 1 had exited with status 0 "
                   "(finished). A rank slower than --timeout between two "
                   "signs of progress (a collective entered or left, a step "
                   "end) counts as a hang.");
  cr_expect_eq(more.items[0].ranks[0], 0);
  cr_expect_str_eq(more.items[0].site, "/job/eval.py:9 evaluate");
  done_all();
}

Test(heartbeat, finding_in_a_collective_and_a_rank_that_left) {
  vqc_findings_init(&known);
  live_procs(3);
  opts.nproc = 3;
  hb_rank(0, VQC_HB_IN_COLLECTIVE, 4, 7.0);
  memcpy(ranks[0].hb.op, "all_reduce", 11);
  hb_rank(1, VQC_HB_RUNNING, 4, 7.0);
  hb_rank(2, VQC_HB_FINISHED, 3, 0.0);
  ranks[2].ended = true;
  ranks[2].exit_code = 0;
  stacks(0, in_backward); /* its where: train.py:15 */
  /* Rank 1 did not answer: no stack. */
  findings(3, true);
  opts.nproc = 2;
  cr_assert_eq(more.count, 1);
  cr_expect_str_eq(more.items[0].message,
                   "no progress for 5 s (the --timeout): rank 2 had exited "
                   "with status 0 (finished); rank 0 waits in all_reduce "
                   "(its collective #7) at train.py:15 (main) for 7.0 s; "
                   "rank 1 made no progress for 7.0 s (no stack: the bridge "
                   "did not answer SIGUSR1). A rank slower than --timeout "
                   "between two signs of progress (a collective entered or "
                   "left, a step end) counts as a hang.");
  cr_expect_eq(more.items[0].nranks, 1);
  cr_expect_eq(more.items[0].ranks[0], 2, "the rank that left");
  done_all();
}

Test(heartbeat, finding_many_ranks_stays_in_its_message) {
  vqc_findings_init(&known);
  enum { N = 64 };
  static vqc_hb_rank many[N];
  live_procs(N);
  opts.nproc = N;
  for (int i = 0; i < N; i++) {
    hb_rank(0, VQC_HB_RUNNING, 1, 5.0 + i * 0.01);
    many[i] = ranks[0];
    many[i].rank = i;
    char text[512];
    snprintf(text, sizeof text,
             "Current thread 0x1 (most recent call first):\n"
             "  File \"/job/a_rather_long_module_name_%d.py\", line %d in "
             "some_function_name_%d\n", i, 100 + i, i);
    stacks(i, text);
  }
  vqc_findings_init(&more);
  vqc_watch_ctx ctx = {.dir = dir, .o = &opts, .procs = procs2, .nprocs = N,
                       .hb = many, .hb_n = N};
  vqc_watch_more_findings(&ctx, &known, &more);
  opts.nproc = 2;
  cr_assert_eq(more.count, 1);
  const char *m = more.items[0].message;
  cr_expect_lt(strlen(m), sizeof more.items[0].message);
  const size_t lm = strlen(m), lr = strlen(rule);
  cr_assert_gt(lm, lr);
  cr_expect_str_eq(m + lm - lr, rule, "the rule always ends it: %s", m);
  cr_expect(strstr(m, "more ranks (see the detail).") != NULL, "%s", m);
  cr_expect_eq(more.items[0].nranks, N, "every rank is in its own loop");
  cr_expect_eq(json_array_size(json_object_get(more.items[0].detail,
                                               "places")), N);
  done_all();
}

Test(heartbeat, finding_a_marker_keeps_its_own_account) {
  vqc_findings_init(&known);
  live_procs(2);
  procs2[0].at_hang = VQC_WATCH_AT_HANG_MARKED;
  procs2[1].at_hang = VQC_WATCH_AT_HANG_STOPPED;
  procs2[1].stop_letter = 'T';
  write_text("rank-0.hang",
             "{\"rank\":0,\"op\":\"all_reduce\",\"seq\":7,\"site\":"
             "\"/job/train.py:15 main\",\"step\":2,\"waited_s\":5.1,"
             "\"last_completed\":null}");
  hb_rank(0, VQC_HB_IN_COLLECTIVE, 2, 5.2);
  hb_rank(1, VQC_HB_RUNNING, 2, 5.2);
  ranks[1].proc = VQC_PROC_STOPPED;
  findings(2, true);
  cr_assert_eq(more.count, 1, "one deadlock: the marker's");
  cr_expect_str_eq(more.items[0].message,
                   "deadlock: rank 0 waits in all_reduce at train.py:15 "
                   "(main) for 5.1 s (its collective #7; none completed "
                   "before it); rank 1 never entered it: it is stopped "
                   "(process state T: a stop signal such as SIGSTOP)");
  cr_expect_eq(more.items[0].nranks, 1);
  cr_expect_eq(more.items[0].ranks[0], 1, "the stopped rank is the cause");
  const json_t *jn = json_object_get(more.items[0].detail,
                                     "ranks_without_stack");
  cr_expect_str_eq(json_string_value(json_object_get(json_array_get(jn, 0),
                                                     "why")),
                   "stopped (process state T: a stop signal such as "
                   "SIGSTOP)");
  done_all();
}

Test(heartbeat, finding_none_when_the_ledger_told_or_no_hang) {
  vqc_findings_init(&known);
  vqc_finding m;
  vqc_finding_init(&m, VQC_FINDING_COLLECTIVE_MISMATCH, 2, "%s",
                   "collective_mismatch: ...");
  vqc_finding_add_rank(&m, 0);
  cr_assert_eq(vqc_findings_add(&known, &m), VQC_OK);
  live_procs(2);
  hb_rank(0, VQC_HB_RUNNING, 2, 5.5);
  hb_rank(1, VQC_HB_RUNNING, 2, 5.5);
  findings(2, true);
  cr_expect_eq(more.count, 0, "the mismatch tells it");
  vqc_findings_free(&more);
  vqc_findings_free(&known);
  vqc_findings_init(&known);
  findings(2, false);
  cr_expect_eq(more.count, 0, "no hang decided: nothing");
  done_all();
}

/* ---- the run directory */

Test(heartbeat, rundir_reuse_clears_heartbeats_only) {
  cr_assert_eq(vqc_run_dir_prepare(dir), VQC_OK);
  write_bytes("rank-0.heartbeat", golden, sizeof golden);
  write_bytes("rank-12.heartbeat", golden, sizeof golden);
  write_text("notes.heartbeat", "the user's");
  vqc_run_dir_unlock(dir);
  cr_assert_eq(vqc_run_dir_prepare(dir), VQC_OK);
  vqc_run_dir_unlock(dir);
  char listing[1024];
  cr_assert_eq(vqc_test_dir_listing(dir, listing, sizeof listing), 0);
  cr_expect(strstr(listing, "rank-0.heartbeat") == NULL, "%s", listing);
  cr_expect(strstr(listing, "rank-12.heartbeat") == NULL, "%s", listing);
  cr_expect(strstr(listing, "notes.heartbeat") != NULL, "%s", listing);
}
