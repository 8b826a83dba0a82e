/* vqcheck.c: the vqcheck command line (entry point and subcommand table).
 *
 * Exit codes (DESIGN.md): 0 clean, 1 findings or failed expectation,
 * 2 usage or invalid input, 3 environment or internal error. Only main()
 * turns a status into an exit code. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "git_commit.h" /* VQC_GIT_COMMIT (cmake/VqcGitCommit.cmake) */
#include "vqc/vqc.h"

static const vqc_cli_command commands[] = {
    {"smoke", "run a multi-rank training smoke check and compare digests",
     vqc_cmd_smoke},
    {"conformance", "replay golden vector-quantize-pytorch cases and compare",
     vqc_cmd_conformance},
    {"list", "list the scenarios in a directory and check that they load",
     vqc_cmd_list},
    {"run", "train one scenario with every checker on and report findings",
     vqc_cmd_run},
    {"suite", "run every scenario of a directory and check its expectation",
     vqc_cmd_suite},
    {"analyze", "re-analyse a run directory's ledger dumps and traces offline",
     vqc_cmd_analyze},
    {"compare", "compare per-rank digest traces written by any program",
     vqc_cmd_compare},
    {"report", "make a run directory's reports again (html, md, junit)",
     vqc_cmd_report},
    {"watch", "run an unmodified PyTorch job with the bridge and check it",
     vqc_cmd_watch},
};
static const int ncommands = (int)(sizeof commands / sizeof commands[0]);

static void print_usage(FILE *f) {
  fprintf(f, "usage: vqcheck [--version] [--help] <command> [options]\n\n");
  fprintf(f, "commands:\n");
  for (int i = 0; i < ncommands; i++)
    fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\n'vqcheck <command> --help' describes a command.\n");
  fprintf(f, "exit codes: 0 clean, 1 findings, 2 usage or bad input, "
             "3 environment or internal error\n");
}

static void print_version(void) {
  printf("vqcheck %s\n", VQC_VERSION_STRING);
  if (VQC_GIT_COMMIT[0]) printf("commit: %s\n", VQC_GIT_COMMIT);
  printf("build: %s, %s\n", VQC_BUILD_TYPE, VQC_C_COMPILER);
  printf("options: %s\n", VQC_BUILD_OPTIONS);
  printf("backends: threads on, mpi %s, nccl %s\n", VQC_WITH_MPI ? "on" : "off",
         VQC_WITH_NCCL ? "on" : "off");
  printf("cuda: %s\n", VQC_WITH_CUDA ? "on" : "off");
}

/* The command line's exit code, before stdout is closed. */
static int dispatch(int argc, char **argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    print_usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    print_version();
    return 0;
  }
  for (int i = 0; i < ncommands; i++)
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "vqcheck: unknown command '%s'\n", argv[1]);
  fprintf(stderr, "hint: 'vqcheck --help' lists the commands\n");
  return 2;
}

int main(int argc, char **argv) {
  /* Every command ends here: output that never reached stdout (a full
   * disk under `--json > file`) is exit 3, never a silent 0. */
  return vqc_cli_close_stdout(dispatch(argc, argv));
}
