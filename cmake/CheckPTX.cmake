# SPDX-License-Identifier: Apache-2.0
# Assembles the kernel library with ptxas into the cubin the runtime embeds
# and loads on compute capability 9.0 (sm_90a: the PTX targets sm_90, and the
# "a" variant lets ptxas use every feature of exactly that architecture).
# Any error, and any warning (spills among them), fails the build; the
# report, with registers and spill bytes per kernel, is kept next to the
# cubin as ptxas.log. The one place that runs ptxas:
#
#   cmake -DPTXAS=<ptxas> -DPTX=<in.ptx> -DCUBIN=<out.cubin> -P CheckPTX.cmake
#
# run by tools/cake-kernel-gen right after generating the PTX, and by
# lib/Runtime when a kernels folder comes without its cubin.

if(NOT PTXAS OR NOT PTX OR NOT CUBIN)
  message(FATAL_ERROR "usage: cmake -DPTXAS=<ptxas> -DPTX=<in.ptx> -DCUBIN=<out.cubin> -P CheckPTX.cmake")
endif()
get_filename_component(out_dir "${CUBIN}" DIRECTORY)
set(log "${out_dir}/ptxas.log")
execute_process(
  COMMAND ${PTXAS} -arch=sm_90a -O3 -v --warn-on-spills --warning-as-error
          ${PTX} -o ${CUBIN}.tmp
  RESULT_VARIABLE result
  OUTPUT_FILE ${log}
  ERROR_FILE ${log})
if(NOT result EQUAL 0)
  file(REMOVE "${CUBIN}.tmp")
  file(READ ${log} text)
  message(FATAL_ERROR "ptxas rejected the kernel library:\n${text}")
endif()
# Renamed only once ptxas accepted it: a failed run leaves no cubin behind.
file(RENAME "${CUBIN}.tmp" "${CUBIN}")
