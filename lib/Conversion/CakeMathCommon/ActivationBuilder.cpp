//===- ActivationBuilder.cpp - The activation formulas --------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the formulas declared in ActivationBuilder.h and the
// patterns that put them in place of the activation ops.
//
//===----------------------------------------------------------------------===//

#include "cake/Conversion/CakeMathCommon/ActivationBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cake;

Value ActivationBuilder::constant(double value) {
  FloatAttr scalar = b.getF32FloatAttr(value);
  if (auto vectorType = dyn_cast<VectorType>(type))
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(vectorType, scalar));
  return arith::ConstantOp::create(b, loc, scalar);
}

Value ActivationBuilder::mul(Value x, Value y) {
  return arith::MulFOp::create(b, loc, x, y);
}

Value ActivationBuilder::fma(Value x, Value y, Value z) {
  return LLVM::FMAOp::create(b, loc, x, y, z);
}

Value ActivationBuilder::perLane(function_ref<Value(Value)> fn, Value value) {
  auto vectorType = dyn_cast<VectorType>(type);
  if (!vectorType)
    return fn(value);
  SmallVector<Value> lanes;
  for (int64_t i = 0; i < vectorType.getNumElements(); ++i)
    lanes.push_back(fn(vector::ExtractOp::create(b, loc, value, i)));
  return vector::FromElementsOp::create(b, loc, vectorType, lanes);
}

/// The common range's lower end: exp(87) is below the largest f32 and
/// 1 / (1 + exp(87)) above the smallest normal one.
static constexpr double kCommonRangeLow = -87.0;

ActivationBuilder::Sigmoid ActivationBuilder::commonSigmoid(Value x,
                                                            bool approx) {
  Value e = scaledExp(x, -1.0);
  Value s = reciprocal(arith::AddFOp::create(b, loc, e, constant(1)), approx);
  return {s, s, mul(e, s)};
}

ActivationBuilder::Sigmoid ActivationBuilder::fullSigmoid(Value x,
                                                          bool approx) {
  // |x| as max(x, -x): convert-gpu-to-nvvm turns llvm.fabs into a libdevice
  // call. The NaN-propagating maximum keeps NaN a NaN.
  Value absX =
      arith::MaximumFOp::create(b, loc, x, arith::NegFOp::create(b, loc, x));
  Value half = scaledExp(absX, -0.5);
  Value denominator = fma(half, half, constant(1)); // 1 + exp(-|x|)
  Value large = reciprocal(denominator, approx);
  // exp(-|x|) / (1 + exp(-|x|)), rounded once into the subnormals if small.
  Value small = mul(mul(half, large), half);
  // Ordered: NaN takes the `small` side, which is NaN too.
  Value nonNegative =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, x, constant(0));
  return {arith::SelectOp::create(b, loc, nonNegative, large, small), large,
          small};
}

Value ActivationBuilder::byRange(Value x, function_ref<Value()> common,
                                 function_ref<Value()> full) {
  if (!commonRange)
    return full();
  // The least lane decides; a NaN lane is NaN on either side.
  Value least = x;
  if (isa<VectorType>(type))
    least =
        vector::ReductionOp::create(b, loc, vector::CombiningKind::MINNUMF, x);
  Value inRange = arith::CmpFOp::create(
      b, loc, arith::CmpFPredicate::OGE, least,
      arith::ConstantOp::create(b, loc, b.getF32FloatAttr(kCommonRangeLow)));
  auto branch = scf::IfOp::create(
      b, loc, inRange,
      [&](OpBuilder &, Location) { scf::YieldOp::create(b, loc, common()); },
      [&](OpBuilder &, Location) { scf::YieldOp::create(b, loc, full()); });
  return branch.getResult(0);
}

Value ActivationBuilder::silu(Value x, bool approx) {
  return byRange(
      x, [&] { return mul(x, commonSigmoid(x, approx).value); },
      [&] { return mul(x, fullSigmoid(x, approx).value); });
}

Value ActivationBuilder::siluDerivative(Value x, bool approx) {
  // s * (1 + x * (1 - s)) as s + x * (s * (1 - s)): s (1 - s) is the
  // product of the two parts, so only s needs a select.
  auto derivative = [&](Sigmoid s) {
    return fma(x, mul(s.parts[0], s.parts[1]), s.value);
  };
  return byRange(
      x, [&] { return derivative(commonSigmoid(x, approx)); },
      [&] { return derivative(fullSigmoid(x, approx)); });
}

namespace {
template <typename OpTy> struct LowerActivation : OpRewritePattern<OpTy> {
  LowerActivation(MLIRContext *context, ActivationBuilderFactory makeBuilder)
      : OpRewritePattern<OpTy>(context), makeBuilder(std::move(makeBuilder)) {}

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (!getElementTypeOrSelf(op.getType()).isF32())
      return rewriter.notifyMatchFailure(op, "only f32 is lowered");
    std::unique_ptr<ActivationBuilder> builder =
        makeBuilder(rewriter, op.getLoc(), op.getType());
    Value x = op.getOperand();
    rewriter.replaceOp(op, std::is_same_v<OpTy, SiluOp>
                               ? builder->silu(x, op.getApprox())
                               : builder->siluDerivative(x, op.getApprox()));
    return success();
  }

  ActivationBuilderFactory makeBuilder;
};
} // namespace

void mlir::cake::populateActivationPatterns(
    RewritePatternSet &patterns, ActivationBuilderFactory makeBuilder) {
  patterns.add<LowerActivation<SiluOp>, LowerActivation<SiluDerivativeOp>>(
      patterns.getContext(), makeBuilder);
}

LogicalResult mlir::cake::checkActivationsLowered(Operation *root,
                                                  StringRef target) {
  WalkResult left = root->walk([&](Operation *op) {
    if (!isa<SiluOp, SiluDerivativeOp>(op))
      return WalkResult::advance();
    op->emitError("cannot lower to ") << target << ": only f32 is supported";
    return WalkResult::interrupt();
  });
  return failure(left.wasInterrupted());
}
