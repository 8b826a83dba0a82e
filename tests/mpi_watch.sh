#!/bin/sh
# mpi_watch.sh: `vqcheck watch -- mpiexec -n N ./prog` on the small MPI
# programs of tests/mpi_programs/ (plain C, no vqcheck header), run for real
# through the PMPI interposer (libvqcheck_mpi.so), one case per call:
#   clean           4 ranks: MPI_IN_PLACE, a derived type against basic
#                   elements, a split communicator, non-blocking collectives
#                   waited on: exit 0, no finding, the program's own result
#                   checks passed (it exits 1 otherwise), and every
#                   communicator's lines carry the right world ranks;
#   count_mismatch  3 ranks: collective_mismatch naming rank 1 at
#                   count_mismatch.c's MPI_Bcast line;
#   split_skip      4 ranks, --timeout 5: a deadlock in process group
#                   world/split1 (ranks 1, 3) naming rank 3, reported within
#                   the timeout + 5 s, nothing of the job left running;
#   crash           3 ranks: rank_failure naming rank 1 (SIGSEGV), which
#                   "never reached MPI_Finalize" (no talk of steps);
#   request_leak    3 ranks: a non-blocking all-reduce never completed at
#                   MPI_Finalize: a deadlock finding at its line, naming
#                   every rank, "never completed";
#   buffer_overlap  2 ranks: an all-reduce whose receive buffer overlaps its
#                   send buffer without MPI_IN_PLACE: lost_inplace naming
#                   ranks 0 and 1 at buffer_overlap.c:16, nothing at the
#                   correct call on line 15;
#   recv_too_small  2 ranks: an all-gather receiving 2 ints per rank where 4
#                   are sent: shape_mismatch naming ranks 0 and 1 at
#                   recv_too_small.c:13 with both sizes (found before data
#                   moves; MPI then aborts the job: never clean).
#   recv_cycle      3 ranks, --timeout 5: every rank waits in MPI_Recv for
#                   its left neighbour: a deadlock naming ranks 0-2 at
#                   recv_cycle.c:15 within the timeout + 5 s, each with
#                   its call and peer ("rank 0
#                   waits in MPI_Recv from rank 2 (tag 7) at ...");
#   recv_any        2 ranks, --timeout 5: rank 0 waits in MPI_Recv from
#                   MPI_ANY_SOURCE on the world, rank 1 with MPI_ANY_TAG on
#                   a split communicator whose ranks are reversed: "from
#                   any rank (tag 3)" at recv_any.c:18, "from rank 0 (any
#                   tag) on communicator world/split1" at recv_any.c:20
#                   (the peer told as a world rank);
#   negative_count  2 ranks: rank 1 broadcasts -1 ints (MPI_ERR_COUNT, the
#                   job aborted): the report is written (the record keeps a
#                   valid count, the program's in mpi_count) and a finding
#                   names rank 1 and MPI_ERR_COUNT;
#   pingpong        2 ranks, --timeout 3: 6 s of messages and no collective
#                   at all: every message is progress (no hang), and a run
#                   whose ranks all reached MPI_Finalize is checked with
#                   nothing to compare: exit 0;
#   strict_clean    clean under strict mode (--strict: every
#                   blocking collective agreed on first, over a duplicate of
#                   its communicator): exit 0, the same results;
#   strict_count_mismatch  count_mismatch under strict mode: the mismatch
#                   found before any data moved: every rank's call failed
#                   (VQC_EINVAL), the job stopped, collective_mismatch
#                   naming rank 1 at line 14;
#   op_swap         3 ranks: rank 0 calls MPI_Barrier (line 15) where the
#                   others call MPI_Bcast (line 18): the job hangs, a
#                   deadlock naming rank 0 within the timeout + 5 s;
#   strict_op_swap  op_swap under strict mode: refused before any data
#                   moved, a collective_mismatch naming rank 0 at line 15
#                   and both calls (never a deadlock).
#   neighbor_clean  4 ranks on a periodic ring (MPI_Cart_create): every
#                   MPI_Neighbor_* and MPI_Ineighbor_* collective, then an
#                   MPI_Alltoallw on the world: exit 0, no finding, the
#                   program's checks passed, and each call recorded entered
#                   and done on every rank, on world/cart1 (the
#                   neighbourhood ones) with its element type and count;
#   strict_neighbor_clean  the same under strict mode: exit 0;
#   neighbor_skip   3 ranks on a ring, --timeout 5: rank 2 skips the
#                   second MPI_Neighbor_allgather: a deadlock in process
#                   group world/cart1 naming rank 2 and
#                   neighbor_all_gather at neighbor_skip.c:22.
#   irecv_cycle     3 ranks, --timeout 5: recv_cycle with MPI_Irecv and
#                   MPI_Wait: a deadlock naming each rank's wait, peer and
#                   tag ("rank 0 waits in MPI_Wait for MPI_Irecv from rank
#                   2 (tag 7) at irecv_cycle.c:18 (main)"), the detail's
#                   request with its peer and its own line (17), in time;
#   irecv_leak      3 ranks: an MPI_Irecv never completed at MPI_Finalize:
#                   one deadlock finding at irecv_leak.c:27 naming ranks
#                   0-2, "never completed", its peer and tag; nothing for
#                   the MPI_Isend let go with MPI_Request_free nor for the
#                   cancelled MPI_Irecv;
#   p2p_ring        3 ranks: a correct ring in every non-blocking send
#                   form, completed by each wait and test form, freed and
#                   cancelled requests: exit 0, no finding, the program's
#                   checks passed; every message counted on both sides
#                   (rank-<r>.p2p.jsonl: sends = receives);
#   lost_message    3 ranks: rank 0 sends 2 messages of tag 4 to rank 1,
#                   which receives 1 (correct exchanges around it). By
#                   default MPI_Send runs as MPI_Ssend, so the second send
#                   waits forever: a deadlock naming rank 0 "waits in
#                   MPI_Send (synchronous) to rank 1 (tag 4) at
#                   lost_message.c:48", in time;
#   buffered_lost_message  the same with --buffered-sends (the send
#                   buffered, the program ends): one deadlock finding at
#                   MPI_Finalize, ranks 0 and 1, at lost_message.c:48,
#                   sent 2, received 1;
#   send_send       2 ranks exchange with MPI_Send before MPI_Recv (small
#                   messages: MPI buffers them): by default a deadlock
#                   naming both ranks' MPI_Send (synchronous) at
#                   send_send.c:17, in time; buffered_send_send (with
#                   --buffered-sends): exit 0, no finding (MPI buffered
#                   them; documented as what that option gives up);
#   type_mismatch   2 ranks: doubles received as MPI_LONG (same size): one
#                   collective_mismatch at type_mismatch.c:38 naming
#                   message 3, int64 (MPI_LONG) and float64 (MPI_DOUBLE)
#                   at line 36; the vector received as doubles and the
#                   MPI_BYTE messages are not findings;
#   no_finalize     2 ranks: rank 1 returns from main without MPI_Finalize:
#                   a rank_failure naming rank 1, "it exited without
#                   calling MPI_Finalize";
#   abort_call      2 ranks: rank 1 calls MPI_Abort(MPI_COMM_WORLD, 3): a
#                   rank_failure naming rank 1, "it called MPI_Abort (error
#                   code 3) at abort_call.c:13";
#   buffer_race     2 ranks: an MPI_Isend's buffer changed before its wait
#                   (rank 0, line 26) and an MPI_Recv into the buffer of
#                   an MPI_Irecv in flight (rank 1, line 37, the MPI_Irecv
#                   at 36): two lost_inplace findings; the correct twins
#                   (one buffer in two sends, halves in two receives) none;
#   coll_types      3 ranks: an MPI_Allgather sending MPI_INT, receiving
#                   MPI_FLOAT (line 26): one collective_mismatch at
#                   coll_types.c:26 naming int32 (MPI_INT) and float32
#                   (MPI_FLOAT), every rank; its correct twins none;
#   thread_colls    2 ranks, MPI_THREAD_MULTIPLE, two threads each running
#                   800 all-reduces at once on a communicator of its own;
#                   rank 1's second thread reduces with MPI_PROD at its
#                   601st (line 41): one collective_mismatch at #601 naming
#                   rank 1's product; rank 0's record, the threads' short lines
#                   interleaved, read back as every call of both
#                   communicators (before, every line under
#                   MPI_THREAD_MULTIPLE was a full one);
#   thread_colls_clean  the same, every call matching: exit 0;
#   p2p_tags        2 ranks, a tag per step for 40000 steps each way:
#                   80000 channels per rank, past the 65536 kept one by
#                   one (the rest in many-tags channels, compared in
#                   all): exit 0, rank 0's counts complete;
#   buffered_p2p_tags  the same and one more message rank 1 never
#                   receives (--buffered-sends, so the program ends): one
#                   deadlock finding, rank 0 sent 40001 messages to rank 1
#                   and 40000 were received (it was green);
#   io_many         2 ranks: 70 files open at once, each written
#                   collectively: the interposer follows 64, so exit 3 and
#                   the verdict says each rank's files past 64 were not
#                   followed (it was green);
#   type_reuse      3 ranks: a type made, used in MPI_Bcast and freed per
#                   field (MPI gives the second the first's handle); rank
#                   1's second is of MPI_FLOAT where the others' is of
#                   MPI_INT (line 30): one collective_mismatch naming rank
#                   1 and float32 (a type kept by its handle past
#                   MPI_Type_free named float64 everywhere: green);
#   bcast_recv      3 ranks, --timeout 5: rank 0 in MPI_Bcast (line 25)
#                   while ranks 1 and 2 send to it first (line 35): a
#                   deadlock naming all three, saying rooted collectives
#                   wait for every member, in time; buffered_bcast_recv
#                   (--buffered-sends: MPI's early return kept) exit 0;
#   inflight_change 2 ranks: rank 0 changes the buffer of its MPI_Ibcast
#                   (line 20) before the wait, rank 1 the buffer of a
#                   started persistent send (MPI_Send_init, line 34): two
#                   lost_inplace findings, one per rank at those lines; the
#                   MPI_Iallreduce and the rounds that refill after their
#                   wait, nothing;
#   mprobe_lost     2 ranks, --timeout 5: rank 0 receives with MPI_Mprobe +
#                   MPI_Mrecv and MPI_Improbe + MPI_Imrecv 2 of the 3
#                   messages rank 1 sends: a deadlock in rank 1's third
#                   (synchronous) MPI_Send at mprobe_lost.c:40, in time;
#                   buffered_mprobe_lost (--buffered-sends): the message
#                   never received, 3 sent and 2 received (matched
#                   receives counted, not "uncounted");
#   rma_unlock      3 ranks: puts between fences (correct), then rank 0's
#                   MPI_Put in a lock epoch never unlocked before
#                   MPI_Win_free: one "never completed" deadlock finding at
#                   rma_unlock.c:30 naming rank 0 and the MPI_Win_free line;
#   rma_fence_skip  3 ranks, --timeout 5: rank 2 skips its last closing
#                   MPI_Win_fence: a deadlock in process group world/win1
#                   naming rank 2 at the fence (rma_fence_skip.c:28) and
#                   its MPI_Win_free (line 31) instead, in time;
#   rma_put_race    3 ranks: ranks 1 and 2 put into one cell of rank 0's
#                   window in one fence epoch: one lost_inplace naming ranks
#                   1 and 2, both lines (33, 35), the bytes, the window and
#                   the fence; the puts into each rank's own slot before are
#                   clean;
#   rma_lock_race   3 ranks, lock_all: rank 0's put still in flight across
#                   a barrier while rank 2 puts into the same cell:
#                   lost_inplace naming ranks 0 and 2 at lines 28 and 33;
#                   rma_lock_flush the same program flushing before the
#                   barrier: clean, its accesses recorded;
#   rma_origin      2 ranks: a put from the buffer a get in flight writes
#                   (line 24), and a put's buffer changed before its fence
#                   (line 31): two lost_inplace findings naming rank 0;
#   rma_epochs      2 ranks: a lock epoch with a put between a fence phase
#                   whose last fence does not assert MPI_MODE_NOSUCCEED and
#                   the next fence: one deadlock finding (two kinds of epoch
#                   at once) naming rank 0 at the lock (line 32) and both
#                   fences (lines 28, 39); rma_epochs_nosucceed the same
#                   program with the asserts: clean;
#   inter_clean     4 ranks, two groups joined by MPI_Intercomm_create: a
#                   broadcast with MPI_ROOT/MPI_PROC_NULL, an all-reduce, an
#                   all-gather whose groups send different counts, messages
#                   across, a barrier, MPI_Intercomm_merge: exit 0, no
#                   finding, the intercommunicator's collectives recorded
#                   in one process group "inter-..." of all 4 ranks and its
#                   messages paired by world rank;
#   inter_skip      4 ranks, --timeout 5: world rank 3 leaves the groups'
#                   all-reduce loop early: a deadlock in process group
#                   inter-... naming rank 3 at inter_skip.c:20 (before,
#                   intercommunicators were not recorded: the hang was
#                   "outside any collective");
#   rma_memory      2 ranks: a window made in a function of its own over
#                   its local array, fenced after it returned: lost_inplace
#                   at rma_memory.c:16 naming rank 0 (and 1), "has returned
#                   by the time MPI_Win_fence at rma_memory.c:33";
#                   rma_memory_null rank 1 exposes a NULL pointer with 64
#                   bytes: lost_inplace at line 30 naming rank 1 only;
#   rma_clean       3 ranks: disjoint puts, accumulates and fetch-and-ops
#                   into one counter, gets of one cell, fence-ordered and
#                   flush-ordered puts to one cell, exclusive locks in
#                   turn: exit 0, no finding, every rank's accesses
#                   recorded;
#   rma_truncated   rma_loop (2 ranks, 30000 puts in 300 fence epochs) with
#                   its RMA record capped at 100 lines
#                   (VQC_MPI_RMA_LINES_MAX): 100 lines and the "truncated"
#                   one per rank, no finding, exit 3: the verdict says
#                   each rank's accesses past them were not checked (it
#                   was green);
#   spawn_clean     2 ranks that MPI_Comm_spawn 3 workers (ranks 0-2 of a
#                   world of their own) and talk to them: no finding, the
#                   workers said to be unchecked, and the run directory
#                   holds the job's 2 ranks only (a worker's record
#                   overwrote rank 0's, and its truncation crashed a rank
#                   with SIGBUS; worker 2 posed as a third rank); exit 3,
#                   the verdict incomplete, naming rank 0's MPI_Comm_spawn
#                   at spawn_clean.c:28 (it was exit 0: green, with 3
#                   processes of the job never checked);
#   loop_mismatch   3 ranks, 500 steps of two all-reduces (short lines past
#                   the first step, the interposer's for a loop's calls);
#                   rank 1 reduces 3 gradient values at step 300:
#                   collective_mismatch naming rank 1, collective #601 and
#                   loop_mismatch.c:18; rank 0's 600 calls before read back
#                   from short lines at lines 18 and 19; strict_loop_mismatch
#                   the same in strict mode, rank 0's #601 (entered as a
#                   short line) failed (VQC_EINVAL) at line 18;
#   io_clean        3 ranks, a checkpoint written and read back with MPI-IO
#                   collectives (MPI_File_open, set_view, write_at_all of
#                   rank + 2 doubles, read_at_all as one item of a type of
#                   that length, iread_at_all and MPI_Wait, sync, close):
#                   exit 0, no finding (counts
#                   and types differ by rank, which MPI-IO allows), each
#                   call recorded on the file's group world/file1 with the
#                   rank's own count; strict_io_clean the same in strict
#                   mode;
#   io_skip         3 ranks, --timeout 5: rank 2, with nothing to write,
#                   leaves MPI_File_write_at_all out and closes the file:
#                   one finding naming rank 2 at io_skip.c:30, on
#                   world/file1, and its close at line 32 (outside any
#                   collective, all three ranks named, before);
#   f_io_skip       io_skip in Fortran (mpi_f08; the bindings' PMPI_File_*
#                   calls routed to the wrappers): rank 2 named at
#                   f_io_skip.f90:25, its close at line 27;
#   io_inflight     3 ranks: an MPI_File_iwrite_at_all whose buffer the
#                   program changes before MPI_Wait: lost_inplace naming
#                   ranks 0-2 at io_inflight.c:30, completed at line 32;
#   thread_recv     2 ranks, MPI_THREAD_MULTIPLE, --timeout 5: rank 0's
#                   receiver thread waits in MPI_Recv (tag 5) that rank 1
#                   never sends (it sends tag 6) while the main thread
#                   pings rank 1 and joins it: a deadlock saying rank 0
#                   waits in MPI_Recv from rank 1 (tag 5) at
#                   thread_recv.c:17 in a thread (the pings' calls hid it:
#                   "outside any collective" at the join);
#   leaks           3 ranks: 20 communicators (MPI_Comm_dup in a loop), a
#                   datatype, two groups, a reduction operation, two
#                   persistent requests, a window and a file never freed
#                   (or closed): exit 0 and no finding
#                   (a leak is no finding kind), a warning per kind and
#                   site in run.json, on stderr and in report.md's
#                   "Warnings", each at its leaks.c line with its count on
#                   ranks 0-2; nothing for MPI_GROUP_EMPTY, nor for the
#                   world group's reference the program did free;
#   leaks_freed     the same program freeing each: no such warning;
#   comm_churn      3 ranks, 50 steps of MPI_Comm_dup, an all-reduce on
#                   the copy, MPI_Comm_free: exit 0, no finding, each
#                   all-reduce recorded on its own copy, world/dup1 to
#                   world/dup50 (a freed copy's memory is reused: its kept
#                   head must not stand for the next copy's call);
#   loop_exit       3 ranks, --timeout 5, rank 2 leaves the loop at step
#                   200 (a rank-local early stop): a deadlock at collective
#                   #201 naming rank 2 at loop_exit.c:18; ranks 0 and 1's
#                   records end in #201 entered, as a short line;
#   two_jobs        two MPI jobs one after the other under one vqcheck
#                   watch (sh -c "mpiexec -n 3 count_mismatch; mpiexec -n
#                   3 allreduce_loop 10"): the first job's mismatch found
#                   (the second's records replaced the first's, exit 0),
#                   and a rank_failure per rank saying another job's rank
#                   started after it, unchecked: never green;
#   nb_blocking     3 ranks, --timeout 5: MPI_Iallreduce on ranks 0 and 1,
#                   MPI_Allreduce on rank 2 (line 17), which MPI never
#                   matches: one finding naming rank 2 at nb_blocking.c:14
#                   that says so (a deadlock where the MPI hangs, a
#                   collective_mismatch where it pairs them); the
#                   MPI_Ibcast every rank calls before it, nothing;
#   overlap_type    2 ranks: a receive into an hvector of floats with a
#                   3-byte stride (elements overlap; line 28): one
#                   lost_inplace at overlap_type.c:28; the same type sent,
#                   and a correct column type, nothing;
#   truncated       2 ranks: 4 ints sent into room for 2: a rank_failure
#                   naming rank 1, MPI_ERR_TRUNCATE and "in MPI_Recv from
#                   rank 0 (tag 5) at truncated.c:15 (main)";
#   freed_recv      2 ranks: an active MPI_Irecv let go with
#                   MPI_Request_free (rank 1, line 17; the MPI_Isend freed
#                   on rank 0 is correct): one deadlock finding naming rank
#                   1 at freed_recv.c:17, the receive started at line 16;
#   halo_clean      3 ranks: a halo exchange with vector-type columns of
#                   one array in flight while the interior is updated:
#                   exit 0, no finding (spans interleave, bytes do not);
#   persistent_halo  3 ranks: a ring halo exchange with persistent
#                   requests (MPI_Send_init, MPI_Recv_init, MPI_Startall;
#                   completed by MPI_Waitall, MPI_Testall, MPI_Waitany and
#                   MPI_Waitsome in turn): exit 0, no finding, and every
#                   rank's messages counted: 4 channels of 40;
#   persistent_lost  2 ranks, --timeout 5: rank 0 starts its persistent
#                   send once more than rank 1 its receive; the synchronous
#                   send hangs: a deadlock naming rank 0's MPI_Wait for its
#                   MPI_Send_init to rank 1 (tag 4) at persistent_lost.c:24;
#   buffered_persistent_lost  the same with --buffered-sends: no hang, and
#                   the messages paired: rank 0 sent 3 with MPI_Send_init
#                   at persistent_lost.c:18, rank 1 received only 2;
#   init_wait       2 ranks, --timeout 5: rank 1 waits before MPI_Init for
#                   an input file that never comes, rank 0 in MPI_Init for
#                   it: a deadlock within the timeout + 5 s naming rank 1
#                   at init_wait.c:14 (a frame outside any MPI call,
#                   resolved from the program's debug information) and
#                   rank 0 "waits in MPI_Init"; the job
#                   stopped (before, nothing was watched until MPI_Init
#                   returned, and vqcheck watch hung with the job);
#   finalize_stuck  2 ranks, --timeout 5: every rank reaches MPI_Finalize,
#                   then rank 1 waits for a marker file that never comes:
#                   a deadlock within the timeout + 5 s naming rank 1,
#                   finished but its process not exited; the job stopped
#                   (vqcheck watch waited for mpiexec for good);
#   f_clean         4 ranks, Fortran (mpi_f08: MPI_IN_PLACE, a derived type
#                   broadcast against basic elements, a split communicator,
#                   a non-blocking all-reduce, a ring of Isend/Irecv): exit
#                   0, no finding, each collective recorded at its .f90
#                   line with its element type;
#   f_count_mismatch  3 ranks, Fortran (mpif.h): collective_mismatch naming
#                   rank 1 at f_count_mismatch.f90:16 with both counts;
#   f_recv_cycle    3 ranks, Fortran (the mpi module), --timeout 5: a
#                   deadlock placing each rank in MPI_Recv with its peer at
#                   f_recv_cycle.f90:24, never at a binding library's frame;
#   f_type_mismatch  2 ranks, Fortran (mpi_f08): REAL sent, INTEGER
#                   received: collective_mismatch naming both types and
#                   lines.
# In every case an MPI program has no training steps: each finding's step
# is -1 ("no step applies"), and neither watch's summary nor report.md
# says "at step".
# Exit 77 (a skip, with the reason) without mpiexec or the interposer.
#   usage: mpi_watch.sh VQCHECK MPIEXEC "FLAGS" PROGRAM_DIR OUT_DIR CASE
set -u
VQCHECK=$1 MPIEXEC=$2 FLAGS=$3 PROGS=$4 OUT=$5 CASE=$6
PY=/usr/bin/python3
if [ -z "$MPIEXEC" ] || ! command -v "$MPIEXEC" >/dev/null 2>&1; then
  echo "SKIP: mpiexec not found (run scripts/install-deps.sh)"; exit 77
fi
PROG=$CASE
case $CASE in
  strict_*) PROG=${CASE#strict_}; STRICT=--strict ;;
  buffered_*) PROG=${CASE#buffered_}; STRICT=--buffered-sends ;;
  two_jobs) PROG=count_mismatch; STRICT= ;;
  rma_lock_flush) PROG=rma_lock_race; STRICT= ;;
  rma_epochs_nosucceed) PROG=rma_epochs; STRICT= ;;
  rma_memory_null) PROG=rma_memory; STRICT= ;;
  rma_truncated) PROG=rma_loop; STRICT= ;;
  thread_colls_clean) PROG=thread_colls; STRICT= ;;
  p2p_tags) PROG=p2p_tags; STRICT= ;;
  leaks_freed) PROG=leaks; STRICT= ;;
  *) STRICT= ;;
esac
ARGS=
[ "$CASE" = rma_lock_flush ] && ARGS=flush
[ "$CASE" = rma_epochs_nosucceed ] && ARGS=nosucceed
[ "$CASE" = rma_memory_null ] && ARGS=null
[ "$CASE" = thread_colls_clean ] && ARGS=clean
[ "$CASE" = p2p_tags ] && ARGS=clean
[ "$CASE" = leaks_freed ] && ARGS=free
unset VQC_MPI_STRICT VQC_MPI_RMA_LINES_MAX
if [ "$CASE" = rma_truncated ]; then
  ARGS=30000
  export VQC_MPI_RMA_LINES_MAX=100
fi
if [ ! -x "$PROGS/$PROG" ]; then
  case $PROG in
    f_*) echo "SKIP: $PROGS/$PROG not built (no MPI Fortran compiler: mpifort" \
              "comes with gfortran, run scripts/install-deps.sh)" ;;
    *) echo "SKIP: $PROGS/$PROG not built (no MPI C compiler found by CMake)" ;;
  esac
  exit 77
fi
if [ ! -x "$PY" ]; then echo "SKIP: no $PY to read run.json"; exit 77; fi
rm -rf "$OUT/$CASE"
mkdir -p "$OUT"
np=3
timeout=20
case $PROG in
  clean|split_skip|neighbor_clean|inter_clean|inter_skip) np=4 ;;
  buffer_overlap|recv_too_small|negative_count|pingpong|recv_any) np=2 ;;
  type_mismatch|no_finalize|abort_call|buffer_race|send_send) np=2 ;;
  overlap_type|truncated|freed_recv|inflight_change|mprobe_lost) np=2 ;;
  spawn_clean|thread_recv|rma_origin|rma_epochs|rma_memory) np=2 ;;
  thread_colls|io_many|p2p_tags) np=2 ;;
  rma_loop) np=2 ;;
  f_clean) np=4 ;;
  f_type_mismatch|persistent_lost|init_wait|finalize_stuck) np=2 ;;
esac
case $CASE in
  split_skip|recv_cycle|op_swap|recv_any|neighbor_skip|irecv_cycle)
    timeout=5 ;;
  pingpong) timeout=3 ;;
  lost_message|send_send|f_recv_cycle|persistent_lost|init_wait)
    timeout=5 ;;
  finalize_stuck) timeout=5 ;;
  nb_blocking|bcast_recv|buffered_bcast_recv) timeout=5 ;;
  mprobe_lost|buffered_mprobe_lost|rma_fence_skip) timeout=5 ;;
  loop_exit|io_skip|f_io_skip|thread_recv|inter_skip) timeout=5 ;;
esac
# The MPI-IO programs (and leaks) write their file under $TMPDIR: one of the case's
# own, gone at the end (a job stopped at a hang leaves its file).
case $PROG in
  io_*|f_io_*|leaks) export TMPDIR="$OUT/$CASE.tmp"; rm -rf "$TMPDIR"; mkdir -p "$TMPDIR"
        trap 'rm -rf "$TMPDIR"' EXIT ;;
esac
start=$(date +%s.%N)
# shellcheck disable=SC2086 # FLAGS is a list of words
if [ "$CASE" = two_jobs ]; then
  # shellcheck disable=SC2086 # FLAGS is a list of words
  "$VQCHECK" watch --mpi --timeout $timeout --out "$OUT/$CASE" -- \
    sh -c "\"\$0\" $FLAGS -n 3 \"\$1\"; \"\$0\" $FLAGS -n 3 \"\$2\" 10" \
    "$MPIEXEC" "$PROGS/count_mismatch" "$PROGS/allreduce_loop" \
    >"$OUT/$CASE.out" 2>&1
else
  "$VQCHECK" watch $STRICT --timeout $timeout --out "$OUT/$CASE" -- \
    "$MPIEXEC" $FLAGS -n $np "$PROGS/$PROG" $ARGS >"$OUT/$CASE.out" 2>&1
fi
rc=$?
wall=$($PY -c "import time; print(f'{time.time() - $start:.1f}')")
cat "$OUT/$CASE.out"
echo "exit $rc after $wall s"
fail() { echo "FAIL ($CASE): $*"; exit 1; }
# Nothing of the job survives (watch is its subreaper; no stray rank).
sleep 0.3
if pgrep -f "$PROGS/$PROG" >/dev/null 2>&1; then
  pgrep -af "$PROGS/$PROG"
  fail "processes of the job are still running"
fi
[ -f "$OUT/$CASE/run.json" ] || fail "no run.json"
for f in report.md report.html junit.xml; do
  [ -f "$OUT/$CASE/$f" ] || fail "no $f"
done
$PY - "$OUT/$CASE" "$CASE" "$rc" "$wall" "$timeout" <<'PYEOF' || exit 1
import glob, json, os, re, sys
d, case, rc, wall, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    float(sys.argv[4]), float(sys.argv[5])
run = json.load(open(os.path.join(d, "run.json")))
fs = run.get("findings", [])
kinds = [f["kind"] for f in fs]
def fail(msg):
    print("FAIL (%s): %s\nfindings: %s" % (case, msg, json.dumps(fs, indent=1)))
    sys.exit(1)
def reported_in_time():
    """A hang is reported within --timeout + 5 s (+ 2 s: mpiexec's own
    start and end)."""
    if wall > timeout + 5 + 2:
        fail("reported after %.1f s, past --timeout %g s + 5 s" % (wall, timeout))
def one_deadlock_of(rank, *wants):
    """Exit 1 with a deadlock naming rank alone, its message saying each of
    wants, reported in time; the finding."""
    f = one("deadlock")
    if rc != 1 or f["ranks"] != [rank]:
        fail("expected exit 1 and rank %d, got %d and %s"
             % (rank, rc, f["ranks"]))
    for want in wants:
        if want not in f["message"]:
            fail("the message does not say %r: %s" % (want, f["message"]))
    reported_in_time()
    return f
def one(kind):
    got = [f for f in fs if f["kind"] == kind]
    if not got:
        fail("no %s finding" % kind)
    return got[0]
def ledger(path):
    """The collective lines of a live record, each a full line's fields:
    a short line (the interposer's for a loop's calls: {"same":SEQ,"as":K,
    "in":DT} entered with the fields of kept head K, the full entered
    line read when their count modulo the start line's "heads" was K;
    {"same":SEQ,"out":DT} done; "in" and "out" left out when DT is 0)
    read as checkers/ledger_read.c reads it.
    With the number of short lines. Zeros end the data of a rank killed
    while writing through its mapping (a supervisor's line may follow
    them), and the line they cut is torn: skipped, as vqcheck does."""
    lines = []
    for seg in re.split(rb"\0+", open(path, "rb").read()):
        part = seg.decode().split("\n")
        lines += [(l, i == len(part) - 1) for i, l in enumerate(part)]
    out, heads, nheads, nfull, last_t, nshort, open_ = [], {}, 0, 0, 0, 0, None
    for l, last in lines:
        if not l.strip():
            continue
        try:
            j = json.loads(l)
        except ValueError:
            if last:
                continue  # cut by zeros or the end: torn
            raise
        if j.get("event") == "start":
            nheads = j.get("heads", 0)
        if "same" in j:
            nshort += 1
            if "as" in j:
                if j["as"] not in heads:
                    fail("%s: a short line names head %s, never filled"
                         % (path, j["as"]))
                last_t += j.get("in", 0)
                open_ = dict(heads[j["as"]], seq=j["same"], t_enter_ns=last_t,
                             t_exit_ns=0, state="entered", status="",
                             short=True)
                out.append(open_)
            else:
                if open_ is None or open_["seq"] != j["same"]:
                    fail("%s: %s done but not the short call entered last"
                         % (path, j["same"]))
                out.append(dict(open_, t_exit_ns=last_t + j.get("out", 0),
                                state="done", status="VQC_OK"))
                open_ = None
        elif "seq" in j:
            out.append(j)
            if j["state"] == "entered":
                if nheads:
                    heads[nfull % nheads] = j
                nfull += 1
                last_t = j["t_enter_ns"]
    return out, nshort
if run.get("exit_code") != rc:
    fail("run.json says exit %s, watch exited %d" % (run.get("exit_code"), rc))
# No steps in an MPI program: no finding has one, and none is told.
stepped = [f for f in fs if f.get("step") != -1]
if stepped:
    fail("findings with a step (an MPI program has none): %s"
         % [(f["kind"], f.get("step")) for f in stepped])
for name in (case + ".out", os.path.join(case, "report.md")):
    text = open(os.path.join(os.path.dirname(d), name)).read()
    if "at step" in text:
        fail("%s says 'at step': %s" % (name, [l for l in text.splitlines()
                                             if "at step" in l][:3]))
# The report's head tells the MPI program as it ran, never as a scenario
# (no model, fault, seed or "0 steps done"), named by the program after
# the launcher, with the job's measured wall time.
md = open(os.path.join(d, "report.md")).read()
head = md.split("## ")[0]
prog = run.get("job", {}).get("command", [""])[-1].rsplit("/", 1)[-1]
if case in ("rma_lock_flush", "rma_epochs_nosucceed", "rma_memory_null",
            "rma_truncated", "thread_colls_clean", "p2p_tags",
            "leaks_freed"):
    prog = {"rma_lock_flush": "rma_lock_race",  # (its argument comes last)
            "rma_epochs_nosucceed": "rma_epochs",
            "rma_memory_null": "rma_memory",
            "rma_truncated": "rma_loop",
            "thread_colls_clean": "thread_colls",
            "p2p_tags": "p2p_tags", "leaks_freed": "leaks"}[case]
if not head.startswith("# vqcheck report: "):
    fail("report.md does not start with its title: %r" % head[:80])
title = head.splitlines()[0][len("# vqcheck report: "):]
if title.replace("\\", "") != prog and case != "two_jobs":  # (sh -c)
    fail("report.md is titled %r, not after the program %r" % (title, prog))
for wrong in ("scenario", "fault injected", "steps done", "VQC_OK",
              "unknown model"):
    if wrong in head:
        fail("report.md's head says %r: %r" % (wrong, head))
if "an MPI program, checked through the PMPI interposer" not in head:
    fail("report.md's head does not tell an MPI program: %r" % head)
if not (0 < run.get("duration_s", 0) <= wall + 1):
    fail("run.json duration_s %r, the job took %.2f s" %
         (run.get("duration_s"), wall))
if case in ("clean", "strict_clean"):
    if rc != 0 or fs:
        fail("a clean program: expected exit 0 and no finding, got %d" % rc)
    # what ran is said, so report.md and JUnit do not call it skipped
    want = {"deadlock", "collective_mismatch", "rank_failure",
            "lost_inplace", "shape_mismatch"}
    if not want <= set(run.get("checks", [])) or \
            "divergence" not in run.get("checks_not_run", {}):
        fail("checks %s, not run %s" % (run.get("checks"),
                                        run.get("checks_not_run")))
    if "Not checked (did not run): divergence, gradient_mismatch, " \
            "nonfinite." not in head:
        fail("report.md's verdict: %r" % head)
    # the split communicator's lines name its world ranks and one name
    for path in sorted(glob.glob(os.path.join(d, "rank-*.live.jsonl"))):
        r = int(os.path.basename(path).split("-")[1].split(".")[0])
        lines = [json.loads(l) for l in open(path) if l.strip()]
        led = ledger(path)[0]
        groups = {(l.get("group_name"), tuple(l["group"]))
                  for l in led if "group" in l}
        want = ("world/split1", tuple(range(r % 2, 4, 2)))
        if groups != {want}:
            fail("rank %d: groups %s, expected %s" % (r, groups, want))
        if not any(l.get("event") == "finished" for l in lines):
            fail("rank %d: no finished line" % r)
        if any(l.get("state") == "entered" and
               not any(m.get("seq") == l["seq"] and m.get("group") ==
                       l.get("group") and m.get("state") == "done"
                       for m in led) for l in led):
            fail("rank %d: a collective entered and never done" % r)
elif case in ("neighbor_clean", "strict_neighbor_clean"):
    if rc != 0 or fs:
        fail("a correct program: expected exit 0 and no finding, got %d" % rc)
    # op -> (communicator, dtype, count): each blocking and non-blocking
    # (one call each: the non-blocking one under its own name, "ineighbor_
    # all_gather"), entered and done; counts are the type signature's
    # length of what the rank sends (per neighbour for the gather and
    # all-to-all, summed over both neighbours for the v and w forms).
    want = {"neighbor_all_gather": ("world/cart1", "int32", 1),
            "neighbor_all_gatherv": ("world/cart1", "int32", 1),
            "neighbor_all_to_all": ("world/cart1", "int32", 1),
            "neighbor_all_to_allv": ("world/cart1", "int32", 2),
            "neighbor_all_to_allw": ("world/cart1", "int32", 2),
            "all_to_allw": ("world", "int32", 4)}
    for path in sorted(glob.glob(os.path.join(d, "rank-*.live.jsonl"))):
        r = int(os.path.basename(path).split("-")[1].split(".")[0])
        led = ledger(path)[0]
        for op, (comm, dtype, count) in want.items():
            calls = [l for l in led if l["op"] in (op, "i" + op)]
            for name in (op, "i" + op):
                states = sorted(l["state"] for l in calls if l["op"] == name)
                if name == "iall_to_allw":
                    continue  # only the blocking one is called
                if states != ["done", "entered"]:
                    fail("rank %d: %s recorded %s, expected entered and "
                         "done" % (r, name, states))
            for l in calls:
                got = (l.get("group_name", "world"), l["dtype"], l["count"])
                if got != (comm, dtype, count):
                    fail("rank %d: %s recorded as %s, expected %s"
                         % (r, op, got, (comm, dtype, count)))
elif case == "neighbor_skip":
    dl = [f for f in fs if f["kind"] == "deadlock"]
    if rc != 1 or not dl or 2 not in dl[0]["ranks"]:
        fail("expected exit 1 and a deadlock naming rank 2")
    m = dl[0]["message"]
    if "neighbor_all_gather" not in m or "neighbor_skip.c:22" not in m or \
            "world/cart1" not in m:
        fail("expected the ring's neighbor_all_gather at neighbor_skip.c:22: "
             "%s" % m)
    reported_in_time()
elif case in ("count_mismatch", "strict_count_mismatch"):
    f = one("collective_mismatch")
    if case.startswith("strict") and "failed (VQC_EINVAL)" not in f["message"]:
        fail("strict mode: the calls did not fail before data moved: %s"
             % f["message"])
    if rc != 1 or f["ranks"] != [1]:
        fail("expected exit 1 and rank 1, got %d and %s" % (rc, f["ranks"]))
    site = f.get("site", "")
    if "count_mismatch.c:14" not in site:
        fail("site %r is not count_mismatch.c:14 (the MPI_Bcast)" % site)
    if "count 8" not in f["message"] or "count 4" not in f["message"]:
        fail("the message does not give both counts")
elif case == "op_swap":
    f = one("deadlock")
    if rc != 1 or f["ranks"] != [0]:
        fail("expected exit 1 and rank 0, got %d and %s" % (rc, f["ranks"]))
    if "op_swap.c:15" not in f["message"] or wall > timeout + 5 + 2:
        fail("expected rank 0 placed in its barrier (line 15) in time")
elif case == "strict_op_swap":
    f = one("collective_mismatch")
    if rc != 1 or f["ranks"] != [0] or "deadlock" in kinds:
        fail("expected exit 1, a collective_mismatch naming rank 0 and no "
             "deadlock, got %d, %s and %s" % (rc, f["ranks"], kinds))
    if "op_swap.c:15" not in f.get("site", "") or \
            "broadcast(float64, count 4, root 0)" not in f["message"] or \
            "before any data moved" not in f["message"]:
        fail("expected the barrier's line, both calls and 'before any data "
             "moved': %s" % f["message"])
elif case == "split_skip":
    dl = [f for f in fs if f["kind"] == "deadlock"
          and f.get("detail", {}).get("process_group")]
    if rc != 1 or not dl:
        fail("expected exit 1 and a deadlock in a process group")
    pg = dl[0]["detail"]["process_group"]
    if pg.get("ranks") != [1, 3] or pg.get("name") != "world/split1":
        fail("process group %s, expected world/split1 ranks [1, 3]" % pg)
    if 3 not in dl[0]["ranks"]:
        fail("rank 3 (never entered) not named: %s" % dl[0]["ranks"])
    if "split_skip.c:16" not in dl[0]["message"]:
        fail("the message does not name split_skip.c:16")
    reported_in_time()
elif case == "recv_cycle":
    # Every rank waits from its first receive on: those idle for the
    # timeout when it is first crossed are named (all three, or on a
    # loaded machine where ranks started apart, the first); every rank is
    # placed at the MPI_Recv line.
    f = one("deadlock")
    if rc != 1 or not f["ranks"] or not set(f["ranks"]) <= {0, 1, 2}:
        fail("expected exit 1 and ranks among 0-2, got %d and %s"
             % (rc, f["ranks"]))
    if "MPI_Recv from rank" not in f["message"] or \
            "recv_cycle.c:15 (main)" not in f["message"]:
        fail("the message does not place the ranks at recv_cycle.c:15")
    if f["message"].count("recv_cycle.c:15 (main)") < (1 if len(
            f["ranks"]) == 3 else 2):
        fail("the ranks not named are not placed at recv_cycle.c:15")
    reported_in_time()
    # Each rank's call and peer (its left neighbour, a world rank): the
    # ranks named "wait in" it, the others (within the timeout) are "in" it.
    for r in range(3):
        call = "MPI_Recv from rank %d (tag 7) at recv_cycle.c:15 (main)" % (
            (r + 2) % 3)
        said = ("rank %d waits in " if r in f["ranks"] else
                "rank %d last made progress") % r
        if call not in f["message"] or said not in f["message"]:
            fail("rank %d is not told as %r with %r" % (r, said, call))
    peers = {p["rank"]: p.get("p2p", {}).get("from")
             for p in f["detail"]["places"]}
    if peers != {0: 2, 1: 0, 2: 1}:
        fail("the detail's peers are %s, expected {0: 2, 1: 0, 2: 1}" % peers)
elif case == "irecv_cycle":
    # As recv_cycle, each rank in MPI_Wait on its MPI_Irecv: the wait's
    # line (18) in the message, the request (peer, tag, line 17) in it and
    # in the detail.
    f = one("deadlock")
    if rc != 1 or not f["ranks"] or not set(f["ranks"]) <= {0, 1, 2}:
        fail("expected exit 1 and ranks among 0-2, got %d and %s"
             % (rc, f["ranks"]))
    reported_in_time()
    for r in range(3):
        call = ("MPI_Wait for MPI_Irecv from rank %d (tag 7) at "
                "irecv_cycle.c:18 (main)" % ((r + 2) % 3))
        said = ("rank %d waits in " if r in f["ranks"] else
                "rank %d last made progress") % r
        if call not in f["message"] or said not in f["message"]:
            fail("rank %d is not told as %r with %r" % (r, said, call))
    for p in f["detail"]["places"]:
        p2p = p.get("p2p", {})
        reqs = p2p.get("requests", [])
        want = {"call": "MPI_Irecv", "communicator": "world",
                "from": (p["rank"] + 2) % 3, "recv_tag": 7}
        if p2p.get("call") != "MPI_Wait" or p2p.get("nrequests") != 1 or \
                len(reqs) != 1 or \
                {k: reqs[0].get(k) for k in want} != want or \
                not reqs[0].get("site", "").endswith("irecv_cycle.c:17"):
            fail("rank %d's detail: %s, expected MPI_Wait on %s at "
                 "irecv_cycle.c:17" % (p["rank"], p2p, want))
elif case == "irecv_leak":
    dl = [f for f in fs if f["kind"] == "deadlock"]
    if rc != 1 or len(fs) != 1 or len(dl) != 1:
        fail("expected exit 1 and one finding, a deadlock, got %d and %s"
             % (rc, kinds))
    f = dl[0]
    if f["ranks"] != [0, 1, 2]:
        fail("expected ranks 0-2, got %s" % f["ranks"])
    if "irecv_leak.c:27" not in f.get("site", "") or \
            "never completed" not in f["message"]:
        fail("expected the MPI_Irecv line (27) and 'never completed': %s, %s"
             % (f.get("site"), f["message"]))
    r0 = f["ranks"][0]
    said = "rank %d reached MPI_Finalize with its MPI_Irecv from rank %d " \
           "(tag 9)" % (r0, (r0 + 2) % 3)
    d = f.get("detail", {})
    if said not in f["message"] or d.get("call") != "MPI_Irecv" or \
            d.get("recv_tag") != 9 or not d.get("never_completed"):
        fail("expected %r and the detail's call and tag: %s, %s"
             % (said, f["message"], d))
elif case in ("p2p_ring", "halo_clean"):
    if rc != 0 or fs:
        fail("a correct program: expected exit 0 and no finding, got %d" % rc)
    # every message counted once on each side (interpose/vqc_mpi_msgs.c)
    sent = recv = 0
    want = 15 if case == "p2p_ring" else 27  # 5 or 3 x 3 per rank
    for path in sorted(glob.glob(os.path.join(d, "rank-*.p2p.jsonl"))):
        lines = [json.loads(l) for l in open(path)]
        if lines[0].get("uncounted") is not None:
            fail("%s: counts incomplete: %s" % (path, lines[0]))
        sent += sum(l["count"] for l in lines[1:] if l["dir"] == "send")
        recv += sum(l["count"] for l in lines[1:] if l["dir"] == "recv")
    if sent != want or recv != want:
        fail("expected %d messages sent and received, counted %d and %d"
             % (want, sent, recv))
elif case in ("lost_message", "send_send"):
    f = one("deadlock")
    if rc != 1:
        fail("expected exit 1, got %d" % rc)
    said = {"lost_message": ["rank 0 waits in MPI_Send (synchronous) to "
                             "rank 1 (tag 4) at lost_message.c:48 (main)"],
            "send_send": ["rank %d waits in MPI_Send (synchronous) to rank "
                          "%d (tag 7) at send_send.c:17 (main)" % (r, 1 - r)
                          for r in (0, 1)] +
                         ["vqcheck runs MPI_Send as MPI_Ssend"]}[case]
    for want in said:
        if want not in f["message"]:
            fail("the deadlock does not say %r: %s" % (want, f["message"]))
    reported_in_time()
elif case == "buffered_send_send":
    if rc != 0 or fs:
        fail("with --buffered-sends MPI buffers the small sends: expected "
             "exit 0 and no finding, got %d" % rc)
elif case == "buffered_lost_message":
    if rc != 1 or kinds != ["deadlock"]:
        fail("expected exit 1 and one deadlock, got %d and %s" % (rc, kinds))
    f = fs[0]
    dt = f.get("detail", {})
    if f["ranks"] != [0, 1] or "lost_message.c:48" not in f.get("site", "") \
            or dt.get("sent") != 2 or dt.get("received") != 1 or \
            dt.get("tag") != 4 or dt.get("p2p") != "never_received":
        fail("expected ranks 0, 1 at lost_message.c:48, sent 2, received 1: "
             "%s %s %s" % (f["ranks"], f.get("site"), dt))
    if "rank 0 sent 2 messages to rank 1 (tag 4)" not in f["message"] or \
            "rank 1 received only 1 of them" not in f["message"]:
        fail("the message: %s" % f["message"])
elif case == "freed_recv":
    if rc != 1 or kinds != ["deadlock"]:
        fail("expected exit 1 and one deadlock, got %d and %s" % (rc, kinds))
    f = fs[0]
    said = ("rank 1 let its MPI_Irecv from rank 0 (tag 3) (started at "
            "freed_recv.c:16) go with MPI_Request_free before it completed")
    if f["ranks"] != [1] or "freed_recv.c:17" not in f.get("site", "") or \
            said not in f["message"]:
        fail("expected rank 1 at freed_recv.c:17 and %r: %s %s %s"
             % (said, f["ranks"], f.get("site"), f["message"]))
elif case == "overlap_type":
    if rc != 1 or kinds != ["lost_inplace"]:
        fail("expected exit 1 and one lost_inplace, got %d and %s"
             % (rc, kinds))
    f = fs[0]
    if f["ranks"] != [1] or "overlap_type.c:28" not in f.get("site", "") \
            or "receives into a datatype whose elements overlap (64 bytes " \
            "of data in a span of 49 bytes)" not in f["message"]:
        fail("expected rank 1 at overlap_type.c:28: %s %s %s"
             % (f["ranks"], f.get("site"), f["message"]))
elif case == "bcast_recv":
    f = one("deadlock")
    if rc != 1 or len(fs) != 1:
        fail("expected exit 1 and one deadlock, got %d and %s" % (rc, kinds))
    for want in ["rank 0 waits in broadcast (its collective #1) at "
                 "bcast_recv.c:25 (main)",
                 "MPI_Send (synchronous) to rank 0 (tag 3) at "
                 "bcast_recv.c:35 (main)",
                 "rooted collectives wait for every member"]:
        if want not in f["message"]:
            fail("the deadlock does not say %r: %s" % (want, f["message"]))
    reported_in_time()
elif case == "buffered_bcast_recv":
    if rc != 0 or fs:
        fail("with --buffered-sends the broadcast returns at the root: "
             "expected exit 0 and no finding, got %d" % rc)
elif case == "inflight_change":
    if rc != 1 or kinds != ["lost_inplace", "lost_inplace"]:
        fail("expected exit 1 and two lost_inplace, got %d and %s"
             % (rc, kinds))
    by_rank = {f["ranks"][0]: f for f in fs if len(f["ranks"]) == 1}
    want = {0: ("inflight_change.c:20", "rank 0 changed the send buffer of "
                "its MPI_Ibcast (32 bytes) at inflight_change.c:20 (main) "
                "before the request completed"),
            1: ("inflight_change.c:34", "rank 1 changed the buffer of its "
                "MPI_Send_init (synchronous) (8 bytes) at "
                "inflight_change.c:34 (main) before the request completed")}
    for r, (site, text) in want.items():
        f = by_rank.get(r)
        if not f or site not in f.get("site", "") or text not in f["message"]:
            fail("expected rank %d at %s saying %r" % (r, site, text))
elif case == "mprobe_lost":
    f = one("deadlock")
    if rc != 1 or len(fs) != 1 or f["ranks"] != [1] \
            or "rank 1 waits in MPI_Send (synchronous) to rank 0 (tag 9) at " \
            "mprobe_lost.c:40 (main)" not in f["message"]:
        fail("expected exit 1 and one deadlock in rank 1's MPI_Send at "
             "mprobe_lost.c:40: %d %s" % (rc, f["message"]))
    reported_in_time()
elif case == "buffered_mprobe_lost":
    if rc != 1 or kinds != ["deadlock"]:
        fail("expected exit 1 and one deadlock, got %d and %s" % (rc, kinds))
    f = fs[0]
    dt = f.get("detail", {})
    if dt.get("sent") != 3 or dt.get("received") != 2 or \
            dt.get("tag") != 9 or dt.get("p2p") != "never_received":
        fail("expected 3 sent and 2 received on tag 9: %s" % f["message"])
    head = json.loads(open(os.path.join(d, "rank-0.p2p.jsonl")).readline())
    if head.get("uncounted") is not None or head.get("messages") != 2:
        fail("rank 0's matched receives not counted: %s" % head)
elif case == "rma_unlock":
    f = one("deadlock")
    if rc != 1 or len(fs) != 1 or f["ranks"] != [0] \
            or "rma_unlock.c:30" not in f.get("site", ""):
        fail("expected exit 1 and one deadlock naming rank 0 at "
             "rma_unlock.c:30: %d %s" % (rc, kinds))
    for want in ["rank 0's MPI_Put to rank 1 at rma_unlock.c:30 (main) on "
                 "window world/win1 never completed",
                 "before MPI_Win_free at rma_unlock.c:34 (main)"]:
        if want not in f["message"]:
            fail("the finding does not say %r: %s" % (want, f["message"]))
elif case in ("rma_put_race", "rma_lock_race"):
    f = one("lost_inplace")
    here, there, ranks, cell = {
        "rma_put_race": (33, 35, [1, 2], "bytes 28-31 of rank 0's memory"),
        "rma_lock_race": (28, 33, [0, 2], "bytes 16-23 of rank 1's memory"),
    }[case]
    if rc != 1 or len(fs) != 1 or f["ranks"] != ranks \
            or "%s.c:%d" % (case, here) not in f.get("site", ""):
        fail("expected exit 1 and one lost_inplace naming ranks %s at "
             "line %d: %d %s" % (ranks, here, rc, kinds))
    want = [cell, "in window world/win1 with no order between them",
            "rank %d's MPI_Put at %s.c:%d (main) writes them" % (
                ranks[0], case, here),
            "rank %d's MPI_Put at %s.c:%d (main) writes them" % (
                ranks[1], case, there)]
    want.append("fence #3 opened" if case == "rma_put_race" else
                "both in flight at once")
    for w in want:
        if w not in f["message"]:
            fail("the race does not say %r: %s" % (w, f["message"]))
    if f["detail"].get("race") is not True or f["detail"].get("target") \
            != (0 if case == "rma_put_race" else 1):
        fail("detail: %s" % f["detail"])
elif case == "inter_clean":
    if rc != 0 or fs:
        fail("expected exit 0 and no finding: %d %s" % (rc, kinds))
    for r in range(4):
        lines = ledger(os.path.join(d, "rank-%d.live.jsonl" % r))[0]
        ops = [(x["op"], x.get("group_name", "").split("/")[-1][:6])
               for x in lines if x.get("state") == "entered"
               and x.get("group_name", "").startswith("inter-")]
        if ops != [("broadcast", "inter-"), ("all_reduce", "inter-"),
                   ("all_gather", "inter-"), ("barrier", "inter-"),
                   ("comm_create", "inter-"), ("all_reduce", "merge1")]:
            fail("rank %d's intercommunicator collectives: %s" % (r, ops))
        groups = {json.dumps(x.get("group")) for x in lines
                  if x.get("group_name", "").startswith("inter-")
                  and "/" not in x["group_name"]}
        if groups != {"[0, 1, 2, 3]"}:
            fail("rank %d's intercommunicator groups: %s" % (r, groups))
        p2p = [json.loads(x) for x in
               open(os.path.join(d, "rank-%d.p2p.jsonl" % r))][1:]
        peers = {(x["dir"], x["peer"]) for x in p2p}
        peer = r + 1 if r % 2 == 0 else r - 1
        if peers != {("send", peer), ("recv", peer)}:
            fail("rank %d's messages across: %s" % (r, peers))
elif case == "inter_skip":
    f = one("deadlock")
    if rc != 1 or f["ranks"] != [3] \
            or "inter_skip.c:20" not in f.get("site", ""):
        fail("expected exit 1 and a deadlock naming rank 3 at "
             "inter_skip.c:20: %d %s" % (rc, kinds))
    if "in process group inter-" not in f["message"] \
            or "never by rank 3" not in f["message"]:
        fail("the deadlock does not name the intercommunicator and rank "
             "3: %s" % f["message"])
    if float(wall) > timeout + 15:
        fail("reported after %s s" % wall)
elif case in ("rma_memory", "rma_memory_null"):
    f = one("lost_inplace")
    line, ranks, want = {
        "rma_memory": (16, [[0], [0, 1]], "has returned by the time "
                       "MPI_Win_fence at rma_memory.c:33 (main) uses the "
                       "window"),
        "rma_memory_null": (30, [[1]], "rank 1's MPI_Win_create at "
                            "rma_memory.c:30 (main) exposes 64 bytes at NULL "
                            "as window world/win1"),
    }[case]
    if rc != 1 or len(fs) != 1 or f["ranks"] not in ranks \
            or "rma_memory.c:%d" % line not in f.get("site", ""):
        fail("expected exit 1 and one lost_inplace at rma_memory.c:%d: "
             "%d %s %s" % (line, rc, kinds, f.get("ranks")))
    if want not in f["message"]:
        fail("the finding does not say %r: %s" % (want, f["message"]))
elif case == "rma_epochs":
    f = one("deadlock")
    if rc != 1 or len(fs) != 1 or f["ranks"] != [0] \
            or "rma_epochs.c:32" not in f.get("site", ""):
        fail("expected exit 1 and one deadlock naming rank 0 at "
             "rma_epochs.c:32: %d %s" % (rc, kinds))
    for w in ["rank 0's MPI_Win_lock at rma_epochs.c:32 (main) opens a "
              "passive-target epoch", "inside the fence epoch on window "
              "world/win1 that MPI_Win_fence at rma_epochs.c:28 (main) "
              "opened and MPI_Win_fence at rma_epochs.c:39 (main) closes",
              "MPI_MODE_NOSUCCEED"]:
        if w not in f["message"]:
            fail("the finding does not say %r: %s" % (w, f["message"]))
elif case == "rma_epochs_nosucceed":
    if rc != 0 or fs:
        fail("expected exit 0 and no finding: %d %s" % (rc, kinds))
elif case in ("rma_lock_flush", "rma_clean"):
    if rc != 0 or fs:
        fail("expected exit 0 and no finding: %d %s" % (rc, kinds))
    # The accesses were recorded and compared, not skipped.
    n = 0
    for path in glob.glob(os.path.join(d, "rank-*.rma.jsonl")):
        n += sum(1 for line in open(path) if '"access"' in line)
    least = 2 if case == "rma_lock_flush" else 40
    if n < least:
        fail("only %d RMA accesses recorded (expected %d or more)"
             % (n, least))
elif case == "rma_origin":
    got = sorted((f["kind"], f["ranks"], f.get("site", "").split("/")[-1])
                 for f in fs)
    if rc != 1 or got != [("lost_inplace", [0], "rma_origin.c:24 main"),
                          ("lost_inplace", [0], "rma_origin.c:31 main")]:
        fail("expected exit 1 and lost_inplace at lines 24 and 31: %d %s"
             % (rc, got))
    for f in fs:
        w = ("of the origin buffer of its MPI_Get at rma_origin.c:23"
             if "c:24" in f["site"] else
             "changed the origin buffer of its MPI_Put (8 bytes)")
        if w not in f["message"]:
            fail("the finding does not say %r: %s" % (w, f["message"]))
elif case == "rma_fence_skip":
    f = one("deadlock")
    if rc != 1 or len(fs) != 1 or f["ranks"] != [2] \
            or "rma_fence_skip.c:28" not in f.get("site", ""):
        fail("expected exit 1 and one deadlock naming rank 2 at "
             "rma_fence_skip.c:28: %d %s %s" % (rc, kinds, f.get("site")))
    for want in ["in process group world/win1 (ranks 0-2)",
                 "win_fence() at", "never by rank 2",
                 "win_free() at", "rma_fence_skip.c:31"]:
        if want not in f["message"]:
            fail("the deadlock does not say %r: %s" % (want, f["message"]))
    reported_in_time()
elif case == "rma_truncated":
    if rc != 3 or fs:
        fail("RMA accesses unrecorded: expected exit 3 and no finding, "
             "got %d %s" % (rc, kinds))
    msg = run["training"].get("message", "")
    for r in (0, 1):
        want = ("rank %d: its RMA accesses past the first 100 lines of "
                "rank-%d.rma.jsonl were not recorded" % (r, r))
        if want not in msg:
            fail("the verdict does not say %r: %s" % (want, msg))
    for r in (0, 1):
        lines = open(os.path.join(d, "rank-%d.rma.jsonl" % r)).read().splitlines()
        if len(lines) != 101 or json.loads(lines[-1]) != {"truncated": True}:
            fail("rank %d's record: %d lines, last %r" % (r, len(lines),
                                                         lines[-1][:80]))
elif case == "spawn_clean":
    if rc != 3 or fs:
        fail("unchecked workers: expected exit 3 and no finding, got %d" % rc)
    msg = run["training"].get("message", "")
    for want in ["not everything was checked: rank 0: it started 3 processes "
                 "with MPI_Comm_spawn at spawn_clean.c:28 (main), which "
                 "vqcheck does not check"]:
        if want not in msg:
            fail("the verdict does not say %r: %s" % (want, msg))
    names = sorted(os.listdir(d))
    strays = [n for n in names if n.startswith("rank-")
              and not n.startswith(("rank-0.", "rank-1."))]
    if strays:
        fail("files of a spawned worker in the run directory: %s" % strays)
    out = open(os.path.join(os.path.dirname(d), case + ".out")).read()
    if out.count("was started by MPI_Comm_spawn: it is not checked") != 3:
        fail("the 3 workers are not said to be unchecked")
elif case == "two_jobs":
    if rc != 1 or sorted(kinds) != ["collective_mismatch", "rank_failure"]:
        fail("expected exit 1, a collective_mismatch and a rank_failure, "
             "got %d and %s" % (rc, kinds))
    m = one("collective_mismatch")
    if m["ranks"] != [1] or "count_mismatch.c:14" not in m.get("site", ""):
        fail("the first job's mismatch: %s %s" % (m["ranks"], m.get("site")))
    f = one("rank_failure")
    if f["ranks"] != [0, 1, 2] or "rank 0 reached MPI_Finalize, but " \
            "another MPI job's rank 0" not in f["message"]:
        fail("the second job not told: %s %s" % (f["ranks"], f["message"]))
elif case in ("loop_mismatch", "strict_loop_mismatch"):
    if rc != 1 or kinds != ["collective_mismatch"]:
        fail("expected exit 1 and one collective_mismatch, got %d and %s"
             % (rc, kinds))
    f = fs[0]
    if f["ranks"] != [1] or "loop_mismatch.c:18" not in f.get("site", "") \
            or "collective #601 all_reduce" not in f["message"] \
            or "rank 1 all_reduce(float64, count 3)" not in f["message"]:
        fail("expected rank 1's count 3 at collective #601, loop_mismatch.c:"
             "18: %s %s %s" % (f["ranks"], f.get("site"), f["message"]))
    # the 600 calls before were written as short lines, and read as the
    # calls at their two lines
    led, nshort = ledger(os.path.join(d, "rank-0.live.jsonl"))
    done = {l["seq"]: l["line"] for l in led if l["state"] == "done"}
    if nshort < 2 * 598 or [done.get(q) for q in range(1, 601)] != \
            [18, 19] * 300:
        fail("rank 0: %d short lines, calls done %s..." %
             (nshort, sorted(done.items())[:4]))
    # strict mode stopped every rank in #601, entered as a short line on
    # ranks 0 and 2: their failed line is a full one, made from its head
    if case.startswith("strict_"):
        last = [l for l in led if l["seq"] == 601][-1]
        if (last["state"], last["status"], last["count"], last["line"]) != \
                ("failed", "VQC_EINVAL", 4, 18):
            fail("rank 0's #601 ends %s" % last)
elif case in ("io_clean", "strict_io_clean"):
    if rc != 0 or fs:
        fail("a correct program: expected exit 0 and no finding, got %d" % rc)
    # MPI-IO's collectives recorded on the file's group, each rank with
    # its own count (rank + 2 doubles) and, reading, its own type
    for r in range(3):
        led = ledger(os.path.join(d, "rank-%d.live.jsonl" % r))[0]
        got = [(l["op"], l.get("group_name"), l["count"]) for l in led
               if l["op"].startswith(("file_", "ifile_"))
               and l["state"] == "done"]
        want = [("file_open", None, 0), ("file_set_view", "world/file1", 0),
                ("file_write_at_all", "world/file1", r + 2),
                ("file_read_at_all", "world/file1", r + 2),
                ("ifile_read_at_all", "world/file1", r + 2),
                ("file_sync", "world/file1", 0),
                ("file_close", "world/file1", 0)]
        if got != want:
            fail("rank %d: MPI-IO calls recorded as %s, expected %s"
                 % (r, got, want))
elif case in ("io_skip", "f_io_skip"):
    if rc != 1 or len(fs) != 1 \
            or kinds[0] not in ("deadlock", "collective_mismatch"):
        fail("expected exit 1 and one deadlock or collective_mismatch, got "
             "%d and %s" % (rc, kinds))
    f = fs[0]
    write, close = (("io_skip.c:30", "io_skip.c:32") if case == "io_skip"
                    else ("f_io_skip.f90:25", "f_io_skip.f90:27"))
    if f["ranks"] != [2] or write not in f.get("site", "") \
            or "file_write_at_all" not in f["message"] \
            or "world/file1" not in f["message"] or close not in f["message"]:
        fail("expected rank 2 named, the write at %s on world/file1 and its "
             "close at %s: %s %s %s" % (write, close, f["ranks"],
                                        f.get("site"), f["message"]))
elif case == "io_inflight":
    if rc != 1 or kinds != ["lost_inplace"]:
        fail("expected exit 1 and one lost_inplace, got %d and %s"
             % (rc, kinds))
    f = fs[0]
    if f["ranks"] != [0, 1, 2] or "io_inflight.c:30" not in f.get("site", "") \
            or "changed the buffer of its MPI_File_iwrite_at_all (512 " \
            "bytes)" not in f["message"] \
            or "completed at io_inflight.c:32" not in f["message"]:
        fail("expected ranks 0-2, the write at io_inflight.c:30 and its "
             "wait at line 32: %s %s %s" % (f["ranks"], f.get("site"),
                                             f["message"]))
elif case == "thread_recv":
    if rc != 1 or kinds != ["deadlock"]:
        fail("expected exit 1 and one deadlock, got %d and %s" % (rc, kinds))
    f = fs[0]
    want = "rank 0 waits in MPI_Recv from rank 1 (tag 5) at " \
           "thread_recv.c:17 in a thread"
    places = {p["rank"]: p for p in f["detail"].get("places", [])}
    text = places.get(0, {}).get("p2p", {}).get("text", "")
    if want not in f["message"] or 0 not in f["ranks"] or \
            text != "MPI_Recv from rank 1 (tag 5) at thread_recv.c:17 in " \
            "a thread":
        fail("expected %r, rank 0's p2p text %r: %s %s"
             % (want, text, f["ranks"], f["message"]))
elif case in ("leaks", "leaks_freed"):
    if rc != 0 or fs:
        fail("a leak is no finding: expected exit 0 and no finding, got %d"
             % rc)
    warns = run.get("analysis", {}).get("warnings", [])
    told = [w for w in warns if w.startswith("MPI objects")]
    out = open(d + ".out").read()
    if case == "leaks_freed":
        if told:
            fail("the objects were all freed, yet: %s" % told)
    else:
        want = [("20 communicators made by MPI_Comm_dup", 33, "MPI_Comm_free",
                 " (20 each)"),
                ("1 datatype made by MPI_Type_vector", 40, "MPI_Type_free",
                 " (1 each)"),
                ("1 group made by MPI_Comm_group", 46, "MPI_Group_free",
                 " (1 each)"),
                ("1 group made by MPI_Group_incl", 49, "MPI_Group_free",
                 " (1 each)"),
                ("1 reduction operation made by MPI_Op_create", 55,
                 "MPI_Op_free", " (1 each)"),
                ("1 persistent request made by MPI_Send_init", 61,
                 "MPI_Request_free", " (1 each)"),
                ("1 persistent request made by MPI_Recv_init", 63,
                 "MPI_Request_free", " (1 each)"),
                ("1 window made by MPI_Win_allocate", 70, "MPI_Win_free",
                 " (1 each)"),
                ("1 file made by MPI_File_open", 76, "MPI_File_close",
                 " (1 each)")]
        if len(told) != len(want):
            fail("expected %d warnings of objects never freed, got %s"
                 % (len(want), told))
        md = open(os.path.join(d, "report.md")).read()
        for what, line, free, each in want:
            text = ("ranks 0-2 reached MPI_Finalize with %s at " % what)
            hit = [w for w in told if text in w and
                   "leaks.c:%d (main) not freed%s" % (line, each) in w and
                   "free each with %s" % free in w]
            if len(hit) != 1:
                fail("no warning saying %r at leaks.c:%d: %s"
                     % (text, line, told))
            if hit[0] not in out:
                fail("not on vqcheck watch's stderr: %s" % hit[0])
            if "leaks.c:%d (main) not freed" % line not in md:
                fail("report.md does not list leaks.c:%d" % line)
        if "## Warnings" not in md:
            fail("report.md has no Warnings section")
elif case == "comm_churn":
    if rc != 0 or fs:
        fail("a correct program: expected exit 0 and no finding, got %d" % rc)
    # each all-reduce on its own copy (a freed copy's memory reused for
    # the next one's must not make the call a short line of the old one)
    want = [("world/dup%d" % k, 1, st) for k in range(1, 51)
            for st in ("entered", "done")]
    for r in range(3):
        led = ledger(os.path.join(d, "rank-%d.live.jsonl" % r))[0]
        got = [(l.get("group_name"), l["seq"], l["state"]) for l in led
               if l["op"] == "all_reduce"]
        if got != want:
            fail("rank %d: all-reduces recorded on %s..., expected %s..."
                 % (r, got[:6], want[:6]))
elif case == "loop_exit":
    if rc != 1 or kinds != ["deadlock"]:
        fail("expected exit 1 and one deadlock, got %d and %s" % (rc, kinds))
    f = fs[0]
    if f["ranks"] != [2] or "loop_exit.c:18" not in f.get("site", "") \
            or "collective #201" not in f["message"]:
        fail("expected rank 2 named at collective #201, loop_exit.c:18: %s "
             "%s %s" % (f["ranks"], f.get("site"), f["message"]))
    # ranks 0 and 1 wait in #201, entered as a short line
    for r in (0, 1):
        led, nshort = ledger(os.path.join(d, "rank-%d.live.jsonl" % r))
        last = led[-1]
        if nshort < 2 * 199 or (last["seq"], last["state"]) != \
                (201, "entered"):
            fail("rank %d: %d short lines, its last call %s %s" %
                 (r, nshort, last["seq"], last["state"]))
elif case == "nb_blocking":
    if rc != 1 or len(fs) != 1 \
            or kinds[0] not in ("deadlock", "collective_mismatch"):
        fail("expected exit 1 and one deadlock or collective_mismatch, got "
             "%d and %s" % (rc, kinds))
    f = fs[0]
    if f["ranks"] != [2] or "nb_blocking.c:14" not in f.get("site", "") \
            or "nb_blocking.c:17" not in f["message"] \
            or "MPI never matches a non-blocking collective with a " \
            "blocking one" not in f["message"]:
        fail("expected rank 2 at nb_blocking.c:14 and 17, told why: %s %s %s"
             % (f["ranks"], f.get("site"), f["message"]))
elif case == "coll_types":
    if rc != 1 or kinds != ["collective_mismatch"]:
        fail("expected exit 1 and one collective_mismatch, got %d and %s"
             % (rc, kinds))
    f = fs[0]
    if f["ranks"] != [0, 1, 2] or "coll_types.c:26" not in f.get("site", "") \
            or "it sends int32 (MPI_INT) and receives float32 (MPI_FLOAT)" \
            not in f["message"]:
        fail("expected ranks 0-2 at coll_types.c:26, int32 and float32: "
             "%s %s %s" % (f["ranks"], f.get("site"), f["message"]))
elif case in ("thread_colls", "thread_colls_clean"):
    clean = case.endswith("_clean")
    if clean and (rc != 0 or fs):
        fail("a correct program: expected exit 0 and no finding, got %d %s"
             % (rc, kinds))
    if not clean:
        if rc != 1 or kinds != ["collective_mismatch"]:
            fail("expected exit 1 and one collective_mismatch, got %d and %s"
                 % (rc, kinds))
        f = fs[0]
        # (two ranks: no majority to tell which one is wrong)
        if f["ranks"] != [0, 1] or \
                "thread_colls.c:41" not in f.get("site", "") \
                or "collective #601 all_reduce" not in f["message"] \
                or "rank 1 all_reduce(float64, count 1, product)" \
                not in f["message"]:
            fail("expected rank 1's product at collective #601, "
                 "thread_colls.c:41: %s %s %s"
                 % (f["ranks"], f.get("site"), f["message"]))
    # both threads' loops, interleaved, written mostly as short lines and
    # read back as every call of each communicator, done at its line
    led, nshort = ledger(os.path.join(d, "rank-0.live.jsonl"))
    comms = sorted({l["group_name"] for l in led
                    if l.get("op") == "all_reduce"})
    if len(comms) != 2:
        fail("rank 0: all-reduces on %s, expected two communicators" % comms)
    for c in comms:
        done = {l["seq"]: l["line"] for l in led
                if l.get("group_name") == c and l["state"] == "done"}
        if [done.get(q) for q in range(1, 801)] != [41] * 800:
            fail("rank 0, %s: calls done %s..." % (c, sorted(done.items())[:4]))
    if nshort < 800:
        fail("rank 0: %d short lines for 1600 calls" % nshort)
    # the threads' lines did interleave (rank 1's threads sleep 20 ms and
    # 2 ms at every 100th call): a call entered as a short line whose done line
    # is a full one, another thread's call having been entered since
    short_in = {(l.get("group_name"), l["seq"]) for l in led if l.get("short")}
    closed = [l for l in led if not l.get("short") and l["state"] == "done"
              and (l.get("group_name"), l["seq"]) in short_in]
    if not closed:
        fail("rank 0's record shows no two threads' calls at once")
elif case == "p2p_tags":
    if rc != 0 or fs:
        fail("a correct program: expected exit 0 and no finding, got %d %s"
             % (rc, kinds))
    lines = [json.loads(l) for l in open(os.path.join(d, "rank-0.p2p.jsonl"))]
    if lines[0].get("uncounted") is not None:
        fail("rank 0's counts said incomplete: %s" % lines[0])
    many = [l for l in lines[1:] if l.get("tag") == -2]
    if not many or sum(l["count"] for l in lines[1:]) != 80000:
        fail("rank 0: %d many-tags channels, %d messages counted (80000)"
             % (len(many), sum(l["count"] for l in lines[1:])))
elif case == "buffered_p2p_tags":
    if rc != 1 or kinds != ["deadlock"]:
        fail("expected exit 1 and one deadlock (a message never received), "
             "got %d and %s" % (rc, kinds))
    f = fs[0]
    if f["ranks"] != [0, 1] or "rank 0 sent 40001 messages to rank 1 " \
            "(over more tags than vqcheck pairs one by one" \
            not in f["message"] or "received only 40000" not in f["message"]:
        fail("expected rank 0's 40001 messages, 40000 received: %s %s"
             % (f["ranks"], f["message"]))
elif case == "io_many":
    if rc != 3 or fs:
        fail("files not followed: expected exit 3 and no finding, got %d %s"
             % (rc, kinds))
    msg = run["training"].get("message", "")
    for r in (0, 1):
        want = ("rank %d: its MPI-IO files past 64 open at once were not "
                "followed" % r)
        if want not in msg:
            fail("the verdict does not say %r: %s" % (want, msg))
elif case == "type_reuse":
    if rc != 1 or kinds != ["collective_mismatch"]:
        fail("expected exit 1 and one collective_mismatch, got %d and %s"
             % (rc, kinds))
    f = fs[0]
    if f["ranks"] != [1] or "type_reuse.c:30" not in f.get("site", "") \
            or "rank 1 broadcast(float32, count 2" not in f["message"] \
            or "ranks 0, 2 broadcast(int32, count 2" not in f["message"]:
        fail("expected rank 1 at type_reuse.c:30, float32 against int32: "
             "%s %s %s" % (f["ranks"], f.get("site"), f["message"]))
elif case == "buffer_race":
    if rc != 1 or kinds != ["lost_inplace", "lost_inplace"]:
        fail("expected exit 1 and two lost_inplace, got %d and %s"
             % (rc, kinds))
    by_rank = {f["ranks"][0]: f for f in fs if len(f["ranks"]) == 1}
    want = {0: ("buffer_race.c:26", "rank 0 changed the buffer of its "
                "MPI_Isend (synchronous) (256 bytes) at buffer_race.c:26 "
                "(main) before the request completed (completed at "
                "buffer_race.c:28 (main))"),
            1: ("buffer_race.c:37", "rank 1's MPI_Recv at buffer_race.c:37 "
                "(main) writes 256 bytes of the buffer of its MPI_Irecv at "
                "buffer_race.c:36 (main)")}
    for r, (site, said) in want.items():
        f = by_rank.get(r)
        if not f or site not in f.get("site", "") or said not in f["message"]:
            fail("rank %d: expected %r at %s" % (r, said, site))
elif case in ("no_finalize", "abort_call", "truncated"):
    said = {"no_finalize": "rank 1 never reached MPI_Finalize (it exited "
                           "without calling MPI_Finalize",
            "abort_call": "rank 1 never reached MPI_Finalize (it called "
                          "MPI_Abort (error code 3) at abort_call.c:13 "
                          "(main))",
            "truncated": "MPI_ERR_TRUNCATE: message truncated, in MPI_Recv "
                         "from rank 0 (tag 5) at truncated.c:15 (main)"}[case]
    named = [f for f in fs if f["kind"] == "rank_failure" and
             1 in f["ranks"] and said in f["message"]]
    if rc != 1 or not named:
        fail("expected exit 1 and a rank_failure saying %r" % said)
elif case == "type_mismatch":
    if rc != 1 or kinds != ["collective_mismatch"]:
        fail("expected exit 1 and one collective_mismatch, got %d and %s"
             % (rc, kinds))
    f = fs[0]
    if f["ranks"] != [0, 1] or "type_mismatch.c:38" not in f.get("site", ""):
        fail("expected ranks 0, 1 at type_mismatch.c:38: %s %s"
             % (f["ranks"], f.get("site")))
    for want in ("rank 1 received message 3 of tag 7 from rank 0 as int64 "
                 "(MPI_LONG)", "rank 0 sent it as float64 (MPI_DOUBLE) with "
                 "MPI_Send at type_mismatch.c:36"):
        if want not in f["message"]:
            fail("the message does not say %r: %s" % (want, f["message"]))
elif case == "init_wait":
    # (wait_for_input, or main where the compiler inlined it)
    f = one_deadlock_of(1, "rank 1 is at init_wait.c:14 (",
                        "rank 0 waits in MPI_Init for every rank to start "
                        "at init_wait.c:24 (main)")
    if "init_wait.c:14" not in f.get("site", ""):
        fail("site %r is not init_wait.c:14" % f.get("site"))
elif case == "finalize_stuck":
    one_deadlock_of(1, "rank 1 is finished (its end line written) but its "
                    "process did not exit")
elif case == "persistent_halo":
    if rc != 0 or fs:
        fail("a correct persistent exchange: expected exit 0 and no finding, "
             "got %d" % rc)
    for r in range(3):
        lines = [json.loads(l) for l in open(os.path.join(
            d, "rank-%d.p2p.jsonl" % r))]
        head, chans = lines[0], lines[1:]
        if head.get("uncounted") is not None or len(chans) != 4 or \
                any(c["count"] != 40 for c in chans):
            fail("rank %d's messages: %s" % (r, lines))
elif case == "persistent_lost":
    one_deadlock_of(0, "rank 0 waits in MPI_Wait for MPI_Send_init "
                    "(synchronous) to rank 1 (tag 4) at persistent_lost.c:24 "
                    "(main)")
elif case == "buffered_persistent_lost":
    if rc != 1 or kinds != ["deadlock"]:
        fail("expected exit 1 and one deadlock, got %d and %s" % (rc, kinds))
    want = ("rank 0 sent 3 messages to rank 1 (tag 4), the first with "
            "MPI_Send_init at persistent_lost.c:18 (main), and rank 1 "
            "received only 2 of them")
    if want not in fs[0]["message"]:
        fail("the message does not say %r: %s" % (want, fs[0]["message"]))
elif case == "f_clean":
    # Fortran (mpi_f08): clean, and its calls were recorded at its own
    # lines (the bindings call PMPI_*: without the routing nothing was).
    if rc != 0 or fs:
        fail("a clean Fortran program: expected exit 0 and no finding, got "
             "%d" % rc)
    for path in sorted(glob.glob(os.path.join(d, "rank-*.live.jsonl"))):
        led = ledger(path)[0]
        done = [(l["op"], l["dtype"], os.path.basename(l["file"]), l["line"])
                for l in led if l.get("state") == "done"]
        for want in (("all_reduce", "float64", "f_clean.f90", 23),
                     ("broadcast", "float64", "f_clean.f90", 33),
                     ("all_reduce", "int32", "f_clean.f90", 40),
                     ("iall_reduce", "float64", "f_clean.f90", 46)):
            if want[:3] == ("broadcast", "float64", "f_clean.f90") and \
                    path.endswith("rank-0.live.jsonl"):
                want = ("broadcast", "float64", "f_clean.f90", 31)  # the pair
            if want not in done:
                fail("%s: %s not recorded: %s" % (path, want, done))
        split = {(l.get("group_name"), tuple(l["group"])) for l in led
                 if "group" in l}
        r = int(os.path.basename(path).split("-")[1].split(".")[0])
        if split != {("world/split1", (r % 2, r % 2 + 2))}:
            fail("%s: the split communicator's lines say %s" % (path, split))
elif case == "f_count_mismatch":
    f = one("collective_mismatch")
    if rc != 1 or f["ranks"] != [1]:
        fail("expected exit 1 and rank 1, got %d and %s" % (rc, f["ranks"]))
    if "f_count_mismatch.f90:16" not in f.get("site", ""):
        fail("site %r is not f_count_mismatch.f90:16 (the MPI_BCAST)"
             % f.get("site"))
    if "count 8" not in f["message"] or "count 4" not in f["message"]:
        fail("the message does not give both counts")
elif case == "f_recv_cycle":
    f = one("deadlock")
    if rc != 1 or not f["ranks"] or not set(f["ranks"]) <= {0, 1, 2}:
        fail("expected exit 1 and ranks among 0-2, got %d and %s"
             % (rc, f["ranks"]))
    reported_in_time()
    for r in f["ranks"]:
        call = "rank %d waits in MPI_Recv from rank %d (tag 7) at " \
               "f_recv_cycle.f90:24" % (r, (r + 2) % 3)
        if call not in f["message"]:
            fail("rank %d is not placed %r: %s" % (r, call, f["message"]))
    if "libmpi" in f["message"] or "libmpi" in f.get("site", ""):
        fail("a Fortran binding's frame is named: %s" % f["message"])
elif case == "f_type_mismatch":
    if rc != 1 or kinds != ["collective_mismatch"]:
        fail("expected exit 1 and one collective_mismatch, got %d and %s"
             % (rc, kinds))
    f = fs[0]
    if f["ranks"] != [0, 1] or "f_type_mismatch.f90:21" not in f.get("site",
                                                                     ""):
        fail("expected ranks 0, 1 at f_type_mismatch.f90:21: %s %s"
             % (f["ranks"], f.get("site")))
    for want in ("rank 1 received message 1 of tag 3 from rank 0 as int32 "
                 "(MPI_INTEGER)", "rank 0 sent it as float32 (MPI_REAL) with "
                 "MPI_Send at f_type_mismatch.f90:18"):
        if want not in f["message"]:
            fail("the message does not say %r: %s" % (want, f["message"]))
elif case == "recv_any":
    f = one("deadlock")
    if rc != 1 or not f["ranks"] or not set(f["ranks"]) <= {0, 1}:
        fail("expected exit 1 and ranks among 0, 1, got %d and %s"
             % (rc, f["ranks"]))
    for want in ("MPI_Recv from any rank (tag 3) at recv_any.c:18 (main)",
                 "MPI_Recv from rank 0 (any tag) on communicator "
                 "world/split1 at recv_any.c:20 (main)"):
        if want not in f["message"]:
            fail("the message does not say %r" % want)
elif case == "pingpong":
    if rc != 0 or fs:
        fail("a correct message exchange: expected exit 0 and no finding, "
             "got %d" % rc)
    if wall < 6:
        fail("it ended after %.1f s, before its 6 s of messages" % wall)
    if "no collective to compare" not in run["training"].get("message", ""):
        fail("run.json does not say there was no collective to compare")
elif case == "negative_count":
    # rank 1 died in the broadcast (a rank_failure, or the mismatch of
    # its count with rank 0's, which names how it died)
    named = [f for f in fs if 1 in f["ranks"] and "MPI_ERR_COUNT" in
             f["message"]]
    if rc != 1 or not named:
        fail("expected exit 1 and a finding naming rank 1 and MPI_ERR_COUNT")
elif case == "crash":
    f = one("rank_failure")
    if rc != 1 or 1 not in f["ranks"]:
        fail("expected exit 1 and rank 1 failed, got %d and %s"
             % (rc, f["ranks"]))
    if "SIGSEGV" not in f["message"] and "signal 11" not in f["message"]:
        fail("the message does not name the signal: %s" % f["message"])
    if "rank 1 never reached MPI_Finalize" not in f["message"] or \
            " step " in f["message"]:
        fail("an MPI program has no steps: %s" % f["message"])
elif case == "request_leak":
    f = one("deadlock")
    if rc != 1 or f["ranks"] != [0, 1, 2]:
        fail("expected exit 1 and ranks 0-2, got %d and %s" % (rc, f["ranks"]))
    if "request_leak.c:12" not in f.get("site", "") or \
            "never completed" not in f["message"]:
        fail("expected the MPI_Iallreduce line and 'never completed'")
elif case == "buffer_overlap":
    f = one("lost_inplace")
    if rc != 1 or f["ranks"] != [0, 1]:
        fail("expected exit 1 and ranks 0, 1, got %d and %s" % (rc, f["ranks"]))
    if "buffer_overlap.c:16" not in f.get("site", "") or \
            "overlap by 56 bytes" not in f["message"]:
        fail("expected the line-16 MPI_Allreduce and its 56 shared bytes")
    if any("buffer_overlap.c:15" in g.get("site", "") for g in fs):
        fail("a finding at the correct all-reduce on line 15")
elif case == "recv_too_small":
    f = one("shape_mismatch")
    if rc != 1 or f["ranks"] != [0, 1]:
        fail("expected exit 1 and ranks 0, 1, got %d and %s" % (rc, f["ranks"]))
    if "recv_too_small.c:13" not in f.get("site", "") or \
            "8 of 16 bytes" not in f["message"]:
        fail("expected the MPI_Allgather line and both sizes")
print("PASS (%s): exit %d, findings %s, %.1f s" % (case, rc, kinds, wall))
PYEOF
