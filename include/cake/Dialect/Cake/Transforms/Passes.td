//===- Passes.td - Passes of the cake dialect --------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_DIALECT_CAKE_TRANSFORMS_PASSES_TD
#define CAKE_DIALECT_CAKE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def CakeTilePass : Pass<"cake-tile"> {
  let summary = "Split the cake ops into fused per-thread tiles";
  let description = [{
    Rewrites each op-level cake op into an `scf.forall` over tiles:

    - `cake.conv1d_fwd` becomes a one-dimensional forall over
      (token chunk, channel group) pairs, channel groups fastest, of
      `cake.fwd_tile`. One dimension, so that a block of threads can span
      several chunks when C is small.
    - `cake.conv1d_bwd` becomes a forall over (partial row, channel group) of
      `cake.bwd_tile`, followed by `cake.partials_reduce`. The number of partial
      rows is the first extent of `partials`: the caller picks it to fill the
      machine, and it fixes the summation order of the weight gradient.
    - `cake.partials_reduce` becomes a forall over gradient columns, each
      summing its column over the rows in order.

    The tile shape and pipelining depth come from the pass options, unless the
    op carries its own `#cake.tiling<...>`.

    Before:
    ```mlir
    cake.conv1d_fwd %x, %w, %cu into %y {activation = #cake.activation<silu>, width = 4 : i64} : ...
    ```
    After:
    ```mlir
    scf.forall (%i) in (%tiles) {
      cake.fwd_tile %x, %w, %cu into %y at [%row, %col]
          {..., tile_tokens = 64 : i64, vector_channels = 8 : i64} : ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
  let options = [
    Option<"tileTokens", "tile-tokens", "int64_t", /*default=*/"64",
           "Tokens one thread walks per tile">,
    Option<"vectorChannels", "vector-channels", "int64_t", /*default=*/"8",
           "Channels one thread owns (8 bf16 = one 16-byte vector)">,
    Option<"rowsAhead", "rows-ahead", "int64_t", /*default=*/"8",
           "Rows whose loads are in flight while a row computes">,
  ];
}

def CakeMapToGPUPass : Pass<"cake-map-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Turn each tiled function into GPU kernels";
  let description = [{
    Each `func.func` whose work is `scf.forall` loops becomes kernels in the
    `gpu.module @cake_kernels`: one `gpu.func` per forall, named after the
    function (`<name>`, then `<name>_1`, ... when there are several), taking the
    function's arguments that it uses, with their argument attributes. The function itself is removed: launching is the
    runtime's job.

    Loop indices map to threads: the last forall dimension to
    `block_id.y * block-threads + thread_id.x` (`block_id.x` for a
    one-dimensional forall), the first of two dimensions to `block_id.x`;
    threads past the bounds do nothing.

    Consecutive kernels of one function form a programmatic dependent launch
    chain: a kernel with a successor lets it launch early
    (`griddepcontrol.launch_dependents`), a kernel with a predecessor waits for
    it to complete before its first instruction (`griddepcontrol.wait`).
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
  let options = [
    Option<"blockThreads", "block-threads", "int64_t", /*default=*/"128",
           "Threads per block">,
  ];
}

def CakeLowerTilesPass : Pass<"cake-lower-tiles"> {
  let summary = "Expand cake tiles into loops over registers";
  let description = [{
    Expands `cake.fwd_tile` and `cake.bwd_tile` into the code one thread runs:
    weights and bias in registers, 16-byte vector loads and stores of
    `vector_channels` channels, a sliding window of the last `width - 1` rows in
    registers, document boundaries found in `cu_seqlens` by binary search at the
    start of a chunk and tracked row by row after, and loads issued
    `rows_ahead` rows before their use. Indices are `index` (64-bit on the GPU),
    so S * C past 2^31 works; every access stays inside its buffer whatever
    `cu_seqlens` holds.

    With `fast-math`, the sigmoid is `rcp.approx(1 + ex2.approx(-x * log2 e))`
    (four instructions); without it, and always under `silu_grad` fp32, the
    reciprocal is refined by a Newton step. No libdevice call is emitted.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::NVVM::NVVMDialect"];
  let options = [
    Option<"fastMath", "fast-math", "bool", /*default=*/"true",
           "Approximate exp2 and reciprocal in the sigmoid">,
  ];
}

#endif // CAKE_DIALECT_CAKE_TRANSFORMS_PASSES_TD
