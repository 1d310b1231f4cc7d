//===- ActivationBuilder.h - The activation formulas ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The formulas of cake.silu and cake.silu_derivative, written once for every
// target: a target supplies only an exponential and a reciprocal.
//
//===----------------------------------------------------------------------===//

#ifndef CAKE_CONVERSION_CAKEMATHCOMMON_ACTIVATIONBUILDER_H
#define CAKE_CONVERSION_CAKEMATHCOMMON_ACTIVATIONBUILDER_H

#include "cake/Dialect/Cake/IR/CakeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::cake {

/// Builds the activation math on an f32 scalar or a vector of f32.
///
/// Where x >= -87 in every lane (the common range, `commonRange` given), the
/// sigmoid is s = 1 / (1 + e) with e = exp(-x) <= e^87, finite, and s normal;
/// its complement is e * s, never 1 - s.
///
/// Elsewhere (and everywhere without `commonRange`) it is formed from
/// h = exp(-|x| / 2), normal down to |x| = 175 where exp(-|x|) is subnormal
/// from |x| = 87, and r = 1 / (1 + h * h) in [1/2, 1]: sigmoid is r for
/// x >= 0 and (h * r) * h otherwise, 1 - sigmoid the other one. No infinity
/// reaches the reciprocal, neither side is computed as 1 minus the other, and
/// small results keep their subnormal digits. The common range costs 3 fewer
/// instructions a lane and one test of the lanes' minimum.
class ActivationBuilder {
public:
  ActivationBuilder(OpBuilder &b, Location loc, Type type, bool commonRange)
      : b(b), loc(loc), type(type), commonRange(commonRange) {}
  virtual ~ActivationBuilder() = default;

  /// x * sigmoid(x).
  Value silu(Value x, bool approx);
  /// sigmoid(x) * (1 + x * (1 - sigmoid(x))).
  Value siluDerivative(Value x, bool approx);

protected:
  /// exp(scale * a), for scale < 0 and scale * a <= 87 (or NaN).
  virtual Value scaledExp(Value a, double scale) = 0;
  /// 1 / d for d >= 1 (or NaN), at most e^87 + 1; `approx` allows a hardware
  /// approximation.
  virtual Value reciprocal(Value d, bool approx) = 0;

  Value constant(double value);
  Value mul(Value x, Value y);
  Value fma(Value x, Value y, Value z);
  /// `fn` applied to each lane of a vector (or to a scalar).
  Value perLane(function_ref<Value(Value)> fn, Value value);

  OpBuilder &b;
  Location loc;
  Type type;
  bool commonRange;

private:
  /// sigmoid(x), and it and 1 - sigmoid(x) in either order.
  struct Sigmoid {
    Value value;
    Value parts[2];
  };
  /// The sigmoid of the common range.
  Sigmoid commonSigmoid(Value x, bool approx);
  /// The sigmoid of any x.
  Sigmoid fullSigmoid(Value x, bool approx);
  /// `common` where x lies in the common range, else `full`, as one branch
  /// for all lanes; `full` alone without `commonRange`.
  Value byRange(Value x, function_ref<Value()> common,
                function_ref<Value()> full);
};

/// Patterns that replace cake.silu and cake.silu_derivative of f32 by the
/// formulas, with `makeBuilder` supplying the target's builder.
using ActivationBuilderFactory =
    std::function<std::unique_ptr<ActivationBuilder>(OpBuilder &, Location,
                                                     Type)>;
void populateActivationPatterns(RewritePatternSet &patterns,
                                ActivationBuilderFactory makeBuilder);

/// Fails, naming the op, when a cake.silu or cake.silu_derivative is left in
/// `root` (one that is not f32).
LogicalResult checkActivationsLowered(Operation *root, StringRef target);

} // namespace mlir::cake

#endif // CAKE_CONVERSION_CAKEMATHCOMMON_ACTIVATIONBUILDER_H
