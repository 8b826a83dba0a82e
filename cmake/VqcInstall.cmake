# VqcInstall.cmake: what `cmake --install BUILD --prefix P` puts where, the
# CMake package (lib/cmake/vqcheck) and the pkg-config file, and the .deb
# (CPack, `cpack -G DEB` in the build directory).
#
#   bin/vqcheck
#   lib/libvqcheck.{so,a}, lib/libvqcheck_checkers.{so,a}
#   include/vqc/*.h (the library's public headers, the generated version.h,
#                    instrument.h)
#   lib/cmake/vqcheck/vqcheck{Config,ConfigVersion,Targets*}.cmake
#   lib/pkgconfig/vqcheck.pc
#   share/man/man1/vqcheck.1
#   share/bash-completion/completions/vqcheck
#   share/vqcheck/scenarios/  (the bug catalogue `vqcheck suite` runs)
#   share/vqcheck/bridge/     (`vqcheck watch`'s Python start-up hook)
include(CMakePackageConfigHelpers)

set(VQC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/vqcheck)

install(TARGETS vqcheck_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS vqcheck_shared vqcheck vqc_checkers_shared vqc_checkers
        EXPORT vqcheckTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/lib/include/vqc
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/lib/include/vqc/version.h
              ${PROJECT_SOURCE_DIR}/checkers/include/vqc/instrument.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vqc)

install(EXPORT vqcheckTargets NAMESPACE vqcheck:: DESTINATION ${VQC_CMAKE_DIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/install/vqcheckConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vqcheckConfig.cmake
  INSTALL_DESTINATION ${VQC_CMAKE_DIR})
# 0.x: a minor version may break the API, so only the same minor matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vqcheckConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vqcheckConfig.cmake
              ${PROJECT_BINARY_DIR}/vqcheckConfigVersion.cmake
        DESTINATION ${VQC_CMAKE_DIR})

# pkg-config: what static linking needs besides libxxhash and jansson.
set(VQC_PC_REQUIRES_PRIVATE "")
set(VQC_PC_LIBS_PRIVATE "")
if(VQC_WITH_MPI)
  string(APPEND VQC_PC_REQUIRES_PRIVATE " ompi-c")
endif()
if(VQC_WITH_CUDA)
  string(APPEND VQC_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lstdc++")
endif()
if(VQC_WITH_NCCL)
  string(APPEND VQC_PC_LIBS_PRIVATE " ${VQC_NCCL_LIBRARY}")
endif()
# From the .pc file's directory up to the prefix: ../.. for lib/pkgconfig,
# ../../.. for Debian's lib/x86_64-linux-gnu/pkgconfig.
file(RELATIVE_PATH VQC_PC_UP "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" VQC_PC_UP "${VQC_PC_UP}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/install/vqcheck.pc.in
               ${PROJECT_BINARY_DIR}/vqcheck.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/vqcheck.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES ${PROJECT_BINARY_DIR}/docs/vqcheck.1
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/docs/completion/vqcheck.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME vqcheck)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/scenarios/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/vqcheck/scenarios
        FILES_MATCHING PATTERN "*.yaml" PATTERN "*.yml" PATTERN "*.md")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/bridge/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/vqcheck/bridge
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)

# ---- the .deb (cpack -G DEB)
# Depends: the Debian 12 packages of the shared libraries the binaries
# need, named here from the build's options (not computed by
# dpkg-shlibdeps, which cannot name the CUDA and NCCL libraries of an NVIDIA
# install). A .deb is meant to be built with VQC_CUDART_STATIC=ON (the CUDA
# runtime inside; only the driver is needed, and none without a GPU) and
# without NCCL (no Debian 12 package ships libnccl.so.2):
# scripts/package-deb.sh configures such a build.
set(CPACK_PACKAGE_NAME vqcheck)
set(CPACK_PACKAGE_VENDOR "vqcheck")
set(CPACK_PACKAGE_CONTACT "vqcheck developers <vqcheck@example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "finds correctness bugs in distributed training")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(_deps "libc6 (>= 2.36)" "libgcc-s1" "libxxhash0 (>= 0.8)"
          "libjansson4 (>= 2.14)" "libyaml-0-2" "libb2-1")
if(VQC_WITH_MPI)
  list(APPEND _deps "libopenmpi3")
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "openmpi-bin")
endif()
if(VQC_WITH_CUDA)
  list(APPEND _deps "libstdc++6")
endif()
list(JOIN _deps ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch, man-db")
if(VQC_WITH_NCCL)
  message(STATUS "cpack: this build links NCCL (libnccl.so.2), which no "
                 "Debian 12 package provides; build the .deb with "
                 "scripts/package-deb.sh")
endif()
if(VQC_WITH_CUDA AND NOT VQC_CUDART_STATIC)
  message(STATUS "cpack: this build links the CUDA runtime dynamically "
                 "(libcudart.so from the CUDA toolkit); the .deb wants "
                 "-DVQC_CUDART_STATIC=ON (scripts/package-deb.sh)")
endif()
include(CPack)
