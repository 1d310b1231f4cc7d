//===- Tile.cpp - Split the cake ops into per-thread tiles ----------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the cake-tile pass: the op-level cake ops become
// scf.forall loops over fused per-thread tiles (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "cake/Dialect/Cake/IR/CakeOps.h"
#include "cake/Dialect/Cake/Transforms/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::cake {
#define GEN_PASS_DEF_CAKETILEPASS
#include "cake/Dialect/Cake/Transforms/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

namespace {
/// Creates `scf.forall` over `extents` and leaves the rewriter inside its body,
/// returning the induction variables.
ValueRange buildForall(PatternRewriter &rewriter, Location loc,
                       ArrayRef<OpFoldResult> extents) {
  auto forall =
      scf::ForallOp::create(rewriter, loc, extents, ValueRange(), std::nullopt);
  rewriter.setInsertionPoint(forall.getBody()->getTerminator());
  return forall.getInductionVars();
}

/// Channel groups of `vectorChannels` channels in `x`; fails on a static
/// channel count the groups do not divide.
FailureOr<Value> channelGroups(PatternRewriter &rewriter, Operation *op,
                               Value x, int64_t vectorChannels) {
  int64_t channels = cast<MemRefType>(x.getType()).getDimSize(1);
  if (!ShapedType::isDynamic(channels) && channels % vectorChannels != 0)
    return rewriter.notifyMatchFailure(op, "channels not a multiple of "
                                           "vector-channels");
  Location loc = op->getLoc();
  Value c = memref::DimOp::create(rewriter, loc, x, 1);
  return arith::DivUIOp::create(
             rewriter, loc, c,
             arith::ConstantIndexOp::create(rewriter, loc, vectorChannels))
      .getResult();
}

/// The op's own tiling, else the pass's.
template <typename OpTy>
TilingAttr tilingOf(OpTy op, TilingAttr defaultTiling) {
  return op.getTilingAttr() ? op.getTilingAttr() : defaultTiling;
}

/// Where tile `tile` of a forall over (part, channel group) pairs, groups
/// fastest, works: part `part` of `parts` near-equal token ranges, channels
/// from `col`.
struct TileCoordinates {
  Value part, first, end, col;
};

TileCoordinates tileCoordinates(PatternRewriter &rewriter, Location loc,
                                Value tile, Value groups, Value parts,
                                Value tokens, int64_t vectorChannels) {
  Value part = arith::DivUIOp::create(rewriter, loc, tile, groups);
  Value group = arith::RemUIOp::create(rewriter, loc, tile, groups);
  // [part * S / parts, (part + 1) * S / parts): lengths differ by at most one.
  auto boundary = [&](Value p) -> Value {
    return arith::DivUIOp::create(
        rewriter, loc, arith::MulIOp::create(rewriter, loc, p, tokens), parts);
  };
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  Value col = arith::MulIOp::create(
      rewriter, loc, group,
      arith::ConstantIndexOp::create(rewriter, loc, vectorChannels));
  return {part, boundary(part),
          boundary(arith::AddIOp::create(rewriter, loc, part, one)), col};
}

struct TileConv1dFwd : OpRewritePattern<Conv1dFwdOp> {
  TileConv1dFwd(MLIRContext *context, TilingAttr defaultTiling)
      : OpRewritePattern(context), defaultTiling(defaultTiling) {}

  LogicalResult matchAndRewrite(Conv1dFwdOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    TilingAttr tiling = tilingOf(op, defaultTiling);
    FailureOr<Value> groups =
        channelGroups(rewriter, op, op.getX(), tiling.getVectorChannels());
    if (failed(groups))
      return failure();
    Value tokens = memref::DimOp::create(rewriter, loc, op.getX(), 0);
    Value tiles = arith::MulIOp::create(rewriter, loc, op.getParts(), *groups);

    OpBuilder::InsertionGuard guard(rewriter);
    Value tile = buildForall(rewriter, loc, {tiles})[0];
    TileCoordinates at =
        tileCoordinates(rewriter, loc, tile, *groups, op.getParts(), tokens,
                        tiling.getVectorChannels());
    // A part's channel groups are consecutive tiles: they share its rows.
    FwdTileOp::create(rewriter, loc, op.getX(), op.getWeight(),
                      op.getCuSeqlens(), op.getBias(), op.getY(), at.first,
                      at.end, /*shared_by=*/*groups, at.col, op.getWidth(),
                      op.getActivation(), tiling);
    rewriter.eraseOp(op);
    return success();
  }

  TilingAttr defaultTiling;
};

struct TileConv1dBwd : OpRewritePattern<Conv1dBwdOp> {
  TileConv1dBwd(MLIRContext *context, TilingAttr defaultTiling)
      : OpRewritePattern(context), defaultTiling(defaultTiling) {}

  LogicalResult matchAndRewrite(Conv1dBwdOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    TilingAttr tiling = tilingOf(op, defaultTiling);
    FailureOr<Value> groups =
        channelGroups(rewriter, op, op.getX(), tiling.getVectorChannels());
    if (failed(groups))
      return failure();
    Value tokens = memref::DimOp::create(rewriter, loc, op.getX(), 0);
    Value parts = memref::DimOp::create(rewriter, loc, op.getPartials(), 0);
    Value tiles = arith::MulIOp::create(rewriter, loc, parts, *groups);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      Value tile = buildForall(rewriter, loc, {tiles})[0];
      TileCoordinates at = tileCoordinates(rewriter, loc, tile, *groups, parts,
                                           tokens, tiling.getVectorChannels());
      BwdTileOp::create(rewriter, loc, op.getX(), op.getWeight(),
                        op.getCuSeqlens(), op.getDy(), op.getBias(), op.getDx(),
                        op.getPartials(), at.first, at.end, at.col, at.part,
                        op.getWidth(), op.getActivation(), op.getSiluGrad(),
                        tiling);
    }
    rewriter.replaceOpWithNewOp<PartialsReduceOp>(
        op, op.getPartials(), op.getDweight(), op.getDbias());
    return success();
  }

  TilingAttr defaultTiling;
};

/// The sum of one column of `partials` over the rows r = first + step * q,
/// in a fixed order: `chains` running sums over q = j (mod chains) of the
/// first chains * floor(n / chains) of those rows, combined pairwise
/// ((s0 + s1) + (s2 + s3)) + ..., then the remaining rows in order. The order
/// never depends on scheduling, so the result is bitwise reproducible for a
/// given `chains` and `step`.
Value sumColumn(OpBuilder &b, Location loc, Value partials, Value column,
                Value first, int64_t step, int64_t chains) {
  Type accType = cast<MemRefType>(partials.getType()).getElementType();
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  // n = ceil((R - first) / step), with first < step.
  Value rows = memref::DimOp::create(b, loc, partials, 0);
  Value count = arith::DivUIOp::create(
      b, loc,
      arith::SubIOp::create(
          b, loc, arith::AddIOp::create(b, loc, rows, index(step - 1)), first),
      index(step));
  Value blocked = arith::MulIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, count, index(chains)),
      index(chains));
  Value zero =
      arith::ConstantOp::create(b, loc, accType, b.getFloatAttr(accType, 0));
  auto load = [&](OpBuilder &b, Value q) -> Value {
    Value row = arith::AddIOp::create(
        b, loc, first, arith::MulIOp::create(b, loc, q, index(step)));
    return memref::LoadOp::create(b, loc, partials, ValueRange{row, column});
  };
  auto interleaved = scf::ForOp::create(
      b, loc, index(0), blocked, index(chains),
      SmallVector<Value>(chains, zero),
      [&](OpBuilder &b, Location loc, Value q, ValueRange sums) {
        SmallVector<Value> next;
        for (int64_t j = 0; j < chains; ++j) {
          Value qj = arith::AddIOp::create(b, loc, q, index(j));
          next.push_back(arith::AddFOp::create(b, loc, sums[j], load(b, qj)));
        }
        scf::YieldOp::create(b, loc, next);
      });
  SmallVector<Value> level(interleaved.getResults());
  while (level.size() > 1) {
    SmallVector<Value> pairs;
    for (size_t j = 0; j < level.size(); j += 2)
      pairs.push_back(arith::AddFOp::create(b, loc, level[j], level[j + 1]));
    level = pairs;
  }
  auto rest = scf::ForOp::create(
      b, loc, blocked, count, index(1), ValueRange{level[0]},
      [&](OpBuilder &b, Location loc, Value q, ValueRange sum) {
        scf::YieldOp::create(
            b, loc,
            arith::AddFOp::create(b, loc, sum[0], load(b, q)).getResult());
      });
  return rest.getResult(0);
}

/// Stores the sum of gradient column `column`: dweight[c, k] for column
/// c * width + k below `weightColumns`, dbias[c] for weightColumns + c.
void storeColumn(OpBuilder &b, Location loc, PartialsReduceOp op, Value column,
                 Value weightColumns, Value sum) {
  Value width = arith::ConstantIndexOp::create(
      b, loc, op.getDweight().getType().getDimSize(1));
  auto store = [&](OpBuilder &b, Value dest, ValueRange indices) {
    Type elementType = cast<MemRefType>(dest.getType()).getElementType();
    Value value = sum;
    if (elementType != sum.getType())
      value = arith::TruncFOp::create(b, loc, elementType, sum);
    memref::StoreOp::create(b, loc, value, dest, indices);
  };
  auto storeWeight = [&](OpBuilder &b) {
    store(b, op.getDweight(),
          {arith::DivUIOp::create(b, loc, column, width),
           arith::RemUIOp::create(b, loc, column, width)});
  };
  if (!op.getDbias())
    return storeWeight(b);
  Value isWeight = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         column, weightColumns);
  scf::IfOp::create(
      b, loc, isWeight,
      [&](OpBuilder &b, Location loc) {
        storeWeight(b);
        scf::YieldOp::create(b, loc);
      },
      [&](OpBuilder &b, Location loc) {
        store(b, op.getDbias(),
              {arith::SubIOp::create(b, loc, column, weightColumns)});
        scf::YieldOp::create(b, loc);
      });
}

/// One column per `slices` iterations: each sums every slices-th row by
/// sumColumn, and with slices > 1 cake.lane_sum adds the slices' sums.
struct TilePartialsReduce : OpRewritePattern<PartialsReduceOp> {
  TilePartialsReduce(MLIRContext *context, int64_t chains, int64_t slices)
      : OpRewritePattern(context), chains(chains), slices(slices) {}

  LogicalResult matchAndRewrite(PartialsReduceOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto index = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(rewriter, loc, v);
    };
    int64_t width = op.getDweight().getType().getDimSize(1);
    Value channels = memref::DimOp::create(rewriter, loc, op.getDweight(), 0);
    Value weightColumns =
        arith::MulIOp::create(rewriter, loc, channels, index(width));
    Value columns =
        op.getDbias()
            ? arith::AddIOp::create(rewriter, loc, weightColumns, channels)
                  .getResult()
            : weightColumns;

    OpBuilder::InsertionGuard guard(rewriter);
    if (slices == 1) {
      Value column = buildForall(rewriter, loc, {columns})[0];
      Value sum = sumColumn(rewriter, loc, op.getPartials(), column, index(0),
                            1, chains);
      storeColumn(rewriter, loc, op, column, weightColumns, sum);
      rewriter.eraseOp(op);
      return success();
    }
    // Whole subgroups of 32: every lane reaches cake.lane_sum. The lanes past
    // the last column sum column 0 and store nothing.
    Value items = arith::MulIOp::create(rewriter, loc, columns, index(slices));
    Value extent = arith::MulIOp::create(
        rewriter, loc,
        arith::CeilDivUIOp::create(rewriter, loc, items, index(32)), index(32));
    Value item = buildForall(rewriter, loc, {extent})[0];
    Value column = arith::DivUIOp::create(rewriter, loc, item, index(slices));
    Value slice = arith::RemUIOp::create(rewriter, loc, item, index(slices));
    Value inRange = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, column, columns);
    Value readColumn =
        arith::SelectOp::create(rewriter, loc, inRange, column, index(0));
    Value sum = sumColumn(rewriter, loc, op.getPartials(), readColumn, slice,
                          slices, chains);
    sum = LaneSumOp::create(rewriter, loc, sum, slices);
    Value stores = arith::AndIOp::create(
        rewriter, loc, inRange,
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, slice,
                              index(0)));
    scf::IfOp::create(rewriter, loc, stores, [&](OpBuilder &b, Location loc) {
      storeColumn(b, loc, op, column, weightColumns, sum);
      scf::YieldOp::create(b, loc);
    });
    rewriter.eraseOp(op);
    return success();
  }

  int64_t chains;
  int64_t slices;
};

struct CakeTilePass : cake::impl::CakeTilePassBase<CakeTilePass> {
  using Base::Base;

  void runOnOperation() override {
    auto emitError = [&] { return getOperation()->emitError("cake-tile: "); };
    auto tilingWith = [&](int64_t maxPartTokens) {
      return TilingAttr::getChecked(
          emitError, &getContext(), int64_t(vectorChannels),
          int64_t(blockThreads), int64_t(stages), int64_t(unroll),
          /*maxRegisters=*/int64_t(0), int64_t(waves), maxPartTokens);
    };
    TilingAttr forwardTiling = tilingWith(maxPartTokens);
    TilingAttr backwardTiling = tilingWith(/*maxPartTokens=*/0);
    if (!forwardTiling || !backwardTiling)
      return signalPassFailure();
    if (reduceChains < 1 || !llvm::isPowerOf2_64(reduceChains)) {
      emitError() << "reduce-chains must be a power of two, got "
                  << int64_t(reduceChains);
      return signalPassFailure();
    }
    // A power of two up to 32 divides a subgroup: no column's slices
    // straddle two.
    if (reduceSlices < 1 || reduceSlices > 32 ||
        !llvm::isPowerOf2_64(reduceSlices)) {
      emitError() << "reduce-slices must be a power of two up to 32, got "
                  << int64_t(reduceSlices);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    populateCakeTilePatterns(patterns, forwardTiling, backwardTiling,
                             reduceChains, reduceSlices);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    WalkResult leftOver = getOperation()->walk([](Operation *op) {
      if (isa<Conv1dFwdOp, Conv1dBwdOp, PartialsReduceOp>(op)) {
        op->emitError("could not be tiled (channels not a multiple of "
                      "vector-channels?)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (leftOver.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace

void mlir::cake::populateCakeTilePatterns(RewritePatternSet &patterns,
                                          TilingAttr forwardTiling,
                                          TilingAttr backwardTiling,
                                          int64_t reduceChains,
                                          int64_t reduceSlices) {
  patterns.add<TileConv1dFwd>(patterns.getContext(), forwardTiling);
  patterns.add<TileConv1dBwd>(patterns.getContext(), backwardTiling);
  patterns.add<TilePartialsReduce>(patterns.getContext(), reduceChains,
                                   reduceSlices);
}
