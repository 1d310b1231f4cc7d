//===- UnrollRows.cpp - Unroll row loops ----------------------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the cake-unroll-rows pass (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "cake/Dialect/Cake/Transforms/Passes.h"

#include "mlir/Dialect/SCF/Utils/Utils.h"

namespace mlir::cake {
#define GEN_PASS_DEF_CAKEUNROLLROWSPASS
#include "cake/Dialect/Cake/Transforms/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

namespace {
struct CakeUnrollRowsPass
    : cake::impl::CakeUnrollRowsPassBase<CakeUnrollRowsPass> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> rowLoops;
    getOperation()->walk([&](scf::ForOp loop) {
      auto tiling = loop->getAttrOfType<TilingAttr>(kRowLoopAttrName);
      if (tiling && tiling.getUnroll() > 1)
        rowLoops.push_back(loop);
    });
    for (scf::ForOp loop : rowLoops) {
      auto tiling = loop->getAttrOfType<TilingAttr>(kRowLoopAttrName);
      if (failed(loopUnrollByFactor(loop, tiling.getUnroll()))) {
        loop.emitError("cake-unroll-rows: cannot unroll the row loop");
        return signalPassFailure();
      }
    }
  }
};
} // namespace
