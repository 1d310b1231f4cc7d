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
  auto forall = scf::ForallOp::create(rewriter, loc, extents, ValueRange(),
                                      std::nullopt);
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

struct TileConv1dFwd : OpRewritePattern<Conv1dFwdOp> {
  TileConv1dFwd(MLIRContext *context, TilingAttr defaultTiling)
      : OpRewritePattern(context), defaultTiling(defaultTiling) {}

  LogicalResult matchAndRewrite(Conv1dFwdOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    TilingAttr tiling = tilingOf(op, defaultTiling);
    int64_t tileTokens = tiling.getTileTokens();
    int64_t vectorChannels = tiling.getVectorChannels();
    FailureOr<Value> groups =
        channelGroups(rewriter, op, op.getX(), vectorChannels);
    if (failed(groups))
      return failure();
    Value tokens = memref::DimOp::create(rewriter, loc, op.getX(), 0);
    Value tokensPerTile =
        arith::ConstantIndexOp::create(rewriter, loc, tileTokens);
    Value chunks =
        arith::CeilDivUIOp::create(rewriter, loc, tokens, tokensPerTile);
    Value tiles = arith::MulIOp::create(rewriter, loc, chunks, *groups);

    OpBuilder::InsertionGuard guard(rewriter);
    Value tile = buildForall(rewriter, loc, {tiles})[0];
    Value chunk = arith::DivUIOp::create(rewriter, loc, tile, *groups);
    Value group = arith::RemUIOp::create(rewriter, loc, tile, *groups);
    Value row = arith::MulIOp::create(rewriter, loc, chunk, tokensPerTile);
    Value col = arith::MulIOp::create(
        rewriter, loc, group,
        arith::ConstantIndexOp::create(rewriter, loc, vectorChannels));
    FwdTileOp::create(rewriter, loc, op.getX(), op.getWeight(),
                      op.getCuSeqlens(), op.getBias(), op.getY(), row, col,
                      op.getWidth(), op.getActivation(), tileTokens,
                      vectorChannels, tiling.getRowsAhead());
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
    Value rows = memref::DimOp::create(rewriter, loc, op.getPartials(), 0);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      ValueRange ivs = buildForall(rewriter, loc, {rows, *groups});
      Value col = arith::MulIOp::create(
          rewriter, loc, ivs[1],
          arith::ConstantIndexOp::create(rewriter, loc,
                                         tiling.getVectorChannels()));
      BwdTileOp::create(rewriter, loc, op.getX(), op.getWeight(),
                        op.getCuSeqlens(), op.getDy(), op.getBias(), op.getDx(),
                        op.getPartials(), ivs[0], col, op.getWidth(),
                        op.getActivation(), op.getSiluGrad(),
                        tiling.getTileTokens(), tiling.getVectorChannels(),
                        tiling.getRowsAhead());
    }
    rewriter.replaceOpWithNewOp<PartialsReduceOp>(
        op, op.getPartials(), op.getDweight(), op.getDbias());
    return success();
  }

  TilingAttr defaultTiling;
};

/// One column per iteration: the sum over rows runs in row order, which is
/// what makes the weight gradient bitwise reproducible.
struct TilePartialsReduce : OpRewritePattern<PartialsReduceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PartialsReduceOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType dweightType = op.getDweight().getType();
    Type accType = op.getPartials().getType().getElementType();
    int64_t width = dweightType.getDimSize(1);
    Value channels = memref::DimOp::create(rewriter, loc, op.getDweight(), 0);
    Value widthValue = arith::ConstantIndexOp::create(rewriter, loc, width);
    Value weightColumns =
        arith::MulIOp::create(rewriter, loc, channels, widthValue);
    Value columns = op.getDbias() ? arith::AddIOp::create(rewriter, loc,
                                                          weightColumns,
                                                          channels)
                                        .getResult()
                                  : weightColumns;
    Value rows = memref::DimOp::create(rewriter, loc, op.getPartials(), 0);

    OpBuilder::InsertionGuard guard(rewriter);
    Value column = buildForall(rewriter, loc, {columns})[0];
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value init = arith::ConstantOp::create(rewriter, loc, accType,
                                           rewriter.getFloatAttr(accType, 0));
    auto sumLoop = scf::ForOp::create(
        rewriter, loc, zero, rows, one, ValueRange{init},
        [&](OpBuilder &b, Location loc, Value row, ValueRange acc) {
          Value partial = memref::LoadOp::create(b, loc, op.getPartials(),
                                                 ValueRange{row, column});
          scf::YieldOp::create(
              b, loc, arith::AddFOp::create(b, loc, acc[0], partial).getResult());
        });
    Value sum = sumLoop.getResult(0);

    auto store = [&](OpBuilder &b, Value dest, ValueRange indices) {
      Type elementType = cast<MemRefType>(dest.getType()).getElementType();
      Value value = sum;
      if (elementType != accType)
        value = arith::TruncFOp::create(b, loc, elementType, sum);
      memref::StoreOp::create(b, loc, value, dest, indices);
    };
    if (!op.getDbias()) {
      store(rewriter, op.getDweight(),
            {arith::DivUIOp::create(rewriter, loc, column, widthValue),
             arith::RemUIOp::create(rewriter, loc, column, widthValue)});
    } else {
      Value isWeight = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::ult, column, weightColumns);
      scf::IfOp::create(
          rewriter, loc, isWeight,
          [&](OpBuilder &b, Location loc) {
            store(b, op.getDweight(),
                  {arith::DivUIOp::create(b, loc, column, widthValue),
                   arith::RemUIOp::create(b, loc, column, widthValue)});
            scf::YieldOp::create(b, loc);
          },
          [&](OpBuilder &b, Location loc) {
            store(b, op.getDbias(),
                  {arith::SubIOp::create(b, loc, column, weightColumns)});
            scf::YieldOp::create(b, loc);
          });
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct CakeTilePass : cake::impl::CakeTilePassBase<CakeTilePass> {
  using Base::Base;

  void runOnOperation() override {
    auto emitError = [&] { return getOperation()->emitError("cake-tile: "); };
    TilingAttr defaultTiling = TilingAttr::getChecked(
        emitError, &getContext(), int64_t(tileTokens), int64_t(vectorChannels),
        int64_t(rowsAhead));
    if (!defaultTiling)
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populateCakeTilePatterns(patterns, defaultTiling);
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
                                          TilingAttr defaultTiling) {
  patterns.add<TileConv1dFwd, TileConv1dBwd>(patterns.getContext(),
                                             defaultTiling);
  patterns.add<TilePartialsReduce>(patterns.getContext());
}
