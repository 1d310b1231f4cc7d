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

LogicalResult TilingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t vectorChannels, int64_t blockThreads,
                                 int64_t stages, int64_t unroll,
                                 int64_t maxRegisters, int64_t waves,
                                 int64_t maxPartTokens) {
  if (vectorChannels <= 0 || vectorChannels > 16 ||
      !llvm::isPowerOf2_64(vectorChannels))
    return emitError() << "vector_channels (" << vectorChannels
                       << ") must be a power of two up to 16";
  if (blockThreads <= 0 || blockThreads > 1024 || blockThreads % 32 != 0)
    return emitError() << "block_threads (" << blockThreads
                       << ") must be a multiple of 32 up to 1024";
  if (stages < 0)
    return emitError() << "stages (" << stages << ") must not be negative";
  if (unroll <= 0)
    return emitError() << "unroll (" << unroll << ") must be positive";
  // 255 is what a thread can address; ptxas needs a few for itself.
  if (maxRegisters != 0 && (maxRegisters < 16 || maxRegisters > 255))
    return emitError() << "max_registers (" << maxRegisters
                       << ") must be 0 (no cap) or from 16 to 255";
  if (waves <= 0)
    return emitError() << "waves (" << waves << ") must be positive";
  if (maxPartTokens < 0)
    return emitError() << "max_part_tokens (" << maxPartTokens
                       << ") must not be negative";
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
