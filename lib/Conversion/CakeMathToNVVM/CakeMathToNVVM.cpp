//===- CakeMathToNVVM.cpp - The activation math on the GPU ----------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements convert-cake-math-to-nvvm: cake.silu and
// cake.silu_derivative become the formulas of ActivationBuilder with, lane by
// lane, the GPU's ex2 and rcp approximations. Neither math.exp2 nor a division
// is used: on NVVM both become libdevice calls, which leave an .extern in the
// PTX unless the CUDA toolkit is found at build time, and an IEEE division
// spills every live register around it.
//
//===----------------------------------------------------------------------===//

#include "cake/Conversion/CakeMathCommon/ActivationBuilder.h"
#include "cake/Conversion/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::cake {
#define GEN_PASS_DEF_CONVERTCAKEMATHTONVVMPASS
#include "cake/Conversion/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

namespace {
class NVVMActivationBuilder : public ActivationBuilder {
public:
  using ActivationBuilder::ActivationBuilder;

protected:
  Value scaledExp(Value a, double scale) override {
    Value exponent = mul(a, constant(scale * M_LOG2E));
    return perLane(
        [&](Value lane) {
          return LLVM::CallIntrinsicOp::create(
                     b, loc, b.getF32Type(),
                     b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"),
                     ValueRange{lane})
              .getResult(0);
        },
        exponent);
  }

  Value reciprocal(Value d, bool approx) override {
    Value r = perLane(
        [&](Value lane) -> Value {
          return NVVM::RcpApproxFtzF32Op::create(b, loc, b.getF32Type(), lane);
        },
        d);
    if (approx)
      return r;
    // One Newton step: r += r * (1 - d * r).
    Value negated = arith::NegFOp::create(b, loc, d);
    return fma(r, fma(negated, r, constant(1)), r);
  }
};

struct ConvertCakeMathToNVVMPass
    : cake::impl::ConvertCakeMathToNVVMPassBase<ConvertCakeMathToNVVMPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateCakeMathToNVVMPatterns(patterns, commonRange);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))) ||
        failed(checkActivationsLowered(getOperation(), "NVVM")))
      signalPassFailure();
  }
};
} // namespace

void mlir::cake::populateCakeMathToNVVMPatterns(RewritePatternSet &patterns,
                                                bool commonRange) {
  populateActivationPatterns(patterns, [commonRange](OpBuilder &b, Location loc,
                                                     Type type) {
    return std::make_unique<NVVMActivationBuilder>(b, loc, type, commonRange);
  });
}
