! f_io_skip.f90: io_skip.c in Fortran (mpi_f08): rank 2, with nothing to
! write, leaves MPI_File_write_at_all out and closes the file while the
! others wait in the write. The bindings call PMPI_File_*, routed to the
! interposer's wrappers: `vqcheck watch` must name rank 2 and the write at
! line 25 on the file's group world/file1.
program f_io_skip
  use mpi_f08
  implicit none
  type(MPI_File) :: fh
  integer :: rank, n, k
  double precision :: particles(1000)
  integer(kind=MPI_OFFSET_KIND) :: at
  character(len=512) :: dir

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call get_environment_variable("TMPDIR", dir, k)
  if (k == 0) dir = "/tmp"
  call MPI_File_open(MPI_COMM_WORLD, trim(dir) // "/f_io_skip.dat", &
                     MPI_MODE_CREATE + MPI_MODE_WRONLY, MPI_INFO_NULL, fh)
  particles = rank
  n = merge(0, 1000, rank == 2) ! rank 2 holds no particles
  at = rank * 8000
  if (n > 0) then ! the bug: a collective call skipped where there is no data
    call MPI_File_write_at_all(fh, at, particles, n, MPI_DOUBLE_PRECISION, MPI_STATUS_IGNORE)
  end if
  call MPI_File_close(fh)
  call MPI_Finalize()
end program f_io_skip
