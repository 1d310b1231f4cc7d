//===- Pipelines.cpp - From the cake dialect to PTX -----------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the pass pipelines that take the cake dialect to PTX.
//
//===----------------------------------------------------------------------===//

#include "cake/Dialect/Cake/Pipelines/Pipelines.h"
#include "cake/Conversion/Passes.h"
#include "cake/Dialect/Cake/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::cake;

void mlir::cake::buildCakeToKernelsPipeline(OpPassManager &pm,
                                            const CakeToPTXOptions &options) {
  pm.addPass(createCakeTilePass(
      CakeTilePassOptions{options.vectorChannels, options.blockThreads,
                          options.stages, options.unroll, options.reduceChains,
                          options.reduceSlices, options.waves,
                          options.maxPartTokens}));
  pm.addPass(createConvertCakeToGPUPass(
      ConvertCakeToGPUPassOptions{options.blockThreads}));
  pm.addPass(createCakeExpandTilesPass(CakeExpandTilesPassOptions{
      options.fastMath, options.searchFanout, options.subgroupSearchProbes}));
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addNestedPass<gpu::GPUFuncOp>(createCakeStageRowsPass());
  kernels.addNestedPass<gpu::GPUFuncOp>(createCakeUnrollRowsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCakeRecordAlignmentPass());
}

void mlir::cake::buildKernelsToNVVMPipeline(OpPassManager &pm,
                                            const CakeToPTXOptions &options) {
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = options.optLevel;
  // No module-wide fast or ftz flags: the activation's lowering writes each
  // approximation it wants as an op, and everything else stays IEEE.
  pm.addPass(createGpuNVVMAttachTarget(target));

  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createConvertCakeMathToNVVMPass(
      ConvertCakeMathToNVVMPassOptions{options.commonRange}));
  kernels.addPass(createSCFToControlFlowPass());
  // The flat row views (memref.collapse_shape) as offsets and sizes.
  kernels.addPass(memref::createExpandStridedMetadataPass());
  kernels.addPass(createLowerAffinePass());
  kernels.addPass(createConvertNVGPUToNVVMPass());
  ConvertGpuOpsToNVVMOpsOptions toNVVM;
  toNVVM.indexBitwidth = 64; // S * C may pass 2^31
  toNVVM.hasRedux = true;     // sm_80 and later: a subgroup's i32 sums
  kernels.addPass(createConvertGpuOpsToNVVMOps(toNVVM));
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::cake::buildCakeToNVVMPipeline(OpPassManager &pm,
                                         const CakeToPTXOptions &options) {
  buildCakeToKernelsPipeline(pm, options);
  buildKernelsToNVVMPipeline(pm, options);
}

void mlir::cake::buildKernelsToPTXPipeline(OpPassManager &pm,
                                           const CakeToPTXOptions &options) {
  buildKernelsToNVVMPipeline(pm, options);
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::cake::buildCakeToPTXPipeline(OpPassManager &pm,
                                        const CakeToPTXOptions &options) {
  buildCakeToKernelsPipeline(pm, options);
  buildKernelsToPTXPipeline(pm, options);
}

void mlir::cake::buildCakeToHostKernelsPipeline(
    OpPassManager &pm, const CakeToHostOptions &options) {
  // No stages: a CPU's caches and prefetchers keep the rows coming. One
  // thread a reduction column: a host thread has no subgroup to share it.
  pm.addPass(createCakeTilePass(CakeTilePassOptions{
      options.vectorChannels, DefaultTiling::blockThreads, /*stages=*/0,
      options.unroll, DefaultTiling::reduceChains, /*reduceSlices=*/1,
      /*waves=*/1, /*maxPartTokens=*/0}));
  pm.addPass(createConvertCakeToHostPass());
  pm.addPass(createCakeExpandTilesPass(
      CakeExpandTilesPassOptions{/*fastMath=*/false}));
  pm.addPass(createCakeUnrollRowsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCakeRecordAlignmentPass());
}

void mlir::cake::buildHostKernelsToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createConvertCakeMathToArithPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // bf16 <-> f32 as integer operations: x86 has no conversion instruction
  // before AVX-512 BF16, and LLVM would call a runtime library for them.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCakeWrapHostKernelsPass());
}

void mlir::cake::buildCakeToHostPipeline(OpPassManager &pm,
                                         const CakeToHostOptions &options) {
  buildCakeToHostKernelsPipeline(pm, options);
  buildHostKernelsToLLVMPipeline(pm);
}

void mlir::cake::registerCakePipelines() {
  PassPipelineRegistration<CakeToPTXOptions>(
      "cake-to-kernels",
      "Tile, fuse and map the cake ops to GPU kernels, expanded to loops",
      buildCakeToKernelsPipeline);
  PassPipelineRegistration<CakeToPTXOptions>(
      "cake-to-nvvm",
      "Tile, fuse and map the cake ops to GPU kernels in the NVVM dialect",
      buildCakeToNVVMPipeline);
  PassPipelineRegistration<CakeToPTXOptions>(
      "cake-to-ptx", "Compile the cake ops to PTX kernels in a gpu.binary",
      buildCakeToPTXPipeline);
  PassPipelineRegistration<CakeToHostOptions>(
      "cake-to-host",
      "Compile the cake ops to host kernels in the LLVM dialect",
      buildCakeToHostPipeline);
}
