//===- TileEmitter.h - Building blocks of the tile lowerings ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The pieces both tile lowerings are made of: vector loads and stores of one
// thread's channels, weights and bias in registers, document boundaries from
// cu_seqlens, and the preactivation and SiLU math. A thread's channels travel
// between loop iterations as one vector and are worked on as scalars ("lanes"),
// which is what the GPU executes anyway.
//
//===----------------------------------------------------------------------===//

#ifndef CAKE_LIB_DIALECT_CAKE_TRANSFORMS_TILEEMITTER_H
#define CAKE_LIB_DIALECT_CAKE_TRANSFORMS_TILEEMITTER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::cake {

/// One value per channel of the thread's vector.
using Lanes = SmallVector<Value, 8>;

/// The document a token is in, as far as a thread needs to know: where it
/// started and where the next one starts (or a huge value after the last).
struct DocCursor {
  Value start;
  Value next;
};

class TileEmitter {
public:
  TileEmitter(OpBuilder &b, Location loc, int64_t lanes, bool fastMath)
      : b(b), loc(loc), lanes(lanes), fastMath(fastMath) {}

  int64_t numLanes() const { return lanes; }
  Value index(int64_t value);
  Value minIndex(Value a, Value b);
  Value maxIndex(Value a, Value b);
  Value lessThan(Value a, Value b);
  /// `value + delta`.
  Value offset(Value value, int64_t delta);

  /// Loads `count` elements at `indices` as one vector, with the alignment
  /// the layout guarantees so that the access is a single wide one.
  Value loadVector(Value memref, ValueRange indices, int64_t count);
  /// The thread's channels of row `token` of `tokens` ([S, C]); rows past
  /// `lastToken` reread it, which stays in bounds and is never stored.
  Value loadRow(Value tokens, Value token, Value lastToken, Value col);
  /// Stores lanes converted to the memref's element type as one vector.
  void storeLanes(Value memref, ValueRange indices, const Lanes &values);
  /// storeLanes where `condition` holds.
  void storeLanesIf(Value condition, Value memref, ValueRange indices,
                    const Lanes &values);
  /// Splits a vector into lanes widened to `type`.
  Lanes widen(Value vector, Type type);

  /// Packs lanes into one vector (to carry them through a loop) and back.
  Value pack(const Lanes &values);
  Lanes unpack(Value vector);

  Lanes splat(Type type, double value);
  Lanes add(const Lanes &a, const Lanes &b);
  Lanes sub(const Lanes &a, const Lanes &b);
  Lanes mul(const Lanes &a, const Lanes &b);
  Lanes fma(const Lanes &a, const Lanes &b, const Lanes &c);
  Lanes select(Value condition, const Lanes &a, const Lanes &b);
  Lanes roundToBF16(const Lanes &values);

  /// weight[col + lane, k] for every tap k, as fp32 lanes.
  SmallVector<Lanes> loadTaps(Value weight, Value col, int64_t width);
  /// bias[col + lane] as fp32 lanes; none without a bias.
  std::optional<Lanes> loadBias(Value bias, Value col);

  /// The cursor of the document holding `token`: the last cu_seqlens entry at
  /// or below it, by binary search. In bounds whatever cu_seqlens holds.
  DocCursor seekDocument(Value cuSeqlens, Value token);
  /// The cursor for `token`, the token after the one `cursor` was for.
  DocCursor advanceDocument(Value cuSeqlens, const DocCursor &cursor,
                            Value token);

  /// The rows the taps multiply: the window (oldest first) with the rows
  /// before the document start zeroed, then `current`. `sinceStart` is the
  /// token's distance from its document's start.
  SmallVector<Lanes> documentRows(ArrayRef<Lanes> window, const Lanes &current,
                                  Value sinceStart);
  /// sum_k taps[k] * rows[k] (+ bias), in order k = 0, 1, ....
  Lanes preactivation(ArrayRef<Lanes> taps, ArrayRef<Lanes> rows,
                      const std::optional<Lanes> &bias);
  Lanes sigmoid(const Lanes &x, bool precise);

private:
  Value constant(Type type, double value);
  Value sigmoid(Value x, bool precise);

  OpBuilder &b;
  Location loc;
  int64_t lanes;
  bool fastMath;
};

} // namespace mlir::cake

#endif // CAKE_LIB_DIALECT_CAKE_TRANSFORMS_TILEEMITTER_H
