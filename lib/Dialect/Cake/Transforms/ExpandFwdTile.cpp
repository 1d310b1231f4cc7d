//===- ExpandFwdTile.cpp - Expand cake.fwd_tile ---------------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file expands one thread's forward tile into a loop over its tokens:
//
//   weights, bias, document cursor, window of width-1 rows: registers
//   for each token t of the tile:
//     load row t
//     if t is width-1 tokens into its document: pre = taps . (window, row)
//     else: advance the document cursor, zero window rows before the document
//     y[t] = act(pre + bias)
//
//===----------------------------------------------------------------------===//

#include "ExpandTiles.h"
#include "RowBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::cake;

namespace {
/// Builds the row loop of one fwd_tile.
class FwdTileExpansion {
public:
  FwdTileExpansion(FwdTileOp op, OpBuilder &b, bool fastMath)
      : op(op), r(b, op.getLoc(), op.getTiling().getVectorChannels()),
        history(op.getWidth() - 1), fastMath(fastMath) {}

  void build() {
    Value col = op.getCol(), first = op.getFirst();
    taps = r.loadTaps(op.getWeight(), col, op.getWidth());
    bias = r.loadBias(op.getBias(), col);
    x = r.view(op.getX());
    y = r.view(op.getY());
    SmallVector<Value> init;
    for (int64_t back = history; back >= 1; --back) {
      Value token = r.maxIndex(r.add(first, -back), r.index(0));
      init.push_back(
          r.widen(r.loadRow(x, r.rowOffset(x, token, col, true)), f32()));
    }
    DocCursor doc = r.seekDocument(op.getCuSeqlens(), first);
    llvm::append_range(init, doc.values());
    llvm::append_range(init, interiorRowsOf(doc).values());
    buildRowLoop(r.builder(), op.getLoc(), first, op.getEnd(), init,
                 op.getTiling(),
                 [&](OpBuilder &, Value token, ValueRange state) {
                   return rowStep(token, state);
                 });
  }

private:
  Type f32() { return r.builder().getF32Type(); }

  SmallVector<Value> rowStep(Value token, ValueRange state) {
    Value current =
        r.widen(r.loadRow(x, r.rowOffset(x, token, op.getCol(), true)), f32());
    Value interior = r.isInterior(token, InteriorRows::from(state.drop_front(
                                             history + DocCursor::numValues)));
    return SmallVector<Value>(buildBranches(
        r.builder(), op.getLoc(), interior,
        [&] { return computeRow(token, state, current, /*interior=*/true); },
        [&] { return computeRow(token, state, current, /*interior=*/false); }));
  }

  /// Stores y of `token` and returns the state for the next token.
  SmallVector<Value> computeRow(Value token, ValueRange state, Value current,
                                bool interior) {
    SmallVector<Value> window(state.take_front(history));
    DocCursor doc = DocCursor::from(state.slice(history, DocCursor::numValues));
    InteriorRows interiorRows =
        InteriorRows::from(state.drop_front(history + DocCursor::numValues));
    SmallVector<Value> rows = window;
    rows.push_back(current);
    if (!interior) {
      doc = r.advanceDocument(op.getCuSeqlens(), doc, token);
      rows = r.documentRows(window, current, r.sub(token, doc.start));
      interiorRows = interiorRowsOf(doc);
    }
    Value out = r.preactivation(taps, rows, bias);
    if (op.getActivation() == Activation::silu)
      out = SiluOp::create(r.builder(), op.getLoc(), out, fastMath);
    r.storeRow(y, r.rowOffset(y, token, op.getCol(), false), out);

    // Masked rows stay masked for later tokens: document starts only grow.
    SmallVector<Value> next(ArrayRef<Value>(rows).drop_front());
    llvm::append_range(next, doc.values());
    llvm::append_range(next, interiorRows.values());
    return next;
  }

  InteriorRows interiorRowsOf(const DocCursor &doc) {
    return r.interiorRows(doc, history, /*low=*/Value(), /*high=*/Value());
  }

  FwdTileOp op;
  RowBuilder r;
  int64_t history;
  bool fastMath;
  SmallVector<Value> taps;
  Value bias;
  RowView x, y;
};

struct ExpandFwdTile : OpRewritePattern<FwdTileOp> {
  ExpandFwdTile(MLIRContext *context, bool fastMath)
      : OpRewritePattern(context), fastMath(fastMath) {}

  LogicalResult matchAndRewrite(FwdTileOp op,
                                PatternRewriter &rewriter) const override {
    FwdTileExpansion(op, rewriter, fastMath).build();
    rewriter.eraseOp(op);
    return success();
  }

  bool fastMath;
};
} // namespace

void mlir::cake::populateExpandFwdTilePatterns(RewritePatternSet &patterns,
                                               bool fastMath) {
  patterns.add<ExpandFwdTile>(patterns.getContext(), fastMath);
}
