//===- CakeMathToArith.cpp - The activation math on the host --------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements convert-cake-math-to-arith: cake.silu and
// cake.silu_derivative become the formulas of ActivationBuilder with math.exp,
// itself expanded into its polynomial approximation on vectors, and an IEEE
// division: what a CPU vectorizes. It also rounds f64 to bf16 in two steps,
// as x86 has no instruction for it and LLVM would call a library function.
//
//===----------------------------------------------------------------------===//

#include "cake/Conversion/CakeMathCommon/ActivationBuilder.h"
#include "cake/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::cake {
#define GEN_PASS_DEF_CONVERTCAKEMATHTOARITHPASS
#include "cake/Conversion/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

namespace {
class ArithActivationBuilder : public ActivationBuilder {
public:
  using ActivationBuilder::ActivationBuilder;

protected:
  Value scaledExp(Value a, double scale) override {
    return math::ExpOp::create(b, loc, mul(a, constant(scale)));
  }

  Value reciprocal(Value d, bool) override {
    return arith::DivFOp::create(b, loc, constant(1), d);
  }
};

/// truncf f64 -> bf16 as f64 -> f32 rounded to odd, then f32 -> bf16 to
/// nearest even: f32 keeps more than bf16's 8 bits plus 2, so the two
/// roundings give the one correctly rounded result.
struct TruncF64ToBF16 : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    Type from = getElementTypeOrSelf(op.getIn().getType());
    Type to = getElementTypeOrSelf(op.getType());
    if (!from.isF64() || !to.isBF16())
      return failure();
    Location loc = op.getLoc();
    auto like = [&](Type element) {
      if (auto vector = dyn_cast<VectorType>(op.getType()))
        return Type(vector.clone(element));
      return element;
    };
    Type f32 = like(rewriter.getF32Type());
    Type i32 = like(rewriter.getI32Type());
    Value x = op.getIn();
    Value nearest = arith::TruncFOp::create(rewriter, loc, f32, x);
    Value back = arith::ExtFOp::create(rewriter, loc, x.getType(), nearest);
    // Ordered: NaN stays as rounded; infinities are exact.
    Value inexact = arith::CmpFOp::create(rewriter, loc,
                                          arith::CmpFPredicate::ONE, back, x);
    Value awayFromZero =
        arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::OGT,
                              math::AbsFOp::create(rewriter, loc, back),
                              math::AbsFOp::create(rewriter, loc, x));
    Value one =
        arith::ConstantOp::create(rewriter, loc, i32, rewriter.getOneAttr(i32));
    Value bits = arith::BitcastOp::create(rewriter, loc, i32, nearest);
    // The magnitude one step toward zero, then the last bit set.
    Value towardZero = arith::SelectOp::create(
        rewriter, loc, awayFromZero,
        arith::SubIOp::create(rewriter, loc, bits, one), bits);
    Value odd = arith::OrIOp::create(rewriter, loc, towardZero, one);
    Value rounded = arith::BitcastOp::create(
        rewriter, loc, f32,
        arith::SelectOp::create(rewriter, loc, inexact, odd, bits));
    rewriter.replaceOpWithNewOp<arith::TruncFOp>(op, op.getType(), rounded);
    return success();
  }
};

struct ConvertCakeMathToArithPass
    : cake::impl::ConvertCakeMathToArithPassBase<ConvertCakeMathToArithPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateCakeMathToArithPatterns(patterns, commonRange);
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))) ||
        failed(checkActivationsLowered(getOperation(), "arith")))
      signalPassFailure();
  }
};
} // namespace

void mlir::cake::populateCakeMathToArithPatterns(RewritePatternSet &patterns,
                                                 bool commonRange) {
  populateActivationPatterns(patterns, [commonRange](OpBuilder &b, Location loc,
                                                     Type type) {
    return std::make_unique<ArithActivationBuilder>(b, loc, type, commonRange);
  });
  patterns.add<TruncF64ToBF16>(patterns.getContext());
}
