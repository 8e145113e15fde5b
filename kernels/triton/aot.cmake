# aot.cmake — the `triton` target (included by the top-level CMakeLists.txt after the cuda target).
#
# At build time kernels/triton/aot_compile.py compiles kv_append_kernel to sm_90a cubins (one per
# input dtype x cache dtype x slot dtype, no GPU needed) into <build>/triton-aot/ and generates
# embed.cpp, which puts manifest.json and the cubins into the kvfuzz binary. The target's C++ side
# (src/targets/triton/) launches them through the CUDA driver API reached via the CUDA runtime.
#
#   KVFUZZ_TRITON_AOT     AUTO (default): build the target when a CUDA compiler is there and
#                         KVFUZZ_TRITON_PYTHON imports triton 3.6.0; ON: the same, but fail if not;
#                         OFF: never. Without it, kvfuzz builds and runs everything else.
#   KVFUZZ_TRITON_PYTHON  the Python to compile with (default: KVFUZZ_TRITON_VENV/bin/python,
#                         the venv scripts/setup-triton.sh makes).
set(KVFUZZ_TRITON_AOT AUTO CACHE STRING "Build the triton target (Triton kernels compiled ahead of time): AUTO, ON or OFF")
set_property(CACHE KVFUZZ_TRITON_AOT PROPERTY STRINGS AUTO ON OFF)
set(KVFUZZ_TRITON_VENV "${CMAKE_SOURCE_DIR}/build/venv-triton" CACHE PATH "Python venv with triton, numpy<2.4, pytest")
set(KVFUZZ_TRITON_PYTHON "" CACHE FILEPATH "Python with triton==3.6.0 for the triton target's AOT build (empty: the venv's)")

# Manifest parsing, kernel selection and argument packing: plain C++, built (and unit-tested) always.
target_sources(kvfuzz_targets PRIVATE ${CMAKE_SOURCE_DIR}/src/targets/triton/aot_manifest.cpp)

set(_triton_python "${KVFUZZ_TRITON_PYTHON}")
if(NOT _triton_python)
  set(_triton_python "${KVFUZZ_TRITON_VENV}/bin/python")
endif()
set(_triton_why "")
if(KVFUZZ_TRITON_AOT STREQUAL "OFF")
  set(_triton_why "KVFUZZ_TRITON_AOT=OFF")
elseif(NOT CMAKE_CUDA_COMPILER)
  set(_triton_why "no CUDA compiler (the target needs the CUDA runtime and headers)")
elseif(NOT EXISTS "${_triton_python}")
  set(_triton_why "no Python at ${_triton_python} (run scripts/setup-triton.sh, or set KVFUZZ_TRITON_PYTHON)")
else()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=TRITON_INTERPRET
                          "${_triton_python}" -c "import triton; print(triton.__version__)"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _version ERROR_VARIABLE _err
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0)
    string(REGEX REPLACE ".*\n([^\n]+)\n*$" "\\1" _err "${_err}")  # the exception line
    set(_triton_why "${_triton_python} cannot import triton: ${_err}")
  elseif(NOT _version STREQUAL "3.6.0")
    set(_triton_why "${_triton_python} has triton ${_version}; 3.6.0 is needed (kernels/triton/requirements.txt)")
  endif()
endif()

if(_triton_why)
  if(KVFUZZ_TRITON_AOT STREQUAL "ON")
    message(FATAL_ERROR "kvfuzz: KVFUZZ_TRITON_AOT=ON, but the triton target cannot be built: ${_triton_why}")
  endif()
  message(STATUS "kvfuzz: triton target disabled: ${_triton_why}")
else()
  set(_aot_dir "${CMAKE_BINARY_DIR}/triton-aot")
  file(GLOB _triton_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/triton/kvfuzz_triton/*.py)
  add_custom_command(
    OUTPUT ${_aot_dir}/embed.cpp ${_aot_dir}/manifest.json
    COMMAND ${CMAKE_COMMAND} -E env --unset=TRITON_INTERPRET
            "${_triton_python}" ${CMAKE_SOURCE_DIR}/kernels/triton/aot_compile.py --out-dir ${_aot_dir}
    DEPENDS ${CMAKE_SOURCE_DIR}/kernels/triton/aot_compile.py ${_triton_sources}
    COMMENT "Compiling the Triton kernels to sm_90a cubins (kernels/triton/aot_compile.py)"
    VERBATIM)
  # The cubins, embedded by .incbin: embed.cpp names each with its sha256, so it changes with them.
  add_library(kvfuzz_kernel_triton STATIC ${_aot_dir}/embed.cpp)
  target_include_directories(kvfuzz_kernel_triton PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_sources(kvfuzz_targets PRIVATE src/targets/triton/triton_target.cpp src/targets/triton/cubin_loader.cpp)
  target_compile_definitions(kvfuzz_targets PUBLIC KVFUZZ_HAVE_TRITON)
  target_link_libraries(kvfuzz_targets PUBLIC kvfuzz_kernel_triton)
  message(STATUS "kvfuzz: triton target enabled (${_triton_python}, kernels compiled into ${_aot_dir})")
endif()
