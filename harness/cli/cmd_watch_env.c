/* cmd_watch_env.c: what the environment of `vqcheck watch`'s job points
 * to, found before the job starts: BRIDGE_DIR (the Python bridge's
 * sitecustomize.py), MPI_LIB (the interposer libvqcheck_mpi.so), whether
 * the job is an MPI program's (an MPI launcher's name: mpiexec, mpirun,
 * orterun, srun), whether COMMAND can run at all, and a free MASTER_PORT.
 * The contract (which candidates, in which order; what the job gets):
 * cmd_watch.c's file comment; cmd_watch.c sets the variables. */
#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_watch_internal.h"
#include "watch_job.h"

#ifndef VQC_BRIDGE_SOURCE_DIR
#define VQC_BRIDGE_SOURCE_DIR ""
#endif

/* Whether dir/sitecustomize.py is a readable file. */
static bool has_bridge(const char *dir) {
  char path[4200];
  struct stat st;
  int n = snprintf(path, sizeof path, "%s/sitecustomize.py", dir);
  return n > 0 && (size_t)n < sizeof path && stat(path, &st) == 0 &&
         S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

/* BRIDGE_DIR (cmd_watch.c's file comment), absolute, into buf; false when no
 * candidate holds sitecustomize.py (the message is printed). */
bool vqc_cw_find_bridge(char *buf, size_t n) {
  const char *env = getenv("VQC_BRIDGE_DIR");
  char cand[3][4200];
  int nc = 0;
  if (env && env[0]) {
    snprintf(cand[nc++], sizeof cand[0], "%s", env);
  }
  if (vqc_cli_installed_data("bridge", cand[nc], sizeof cand[0])) nc++;
  if (VQC_BRIDGE_SOURCE_DIR[0])
    snprintf(cand[nc++], sizeof cand[0], "%s", VQC_BRIDGE_SOURCE_DIR);
  for (int i = 0; i < nc; i++) {
    if (!has_bridge(cand[i])) {
      if (i == 0 && env && env[0])
        fprintf(stderr, "vqcheck watch: warning: VQC_BRIDGE_DIR=%s holds no "
                "sitecustomize.py; looking further\n", env);
      continue;
    }
    char abs[PATH_MAX];
    if (!realpath(cand[i], abs)) continue;
    snprintf(buf, n, "%s", abs);
    return true;
  }
  fprintf(stderr, "vqcheck watch: the vqcheck Python bridge "
          "(sitecustomize.py) is not installed: looked in %s%s%s%s%s\n"
          "hint: install the vqcheck package ('pip install .' in vqcheck's "
          "source tree, into the environment this vqcheck runs from), or "
          "set VQC_BRIDGE_DIR to the directory holding the bridge's "
          "sitecustomize.py\n", nc > 0 ? cand[0] : "",
          nc > 1 ? ", " : "", nc > 1 ? cand[1] : "", nc > 2 ? ", " : "",
          nc > 2 ? cand[2] : "");
  return false;
}

/* BRIDGE_DIR for an MPI job, where the bridge is optional: the first
 * candidate vqc_cw_find_bridge would take, absolute, into bridge
 * (PATH_MAX bytes), with no message; "" when none holds the bridge. */
void vqc_cw_find_bridge_quietly(char *bridge) {
  const char *env = getenv("VQC_BRIDGE_DIR");
  char cand[4200];
  if (!(env && env[0] && has_bridge(env) && realpath(env, bridge)) &&
      !(vqc_cli_installed_data("bridge", cand, sizeof cand) &&
        has_bridge(cand) && realpath(cand, bridge)) &&
      !(VQC_BRIDGE_SOURCE_DIR[0] && has_bridge(VQC_BRIDGE_SOURCE_DIR) &&
        realpath(VQC_BRIDGE_SOURCE_DIR, bridge)))
    bridge[0] = '\0';
}

/* Whether the job is an MPI program's (cmd_watch.c's file comment): --mpi,
 * or an MPI launcher's name with no argument naming Python. */
bool vqc_cw_mpi_job(const vqc_watch_opts *o) {
  if (vqc_cw_mpi_opt != VQC_CW_MPI_AUTO || o->nproc > 0)
    return vqc_cw_mpi_opt == VQC_CW_MPI_FORCE;
  const char *b = strrchr(o->cmd_argv[0], '/');
  b = b ? b + 1 : o->cmd_argv[0];
  static const char *const launchers[] = {"mpiexec", "mpirun", "orterun",
                                           "srun"};
  bool launcher = false;
  for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
    const size_t l = strlen(launchers[i]);
    launcher = launcher || (strncmp(b, launchers[i], l) == 0 &&
                            (b[l] == '\0' || b[l] == '.'));
  }
  if (!launcher) return false;
  for (int i = 1; i < o->cmd_argc; i++) {
    const char *a = o->cmd_argv[i];
    const char *ab = strrchr(a, '/');
    ab = ab ? ab + 1 : a;
    const size_t l = strlen(a);
    if ((l > 3 && strcmp(a + l - 3, ".py") == 0) ||
        strncmp(ab, "python", 6) == 0)
      return false;
  }
  return true;
}

/* MPI_LIB (cmd_watch.c's file comment), absolute, into buf; false when
 * none is there (the message is printed). */
bool vqc_cw_find_mpi_lib(char *buf, size_t n) {
  const char *env = getenv("VQC_MPI_PRELOAD");
  if (env && env[0]) { /* asked for: that one, or an error, never another */
    char abs[PATH_MAX];
    struct stat st;
    if (!realpath(env, abs) || stat(abs, &st) != 0 || !S_ISREG(st.st_mode) ||
        access(abs, R_OK) != 0) {
      fprintf(stderr, "vqcheck watch: VQC_MPI_PRELOAD names %s, which is "
              "not a readable file\nhint: point it at a built "
              "libvqcheck_mpi.so, or unset it to use the installed one\n",
              env);
      return false;
    }
    snprintf(buf, n, "%s", abs);
    return true;
  }
  char cand[3][4200];
  int nc = 0;
#ifdef VQC_MPI_PRELOAD_INSTALLED
  {
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash = len > 0 ? (self[len] = '\0', strrchr(self, '/')) : NULL;
    if (slash) {
      *slash = '\0';
      snprintf(cand[nc++], sizeof cand[0], "%s/../%s", self,
               VQC_MPI_PRELOAD_INSTALLED);
    }
  }
#endif
#ifdef VQC_MPI_PRELOAD_BUILD
  snprintf(cand[nc++], sizeof cand[0], "%s", VQC_MPI_PRELOAD_BUILD);
#endif
  for (int i = 0; i < nc; i++) {
    char abs[PATH_MAX];
    struct stat st;
    if (!realpath(cand[i], abs) || stat(abs, &st) != 0 ||
        !S_ISREG(st.st_mode) || access(abs, R_OK) != 0)
      continue;
    snprintf(buf, n, "%s", abs);
    return true;
  }
  fprintf(stderr, "vqcheck watch: the MPI interposer (libvqcheck_mpi.so) "
          "is not installed: looked in %s%s%s%s%s\nhint: build vqcheck with "
          "MPI (OpenMPI found by CMake), or set VQC_MPI_PRELOAD to the "
          "library; --no-mpi runs the job without it\n",
          nc > 0 ? cand[0] : "(nowhere: this vqcheck was built without MPI)",
          nc > 1 ? ", " : "", nc > 1 ? cand[1] : "", nc > 2 ? ", " : "",
          nc > 2 ? cand[2] : "");
  return false;
}

/* Whether execvp would find an executable file for prog (its rules: a name
 * with a slash as it is, else every $PATH entry). */
bool vqc_cw_executable(const char *prog) {
  struct stat st;
  if (strchr(prog, '/'))
    return stat(prog, &st) == 0 && S_ISREG(st.st_mode) &&
           access(prog, X_OK) == 0;
  const char *path = getenv("PATH");
  char *copy = strdup(path && path[0] ? path : "/usr/local/bin:/usr/bin:/bin");
  if (!copy) return false;
  bool found = false;
  char *rest = copy;
  for (char *dir = rest; dir && !found; dir = rest) {
    char *colon = strchr(dir, ':');
    rest = colon ? colon + 1 : NULL;
    if (colon) *colon = '\0';
    char full[4200];
    snprintf(full, sizeof full, "%s/%s", dir[0] ? dir : ".", prog);
    found = stat(full, &st) == 0 && S_ISREG(st.st_mode) &&
            access(full, X_OK) == 0;
  }
  free(copy);
  return found;
}

/* A TCP port on 127.0.0.1 that was free when chosen: bound to port 0, read
 * back, closed. It is not reserved: another program may take it before the
 * job's rank 0 binds it (torchrun's own choice has the same race). 0 when
 * no socket could be bound. */
int vqc_cw_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}
