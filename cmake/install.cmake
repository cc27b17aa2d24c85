# Install rules (SMELT_INSTALL): public headers, libsmelt, the smelt CLI, the CMake package
# (find_package(smelt CONFIG) -> smelt::smelt) and smelt.pc. Everything installed is relocatable:
# `cmake --install BUILD --prefix ANY` gives a working tree under ANY.
include(CMakePackageConfigHelpers)

set(SMELT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/smelt CACHE STRING
    "Where the CMake package files go, relative to the prefix")
mark_as_advanced(SMELT_INSTALL_CMAKEDIR)

# Headers: include/smelt/ as it is, less the ONNX layer's headers when it is not built (their
# functions would be missing from the library).
set(SMELT_HEADER_EXCLUDES)
if(NOT SMELT_ONNX)
  set(SMELT_HEADER_EXCLUDES PATTERN onnx.h EXCLUDE PATTERN view.h EXCLUDE)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/smelt
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT smelt_development
        FILES_MATCHING PATTERN "*.h" ${SMELT_HEADER_EXCLUDES})

install(TARGETS smelt EXPORT smeltTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT smelt_runtime NAMELINK_COMPONENT smelt_development
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT smelt_development
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT smelt_runtime)

if(SMELT_CLI)
  # The installed CLI finds the installed libsmelt next to it, wherever the prefix is.
  file(RELATIVE_PATH SMELT_BIN_TO_LIB ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
  set_target_properties(smelt_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${SMELT_BIN_TO_LIB}")
  install(TARGETS smelt_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT smelt_runtime)
endif()

# The NVRTC helper process (tools/smelt-nvrtc): libsmelt finds it from its own folder, through the
# relative path from the libdir to the libexecdir compiled into it (src/backend/cuda/nvrtc_process.cpp).
if(SMELT_CUDA)
  install(TARGETS smelt_nvrtc RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/smelt COMPONENT smelt_runtime)
endif()

# The CMake package. The library's private dependencies (BLAS, protobuf, the CUDA toolkit's
# headers) stay out of it: a consumer needs only the compiler and Threads.
install(EXPORT smeltTargets NAMESPACE smelt:: DESTINATION ${SMELT_INSTALL_CMAKEDIR}
        COMPONENT smelt_development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/smeltConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/smeltConfig.cmake
                              INSTALL_DESTINATION ${SMELT_INSTALL_CMAKEDIR})
# Before 1.0 a minor version may break the API, as the SONAME says: 0.1.x satisfies a request for 0.1.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/smeltConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/smeltConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/smeltConfigVersion.cmake
        DESTINATION ${SMELT_INSTALL_CMAKEDIR} COMPONENT smelt_development)

# pkg-config: the prefix is found from the .pc file's own place (${pcfiledir}), so the file is
# right under any install prefix. With an absolute libdir/includedir those are used as they are.
set(SMELT_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${SMELT_PC_DIR}")
  set(SMELT_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  # One ".." per folder of the pkgconfig dir (lib/pkgconfig -> ../..).
  string(REGEX REPLACE "[^/]+" ".." SMELT_PC_UP "${SMELT_PC_DIR}")
  set(SMELT_PC_PREFIX "\${pcfiledir}/${SMELT_PC_UP}")
endif()
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(SMELT_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(SMELT_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
set(SMELT_PC_CFLAGS "")
if(SMELT_ONNX)
  set(SMELT_PC_CFLAGS " -DSMELT_ONNX=1")  # as smelt::smelt's compile definition
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/smelt.pc.in ${CMAKE_CURRENT_BINARY_DIR}/smelt.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/smelt.pc DESTINATION ${SMELT_PC_DIR} COMPONENT smelt_development)
