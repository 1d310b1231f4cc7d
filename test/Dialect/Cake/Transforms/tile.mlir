// RUN: cake-opt %s --split-input-file --cake-tile | FileCheck %s
// RUN: cake-opt %s --split-input-file --cake-tile="vector-channels=4 block-threads=256 stages=2 unroll=4 waves=8 max-part-tokens=18" | FileCheck %s --check-prefix=OPTS
// RUN: cake-opt %s --split-input-file --cake-tile="reduce-chains=32" | FileCheck %s --check-prefix=CHAINS
// RUN: cake-opt %s --split-input-file --cake-tile="reduce-slices=8 reduce-chains=2" | FileCheck %s --check-prefix=SLICES

// The forward becomes one forall over (part, group) pairs, groups fastest;
// part p covers the tokens [p * S / parts, (p + 1) * S / parts), and its
// groups, consecutive iterations, share those rows (shared_by).
// CHECK-LABEL: func.func @fwd
// CHECK-SAME: (%[[X:.*]]: memref<?x?xbf16>, %[[W:.*]]: memref<?x4xf32>, %[[CU:.*]]: memref<?xi32>, %[[B:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?x?xbf16>, %[[PARTS:.*]]: index)
// CHECK-DAG: %[[C:.*]] = memref.dim %[[X]], %c1
// CHECK-DAG: %[[GROUPS:.*]] = arith.divui %[[C]], %c8
// CHECK-DAG: %[[S:.*]] = memref.dim %[[X]], %c0
// CHECK: %[[TILES:.*]] = arith.muli %[[PARTS]], %[[GROUPS]]
// CHECK: scf.forall (%[[I:.*]]) in (%[[TILES]])
// CHECK:   %[[PART:.*]] = arith.divui %[[I]], %[[GROUPS]]
// CHECK:   %[[GROUP:.*]] = arith.remui %[[I]], %[[GROUPS]]
// CHECK:   %[[COL:.*]] = arith.muli %[[GROUP]], %c8
// CHECK:   %[[LO:.*]] = arith.muli %[[PART]], %[[S]]
// CHECK:   %[[FIRST:.*]] = arith.divui %[[LO]], %[[PARTS]]
// CHECK:   %[[NEXT:.*]] = arith.addi %[[PART]], %c1
// CHECK:   %[[HI:.*]] = arith.muli %[[NEXT]], %[[S]]
// CHECK:   %[[END:.*]] = arith.divui %[[HI]], %[[PARTS]]
// CHECK:   cake.fwd_tile %[[X]], %[[W]], %[[CU]] bias %[[B]] : memref<?xf32> into %[[Y]] rows[%[[FIRST]], %[[END]]) shared_by %[[GROUPS]] col %[[COL]] {activation = #cake.activation<silu>, tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 4>, width = 4 : i64}
// CHECK-NOT: cake.conv1d_fwd
// OPTS-LABEL: func.func @fwd
// OPTS: cake.fwd_tile {{.*}} tiling = #cake.tiling<vector_channels = 4, block_threads = 256, stages = 2, unroll = 4, waves = 8, max_part_tokens = 18>
func.func @fwd(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>,
               %b: memref<?xf32>, %y: memref<?x?xbf16>, %parts: index) {
  cake.conv1d_fwd %x, %w, %cu bias %b : memref<?xf32> into %y parts %parts
      {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// An op's own tiling wins over the pass options.
// CHECK-LABEL: func.func @own_tiling
// CHECK: cake.fwd_tile {{.*}} {activation = #cake.activation<none>, tiling = #cake.tiling<vector_channels = 2, block_threads = 32, stages = 0, unroll = 1>, width = 2 : i64}
// OPTS-LABEL: func.func @own_tiling
// OPTS: tiling = #cake.tiling<vector_channels = 2, block_threads = 32, stages = 0, unroll = 1>
func.func @own_tiling(%x: memref<?x?xbf16>, %w: memref<?x2xbf16>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %parts: index) {
  cake.conv1d_fwd %x, %w, %cu into %y parts %parts
      {activation = #cake.activation<none>, width = 2 : i64,
       tiling = #cake.tiling<vector_channels = 2, block_threads = 32, stages = 0, unroll = 1>}
      : memref<?x?xbf16>, memref<?x2xbf16>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// The backward: the same forall of fused tiles with one part per partial row,
// then a forall over gradient columns; each sums its column in one fixed
// order: eight interleaved running sums, combined pairwise, then the rows left.
// CHECK-LABEL: func.func @bwd
// CHECK-SAME: %[[DW:[a-z0-9]+]]: memref<?x4xf32>, %[[DB:[a-z0-9]+]]: memref<?xf32>, %[[P:[a-z0-9]+]]: memref<?x?xf32>)
// CHECK: %[[PARTS:.*]] = memref.dim %[[P]], %c0
// CHECK: %[[TILES:.*]] = arith.muli %[[PARTS]], %{{.*}}
// CHECK: scf.forall (%[[I:.*]]) in (%[[TILES]])
// CHECK:   %[[PART:.*]] = arith.divui %[[I]], %{{.*}}
// CHECK:   cake.bwd_tile {{.*}} into %{{.*}}, %[[P]] rows[%{{.*}}, %{{.*}}) col %{{.*}} part %[[PART]] {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 4>, width = 4 : i64}
// CHECK: %[[C:.*]] = memref.dim %[[DW]], %c0
// CHECK: %[[WCOLS:.*]] = arith.muli %[[C]], %c4
// CHECK: %[[COLS:.*]] = arith.addi %[[WCOLS]], %[[C]]
// CHECK: scf.forall (%[[J:.*]]) in (%[[COLS]])
// CHECK:   %[[ROWS:.*]] = memref.dim %[[P]], %c0
// CHECK:   %[[OCTETS:.*]] = arith.divui %[[ROWS]], %c8
// CHECK:   %[[BLOCKED:.*]] = arith.muli %[[OCTETS]], %c8
// CHECK:   %[[S:.*]]:8 = scf.for %[[R:.*]] = %c0 to %[[BLOCKED]] step %c8 iter_args(%[[A0:[a-z0-9]+]] = %cst, {{.*}})
// CHECK:     %[[P0:.*]] = memref.load %[[P]][%[[R]], %[[J]]]
// CHECK:     arith.addf %[[A0]], %[[P0]]
// CHECK-DAG: %[[S01:.*]] = arith.addf %[[S]]#0, %[[S]]#1
// CHECK-DAG: %[[S23:.*]] = arith.addf %[[S]]#2, %[[S]]#3
// CHECK-DAG: %[[S45:.*]] = arith.addf %[[S]]#4, %[[S]]#5
// CHECK-DAG: %[[S67:.*]] = arith.addf %[[S]]#6, %[[S]]#7
// CHECK-DAG: %[[S0123:.*]] = arith.addf %[[S01]], %[[S23]]
// CHECK-DAG: %[[S4567:.*]] = arith.addf %[[S45]], %[[S67]]
// CHECK:   %[[ALL:.*]] = arith.addf %[[S0123]], %[[S4567]]
// CHECK:   %[[SUM:.*]] = scf.for %{{.*}} = %[[BLOCKED]] to %[[ROWS]] step %c1 iter_args(%{{.*}} = %[[ALL]])
// CHECK:   %[[IS_W:.*]] = arith.cmpi ult, %[[J]], %[[WCOLS]]
// CHECK:   scf.if %[[IS_W]]
// CHECK:     memref.store %[[SUM]], %[[DW]]
// CHECK:   } else {
// CHECK:     %[[K:.*]] = arith.subi %[[J]], %[[WCOLS]]
// CHECK:     memref.store %[[SUM]], %[[DB]][%[[K]]]
// CHECK-NOT: cake.conv1d_bwd
// CHECK-NOT: cake.partials_reduce
// The pass's longest part is the forward's: a backward's parts stay bounded.
// OPTS-LABEL: func.func @bwd
// OPTS: cake.bwd_tile {{.*}} tiling = #cake.tiling<vector_channels = 4, block_threads = 256, stages = 2, unroll = 4, waves = 8>,
func.func @bwd(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
               %b: memref<?xf32>, %dx: memref<?x?xbf16>, %dw: memref<?x4xf32>, %db: memref<?xf32>,
               %p: memref<?x?xf32>) {
  cake.conv1d_bwd %x, %w, %cu, %dy bias %b : memref<?xf32> into %dx, %dw, %db : memref<?xf32> partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x4xf32>, memref<?x?xf32>
  return
}

// -----

// reduce-chains sets the running sums per column (loads in flight), still
// combined pairwise in a fixed order.
// CHAINS-LABEL: func.func @reduce_f64
// CHAINS: %[[S:.*]]:32 = scf.for %{{.*}} = %c0 to %{{.*}} step %c32 iter_args
// CHAINS-COUNT-32: memref.load
// CHAINS: scf.yield
// CHAINS-COUNT-31: arith.addf %{{.*}}, %{{.*}} : f64
// CHAINS: scf.for %{{.*}} step %c1

// reduce-slices: 8 consecutive iterations share a column, in whole subgroups
// of 32; slice s sums rows s, s + 8, ...; cake.lane_sum adds the slices' sums
// and slice 0 stores them. Iterations past the last column read column 0 and
// store nothing.
// SLICES-LABEL: func.func @reduce_f64
// SLICES: %[[C:.*]] = memref.dim %{{.*}}, %c0
// SLICES: %[[COLS:.*]] = arith.muli %[[C]], %c4
// SLICES: %[[ITEMS:.*]] = arith.muli %[[COLS]], %c8
// SLICES: %[[WARPS:.*]] = arith.ceildivui %[[ITEMS]], %c32
// SLICES: %[[EXTENT:.*]] = arith.muli %[[WARPS]], %c32
// SLICES: scf.forall (%[[I:.*]]) in (%[[EXTENT]])
// SLICES-DAG: %[[COL:.*]] = arith.divui %[[I]], %c8
// SLICES-DAG: %[[SLICE:.*]] = arith.remui %[[I]], %c8
// SLICES-DAG: %[[IN:.*]] = arith.cmpi ult, %[[COL]], %[[COLS]]
// SLICES-DAG: %[[READ:.*]] = arith.select %[[IN]], %[[COL]], %c0
// SLICES-DAG: %[[ROWS:.*]] = memref.dim %[[P:.*]], %c0
// SLICES: %[[ROWS7:.*]] = arith.addi %[[ROWS]], %c7
// SLICES: %[[LEFT:.*]] = arith.subi %[[ROWS7]], %[[SLICE]]
// SLICES: %[[COUNT:.*]] = arith.divui %[[LEFT]], %c8
// SLICES: scf.for %[[Q:.*]] = %c0 to %{{.*}} step %c2
// SLICES: %[[Q8:.*]] = arith.muli %[[Q]], %c8
// SLICES: %[[ROW:.*]] = arith.addi %[[SLICE]], %[[Q8]]
// SLICES: memref.load %[[P]][%[[ROW]], %[[READ]]]
// SLICES: %[[MINE:.*]] = scf.for %{{.*}} to %[[COUNT]] step %c1
// SLICES: %[[SUM:.*]] = cake.lane_sum %[[MINE]] lanes 8 : f64
// SLICES: %[[FIRST:.*]] = arith.cmpi eq, %[[SLICE]], %c0
// SLICES: %[[STORES:.*]] = arith.andi %[[IN]], %[[FIRST]]
// SLICES: scf.if %[[STORES]]
// SLICES: arith.truncf %[[SUM]] : f64 to bf16

// f64 partial sums are rounded to the gradient's type once, after the sum.
// CHECK-LABEL: func.func @reduce_f64
// CHECK: %[[SUM:.*]] = scf.for {{.*}} -> (f64)
// CHECK: %[[ROUNDED:.*]] = arith.truncf %[[SUM]] : f64 to bf16
// CHECK: memref.store %[[ROUNDED]]
func.func @reduce_f64(%p: memref<?x?xf64>, %dw: memref<?x4xbf16>) {
  cake.partials_reduce %p into %dw : memref<?x?xf64> -> memref<?x4xbf16>
  return
}
