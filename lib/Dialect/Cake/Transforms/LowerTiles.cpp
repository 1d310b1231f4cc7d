//===- LowerTiles.cpp - Expand cake tiles into loops over registers -------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the cake-lower-tiles pass. The patterns themselves are
// in LowerFwdTile.cpp and LowerBwdTile.cpp.
//
//===----------------------------------------------------------------------===//

#include "LowerTiles.h"

#include "cake/Dialect/Cake/IR/CakeOps.h"
#include "cake/Dialect/Cake/Transforms/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::cake {
#define GEN_PASS_DEF_CAKELOWERTILESPASS
#include "cake/Dialect/Cake/Transforms/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

void mlir::cake::populateCakeLowerTilesPatterns(RewritePatternSet &patterns,
                                                bool fastMath) {
  populateLowerFwdTilePatterns(patterns, fastMath);
  populateLowerBwdTilePatterns(patterns, fastMath);
}

namespace {
struct CakeLowerTilesPass : cake::impl::CakeLowerTilesPassBase<CakeLowerTilesPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateCakeLowerTilesPatterns(patterns, fastMath);
    // The expansion is big; folding it as it is built would only slow the
    // driver down. Canonicalization runs after.
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      signalPassFailure();
  }
};
} // namespace
