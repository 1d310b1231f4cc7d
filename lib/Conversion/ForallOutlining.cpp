//===- ForallOutlining.cpp - Tiled functions into kernels -----------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the helpers declared in ForallOutlining.h.
//
//===----------------------------------------------------------------------===//

#include "ForallOutlining.h"

#include "cake/Conversion/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::cake;

SmallVector<func::FuncOp> mlir::cake::tiledFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> tiled;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.getOps<scf::ForallOp>().empty())
      tiled.push_back(func);
  return tiled;
}

FailureOr<SmallVector<ForallKernel>>
mlir::cake::forallKernels(func::FuncOp func, StringRef target) {
  for (Operation &op : func.getBody().getOps()) {
    if (!isa<scf::ForallOp, func::ReturnOp>(op) && !isPure(&op))
      return op.emitError("cannot map to ")
             << target << ": only scf.forall loops and pure ops may appear at "
             << "the top of a tiled function";
  }
  auto nameOf = [&](size_t k) {
    return k == 0 ? func.getSymName().str()
                  : (func.getSymName() + "_" + Twine(k)).str();
  };
  SmallVector<ForallKernel> kernels;
  SmallVector<scf::ForallOp> foralls(func.getOps<scf::ForallOp>());
  for (auto [i, forall] : llvm::enumerate(foralls)) {
    if (!forall.isNormalized() || forall.getRank() != 1 ||
        forall.getNumResults() != 0)
      return forall.emitError("cannot map to ")
             << target
             << ": only normalized one-dimensional foralls without results";
    kernels.push_back({forall, nameOf(i), i > 0 ? nameOf(i - 1) : "",
                       i + 1 < foralls.size()});
  }
  return kernels;
}

TilingAttr mlir::cake::tilingOf(scf::ForallOp forall) {
  TilingAttr tiling;
  forall.getBody()->walk([&](Operation *op) {
    if (auto fwd = dyn_cast<FwdTileOp>(op))
      tiling = fwd.getTiling();
    else if (auto bwd = dyn_cast<BwdTileOp>(op))
      tiling = bwd.getTiling();
  });
  return tiling;
}

void mlir::cake::markKernel(Operation *kernel, const ForallKernel &outlined) {
  MLIRContext *context = kernel->getContext();
  if (TilingAttr tiling = tilingOf(outlined.forall))
    kernel->setAttr(kKernelTilingAttrName, tiling);
  if (!outlined.predecessor.empty())
    kernel->setAttr(kWaitsForAttrName,
                    FlatSymbolRefAttr::get(context, outlined.predecessor));
}

SmallVector<Operation *> mlir::cake::producersOf(scf::ForallOp forall) {
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

LogicalResult mlir::cake::keepUsedArguments(FunctionOpInterface kernel,
                                            func::FuncOp func) {
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (DictionaryAttr attrs = func.getArgAttrDict(i))
      kernel.setArgAttrs(i, attrs);
  llvm::BitVector unused(kernel.getNumArguments());
  for (BlockArgument argument : kernel.getArguments())
    if (argument.use_empty())
      unused.set(argument.getArgNumber());
  return kernel.eraseArguments(unused);
}
