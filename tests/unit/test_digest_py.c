/* test_digest_py.c: docs/pytorch_trace_example.py computes the C tensor
 * digest, and writes trace lines the C trace reader accepts.
 *
 * The test imports the example file itself (importlib, so the definition
 * checked is the one people copy, not a second transcription), with python3
 * and the `xxhash` package (Debian: python3-xxhash, scripts/install-deps.sh).
 * The example only imports torch under `if __name__ == "__main__":`, so
 * torch is not needed; trace_line gets a stand-in tensor exposing what it
 * uses (dtype, shape, detach/cpu/contiguous/numpy/tobytes).
 *
 * For each case: the C side writes pseudo-random bytes to a file, Python
 * prints vqc_digest(bytes, code, shape) and trace_line(0, case, name, t);
 * the digest must equal vqc_digest_buffer's, and the line must parse with
 * vqc_trace_parse_line into the same dtype, shape and digest. Sizes: 0 (one
 * leaf of zero bytes, with ndim 1 and ndim 2), 1, 8 (a scalar, ndim 0), one
 * byte short of, exactly, and one byte past a 64 KiB leaf, 20 full leaves,
 * and 2 leaves plus a tail. dtype codes are the README's, written here
 * independently of the C table. Skipped with a message when no python3 with
 * xxhash is found. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_paths.h"
#include "trace.h"
#include "vqc/digest.h"

typedef struct py_case {
  vqc_dtype dt;
  int code;          /* README "The tensor digest": float32 1 ... uint8 5 */
  const char *name;  /* the trace's dtype string */
  int ndim;
  int64_t shape[3];
} py_case;

static const py_case cases[] = {
    {VQC_U8, 5, "uint8", 1, {0}},               /* 0 bytes */
    {VQC_I32, 3, "int32", 2, {0, 4}},           /* 0 bytes, 2 dims */
    {VQC_U8, 5, "uint8", 1, {1}},               /* 1 byte */
    {VQC_I64, 4, "int64", 0, {0}},              /* scalar: 8 bytes */
    {VQC_F32, 1, "float32", 2, {3, 5}},         /* 60 bytes */
    {VQC_U8, 5, "uint8", 1, {65535}},           /* one short of a leaf */
    {VQC_U8, 5, "uint8", 1, {65536}},           /* exactly one leaf */
    {VQC_U8, 5, "uint8", 1, {65537}},           /* one byte into leaf 2 */
    {VQC_F32, 1, "float32", 2, {512, 640}},     /* 20 full leaves */
    {VQC_F64, 2, "float64", 3, {3, 7, 1001}},   /* 2 leaves + a tail */
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static size_t case_bytes(const py_case *c) {
  size_t n = vqc_dtype_size(c->dt);
  for (int d = 0; d < c->ndim; d++) n *= (size_t)c->shape[d];
  return n;
}

/* Deterministic bytes (a 64-bit LCG's high byte): no two leaves alike. */
static void fill(unsigned char *p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = (unsigned char)(x >> 56);
  }
}

/* The first interpreter that can import xxhash, or NULL. */
static const char *find_python(void) {
  static const char *const candidates[] = {"python3", "/usr/bin/python3"};
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s -c 'import xxhash' >/dev/null 2>&1",
             candidates[i]);
    if (system(cmd) == 0) return candidates[i];
  }
  return NULL;
}

/* Imports the example by path and answers one manifest line per case:
 * "<bin file> <code> <dtype> <d0> <d1> ..." -> digest hex, then the line. */
static const char check_py[] =
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('example', sys.argv[1])\n"
    "ex = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(ex)\n"
    "class Tensor:  # what trace_line uses of a torch tensor\n"
    "    def __init__(self, dtype, shape, buf):\n"
    "        self.dtype, self.shape, self.buf = 'torch.' + dtype, shape, buf\n"
    "    def detach(self): return self\n"
    "    cpu = contiguous = numpy = detach\n"
    "    def tobytes(self): return self.buf\n"
    "for i, line in enumerate(open(sys.argv[2])):\n"
    "    f = line.split()\n"
    "    buf = open(f[0], 'rb').read()\n"
    "    shape = tuple(int(d) for d in f[3:])\n"
    "    print(f'{ex.vqc_digest(buf, int(f[1]), shape):016x}')\n"
    "    sys.stdout.write(ex.trace_line(0, i, f'case{i}', "
    "Tensor(f[2], shape, buf)))\n";

Test(digest_py, example_digest_and_trace_line_match_c) {
  const char *py = find_python();
  if (py == NULL)
    cr_skip_test("no python3 with the xxhash module (install python3-xxhash: "
                 "scripts/install-deps.sh); the example's digest is not "
                 "checked");

  char dir[] = "/tmp/vqc-digest-py-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char path[512], manifest[512], script[512];
  snprintf(manifest, sizeof manifest, "%s/cases.txt", dir);
  snprintf(script, sizeof script, "%s/check.py", dir);
  FILE *m = fopen(manifest, "w");
  FILE *s = fopen(script, "w");
  cr_assert(m && s);
  fputs(check_py, s);
  fclose(s);

  uint64_t want[NCASES];
  for (int i = 0; i < NCASES; i++) {
    const py_case *c = &cases[i];
    size_t n = case_bytes(c);
    unsigned char *buf = malloc(n + 1);
    cr_assert_not_null(buf);
    fill(buf, n, (uint64_t)i + 1);
    cr_assert_eq(vqc_digest_buffer(buf, n, c->dt, c->ndim, c->shape,
                                   &want[i]), VQC_OK, "%s",
                 vqc_last_error());
    cr_assert_eq(vqc_dtype_digest_code(c->dt), c->code,
                 "the README's dtype code for %s", c->name);
    snprintf(path, sizeof path, "%s/case%d.bin", dir, i);
    FILE *b = fopen(path, "wb");
    cr_assert_not_null(b);
    cr_assert_eq(fwrite(buf, 1, n, b), n);
    fclose(b);
    free(buf);
    fprintf(m, "%s %d %s", path, c->code, c->name);
    for (int d = 0; d < c->ndim; d++) fprintf(m, " %" PRId64, c->shape[d]);
    fprintf(m, "\n");
  }
  fclose(m);

  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s %s %s/docs/pytorch_trace_example.py %s", py,
           script, vqc_test_source_dir(), manifest);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  char line[4096];
  for (int i = 0; i < NCASES; i++) {
    const py_case *c = &cases[i];
    cr_assert_not_null(fgets(line, sizeof line, p), "python stopped at case "
                       "%d", i);
    uint64_t got = strtoull(line, NULL, 16);
    cr_expect_eq(got, want[i], "case %d (%s, %zu bytes): python %016" PRIx64
                 " vs C %016" PRIx64, i, c->name, case_bytes(c), got,
                 want[i]);
    cr_assert_not_null(fgets(line, sizeof line, p));
    vqc_trace_record r;
    cr_assert_eq(vqc_trace_parse_line(line, "python", i + 1, &r), VQC_OK,
                 "%s", vqc_last_error());
    cr_expect_eq(r.digest, want[i], "case %d: the trace line's digest", i);
    cr_expect_str_eq(r.dtype, c->name);
    cr_expect_str_eq(r.digest_algo, VQC_TRACE_DIGEST_ALGO);
    cr_expect_eq(r.step, i);
    cr_expect_eq(r.ndim, c->ndim);
    for (int d = 0; d < c->ndim; d++) cr_expect_eq(r.shape[d], c->shape[d]);
  }
  cr_expect_null(fgets(line, sizeof line, p), "unexpected output: %s", line);
  cr_expect_eq(pclose(p), 0, "python exited with an error");

  for (int i = 0; i < NCASES; i++) {
    snprintf(path, sizeof path, "%s/case%d.bin", dir, i);
    unlink(path);
  }
  unlink(manifest);
  unlink(script);
  rmdir(dir);
}
