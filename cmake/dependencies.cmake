# Third-party header locations. Each one is a cache variable that defaults to
# the environment variable of the same name, then to .deps/ (filled by
# scripts/setup_deps.py). A missing one stops the configure with a message
# saying what is missing and how to get it.

function(trt_fastops_find_headers var env_name dep_dir sentinel pip_or_apt)
  set(default "")
  if(DEFINED ENV{${env_name}} AND NOT "$ENV{${env_name}}" STREQUAL "")
    set(default "$ENV{${env_name}}")
  else()
    set(default "${PROJECT_SOURCE_DIR}/.deps/${dep_dir}/include")
  endif()
  set(${var} "${default}" CACHE PATH "Include directory holding ${sentinel}")
  if(NOT EXISTS "${${var}}/${sentinel}")
    message(FATAL_ERROR
      "trt_fastops: ${sentinel} not found in '${${var}}'.\n"
      "  It comes from ${pip_or_apt}. Either run\n"
      "      python3 scripts/setup_deps.py\n"
      "  (fetches it into .deps/), or point ${env_name} (environment) or\n"
      "  -D${var}=... (CMake) at an include directory that has ${sentinel}.")
  endif()
  message(STATUS "trt_fastops: ${sentinel} from ${${var}}")
endfunction()

trt_fastops_find_headers(TRT_FASTOPS_ORT_INCLUDE TRT_FASTOPS_ORT_INCLUDE onnxruntime
  onnxruntime_c_api.h "Debian trixie's libonnxruntime-dev")
trt_fastops_find_headers(TRT_FASTOPS_CUDNN_INCLUDE TRT_FASTOPS_CUDNN_INCLUDE cudnn
  cudnn.h "PyPI nvidia-cudnn-cu13 (nvidia/cudnn/include)")
trt_fastops_find_headers(TRT_FASTOPS_CUDNN_FRONTEND_INCLUDE TRT_FASTOPS_CUDNN_FRONTEND_INCLUDE cudnn_frontend
  cudnn_frontend.h "PyPI nvidia-cudnn-frontend (include/)")
trt_fastops_find_headers(TRT_FASTOPS_CUTLASS_INCLUDE TRT_FASTOPS_CUTLASS_INCLUDE cutlass
  cute/tensor.hpp "PyPI nvidia-cutlass (cutlass_library/source/include)")
trt_fastops_find_headers(TRT_FASTOPS_CUBLAS_INCLUDE TRT_FASTOPS_CUBLAS_INCLUDE cublas
  cublasLt.h "PyPI nvidia-cublas (nvidia/cu13/include)")
