/* vqc_mpi_io.c: MPI-IO's collective calls.
 *
 * A file is opened by every member of a communicator at once
 * (MPI_File_open: recorded as the collective "file_open" of that
 * communicator), and from then on has collectives of its own, recorded on
 * the file's group, a comm_info named "<communicator>/file<k>"
 * (info_derived) whose collectives are numbered apart from the
 * communicator's:
 *   file_set_view, file_set_size, file_preallocate, file_set_atomicity,
 *   file_set_info, file_sync, file_seek_shared, file_close;
 *   file_read_all, file_write_all, file_read_at_all, file_write_at_all,
 *   file_read_ordered, file_write_ordered (each with the rank's element
 *   type and count, which may differ by rank: told, not compared);
 *   the split collectives' two halves (file_write_all_begin, ..._end).
 * So a rank that skips a collective write (a rank with nothing to write
 * that leaves the call out: a classic checkpoint hang) or closes the file
 * while the others write is a deadlock or a mismatch naming it, like any
 * other collective's, and a rank waiting in one is placed there.
 *
 * The non-blocking collective reads and writes (MPI_File_iwrite_all, ...)
 * are followed as the other non-blocking collectives are. Not followed:
 * files past FILES_MAX open at once. Independent reads and writes are
 * not collective and are not recorded. Fortran programs' file calls reach
 * these wrappers as their other calls do (vqc_mpi_fortran.c). */
#include "vqc_mpi_internal.h"

#define FILES_MAX 64

typedef struct open_file {
  MPI_File fh;
  comm_info *ci; /* its group: one reference */
} open_file;

static open_file files[FILES_MAX];
static int nfiles;

/* File fh's group, with a reference the caller gives back; NULL: none. */
static comm_info *group_of(MPI_File fh) {
  if (!g.on || fh == MPI_FILE_NULL) return NULL;
  comm_info *ci = NULL;
  lock();
  for (int i = 0; i < nfiles && !ci; i++)
    if (files[i].fh == fh) ci = files[i].ci;
  if (ci) __atomic_add_fetch(&ci->refs, 1, __ATOMIC_RELAXED);
  unlock();
  return ci;
}

/* A collective of file fh's group (blocking or not), recorded as op with
 * count items of dt (MPI_DATATYPE_NULL and 0 for a call without data); its
 * group (a reference: give it back with info_unref) in *ci. */
static void record_file(call *c, bool blocking, MPI_File fh, comm_info **ci,
                        const char *op, MPI_Datatype dt, long long count,
                        uintptr_t pc) {
  c->ci = NULL;
  *ci = group_of(fh);
  if (!*ci) return;
  tinfo t;
  type_info(dt, &t);
  record_ci(c, blocking, *ci, op, "", &t, count, -1, pc);
}
#define begin_file(c, fh, ci, op, dt, n, pc) \
  record_file(c, true, fh, ci, op, dt, n, pc)
#define begin_file_nb(c, fh, ci, op, dt, n, pc) \
  record_file(c, false, fh, ci, op, dt, n, pc)

static int end_file(call *c, comm_info *ci, int rc) {
  end(c, rc);
  info_unref(ci);
  return rc;
}

/* ---- opening and closing */

int MPI_File_open(MPI_Comm comm, const char *filename, int amode,
                  MPI_Info info, MPI_File *fh) {
  call c;
  begin(&c, comm, "file_open", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_File_open(comm, filename, amode, info, fh);
  end(&c, rc);
  if (!g.on || rc != MPI_SUCCESS || !fh || *fh == MPI_FILE_NULL) return rc;
  obj_made(OBJ_FILE, OBJ_KEY(*fh), "MPI_File_open", RA); /* leaks.c */
  comm_info *ci = info_derived(info_of(comm), "file");
  if (!ci) return rc;
  lock();
  const bool room = nfiles < FILES_MAX;
  if (room) files[nfiles++] = (open_file){.fh = *fh, .ci = ci};
  unlock();
  if (!room) {
    info_unref(ci);
    record_incomplete("VQC_EUNSUPPORTED", "its MPI-IO files past %d open "
                      "at once were not followed (%s), so their collectives "
                      "were not checked", FILES_MAX, filename ? filename : "");
  }
  return rc;
}

int MPI_File_close(MPI_File *fh) {
  const MPI_File f = fh ? *fh : MPI_FILE_NULL;
  call c;
  comm_info *ci;
  begin_file(&c, f, &ci, "file_close", MPI_DATATYPE_NULL, 0, RA);
  const int rc = PMPI_File_close(fh);
  end(&c, rc);
  if (rc == MPI_SUCCESS && f != MPI_FILE_NULL)
    obj_freed(OBJ_FILE, OBJ_KEY(f)); /* vqc_mpi_leaks.c */
  if (ci && rc == MPI_SUCCESS) {
    comm_info *own = NULL;
    lock();
    for (int i = 0; i < nfiles && !own; i++)
      if (files[i].fh == f) {
        own = files[i].ci;
        files[i] = files[--nfiles];
      }
    unlock();
    info_unref(own);
  }
  info_unref(ci);
  return rc;
}

/* ---- collectives without data */

int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype,
                      MPI_Datatype filetype, const char *datarep,
                      MPI_Info info) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_set_view", MPI_DATATYPE_NULL, 0, RA);
  return end_file(&c, ci, PMPI_File_set_view(fh, disp, etype, filetype,
                                             datarep, info));
}

int MPI_File_set_size(MPI_File fh, MPI_Offset size) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_set_size", MPI_DATATYPE_NULL, 0, RA);
  return end_file(&c, ci, PMPI_File_set_size(fh, size));
}

int MPI_File_preallocate(MPI_File fh, MPI_Offset size) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_preallocate", MPI_DATATYPE_NULL, 0, RA);
  return end_file(&c, ci, PMPI_File_preallocate(fh, size));
}

int MPI_File_set_atomicity(MPI_File fh, int flag) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_set_atomicity", MPI_DATATYPE_NULL, 0, RA);
  return end_file(&c, ci, PMPI_File_set_atomicity(fh, flag));
}

int MPI_File_set_info(MPI_File fh, MPI_Info info) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_set_info", MPI_DATATYPE_NULL, 0, RA);
  return end_file(&c, ci, PMPI_File_set_info(fh, info));
}

int MPI_File_sync(MPI_File fh) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_sync", MPI_DATATYPE_NULL, 0, RA);
  return end_file(&c, ci, PMPI_File_sync(fh));
}

int MPI_File_seek_shared(MPI_File fh, MPI_Offset offset, int whence) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_seek_shared", MPI_DATATYPE_NULL, 0, RA);
  return end_file(&c, ci, PMPI_File_seek_shared(fh, offset, whence));
}

/* ---- collective reads and writes */

int MPI_File_read_all(MPI_File fh, void *buf, int count,
                      MPI_Datatype datatype, MPI_Status *status) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_read_all", datatype, count, RA);
  return end_file(&c, ci, PMPI_File_read_all(fh, buf, count, datatype,
                                             status));
}

int MPI_File_write_all(MPI_File fh, const void *buf, int count,
                       MPI_Datatype datatype, MPI_Status *status) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_write_all", datatype, count, RA);
  return end_file(&c, ci, PMPI_File_write_all(fh, buf, count, datatype,
                                              status));
}

int MPI_File_read_at_all(MPI_File fh, MPI_Offset offset, void *buf,
                         int count, MPI_Datatype datatype,
                         MPI_Status *status) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_read_at_all", datatype, count, RA);
  return end_file(&c, ci, PMPI_File_read_at_all(fh, offset, buf, count,
                                                datatype, status));
}

int MPI_File_write_at_all(MPI_File fh, MPI_Offset offset, const void *buf,
                          int count, MPI_Datatype datatype,
                          MPI_Status *status) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_write_at_all", datatype, count, RA);
  return end_file(&c, ci, PMPI_File_write_at_all(fh, offset, buf, count,
                                                 datatype, status));
}

int MPI_File_read_ordered(MPI_File fh, void *buf, int count,
                          MPI_Datatype datatype, MPI_Status *status) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_read_ordered", datatype, count, RA);
  return end_file(&c, ci, PMPI_File_read_ordered(fh, buf, count, datatype,
                                                 status));
}

int MPI_File_write_ordered(MPI_File fh, const void *buf, int count,
                           MPI_Datatype datatype, MPI_Status *status) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_write_ordered", datatype, count, RA);
  return end_file(&c, ci, PMPI_File_write_ordered(fh, buf, count, datatype,
                                                  status));
}

/* ---- split collectives: each half a collective of its own */

int MPI_File_read_all_begin(MPI_File fh, void *buf, int count,
                            MPI_Datatype datatype) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_read_all_begin", datatype, count, RA);
  return end_file(&c, ci, PMPI_File_read_all_begin(fh, buf, count,
                                                   datatype));
}

int MPI_File_read_all_end(MPI_File fh, void *buf, MPI_Status *status) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_read_all_end", MPI_DATATYPE_NULL, 0, RA);
  return end_file(&c, ci, PMPI_File_read_all_end(fh, buf, status));
}

int MPI_File_write_all_begin(MPI_File fh, const void *buf, int count,
                             MPI_Datatype datatype) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_write_all_begin", datatype, count, RA);
  return end_file(&c, ci, PMPI_File_write_all_begin(fh, buf, count,
                                                    datatype));
}

int MPI_File_write_all_end(MPI_File fh, const void *buf, MPI_Status *status) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_write_all_end", MPI_DATATYPE_NULL, 0, RA);
  return end_file(&c, ci, PMPI_File_write_all_end(fh, buf, status));
}

int MPI_File_read_at_all_begin(MPI_File fh, MPI_Offset offset, void *buf,
                               int count, MPI_Datatype datatype) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_read_at_all_begin", datatype, count, RA);
  return end_file(&c, ci, PMPI_File_read_at_all_begin(fh, offset, buf,
                                                      count, datatype));
}

int MPI_File_read_at_all_end(MPI_File fh, void *buf, MPI_Status *status) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_read_at_all_end", MPI_DATATYPE_NULL, 0, RA);
  return end_file(&c, ci, PMPI_File_read_at_all_end(fh, buf, status));
}

int MPI_File_write_at_all_begin(MPI_File fh, MPI_Offset offset,
                                const void *buf, int count,
                                MPI_Datatype datatype) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_write_at_all_begin", datatype, count, RA);
  return end_file(&c, ci, PMPI_File_write_at_all_begin(fh, offset, buf,
                                                       count, datatype));
}

int MPI_File_write_at_all_end(MPI_File fh, const void *buf,
                              MPI_Status *status) {
  call c;
  comm_info *ci;
  begin_file(&c, fh, &ci, "file_write_at_all_end", MPI_DATATYPE_NULL, 0,
             RA);
  return end_file(&c, ci, PMPI_File_write_at_all_end(fh, buf, status));
}

/* ---- non-blocking collective reads and writes (MPI 3.1): recorded at
 * the I-call under their own names ("ifile_write_all": MPI never matches
 * one with a blocking call), done when a wait or test completes them
 * (vqc_mpi_wait.c); a write's buffer is hashed at the I-call and again at
 * completion (a buffer changed in flight: vqc_mpi_races.c). */

static int posted_file(call *c, comm_info *ci, int rc, MPI_Request *req) {
  posted(c, rc, req);
  info_unref(ci);
  return rc;
}

int MPI_File_iread_all(MPI_File fh, void *buf, int count,
                       MPI_Datatype datatype, MPI_Request *request) {
  call c;
  comm_info *ci;
  begin_file_nb(&c, fh, &ci, "ifile_read_all", datatype, count, RA);
  return posted_file(&c, ci, PMPI_File_iread_all(fh, buf, count, datatype,
                                                 request), request);
}

int MPI_File_iwrite_all(MPI_File fh, const void *buf, int count,
                        MPI_Datatype datatype, MPI_Request *request) {
  call c;
  comm_info *ci;
  begin_file_nb(&c, fh, &ci, "ifile_write_all", datatype, count, RA);
  race_note_coll(&c, "MPI_File_iwrite_all", buf, count, datatype);
  return posted_file(&c, ci, PMPI_File_iwrite_all(fh, buf, count, datatype,
                                                  request), request);
}

int MPI_File_iread_at_all(MPI_File fh, MPI_Offset offset, void *buf,
                          int count, MPI_Datatype datatype,
                          MPI_Request *request) {
  call c;
  comm_info *ci;
  begin_file_nb(&c, fh, &ci, "ifile_read_at_all", datatype, count, RA);
  return posted_file(&c, ci, PMPI_File_iread_at_all(fh, offset, buf, count,
                                                    datatype, request),
                     request);
}

int MPI_File_iwrite_at_all(MPI_File fh, MPI_Offset offset, const void *buf,
                           int count, MPI_Datatype datatype,
                           MPI_Request *request) {
  call c;
  comm_info *ci;
  begin_file_nb(&c, fh, &ci, "ifile_write_at_all", datatype, count, RA);
  race_note_coll(&c, "MPI_File_iwrite_at_all", buf, count, datatype);
  return posted_file(&c, ci, PMPI_File_iwrite_at_all(fh, offset, buf, count,
                                                     datatype, request),
                     request);
}

/* MPI_Finalize: files never closed let go (MPI requires them closed; not
 * a finding of vqcheck's: the program's data is what it wrote). */
void io_finalize(void) {
  lock();
  for (int i = 0; i < nfiles; i++) info_unref(files[i].ci);
  nfiles = 0;
  unlock();
}
