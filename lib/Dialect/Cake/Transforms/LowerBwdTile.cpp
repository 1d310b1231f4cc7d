//===- LowerBwdTile.cpp - Expand cake.bwd_tile ----------------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file expands one thread's backward share into loops:
//
//   for each of its token chunks (part, part + R, ...):
//     for each token t of the chunk and the width-1 tokens after it, with the
//     x and dy loads of the next rows_ahead tokens in flight:
//       recompute pre[t]; g[t] = dy[t] * act'(z[t]) (0 past the last token)
//       add g[t]'s taps to the pending dx of tokens t-width+1 .. t of t's
//       document; dx[t-width+1] is then complete: store it if in the chunk
//       if t is in the chunk: dweight[k] += g[t] * xz[t-width+1+k], dbias += g[t]
//   store the weight (and bias) gradient sums as partial row `part`
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
struct LowerBwdTile : OpRewritePattern<BwdTileOp> {
  LowerBwdTile(MLIRContext *context, bool fastMath)
      : OpRewritePattern(context), fastMath(fastMath) {}

  LogicalResult matchAndRewrite(BwdTileOp op,
                                PatternRewriter &rewriter) const override {
    const int64_t ahead = op.getRowsAhead();
    const int64_t width = op.getWidth();
    const int64_t history = width - 1;
    const int64_t tileTokens = op.getTileTokens();

    Location loc = op.getLoc();
    TileEmitter e(rewriter, loc, op.getVectorChannels(), fastMath);
    OpBuilder &b = rewriter;
    Type f32 = b.getF32Type();
    Type accType = op.getPartials().getType().getElementType();
    // The fp32 policy asks for accuracy: it never takes the approximations.
    const bool precise = op.getSiluGrad() == SiluGrad::fp32;
    const bool hasBias = bool(op.getBias());
    Value x = op.getX(), dy = op.getDy(), cu = op.getCuSeqlens();
    Value col = op.getCol();

    auto atLeast = [&](Value v, Value bound) -> Value {
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, v, bound);
    };
    Value tokens = memref::DimOp::create(b, loc, x, 0);
    Value channels = memref::DimOp::create(b, loc, x, 1);
    Value lastToken = e.offset(tokens, -1);
    Value chunks = arith::CeilDivUIOp::create(b, loc, tokens,
                                              e.index(tileTokens));
    Value partialRows = memref::DimOp::create(b, loc, op.getPartials(), 0);
    auto loadRow = [&](Value memref, Value token) {
      return e.loadRow(memref, token, lastToken, col);
    };

    SmallVector<Lanes> taps = e.loadTaps(op.getWeight(), col, width);
    std::optional<Lanes> bias = e.loadBias(op.getBias(), col);

    // Gradient sums: one per tap, then the bias's.
    const int64_t numSums = width + (hasBias ? 1 : 0);
    SmallVector<Value> zeroSums(numSums, e.pack(e.splat(accType, 0.0)));
    auto chunkLoop = scf::ForOp::create(
        b, loc, op.getPart(), chunks, partialRows, zeroSums,
        [&](OpBuilder &, Location, Value chunk, ValueRange sumsIn) {
          Value first =
              arith::MulIOp::create(b, loc, chunk, e.index(tileTokens));
          Value end = e.minIndex(e.offset(first, tileTokens), tokens);
          Value walkEnd = e.offset(end, history);
          Value firstStored = e.offset(first, history);
          DocCursor cursor = e.seekDocument(cu, first);

          // Loop state: x window (oldest first), pending dx (token t-1
          // first), x and dy in flight, document cursor, gradient sums.
          SmallVector<Value> init;
          for (int64_t back = history; back >= 1; --back) {
            Value token = e.maxIndex(e.offset(first, -back), e.index(0));
            init.push_back(e.pack(e.widen(loadRow(x, token), f32)));
          }
          init.append(history, e.pack(e.splat(f32, 0.0)));
          for (int64_t i = 0; i < ahead; ++i)
            init.push_back(loadRow(x, e.offset(first, i)));
          for (int64_t i = 0; i < ahead; ++i)
            init.push_back(loadRow(dy, e.offset(first, i)));
          init.append({cursor.start, cursor.next});
          llvm::append_range(init, sumsIn);

          auto rowLoop = scf::ForOp::create(
              b, loc, first, walkEnd, e.index(ahead), init,
              [&](OpBuilder &, Location, Value base, ValueRange state) {
                size_t at = 0;
                auto take = [&](size_t n) {
                  ValueRange slice = state.slice(at, n);
                  at += n;
                  return slice;
                };
                SmallVector<Lanes> window, pending, sums;
                for (Value packed : take(history))
                  window.push_back(e.unpack(packed));
                for (Value packed : take(history))
                  pending.push_back(e.unpack(packed));
                ValueRange xInFlight = take(ahead);
                ValueRange dyInFlight = take(ahead);
                ValueRange cursorState = take(2);
                DocCursor doc{cursorState[0], cursorState[1]};
                for (Value packed : take(numSums))
                  sums.push_back(e.unpack(packed));

                SmallVector<Value> xNext, dyNext;

                for (int64_t i = 0; i < ahead; ++i) {
                  Value token = e.offset(base, i);
                  doc = e.advanceDocument(cu, doc, token);
                  Value sinceStart =
                      arith::SubIOp::create(b, loc, token, doc.start);
                  SmallVector<Value> reaches; // token - back in the document
                  for (int64_t back = 0; back <= history; ++back)
                    reaches.push_back(atLeast(sinceStart, e.index(back)));

                  Lanes current = e.widen(xInFlight[i], f32);
                  Lanes grad = e.widen(dyInFlight[i], f32);
                  // Refill the slots just read (see LowerFwdTile.cpp).
                  xNext.push_back(loadRow(x, e.offset(base, ahead + i)));
                  dyNext.push_back(loadRow(dy, e.offset(base, ahead + i)));
                  SmallVector<Lanes> rows =
                      e.documentRows(window, current, sinceStart);
                  Lanes pre = e.preactivation(taps, rows, bias);

                  if (op.getActivation() == Activation::silu) {
                    Lanes z = precise ? pre : e.roundToBF16(pre);
                    Lanes one = e.splat(f32, 1.0);
                    Lanes gate = e.sigmoid(z, precise);
                    // s * (1 + z * (1 - s))
                    Lanes slope =
                        e.mul(gate, e.fma(z, e.sub(one, gate), one));
                    grad = e.mul(grad, slope);
                  }
                  grad = e.select(e.lessThan(token, tokens), grad,
                                  e.splat(f32, 0.0));

                  // dx of token - back gets weight[width - 1 - back] * g.
                  auto contribution = [&](int64_t back, const Lanes &into) {
                    Lanes masked =
                        e.select(reaches[back], grad, e.splat(f32, 0.0));
                    return e.fma(taps[history - back], masked, into);
                  };
                  Lanes finished = contribution(history, pending[history - 1]);
                  Value stored = arith::AndIOp::create(
                      b, loc, atLeast(token, firstStored),
                      e.lessThan(token, walkEnd));
                  e.storeLanesIf(stored, op.getDx(),
                                 {e.offset(token, -history), col}, finished);
                  for (int64_t back = history - 1; back >= 1; --back)
                    pending[back] = contribution(back, pending[back - 1]);
                  pending[0] = e.mul(taps[history], grad);

                  // Only the chunk's own tokens count toward the sums.
                  Lanes own = e.select(e.lessThan(token, end), grad,
                                       e.splat(f32, 0.0));
                  Lanes ownAcc = e.widen(e.pack(own), accType);
                  for (int64_t k = 0; k < width; ++k)
                    sums[k] = e.fma(ownAcc, e.widen(e.pack(rows[k]), accType),
                                    sums[k]);
                  if (hasBias)
                    sums[width] = e.add(sums[width], ownAcc);

                  window.erase(window.begin());
                  window.push_back(current);
                }

                SmallVector<Value> yielded;
                for (const Lanes &row : window)
                  yielded.push_back(e.pack(row));
                for (const Lanes &row : pending)
                  yielded.push_back(e.pack(row));
                llvm::append_range(yielded, xNext);
                llvm::append_range(yielded, dyNext);
                yielded.append({doc.start, doc.next});
                for (const Lanes &sum : sums)
                  yielded.push_back(e.pack(sum));
                scf::YieldOp::create(b, loc, yielded);
              });
          scf::YieldOp::create(
              b, loc, rowLoop.getResults().take_back(numSums));
        });

    // Partial row `part`: width sums per channel, then the bias sums.
    SmallVector<Lanes> sums;
    for (Value packed : chunkLoop.getResults())
      sums.push_back(e.unpack(packed));
    for (int64_t lane = 0; lane < e.numLanes(); ++lane) {
      Lanes perTap;
      for (int64_t k = 0; k < width; ++k)
        perTap.push_back(sums[k][lane]);
      Value channel = e.offset(col, lane);
      Value column = arith::MulIOp::create(b, loc, channel, e.index(width));
      e.storeLanes(op.getPartials(), {op.getPart(), column}, perTap);
    }
    if (hasBias) {
      Value column = arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, channels, e.index(width)),
          col);
      e.storeLanes(op.getPartials(), {op.getPart(), column}, sums[width]);
    }
    rewriter.eraseOp(op);
    return success();
  }

  bool fastMath;
};
} // namespace

void mlir::cake::populateLowerBwdTilePatterns(RewritePatternSet &patterns,
                                              bool fastMath) {
  patterns.add<LowerBwdTile>(patterns.getContext(), fastMath);
}
