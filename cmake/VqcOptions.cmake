# VqcOptions.cmake: finds the required and optional dependencies and defines
# the VQC_WITH_* options. Optional parts default to ON exactly when found;
# forcing one ON without the dependency is a configure error that says what to
# install.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

set(_vqc_install_hint "run scripts/install-deps.sh")
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET GLOBAL jansson)
pkg_check_modules(YAML REQUIRED IMPORTED_TARGET GLOBAL yaml-0.1)
pkg_check_modules(CRITERION IMPORTED_TARGET criterion)
if(NOT CRITERION_FOUND)
  message(WARNING "Criterion not found: unit tests are not built (${_vqc_install_hint})")
endif()

# ---- MPI (OpenMPI from Debian)
find_package(MPI COMPONENTS C QUIET)
option(VQC_WITH_MPI "Build the OpenMPI comm backend" ${MPI_C_FOUND})
if(VQC_WITH_MPI AND NOT MPI_C_FOUND)
  message(FATAL_ERROR "VQC_WITH_MPI=ON but no MPI C library was found (${_vqc_install_hint})")
endif()
find_program(VQC_MPIEXEC NAMES mpiexec mpirun HINTS ${MPIEXEC_EXECUTABLE})

# ---- CUDA toolkit (runtime API for device storage; kernels need nvcc)
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
option(VQC_WITH_CUDA "Build CUDA device storage and kernels" ${CUDAToolkit_FOUND})
if(VQC_WITH_CUDA AND NOT CUDAToolkit_FOUND)
  message(FATAL_ERROR "VQC_WITH_CUDA=ON but the CUDA toolkit was not found (set CUDAToolkit_ROOT)")
endif()

# The CUDA runtime linked statically: a binary (the .deb) then needs only
# the driver at run time, and none without a GPU.
option(VQC_CUDART_STATIC "Link the CUDA runtime statically" OFF)

# ---- NCCL (ships with the CUDA toolkit on these machines)
find_path(VQC_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
find_library(VQC_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_ROOT}/lib64 ${CUDAToolkit_LIBRARY_DIR})
if(VQC_NCCL_INCLUDE_DIR AND VQC_NCCL_LIBRARY AND CUDAToolkit_FOUND AND MPI_C_FOUND)
  set(_vqc_nccl_found ON)
else()
  set(_vqc_nccl_found OFF)
endif()
option(VQC_WITH_NCCL "Build the NCCL comm backend (needs CUDA and MPI)" ${_vqc_nccl_found})
if(VQC_WITH_NCCL AND NOT (_vqc_nccl_found AND VQC_WITH_CUDA AND VQC_WITH_MPI))
  message(FATAL_ERROR "VQC_WITH_NCCL=ON needs nccl.h, libnccl, CUDA and MPI")
endif()

# ---- what to build besides the libraries and the CLI. `pip install .`
# (pyproject.toml) turns the first three off and VQC_PYTHON on.
option(VQC_BUILD_TESTS "Build the tests (ctest)" ON)
option(VQC_BUILD_BENCH "Build the benchmarks (bench/)" ON)
option(VQC_BUILD_EXAMPLES "Build and test the examples (examples/)" ON)
option(VQC_PYTHON "Build the Python extension module vqcheck._core (python/)" OFF)

function(vqc_print_summary)
  message(STATUS "")
  message(STATUS "vqcheck ${PROJECT_VERSION} configuration")
  message(STATUS "  build type      ${CMAKE_BUILD_TYPE}")
  message(STATUS "  VQC_WITH_MPI    ${VQC_WITH_MPI}   (mpiexec: ${VQC_MPIEXEC})")
  message(STATUS "  VQC_WITH_CUDA   ${VQC_WITH_CUDA}")
  message(STATUS "  VQC_WITH_NCCL   ${VQC_WITH_NCCL}")
  message(STATUS "  unit tests      ${CRITERION_FOUND}   (VQC_BUILD_TESTS ${VQC_BUILD_TESTS})")
  message(STATUS "  VQC_PYTHON      ${VQC_PYTHON}")
  message(STATUS "  VQC_WERROR      ${VQC_WERROR}")
  message(STATUS "  VQC_SANITIZE    ${VQC_SANITIZE}")
  message(STATUS "  VQC_COVERAGE    ${VQC_COVERAGE}")
  message(STATUS "")
endfunction()
