! f_clean.f90: a correct Fortran program (the mpi_f08 module), 4 ranks:
! MPI_IN_PLACE, a derived type broadcast against basic elements, a split
! communicator, a non-blocking all-reduce and a ring of non-blocking
! messages, each result checked by the program itself (error stop: exit 1
! on a wrong one). Under `vqcheck watch` it must run clean, its calls
! recorded at this file's lines.
program f_clean
  use mpi_f08
  implicit none
  integer :: rank, size, left, right, i
  real(8) :: total, params(4), got(2)
  integer :: counts(2)
  type(MPI_Datatype) :: pair
  type(MPI_Comm) :: half
  type(MPI_Request) :: req, ring(2)

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)

  total = rank + 1
  call MPI_Allreduce(MPI_IN_PLACE, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, &
                     MPI_COMM_WORLD)
  if (total /= size * (size + 1) / 2) error stop 'allreduce'

  call MPI_Type_contiguous(2, MPI_DOUBLE_PRECISION, pair)
  call MPI_Type_commit(pair)
  params = 0
  if (rank == 0) params = [(real(i, 8), i = 1, 4)]
  if (rank == 0) then
    call MPI_Bcast(params, 2, pair, 0, MPI_COMM_WORLD)
  else
    call MPI_Bcast(params, 4, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD)
  end if
  if (params(4) /= 4) error stop 'bcast'
  call MPI_Type_free(pair)

  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, half)
  counts = [rank, 1]
  call MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INTEGER, MPI_SUM, half)
  if (counts(2) /= size / 2) error stop 'split'
  call MPI_Comm_free(half)

  total = 1
  call MPI_Iallreduce(MPI_IN_PLACE, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, &
                      MPI_COMM_WORLD, req)
  call MPI_Wait(req, MPI_STATUS_IGNORE)
  if (total /= size) error stop 'iallreduce'

  left = mod(rank + size - 1, size)
  right = mod(rank + 1, size)
  call MPI_Irecv(got, 2, MPI_DOUBLE_PRECISION, left, 5, MPI_COMM_WORLD, ring(1))
  call MPI_Isend(params, 2, MPI_DOUBLE_PRECISION, right, 5, MPI_COMM_WORLD, &
                 ring(2))
  call MPI_Waitall(2, ring, MPI_STATUSES_IGNORE)
  if (got(2) /= 2) error stop 'ring'

  call MPI_Finalize()
end program f_clean
