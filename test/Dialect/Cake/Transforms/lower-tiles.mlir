// RUN: cake-opt %s --split-input-file --cake-lower-tiles | FileCheck %s
// RUN: cake-opt %s --split-input-file --cake-lower-tiles="fast-math=false" | FileCheck %s --check-prefix=EXACT

// A forward tile: 16-byte loads of 8 channels, the document found by binary
// search, a loop over groups of rows_ahead tokens, approximate sigmoid,
// 16-byte stores inside the tile only.
// CHECK-LABEL: func.func @fwd
// CHECK-SAME: (%[[X:.*]]: memref<?x?xbf16>, %[[W:.*]]: memref<?x4xf32>, %[[CU:.*]]: memref<?xi32>, %[[Y:.*]]: memref<?x?xbf16>, %[[ROW:.*]]: index, %[[COL:.*]]: index)
// CHECK: vector.load %[[W]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<?x4xf32>, vector<4xf32>
// CHECK: scf.while
// CHECK:   memref.load %[[CU]]
// CHECK: vector.load %[[X]][%{{.*}}, %[[COL]]] {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// CHECK: scf.for %[[BASE:.*]] = %[[ROW]] to %{{.*}} step %c4 iter_args(
// CHECK:   llvm.intr.fma
// CHECK:   llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK:   nvvm.rcp.approx.ftz.f
// CHECK:   %[[INSIDE:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : index
// CHECK:   scf.if %[[INSIDE]]
// CHECK:     vector.store %{{.*}}, %[[Y]][%{{.*}}, %[[COL]]] {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// CHECK-NOT: cake.fwd_tile
// EXACT-LABEL: func.func @fwd
// EXACT-NOT: ex2.approx.ftz
// EXACT: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// EXACT: %[[R:.*]] = nvvm.rcp.approx.ftz.f %[[D:.*]] : f32
// EXACT: %[[ND:.*]] = arith.negf %[[D]]
// EXACT: %[[E:.*]] = llvm.intr.fma(%[[ND]], %[[R]], %{{.*}}) : (f32, f32, f32) -> f32
// EXACT: llvm.intr.fma(%[[R]], %[[E]], %[[R]]) : (f32, f32, f32) -> f32
func.func @fwd(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>,
               %y: memref<?x?xbf16>, %row: index, %col: index) {
  cake.fwd_tile %x, %w, %cu into %y at [%row, %col]
      {activation = #cake.activation<silu>, width = 4 : i64, tile_tokens = 64 : i64,
       vector_channels = 8 : i64, rows_ahead = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// No activation: no sigmoid at all.
// CHECK-LABEL: func.func @fwd_linear
// CHECK-NOT: ex2.approx
// CHECK: vector.store
func.func @fwd_linear(%x: memref<?x?xbf16>, %w: memref<?x2xbf16>, %cu: memref<?xi32>,
                      %y: memref<?x?xbf16>, %row: index, %col: index) {
  cake.fwd_tile %x, %w, %cu into %y at [%row, %col]
      {activation = #cake.activation<none>, width = 2 : i64, tile_tokens = 8 : i64,
       vector_channels = 8 : i64, rows_ahead = 2 : i64}
      : memref<?x?xbf16>, memref<?x2xbf16>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// A backward share under fp32 SiLU': chunks part, part + R, ... with f64
// sums carried across them, the exact sigmoid even with fast-math, and the
// sums stored once as partial row `part`.
// CHECK-LABEL: func.func @bwd
// CHECK-SAME: %[[DX:[a-z0-9]+]]: memref<?x?xbf16>, %[[P:[a-z0-9]+]]: memref<?x?xf64>, %[[PART:[a-z0-9]+]]: index, %[[COL:[a-z0-9]+]]: index)
// CHECK: %[[R:.*]] = memref.dim %[[P]], %c0
// CHECK: %[[SUMS:.*]]:5 = scf.for %{{.*}} = %[[PART]] to %{{.*}} step %[[R]] iter_args({{.*}}) -> (vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>)
// CHECK:   scf.for
// CHECK-NOT: ex2.approx.ftz
// CHECK:     llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// CHECK:     nvvm.rcp.approx.ftz.f
// CHECK:     vector.store %{{.*}}, %[[DX]]
// CHECK:     arith.extf %{{.*}} : f32 to f64
// CHECK:     llvm.intr.fma({{.*}}) : (f64, f64, f64) -> f64
// CHECK: vector.store %{{.*}}, %[[P]][%[[PART]], %{{.*}}] {alignment = 16 : i64} : memref<?x?xf64>, vector<4xf64>
// CHECK: vector.store %{{.*}}, %[[P]][%[[PART]], %{{.*}}] {alignment = 16 : i64} : memref<?x?xf64>, vector<4xf64>
// CHECK-NOT: cake.bwd_tile
func.func @bwd(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
               %b: memref<?xf32>, %dx: memref<?x?xbf16>, %p: memref<?x?xf64>, %part: index, %col: index) {
  cake.bwd_tile %x, %w, %cu, %dy bias %b : memref<?xf32> into %dx, %p at [%part, %col]
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<fp32>, width = 4 : i64,
       tile_tokens = 64 : i64, vector_channels = 4 : i64, rows_ahead = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x?xf64>
  return
}

// -----

// Under bf16 SiLU' the preactivation is rounded to bf16 before the derivative,
// which is approximate, and the sums are f32.
// CHECK-LABEL: func.func @bwd_bf16
// CHECK: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
func.func @bwd_bf16(%x: memref<?x?xbf16>, %w: memref<?x4xbf16>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
                    %dx: memref<?x?xbf16>, %p: memref<?x?xf32>, %part: index, %col: index) {
  cake.bwd_tile %x, %w, %cu, %dy into %dx, %p at [%part, %col]
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64,
       tile_tokens = 64 : i64, vector_channels = 8 : i64, rows_ahead = 2 : i64}
      : memref<?x?xbf16>, memref<?x4xbf16>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x?xf32>
  return
}
