/* spawn.h: starts a child process the way vqcheck starts every one it
 * supervises (the MPI launcher of `vqcheck run`, supervise.c; the job of
 * `vqcheck watch`, cmd_watch.c; each scenario of `vqcheck suite`,
 * cmd_suite.c): fork and execvp, the child in a process group of its own
 * (set on both sides of the fork, so no signal meant for this process's
 * group reaches it), stdout and stderr flushed first, and what each caller
 * asks for in between. */
#ifndef VQC_SPAWN_H
#define VQC_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct vqc_spawn_opts {
  char *const *argv;        /* NULL-terminated; execvp(argv[0], argv) */
  /* The child gets SIGTERM when this process dies (PR_SET_PDEATHSIG: a
   * launcher then ends its job even when vqcheck is SIGKILLed), and does
   * not start when this process is already gone. */
  bool die_with_parent;
  /* Signals set back to SIG_DFL in the child (handlers are reset by exec
   * anyway; an ignored signal stays ignored otherwise), 0-terminated; NULL:
   * none. */
  const int *default_signals;
  bool stdin_null;          /* stdin from /dev/null */
  /* Descriptors put on the child's stdout and stderr, in that order (so
   * stdout_fd = STDERR_FILENO is this process's stderr); 0: inherited. */
  int stdout_fd;
  int stderr_fd;
  /* Environment changes, NULL-terminated: "NAME=value" sets, "NAME"
   * unsets; NULL: none. */
  const char *const *env;
  /* When exec fails: the child says "<who>: cannot run <argv[0]>:
   * <reason>" on its (redirected) stderr when who is not NULL, and exits
   * 127. */
  const char *who;
  /* Waits until the exec happened or failed (a close-on-exec pipe), and
   * returns the exec's errno when it failed (see vqc_spawn). */
  bool report_exec;
} vqc_spawn_opts;

/* Starts o->argv. Returns 0 with the child's pid in *pid, or an errno:
 * that of fork (or of the report_exec pipe), *pid = -1; with report_exec,
 * that of the exec, *pid the child's, which has then exited (127) and been
 * reaped, its wait status in *status. */
int vqc_spawn(const vqc_spawn_opts *o, pid_t *pid, int *status);

#endif /* VQC_SPAWN_H */
