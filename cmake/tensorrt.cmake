# TensorRT plugin libraries (plugins/trt), built when TensorRT's headers are
# found. Only headers are needed: nothing links libnvinfer.
#
# Where NvInfer.h is looked for, first hit wins:
#   1. TRT_FASTOPS_TRT_INCLUDE (CMake -D, else environment): an include dir;
#      given but without NvInfer.h is an error (it was asked for explicitly)
#   2. TensorRT_ROOT (CMake -D, else environment): <root>/include
#   3. /usr/include/x86_64-linux-gnu, /usr/include/aarch64-linux-gnu,
#      /usr/local/tensorrt/include, /usr/include
#
# Targets: trt_fastops_trt (libtrt_fastops_trt.so: getCreators +
# setLoggerFinder for IPluginRegistry::loadLibrary), trt_fastops_trt_autoload
# (registers on load, for dlopen-only loaders) and, with
# TRT_FASTOPS_BUILD_TRT_TESTS=ON, trt_fastops_trt_contract_test.

option(TRT_FASTOPS_BUILD_TRT_TESTS "Build the TensorRT plugin contract test (tests/trt)" OFF)

set(_trt_include "")
set(_trt_explicit "")
if(DEFINED TRT_FASTOPS_TRT_INCLUDE AND NOT "${TRT_FASTOPS_TRT_INCLUDE}" STREQUAL "")
  set(_trt_explicit "${TRT_FASTOPS_TRT_INCLUDE}")
elseif(DEFINED ENV{TRT_FASTOPS_TRT_INCLUDE} AND NOT "$ENV{TRT_FASTOPS_TRT_INCLUDE}" STREQUAL "")
  set(_trt_explicit "$ENV{TRT_FASTOPS_TRT_INCLUDE}")
endif()

if(NOT "${_trt_explicit}" STREQUAL "")
  if(NOT EXISTS "${_trt_explicit}/NvInfer.h")
    message(FATAL_ERROR
      "trt_fastops: TRT_FASTOPS_TRT_INCLUDE='${_trt_explicit}' has no NvInfer.h.\n"
      "  Point it at TensorRT's include directory (the one holding NvInfer.h), or unset it\n"
      "  to search TensorRT_ROOT and the standard locations.")
  endif()
  set(_trt_include "${_trt_explicit}")
else()
  set(_trt_candidates "")
  if(DEFINED TensorRT_ROOT AND NOT "${TensorRT_ROOT}" STREQUAL "")
    list(APPEND _trt_candidates "${TensorRT_ROOT}/include")
  endif()
  if(DEFINED ENV{TensorRT_ROOT} AND NOT "$ENV{TensorRT_ROOT}" STREQUAL "")
    list(APPEND _trt_candidates "$ENV{TensorRT_ROOT}/include")
  endif()
  list(APPEND _trt_candidates
    /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu /usr/local/tensorrt/include /usr/include)
  foreach(_dir IN LISTS _trt_candidates)
    if(EXISTS "${_dir}/NvInfer.h")
      set(_trt_include "${_dir}")
      break()
    endif()
  endforeach()
endif()

if("${_trt_include}" STREQUAL "")
  message(STATUS "trt_fastops: TensorRT headers (NvInfer.h) not found; skipping the TensorRT plugins. "
                 "To build them, set TensorRT_ROOT or TRT_FASTOPS_TRT_INCLUDE (CMake -D or environment) "
                 "to a TensorRT 10.x/11.x install or include directory.")
  return()
endif()

# Version, for the status line and to tell the user which TensorRT the
# library must run with (the ABI differs between majors).
set(_trt_version "unknown")
if(EXISTS "${_trt_include}/NvInferVersion.h")
  file(STRINGS "${_trt_include}/NvInferVersion.h" _trt_version_lines
    REGEX "#define (TRT_(MAJOR|MINOR|PATCH)_ENTERPRISE|NV_TENSORRT_(MAJOR|MINOR|PATCH)) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    set(_trt_${_part} "")
    foreach(_line IN LISTS _trt_version_lines)
      if(_line MATCHES "#define (TRT_${_part}_ENTERPRISE|NV_TENSORRT_${_part}) +([0-9]+)")
        set(_trt_${_part} "${CMAKE_MATCH_2}")
      endif()
    endforeach()
  endforeach()
  if(NOT "${_trt_MAJOR}" STREQUAL "")
    set(_trt_version "${_trt_MAJOR}.${_trt_MINOR}.${_trt_PATCH}")
  endif()
endif()
set(TRT_FASTOPS_TRT_INCLUDE_DIR "${_trt_include}")
message(STATUS "trt_fastops: TensorRT ${_trt_version} headers from ${_trt_include}: building libtrt_fastops_trt.so "
               "(runs with TensorRT ${_trt_MAJOR}.x only)")

# ---------------------------------------------------------------------------
# Core plugin library: the plugins + loadLibrary entry points, no self-registration.
file(GLOB TRT_FASTOPS_TRT_SOURCES CONFIGURE_DEPENDS plugins/trt/*.cc)
list(FILTER TRT_FASTOPS_TRT_SOURCES EXCLUDE REGEX "/autoload\\.cc$")
add_library(trt_fastops_trt SHARED ${TRT_FASTOPS_TRT_SOURCES})
target_include_directories(trt_fastops_trt SYSTEM PRIVATE "${_trt_include}" ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(trt_fastops_trt PRIVATE trt_fastops_kernels ${CMAKE_DL_LIBS})
set_target_properties(trt_fastops_trt PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY "${TRT_FASTOPS_LIB_OUT}"
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON
  BUILD_WITH_INSTALL_RPATH ON
  INSTALL_RPATH "$ORIGIN")
# --no-undefined proves there is no hidden dependency on libnvinfer; nodelete
# keeps registered creators valid even if a loader dlcloses the library; the
# version script exports the two entry points and nothing else (no template
# instantiations that could interpose on TensorRT's own).
set(_trt_map "${CMAKE_CURRENT_BINARY_DIR}/trt_fastops_trt.map")
file(WRITE "${_trt_map}" "{ global: getCreators; setLoggerFinder; local: *; };\n")
target_link_options(trt_fastops_trt PRIVATE "LINKER:--no-undefined" "LINKER:-z,nodelete"
  "LINKER:--version-script=${_trt_map}")
set_property(TARGET trt_fastops_trt APPEND PROPERTY LINK_DEPENDS "${_trt_map}")

# Autoload library: registers the creators when loaded (dlopen-only loaders).
add_library(trt_fastops_trt_autoload SHARED plugins/trt/autoload.cc plugins/trt/trt_common.cc)
target_include_directories(trt_fastops_trt_autoload PRIVATE ${PROJECT_SOURCE_DIR})
target_include_directories(trt_fastops_trt_autoload SYSTEM PRIVATE "${_trt_include}" ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(trt_fastops_trt_autoload PRIVATE trt_fastops_trt ${CMAKE_DL_LIBS})
set_target_properties(trt_fastops_trt_autoload PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY "${TRT_FASTOPS_LIB_OUT}"
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON
  BUILD_WITH_INSTALL_RPATH ON
  INSTALL_RPATH "$ORIGIN")
set(_trt_autoload_map "${CMAKE_CURRENT_BINARY_DIR}/trt_fastops_trt_autoload.map")
file(WRITE "${_trt_autoload_map}" "{ global: trt_fastops_trt_register; local: *; };\n")
target_link_options(trt_fastops_trt_autoload PRIVATE "LINKER:--no-undefined" "LINKER:-z,nodelete"
  "LINKER:--version-script=${_trt_autoload_map}")
set_property(TARGET trt_fastops_trt_autoload APPEND PROPERTY LINK_DEPENDS "${_trt_autoload_map}")

install(TARGETS trt_fastops_trt trt_fastops_trt_autoload LIBRARY DESTINATION trt_fastops/lib)

# ---------------------------------------------------------------------------
# Contract test: drives the plugins as TensorRT would, with test doubles.
if(TRT_FASTOPS_BUILD_TRT_TESTS)
  add_executable(trt_fastops_trt_contract_test tests/trt/contract_test.cc)
  target_include_directories(trt_fastops_trt_contract_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_include_directories(trt_fastops_trt_contract_test SYSTEM PRIVATE "${_trt_include}" ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(trt_fastops_trt_contract_test PRIVATE CUDA::cudart_static ${CMAKE_DL_LIBS})
  # The test stands in for libnvinfer: it exports getPluginRegistry,
  # getLogger and getInferLibVersion, which the plugin libraries look up.
  set_target_properties(trt_fastops_trt_contract_test PROPERTIES
    ENABLE_EXPORTS ON
    RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/tests/trt")
  target_compile_definitions(trt_fastops_trt_contract_test PRIVATE
    TRT_FASTOPS_TRT_LIB_DIR="${TRT_FASTOPS_LIB_OUT}")
  # The libraries are loaded with dlopen at run time, not linked.
  add_dependencies(trt_fastops_trt_contract_test trt_fastops_trt trt_fastops_trt_autoload)
endif()
