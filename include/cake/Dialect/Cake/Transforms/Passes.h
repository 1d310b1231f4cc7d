//===- Passes.h - Passes of the cake dialect --------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_DIALECT_CAKE_TRANSFORMS_PASSES_H
#define CAKE_DIALECT_CAKE_TRANSFORMS_PASSES_H

#include "cake/Dialect/Cake/IR/CakeOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;

namespace cake {

#define GEN_PASS_DECL
#include "cake/Dialect/Cake/Transforms/Passes.h.inc"

/// Patterns that rewrite the op-level cake ops into foralls of tiles, with
/// `forwardTiling` and `backwardTiling` for ops without a `#cake.tiling`;
/// each column of a reduction is summed by `reduceSlices` threads (1, or a
/// GPU subgroup's share: see cake.lane_sum), each in `reduceChains`
/// interleaved running sums.
void populateCakeTilePatterns(RewritePatternSet &patterns,
                              TilingAttr forwardTiling,
                              TilingAttr backwardTiling, int64_t reduceChains,
                              int64_t reduceSlices);

/// Marks the `scf.for` over a tile's rows with the tile's `#cake.tiling`:
/// cake-expand-tiles unrolls it, cake-stage-rows stages its loads.
inline constexpr StringLiteral kRowLoopAttrName = "cake.row_loop";
/// Marks the op that computes a ring slot of a staged row loop: a value that
/// depends on the loop's iteration only through its number modulo the ring's
/// stages (cake-stage-rows sets it, cake-unroll-rows hoists what it marks).
inline constexpr StringLiteral kRingSlotAttrName = "cake.ring_slot";

/// The argument attribute of cake-record-alignment: the bytes a memref
/// argument's base address must be a multiple of.
inline constexpr StringLiteral kAlignAttrName = "cake.align";

#define GEN_PASS_REGISTRATION
#include "cake/Dialect/Cake/Transforms/Passes.h.inc"

} // namespace cake
} // namespace mlir

#endif // CAKE_DIALECT_CAKE_TRANSFORMS_PASSES_H
