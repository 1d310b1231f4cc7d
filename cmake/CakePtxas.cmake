# SPDX-License-Identifier: Apache-2.0
# Finds ptxas (CAKE_PTXAS) and defines the command that turns the kernel
# library's PTX into the cubin the runtime embeds (cmake/CheckPTX.cmake).
# Included by tools/cake-kernel-gen and lib/Runtime, so that both find the
# same ptxas and run it the same way.

include_guard(GLOBAL)

find_program(CAKE_PTXAS ptxas
  HINTS ${CUDAToolkit_BIN_DIR} /usr/local/cuda/bin $ENV{CUDA_HOME}/bin)

# Sets `out_var` to a custom command's COMMAND arguments that assemble `ptx`
# into `cubin` (and ptxas.log next to it), failing on any ptxas warning.
function(cake_check_ptx_command out_var ptx cubin)
  set(${out_var}
    COMMAND "${CMAKE_COMMAND}" "-DPTXAS=${CAKE_PTXAS}" "-DPTX=${ptx}"
            "-DCUBIN=${cubin}" -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CheckPTX.cmake"
    PARENT_SCOPE)
endfunction()
