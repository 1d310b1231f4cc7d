//===- ExpandFwdTile.cpp - Expand cake.fwd_tile ---------------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file expands one thread's forward tile into a loop over its tokens:
//
//   weights, bias, document cursor, window of width-1 rows: registers
//   for each token t of the tile:
//     load row t
//     if t is width-1 tokens into its document: pre = taps . (window, row)
//     else: advance the document cursor; by how deep t is into its
//           document, pre = the same sum without the rows before its start
//     y[t] = act(pre + bias)
//
//===----------------------------------------------------------------------===//

#include "ExpandTiles.h"
#include "RowBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace mlir::cake;

namespace {
/// Builds the row loop of one fwd_tile.
class FwdTileExpansion {
public:
  FwdTileExpansion(FwdTileOp op, OpBuilder &b, TileExpansionOptions options)
      : op(op), r(b, op.getLoc(), op.getTiling().getVectorChannels()),
        history(op.getWidth() - 1), options(options) {}

  void build() {
    Value col = op.getCol(), first = r.token(op.getFirst());
    taps = r.loadTaps(op.getWeight(), col, op.getWidth());
    bias = r.loadBias(op.getBias(), col);
    x = r.view(op.getX(), col);
    y = r.view(op.getY(), col);
    SmallVector<Value> init;
    for (int64_t back = history; back >= 1; --back) {
      Value token = r.max(r.add(first, -back), r.token(0));
      init.push_back(
          r.widen(r.loadRow(x, r.rowOffset(x, r.toIndex(token))), f32()));
    }
    DocCursor doc = seekFirstDocument(first);
    llvm::append_range(init, doc.values());
    llvm::append_range(init, interiorRowsOf(doc).values());
    buildRowLoop(r.builder(), op.getLoc(), op.getFirst(), op.getEnd(), init,
                 op.getTiling(), [&](OpBuilder &, Value row, ValueRange state) {
                   return rowStep(row, state);
                 });
  }

private:
  Type f32() { return r.builder().getF32Type(); }

  /// The cursor at `first`: searched by the subgroup where the options ask
  /// for it and the subgroup shares the tile's rows, else by the thread.
  DocCursor seekFirstDocument(Value first) {
    Value cu = op.getCuSeqlens();
    auto alone = [&] {
      return r.seekDocument(cu, first, options.searchFanout).values();
    };
    if (!options.subgroupSearchProbes || !op.getSharedBy() ||
        !op->getParentOfType<gpu::GPUFuncOp>())
      return DocCursor::from(alone());
    // A run of a multiple of the subgroup's lanes: the forall's extent is one
    // too, and blocks are whole subgroups (#cake.tiling), so every lane of a
    // subgroup is here, in the same run.
    Value wholeSubgroups = arith::CmpIOp::create(
        r.builder(), op.getLoc(), arith::CmpIPredicate::eq,
        arith::RemUIOp::create(r.builder(), op.getLoc(), op.getSharedBy(),
                               r.index(RowBuilder::kSubgroupLanes)),
        r.index(0));
    return DocCursor::from(buildBranches(
        r.builder(), op.getLoc(), wholeSubgroups,
        [&] {
          return r
              .seekDocumentInSubgroup(cu, first, options.subgroupSearchProbes)
              .values();
        },
        alone));
  }

  /// The step of `row`, a token of the tile (so a row of x) as an index.
  SmallVector<Value> rowStep(Value row, ValueRange state) {
    Value token = r.token(row);
    Value current = r.widen(r.loadRow(x, r.rowOffset(x, row)), f32());
    Value interior = r.isInterior(token, InteriorRows::from(state.drop_front(
                                             history + DocCursor::numValues)));
    return SmallVector<Value>(buildBranches(
        r.builder(), op.getLoc(), interior,
        [&] { return computeRow(row, state, current, history); },
        [&] { return edgeRow(row, token, state, current); }));
  }

  /// A row near a document start: the cursor moves to its document, and the
  /// row's code is chosen by how many of its window rows lie in it.
  SmallVector<Value> edgeRow(Value row, Value token, ValueRange state,
                             Value current) {
    SmallVector<Value> moved(state);
    DocCursor doc = r.advanceDocument(
        op.getCuSeqlens(),
        DocCursor::from(state.slice(history, DocCursor::numValues)), token);
    llvm::copy(doc.values(), moved.begin() + history);
    llvm::copy(interiorRowsOf(doc).values(),
               moved.begin() + history + DocCursor::numValues);
    SmallVector<int64_t> cases = llvm::to_vector(llvm::seq<int64_t>(history));
    return SmallVector<Value>(buildSwitch(
        r.builder(), op.getLoc(), r.toIndex(r.sub(token, doc.start)),
        ValueRange(moved).getTypes(), cases,
        [&](std::optional<int64_t> inDocument) {
          return computeRow(row, moved, current, inDocument.value_or(history));
        }));
  }

  /// Stores y of `row`, of whose window the last `inDocument` rows lie in
  /// its document, and returns the state for the next token.
  SmallVector<Value> computeRow(Value row, ValueRange state, Value current,
                                int64_t inDocument) {
    SmallVector<Value> rows(state.take_front(history));
    rows.push_back(current);
    int64_t firstRow = history - inDocument;
    Value out =
        r.preactivation(ArrayRef<Value>(taps).drop_front(firstRow),
                        ArrayRef<Value>(rows).drop_front(firstRow), bias);
    if (op.getActivation() == Activation::silu)
      out = SiluOp::create(r.builder(), op.getLoc(), out, options.fastMath);
    r.storeRow(y, r.rowOffset(y, row), out);

    // The window keeps rows outside the document: later rows of this
    // document leave them out the same way.
    SmallVector<Value> next(ArrayRef<Value>(rows).drop_front());
    llvm::append_range(next, state.drop_front(history));
    return next;
  }

  InteriorRows interiorRowsOf(const DocCursor &doc) {
    return r.interiorRows(doc, history, /*low=*/Value(), /*high=*/Value());
  }

  FwdTileOp op;
  RowBuilder r;
  int64_t history;
  TileExpansionOptions options;
  SmallVector<Value> taps;
  Value bias;
  RowView x, y;
};

struct ExpandFwdTile : OpRewritePattern<FwdTileOp> {
  ExpandFwdTile(MLIRContext *context, TileExpansionOptions options)
      : OpRewritePattern(context), options(options) {}

  LogicalResult matchAndRewrite(FwdTileOp op,
                                PatternRewriter &rewriter) const override {
    FwdTileExpansion(op, rewriter, options).build();
    rewriter.eraseOp(op);
    return success();
  }

  TileExpansionOptions options;
};
} // namespace

void mlir::cake::populateExpandFwdTilePatterns(RewritePatternSet &patterns,
                                               TileExpansionOptions options) {
  patterns.add<ExpandFwdTile>(patterns.getContext(), options);
}
