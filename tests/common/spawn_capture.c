/* spawn_capture.c: child processes with captured output for tests (see
 * spawn_capture.h). */
#include "spawn_capture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

char *vqc_read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = n >= 0 ? calloc((size_t)n + 1, 1) : NULL;
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = '\0';
  fclose(f);
  return s;
}

/* This process's environment less the variables named `drop`, plus
 * `extra`: a malloc'd array of borrowed strings (free the array only). */
static char **child_env(const char *drop, const char *extra) {
  size_t nenv = 0;
  while (environ[nenv]) nenv++;
  char **envp = calloc(nenv + 2, sizeof *envp);
  if (!envp) return NULL;
  size_t dlen = drop ? strlen(drop) : 0, k = 0;
  for (size_t i = 0; i < nenv; i++) {
    const char *e = environ[i];
    if (drop && strncmp(e, drop, dlen) == 0 && e[dlen] == '=') continue;
    envp[k++] = environ[i];
  }
  if (extra) envp[k++] = (char *)extra;
  envp[k] = NULL;
  return envp;
}

/* A new empty temporary file from `templ` (a mkstemp template, rewritten
 * in place); 0 or an errno value. */
static int temp_file(char *templ) {
  int fd = mkstemp(templ);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

int vqc_spawn_capture(vqc_spawn_result *r, const char *const *argv,
                      const char *drop, const char *extra) {
  return vqc_spawn_capture_stdout(r, argv, drop, extra, NULL);
}

int vqc_spawn_capture_stdout(vqc_spawn_result *r, const char *const *argv,
                             const char *drop, const char *extra,
                             const char *stdout_path) {
  memset(r, 0, sizeof *r);
  char out_path[] = "/tmp/vqc-spawn-out-XXXXXX";
  char err_path[] = "/tmp/vqc-spawn-err-XXXXXX";
  char **envp = child_env(drop, extra);
  if (!envp) return ENOMEM;
  int rc = temp_file(out_path);
  if (rc != 0) {
    free(envp);
    return rc;
  }
  rc = temp_file(err_path);
  if (rc != 0) {
    unlink(out_path);
    free(envp);
    return rc;
  }

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY,
                                   0);
  if (stdout_path)
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, stdout_path,
                                     O_WRONLY, 0);
  else
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path,
                                     O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path,
                                   O_WRONLY | O_TRUNC, 0);
  pid_t pid;
  /* posix_spawn's argv and envp are char *const[] for historical reasons;
   * it does not write to them. */
  rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  free(envp);
  int status = 0;
  if (rc == 0 && waitpid(pid, &status, 0) != pid) rc = errno;
  if (rc == 0) {
    r->code =
        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r->out = vqc_read_file(out_path);
    r->err = vqc_read_file(err_path);
    if (!r->out || !r->err) {
      vqc_spawn_result_free(r);
      rc = EIO;
    }
  }
  unlink(out_path);
  unlink(err_path);
  return rc;
}

int vqc_spawn_vcapture(vqc_spawn_result *r, const char *path,
                       const char *drop, const char *extra, const char *first,
                       va_list rest) {
  const char *argv[VQC_SPAWN_MAX_ARGS + 1];
  int n = 0;
  argv[n++] = path;
  for (const char *a = first; a != NULL; a = va_arg(rest, const char *)) {
    if (n == VQC_SPAWN_MAX_ARGS) {
      memset(r, 0, sizeof *r);
      return E2BIG;
    }
    argv[n++] = a;
  }
  argv[n] = NULL;
  return vqc_spawn_capture(r, argv, drop, extra);
}

void vqc_spawn_result_free(vqc_spawn_result *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

int vqc_test_children(pid_t pid, pid_t *kids, int max) {
  int n = 0;
  DIR *d = opendir("/proc");
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < max) {
    char *end;
    const long p = strtol(e->d_name, &end, 10);
    if (*end != '\0' || p <= 0) continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", p);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    const size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces, not ')'s last. */
    const char *close_paren = strrchr(buf, ')');
    char state;
    long ppid;
    if (close_paren && sscanf(close_paren + 1, " %c %ld", &state, &ppid) == 2 &&
        ppid == (long)pid)
      kids[n++] = (pid_t)p;
  }
  closedir(d);
  return n;
}
