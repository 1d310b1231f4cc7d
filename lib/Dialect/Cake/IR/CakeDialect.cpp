//===- CakeDialect.cpp - The cake dialect ---------------------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file registers the cake dialect's attributes and operations.
//
//===----------------------------------------------------------------------===//

#include "cake/Dialect/Cake/IR/CakeDialect.h"
#include "cake/Dialect/Cake/IR/CakeOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cake;

#include "cake/Dialect/Cake/IR/CakeDialect.cpp.inc"
#include "cake/Dialect/Cake/IR/CakeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "cake/Dialect/Cake/IR/CakeAttrs.cpp.inc"

LogicalResult
TilingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                   int64_t tileTokens, int64_t vectorChannels,
                   int64_t rowsAhead) {
  if (tileTokens <= 0 || rowsAhead <= 0 || tileTokens % rowsAhead != 0)
    return emitError() << "tile_tokens (" << tileTokens
                       << ") must be a positive multiple of rows_ahead ("
                       << rowsAhead << ")";
  if (vectorChannels <= 0 || !llvm::isPowerOf2_64(vectorChannels))
    return emitError() << "vector_channels (" << vectorChannels
                       << ") must be a power of two";
  return success();
}

void CakeDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "cake/Dialect/Cake/IR/CakeAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "cake/Dialect/Cake/IR/CakeOps.cpp.inc"
      >();
}
