//===- Passes.h - Conversions out of the cake dialect -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_CONVERSION_PASSES_H
#define CAKE_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;

namespace cake {

#define GEN_PASS_DECL
#include "cake/Conversion/Passes.h.inc"

/// Patterns that expand cake.silu and cake.silu_derivative for NVVM.
void populateCakeMathToNVVMPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "cake/Conversion/Passes.h.inc"

} // namespace cake
} // namespace mlir

#endif // CAKE_CONVERSION_PASSES_H
