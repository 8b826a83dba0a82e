/* spawn_capture.h: runs a program as a child process and captures what it
 * prints, for the tests that check the built vqcheck as a user meets it
 * (exit code, stdout and stderr kept apart). Library code for tests: it
 * returns an error number instead of asserting, so each test decides how to
 * fail. It also lists a process's children, so a test can check that
 * nothing a command started outlives it. (Not named spawn.h: this directory is on the include path, and that
 * name would hide the system's <spawn.h>.) */
#ifndef VQC_SPAWN_CAPTURE_H
#define VQC_SPAWN_CAPTURE_H

#include <stdarg.h>
#include <sys/types.h>

/* The most arguments (the program's path included) a run may have. */
#define VQC_SPAWN_MAX_ARGS 63

typedef struct vqc_spawn_result {
  int code;  /* exit code; 128 + signal when killed */
  char *out; /* stdout, malloc'd, NUL-terminated */
  char *err; /* stderr, malloc'd, NUL-terminated */
} vqc_spawn_result;

/* Runs argv[0] (a path, not searched in PATH) with the NULL-terminated
 * argv, and waits for it to end. stdin is /dev/null; stdout and stderr go to
 * temporary files that are read back into *r and removed. The environment
 * is this process's, less every variable named `drop` (e.g. "VQC_DEBUG", so
 * the default text is what a test sees; NULL drops nothing), plus `extra`
 * ("NAME=value", or NULL). Returns 0 with *r filled (free it with
 * vqc_spawn_result_free), or an errno value when the child could not be
 * started or waited for or its output not read back (*r then holds nothing
 * to free). */
int vqc_spawn_capture(vqc_spawn_result *r, const char *const *argv,
                      const char *drop, const char *extra);

/* vqc_spawn_capture with the child's stdout opened (write-only, not
 * created) on stdout_path instead of captured, e.g. "/dev/full" to see
 * what a command does when its output cannot be written; r->out is then
 * "" (still to be freed). stdout_path NULL: vqc_spawn_capture. */
int vqc_spawn_capture_stdout(vqc_spawn_result *r, const char *const *argv,
                             const char *drop, const char *extra,
                             const char *stdout_path);

/* vqc_spawn_capture with argv = path, first, then the arguments in `rest`
 * up to a NULL (first == NULL: no arguments), for tests that take their
 * arguments as a `...` list. E2BIG beyond VQC_SPAWN_MAX_ARGS. */
int vqc_spawn_vcapture(vqc_spawn_result *r, const char *path,
                       const char *drop, const char *extra, const char *first,
                       va_list rest);

/* Frees out and err (r itself is the caller's). */
void vqc_spawn_result_free(vqc_spawn_result *r);

/* The whole file at path, malloc'd and NUL-terminated (the caller frees);
 * NULL when it cannot be opened or memory runs out. A file that changes
 * size while being read reads as "". */
char *vqc_read_file(const char *path);

/* The children of pid (from /proc/<p>/stat's ppid), at most max of them,
 * into kids; returns how many. */
int vqc_test_children(pid_t pid, pid_t *kids, int max);

#endif /* VQC_SPAWN_CAPTURE_H */
