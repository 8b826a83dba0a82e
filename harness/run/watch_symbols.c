/* watch_symbols.c: frames the MPI interposer left as an object and an
 * address, resolved with libdw (watch_symbols.h). */
#define _GNU_SOURCE
#include "watch_symbols.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool vqc_watch_vaddr_parse(const char *text, size_t n, uint64_t *vaddr,
                           char *path, size_t path_n, size_t *stem) {
  static const char open[] = " [vaddr 0x";
  if (n == 0 || text[n - 1] != ']') return false;
  const char *at = NULL;
  for (const char *p = text; (p = strstr(p, open)) && p < text + n; p++)
    at = p; /* the last: a function name cannot hold it, a path might */
  if (!at) return false;
  const char *h = at + sizeof open - 1;
  uint64_t v = 0;
  int digits = 0;
  for (; digits < 16 && ((*h >= '0' && *h <= '9') ||
                         (*h >= 'a' && *h <= 'f')); h++, digits++)
    v = v * 16 + (uint64_t)(*h <= '9' ? *h - '0' : *h - 'a' + 10);
  if (digits == 0 || strncmp(h, " in /", 5) != 0) return false;
  const char *p0 = h + 4;
  const size_t len = (size_t)(text + n - 1 - p0);
  if (len == 0 || len >= path_n) return false;
  memcpy(path, p0, len);
  path[len] = '\0';
  *vaddr = v;
  *stem = (size_t)(at - text);
  return true;
}

/* libdw's offline interface, opened at run time. */
typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Line Dwfl_Line;
typedef struct {
  void *find_elf, *find_debuginfo, *section_address;
  char **debuginfo_path;
} dwfl_callbacks;

static struct {
  bool tried, ok;
  Dwfl *(*begin)(const dwfl_callbacks *);
  void (*report_begin)(Dwfl *);
  Dwfl_Module *(*report_offline)(Dwfl *, const char *, const char *, int);
  int (*report_end)(Dwfl *, void *, void *);
  void *(*module_getelf)(Dwfl_Module *, uint64_t *);
  const char *(*addrname)(Dwfl_Module *, uint64_t);
  Dwfl_Line *(*getsrc)(Dwfl_Module *, uint64_t);
  const char *(*lineinfo)(Dwfl_Line *, uint64_t *, int *, int *, uint64_t *,
                          uint64_t *);
  dwfl_callbacks cb;
  char *debuginfo_path;
} dw;

static void dw_open(void) {
  dw.tried = true;
  void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  dw.begin = (Dwfl * (*)(const dwfl_callbacks *))dlsym(h, "dwfl_begin");
  dw.report_begin = (void (*)(Dwfl *))dlsym(h, "dwfl_report_begin");
  dw.report_offline = (Dwfl_Module * (*)(Dwfl *, const char *, const char *,
                                         int))dlsym(h, "dwfl_report_offline");
  dw.report_end =
      (int (*)(Dwfl *, void *, void *))dlsym(h, "dwfl_report_end");
  dw.module_getelf = (void *(*)(Dwfl_Module *, uint64_t *))dlsym(
      h, "dwfl_module_getelf");
  dw.addrname = (const char *(*)(Dwfl_Module *, uint64_t))dlsym(
      h, "dwfl_module_addrname");
  dw.getsrc = (Dwfl_Line * (*)(Dwfl_Module *, uint64_t))dlsym(
      h, "dwfl_module_getsrc");
  dw.lineinfo = (const char *(*)(Dwfl_Line *, uint64_t *, int *, int *,
                                 uint64_t *, uint64_t *))dlsym(
      h, "dwfl_lineinfo");
  dw.cb.find_elf = dlsym(h, "dwfl_build_id_find_elf");
  dw.cb.find_debuginfo = dlsym(h, "dwfl_standard_find_debuginfo");
  dw.cb.section_address = dlsym(h, "dwfl_offline_section_address");
  dw.cb.debuginfo_path = &dw.debuginfo_path;
  dw.ok = dw.begin && dw.report_begin && dw.report_offline &&
          dw.report_end && dw.module_getelf && dw.addrname && dw.getsrc &&
          dw.lineinfo && dw.cb.find_elf && dw.cb.find_debuginfo &&
          dw.cb.section_address;
}

/* One object reported offline, kept for later frames of it. */
#define OBJECTS_MAX 32
static struct object {
  char path[1024];
  Dwfl_Module *mod; /* NULL: it could not be read */
} objects[OBJECTS_MAX];
static int nobjects;

static Dwfl_Module *module_of(const char *path) {
  for (int i = 0; i < nobjects; i++)
    if (strcmp(objects[i].path, path) == 0) return objects[i].mod;
  if (nobjects == OBJECTS_MAX || strlen(path) >= sizeof objects[0].path)
    return NULL;
  struct object *o = &objects[nobjects++];
  snprintf(o->path, sizeof o->path, "%s", path);
  o->mod = NULL;
  /* Only a regular file (a stack file can name anything: a FIFO would
   * block the watcher, a device would be read). */
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
  Dwfl *d = dw.begin(&dw.cb); /* one per object: kept with it */
  if (!d) return NULL;
  dw.report_begin(d);
  o->mod = dw.report_offline(d, path, path, -1);
  dw.report_end(d, NULL, NULL);
  return o->mod;
}

bool vqc_watch_symbolize(const char *path, uint64_t vaddr, char *file,
                         size_t file_n, long *line, char *func,
                         size_t func_n) {
  if (!dw.tried) dw_open();
  if (!dw.ok) return false;
  Dwfl_Module *m = module_of(path);
  uint64_t bias = 0;
  if (!m || !dw.module_getelf(m, &bias)) return false;
  const uint64_t a = vaddr + bias; /* where libdw placed the object */
  Dwfl_Line *l = dw.getsrc(m, a);
  int ln = 0;
  const char *src = l ? dw.lineinfo(l, NULL, &ln, NULL, NULL, NULL) : NULL;
  if (!src || ln <= 0) return false;
  const char *name = dw.addrname(m, a);
  snprintf(file, file_n, "%s", src);
  *line = ln;
  snprintf(func, func_n, "%s", name ? name : "?");
  return true;
}
