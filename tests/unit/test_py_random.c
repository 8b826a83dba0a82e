/* test_py_random.c: CPython's random.Random for integer seeds (py_random.h).
 *
 * Every expected value was printed by CPython 3.11 on this machine, e.g.
 *   r = random.Random(42); [r.getrandbits(32) for _ in range(3)]
 *   random.Random(42).randrange(3, 1000); random.Random(42).getrandbits(40)
 * Seeds cover 0 (a one-word key of 0), small ones, one past 2^32 (a
 * two-word key), a negative one (CPython uses the absolute value) and a
 * 37-bit one. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "vqc/py_random.h"

typedef struct golden {
  int64_t seed;
  uint32_t words[3];  /* getrandbits(32) x 3 */
  int64_t rr_0_4;     /* randrange(0, 4) */
  int64_t rr_3_1000;  /* randrange(3, 1000) */
  uint64_t bits40;    /* getrandbits(40) */
  double random;      /* random() */
} golden;

static const golden cases[] = {
    {0, {3626764237u, 1654615998u, 3255389356u}, 3, 867, 424533559245ull,
     0.8444218515250481},
    {1, {577090037u, 2444712010u, 3639700191u}, 1, 140, 623347347957ull,
     0.13436424411240122},
    {42, {2746317213u, 478163327u, 107420369u}, 0, 657, 123005401501ull,
     0.6394267984578837},
    {2382, {2121430105u, 2681521971u, 2203392714u}, 3, 508, 685021230169ull,
     0.49393393564477917},
    {4294967301ll, {675479763u, 2085189291u, 1213270837u}, 1, 164,
     533251424467ull, 0.15727238718789782},
    {-7, {1390851128u, 4071050724u, 647892279u}, 2, 334, 1040772936760ull,
     0.32383276483316237},
    {123456789012ll, {1619264890u, 2798649831u, 88888752u}, 3, 389,
     714583836026ull, 0.37701448538609916},
};

Test(py_random, matches_cpython_for_integer_seeds) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const golden *g = &cases[i];
    vqc_py_random r;
    vqc_py_random_seed(&r, g->seed);
    for (int j = 0; j < 3; j++)
      cr_expect_eq(vqc_py_random_getrandbits(&r, 32), g->words[j],
                   "seed %lld word %d", (long long)g->seed, j);
    vqc_py_random_seed(&r, g->seed);
    cr_expect_eq(vqc_py_random_randrange(&r, 0, 4), g->rr_0_4, "seed %lld",
                 (long long)g->seed);
    vqc_py_random_seed(&r, g->seed);
    cr_expect_eq(vqc_py_random_randrange(&r, 3, 1000), g->rr_3_1000,
                 "seed %lld", (long long)g->seed);
    vqc_py_random_seed(&r, g->seed);
    cr_expect_eq(vqc_py_random_getrandbits(&r, 40), g->bits40, "seed %lld",
                 (long long)g->seed);
    vqc_py_random_seed(&r, g->seed);
    cr_expect_eq(vqc_py_random_random(&r), g->random, "seed %lld",
                 (long long)g->seed);
  }
}

Test(py_random, randrange_rejection_sequence) {
  /* r = random.Random(5); [r.randrange(0, 7) for _ in range(10)]: with
   * n = 7, 3 bits per try and 8/7 odds of a rejection, so the stream
   * position depends on rejections being redrawn exactly as CPython does. */
  const int64_t want[] = {4, 2, 5, 2, 6, 5, 6, 5, 5, 4};
  vqc_py_random r;
  vqc_py_random_seed(&r, 5);
  for (int i = 0; i < 10; i++)
    cr_expect_eq(vqc_py_random_randrange(&r, 0, 7), want[i], "draw %d", i);
}
