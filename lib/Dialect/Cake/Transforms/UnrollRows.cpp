//===- UnrollRows.cpp - Unroll row loops ----------------------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the cake-unroll-rows pass (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "cake/Dialect/Cake/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::cake {
#define GEN_PASS_DEF_CAKEUNROLLROWSPASS
#include "cake/Dialect/Cake/Transforms/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

namespace {
/// The ops of `loop`'s body that `slot` is computed from, in order, if they
/// are pure and read no loop-carried value but the induction variable.
std::optional<SetVector<Operation *>> slotSlice(scf::ForOp loop,
                                                Operation *slot) {
  Block *body = loop.getBody();
  BackwardSliceOptions options;
  options.filter = [&](Operation *op) { return op->getBlock() == body; };
  SetVector<Operation *> slice;
  if (failed(getBackwardSlice(slot, &slice, options)))
    return std::nullopt;
  slice.insert(slot);
  for (Operation *op : slice) {
    if (!isPure(op) || op->getNumRegions() != 0)
      return std::nullopt;
    for (Value operand : op->getOperands())
      if (auto arg = dyn_cast<BlockArgument>(operand);
          arg && arg.getOwner() == body && arg != loop.getInductionVar())
        return std::nullopt;
  }
  return slice;
}

/// When a loop runs a multiple of its ring's stages rows an iteration, each
/// of its ring slots is the same in every iteration: computed once before the
/// loop, at the first iteration, a slot becomes a constant and the ring
/// accesses constant offsets from the thread's base.
void hoistRingSlots(scf::ForOp loop) {
  SmallVector<Operation *> slots;
  for (Operation &op : loop.getBody()->without_terminator())
    if (op.hasAttr(kRingSlotAttrName))
      slots.push_back(&op);
  OpBuilder b(loop);
  for (Operation *slot : slots) {
    std::optional<SetVector<Operation *>> slice = slotSlice(loop, slot);
    if (!slice)
      continue;
    IRMapping mapping;
    mapping.map(loop.getInductionVar(), loop.getLowerBound());
    for (Operation *op : *slice)
      b.clone(*op, mapping);
    slot->getResult(0).replaceAllUsesWith(mapping.lookup(slot->getResult(0)));
  }
}

struct CakeUnrollRowsPass
    : cake::impl::CakeUnrollRowsPassBase<CakeUnrollRowsPass> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> rowLoops;
    getOperation()->walk([&](scf::ForOp loop) {
      auto tiling = loop->getAttrOfType<TilingAttr>(kRowLoopAttrName);
      if (tiling && tiling.getUnroll() > 1)
        rowLoops.push_back(loop);
    });
    for (scf::ForOp loop : rowLoops) {
      auto tiling = loop->getAttrOfType<TilingAttr>(kRowLoopAttrName);
      FailureOr<UnrolledLoopInfo> unrolled =
          loopUnrollByFactor(loop, tiling.getUnroll());
      if (failed(unrolled)) {
        loop.emitError("cake-unroll-rows: cannot unroll the row loop");
        return signalPassFailure();
      }
      if (unrolled->mainLoopOp && tiling.getStages() > 0 &&
          tiling.getUnroll() % tiling.getStages() == 0)
        hoistRingSlots(*unrolled->mainLoopOp);
    }
    // The mark is for this pass alone: it must not reach the LLVM dialect.
    getOperation()->walk(
        [](Operation *op) { op->removeAttr(kRingSlotAttrName); });
  }
};
} // namespace
