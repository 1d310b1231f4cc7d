# Assembles the kernel library with ptxas for sm_90: any error, and any
# warning (spills among them), fails the build. The report, with registers and
# spill bytes per kernel, is kept next to the PTX as ptxas.log.
execute_process(
  COMMAND ${PTXAS} -arch=sm_90 -O3 -v --warn-on-spills --warning-as-error
          ${KERNELS_DIR}/cake_kernels.ptx -o ${KERNELS_DIR}/cake_kernels.cubin
  RESULT_VARIABLE result
  OUTPUT_FILE ${KERNELS_DIR}/ptxas.log
  ERROR_FILE ${KERNELS_DIR}/ptxas.log)
if(NOT result EQUAL 0)
  file(READ ${KERNELS_DIR}/ptxas.log log)
  message(FATAL_ERROR "ptxas rejected the kernel library:\n${log}")
endif()
