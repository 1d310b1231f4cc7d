//===- CakeToGPU.cpp - Turn tiled functions into GPU kernels --------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the convert-cake-to-gpu pass: every scf.forall of a
// tiled function becomes a gpu.func kernel whose threads run the forall's
// iterations, and consecutive kernels of one function are chained for
// programmatic dependent launch (see Passes.td).
//
//===----------------------------------------------------------------------===//

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
constexpr StringLiteral kWaitsForAttrName = "cake.waits_for";

/// The ops of `func`'s body that `forall` depends on, in body order: they are
/// recomputed inside the kernel (bounds and strides are cheap index math).
SmallVector<Operation *> producersOf(scf::ForallOp forall) {
  SetVector<Operation *> needed;
  SmallVector<Value> worklist(forall->getOperands());
  forall.getRegion().walk([&](Operation *op) {
    for (Value operand : op->getOperands())
      if (!forall.getRegion().isAncestor(operand.getParentRegion()))
        worklist.push_back(operand);
  });
  while (!worklist.empty()) {
    Operation *producer = worklist.pop_back_val().getDefiningOp();
    if (producer && needed.insert(producer))
      llvm::append_range(worklist, producer->getOperands());
  }
  SmallVector<Operation *> ordered(needed.begin(), needed.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

/// The tiling of the tiles of `forall`; null for a forall of other work.
TilingAttr tilingOf(scf::ForallOp forall) {
  TilingAttr tiling;
  forall.getBody()->walk([&](Operation *op) {
    if (auto fwd = dyn_cast<FwdTileOp>(op))
      tiling = fwd.getTiling();
    else if (auto bwd = dyn_cast<BwdTileOp>(op))
      tiling = bwd.getTiling();
  });
  return tiling;
}

LogicalResult buildKernel(scf::ForallOp forall, func::FuncOp func,
                          gpu::GPUModuleOp kernels, StringRef name,
                          StringRef predecessor, bool hasSuccessor,
                          int64_t defaultBlockThreads) {
  TilingAttr tiling = tilingOf(forall);
  int64_t blockThreads =
      tiling ? tiling.getBlockThreads() : defaultBlockThreads;
  if (!forall.isNormalized() || forall.getRank() != 1 ||
      forall.getNumResults() != 0)
    return forall.emitError("convert-cake-to-gpu maps normalized "
                            "one-dimensional foralls without results");
  Location loc = forall.getLoc();
  OpBuilder b(kernels.getBodyRegion());
  b.setInsertionPointToEnd(kernels.getBody());
  auto kernel = gpu::GPUFuncOp::create(b, loc, name, func.getFunctionType());
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr(
      {static_cast<int32_t>(blockThreads), 1, 1}));
  if (tiling && tiling.getMinBlocks() > 0)
    kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                    b.getI32IntegerAttr(tiling.getMinBlocks()));
  if (!predecessor.empty())
    kernel->setAttr(kWaitsForAttrName,
                    FlatSymbolRefAttr::get(b.getContext(), predecessor));

  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  // Waiting first keeps every read after the predecessor's writes; letting the
  // successor launch right away overlaps its launch with this kernel's work.
  if (!predecessor.empty())
    NVVM::GriddepcontrolOp::create(b, loc, NVVM::GridDepActionKind::wait);
  if (hasSuccessor)
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

  // A kernel takes only the buffers it touches; argument attributes (names,
  // for whoever launches it) stay with their arguments.
  if (ArrayAttr argAttrs = func.getAllArgAttrs())
    kernel.setAllArgAttrs(argAttrs);
  llvm::BitVector unused(entry.getNumArguments());
  for (BlockArgument argument : entry.getArguments())
    if (argument.use_empty())
      unused.set(argument.getArgNumber());
  return kernel.eraseArguments(unused);
}

struct ConvertCakeToGPUPass
    : cake::impl::ConvertCakeToGPUPassBase<ConvertCakeToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> tiled;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.getOps<scf::ForallOp>().empty())
        tiled.push_back(func);
    if (tiled.empty())
      return;

    MLIRContext *context = &getContext();
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(context));
    auto kernels = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
    if (!kernels) {
      OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
      kernels = gpu::GPUModuleOp::create(b, module.getLoc(), kKernelModuleName);
    }

    for (func::FuncOp func : tiled) {
      // Only the foralls survive as kernels, so anything else with an effect
      // would be lost.
      for (Operation &op : func.getBody().getOps()) {
        if (!isa<scf::ForallOp, func::ReturnOp>(op) && !isPure(&op)) {
          op.emitError("cannot map to the GPU: only scf.forall loops and pure "
                       "ops may appear at the top of a tiled function");
          return signalPassFailure();
        }
      }
      SmallVector<scf::ForallOp> foralls(func.getOps<scf::ForallOp>());
      for (auto [i, forall] : llvm::enumerate(foralls)) {
        auto nameOf = [&](size_t k) {
          return k == 0 ? func.getSymName().str()
                        : (func.getSymName() + "_" + Twine(k)).str();
        };
        std::string predecessor = i > 0 ? nameOf(i - 1) : "";
        if (failed(buildKernel(forall, func, kernels, nameOf(i), predecessor,
                               i + 1 < foralls.size(), blockThreads)))
          return signalPassFailure();
      }
      func.erase();
    }
  }
};
} // namespace
