//===- CakeToGPU.cpp - Turn tiled functions into GPU kernels --------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the convert-cake-to-gpu pass: every scf.forall of a
// tiled function becomes a gpu.func kernel whose threads run the forall's
// iterations, and consecutive kernels of one function are chained for
// programmatic dependent launch (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "../ForallOutlining.h"

#include "cake/Conversion/Passes.h"
#include "cake/Dialect/Cake/IR/CakeOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::cake {
#define GEN_PASS_DEF_CONVERTCAKETOGPUPASS
#include "cake/Conversion/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

namespace {
constexpr StringLiteral kKernelModuleName = "cake_kernels";

/// Lowers `kernel`'s cake.lane_sum ops to butterflies of gpu.shuffle xor and
/// records their lanes on the kernel. Needs whole subgroups in a block.
LogicalResult lowerLaneSums(gpu::GPUFuncOp kernel, int64_t blockThreads) {
  SmallVector<LaneSumOp> laneSums;
  kernel.walk([&](LaneSumOp op) { laneSums.push_back(op); });
  if (laneSums.empty())
    return success();
  if (blockThreads % 32 != 0)
    return laneSums.front().emitOpError("needs blocks of whole 32-lane "
                                        "subgroups, not ")
           << blockThreads << " threads";
  int64_t lanes = laneSums.front().getLanes();
  for (LaneSumOp op : laneSums) {
    if (int64_t(op.getLanes()) != lanes)
      return op.emitOpError("differs in lanes from the kernel's other "
                            "cake.lane_sum");
    OpBuilder b(op);
    Value sum = op.getOperand();
    // Lanes `distance` apart exchange and add: each adds the same two
    // values, so every lane of a group ends with the same bits.
    for (int64_t distance = lanes / 2; distance >= 1; distance /= 2) {
      Value other = gpu::ShuffleOp::create(b, op.getLoc(), sum, distance,
                                           /*width=*/32, gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      sum = arith::AddFOp::create(b, op.getLoc(), sum, other);
    }
    op.replaceAllUsesWith(sum);
    op.erase();
  }
  kernel->setAttr(kLanesPerItemAttrName,
                  OpBuilder(kernel).getI64IntegerAttr(lanes));
  return success();
}

LogicalResult buildKernel(const ForallKernel &outlined, func::FuncOp func,
                          gpu::GPUModuleOp kernels,
                          int64_t defaultBlockThreads) {
  scf::ForallOp forall = outlined.forall;
  TilingAttr tiling = tilingOf(forall);
  int64_t blockThreads =
      tiling ? tiling.getBlockThreads() : defaultBlockThreads;
  Location loc = forall.getLoc();
  OpBuilder b(kernels.getBodyRegion());
  b.setInsertionPointToEnd(kernels.getBody());
  auto kernel =
      gpu::GPUFuncOp::create(b, loc, outlined.name, func.getFunctionType());
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({static_cast<int32_t>(blockThreads), 1, 1}));
  if (tiling && tiling.getMaxRegisters() > 0)
    kernel->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(),
                    b.getI32IntegerAttr(tiling.getMaxRegisters()));
  markKernel(kernel, outlined);
  bool hasPredecessor = !outlined.predecessor.empty();

  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  // Waiting first keeps every read after the predecessor's writes; letting the
  // successor launch right away overlaps its launch with this kernel's work.
  if (hasPredecessor)
    NVVM::GriddepcontrolOp::create(b, loc, NVVM::GridDepActionKind::wait);
  if (outlined.hasSuccessor)
    NVVM::GriddepcontrolOp::create(b, loc,
                                   NVVM::GridDepActionKind::launch_dependents);

  IRMapping mapping;
  mapping.map(func.getArguments(), entry.getArguments());
  for (Operation *producer : producersOf(forall))
    b.clone(*producer, mapping);

  Value threads = arith::ConstantIndexOp::create(b, loc, blockThreads);
  Value index = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(
          b, loc, gpu::BlockIdOp::create(b, loc, gpu::Dimension::x), threads),
      gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  Value bound = mapping.lookupOrDefault(
      getValueOrCreateConstantIndexOp(b, loc, forall.getUpperBound(b)[0]));
  Value inBounds =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, index, bound);
  auto guard = scf::IfOp::create(b, loc, inBounds, /*withElseRegion=*/false);
  b.setInsertionPoint(guard.thenBlock()->getTerminator());
  mapping.map(forall.getInductionVars()[0], index);
  for (Operation &op : forall.getBody()->without_terminator())
    b.clone(op, mapping);

  b.setInsertionPointToEnd(&entry);
  gpu::ReturnOp::create(b, loc);
  if (failed(lowerLaneSums(kernel, blockThreads)))
    return failure();
  return keepUsedArguments(kernel, func);
}

struct ConvertCakeToGPUPass
    : cake::impl::ConvertCakeToGPUPassBase<ConvertCakeToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> tiled = tiledFunctions(module);
    if (tiled.empty())
      return;

    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
    auto kernels = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
    if (!kernels) {
      OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
      kernels = gpu::GPUModuleOp::create(b, module.getLoc(), kKernelModuleName);
    }
    for (func::FuncOp func : tiled) {
      FailureOr<SmallVector<ForallKernel>> outlined =
          forallKernels(func, "the GPU");
      if (failed(outlined))
        return signalPassFailure();
      for (const ForallKernel &kernel : *outlined)
        if (failed(buildKernel(kernel, func, kernels, blockThreads)))
          return signalPassFailure();
      func.erase();
    }
  }
};
} // namespace
