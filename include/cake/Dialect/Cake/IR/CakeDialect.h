//===- CakeDialect.h - The cake dialect -------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_DIALECT_CAKE_IR_CAKEDIALECT_H
#define CAKE_DIALECT_CAKE_IR_CAKEDIALECT_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dialect.h"

#include "cake/Dialect/Cake/IR/CakeDialect.h.inc"

#endif // CAKE_DIALECT_CAKE_IR_CAKEDIALECT_H
