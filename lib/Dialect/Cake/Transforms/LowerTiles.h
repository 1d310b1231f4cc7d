//===- LowerTiles.h - Patterns of cake-lower-tiles --------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_LIB_DIALECT_CAKE_TRANSFORMS_LOWERTILES_H
#define CAKE_LIB_DIALECT_CAKE_TRANSFORMS_LOWERTILES_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::cake {

void populateLowerFwdTilePatterns(RewritePatternSet &patterns, bool fastMath);
void populateLowerBwdTilePatterns(RewritePatternSet &patterns, bool fastMath);

} // namespace mlir::cake

#endif // CAKE_LIB_DIALECT_CAKE_TRANSFORMS_LOWERTILES_H
