//===- CakeDialect.h - The cake dialect -------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_DIALECT_CAKE_IR_CAKEDIALECT_H
#define CAKE_DIALECT_CAKE_IR_CAKEDIALECT_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dialect.h"

#include "cake/Dialect/Cake/IR/CakeDialect.h.inc"

namespace mlir::cake {
/// The tiling of a cake op without `#cake.tiling`: the defaults of cake-tile's
/// options and of the pipelines', written here only.
struct DefaultTiling {
  static constexpr int64_t vectorChannels = 8;
  static constexpr int64_t blockThreads = 128;
  static constexpr int64_t stages = 4;
  static constexpr int64_t unroll = 4;
  /// Independent running sums per column of the weight-gradient reduction:
  /// as many loads in flight per thread.
  static constexpr int64_t reduceChains = 8;
  /// Threads that share one column of the reduction on a GPU, each summing
  /// every `reduceSlices`-th row: more loads in flight on more of the GPU
  /// (cake-tile itself defaults to one, which every target can run).
  static constexpr int64_t reduceSlices = 4;
};
} // namespace mlir::cake

#endif // CAKE_DIALECT_CAKE_IR_CAKEDIALECT_H
