! f_type_mismatch.f90: rank 0 sends REAL values that rank 1 receives as
! INTEGER (both 4 bytes, so MPI moves the bits without an error and rank 1
! computes with garbage). mpi_f08, 2 ranks. `vqcheck watch` must report a
! collective_mismatch: rank 1 received the message as int32 (MPI_INTEGER),
! rank 0 sent it as float32 (MPI_REAL) at line 18.
program f_type_mismatch
  use mpi_f08
  implicit none
  integer :: rank
  real :: weights(4)
  integer :: counts(4)
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  weights = 0.5
  counts = 0
  if (rank == 0) then
    call MPI_Barrier(MPI_COMM_WORLD)
    call MPI_Send(weights, 4, MPI_REAL, 1, 3, MPI_COMM_WORLD)
  else
    call MPI_Barrier(MPI_COMM_WORLD)
    call MPI_Recv(counts, 4, MPI_INTEGER, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  end if
  call MPI_Finalize()
end program f_type_mismatch
