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
      (part, channel group) pairs, channel groups fastest, of `cake.fwd_tile`:
      part `p` of `parts` covers the tokens `[p * S / parts, (p + 1) * S /
      parts)`. One dimension, so that a block of threads can span several
      parts when C is small.
    - `cake.conv1d_bwd` becomes the same forall of `cake.bwd_tile`, with one
      part per row of `partials`, followed by `cake.partials_reduce`. The
      number of partial rows fixes the summation order of the weight gradient.
    - `cake.partials_reduce` becomes a forall over gradient columns, each
      summing its column over the rows in one fixed order. With
      `reduce-slices` N > 1, N consecutive iterations share a column: each
      sums every N-th row, and `cake.lane_sum` adds their sums; the extent
      is rounded up to a multiple of 32 so that every subgroup is whole.

    Tiles carry the `#cake.tiling` of their op, or the one the pass options
    make.

    Before:
    ```mlir
    cake.conv1d_fwd %x, %w, %cu into %y parts %p {activation = #cake.activation<silu>, width = 4 : i64} : ...
    ```
    After:
    ```mlir
    scf.forall (%i) in (%tiles) {
      cake.fwd_tile %x, %w, %cu into %y rows [%first, %end) col %col
          {..., tiling = #cake.tiling<vector_channels = 8, ...>} : ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
  let options = [
    Option<"vectorChannels", "vector-channels", "int64_t",
           /*default=*/"::mlir::cake::DefaultTiling::vectorChannels",
           "Channels one thread owns (8 bf16 = one 16-byte vector)">,
    Option<"blockThreads", "block-threads", "int64_t",
           /*default=*/"::mlir::cake::DefaultTiling::blockThreads",
           "Threads per GPU block">,
    Option<"stages", "stages", "int64_t",
           /*default=*/"::mlir::cake::DefaultTiling::stages",
           "Row loads in flight ahead of the row being computed">,
    Option<"unroll", "unroll", "int64_t",
           /*default=*/"::mlir::cake::DefaultTiling::unroll",
           "Rows per iteration of the row loop">,
    Option<"reduceChains", "reduce-chains", "int64_t",
           /*default=*/"::mlir::cake::DefaultTiling::reduceChains",
           "Running sums per column of cake.partials_reduce (a power of "
           "two): loads in flight per thread">,
    Option<"reduceSlices", "reduce-slices", "int64_t",
           /*default=*/"1",
           "Threads per column of cake.partials_reduce (a power of two up "
           "to 32); above 1 they add their sums with cake.lane_sum, which "
           "only the GPU lowers">,
    Option<"waves", "waves", "int64_t", /*default=*/"1",
           "Parts the runtime splits S into, in waves of the device's "
           "resident threads (the tiling's waves)">,
    Option<"maxPartTokens", "max-part-tokens", "int64_t", /*default=*/"0",
           "The longest forward part where waves would make them longer "
           "(the tiling's max_part_tokens; 0: waves alone; backwards: 0)">,
  ];
}

def CakeExpandTilesPass : Pass<"cake-expand-tiles"> {
  let summary = "Expand cake tiles into row loops over vectors";
  let description = [{
    Expands `cake.fwd_tile` and `cake.bwd_tile` into the code one thread runs,
    target-independent: weights and bias in registers as vectors of the
    thread's channels, a window of the last `width - 1` rows carried by an
    `scf.for` over the tile's rows, one row an iteration, whose row loads are
    `vector.load`s at the top of the body. That loop is marked
    `cake.row_loop` with the tile's tiling, for cake-stage-rows and
    cake-unroll-rows.

    Each row takes one of two paths: rows at least `width - 1` tokens into
    their document, inside the tile, take a path with no tests; the others
    advance the document cursor (cu_seqlens is read as the walk crosses
    document starts). The cursor starts where a search puts it, each of
    whose steps reads `search-fanout - 1` entries at once, so that a tile
    waits for memory log_fanout(N) times before its first row, not
    log_2(N). Then the forward switches on the row's depth in its
    document (`scf.index_switch`: 0 .. width - 2, deeper) to the row's code
    without the taps of the rows before the start; the backward masks those
    rows with selects. The loop carries the bounds of the test-free rows next
    to the cursor, recomputed only when the cursor moves, so a row tests two
    bounds. In the backward, rows past the tile (they complete its last dx)
    skip the weight-gradient terms by a branch. Tokens are i32 (cu_seqlens
    holds them); a row's offset, token times C, is `index`, so S * C past
    2^31 works, and every access stays inside its buffer whatever
    `cu_seqlens` holds.

    With `subgroup-search-probes` P > 0, a forward tile in a GPU kernel
    whose 32-lane subgroups share its rows (`shared_by` a multiple of 32, the
    block a whole number of subgroups: consecutive iterations are consecutive
    lanes, as convert-cake-to-gpu maps them) searches together with its
    subgroup: each step, every lane reads P entries, and one subgroup sum
    (`gpu.subgroup_reduce`) counts those at or below the token, a step of
    32 * P pieces; two shuffles bring the new bounds' entries. Where
    `shared_by` is not a multiple of 32 at run time, each thread searches
    alone as above. The subgroup's search waits for memory
    log_(32 P)(N) times: 3 times for 16384 documents at P = 1, against 5 for
    an 8-piece search.

    The activation is `cake.silu` (and `cake.silu_derivative` in the
    backward), `approx` with `fast-math`, except under `silu_grad` fp32.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
  let options = [
    Option<"fastMath", "fast-math", "bool", /*default=*/"true",
           "Let the activation use hardware approximations of exp2 and 1/x">,
    Option<"searchFanout", "search-fanout", "int64_t", /*default=*/"8",
           "Pieces each step of a tile's search in cu_seqlens splits its "
           "range into (a power of two; 2: binary search): it reads "
           "search-fanout - 1 entries at once">,
    Option<"subgroupSearchProbes", "subgroup-search-probes", "int64_t",
           /*default=*/"0",
           "Entries each lane reads a step where a subgroup's forward tiles "
           "search cu_seqlens together (a power of two; 0: every thread "
           "searches alone)">,
  ];
}

def CakeStageRowsPass : Pass<"cake-stage-rows", "::mlir::gpu::GPUFuncOp"> {
  let summary = "Stage the row loads of row loops through shared memory";
  let description = [{
    In each `scf.for` marked `cake.row_loop = N` (N > 0) of a GPU kernel,
    the row loads from global memory become asynchronous copies
    (`nvgpu.device_async_copy`) into a ring of N slots in workgroup memory,
    private to each thread, and the loop is software-pipelined
    (`scf::pipelineForLoop`): the copies of iteration i + N are issued after
    iteration i computes, and iteration i waits (`cp.async.wait_group N-1`)
    only for its own. N rows of loads are in flight without holding
    registers. A copy for an iteration past the loop's end has a source size
    of 0 (it reads nothing), and a load under `scf.if` with zeros otherwise
    becomes one copy of source size 0 where the condition fails. The loop
    drains the copies it issued past its end. The first N iterations' copies
    go out as early as their operands allow, ahead of the loop's other
    set-up.

    Each thread reads back only what it copied, so no barrier is needed.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def CakeUnrollRowsPass : Pass<"cake-unroll-rows"> {
  let summary = "Unroll row loops by their tiling's rows per iteration";
  let description = [{
    Unrolls each `scf.for` marked `cake.row_loop` by the tiling's `unroll`
    (upstream `loopUnrollByFactor`, which also builds the loop of the rows
    left over). After cake-stage-rows, so that each row keeps its own group of
    copies and the ring slot stays `iteration mod stages`; the unrolled loop
    carries the window and the pending sums from row to row in registers
    without moves. When the rows an iteration are a multiple of the ring's
    stages, the ring slots cake-stage-rows marked (`cake.ring_slot`) are the
    same in every iteration: they are computed once, before the loop, so that
    the ring is read and written at constant offsets. Row offsets
    `(i + c) * m` (i the loop's index, m defined outside it) become
    `i * m + c * m`, c * m computed before the loop: an iteration's rows
    share one product.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def CakeRecordAlignmentPass : Pass<"cake-record-alignment"> {
  let summary = "Record on each memref argument the alignment its accesses need";
  let description = [{
    For every memref argument of every function, finds the largest alignment
    that an access made through it (directly or through view ops) assumes:
    `vector.load`/`vector.store` their `alignment` (else the element's size,
    as the LLVM lowering assumes), `nvgpu.device_async_copy` the bytes it
    copies (cp.async needs them aligned), `memref.load`/`memref.store` the
    element's size. The tiles start every access at a multiple of that, so it
    is the alignment the argument's base address must have; the pass records
    it as the argument attribute `cake.align` (bytes, i64). Run last before the lowering to LLVM,
    once the accesses are what the kernel issues: cake-kernel-gen writes it
    into the manifest, and the runtime and the Python checks read it there.
  }];
}

#endif // CAKE_DIALECT_CAKE_TRANSFORMS_PASSES_TD
