//===- ExpandTiles.h - Patterns of cake-expand-tiles ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_LIB_DIALECT_CAKE_TRANSFORMS_EXPANDTILES_H
#define CAKE_LIB_DIALECT_CAKE_TRANSFORMS_EXPANDTILES_H

#include "cake/Dialect/Cake/IR/CakeOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::cake {

/// What cake-expand-tiles' options choose in each expansion.
struct TileExpansionOptions {
  bool fastMath;
  /// The pieces a step of the document search splits its range into.
  int64_t searchFanout;
  /// Entries each lane reads a step of a subgroup's shared search; 0: none.
  int64_t subgroupSearchProbes;
};

void populateExpandFwdTilePatterns(RewritePatternSet &patterns,
                                   TileExpansionOptions options);
void populateExpandBwdTilePatterns(RewritePatternSet &patterns,
                                   TileExpansionOptions options);

/// The body of a row loop: given the token and the loop-carried values,
/// returns the values carried to the next token.
using RowBodyFn = function_ref<SmallVector<Value>(OpBuilder &, Value token,
                                                  ValueRange state)>;

/// Builds `scf.for %token = first to end step 1` carrying `init`, marked as a
/// row loop of `tiling` (see cake-stage-rows), and returns its results.
ValueRange buildRowLoop(OpBuilder &b, Location loc, Value first, Value end,
                        ValueRange init, TilingAttr tiling, RowBodyFn body);

/// `scf.if condition` whose branches yield what `thenBody` and `elseBody`
/// return (values of the same types); returns its results.
ValueRange buildBranches(OpBuilder &b, Location loc, Value condition,
                         function_ref<SmallVector<Value>()> thenBody,
                         function_ref<SmallVector<Value>()> elseBody);

/// `scf.index_switch selector` with a region for each of `cases` and a
/// default, each yielding what `body` returns for its case (std::nullopt for
/// the default) as values of `types`; returns its results.
ValueRange
buildSwitch(OpBuilder &b, Location loc, Value selector, TypeRange types,
            ArrayRef<int64_t> cases,
            function_ref<SmallVector<Value>(std::optional<int64_t>)> body);

} // namespace mlir::cake

#endif // CAKE_LIB_DIALECT_CAKE_TRANSFORMS_EXPANDTILES_H
