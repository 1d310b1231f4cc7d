//===- CakeOps.cpp - Operations of the cake dialect -----------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the verifiers of the cake ops. Element types and ranks
// are checked by the ODS constraints; what is checked here ties the operands
// to each other: channels, width, the bias and the partial rows.
//
//===----------------------------------------------------------------------===//

#include "cake/Dialect/Cake/IR/CakeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::cake;

Type mlir::cake::partialsElementType(MLIRContext *context, SiluGrad siluGrad) {
  if (siluGrad == SiluGrad::bf16)
    return Float32Type::get(context);
  return Float64Type::get(context);
}

namespace {
/// Two extents disagree only when both are known.
bool extentsConflict(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
}

std::string shapeString(MemRefType type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      type.getShape(), os,
      [&](int64_t extent) {
        if (ShapedType::isDynamic(extent))
          os << "?";
        else
          os << extent;
      },
      "x");
  return text;
}

/// The operands every conv1d op has: the tokens, the weight and the bias, and
/// the token-shaped buffers (y, dy, dx) that must match the tokens.
struct ConvOperands {
  MemRefType x;
  MemRefType weight;
  MemRefType bias; // null without bias
  SmallVector<std::pair<StringRef, MemRefType>> likeX;
  int64_t width;
};

LogicalResult verifyConvOperands(Operation *op, const ConvOperands &ops) {
  int64_t channels = ops.x.getDimSize(1);
  if (extentsConflict(ops.weight.getDimSize(0), channels))
    return op->emitOpError("'weight' has ")
           << ops.weight.getDimSize(0) << " rows but 'x' has " << channels
           << " channels";
  if (extentsConflict(ops.weight.getDimSize(1), ops.width))
    return op->emitOpError("'weight' has ")
           << ops.weight.getDimSize(1) << " columns but the width is "
           << ops.width;
  if (ops.bias && extentsConflict(ops.bias.getDimSize(0), channels))
    return op->emitOpError("'bias' has ")
           << ops.bias.getDimSize(0) << " elements but 'x' has " << channels
           << " channels";
  for (auto [name, type] : ops.likeX) {
    if (failed(verifyCompatibleShape(type.getShape(), ops.x.getShape())))
      return op->emitOpError("'")
             << name << "' has shape " << shapeString(type)
             << " but 'x' has shape " << shapeString(ops.x);
  }
  return success();
}

/// The partial rows hold `width` weight-gradient columns and one bias-gradient
/// column per channel, in the accumulator precision of the SiLU' policy.
LogicalResult verifyPartials(Operation *op, MemRefType partials,
                             int64_t channels, int64_t width,
                             std::optional<SiluGrad> siluGrad) {
  if (siluGrad) {
    Type expected = partialsElementType(op->getContext(), *siluGrad);
    if (partials.getElementType() != expected)
      return op->emitOpError("'partials' must hold ")
             << expected << " under silu_grad " << stringifySiluGrad(*siluGrad)
             << ", got " << partials.getElementType();
  }
  if (!ShapedType::isDynamic(channels) &&
      extentsConflict(partials.getDimSize(1), (width + 1) * channels))
    return op->emitOpError("'partials' has ")
           << partials.getDimSize(1) << " columns but (width + 1) * C = "
           << (width + 1) * channels;
  return success();
}

LogicalResult verifyTile(Operation *op, MemRefType x, TilingAttr tiling) {
  int64_t channels = x.getDimSize(1);
  int64_t vectorChannels = tiling.getVectorChannels();
  if (!ShapedType::isDynamic(channels) && channels % vectorChannels != 0)
    return op->emitOpError("'x' has ")
           << channels << " channels, not a multiple of vector_channels = "
           << vectorChannels;
  return success();
}

/// A backward's parts must stay bounded by C and the device: they are the
/// rows of its workspace, whose size depends on those alone.
LogicalResult verifyBackwardTiling(Operation *op, TilingAttr tiling) {
  if (tiling && tiling.getMaxPartTokens() != 0)
    return op->emitOpError("tiling has max_part_tokens = ")
           << tiling.getMaxPartTokens()
           << ", but a backward's parts are bounded by its waves alone";
  return success();
}

MemRefType typeOrNull(Value value) {
  return value ? cast<MemRefType>(value.getType()) : MemRefType();
}
} // namespace

#define GET_OP_CLASSES
#include "cake/Dialect/Cake/IR/CakeOps.cpp.inc"

namespace {
/// The operands of a forward op (conv1d_fwd, fwd_tile).
template <typename OpTy>
ConvOperands forwardOperands(OpTy op) {
  return {op.getX().getType(), op.getWeight().getType(),
          typeOrNull(op.getBias()), {{"y", op.getY().getType()}},
          static_cast<int64_t>(op.getWidth())};
}

/// The operands of a backward op (conv1d_bwd, bwd_tile).
template <typename OpTy>
ConvOperands backwardOperands(OpTy op) {
  return {op.getX().getType(),
          op.getWeight().getType(),
          typeOrNull(op.getBias()),
          {{"dy", op.getDy().getType()}, {"dx", op.getDx().getType()}},
          static_cast<int64_t>(op.getWidth())};
}
} // namespace

LogicalResult Conv1dFwdOp::verify() {
  return verifyConvOperands(*this, forwardOperands(*this));
}

LogicalResult Conv1dBwdOp::verify() {
  if (failed(verifyConvOperands(*this, backwardOperands(*this))) ||
      failed(verifyBackwardTiling(*this, getTilingAttr())))
    return failure();
  if (failed(verifyCompatibleShape(getDweight().getType().getShape(),
                                   getWeight().getType().getShape())))
    return emitOpError("'dweight' has shape ")
           << shapeString(getDweight().getType()) << " but 'weight' has shape "
           << shapeString(getWeight().getType());
  if (!getBias() != !getDbias())
    return emitOpError("'dbias' must be given exactly when 'bias' is");
  if (getDbias() && failed(verifyCompatibleShape(
                        getDbias().getType().getShape(),
                        getBias().getType().getShape())))
    return emitOpError("'dbias' has shape ")
           << shapeString(getDbias().getType()) << " but 'bias' has shape "
           << shapeString(getBias().getType());
  return verifyPartials(*this, getPartials().getType(),
                        getX().getType().getDimSize(1), getWidth(),
                        getSiluGrad());
}

LogicalResult FwdTileOp::verify() {
  if (failed(verifyConvOperands(*this, forwardOperands(*this))))
    return failure();
  return verifyTile(*this, getX().getType(), getTiling());
}

LogicalResult BwdTileOp::verify() {
  if (failed(verifyConvOperands(*this, backwardOperands(*this))) ||
      failed(verifyBackwardTiling(*this, getTiling())))
    return failure();
  if (failed(verifyPartials(*this, getPartials().getType(),
                            getX().getType().getDimSize(1), getWidth(),
                            getSiluGrad())))
    return failure();
  return verifyTile(*this, getX().getType(), getTiling());
}

LogicalResult PartialsReduceOp::verify() {
  MemRefType dweight = getDweight().getType();
  int64_t channels = dweight.getDimSize(0);
  int64_t width = dweight.getDimSize(1);
  if (getDbias() &&
      extentsConflict(getDbias().getType().getDimSize(0), channels))
    return emitOpError("'dbias' has ")
           << getDbias().getType().getDimSize(0) << " elements but 'dweight' has "
           << channels << " rows";
  if (ShapedType::isDynamic(width))
    return emitOpError("'dweight' must have a static number of columns (the "
                       "width)");
  return verifyPartials(*this, getPartials().getType(), channels, width,
                        std::nullopt);
}
