//===- ExpandTiles.cpp - Expand cake tiles into row loops -----------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the cake-expand-tiles pass and the loop builders its
// patterns share. The patterns are in ExpandFwdTile.cpp and ExpandBwdTile.cpp.
//
//===----------------------------------------------------------------------===//

#include "ExpandTiles.h"

#include "cake/Dialect/Cake/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::cake {
#define GEN_PASS_DEF_CAKEEXPANDTILESPASS
#include "cake/Dialect/Cake/Transforms/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

ValueRange mlir::cake::buildRowLoop(OpBuilder &b, Location loc, Value first,
                                    Value end, ValueRange init,
                                    TilingAttr tiling, RowBodyFn body) {
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(
      b, loc, first, end, one, init,
      [&](OpBuilder &nested, Location loc, Value token, ValueRange state) {
        scf::YieldOp::create(nested, loc, body(nested, token, state));
      });
  loop->setAttr(kRowLoopAttrName, tiling);
  return loop.getResults();
}

ValueRange mlir::cake::buildBranches(
    OpBuilder &b, Location loc, Value condition,
    function_ref<SmallVector<Value>()> thenBody,
    function_ref<SmallVector<Value>()> elseBody) {
  auto branch = scf::IfOp::create(
      b, loc, condition,
      [&](OpBuilder &nested, Location loc) {
        scf::YieldOp::create(nested, loc, thenBody());
      },
      [&](OpBuilder &nested, Location loc) {
        scf::YieldOp::create(nested, loc, elseBody());
      });
  return branch.getResults();
}

ValueRange mlir::cake::buildSwitch(
    OpBuilder &b, Location loc, Value selector, TypeRange types,
    ArrayRef<int64_t> cases,
    function_ref<SmallVector<Value>(std::optional<int64_t>)> body) {
  auto switchOp =
      scf::IndexSwitchOp::create(b, loc, types, selector, cases, cases.size());
  OpBuilder::InsertionGuard guard(b);
  auto fill = [&](Region &region, std::optional<int64_t> value) {
    b.setInsertionPointToStart(&region.emplaceBlock());
    SmallVector<Value> results = body(value);
    scf::YieldOp::create(b, loc, results);
  };
  for (auto [region, value] : llvm::zip_equal(switchOp.getCaseRegions(), cases))
    fill(region, value);
  fill(switchOp.getDefaultRegion(), std::nullopt);
  return switchOp.getResults();
}

namespace {
struct CakeExpandTilesPass
    : cake::impl::CakeExpandTilesPassBase<CakeExpandTilesPass> {
  using Base::Base;

  void runOnOperation() override {
    if (searchFanout < 2 || !llvm::isPowerOf2_64(searchFanout)) {
      getOperation()->emitError("cake-expand-tiles: search-fanout must be a "
                                "power of two from 2, got ")
          << int64_t(searchFanout);
      return signalPassFailure();
    }
    if (subgroupSearchProbes < 0 ||
        (subgroupSearchProbes > 0 &&
         !llvm::isPowerOf2_64(subgroupSearchProbes))) {
      getOperation()->emitError("cake-expand-tiles: subgroup-search-probes "
                                "must be 0 or a power of two, got ")
          << int64_t(subgroupSearchProbes);
      return signalPassFailure();
    }
    TileExpansionOptions options{fastMath, searchFanout, subgroupSearchProbes};
    RewritePatternSet patterns(&getContext());
    populateExpandFwdTilePatterns(patterns, options);
    populateExpandBwdTilePatterns(patterns, options);
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
