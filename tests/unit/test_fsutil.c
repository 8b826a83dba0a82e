/* test_fsutil.c: the atomic file write and mkdir -p (vqc/fsutil.h).
 *
 * Every case runs in a fresh temporary directory (made by the fixture,
 * removed with everything in it afterwards) and checks exact bytes:
 *
 *   write_new / write_replace / write_empty
 *                      the file holds exactly the bytes given (all 256 byte
 *                      values, NULs included; a longer old file is replaced,
 *                      not overwritten in place; 0 bytes gives an empty
 *                      file); no "*.tmp.*" is left in the directory;
 *   write_no_dir       a path whose directory does not exist: VQC_EIO, the
 *                      message names the path, nothing is created;
 *   writer_fails       a writer callback that writes half its content and
 *                      fails: its status and message come back, the old
 *                      file is intact byte for byte, no temporary is left;
 *   stream_error       a writer that returns OK on a stream in error:
 *                      VQC_EIO, the old file intact (the caller checks the
 *                      stream, as the header promises);
 *   stale_temporary    a leftover "<path>.tmp.<pid>" (of a crashed process
 *                      with this pid) is replaced, and a link planted at
 *                      that name is not followed;
 *   mkdir_*            nested creation, an existing directory, a path
 *                      through or onto a regular file (VQC_EIO), an empty or
 *                      4096-byte path (VQC_EINVAL). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_paths.h"
#include "vqc/fsutil.h"

/* ---- helpers */

/* The case's temporary directory (absolute, from the fixture). */
static char tmpdir[256];


static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-fsutil-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

/* "<tmpdir>/<name>" into buf (n bytes). */
static char *in_tmp(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/%s", tmpdir, name);
  return buf;
}

/* The whole file at path (malloc'd, at least 1 byte; caller frees; NULL
 * when it cannot be read), its size in *n. */
static unsigned char *slurp(const char *path, size_t *n) {
  struct stat st;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  if (fstat(fileno(f), &st) != 0) {
    fclose(f);
    return NULL;
  }
  unsigned char *buf = malloc((size_t)st.st_size + 1);
  if (buf) *n = fread(buf, 1, (size_t)st.st_size + 1, f);
  fclose(f);
  return buf;
}

/* Asserts that path holds exactly the n bytes at want. */
static void assert_file_is(const char *path, const void *want, size_t n) {
  size_t got_n = 0;
  unsigned char *got = slurp(path, &got_n);
  cr_assert_not_null(got, "cannot read %s: %s", path, strerror(errno));
  cr_assert_eq(got_n, n, "%s: %zu bytes, want %zu", path, got_n, n);
  cr_assert(n == 0 || memcmp(got, want, n) == 0, "%s: content differs", path);
  free(got);
}

/* Asserts that dir holds exactly the names of `want` (sorted, joined
 * with ','). */
static void assert_listing(const char *dir, const char *want) {
  char got[4096];
  cr_assert_eq(vqc_test_dir_listing(dir, got, sizeof got), 0,
               "cannot read %s: %s", dir, strerror(errno));
  cr_assert_str_eq(got, want, "%s holds [%s], want [%s]", dir, got, want);
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

TestSuite(fsutil, .init = make_tmpdir, .fini = remove_tmpdir);

/* ---- vqc_write_file_atomic */

Test(fsutil, write_new) {
  /* Every byte value, NUL and newline included: a text-mode or string
   * write would lose some of them. */
  unsigned char bytes[256];
  for (int i = 0; i < 256; i++) bytes[i] = (unsigned char)(255 - i);
  char path[512];
  in_tmp(path, sizeof path, "data.bin");
  cr_assert_eq(vqc_write_file_atomic(path, bytes, sizeof bytes), VQC_OK, "%s",
               vqc_last_error());
  assert_file_is(path, bytes, sizeof bytes);
  assert_listing(tmpdir, "data.bin");
}

Test(fsutil, write_replace) {
  char path[512];
  in_tmp(path, sizeof path, "run.json");
  const char old_text[] = "the old content, longer than the new one\n";
  const char new_text[] = "new\n";
  cr_assert_eq(vqc_write_file_atomic(path, old_text, strlen(old_text)), VQC_OK);
  assert_file_is(path, old_text, strlen(old_text));
  /* Shorter than the old file: a write in place without truncation would
   * leave the old tail behind. */
  cr_assert_eq(vqc_write_file_atomic(path, new_text, strlen(new_text)), VQC_OK,
               "%s", vqc_last_error());
  assert_file_is(path, new_text, strlen(new_text));
  assert_listing(tmpdir, "run.json");
}

Test(fsutil, write_replace_is_a_new_file) {
  /* Replaced by rename, not rewritten in place: a reader that opened the
   * old file keeps reading the old content (what "never sees half of it"
   * rests on). */
  char path[512];
  in_tmp(path, sizeof path, "report.md");
  cr_assert_eq(vqc_write_file_atomic(path, "old!", 4), VQC_OK);
  FILE *reader = fopen(path, "rb");
  cr_assert_not_null(reader);
  cr_assert_eq(vqc_write_file_atomic(path, "NEW?", 4), VQC_OK);
  char seen[8] = "";
  cr_assert_eq(fread(seen, 1, 4, reader), 4u);
  fclose(reader);
  cr_assert_str_eq(seen, "old!");
  assert_file_is(path, "NEW?", 4);
}

Test(fsutil, write_empty) {
  char path[512];
  in_tmp(path, sizeof path, "empty");
  /* A new 0-byte file; data may be NULL when n is 0. */
  cr_assert_eq(vqc_write_file_atomic(path, NULL, 0), VQC_OK, "%s",
               vqc_last_error());
  assert_file_is(path, "", 0);
  /* A non-empty file replaced by 0 bytes. */
  cr_assert_eq(vqc_write_file_atomic(path, "abc", 3), VQC_OK);
  assert_file_is(path, "abc", 3);
  cr_assert_eq(vqc_write_file_atomic(path, "ignored", 0), VQC_OK, "%s",
               vqc_last_error());
  assert_file_is(path, "", 0);
  assert_listing(tmpdir, "empty");
}

Test(fsutil, write_null_data) {
  char path[512];
  in_tmp(path, sizeof path, "f");
  cr_assert_eq(vqc_write_file_atomic(path, NULL, 4), VQC_EINVAL);
  assert_listing(tmpdir, "");
}

Test(fsutil, write_no_dir) {
  char path[512];
  in_tmp(path, sizeof path, "no-such-dir/run.json");
  vqc_clear_error();
  cr_assert_eq(vqc_write_file_atomic(path, "x", 1), VQC_EIO);
  const char *msg = vqc_last_error();
  cr_assert_not_null(strstr(msg, path), "message does not name %s: %s", path,
                     msg);
  /* Neither the directory nor anything else was made. */
  assert_listing(tmpdir, "");
}

/* ---- vqc_write_atomic with writers that fail */

/* Writes half of the string at user, then fails as a real writer would
 * (a ledger dump that meets a bad tensor, say). */
static vqc_status write_half_then_fail(FILE *f, void *user) {
  const char *text = user;
  fwrite(text, 1, strlen(text) / 2, f);
  fflush(f); /* the half really reaches the temporary file */
  return vqc_error(VQC_EINVAL, "writer gave up on purpose");
}

Test(fsutil, writer_fails) {
  char path[512];
  in_tmp(path, sizeof path, "ledger.bin");
  const unsigned char old_bytes[] = {0, 1, 2, 3, 0xff, 0x80, '\n', 0};
  cr_assert_eq(vqc_write_file_atomic(path, old_bytes, sizeof old_bytes),
               VQC_OK);
  char text[] = "content the failed writer would have written";
  vqc_clear_error();
  cr_assert_eq(vqc_write_atomic(path, write_half_then_fail, text), VQC_EINVAL);
  /* The writer's own message is the one reported. */
  cr_assert_not_null(strstr(vqc_last_error(), "writer gave up on purpose"),
                     "message: %s", vqc_last_error());
  assert_file_is(path, old_bytes, sizeof old_bytes);
  assert_listing(tmpdir, "ledger.bin");
}

Test(fsutil, writer_fails_new_file) {
  /* A failed first write leaves no file at all (not an empty one). */
  char path[512];
  in_tmp(path, sizeof path, "fresh");
  char text[] = "0123456789";
  cr_assert_eq(vqc_write_atomic(path, write_half_then_fail, text), VQC_EINVAL);
  assert_listing(tmpdir, "");
}

/* Writes its string, then leaves the stream in error and still returns OK:
 * reading from a write-only stream sets the error flag (glibc: EBADF).
 * The header says the caller checks the stream once the writer returns. */
static vqc_status write_then_break_stream(FILE *f, void *user) {
  fputs(user, f);
  fflush(f);
  (void)fgetc(f);
  return VQC_OK;
}

Test(fsutil, stream_error) {
  char path[512];
  in_tmp(path, sizeof path, "status.txt");
  cr_assert_eq(vqc_write_file_atomic(path, "old\n", 4), VQC_OK);
  char text[] = "new content\n";
  vqc_clear_error();
  cr_assert_eq(vqc_write_atomic(path, write_then_break_stream, text), VQC_EIO);
  cr_assert_not_null(strstr(vqc_last_error(), path), "message: %s",
                     vqc_last_error());
  assert_file_is(path, "old\n", 4);
  assert_listing(tmpdir, "status.txt");
}

/* ---- the temporary's name */

Test(fsutil, stale_temporary) {
  char path[512], tmp[600], victim[512];
  in_tmp(path, sizeof path, "run.json");
  /* Criterion runs each case in its own process: getpid() is the pid the
   * writer uses. */
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  in_tmp(victim, sizeof victim, "victim");

  /* A leftover regular file of that name: taken over, then gone. */
  cr_assert_eq(vqc_write_file_atomic(tmp, "stale leftover", 14), VQC_OK);
  cr_assert_eq(vqc_write_file_atomic(path, "one", 3), VQC_OK, "%s",
               vqc_last_error());
  assert_file_is(path, "one", 3);
  assert_listing(tmpdir, "run.json");

  /* A link planted at that name: the file it points at is not written. */
  cr_assert_eq(vqc_write_file_atomic(victim, "keep me", 7), VQC_OK);
  cr_assert_eq(symlink(victim, tmp), 0, "symlink: %s", strerror(errno));
  cr_assert_eq(vqc_write_file_atomic(path, "two", 3), VQC_OK, "%s",
               vqc_last_error());
  assert_file_is(path, "two", 3);
  assert_file_is(victim, "keep me", 7);
  assert_listing(tmpdir, "run.json,victim");
}

/* ---- vqc_mkdir_p */

Test(fsutil, mkdir_nested) {
  char path[512], part[512];
  in_tmp(path, sizeof path, "a/b/c");
  cr_assert_eq(vqc_mkdir_p(path), VQC_OK, "%s", vqc_last_error());
  cr_assert(is_dir(in_tmp(part, sizeof part, "a")));
  cr_assert(is_dir(in_tmp(part, sizeof part, "a/b")));
  cr_assert(is_dir(path));
  /* The new directory is usable: a file can be written in it. */
  cr_assert_eq(vqc_write_file_atomic(in_tmp(part, sizeof part, "a/b/c/f"),
                                     "x", 1),
               VQC_OK);
  assert_listing(path, "f");
}

Test(fsutil, mkdir_existing) {
  char path[512], file[512];
  in_tmp(path, sizeof path, "d");
  cr_assert_eq(vqc_mkdir_p(path), VQC_OK);
  cr_assert_eq(vqc_write_file_atomic(in_tmp(file, sizeof file, "d/keep"), "k",
                                     1),
               VQC_OK);
  /* Again (a peer rank made it first): fine, and what is inside stays. */
  cr_assert_eq(vqc_mkdir_p(path), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(vqc_mkdir_p(tmpdir), VQC_OK, "%s", vqc_last_error());
  /* A trailing slash names the same directory. */
  in_tmp(path, sizeof path, "d/");
  cr_assert_eq(vqc_mkdir_p(path), VQC_OK, "%s", vqc_last_error());
  assert_file_is(file, "k", 1);
}

Test(fsutil, mkdir_through_file) {
  char file[512], path[512];
  in_tmp(file, sizeof file, "plain");
  cr_assert_eq(vqc_write_file_atomic(file, "p", 1), VQC_OK);
  /* A parent that is a regular file. */
  in_tmp(path, sizeof path, "plain/sub/dir");
  vqc_clear_error();
  cr_assert_eq(vqc_mkdir_p(path), VQC_EIO);
  cr_assert_not_null(strstr(vqc_last_error(), file), "message: %s",
                     vqc_last_error());
  /* The path itself a regular file: "exists" but is not a directory. */
  vqc_clear_error();
  cr_assert_eq(vqc_mkdir_p(file), VQC_EIO);
  cr_assert_not_null(strstr(vqc_last_error(), file), "message: %s",
                     vqc_last_error());
  assert_file_is(file, "p", 1);
  assert_listing(tmpdir, "plain");
}

Test(fsutil, mkdir_bad_path) {
  cr_assert_eq(vqc_mkdir_p(""), VQC_EINVAL);
  /* 4096 bytes: one too many (the limit is below PATH_MAX's terminator). */
  char *long_path = malloc(4097);
  cr_assert_not_null(long_path);
  snprintf(long_path, 4097, "%s/", tmpdir);
  memset(long_path + strlen(long_path), 'x', 4096 - strlen(long_path));
  long_path[4096] = '\0';
  cr_assert_eq(strlen(long_path), 4096u);
  cr_assert_eq(vqc_mkdir_p(long_path), VQC_EINVAL);
  free(long_path);
  assert_listing(tmpdir, "");
}
