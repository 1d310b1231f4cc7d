//===- RowBuilder.cpp - Building blocks of the tile expansions ------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the RowBuilder declared in RowBuilder.h.
//
//===----------------------------------------------------------------------===//

#include "RowBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::cake;

/// The largest power of two dividing `bytes`, at most 16: what a vector access
/// of `bytes` bytes at a multiple of `bytes` can claim.
static uint64_t alignmentOf(int64_t bytes) {
  return std::min<uint64_t>(16, uint64_t(bytes) & -uint64_t(bytes));
}

/// A vector load or store of `type` with the alignment its size implies, so
/// that it becomes one wide access.
static llvm::MaybeAlign accessAlignment(VectorType type) {
  return llvm::MaybeAlign(
      alignmentOf(type.getNumElements() * type.getElementTypeBitWidth() / 8));
}

Value RowBuilder::constant(Type type, int64_t value) {
  return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, value));
}

Value RowBuilder::index(int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value RowBuilder::token(int64_t value) {
  return constant(b.getI32Type(), value);
}

Value RowBuilder::token(Value index) {
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
}

Value RowBuilder::toIndex(Value token) {
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), token);
}

Value RowBuilder::add(Value value, int64_t delta) {
  return arith::AddIOp::create(b, loc, value, constant(value.getType(), delta));
}

Value RowBuilder::sub(Value x, Value y) {
  return arith::SubIOp::create(b, loc, x, y);
}

Value RowBuilder::min(Value x, Value y) {
  return arith::MinSIOp::create(b, loc, x, y);
}

Value RowBuilder::max(Value x, Value y) {
  return arith::MaxSIOp::create(b, loc, x, y);
}

Value RowBuilder::lessThan(Value x, Value y) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, y);
}

Value RowBuilder::atLeast(Value x, Value y) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, x, y);
}

Value RowBuilder::atLeast(Value x, int64_t y) {
  return atLeast(x, constant(x.getType(), y));
}

Value RowBuilder::both(Value x, Value y) {
  return arith::AndIOp::create(b, loc, x, y);
}

VectorType RowBuilder::vectorOf(Type elementType) {
  return VectorType::get({lanes}, elementType);
}

RowView RowBuilder::view(Value tokens, Value col) {
  Value all = memref::CollapseShapeOp::create(
      b, loc, tokens, ArrayRef<ReassociationIndices>{{0, 1}});
  Value size = memref::DimOp::create(b, loc, all, 0);
  Value flat =
      memref::SubViewOp::create(b, loc, all, ArrayRef<OpFoldResult>{col},
                                ArrayRef<OpFoldResult>{sub(size, col)},
                                ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  return {flat, token(memref::DimOp::create(b, loc, tokens, 0)),
          memref::DimOp::create(b, loc, tokens, 1)};
}

Value RowBuilder::rowOffset(const RowView &view, Value row) {
  return arith::MulIOp::create(b, loc, row, view.channels,
                               arith::IntegerOverflowFlags::nsw);
}

Value RowBuilder::loadRow(const RowView &view, Value offset) {
  VectorType type =
      vectorOf(cast<MemRefType>(view.flat.getType()).getElementType());
  return vector::LoadOp::create(b, loc, type, view.flat, ValueRange{offset},
                                /*nontemporal=*/false, accessAlignment(type));
}

Value RowBuilder::loadRowIf(Value exists, const RowView &view, Value offset) {
  VectorType type =
      vectorOf(cast<MemRefType>(view.flat.getType()).getElementType());
  auto branch = scf::IfOp::create(
      b, loc, exists,
      [&](OpBuilder &, Location) {
        scf::YieldOp::create(b, loc, loadRow(view, offset));
      },
      [&](OpBuilder &, Location) {
        scf::YieldOp::create(b, loc, zeros(type.getElementType()));
      });
  return branch.getResult(0);
}

void RowBuilder::store(Value memref, ValueRange indices, Value vector) {
  vector::StoreOp::create(b, loc, vector, memref, indices,
                          /*nontemporal=*/false,
                          accessAlignment(cast<VectorType>(vector.getType())));
}

void RowBuilder::storeRow(const RowView &view, Value offset, Value vector) {
  Type elementType = cast<MemRefType>(view.flat.getType()).getElementType();
  VectorType type = vectorOf(elementType);
  if (vector.getType() != type)
    vector = arith::TruncFOp::create(b, loc, type, vector);
  store(view.flat, {offset}, vector);
}

void RowBuilder::storeRowIf(Value condition, const RowView &view, Value offset,
                            Value vector) {
  auto branch = scf::IfOp::create(b, loc, condition, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(branch.thenBlock()->getTerminator());
  storeRow(view, offset, vector);
}

Value RowBuilder::widen(Value vector, Type elementType) {
  VectorType type = vectorOf(elementType);
  if (vector.getType() == type)
    return vector;
  auto from = cast<VectorType>(vector.getType());
  if (from.getElementType().isBF16() && elementType.isF32() && lanes % 2 == 0)
    return widenBF16Pairs(vector);
  return arith::ExtFOp::create(b, loc, type, vector);
}

Value RowBuilder::widenBF16Pairs(Value bf16) {
  // A bf16 is the high half of its f32: the even lane's bits move up, the odd
  // lane's are masked in place, one instruction a lane where a conversion of
  // the odd lane first extracts it.
  auto pairs = VectorType::get({lanes / 2}, b.getI32Type());
  Value words = vector::BitCastOp::create(b, loc, pairs, bf16);
  auto bits = [&](int64_t value) {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(pairs, b.getI32IntegerAttr(value)));
  };
  auto asF32 = [&](Value word) {
    return arith::BitcastOp::create(
        b, loc, VectorType::get({lanes / 2}, b.getF32Type()), word);
  };
  Value even = asF32(arith::ShLIOp::create(b, loc, words, bits(16)));
  Value odd = asF32(arith::AndIOp::create(b, loc, words, bits(0xffff0000)));
  return vector::InterleaveOp::create(b, loc, even, odd);
}

Value RowBuilder::zeros(Type elementType) {
  VectorType type = vectorOf(elementType);
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(elementType, 0)));
}

Value RowBuilder::roundToBF16(Value vector) {
  Value rounded =
      arith::TruncFOp::create(b, loc, vectorOf(b.getBF16Type()), vector);
  if (lanes % 2 != 0)
    return arith::ExtFOp::create(b, loc, vector.getType(), rounded);
  // Lanes in pairs: a GPU rounds a pair in one conversion (a lane at a time
  // is one conversion each, on the slower pipe).
  return widenBF16Pairs(rounded);
}

Value RowBuilder::select(Value condition, Value x, Value y) {
  return arith::SelectOp::create(b, loc, condition, x, y);
}

Value RowBuilder::mul(Value x, Value y) {
  return arith::MulFOp::create(b, loc, x, y);
}

Value RowBuilder::addf(Value x, Value y) {
  return arith::AddFOp::create(b, loc, x, y);
}

Value RowBuilder::fma(Value x, Value y, Value z) {
  return vector::FMAOp::create(b, loc, x, y, z);
}

SmallVector<Value> RowBuilder::loadTaps(Value weight, Value col,
                                        int64_t width) {
  Type elementType = cast<MemRefType>(weight.getType()).getElementType();
  VectorType rowType = VectorType::get({width}, elementType);
  SmallVector<SmallVector<Value>> perTap(width);
  for (int64_t lane = 0; lane < lanes; ++lane) {
    Value row = vector::LoadOp::create(
        b, loc, rowType, weight, ValueRange{add(col, lane), index(0)},
        /*nontemporal=*/false, accessAlignment(rowType));
    for (int64_t k = 0; k < width; ++k) {
      Value tap = vector::ExtractOp::create(b, loc, row, k);
      if (tap.getType() != b.getF32Type())
        tap = arith::ExtFOp::create(b, loc, b.getF32Type(), tap);
      perTap[k].push_back(tap);
    }
  }
  SmallVector<Value> taps;
  for (ArrayRef<Value> values : perTap)
    taps.push_back(vector::FromElementsOp::create(
        b, loc, vectorOf(b.getF32Type()), values));
  return taps;
}

Value RowBuilder::loadBias(Value bias, Value col) {
  if (!bias)
    return Value();
  VectorType type = vectorOf(cast<MemRefType>(bias.getType()).getElementType());
  Value row =
      vector::LoadOp::create(b, loc, type, bias, ValueRange{col},
                             /*nontemporal=*/false, accessAlignment(type));
  return widen(row, b.getF32Type());
}

Value RowBuilder::loadEntry(Value cuSeqlens, Value i) {
  return memref::LoadOp::create(b, loc, cuSeqlens, i);
}

Value RowBuilder::nextStart(Value cuSeqlens, Value docIndex) {
  Value entries = memref::DimOp::create(b, loc, cuSeqlens, 0);
  Value nextDoc = add(docIndex, 1);
  Value value = loadEntry(cuSeqlens, min(nextDoc, add(entries, -1)));
  Value never = constant(value.getType(), std::numeric_limits<int32_t>::max());
  return select(lessThan(nextDoc, entries), value, never);
}

DocCursor RowBuilder::searchDocument(Value cuSeqlens, SearchStep step) {
  // Invariant: cu[lo] <= token < cu[hi], with cu[entries] read as infinity.
  // The entries at lo and hi travel with them, so that the cursor needs no
  // loads after the last step.
  Value entries = memref::DimOp::create(b, loc, cuSeqlens, 0);
  Type indexType = b.getIndexType(), tokenType = b.getI32Type();
  Value never = constant(tokenType, std::numeric_limits<int32_t>::max());
  auto search = scf::WhileOp::create(
      b, loc, TypeRange{indexType, indexType, tokenType, tokenType},
      ValueRange{index(0), entries, loadEntry(cuSeqlens, index(0)), never},
      [&](OpBuilder &, Location, ValueRange bounds) {
        Value open = lessThan(index(1), sub(bounds[1], bounds[0]));
        scf::ConditionOp::create(b, loc, open, bounds);
      },
      [&](OpBuilder &, Location, ValueRange bounds) {
        scf::YieldOp::create(b, loc, step(bounds));
      });
  // With hi = lo + 1 (always, for cu_seqlens that hold documents), the entry
  // at hi is where the next document starts.
  return {search.getResult(0), search.getResult(2), search.getResult(3)};
}

Value RowBuilder::probeAt(Value lo, Value span, Value k, int64_t fanout) {
  Value piece = arith::MulIOp::create(b, loc, span, k);
  return arith::AddIOp::create(
      b, loc, lo,
      arith::ShRUIOp::create(b, loc, piece, index(llvm::Log2_64(fanout))));
}

DocCursor RowBuilder::seekDocument(Value cuSeqlens, Value token,
                                   int64_t fanout) {
  assert(fanout >= 2 && llvm::isPowerOf2_64(fanout) && "fanout: 2, 4, 8...");
  // A step's probes split [lo, hi) into `fanout` pieces and are independent
  // loads: the search waits for memory once a step, log_fanout(entries)
  // times, where a binary search waits log_2(entries) times. Every probe is
  // in [lo, hi), and a step narrows the range whatever the entries hold.
  return searchDocument(cuSeqlens, [&](ValueRange bounds) {
    Value span = sub(bounds[1], bounds[0]);
    SmallVector<Value> probes, entriesAt, atOrBelow;
    for (int64_t k = 1; k < fanout; ++k) {
      probes.push_back(probeAt(bounds[0], span, index(k), fanout));
      entriesAt.push_back(loadEntry(cuSeqlens, probes.back()));
      atOrBelow.push_back(arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::sle, entriesAt.back(), token));
    }
    // lo: the last probe at or below the token; hi: the first above it.
    Value lo = bounds[0], hi = bounds[1], atLo = bounds[2], atHi = bounds[3];
    for (int64_t k = 0; k < fanout - 1; ++k) {
      lo = select(atOrBelow[k], probes[k], lo);
      atLo = select(atOrBelow[k], entriesAt[k], atLo);
    }
    for (int64_t k = fanout - 2; k >= 0; --k) {
      hi = select(atOrBelow[k], hi, probes[k]);
      atHi = select(atOrBelow[k], atHi, entriesAt[k]);
    }
    return SmallVector<Value>{lo, hi, atLo, atHi};
  });
}

DocCursor RowBuilder::seekDocumentInSubgroup(Value cuSeqlens, Value token,
                                             int64_t probesPerLane) {
  assert(probesPerLane >= 1 && llvm::isPowerOf2_64(probesPerLane));
  int64_t fanout = kSubgroupLanes * probesPerLane;
  Type tokenType = b.getI32Type();
  Value lane = gpu::LaneIdOp::create(b, loc, /*upper_bound=*/IntegerAttr());
  Value firstProbe = arith::MulIOp::create(b, loc, lane, index(probesPerLane));
  // seekDocument's search, with probe k (1 .. fanout - 1) lane (k - 1) / P's
  // number (k - 1) % P. As cu_seqlens is sorted, the probes at or below the
  // token are the first `count`, so that probe `count` is the new lo and
  // probe `count + 1` the new hi (probe 0 is lo, probe fanout is hi). Were it
  // not sorted, both would still be probes, hi at least lo, and the range
  // would shrink.
  return searchDocument(cuSeqlens, [&](ValueRange bounds) {
    Value lo = bounds[0], hi = bounds[1], span = sub(hi, lo);
    SmallVector<Value> entriesRead;
    Value count = constant(tokenType, 0);
    for (int64_t p = 0; p < probesPerLane; ++p) {
      Value k = add(firstProbe, p + 1);
      // Lane 31's last probe would be hi itself: it reads an entry in the
      // range and counts nothing.
      Value isProbe = lessThan(k, index(fanout));
      Value entry = loadEntry(cuSeqlens,
                              min(probeAt(lo, span, k, fanout), add(hi, -1)));
      Value below = both(isProbe, arith::CmpIOp::create(
                                      b, loc, arith::CmpIPredicate::sle,
                                      entry, token));
      count = arith::AddIOp::create(
          b, loc, count, arith::ExtUIOp::create(b, loc, tokenType, below));
      entriesRead.push_back(entry);
    }
    count = gpu::SubgroupReduceOp::create(
        b, loc, count, gpu::AllReduceOperation::ADD, /*uniform=*/true);
    Value k = toIndex(count);
    // The entry of probe k, 1 <= k < fanout, from the lane that read it.
    auto entryOfProbe = [&](Value k) -> Value {
      Value at = add(k, -1);
      Value slot = arith::RemUIOp::create(b, loc, at, index(probesPerLane));
      Value mine = entriesRead[0];
      for (int64_t p = 1; p < probesPerLane; ++p)
        mine = select(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                            slot, index(p)),
                      entriesRead[p], mine);
      Value source = arith::IndexCastOp::create(
          b, loc, tokenType,
          arith::DivUIOp::create(b, loc, at, index(probesPerLane)));
      return gpu::ShuffleOp::create(b, loc, mine, source,
                                    constant(tokenType, kSubgroupLanes),
                                    gpu::ShuffleMode::IDX)
          .getShuffleResult();
    };
    Value kAbove = add(k, 1);
    Value atLo =
        select(lessThan(index(0), k), entryOfProbe(max(k, index(1))), bounds[2]);
    Value atHi = select(lessThan(kAbove, index(fanout)),
                        entryOfProbe(min(kAbove, index(fanout - 1))),
                        bounds[3]);
    return SmallVector<Value>{probeAt(lo, span, k, fanout),
                              probeAt(lo, span, kAbove, fanout), atLo, atHi};
  });
}

DocCursor RowBuilder::advanceDocument(Value cuSeqlens, const DocCursor &cursor,
                                      Value token) {
  // Each step moves to the next entry, and past the last one `next` is
  // infinite: the walk ends after at most num_docs steps.
  SmallVector<Type> types(ValueRange(cursor.values()).getTypes());
  auto walk = scf::WhileOp::create(
      b, loc, types, cursor.values(),
      [&](OpBuilder &, Location, ValueRange state) {
        Value crossed = atLeast(token, DocCursor::from(state).next);
        scf::ConditionOp::create(b, loc, crossed, state);
      },
      [&](OpBuilder &, Location, ValueRange state) {
        DocCursor at = DocCursor::from(state);
        Value docIndex = add(at.index, 1);
        scf::YieldOp::create(
            b, loc,
            ValueRange{docIndex, at.next, nextStart(cuSeqlens, docIndex)});
      });
  return DocCursor::from(walk.getResults());
}

InteriorRows RowBuilder::interiorRows(const DocCursor &doc, int64_t history,
                                      Value low, Value high) {
  Value begin = add(doc.start, history);
  if (low)
    begin = max(begin, low);
  return {begin, high ? min(doc.next, high) : doc.next};
}

Value RowBuilder::isInterior(Value token, const InteriorRows &rows) {
  return both(atLeast(token, rows.begin), lessThan(token, rows.end));
}

SmallVector<Value> RowBuilder::documentRows(ArrayRef<Value> window,
                                            Value current, Value sinceStart) {
  SmallVector<Value> rows;
  for (auto [k, row] : llvm::enumerate(window)) {
    Value inDocument = atLeast(sinceStart, window.size() - k);
    rows.push_back(select(inDocument, row, zeros(b.getF32Type())));
  }
  rows.push_back(current);
  return rows;
}

Value RowBuilder::preactivation(ArrayRef<Value> taps, ArrayRef<Value> rows,
                                Value bias) {
  Value sum = mul(taps[0], rows[0]);
  for (size_t k = 1; k < taps.size(); ++k)
    sum = fma(taps[k], rows[k], sum);
  return bias ? addf(sum, bias) : sum;
}
