! f_recv_cycle.f90: recv_cycle.c with the mpi module, the exchange in a
! subroutine: every rank receives from its left neighbour before sending,
! so none sends. `vqcheck watch --timeout T` must report a deadlock
! within T + 5 s placing each rank in MPI_Recv at line 24, with its peer.
program f_recv_cycle
  use mpi
  implicit none
  integer :: ierr, rank, size
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  call exchange(rank, size)
  call MPI_Finalize(ierr)
contains
  subroutine exchange(rank, size)
    integer, intent(in) :: rank, size
    integer :: ierr, right, from
    integer :: status(MPI_STATUS_SIZE)
    double precision :: mine, left
    mine = rank
    left = 0
    right = mod(rank + 1, size)
    from = mod(rank + size - 1, size)
    call MPI_Recv(left, 1, MPI_DOUBLE_PRECISION, from, 7, MPI_COMM_WORLD, status, ierr)
    call MPI_Send(mine, 1, MPI_DOUBLE_PRECISION, right, 7, MPI_COMM_WORLD, ierr)
  end subroutine exchange
end program f_recv_cycle
