/* vqc_mpi_fortran.c: Fortran programs' MPI calls routed through the
 * wrappers.
 *
 * OpenMPI's Fortran bindings (libmpi_mpifh for mpif.h and `use mpi`,
 * libmpi_usempif08 for `use mpi_f08`) turn Fortran handles into C ones and
 * then call the C library's PMPI_* entry points, not MPI_*: a preloaded
 * MPI_Allreduce never sees a Fortran program's MPI_ALLREDUCE, and such a
 * program ran unrecorded (no MPI_Init seen: no verdict; a deadlock never
 * reported). So, once, when the library loads: in each loaded object that is
 * a Fortran binding library, every PLT/GOT slot that names PMPI_<x>, where
 * this library wraps MPI_<x>, is pointed at the wrapper. The wrapper then
 * receives the C call the binding makes (C handles, C MPI_IN_PLACE and
 * MPI_STATUS_IGNORE: the binding converted them), records it and calls
 * PMPI_<x> through its own, untouched slot. Its return address lies in the
 * binding library, which mpi_object() counts as MPI's, so the call site is
 * the first frame above it: the program's Fortran line.
 *
 * Only the dynamic relocations the binding library itself holds are
 * changed; libmpi and every other object keep theirs. A slot inside the
 * object's RELRO segment (read-only once relocated) is made writable for
 * the write and read-only again. Objects loaded later with dlopen are not
 * routed (a Fortran program links its bindings). */
#include "vqc_mpi_internal.h"

#include <elf.h>
#include <link.h>

/* (vqc_mpi_internal.h) Whether path names a Fortran binding library of an
 * MPI: OpenMPI's libmpi_mpifh, libmpi_usempi_ignore_tkr, libmpi_usempif08
 * (and the older libmpi_f77, libmpi_f90), MPICH's libmpifort. */
bool fortran_bindings(const char *path) {
  const char *b = base_name(path);
  return strncmp(b, "libmpi_mpifh", 12) == 0 ||
         strncmp(b, "libmpi_usempi", 13) == 0 ||
         strncmp(b, "libmpi_f77", 10) == 0 ||
         strncmp(b, "libmpi_f90", 10) == 0 ||
         strncmp(b, "libmpifort", 10) == 0;
}

/* This library's load address (to tell its own MPI_* from libmpi's). */
static void *own_base(void) {
  Dl_info di;
  if (dladdr((void *)&own_base, &di) == 0) return NULL;
  return di.dli_fbase;
}

/* The wrapper of PMPI_<x> (name), or NULL where this library has none. */
static void *wrapper_of(const char *name, void *own) {
  if (strncmp(name, "PMPI_", 5) != 0) return NULL;
  void *f = dlsym(RTLD_DEFAULT, name + 1); /* "MPI_<x>": ours comes first */
  Dl_info di;
  if (!f || dladdr(f, &di) == 0 || di.dli_fbase != own) return NULL;
  return f;
}

#if __ELF_NATIVE_CLASS == 64
#define REL_TYPE ELF64_R_TYPE
#define REL_SYM ELF64_R_SYM
#else
#define REL_TYPE ELF32_R_TYPE
#define REL_SYM ELF32_R_SYM
#endif
#if defined(__x86_64__)
#define SLOT_RELOC(t) ((t) == R_X86_64_JUMP_SLOT || (t) == R_X86_64_GLOB_DAT)
#elif defined(__aarch64__)
#define SLOT_RELOC(t) ((t) == R_AARCH64_JUMP_SLOT || (t) == R_AARCH64_GLOB_DAT)
#else
#define SLOT_RELOC(t) 0 /* not routed on this architecture */
#endif

/* One loaded object's relocation tables (addresses in this process). */
typedef struct object_relocs {
  uintptr_t base;
  const ElfW(Sym) *symtab;
  const char *strtab;
  const ElfW(Rela) *plt, *rela; /* PLT slots; other RELA relocations */
  size_t nplt, nrela;
  uintptr_t relro_lo, relro_hi; /* read-only after relocation; 0, 0: none */
} object_relocs;

/* A d_ptr of the dynamic section: glibc relocates most of them in place,
 * other loaders do not. */
static uintptr_t dyn_ptr(const object_relocs *o, ElfW(Addr) p) {
  return (uintptr_t)p < o->base ? o->base + (uintptr_t)p : (uintptr_t)p;
}

static bool read_relocs(const struct dl_phdr_info *info, object_relocs *o) {
  memset(o, 0, sizeof *o);
  o->base = (uintptr_t)info->dlpi_addr;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *p = &info->dlpi_phdr[i];
    if (p->p_type == PT_DYNAMIC)
      dyn = (const ElfW(Dyn) *)(o->base + p->p_vaddr);
    if (p->p_type == PT_GNU_RELRO) {
      o->relro_lo = o->base + p->p_vaddr;
      o->relro_hi = o->relro_lo + p->p_memsz;
    }
  }
  if (!dyn) return false;
  size_t pltsz = 0, relasz = 0;
  long pltrel = 0;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    switch (dyn->d_tag) {
    case DT_SYMTAB: o->symtab = (const ElfW(Sym) *)dyn_ptr(o, dyn->d_un.d_ptr);
      break;
    case DT_STRTAB: o->strtab = (const char *)dyn_ptr(o, dyn->d_un.d_ptr);
      break;
    case DT_JMPREL: o->plt = (const ElfW(Rela) *)dyn_ptr(o, dyn->d_un.d_ptr);
      break;
    case DT_PLTRELSZ: pltsz = dyn->d_un.d_val; break;
    case DT_PLTREL: pltrel = (long)dyn->d_un.d_val; break;
    case DT_RELA: o->rela = (const ElfW(Rela) *)dyn_ptr(o, dyn->d_un.d_ptr);
      break;
    case DT_RELASZ: relasz = dyn->d_un.d_val; break;
    default: break;
    }
  }
  if (!o->symtab || !o->strtab) return false;
  if (o->plt && pltrel == DT_RELA) o->nplt = pltsz / sizeof(ElfW(Rela));
  else o->plt = NULL; /* REL-format slots (32-bit x86): not routed */
  if (o->rela) o->nrela = relasz / sizeof(ElfW(Rela));
  return true;
}

/* Writes f into the slot at addr, through a writable window where the slot
 * lies in the RELRO segment. False when it could not be written. */
static bool write_slot(const object_relocs *o, uintptr_t addr, void *f) {
  const bool ro = addr >= o->relro_lo && addr < o->relro_hi;
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  void *pg = (void *)(addr & ~(page - 1));
  if (ro && mprotect(pg, page, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n((void **)addr, f, __ATOMIC_RELEASE);
  if (ro) mprotect(pg, page, PROT_READ);
  return true;
}

/* Routes the slots of n relocations rel[0..n) that name a wrapped PMPI_*;
 * the count routed. */
static int route(const object_relocs *o, const ElfW(Rela) *rel, size_t n,
                 void *own) {
  int routed = 0;
  for (size_t i = 0; i < n; i++) {
    const unsigned long type = REL_TYPE(rel[i].r_info);
    const unsigned long sym = REL_SYM(rel[i].r_info);
    if (!SLOT_RELOC(type) || sym == 0) continue;
    void *f = wrapper_of(o->strtab + o->symtab[sym].st_name, own);
    if (f && write_slot(o, o->base + rel[i].r_offset, f)) routed++;
  }
  return routed;
}

static int route_object(struct dl_phdr_info *info, size_t size, void *own) {
  (void)size;
  if (!info->dlpi_name || !fortran_bindings(info->dlpi_name)) return 0;
  object_relocs o;
  if (!read_relocs(info, &o)) return 0;
  route(&o, o.plt, o.nplt, own);
  route(&o, o.rela, o.nrela, own);
  return 0;
}

/* Routes every loaded Fortran binding library's PMPI_* calls through this
 * library's wrappers (at load, before the program runs). */
void fortran_route(void) {
  void *own = own_base();
  if (own) dl_iterate_phdr(route_object, own);
}
