//===- LowerFwdTile.cpp - Expand cake.fwd_tile ----------------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file expands one thread's forward tile into a loop over its tokens:
//
//   weights, bias, document cursor, window of width-1 rows: registers
//   for each group of rows_ahead tokens:
//     for each token of this group (unrolled):
//       take its row from the loads in flight; load the row rows_ahead on
//       advance the document cursor; zero window rows before the document
//       pre = taps . window (+ bias); y = act(pre); store if inside the tile
//
//===----------------------------------------------------------------------===//

#include "LowerTiles.h"
#include "TileEmitter.h"

#include "cake/Dialect/Cake/IR/CakeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::cake;

namespace {
struct LowerFwdTile : OpRewritePattern<FwdTileOp> {
  LowerFwdTile(MLIRContext *context, bool fastMath)
      : OpRewritePattern(context), fastMath(fastMath) {}

  LogicalResult matchAndRewrite(FwdTileOp op,
                                PatternRewriter &rewriter) const override {
    const int64_t ahead = op.getRowsAhead();
    const int64_t width = op.getWidth();
    const int64_t history = width - 1;

    Location loc = op.getLoc();
    TileEmitter e(rewriter, loc, op.getVectorChannels(), fastMath);
    Type f32 = rewriter.getF32Type();
    Value x = op.getX(), cu = op.getCuSeqlens(), col = op.getCol();
    Value first = op.getRow();
    Value tokens = memref::DimOp::create(rewriter, loc, x, 0);
    Value lastToken = e.offset(tokens, -1);
    Value end = e.minIndex(e.offset(first, op.getTileTokens()), tokens);
    auto loadRow = [&](Value token) {
      return e.loadRow(x, token, lastToken, col);
    };

    SmallVector<Lanes> taps = e.loadTaps(op.getWeight(), col, width);
    std::optional<Lanes> bias = e.loadBias(op.getBias(), col);
    DocCursor cursor = e.seekDocument(cu, first);

    // Loop state: the window (oldest row first), the rows in flight, the
    // document cursor.
    SmallVector<Value> init;
    for (int64_t back = history; back >= 1; --back) {
      Value token = e.maxIndex(e.offset(first, -back), e.index(0));
      init.push_back(e.pack(e.widen(loadRow(token), f32)));
    }
    for (int64_t i = 0; i < ahead; ++i)
      init.push_back(loadRow(e.offset(first, i)));
    init.append({cursor.start, cursor.next});

    scf::ForOp::create(
        rewriter, loc, first, end, e.index(ahead), init,
        [&](OpBuilder &, Location, Value base, ValueRange state) {
          SmallVector<Lanes> window;
          for (Value packed : state.take_front(history))
            window.push_back(e.unpack(packed));
          ValueRange inFlight = state.slice(history, ahead);
          DocCursor doc{state[history + ahead], state[history + ahead + 1]};

          SmallVector<Value> next;

          for (int64_t i = 0; i < ahead; ++i) {
            Value token = e.offset(base, i);
            doc = e.advanceDocument(cu, doc, token);
            Lanes current = e.widen(inFlight[i], f32);
            // The slot just read is refilled at once: rows_ahead loads stay
            // in flight without holding two groups in registers.
            next.push_back(loadRow(e.offset(base, ahead + i)));
            Value sinceStart =
                arith::SubIOp::create(rewriter, loc, token, doc.start);
            Lanes pre = e.preactivation(
                taps, e.documentRows(window, current, sinceStart), bias);
            Lanes out = pre;
            if (op.getActivation() == Activation::silu)
              out = e.mul(pre, e.sigmoid(pre, /*precise=*/false));
            e.storeLanesIf(e.lessThan(token, end), op.getY(), {token, col},
                           out);
            window.erase(window.begin());
            window.push_back(current);
          }

          SmallVector<Value> yielded;
          for (const Lanes &row : window)
            yielded.push_back(e.pack(row));
          llvm::append_range(yielded, next);
          yielded.append({doc.start, doc.next});
          scf::YieldOp::create(rewriter, loc, yielded);
        });
    rewriter.eraseOp(op);
    return success();
  }

  bool fastMath;
};
} // namespace

void mlir::cake::populateLowerFwdTilePatterns(RewritePatternSet &patterns,
                                              bool fastMath) {
  patterns.add<LowerFwdTile>(patterns.getContext(), fastMath);
}
