//===- Passes.h - Conversions out of the cake dialect -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_CONVERSION_PASSES_H
#define CAKE_CONVERSION_PASSES_H

#include "cake/Dialect/Cake/IR/CakeDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;

namespace cake {

#define GEN_PASS_DECL
#include "cake/Conversion/Passes.h.inc"

/// Names a kernel parameter, on a function argument, for whoever launches
/// the kernel.
inline constexpr StringLiteral kParamAttrName = "cake.param";
/// Marks the functions convert-cake-to-host makes.
inline constexpr StringLiteral kHostKernelAttrName = "cake.host_kernel";
/// On a kernel: the #cake.tiling of its tiles, what launching it needs.
inline constexpr StringLiteral kKernelTilingAttrName = "cake.tiling";
/// On a kernel: the kernel it runs after, and reads what that one wrote.
inline constexpr StringLiteral kWaitsForAttrName = "cake.waits_for";
/// On a kernel: the threads that share one item of its forall (the lanes of
/// its cake.lane_sum), when more than one.
inline constexpr StringLiteral kLanesPerItemAttrName = "cake.lanes_per_item";

/// Patterns that expand cake.silu and cake.silu_derivative for NVVM
/// (`commonRange`: see convert-cake-math-to-nvvm).
void populateCakeMathToNVVMPatterns(RewritePatternSet &patterns,
                                    bool commonRange);

/// Patterns that expand cake.silu and cake.silu_derivative into arith and
/// math.exp.
void populateCakeMathToArithPatterns(RewritePatternSet &patterns,
                                     bool commonRange);

#define GEN_PASS_REGISTRATION
#include "cake/Conversion/Passes.h.inc"

} // namespace cake
} // namespace mlir

#endif // CAKE_CONVERSION_PASSES_H
