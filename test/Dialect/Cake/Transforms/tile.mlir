// RUN: cake-opt %s --split-input-file --cake-tile | FileCheck %s
// RUN: cake-opt %s --split-input-file --cake-tile="tile-tokens=32 vector-channels=4 rows-ahead=4" | FileCheck %s --check-prefix=OPTS

// The forward becomes one forall over (chunk, group) pairs, groups fastest.
// CHECK-LABEL: func.func @fwd
// CHECK-SAME: (%[[X:.*]]: memref<?x?xbf16>, %[[W:.*]]: memref<?x4xf32>, %[[CU:.*]]: memref<?xi32>, %[[B:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?x?xbf16>)
// CHECK-DAG: %[[C:.*]] = memref.dim %[[X]], %c1
// CHECK-DAG: %[[GROUPS:.*]] = arith.divui %[[C]], %c8
// CHECK-DAG: %[[S:.*]] = memref.dim %[[X]], %c0
// CHECK-DAG: %[[CHUNKS:.*]] = arith.ceildivui %[[S]], %c64
// CHECK: %[[TILES:.*]] = arith.muli %[[CHUNKS]], %[[GROUPS]]
// CHECK: scf.forall (%[[I:.*]]) in (%[[TILES]])
// CHECK:   %[[CHUNK:.*]] = arith.divui %[[I]], %[[GROUPS]]
// CHECK:   %[[GROUP:.*]] = arith.remui %[[I]], %[[GROUPS]]
// CHECK:   %[[ROW:.*]] = arith.muli %[[CHUNK]], %c64
// CHECK:   %[[COL:.*]] = arith.muli %[[GROUP]], %c8
// CHECK:   cake.fwd_tile %[[X]], %[[W]], %[[CU]] bias %[[B]] : memref<?xf32> into %[[Y]] at[%[[ROW]], %[[COL]]] {activation = #cake.activation<silu>, rows_ahead = 8 : i64, tile_tokens = 64 : i64, vector_channels = 8 : i64, width = 4 : i64}
// CHECK-NOT: cake.conv1d_fwd
// OPTS-LABEL: func.func @fwd
// OPTS: cake.fwd_tile {{.*}} {activation = #cake.activation<silu>, rows_ahead = 4 : i64, tile_tokens = 32 : i64, vector_channels = 4 : i64, width = 4 : i64}
func.func @fwd(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>,
               %b: memref<?xf32>, %y: memref<?x?xbf16>) {
  cake.conv1d_fwd %x, %w, %cu bias %b : memref<?xf32> into %y
      {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// An op's own tiling wins over the pass options.
// CHECK-LABEL: func.func @own_tiling
// CHECK: cake.fwd_tile {{.*}} {activation = #cake.activation<none>, rows_ahead = 2 : i64, tile_tokens = 16 : i64, vector_channels = 2 : i64, width = 2 : i64}
// OPTS-LABEL: func.func @own_tiling
// OPTS: rows_ahead = 2 : i64, tile_tokens = 16 : i64, vector_channels = 2 : i64
func.func @own_tiling(%x: memref<?x?xbf16>, %w: memref<?x2xbf16>, %cu: memref<?xi32>, %y: memref<?x?xbf16>) {
  cake.conv1d_fwd %x, %w, %cu into %y
      {activation = #cake.activation<none>, width = 2 : i64,
       tiling = #cake.tiling<tile_tokens = 16, vector_channels = 2, rows_ahead = 2>}
      : memref<?x?xbf16>, memref<?x2xbf16>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// The backward becomes a forall over (partial row, group) of fused tiles,
// then a forall over gradient columns, each summing its column in row order.
// CHECK-LABEL: func.func @bwd
// CHECK-SAME: %[[DW:[a-z0-9]+]]: memref<?x4xf32>, %[[DB:[a-z0-9]+]]: memref<?xf32>, %[[P:[a-z0-9]+]]: memref<?x?xf32>)
// CHECK: %[[ROWS:.*]] = memref.dim %[[P]], %c0
// CHECK: scf.forall (%[[R:.*]], %[[G:.*]]) in (%[[ROWS]], %{{.*}})
// CHECK:   %[[COL:.*]] = arith.muli %[[G]], %c8
// CHECK:   cake.bwd_tile {{.*}} into %{{.*}}, %[[P]] at[%[[R]], %[[COL]]] {activation = #cake.activation<silu>, rows_ahead = 8 : i64, silu_grad = #cake.silu_grad<bf16>, tile_tokens = 64 : i64, vector_channels = 8 : i64, width = 4 : i64}
// CHECK: %[[C:.*]] = memref.dim %[[DW]], %c0
// CHECK: %[[WCOLS:.*]] = arith.muli %[[C]], %c4
// CHECK: %[[COLS:.*]] = arith.addi %[[WCOLS]], %[[C]]
// CHECK: scf.forall (%[[J:.*]]) in (%[[COLS]])
// CHECK:   %[[SUM:.*]] = scf.for %[[ROW:.*]] = %c0 to %{{.*}} step %c1 iter_args(%[[ACC:.*]] = %cst) -> (f32)
// CHECK:     %[[PART:.*]] = memref.load %[[P]][%[[ROW]], %[[J]]]
// CHECK:     arith.addf %[[ACC]], %[[PART]]
// CHECK:   %[[IS_W:.*]] = arith.cmpi ult, %[[J]], %[[WCOLS]]
// CHECK:   scf.if %[[IS_W]]
// CHECK:     memref.store %[[SUM]], %[[DW]]
// CHECK:   } else {
// CHECK:     %[[K:.*]] = arith.subi %[[J]], %[[WCOLS]]
// CHECK:     memref.store %[[SUM]], %[[DB]][%[[K]]]
// CHECK-NOT: cake.conv1d_bwd
// CHECK-NOT: cake.partials_reduce
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

// f64 partial sums are rounded to the gradient's type once, after the sum.
// CHECK-LABEL: func.func @reduce_f64
// CHECK: %[[SUM:.*]] = scf.for {{.*}} -> (f64)
// CHECK: %[[ROUNDED:.*]] = arith.truncf %[[SUM]] : f64 to bf16
// CHECK: memref.store %[[ROUNDED]]
func.func @reduce_f64(%p: memref<?x?xf64>, %dw: memref<?x4xbf16>) {
  cake.partials_reduce %p into %dw : memref<?x?xf64> -> memref<?x4xbf16>
  return
}
