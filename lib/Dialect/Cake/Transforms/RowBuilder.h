//===- RowBuilder.h - Building blocks of the tile expansions ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// What both tile expansions are made of: a thread's channels of one token row
// as one vector, weights and bias as vectors of those channels, the document
// cursor over cu_seqlens, and the masks and sums of the convolution.
//
//===----------------------------------------------------------------------===//

#ifndef CAKE_LIB_DIALECT_CAKE_TRANSFORMS_ROWBUILDER_H
#define CAKE_LIB_DIALECT_CAKE_TRANSFORMS_ROWBUILDER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::cake {

/// The document a token is in, as far as a thread walking the tokens in order
/// needs to know: its index in cu_seqlens (an index), where it starts, and
/// where the next one starts (tokens; INT32_MAX after the last).
struct DocCursor {
  Value index;
  Value start;
  Value next;

  static constexpr size_t numValues = 3;
  SmallVector<Value> values() const { return {index, start, next}; }
  static DocCursor from(ValueRange values) {
    return {values[0], values[1], values[2]};
  }
};

/// The tokens [begin, end) that take a row loop's mask-free path while its
/// cursor stays in one document. Carried next to the cursor and recomputed
/// only when it moves, so that each row tests two bounds.
struct InteriorRows {
  Value begin;
  Value end;

  static constexpr size_t numValues = 2;
  SmallVector<Value> values() const { return {begin, end}; }
  static InteriorRows from(ValueRange values) { return {values[0], values[1]}; }
};

/// A thread's channels of a token buffer ([S, C]): the buffer seen as one
/// flat run of S * C elements that starts at the thread's first channel, so
/// that a row's offset is its token times C, and the channel offset is added
/// once, outside the row loops.
struct RowView {
  Value flat;
  /// S, a token.
  Value rows;
  /// C, an index.
  Value channels;
};

/// Builds the row math of one thread's tile: values are vectors of the
/// thread's `lanes` channels.
///
/// Tokens are i32: cu_seqlens holds them, so each fits, and on a GPU 32-bit
/// arithmetic and compares take one instruction where 64-bit ones take two.
/// A row loop runs a few tokens past S (the backward's last rows, the
/// stages read ahead), which the runtime's bound on S leaves room for
/// (docs/kernel-abi.md).
class RowBuilder {
public:
  /// The lanes of a GPU subgroup.
  static constexpr int64_t kSubgroupLanes = 32;

  RowBuilder(OpBuilder &b, Location loc, int64_t lanes)
      : b(b), loc(loc), lanes(lanes) {}

  OpBuilder &builder() { return b; }
  Location location() { return loc; }
  int64_t numLanes() const { return lanes; }

  Value index(int64_t value);
  /// A token constant; an index value as a token, and back.
  Value token(int64_t value);
  Value token(Value index);
  Value toIndex(Value token);
  /// `value + delta` in value's type.
  Value add(Value value, int64_t delta);
  Value sub(Value a, Value b);
  Value min(Value a, Value b);
  Value max(Value a, Value b);
  Value lessThan(Value a, Value b);
  Value atLeast(Value a, Value b);
  Value atLeast(Value a, int64_t b);
  Value both(Value a, Value b);

  /// The view of `tokens` from channel `col`; build it outside the row
  /// loops.
  RowView view(Value tokens, Value col);
  /// The offset of `row` (an index) in `view`. A row loop's rows are its
  /// induction variable plus constants: cake-unroll-rows turns their offsets
  /// into one product an iteration plus offsets computed before the loop.
  Value rowOffset(const RowView &view, Value row);
  /// The row at `offset` of `view` as a vector of its element type.
  Value loadRow(const RowView &view, Value offset);
  /// loadRow where `exists` holds, zeros elsewhere: a row past the tensor is
  /// never read. cake-stage-rows turns the pair into one copy that reads
  /// nothing where `exists` fails.
  Value loadRowIf(Value exists, const RowView &view, Value offset);
  /// Stores `vector` at `indices` as one access of the alignment its size
  /// implies.
  void store(Value memref, ValueRange indices, Value vector);
  /// `vector` stored at `offset` of `view`, converted to its element type.
  void storeRow(const RowView &view, Value offset, Value vector);
  /// storeRow where `condition` holds.
  void storeRowIf(Value condition, const RowView &view, Value offset,
                  Value vector);

  VectorType vectorOf(Type elementType);
  Value widen(Value vector, Type elementType);
  /// A bf16 vector of an even number of lanes widened to f32 exactly, by
  /// moving bits.
  Value widenBF16Pairs(Value bf16);
  Value zeros(Type elementType);
  Value roundToBF16(Value vector);
  Value select(Value condition, Value a, Value b);
  Value mul(Value a, Value b);
  Value addf(Value a, Value b);
  Value fma(Value a, Value b, Value c);

  /// weight[col + lane, k] for every tap k, each an f32 vector.
  SmallVector<Value> loadTaps(Value weight, Value col, int64_t width);
  /// bias[col + lane] as an f32 vector; null without a bias.
  Value loadBias(Value bias, Value col);

  /// The cursor of the document holding `token`: the last cu_seqlens entry at
  /// or below it, by a search whose every step reads `fanout - 1` entries at
  /// once (a power of two; 2 is a binary search). In bounds and finite
  /// whatever cu_seqlens holds.
  DocCursor seekDocument(Value cuSeqlens, Value token, int64_t fanout);
  /// seekDocument done together by the lanes of a subgroup, every one of
  /// which reaches it with the same `token`: a step reads `probesPerLane`
  /// entries a lane and splits the range into kSubgroupLanes * probesPerLane
  /// pieces. GPU kernels only.
  DocCursor seekDocumentInSubgroup(Value cuSeqlens, Value token,
                                   int64_t probesPerLane);
  /// The cursor moved forward, entry by entry, to the document of `token`
  /// (at or after the cursor's). Ends whatever cu_seqlens holds.
  DocCursor advanceDocument(Value cuSeqlens, const DocCursor &cursor,
                            Value token);

  /// The tokens of `doc` at least `history` deep into it, and also at or after
  /// `low` and before `high` where those are given.
  InteriorRows interiorRows(const DocCursor &doc, int64_t history, Value low,
                            Value high);
  /// Whether `token` is in `rows`.
  Value isInterior(Value token, const InteriorRows &rows);

  /// The rows the taps multiply: `window` (oldest first) with the rows before
  /// the document start zeroed, then `current`. `sinceStart` is the token's
  /// distance from its document's start.
  SmallVector<Value> documentRows(ArrayRef<Value> window, Value current,
                                  Value sinceStart);
  /// sum_k taps[k] * rows[k] (+ bias), in order k = 0, 1, ....
  Value preactivation(ArrayRef<Value> taps, ArrayRef<Value> rows, Value bias);

private:
  /// A step of a document search: (lo, hi, cu[lo], cu[hi]) from the same.
  using SearchStep = function_ref<SmallVector<Value>(ValueRange bounds)>;
  /// The loop both seeks share: from [0, entries), with cu[0] and infinity,
  /// `step` until hi = lo + 1; the cursor at lo.
  DocCursor searchDocument(Value cuSeqlens, SearchStep step);
  /// lo + (span * k) / fanout: where a step's k-th probe of `fanout` lies.
  Value probeAt(Value lo, Value span, Value k, int64_t fanout);

  Value constant(Type type, int64_t value);
  Value loadEntry(Value cuSeqlens, Value index);
  Value nextStart(Value cuSeqlens, Value docIndex);

  OpBuilder &b;
  Location loc;
  int64_t lanes;
};

} // namespace mlir::cake

#endif // CAKE_LIB_DIALECT_CAKE_TRANSFORMS_ROWBUILDER_H
