//===- CakeMathToNVVM.cpp - The activation math on the GPU ----------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements convert-cake-math-to-nvvm: cake.silu and
// cake.silu_derivative become arith ops on the whole value and, lane by lane,
// the GPU's ex2 and rcp approximations (see Passes.td for the formula).
// Neither math.exp2 nor a division is used: on NVVM both become libdevice
// calls, which leave an .extern in the PTX unless the CUDA toolkit is found at
// build time, and an IEEE division spills every live register around it.
//
//===----------------------------------------------------------------------===//

#include "cake/Conversion/Passes.h"
#include "cake/Dialect/Cake/IR/CakeOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::cake {
#define GEN_PASS_DEF_CONVERTCAKEMATHTONVVMPASS
#include "cake/Conversion/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

namespace {
/// Builds f32 arithmetic on a scalar or a vector of f32 alike.
class LaneMath {
public:
  LaneMath(OpBuilder &b, Location loc, Type type)
      : b(b), loc(loc), type(type) {}

  Value constant(double value) {
    FloatAttr scalar = b.getF32FloatAttr(value);
    if (auto vectorType = dyn_cast<VectorType>(type))
      return arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(vectorType, scalar));
    return arith::ConstantOp::create(b, loc, scalar);
  }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value fma(Value x, Value y, Value z) {
    return LLVM::FMAOp::create(b, loc, x, y, z);
  }
  Value select(Value condition, Value x, Value y) {
    return arith::SelectOp::create(b, loc, condition, x, y);
  }
  /// `fn` applied to each lane: the NVVM approximations are scalar.
  Value perLane(function_ref<Value(Value)> fn, Value value) {
    auto vectorType = dyn_cast<VectorType>(type);
    if (!vectorType)
      return fn(value);
    SmallVector<Value> lanes;
    for (int64_t i = 0; i < vectorType.getNumElements(); ++i)
      lanes.push_back(fn(vector::ExtractOp::create(b, loc, value, i)));
    return vector::FromElementsOp::create(b, loc, vectorType, lanes);
  }
  Value exp2(Value x) {
    return perLane(
        [&](Value lane) {
          return LLVM::CallIntrinsicOp::create(
                     b, loc, b.getF32Type(),
                     b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"),
                     ValueRange{lane})
              .getResult(0);
        },
        x);
  }
  Value reciprocal(Value x) {
    return perLane(
        [&](Value lane) -> Value {
          return NVVM::RcpApproxFtzF32Op::create(b, loc, b.getF32Type(), lane);
        },
        x);
  }

  OpBuilder &b;
  Location loc;
  Type type;
};

/// sigmoid(x) and its two sides: 1 / (1 + exp(-|x|)) (`large`, sigmoid
/// for x >= 0 and 1 - sigmoid below) and exp(-|x|) / (1 + exp(-|x|))
/// (`small`, the other one), neither computed from the other.
struct SigmoidParts {
  Value sigmoid;
  Value large;
  Value small;
};

SigmoidParts buildSigmoidParts(LaneMath &m, Value x, bool approx) {
  // |x| as max(x, -x): convert-gpu-to-nvvm turns llvm.fabs into a libdevice
  // call. The NaN-propagating maximum keeps NaN a NaN.
  Value absX = arith::MaximumFOp::create(
      m.b, m.loc, x, arith::NegFOp::create(m.b, m.loc, x));
  // h = exp(-|x| / 2) stays normal down to |x| = 175, where exp(-|x|) itself
  // would be subnormal (and flushed by the approximation) from |x| = 87.
  Value half = m.exp2(m.mul(absX, m.constant(-M_LOG2E / 2)));
  Value one = m.constant(1);
  Value denominator = m.fma(half, half, one); // 1 + exp(-|x|), in [1, 2]
  Value large = m.reciprocal(denominator);
  if (!approx) // One Newton step: r += r * (1 - d * r).
    large = m.fma(large,
                  m.fma(arith::NegFOp::create(m.b, m.loc, denominator), large,
                        one),
                  large);
  // exp(-|x|) / (1 + exp(-|x|)), rounded once into the subnormals if small.
  Value small = m.mul(m.mul(half, large), half);
  // Ordered: NaN takes the `small` side, which is NaN too.
  Value nonNegative = arith::CmpFOp::create(
      m.b, m.loc, arith::CmpFPredicate::OGE, x, m.constant(0));
  return {m.select(nonNegative, large, small), large, small};
}

/// x * sigmoid(x).
Value silu(LaneMath &m, Value x, const SigmoidParts &parts) {
  return m.mul(x, parts.sigmoid);
}

/// s * (1 + x * (1 - s)) as s + x * (s * (1 - s)): s (1 - s) is
/// large * small on either side, so only s needs a select.
Value siluDerivative(LaneMath &m, Value x, const SigmoidParts &parts) {
  return m.fma(x, m.mul(parts.large, parts.small), parts.sigmoid);
}

/// Lowers an activation op of f32 scalars or vectors by `formula`.
template <typename OpTy, Value (*formula)(LaneMath &, Value,
                                          const SigmoidParts &)>
struct LowerActivation : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (!getElementTypeOrSelf(op.getType()).isF32())
      return rewriter.notifyMatchFailure(op, "only f32 is lowered");
    LaneMath m(rewriter, op.getLoc(), op.getType());
    Value x = op.getOperand();
    rewriter.replaceOp(op,
                       formula(m, x, buildSigmoidParts(m, x, op.getApprox())));
    return success();
  }
};

struct ConvertCakeMathToNVVMPass
    : cake::impl::ConvertCakeMathToNVVMPassBase<ConvertCakeMathToNVVMPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateCakeMathToNVVMPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    WalkResult left = getOperation()->walk([](Operation *op) {
      if (!isa<SiluOp, SiluDerivativeOp>(op))
        return WalkResult::advance();
      op->emitError("cannot lower to NVVM: only f32 is supported");
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace

void mlir::cake::populateCakeMathToNVVMPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerActivation<SiluOp, silu>,
               LowerActivation<SiluDerivativeOp, siluDerivative>>(
      patterns.getContext());
}
