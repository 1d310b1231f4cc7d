//===- CakeOps.h - Operations of the cake dialect ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_DIALECT_CAKE_IR_CAKEOPS_H
#define CAKE_DIALECT_CAKE_IR_CAKEOPS_H

#include "cake/Dialect/Cake/IR/CakeDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "cake/Dialect/Cake/IR/CakeEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "cake/Dialect/Cake/IR/CakeAttrs.h.inc"

#define GET_OP_CLASSES
#include "cake/Dialect/Cake/IR/CakeOps.h.inc"

namespace mlir::cake {
/// The element type of a backward's partial rows under SiLU' policy
/// `siluGrad`: f32 for bf16, f64 for fp32 (SPEC.md's accumulators).
Type partialsElementType(MLIRContext *context, SiluGrad siluGrad);
} // namespace mlir::cake

#endif // CAKE_DIALECT_CAKE_IR_CAKEOPS_H
