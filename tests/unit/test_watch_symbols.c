/* test_watch_symbols.c: a frame the MPI interposer wrote as an object and
 * an address (" [vaddr 0x... in /path]") is parsed, and resolved into
 * file:line from the object's debug information (harness/run/
 * watch_symbols.h). The resolution is tried on this test's own
 * executable, built with -g: a function here must come back as this
 * file, its line and its name. libdw.so.1 is installed by
 * scripts/install-deps.sh (libdw1): without it this test fails. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "watch_symbols.h"

Test(watch_symbols, parses_the_interposers_suffix) {
  const char *t = "load_input [vaddr 0x11c9 in /tmp/a b/prog]";
  uint64_t v = 0;
  char path[64];
  size_t stem = 0;
  cr_assert(vqc_watch_vaddr_parse(t, strlen(t), &v, path, sizeof path,
                                  &stem));
  cr_expect_eq(v, 0x11c9);
  cr_expect_str_eq(path, "/tmp/a b/prog");
  cr_expect_eq(stem, strlen("load_input"));
  const char *bad[] = {"main", "? [vaddr 0x in /p]", "? [vaddr 0x12 in p]",
                       "? [vaddr 0x12 in /p", "? [vaddr 0xZZ in /p]"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_not(vqc_watch_vaddr_parse(bad[i], strlen(bad[i]), &v, path,
                                        sizeof path, &stem),
                  "%s", bad[i]);
  /* a path longer than the room is refused, not cut */
  cr_expect_not(vqc_watch_vaddr_parse(t, strlen(t), &v, path, 8, &stem));
}

/* A function of this file to look up (not inlined: its address taken). */
static const long resolved_line = __LINE__ + 1;
static __attribute__((noinline)) int resolved_here(int x) { return x * 3 + 1; }

Test(watch_symbols, resolves_this_executable) {
  int (*volatile fn)(int) = resolved_here;
  cr_assert_eq(fn(2), 7);
  Dl_info di;
  struct link_map *lm = NULL;
  cr_assert(dladdr1((void *)fn, &di, (void **)&lm, RTLD_DL_LINKMAP));
  char exe[1024];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  cr_assert_gt(n, 0);
  exe[n] = '\0';
  char file[1024] = "", func[128] = "";
  long line = 0;
  const uint64_t vaddr = (uint64_t)((uintptr_t)fn - lm->l_addr);
  cr_assert(vqc_watch_symbolize(exe, vaddr, file, sizeof file, &line, func,
                                sizeof func),
            "libdw.so.1 missing (scripts/install-deps.sh installs libdw1)?");
  cr_expect(strstr(file, "test_watch_symbols.c") != NULL, "file %s", file);
  cr_expect_eq(line, resolved_line, "line %ld", line);
  cr_expect_str_eq(func, "resolved_here");
  /* a FIFO (a stack file can name anything): refused, never opened */
  char fifo[] = "/tmp/vqc-symbols-fifo-XXXXXX";
  cr_assert(mkdtemp(fifo) != NULL);
  char fp[64];
  snprintf(fp, sizeof fp, "%s/p", fifo);
  cr_assert_eq(mkfifo(fp, 0600), 0);
  cr_expect_not(vqc_watch_symbolize(fp, 0x1000, file, sizeof file, &line,
                                    func, sizeof func));
  unlink(fp);
  rmdir(fifo);
  /* an object that is not there: false, nothing written */
  strcpy(func, "kept");
  cr_expect_not(vqc_watch_symbolize("/nonexistent/prog", 0x1000, file,
                                    sizeof file, &line, func, sizeof func));
  cr_expect_str_eq(func, "kept");
}
