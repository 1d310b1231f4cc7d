//===- TileEmitter.cpp - Building blocks of the tile lowerings ------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the TileEmitter declared in TileEmitter.h.
//
//===----------------------------------------------------------------------===//

#include "TileEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::cake;

/// The largest power of two dividing `bytes`, at most 16: what a vector access
/// of `bytes` bytes at a multiple of `bytes` can claim.
static uint64_t alignmentOf(int64_t bytes) {
  return std::min<uint64_t>(16, uint64_t(bytes) & -uint64_t(bytes));
}

Value TileEmitter::index(int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value TileEmitter::minIndex(Value x, Value y) {
  return arith::MinSIOp::create(b, loc, x, y);
}

Value TileEmitter::maxIndex(Value x, Value y) {
  return arith::MaxSIOp::create(b, loc, x, y);
}

Value TileEmitter::lessThan(Value x, Value y) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, y);
}

Value TileEmitter::offset(Value value, int64_t delta) {
  return arith::AddIOp::create(b, loc, value, index(delta));
}

Value TileEmitter::constant(Type type, double value) {
  return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, value));
}

Value TileEmitter::loadVector(Value memref, ValueRange indices, int64_t count) {
  Type elementType = cast<MemRefType>(memref.getType()).getElementType();
  int64_t bytes = count * elementType.getIntOrFloatBitWidth() / 8;
  return vector::LoadOp::create(b, loc, VectorType::get({count}, elementType),
                                memref, indices, /*nontemporal=*/false,
                                llvm::MaybeAlign(alignmentOf(bytes)));
}

Value TileEmitter::loadRow(Value tokens, Value token, Value lastToken,
                           Value col) {
  return loadVector(tokens, {minIndex(token, lastToken), col}, lanes);
}

void TileEmitter::storeLanesIf(Value condition, Value memref,
                               ValueRange indices, const Lanes &values) {
  auto branch = scf::IfOp::create(b, loc, condition, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(branch.thenBlock()->getTerminator());
  storeLanes(memref, indices, values);
}

void TileEmitter::storeLanes(Value memref, ValueRange indices,
                             const Lanes &values) {
  Type elementType = cast<MemRefType>(memref.getType()).getElementType();
  Lanes converted;
  for (Value value : values) {
    if (value.getType() != elementType)
      value = arith::TruncFOp::create(b, loc, elementType, value);
    converted.push_back(value);
  }
  auto type = VectorType::get({int64_t(converted.size())}, elementType);
  Value vector = vector::FromElementsOp::create(b, loc, type, converted);
  int64_t bytes = converted.size() * elementType.getIntOrFloatBitWidth() / 8;
  vector::StoreOp::create(b, loc, vector, memref, indices,
                          /*nontemporal=*/false,
                          llvm::MaybeAlign(alignmentOf(bytes)));
}

Lanes TileEmitter::widen(Value vector, Type type) {
  Lanes result;
  int64_t count = cast<VectorType>(vector.getType()).getNumElements();
  for (int64_t i = 0; i < count; ++i) {
    Value element = vector::ExtractOp::create(b, loc, vector, i);
    if (element.getType() != type)
      element = arith::ExtFOp::create(b, loc, type, element);
    result.push_back(element);
  }
  return result;
}

Value TileEmitter::pack(const Lanes &values) {
  auto type = VectorType::get({int64_t(values.size())}, values[0].getType());
  return vector::FromElementsOp::create(b, loc, type, values);
}

Lanes TileEmitter::unpack(Value vector) {
  return widen(vector, cast<VectorType>(vector.getType()).getElementType());
}

Lanes TileEmitter::splat(Type type, double value) {
  return Lanes(lanes, constant(type, value));
}

Lanes TileEmitter::add(const Lanes &x, const Lanes &y) {
  Lanes result;
  for (auto [l, r] : llvm::zip_equal(x, y))
    result.push_back(arith::AddFOp::create(b, loc, l, r));
  return result;
}

Lanes TileEmitter::sub(const Lanes &x, const Lanes &y) {
  Lanes result;
  for (auto [l, r] : llvm::zip_equal(x, y))
    result.push_back(arith::SubFOp::create(b, loc, l, r));
  return result;
}

Lanes TileEmitter::mul(const Lanes &x, const Lanes &y) {
  Lanes result;
  for (auto [l, r] : llvm::zip_equal(x, y))
    result.push_back(arith::MulFOp::create(b, loc, l, r));
  return result;
}

Lanes TileEmitter::fma(const Lanes &x, const Lanes &y, const Lanes &z) {
  Lanes result;
  for (auto [l, m, r] : llvm::zip_equal(x, y, z))
    result.push_back(LLVM::FMAOp::create(b, loc, l, m, r));
  return result;
}

Lanes TileEmitter::select(Value condition, const Lanes &x, const Lanes &y) {
  Lanes result;
  for (auto [l, r] : llvm::zip_equal(x, y))
    result.push_back(arith::SelectOp::create(b, loc, condition, l, r));
  return result;
}

Lanes TileEmitter::roundToBF16(const Lanes &values) {
  Lanes result;
  for (Value value : values) {
    Value rounded = arith::TruncFOp::create(b, loc, b.getBF16Type(), value);
    result.push_back(arith::ExtFOp::create(b, loc, value.getType(), rounded));
  }
  return result;
}

SmallVector<Lanes> TileEmitter::loadTaps(Value weight, Value col,
                                         int64_t width) {
  SmallVector<Lanes> taps(width);
  Value zero = index(0);
  for (int64_t lane = 0; lane < lanes; ++lane) {
    Value channel = arith::AddIOp::create(b, loc, col, index(lane));
    Lanes row = widen(loadVector(weight, {channel, zero}, width), b.getF32Type());
    for (int64_t k = 0; k < width; ++k)
      taps[k].push_back(row[k]);
  }
  return taps;
}

std::optional<Lanes> TileEmitter::loadBias(Value bias, Value col) {
  if (!bias)
    return std::nullopt;
  return widen(loadVector(bias, {col}, lanes), b.getF32Type());
}

DocCursor TileEmitter::seekDocument(Value cuSeqlens, Value token) {
  Value entries = memref::DimOp::create(b, loc, cuSeqlens, 0);
  auto entryAt = [&](Value i) -> Value {
    Value value = memref::LoadOp::create(b, loc, cuSeqlens, i);
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), value);
  };
  // Invariant: cu[lo] <= token < cu[hi], with cu[entries] read as infinity.
  Type indexType = b.getIndexType();
  auto search = scf::WhileOp::create(
      b, loc, TypeRange{indexType, indexType}, ValueRange{index(0), entries},
      [&](OpBuilder &, Location, ValueRange bounds) {
        Value span = arith::SubIOp::create(b, loc, bounds[1], bounds[0]);
        Value open = lessThan(index(1), span);
        scf::ConditionOp::create(b, loc, open, bounds);
      },
      [&](OpBuilder &, Location, ValueRange bounds) {
        Value mid = arith::ShRUIOp::create(
            b, loc, arith::AddIOp::create(b, loc, bounds[0], bounds[1]),
            index(1));
        Value atOrBelow = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::sle, entryAt(mid), token);
        Value lo = arith::SelectOp::create(b, loc, atOrBelow, mid, bounds[0]);
        Value hi = arith::SelectOp::create(b, loc, atOrBelow, bounds[1], mid);
        scf::YieldOp::create(b, loc, ValueRange{lo, hi});
      });
  Value doc = search.getResult(0);
  Value last = arith::SubIOp::create(b, loc, entries, index(1));
  Value nextDoc = arith::AddIOp::create(b, loc, doc, index(1));
  Value nextStart = entryAt(minIndex(nextDoc, last));
  Value never = index(std::numeric_limits<int64_t>::max());
  Value next = arith::SelectOp::create(b, loc, lessThan(nextDoc, entries),
                                       nextStart, never);
  return {entryAt(doc), next};
}

DocCursor TileEmitter::advanceDocument(Value cuSeqlens,
                                       const DocCursor &cursor, Value token) {
  Value crossed = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                        token, cursor.next);
  Type indexType = b.getIndexType();
  auto branch = scf::IfOp::create(b, loc, TypeRange{indexType, indexType},
                                  crossed, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(branch.thenBlock());
    DocCursor found = seekDocument(cuSeqlens, token);
    scf::YieldOp::create(b, loc, ValueRange{found.start, found.next});
    b.setInsertionPointToStart(branch.elseBlock());
    scf::YieldOp::create(b, loc, ValueRange{cursor.start, cursor.next});
  }
  return {branch.getResult(0), branch.getResult(1)};
}

SmallVector<Lanes> TileEmitter::documentRows(ArrayRef<Lanes> window,
                                             const Lanes &current,
                                             Value sinceStart) {
  SmallVector<Lanes> rows;
  for (auto [k, row] : llvm::enumerate(window)) {
    Value inDocument =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, sinceStart,
                              index(window.size() - k));
    rows.push_back(select(inDocument, row, splat(b.getF32Type(), 0.0)));
  }
  rows.push_back(current);
  return rows;
}

Lanes TileEmitter::preactivation(ArrayRef<Lanes> taps, ArrayRef<Lanes> rows,
                                 const std::optional<Lanes> &bias) {
  Lanes sum = mul(taps[0], rows[0]);
  for (size_t k = 1; k < taps.size(); ++k)
    sum = fma(taps[k], rows[k], sum);
  return bias ? add(sum, *bias) : sum;
}

Lanes TileEmitter::sigmoid(const Lanes &x, bool precise) {
  Lanes result;
  for (Value value : x)
    result.push_back(sigmoid(value, precise));
  return result;
}

Value TileEmitter::sigmoid(Value x, bool precise) {
  Type type = x.getType();
  // exp(-x) as 2^(-x log2 e) with the GPU's native ex2, called as the NVVM
  // intrinsic: math.exp2 would become a libdevice call, which leaves an
  // .extern in the PTX unless the CUDA toolkit is found at build time.
  Value scaled = arith::MulFOp::create(b, loc, x, constant(type, -M_LOG2E));
  bool approximate = fastMath && !precise;
  StringRef ex2 =
      approximate ? "llvm.nvvm.ex2.approx.ftz.f32" : "llvm.nvvm.ex2.approx.f32";
  Value exp = LLVM::CallIntrinsicOp::create(b, loc, type, b.getStringAttr(ex2),
                                            ValueRange{scaled})
                  .getResult(0);
  Value one = constant(type, 1.0);
  Value denominator = arith::AddFOp::create(b, loc, one, exp);
  Value estimate = NVVM::RcpApproxFtzF32Op::create(b, loc, type, denominator);
  if (approximate)
    return estimate;
  // An IEEE division is a call that spills every live register around it;
  // one Newton step (r += r * (1 - d * r)) brings the estimate within an ulp.
  Value negated = arith::NegFOp::create(b, loc, denominator);
  Value residual = LLVM::FMAOp::create(b, loc, negated, estimate, one);
  return LLVM::FMAOp::create(b, loc, estimate, residual, estimate);
}
