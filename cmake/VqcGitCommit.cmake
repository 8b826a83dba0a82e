# VqcGitCommit.cmake: writes the git commit the tree was built from into a
# header, at every build (not only at configure time, so `vqcheck --version`
# never names a stale commit), touching the file only when its text changes
# so that nothing recompiles for nothing.
#   cmake -DSOURCE_DIR=<repo> -DOUTPUT=<header> -P VqcGitCommit.cmake
# Outside a git checkout (a tarball, an sdist) the commit is "".
set(commit "")
find_program(_git git)
if(_git)
  execute_process(COMMAND ${_git} -C ${SOURCE_DIR} rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE commit RESULT_VARIABLE rc
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT rc EQUAL 0)
    set(commit "")
  else()
    # Tracked files changed since that commit: say so.
    execute_process(COMMAND ${_git} -C ${SOURCE_DIR} status --porcelain
                            --untracked-files=no
                    OUTPUT_VARIABLE changes RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0 AND NOT changes STREQUAL "")
      set(commit "${commit}-dirty")
    endif()
  endif()
endif()
set(text "/* git_commit.h: generated at build time by cmake/VqcGitCommit.cmake. */\n#define VQC_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
else()
  set(old "")
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
