# VqcDevFlags.cmake: warnings (as errors with VQC_WERROR, which CI sets), the
# sanitizer build (ASan + UBSan) and the coverage build with its lcov target.
option(VQC_WERROR "Treat warnings as errors" OFF)
option(VQC_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(VQC_COVERAGE "Build with gcov instrumentation and add the 'coverage' target" OFF)

add_compile_options(-Wall -Wextra -Wshadow -Wno-unused-parameter
                    -Wstrict-prototypes -Wmissing-prototypes)
if(VQC_WERROR)
  add_compile_options(-Werror)
endif()

if(VQC_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

if(VQC_COVERAGE)
  # atomic counter updates: the rank threads of one process run the same code
  add_compile_options(--coverage -O0 -fprofile-update=atomic)
  add_link_options(--coverage)
  find_program(LCOV lcov)
  find_program(GENHTML genhtml)
  if(NOT LCOV OR NOT GENHTML)
    message(FATAL_ERROR "VQC_COVERAGE=ON needs lcov and genhtml (run scripts/install-deps.sh)")
  endif()
  # cmake --build B --target coverage: runs the unit and mpi tests, writes
  # B/coverage/index.html and prints a one-line summary (scripts/coverage.sh).
  add_custom_target(coverage
    COMMAND ${CMAKE_SOURCE_DIR}/scripts/coverage.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
    WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
    USES_TERMINAL)
endif()

# Bit-faithfulness: never let the compiler fuse a*b+c into one FMA (GNU C
# allows it by default wherever the target has FMA). The golden cases are
# compared exactly and replicated state is compared by digest, so every build
# must round every float operation the way the C source says.
add_compile_options(-ffp-contract=off)
