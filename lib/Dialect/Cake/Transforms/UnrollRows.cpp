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
#include "mlir/IR/Matchers.h"

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

/// The value of `value` if it is a constant, or a sum or product of
/// constants (the unroller's offsets, not yet folded).
std::optional<int64_t> constantOf(Value value) {
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return constant.getSExtValue();
  Operation *op = value.getDefiningOp();
  if (!isa_and_present<arith::AddIOp, arith::MulIOp>(op))
    return std::nullopt;
  std::optional<int64_t> lhs = constantOf(op->getOperand(0));
  std::optional<int64_t> rhs = constantOf(op->getOperand(1));
  if (!lhs || !rhs)
    return std::nullopt;
  return isa<arith::AddIOp>(op) ? *lhs + *rhs : *lhs * *rhs;
}

/// `value` as the induction variable of `loop` plus a constant.
std::optional<int64_t> offsetFromIndex(scf::ForOp loop, Value value) {
  if (value == loop.getInductionVar())
    return 0;
  auto add = value.getDefiningOp<arith::AddIOp>();
  if (!add)
    return std::nullopt;
  for (auto [base, other] : {std::pair(add.getLhs(), add.getRhs()),
                             std::pair(add.getRhs(), add.getLhs())}) {
    std::optional<int64_t> constant = constantOf(other);
    if (!constant)
      continue;
    if (std::optional<int64_t> offset = offsetFromIndex(loop, base))
      return *offset + *constant;
  }
  return std::nullopt;
}

/// Rewrites each row offset `(i + c) * m` of the unrolled `loop` (i its
/// index, m defined outside it) as `i * m + c * m`: the rows of an iteration
/// then share one product, each adding an offset computed before the loop.
void distributeRowOffsets(scf::ForOp loop) {
  SmallVector<std::pair<arith::MulIOp, int64_t>> offsets;
  loop.getBody()->walk([&](arith::MulIOp mul) {
    if (!mul.getType().isIndex() || !loop.isDefinedOutsideOfLoop(mul.getRhs()))
      return;
    if (std::optional<int64_t> c = offsetFromIndex(loop, mul.getLhs()))
      offsets.push_back({mul, *c});
  });
  OpBuilder before(loop);
  OpBuilder inside = OpBuilder::atBlockBegin(loop.getBody());
  DenseMap<Value, Value> indexTimes;
  for (auto [mul, c] : offsets) {
    Location loc = mul.getLoc();
    Value factor = mul.getRhs();
    auto flags = mul.getOverflowFlags();
    Value &product = indexTimes[factor];
    if (!product)
      product = arith::MulIOp::create(inside, loc, loop.getInductionVar(),
                                      factor, flags);
    Value offset = arith::MulIOp::create(
        before, loc, arith::ConstantIndexOp::create(before, loc, c), factor,
        flags);
    OpBuilder at(mul);
    mul.replaceAllUsesWith(
        arith::AddIOp::create(at, loc, product, offset, flags).getResult());
    mul.erase();
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
      if (!unrolled->mainLoopOp)
        continue;
      if (tiling.getStages() > 0 &&
          tiling.getUnroll() % tiling.getStages() == 0)
        hoistRingSlots(*unrolled->mainLoopOp);
      distributeRowOffsets(*unrolled->mainLoopOp);
    }
    // The mark is for this pass alone: it must not reach the LLVM dialect.
    getOperation()->walk(
        [](Operation *op) { op->removeAttr(kRingSlotAttrName); });
  }
};
} // namespace
