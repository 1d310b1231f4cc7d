//===- ExpandBwdTile.cpp - Expand cake.bwd_tile ---------------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file expands one thread's backward share into a loop over its tokens
// and the width-1 tokens after them:
//
//   for each token t:
//     load rows t of x and dy; recompute pre[t]; g[t] = dy[t] * act'(z[t])
//     add g[t]'s taps to the pending dx of tokens t-width+1 .. t of t's
//     document; dx[t-width+1] is then complete: store it if in the tile
//     if t is in the tile: dweight[k] += g[t] * xz[t-width+1+k], dbias += g[t]
//   store the weight (and bias) gradient sums as partial row `part`
//
// Rows at least width-1 tokens into their document, inside the tile, take a
// path without tests; the others advance the document cursor and mask. Masks
// are selects, never products with zero, so that an inf or NaN outside a row's
// reach does not leak into it.
//
//===----------------------------------------------------------------------===//

#include "ExpandTiles.h"
#include "RowBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::cake;

namespace {
/// The loop-carried values of the backward's row loop.
struct BwdRowState {
  SmallVector<Value> window;  // x rows t-width+1 .. t-1, oldest first
  SmallVector<Value> pending; // partial dx of tokens t-1, t-2, ...
  DocCursor doc;
  InteriorRows interior;
  SmallVector<Value> sums; // dweight per tap, then dbias

  SmallVector<Value> values() const {
    SmallVector<Value> all(window);
    llvm::append_range(all, pending);
    llvm::append_range(all, doc.values());
    llvm::append_range(all, interior.values());
    llvm::append_range(all, sums);
    return all;
  }
  static BwdRowState from(ValueRange values, int64_t history) {
    return {SmallVector<Value>(values.take_front(history)),
            SmallVector<Value>(values.slice(history, history)),
            DocCursor::from(values.slice(2 * history, DocCursor::numValues)),
            InteriorRows::from(values.slice(2 * history + DocCursor::numValues,
                                            InteriorRows::numValues)),
            SmallVector<Value>(values.drop_front(
                2 * history + DocCursor::numValues + InteriorRows::numValues))};
  }
};

/// Builds the row loop of one bwd_tile and stores its partial row.
class BwdTileExpansion {
public:
  BwdTileExpansion(BwdTileOp op, OpBuilder &b, TileExpansionOptions options)
      : op(op), r(b, op.getLoc(), op.getTiling().getVectorChannels()),
        history(op.getWidth() - 1), searchFanout(options.searchFanout),
        accType(op.getPartials().getType().getElementType()),
        // The fp32 policy asks for accuracy: it never takes approximations.
        approx(options.fastMath && op.getSiluGrad() == SiluGrad::bf16) {}

  void build() {
    Value col = op.getCol();
    first = r.token(op.getFirst());
    end = r.token(op.getEnd());
    taps = r.loadTaps(op.getWeight(), col, op.getWidth());
    bias = r.loadBias(op.getBias(), col);
    x = r.view(op.getX(), col);
    dy = r.view(op.getDy(), col);
    dx = r.view(op.getDx(), col);
    BwdRowState init;
    for (int64_t back = history; back >= 1; --back) {
      Value token = r.max(r.add(first, -back), r.token(0));
      init.window.push_back(
          r.widen(r.loadRow(x, r.rowOffset(x, r.toIndex(token))), f32()));
    }
    init.pending.assign(history, r.zeros(f32()));
    init.doc = r.seekDocument(op.getCuSeqlens(), first, searchFanout);
    init.interior = interiorRowsOf(init.doc);
    init.sums.assign(op.getWidth() + (bias ? 1 : 0), r.zeros(accType));
    ValueRange results =
        buildRowLoop(r.builder(), op.getLoc(), op.getFirst(),
                     r.add(op.getEnd(), history), init.values(), op.getTiling(),
                     [&](OpBuilder &, Value row, ValueRange state) {
                       return rowStep(row, BwdRowState::from(state, history));
                     });
    storePartials(BwdRowState::from(results, history).sums);
  }

private:
  Type f32() { return r.builder().getF32Type(); }

  /// The step of `row`, a token (an index) that may lie past the tensor: the
  /// loop's last rows only complete dx.
  SmallVector<Value> rowStep(Value row, const BwdRowState &state) {
    Value token = r.token(row);
    // x and dy have one shape: one offset and one test serve both.
    Value offset = r.rowOffset(x, row);
    Value exists = r.lessThan(token, x.rows);
    Value xRow = r.widen(r.loadRowIf(exists, x, offset), f32());
    Value dyRow = r.widen(r.loadRowIf(exists, dy, offset), f32());
    Value interior = r.isInterior(token, state.interior);
    return SmallVector<Value>(buildBranches(
        r.builder(), op.getLoc(), interior,
        [&] { return computeRow(row, state, xRow, dyRow, Value()); },
        [&] { return edgeRow(row, state, xRow, dyRow); }));
  }

  /// A row near a document start or either end of the tile: the cursor moves
  /// to its document, and the rows before the document start are masked.
  SmallVector<Value> edgeRow(Value row, BwdRowState state, Value xRow,
                             Value dyRow) {
    Value token = r.token(row);
    state.doc = r.advanceDocument(op.getCuSeqlens(), state.doc, token);
    state.interior = interiorRowsOf(state.doc);
    return computeRow(row, state, xRow, dyRow, r.sub(token, state.doc.start));
  }

  /// Rows whose window lies in the tile's document and whose dx is the
  /// tile's to store: the mask-free path.
  InteriorRows interiorRowsOf(const DocCursor &doc) {
    return r.interiorRows(doc, history, r.add(first, history), end);
  }

  /// g = dL/dpre of a row from its `rows`.
  Value gradient(ArrayRef<Value> rows, Value dy) {
    Value pre = r.preactivation(taps, rows, bias);
    if (op.getActivation() != Activation::silu)
      return dy;
    Value z = op.getSiluGrad() == SiluGrad::bf16 ? r.roundToBF16(pre) : pre;
    return r.mul(dy,
                 SiluDerivativeOp::create(r.builder(), op.getLoc(), z, approx));
  }

  /// The step of token `row`. On an edge row (`sinceStart`, its distance from
  /// its document's start, given) the window rows before the start are masked,
  /// g is 0 past the last token, dx is stored and the sums take the row's
  /// terms only where they are the tile's.
  SmallVector<Value> computeRow(Value row, BwdRowState state, Value xRow,
                                Value dyRow, Value sinceStart) {
    Value token = r.token(row);
    SmallVector<Value> rows = state.window;
    rows.push_back(xRow);
    if (sinceStart)
      rows = r.documentRows(state.window, xRow, sinceStart);
    Value g = gradient(rows, dyRow);
    if (sinceStart)
      g = r.select(r.lessThan(token, x.rows), g, r.zeros(f32()));
    state.pending = addToPendingDx(row, state.pending, g, sinceStart);
    if (!sinceStart) {
      state.sums = accumulate(state.sums, rows, g);
    } else {
      // The rows past the tile only complete dx: their terms are the next
      // part's. A branch rather than a select per sum; the threads of a warp
      // share their rows whenever C >= 32 * vector_channels.
      state.sums = SmallVector<Value>(buildBranches(
          r.builder(), op.getLoc(), r.lessThan(token, end),
          [&] { return accumulate(state.sums, rows, g); },
          [&] { return state.sums; }));
    }
    state.window.assign(rows.begin() + 1, rows.end());
    return state.values();
  }

  /// Adds g's contributions to dx of `token - back` (within its document when
  /// `sinceStart` is given), stores the one that completes (on an edge row
  /// only if it is the tile's), and returns the pending dx for the next token.
  SmallVector<Value> addToPendingDx(Value row, ArrayRef<Value> pending, Value g,
                                    Value sinceStart) {
    auto reaching = [&](int64_t back) -> Value {
      if (!sinceStart)
        return g;
      return r.select(r.atLeast(sinceStart, back), g, r.zeros(f32()));
    };
    Value finished = r.fma(taps[0], reaching(history), pending[history - 1]);
    Value done = r.add(row, -history);
    Value at = r.rowOffset(dx, done);
    if (!sinceStart) {
      r.storeRow(dx, at, finished);
    } else {
      Value doneToken = r.token(done);
      Value inTile =
          r.both(r.atLeast(doneToken, first), r.lessThan(doneToken, end));
      r.storeRowIf(inTile, dx, at, finished);
    }
    SmallVector<Value> next = {r.mul(taps[history], g)};
    for (int64_t back = 1; back < history; ++back)
      next.push_back(
          r.fma(taps[history - back], reaching(back), pending[back - 1]));
    return next;
  }

  /// The weight (and bias) gradient sums with the terms of g added.
  SmallVector<Value> accumulate(ArrayRef<Value> sums, ArrayRef<Value> rows,
                                Value g) {
    Value term = r.widen(g, accType);
    SmallVector<Value> updated;
    for (auto [k, sum] : llvm::enumerate(sums))
      updated.push_back(k < rows.size()
                            ? r.fma(term, r.widen(rows[k], accType), sum)
                            : r.addf(sum, term));
    return updated;
  }

  /// Row `part` of partials: `width` sums per channel, then the bias sums.
  void storePartials(ArrayRef<Value> sums) {
    OpBuilder &b = r.builder();
    Location loc = op.getLoc();
    int64_t width = op.getWidth();
    Value col = op.getCol(), part = op.getPart();
    for (int64_t lane = 0; lane < r.numLanes(); ++lane) {
      SmallVector<Value> perTap;
      for (int64_t k = 0; k < width; ++k)
        perTap.push_back(vector::ExtractOp::create(b, loc, sums[k], lane));
      Value column =
          arith::MulIOp::create(b, loc, r.add(col, lane), r.index(width));
      r.store(op.getPartials(), {part, column},
              vector::FromElementsOp::create(
                  b, loc, VectorType::get({width}, accType), perTap));
    }
    if (!bias)
      return;
    Value channels = memref::DimOp::create(b, loc, op.getX(), 1);
    Value column = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, channels, r.index(width)), col);
    r.store(op.getPartials(), {part, column}, sums[width]);
  }

  BwdTileOp op;
  RowBuilder r;
  int64_t history;
  int64_t searchFanout;
  Type accType;
  bool approx;
  SmallVector<Value> taps;
  Value bias;
  RowView x, dy, dx;
  /// The tile's tokens [first, end).
  Value first, end;
};

struct ExpandBwdTile : OpRewritePattern<BwdTileOp> {
  ExpandBwdTile(MLIRContext *context, TileExpansionOptions options)
      : OpRewritePattern(context), options(options) {}

  LogicalResult matchAndRewrite(BwdTileOp op,
                                PatternRewriter &rewriter) const override {
    BwdTileExpansion(op, rewriter, options).build();
    rewriter.eraseOp(op);
    return success();
  }

  TileExpansionOptions options;
};
} // namespace

void mlir::cake::populateExpandBwdTilePatterns(RewritePatternSet &patterns,
                                               TileExpansionOptions options) {
  patterns.add<ExpandBwdTile>(patterns.getContext(), options);
}
