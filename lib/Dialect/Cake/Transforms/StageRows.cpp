//===- StageRows.cpp - Stage row loads through shared memory --------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the cake-stage-rows pass. In a row loop, each load of a
// row from global memory becomes
//
//   stage S (compute): cp.async.wait_group S-1; vector.load ring[slot]
//   stage 0 (issue):   nvgpu.device_async_copy row -> ring[slot]; commit
//
// with slot = iteration mod S, and upstream loop pipelining shifts stage 0 by
// S iterations. In the pipelined loop, iteration i computes from its slot,
// then refills that slot with the rows of iteration i + S: S - 1 groups are
// in flight while a row computes, one more just after. The copies of the
// first S iterations move up to the start of the kernel's work, so that they
// are in flight while the tile sets up (the document search, the window).
//
//===----------------------------------------------------------------------===//

#include "cake/Dialect/Cake/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::cake {
#define GEN_PASS_DEF_CAKESTAGEROWSPASS
#include "cake/Dialect/Cake/Transforms/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

namespace {
/// Static shared memory a kernel may use without opting in at launch.
constexpr int64_t kStaticSharedBytes = 48 * 1024;

int64_t sharedBytes(gpu::GPUFuncOp kernel) {
  int64_t bytes = 0;
  for (BlockArgument buffer : kernel.getWorkgroupAttributions()) {
    auto type = cast<MemRefType>(buffer.getType());
    bytes += type.getNumElements() * type.getElementTypeBitWidth() / 8;
  }
  return bytes;
}

/// A row load of a row loop: a load from a global buffer that the loop does
/// not define, at the top of its body, alone or as RowBuilder::loadRowIf
/// builds it: under `scf.if exists`, zeros where it fails.
struct RowLoad {
  vector::LoadOp load;
  /// Null for a load that always reads.
  Value exists;
  /// The op whose result the row math uses: the load or its scf.if.
  Operation *root;
};

bool readsGlobalRow(scf::ForOp loop, vector::LoadOp load) {
  return !load.getMemRefType().getMemorySpace() &&
         !loop->isAncestor(load.getBase().getParentBlock()->getParentOp());
}

/// `branch` as a guarded row load, if it is one.
std::optional<RowLoad> guardedRowLoad(scf::ForOp loop, scf::IfOp branch) {
  if (branch.getNumResults() != 1 || branch.getElseRegion().empty())
    return std::nullopt;
  Block *then = branch.thenBlock();
  auto load = dyn_cast<vector::LoadOp>(then->front());
  if (!load || then->getOperations().size() != 2 ||
      branch.thenYield().getOperand(0) != load.getResult() ||
      !readsGlobalRow(loop, load))
    return std::nullopt;
  Value otherwise = branch.elseYield().getOperand(0);
  if (!matchPattern(otherwise, m_AnyZeroFloat()) &&
      !matchPattern(otherwise, m_Zero()))
    return std::nullopt;
  return RowLoad{load, branch.getCondition(), branch};
}

/// The row loads of `loop`.
SmallVector<RowLoad> rowLoads(scf::ForOp loop) {
  SmallVector<RowLoad> loads;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (auto load = dyn_cast<vector::LoadOp>(op);
        load && readsGlobalRow(loop, load))
      loads.push_back({load, Value(), load});
    else if (auto branch = dyn_cast<scf::IfOp>(op))
      if (std::optional<RowLoad> guarded = guardedRowLoad(loop, branch))
        loads.push_back(*guarded);
  }
  return loads;
}

/// `loop`'s iteration number modulo `stages`.
Value slotOf(OpBuilder &b, Location loc, scf::ForOp loop, int64_t stages) {
  Value iteration = arith::DivUIOp::create(
      b, loc,
      arith::SubIOp::create(b, loc, loop.getInductionVar(),
                            loop.getLowerBound()),
      loop.getStep());
  auto slot = arith::RemUIOp::create(
      b, loc, iteration, arith::ConstantIndexOp::create(b, loc, stages));
  slot->setAttr(kRingSlotAttrName, b.getUnitAttr());
  return slot;
}

/// Clones into `b` the ops of `loop`'s body that `values` depend on, so that
/// the copies of a later iteration compute their own addresses.
LogicalResult cloneIndexSlice(OpBuilder &b, scf::ForOp loop, ValueRange values,
                              IRMapping &mapping) {
  BackwardSliceOptions options;
  options.filter = [&](Operation *op) {
    return op->getBlock() == loop.getBody();
  };
  SetVector<Operation *> slice;
  for (Value value : values)
    if (Operation *def = value.getDefiningOp();
        def && def->getBlock() == loop.getBody()) {
      if (failed(getBackwardSlice(def, &slice, options)))
        return failure();
      slice.insert(def);
    }
  for (Operation *op : slice) {
    if (!isPure(op) || op->getNumRegions() != 0)
      return op->emitError("cake-stage-rows: row addresses must come from "
                           "pure ops");
    if (!mapping.contains(op->getResult(0)))
      b.clone(*op, mapping);
  }
  return success();
}

/// Rewrites the row loads of `loop` into the two stages (see the file
/// comment) and returns the ops of stage 0.
FailureOr<DenseSet<Operation *>>
splitIntoStages(scf::ForOp loop, ArrayRef<RowLoad> loads, Value ring,
                Value thread, int64_t stages) {
  Location loc = loop.getLoc();
  // Constants live outside the loop: an op of the issue stage may not use a
  // value of the compute stage.
  OpBuilder b(loop);
  SmallVector<Value> rowIndex;
  for (size_t i = 0; i <= loads.size(); ++i)
    rowIndex.push_back(arith::ConstantIndexOp::create(b, loc, i));
  Value zero = rowIndex[0];
  b.setInsertionPointToStart(loop.getBody());
  NVVM::CpAsyncWaitGroupOp::create(b, loc, stages - 1);
  Value readSlot = slotOf(b, loc, loop, stages);

  // Everything created from here to the terminator is stage 0.
  Operation *terminator = loop.getBody()->getTerminator();
  Operation *lastCompute = terminator->getPrevNode();
  b.setInsertionPoint(terminator);
  IRMapping mapping;
  Value writeSlot = slotOf(b, loc, loop, stages);
  // Stage 0 runs ahead of the loop's iterations, past its last one too: a
  // copy for an iteration that does not exist reads nothing (its source size
  // is 0), which keeps the rows after a tile off the memory bus.
  Value iterationExists =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                            loop.getInductionVar(), loop.getUpperBound());
  for (auto [i, rowLoad] : llvm::enumerate(loads)) {
    vector::LoadOp load = rowLoad.load;
    SmallVector<Value> needed(load.getIndices());
    if (rowLoad.exists)
      needed.push_back(rowLoad.exists);
    if (failed(cloneIndexSlice(b, loop, needed, mapping)))
      return failure();
    SmallVector<Value> source;
    for (Value index : load.getIndices())
      source.push_back(mapping.lookupOrDefault(index));
    Value reads = iterationExists;
    if (rowLoad.exists)
      reads = arith::AndIOp::create(b, loc, reads,
                                    mapping.lookupOrDefault(rowLoad.exists));
    int64_t elements = load.getVectorType().getNumElements();
    Value sourceElements = arith::SelectOp::create(
        b, loc, reads, arith::ConstantIndexOp::create(b, loc, elements), zero);
    bool sixteenBytes =
        elements * load.getVectorType().getElementTypeBitWidth() == 128;
    nvgpu::DeviceAsyncCopyOp::create(
        b, loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), ring,
        ValueRange{writeSlot, rowIndex[i], thread, zero}, load.getBase(), source,
        b.getIndexAttr(elements), sourceElements,
        sixteenBytes ? b.getUnitAttr() : UnitAttr());

    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(rowLoad.root);
    Value staged = vector::LoadOp::create(
        b, loc, load.getVectorType(), ring,
        ValueRange{readSlot, rowIndex[i], thread, zero});
    rowLoad.root->getResult(0).replaceAllUsesWith(staged);
    rowLoad.root->erase();
  }
  NVVM::CpAsyncCommitGroupOp::create(b, loc);

  DenseSet<Operation *> issue;
  for (Operation *op = lastCompute->getNextNode(); op != terminator;
       op = op->getNextNode())
    issue.insert(op);
  return issue;
}

/// Adds to `kernel` a workgroup ring with one slot per thread, row load and
/// stage; a warp's 16-byte slots are contiguous, so its accesses are free of
/// bank conflicts.
FailureOr<Value> addRing(gpu::GPUFuncOp kernel, VectorType rowType,
                         int64_t stages, int64_t loads, Location loc) {
  std::optional<ArrayRef<int32_t>> blockSize = kernel.getKnownBlockSize();
  if (!blockSize)
    return kernel.emitError("cake-stage-rows needs gpu.known_block_size");
  auto workgroup = gpu::AddressSpaceAttr::get(kernel.getContext(),
                                              gpu::AddressSpace::Workgroup);
  auto ringType = MemRefType::get(
      {stages, loads, (*blockSize)[0], rowType.getNumElements()},
      rowType.getElementType(), MemRefLayoutAttrInterface(), workgroup);
  Value ring = kernel.addWorkgroupAttribution(ringType, loc);
  if (sharedBytes(kernel) > kStaticSharedBytes)
    return kernel.emitError("cake-stage-rows: ")
           << sharedBytes(kernel) << " bytes of staging exceed the "
           << kStaticSharedBytes << " bytes of static shared memory; use "
           << "fewer stages or rows";
  return ring;
}

/// Moves the ops after `before` and before `loop` (the prologue the
/// pipeliner built, with what it uses) up to just after the last op of their
/// block that they depend on: the first rows' copies then go out before the
/// tile's other set-up (the document search, the window's loads) instead of
/// after it.
void issuePrologueEarly(Operation *before, scf::ForOp loop) {
  Block *block = loop->getBlock();
  Block::iterator first =
      before ? std::next(before->getIterator()) : block->begin();
  SmallVector<Operation *> prologue;
  for (auto it = first; it != loop->getIterator(); ++it)
    prologue.push_back(&*it);
  if (prologue.empty())
    return;
  DenseSet<Operation *> moved(prologue.begin(), prologue.end());
  Operation *after = nullptr;
  for (Operation *op : prologue)
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || moved.contains(def))
        continue;
      def = block->findAncestorOpInBlock(*def);
      if (def && (!after || after->isBeforeInBlock(def)))
        after = def;
    }
  for (Operation *op : prologue) {
    if (after)
      op->moveAfter(after);
    else
      op->moveBefore(block, block->begin());
    after = op;
  }
}

LogicalResult stageRowLoop(scf::ForOp loop, gpu::GPUFuncOp kernel,
                           TilingAttr tiling) {
  Operation *before = loop->getPrevNode();
  int64_t stages = tiling.getStages();
  SmallVector<RowLoad> loads = rowLoads(loop);
  if (loads.empty())
    return success();
  VectorType rowType = loads.front().load.getVectorType();
  for (RowLoad row : loads)
    if (row.load.getVectorType() != rowType)
      return row.load.emitError("cake-stage-rows: the row loads of one loop "
                                "must have one type");
  Location loc = loop.getLoc();
  FailureOr<Value> ring = addRing(kernel, rowType, stages, loads.size(), loc);
  if (failed(ring))
    return failure();

  OpBuilder b(loop);
  Value thread = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  FailureOr<DenseSet<Operation *>> issue =
      splitIntoStages(loop, loads, *ring, thread, stages);
  if (failed(issue))
    return failure();

  scf::PipeliningOption options;
  options.getScheduleFn =
      [&](scf::ForOp forOp,
          std::vector<std::pair<Operation *, unsigned>> &schedule) {
        for (Operation &op : forOp.getBody()->without_terminator())
          schedule.emplace_back(&op, issue->contains(&op) ? 0 : stages);
      };
  options.supportDynamicLoops = true;
  options.peelEpilogue = false;
  // The issue stage is safe to run past the loop's end: its copies read
  // nothing there. It runs unpredicated; the drain below waits it out.
  options.predicateFn = [](RewriterBase &, Operation *op, Value) {
    return op;
  };
  IRRewriter rewriter(loop.getContext());
  rewriter.setInsertionPoint(loop);
  FailureOr<scf::ForOp> pipelined = scf::pipelineForLoop(rewriter, loop,
                                                         options);
  if (failed(pipelined))
    return loop.emitError("cake-stage-rows: cannot pipeline the row loop");
  // Still the row loop, for cake-unroll-rows.
  (*pipelined)->setAttr(kRowLoopAttrName, tiling);
  rewriter.setInsertionPointAfter(*pipelined);
  NVVM::CpAsyncWaitGroupOp::create(rewriter, loc, 0);
  issuePrologueEarly(before, *pipelined);
  return success();
}

struct CakeStageRowsPass
    : cake::impl::CakeStageRowsPassBase<CakeStageRowsPass> {
  void runOnOperation() override {
    gpu::GPUFuncOp kernel = getOperation();
    SmallVector<scf::ForOp> loops;
    kernel.walk([&](scf::ForOp loop) {
      auto tiling = loop->getAttrOfType<TilingAttr>(kRowLoopAttrName);
      if (tiling && tiling.getStages() > 0)
        loops.push_back(loop);
    });
    for (scf::ForOp loop : loops) {
      auto tiling = loop->getAttrOfType<TilingAttr>(kRowLoopAttrName);
      if (failed(stageRowLoop(loop, kernel, tiling)))
        return signalPassFailure();
    }
  }
};
} // namespace
