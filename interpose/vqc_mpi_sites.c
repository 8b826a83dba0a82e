/* vqc_mpi_sites.c: the call sites of the interposer's records: a return
 * address resolved once (libdw, opened at run time, where the program has
 * debug information, else dladdr) into file, line and function, kept in a
 * fixed table that on_usr1 also reads. */
#include "vqc_mpi_internal.h"

#include <unwind.h>

/* ---- call sites */

site sites[NSITES];
static int nsites;
site overflow_site = {.pc = 1, .json = "\"file\":\"?\",\"line\":0,"
                                      "\"func\":\"?\","};

/* libdw, opened at run time (no -dev package needed to build). */
typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Line Dwfl_Line;
typedef struct {
  void *find_elf, *find_debuginfo, *section_address;
  char **debuginfo_path;
} dwfl_callbacks;
static struct {
  bool tried;
  Dwfl *dwfl;
  Dwfl_Module *(*addrmodule)(Dwfl *, uint64_t);
  const char *(*addrname)(Dwfl_Module *, uint64_t);
  Dwfl_Line *(*getsrc)(Dwfl_Module *, uint64_t);
  const char *(*lineinfo)(Dwfl_Line *, uint64_t *, int *, int *, uint64_t *,
                          uint64_t *);
} dw;
static dwfl_callbacks dw_cb;
static char *dw_path;

static void dw_open(void) {
  dw.tried = true;
  void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  Dwfl *(*start)(const dwfl_callbacks *) = (Dwfl * (*)(const dwfl_callbacks *))
      dlsym(h, "dwfl_begin");
  void (*report_begin)(Dwfl *) = (void (*)(Dwfl *))dlsym(h, "dwfl_report_begin");
  int (*proc_report)(Dwfl *, pid_t) =
      (int (*)(Dwfl *, pid_t))dlsym(h, "dwfl_linux_proc_report");
  int (*report_end)(Dwfl *, void *, void *) =
      (int (*)(Dwfl *, void *, void *))dlsym(h, "dwfl_report_end");
  dw_cb.find_elf = dlsym(h, "dwfl_linux_proc_find_elf");
  dw_cb.find_debuginfo = dlsym(h, "dwfl_standard_find_debuginfo");
  dw_cb.debuginfo_path = &dw_path;
  dw.addrmodule = (Dwfl_Module * (*)(Dwfl *, uint64_t))
      dlsym(h, "dwfl_addrmodule");
  dw.addrname = (const char *(*)(Dwfl_Module *, uint64_t))
      dlsym(h, "dwfl_module_addrname");
  dw.getsrc = (Dwfl_Line * (*)(Dwfl_Module *, uint64_t))
      dlsym(h, "dwfl_module_getsrc");
  dw.lineinfo = (const char *(*)(Dwfl_Line *, uint64_t *, int *, int *,
                                 uint64_t *, uint64_t *))
      dlsym(h, "dwfl_lineinfo");
  if (!start || !report_begin || !proc_report || !report_end ||
      !dw_cb.find_elf || !dw_cb.find_debuginfo || !dw.addrmodule ||
      !dw.addrname || !dw.getsrc || !dw.lineinfo)
    return;
  Dwfl *d = start(&dw_cb);
  if (!d) return;
  report_begin(d);
  if (proc_report(d, getpid()) != 0) return;
  report_end(d, NULL, NULL);
  dw.dwfl = d;
}

const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* An object whose frames are MPI's (or ours): a site in one is the
 * program's only further up. */
bool mpi_object(const char *path) {
  const char *b = base_name(path);
  return strncmp(b, "libmpi", 6) == 0 || strncmp(b, "libopen-", 8) == 0 ||
         strncmp(b, "libvqcheck_mpi", 14) == 0 ||
         strncmp(b, "libpmix", 7) == 0 || strncmp(b, "mca_", 4) == 0 ||
         strstr(path, "/openmpi/") != NULL;
}

/* Resolves pc (a return address) into s. */
static void resolve(uintptr_t pc, site *s) {
  const uintptr_t a = pc - 1; /* inside the call instruction */
  Dl_info di;
  memset(&di, 0, sizeof di);
  const bool have = dladdr((void *)a, &di) != 0 && di.dli_fname;
  s->lib = have && mpi_object(di.dli_fname);
  snprintf(s->file, sizeof s->file, "%s",
           have && di.dli_fname[0] ? base_name(di.dli_fname) : "?");
  s->line = 0;
  if (have && di.dli_sname)
    snprintf(s->func, sizeof s->func, "%s+0x%lx", di.dli_sname,
             (unsigned long)(a - (uintptr_t)di.dli_saddr));
  else
    snprintf(s->func, sizeof s->func, "+0x%lx",
             (unsigned long)(a - (uintptr_t)(have ? di.dli_fbase : 0)));
  if (!s->lib) {
    if (!dw.tried) dw_open();
    Dwfl_Module *m = dw.dwfl ? dw.addrmodule(dw.dwfl, a) : NULL;
    if (m) {
      const char *name = dw.addrname(m, a);
      Dwfl_Line *l = dw.getsrc(m, a);
      int line = 0;
      const char *file = l ? dw.lineinfo(l, NULL, &line, NULL, NULL, NULL)
                           : NULL;
      if (file && line > 0) {
        snprintf(s->file, sizeof s->file, "%s", file);
        s->line = line;
        if (name) snprintf(s->func, sizeof s->func, "%s", name);
      } else if (name) {
        snprintf(s->func, sizeof s->func, "%s+0x%lx", name,
                 (unsigned long)(a - (uintptr_t)(have ? di.dli_fbase : 0)));
      }
    }
  }
  char f[sizeof s->file * 2], fn[sizeof s->func * 2];
  json_esc(f, sizeof f, s->file);
  json_esc(fn, sizeof fn, s->func);
  int n = snprintf(s->json, sizeof s->json,
                   "\"file\":\"%.400s\",\"line\":%d,\"func\":\"%.400s\",", f,
                   s->line, fn);
  s->len = n > 0 && (size_t)n < sizeof s->json ? (size_t)n : 0;
}

/* The site of return address pc, resolved once (lock held by the caller
 * when threads are in play). */
static site *site_find(uintptr_t pc, bool add) {
  size_t h = (size_t)((pc * 0x9E3779B97F4A7C15ull) >> 54) % NSITES;
  for (int probe = 0; probe < NSITES; probe++) {
    site *s = &sites[(h + (size_t)probe) % NSITES];
    const uintptr_t p = __atomic_load_n(&s->pc, __ATOMIC_ACQUIRE);
    if (p == pc) return s;
    if (p == 0) {
      if (!add || nsites >= NSITES * 3 / 4) return NULL;
      resolve(pc, s);
      nsites++;
      __atomic_store_n(&s->pc, pc, __ATOMIC_RELEASE);
      return s;
    }
  }
  return NULL;
}

uintptr_t site_last_pc;
const site *site_last;

/* The walk up the stack for the first frame outside the MPI libraries:
 * it stops there (each frame unwound costs a few hundred ns: a Fortran
 * program's every call walks, vqc_mpi_fortran.c). */
typedef struct frame_walk {
  uintptr_t pc;   /* the wrapper's return address: not an answer */
  int frames;     /* walked so far (at most 32) */
  site *up;       /* the answer, once found */
} frame_walk;

static _Unwind_Reason_Code walk_frame(struct _Unwind_Context *ctx,
                                      void *arg) {
  frame_walk *w = arg;
  const uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
  if (++w->frames > 32 || ip == 0) return _URC_END_OF_STACK;
  site *t = ip != w->pc ? site_find(ip, true) : NULL;
  if (t && !t->lib) {
    w->up = t;
    return _URC_END_OF_STACK;
  }
  return _URC_NO_REASON;
}

/* site_of (vqc_mpi_internal.h) past its cache: pc's site, or the first
 * frame above it outside the MPI libraries; the cache set to the answer
 * when one thread calls MPI. */
const site *site_of_lookup(uintptr_t pc) {
  lock();
  site *s = site_find(pc, true);
  const bool in_lib = s && s->lib;
  if (in_lib) {
    frame_walk w = {pc, 0, NULL};
    _Unwind_Backtrace(walk_frame, &w);
    if (w.up) s = w.up;
  }
  unlock();
  const site *out = s && s->len ? s : &overflow_site;
  /* Not kept when pc is in an MPI library (a Fortran binding's call to the
   * wrapper): one pc there serves every line of the program, so each call
   * finds its own line above it. */
  if (!g.multi && !in_lib) {
    site_last_pc = pc;
    site_last = out;
  }
  return out;
}
