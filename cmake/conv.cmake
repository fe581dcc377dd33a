# Conv / ConvTranspose build settings (owned by the conv work; included by
# CMakeLists.txt after the trt_fastops_kernels target is defined).
#
# cudnn-frontend's headers (used by plugins/conv/conv_cudnn.cc, which loads
# libcudnn at run time) include <nvrtc.h>. It is looked for in, in order:
#   -DTRT_FASTOPS_NVRTC_INCLUDE=... or the environment variable of that name,
#   .deps/nvrtc/include (scripts/setup_deps.py: PyPI nvidia-cuda-nvrtc, nvidia/cu13/include),
#   the CUDA toolkit's include directories.
# Found: the cuDNN path is compiled in (and its absence at compile time becomes
# an #error). Not found: the kernel library is built without it (every
# convolution runs on trt_fastops' own kernels) and configure says so.

if(NOT TARGET trt_fastops_kernels)
  message(FATAL_ERROR "cmake/conv.cmake must be included after the trt_fastops_kernels target")
endif()

set(_trt_fastops_nvrtc_default "")
if(DEFINED ENV{TRT_FASTOPS_NVRTC_INCLUDE} AND NOT "$ENV{TRT_FASTOPS_NVRTC_INCLUDE}" STREQUAL "")
  set(_trt_fastops_nvrtc_default "$ENV{TRT_FASTOPS_NVRTC_INCLUDE}")
elseif(EXISTS "${PROJECT_SOURCE_DIR}/.deps/nvrtc/include/nvrtc.h")
  set(_trt_fastops_nvrtc_default "${PROJECT_SOURCE_DIR}/.deps/nvrtc/include")
else()
  foreach(_dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    if(EXISTS "${_dir}/nvrtc.h")
      set(_trt_fastops_nvrtc_default "${_dir}")
      break()
    endif()
  endforeach()
endif()
set(TRT_FASTOPS_NVRTC_INCLUDE "${_trt_fastops_nvrtc_default}" CACHE PATH
  "Include directory holding nvrtc.h (needed by cudnn-frontend for the conv cuDNN path)")

if(TRT_FASTOPS_NVRTC_INCLUDE AND EXISTS "${TRT_FASTOPS_NVRTC_INCLUDE}/nvrtc.h")
  target_include_directories(trt_fastops_kernels SYSTEM PRIVATE "${TRT_FASTOPS_NVRTC_INCLUDE}")
  set_property(SOURCE "${PROJECT_SOURCE_DIR}/plugins/conv/conv_cudnn.cc" TARGET_DIRECTORY trt_fastops_kernels
    APPEND PROPERTY COMPILE_DEFINITIONS TRT_FASTOPS_CONV_EXPECT_CUDNN=1)
  message(STATUS "trt_fastops: nvrtc.h from ${TRT_FASTOPS_NVRTC_INCLUDE} (conv: cuDNN path built, libcudnn loaded at run time)")
else()
  message(WARNING
    "trt_fastops: nvrtc.h not found, so Conv/ConvTranspose are built WITHOUT the cuDNN path (every\n"
    "  convolution runs on trt_fastops' own kernels). cudnn-frontend needs nvrtc.h: run\n"
    "      python3 scripts/setup_deps.py\n"
    "  (PyPI nvidia-cuda-nvrtc into .deps/nvrtc/include), or point TRT_FASTOPS_NVRTC_INCLUDE at a directory with nvrtc.h.")
endif()
