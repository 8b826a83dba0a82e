! f_count_mismatch.f90: count_mismatch.c in fixed-form habits (mpif.h):
! rank 1 broadcasts 8 values where the others broadcast 4 (its count
! computed from its rank). `vqcheck watch` must report a
! collective_mismatch naming rank 1 at the MPI_BCAST line (16).
      program f_count_mismatch
      implicit none
      include 'mpif.h'
      integer ierr, rank, n
      double precision params(8)

      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      params = 0
      n = 4
      if (rank .eq. 1) n = 8
      call MPI_BCAST(params, n, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
      call MPI_BARRIER(MPI_COMM_WORLD, ierr)
      call MPI_FINALIZE(ierr)
      end
