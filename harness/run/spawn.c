/* spawn.c: fork and exec for every child vqcheck supervises (see
 * spawn.h). */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* In the child, before exec: o's environment changes. */
static void apply_env(const char *const *env) {
  for (size_t i = 0; env && env[i]; i++) {
    const char *eq = strchr(env[i], '=');
    if (!eq) {
      unsetenv(env[i]);
      continue;
    }
    char name[256];
    const size_t len = (size_t)(eq - env[i]);
    if (len >= sizeof name) continue;
    memcpy(name, env[i], len);
    name[len] = '\0';
    setenv(name, eq + 1, 1);
  }
}

/* The child's side: never returns. */
static void child(const vqc_spawn_opts *o, pid_t parent, int exec_fd) {
  setpgid(0, 0);
  if (o->die_with_parent) {
    (void)prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if (getppid() != parent) _exit(127);
  }
  for (size_t i = 0; o->default_signals && o->default_signals[i]; i++)
    signal(o->default_signals[i], SIG_DFL);
  if (o->stdin_null) {
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      if (null != STDIN_FILENO) close(null);
    }
  }
  if (o->stdout_fd > 0) dup2(o->stdout_fd, STDOUT_FILENO);
  if (o->stderr_fd > 0) dup2(o->stderr_fd, STDERR_FILENO);
  apply_env(o->env);
  execvp(o->argv[0], o->argv);
  int e = errno;
  if (o->who)
    fprintf(stderr, "%s: cannot run %s: %s\n", o->who, o->argv[0],
            strerror(e));
  if (exec_fd >= 0) {
    ssize_t w = write(exec_fd, &e, sizeof e);
    (void)w;
  }
  _exit(127);
}

int vqc_spawn(const vqc_spawn_opts *o, pid_t *pid, int *status) {
  *pid = -1;
  int execp[2] = {-1, -1};
  if (o->report_exec) {
    if (pipe(execp) != 0) return errno;
    /* A successful exec closes the write end: read then sees EOF. */
    fcntl(execp[0], F_SETFD, FD_CLOEXEC);
    fcntl(execp[1], F_SETFD, FD_CLOEXEC);
  }
  fflush(stdout);
  fflush(stderr);
  const pid_t parent = getpid();
  const pid_t p = fork();
  if (p < 0) {
    int e = errno;
    if (o->report_exec) {
      close(execp[0]);
      close(execp[1]);
    }
    return e;
  }
  if (p == 0) child(o, parent, execp[1]);
  setpgid(p, p); /* both sides, so no signal finds it in ours */
  *pid = p;
  if (!o->report_exec) return 0;
  close(execp[1]);
  int e = 0;
  ssize_t r;
  do {
    r = read(execp[0], &e, sizeof e);
  } while (r < 0 && errno == EINTR);
  close(execp[0]);
  if (r != (ssize_t)sizeof e || e == 0) return 0;
  int st = 0;
  while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
  }
  if (status) *status = st;
  return e;
}
