/* vqc_mpi_signals.c: the signal handlers: a note in the live record when
 * SIGTERM, SIGINT or SIGHUP ends the rank, a "lost" line at a fault, and
 * at SIGUSR1 the stack (rank-<r>.stacks.txt). Async-signal-safe. */
#include "vqc_mpi_internal.h"

#include <link.h>

/* ---- signals */

static struct sigaction old_act[65];
static const int note_sigs[] = {SIGTERM, SIGINT, SIGHUP};
static const int fault_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

size_t fmt_int(char *b, long long v) {
  char t[24];
  size_t n = 0, k = 0;
  bool neg = v < 0;
  unsigned long long u = neg ? 0ull - (unsigned long long)v
                             : (unsigned long long)v;
  do {
    t[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (neg) b[k++] = '-';
  while (n) b[k++] = t[--n];
  return k;
}

size_t cat(char *b, size_t k, size_t cap, const char *s) {
  while (*s && k + 1 < cap) b[k++] = *s++;
  b[k] = '\0';
  return k;
}

static void chain(int sig) {
  sigaction(sig, &old_act[sig], NULL);
  raise(sig);
}

static void on_note(int sig) {
  const int e = errno;
  char b[96];
  size_t k = cat(b, 0, sizeof b, "{\"event\":\"signal\",\"signal\":");
  k += fmt_int(b + k, sig);
  k = cat(b, k, sizeof b, ",\"t_ns\":"); /* the clock of t_enter_ns */
  k += fmt_int(b + k, (long long)now_ns());
  k = cat(b, k, sizeof b, "}\n");
  live_write_signal(b, k);
  chain(sig);
  errno = e;
}

static void on_fault(int sig) {
  const int e = errno;
  char b[256];
  size_t k = cat(b, 0, sizeof b, "{\"event\":\"lost\",\"by\":\"libvqcheck_"
                 "mpi\",\"why\":\"killed by signal ");
  k += fmt_int(b + k, sig);
  k = cat(b, k, sizeof b, " (SIG");
  k = cat(b, k, sizeof b, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
  k = cat(b, k, sizeof b, ")\",\"signal\":");
  k += fmt_int(b + k, sig);
  k = cat(b, k, sizeof b, "}\n");
  live_write_signal(b, k);
  chain(sig);
  errno = e;
}

/* SIGUSR1: this thread's stack, faulthandler's layout, from the program's
 * first frame outside MPI, libc and this library. */
static void on_usr1(int sig) {
  const int e = errno;
  if (g.on) p2p_wait_line(); /* first: the stack's arrival means it is in */
  if (g.stacks_fd < 0) {
    errno = e;
    return;
  }
  void *fr[64];
  const int n = backtrace(fr, 64);
  char b[8192];
  size_t k = cat(b, 0, sizeof b, "Current thread 0x0 (most recent call "
                 "first):\n");
  bool started = false;
  for (int i = 1; i < n; i++) {
    const uintptr_t pc = (uintptr_t)fr[i];
    const site *s = NULL;
    for (int p = 0; p < NSITES && !s; p++)
      if (__atomic_load_n(&sites[p].pc, __ATOMIC_ACQUIRE) == pc)
        s = &sites[p];
    char file[512], func[1400];
    int line = 0;
    if (s) {
      /* a site in an MPI library: a Fortran binding's frame (the wrapper's
       * caller), skipped as the unknown ones below are */
      if (!started && s->lib) continue;
      snprintf(file, sizeof file, "%s", s->file);
      snprintf(func, sizeof func, "%s", s->func);
      line = s->line;
    } else {
      Dl_info di;
      struct link_map *lm = NULL;
      if (!dladdr1((void *)(pc - 1), &di, (void **)&lm, RTLD_DL_LINKMAP) ||
          !di.dli_fname)
        continue;
      const char *bn = base_name(di.dli_fname);
      if (!started && (mpi_object(di.dli_fname) ||
                       strncmp(bn, "libc.", 5) == 0 ||
                       strncmp(bn, "libpthread", 10) == 0 ||
                       strncmp(bn, "linux-vdso", 10) == 0))
        continue;
      snprintf(file, sizeof file, "%s", bn);
      /* A frame outside the site table (the program computing, or before
       * MPI_Init): its address in the object's own terms and the object,
       * which vqcheck watch resolves into file:line with the object's
       * debug information (harness/run/watch_symbols.c). Nothing is
       * resolved here, in a signal handler. */
      char exe[512];
      const char *obj = di.dli_fname;
      if (!lm || !lm->l_name[0]) { /* the program: dli_fname is argv[0] */
        const ssize_t m = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (m > 0) {
          exe[m] = '\0';
          obj = exe;
        }
      }
      snprintf(func, sizeof func, "%s [vaddr 0x%lx in %s]",
               di.dli_sname ? di.dli_sname : "?",
               (unsigned long)(pc - 1 - (lm ? lm->l_addr : 0)), obj);
    }
    started = true;
    k = cat(b, k, sizeof b, "  File \"");
    k = cat(b, k, sizeof b, file);
    k = cat(b, k, sizeof b, "\", line ");
    if (k + 24 < sizeof b) k += fmt_int(b + k, line);
    k = cat(b, k, sizeof b, " in ");
    k = cat(b, k, sizeof b, func);
    k = cat(b, k, sizeof b, "\n");
  }
  k = cat(b, k, sizeof b, "\n");
  ssize_t w = write(g.stacks_fd, b, k);
  (void)w;
  (void)sig;
  errno = e;
}

static void install(int sig, void (*fn)(int), bool only_default) {
  struct sigaction sa, old;
  if (sigaction(sig, NULL, &old) != 0) return;
  if (only_default && old.sa_handler != SIG_DFL) return;
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) return;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(sig, &sa, &old_act[sig]) != 0) return;
}


void install_stack_signal(void) { install(SIGUSR1, on_usr1, true); }

/* SIGUSR1 and the notes where the program left the default; the faults
 * always (each chains to what was there). SIGUSR1's handler may be in
 * place since load (install_stack_signal): then it stays. */
void install_signals(void) {
  struct sigaction now;
  if (sigaction(SIGUSR1, NULL, &now) != 0 || now.sa_handler != on_usr1)
    install(SIGUSR1, on_usr1, true);
  for (size_t i = 0; i < sizeof note_sigs / sizeof note_sigs[0]; i++)
    install(note_sigs[i], on_note, true);
  for (size_t i = 0; i < sizeof fault_sigs / sizeof fault_sigs[0]; i++)
    install(fault_sigs[i], on_fault, false);
}
