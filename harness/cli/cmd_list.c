/* cmd_list.c: `vqcheck list [DIR] [--json]`, which loads every scenario file
 * in DIR (*.yaml and *.yml, sorted by file name) and prints one line per
 * scenario: name, model, ranks, steps, fault and expectation. A file that
 * does not load is listed with its error (file:line: field: problem) and
 * makes the exit code 2, so `vqcheck list` doubles as a validator for a
 * directory of scenarios.
 *
 * DIR defaults to $VQC_SCENARIO_DIR, else the source tree's scenarios/
 * (compile-time VQC_SCENARIO_DIR, set in harness/CMakeLists.txt). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scenario.h"


static void list_help(FILE *f) {
  fprintf(f,
          "usage: vqcheck list [DIR] [--json] [--verbose]\n\n"
          "Loads every scenario file (*.yaml, *.yml) in DIR and prints one "
          "line per\nscenario: name, model, ranks, steps, fault and the "
          "expected findings.\nA file that fails to load is listed with its "
          "error (file:line: field: problem).\n\n"
          "  DIR     default: $VQC_SCENARIO_DIR, else an installed vqcheck's\n"
          "          share/vqcheck/scenarios, else the source tree's (here: "
          "%s)\n"
          "  --json  print a JSON array instead: one object per file, either "
          "the\n          scenario with every field explicit, or {path, "
          "error}\n"
          "  --verbose  full internal error text (also: VQC_DEBUG=1)\n\n"
          "exit: 0 every file loads, 2 a file failed to load or bad usage, "
          "3 out of memory\n",
          vqc_cli_default_scenarios());
}

int vqc_cmd_list(int argc, char **argv) {
  const char *dir = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      list_help(stdout);
      return 0;
    } else if (strcmp(a, "--json") == 0) {
      json = true;
    } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
      vqc_cli_set_verbose(true);
    } else if (a[0] == '-') {
      return vqc_cli_usage_error("list", "unknown option '%s'", a);
    } else if (dir) {
      return vqc_cli_usage_error("list", "more than one directory ('%s', "
                                 "'%s')", dir, a);
    } else {
      dir = a;
    }
  }
  if (!dir) dir = vqc_cli_default_scenarios();

  char **names;
  int count;
  if (!vqc_scenario_files(dir, &names, &count)) {
    fprintf(stderr, "vqcheck list: cannot read directory '%s': %s\n", dir,
            strerror(errno));
    fprintf(stderr, "hint: give a scenario directory, or set VQC_SCENARIO_DIR\n");
    return 2;
  }

  int failed = 0;
  json_t *array = json ? json_array() : NULL;
  if (!json && count > 0)
    printf("%-32s %-11s %5s %6s  %-29s %s\n", "NAME", "MODEL", "RANKS",
           "STEPS", "FAULT", "EXPECT");
  for (int i = 0; i < count; i++) {
    const size_t n = strlen(dir) + strlen(names[i]) + 2;
    char *path = malloc(n);
    vqc_scenario *s = malloc(sizeof *s); /* ~10 KiB: not on the stack */
    if (!path || !s) {
      free(path);
      free(s);
      fprintf(stderr, "vqcheck list: out of memory\n");
      failed = -1;
      break;
    }
    snprintf(path, n, "%s/%s", dir, names[i]);
    const vqc_status st = vqc_scenario_load(path, s);
    if (st != VQC_OK) {
      failed++;
      /* The scenario file's own "path:line: field:" on, without the
       * loader's source location (unless debugging). */
      const char *msg = vqc_cli_error_text();
      if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "path", json_string(path));
        json_object_set_new(o, "error", json_string(msg));
        json_array_append_new(array, o);
      } else {
        printf("%-32s error: %s\n", names[i], msg);
      }
    } else if (json) {
      json_array_append_new(array, vqc_scenario_to_json(s));
    } else {
      char expect[1024];
      vqc_scenario_expect_string(s, expect, sizeof expect);
      printf("%-32s %-11s %5d %6d  %-29s %s\n", s->name,
             vqc_model_name(s->model), s->ranks, s->steps,
             vqc_fault_name(s->fault), expect);
    }
    free(path);
    free(s);
  }
  vqc_scenario_files_free(names, count);

  if (json) {
    json_dumpf(array, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    json_decref(array);
  }
  if (failed < 0) return 3;
  if (count == 0) fprintf(stderr, "vqcheck list: no *.yaml files in '%s'\n", dir);
  if (failed > 0) {
    fprintf(stderr, "vqcheck list: %d of %d scenario files failed to load\n",
            failed, count);
    return 2;
  }
  return 0;
}
