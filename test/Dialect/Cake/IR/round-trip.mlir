// RUN: cake-opt %s --split-input-file | cake-opt --split-input-file | FileCheck %s
// RUN: cake-opt %s --split-input-file --mlir-print-op-generic | cake-opt --split-input-file | FileCheck %s

// The forward with bias, at the op level.
// CHECK-LABEL: func.func @fwd_bias
// CHECK: cake.conv1d_fwd %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} : memref<?xf32> into %{{.*}} parts %{{.*}} {activation = #cake.activation<silu>, width = 4 : i64}
func.func @fwd_bias(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>,
                    %b: memref<?xf32>, %y: memref<?x?xbf16>, %n: index) {
  cake.conv1d_fwd %x, %w, %cu bias %b : memref<?xf32> into %y parts %n
      {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// Without bias, no activation, another width, static shapes, its own tiling
// (with more than one wave of parts).
// CHECK-LABEL: func.func @fwd_plain
// CHECK: cake.conv1d_fwd %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} parts %{{.*}} {activation = #cake.activation<none>, tiling = #cake.tiling<vector_channels = 4, block_threads = 64, stages = 0, unroll = 2, waves = 8, max_part_tokens = 24>, width = 2 : i64}
func.func @fwd_plain(%x: memref<16x8xbf16>, %w: memref<8x2xbf16>, %cu: memref<3xi32>,
                     %y: memref<16x8xbf16>, %n: index) {
  cake.conv1d_fwd %x, %w, %cu into %y parts %n
      {activation = #cake.activation<none>, width = 2 : i64,
       tiling = #cake.tiling<vector_channels = 4, block_threads = 64, stages = 0, unroll = 2, waves = 8, max_part_tokens = 24>}
      : memref<16x8xbf16>, memref<8x2xbf16>, memref<3xi32> -> memref<16x8xbf16>
  return
}

// -----

// The backward with bias: both gradients, f32 partial rows under bf16.
// CHECK-LABEL: func.func @bwd_bias
// CHECK: cake.conv1d_bwd %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} : memref<?xbf16> into %{{.*}}, %{{.*}}, %{{.*}} : memref<?xbf16> partials %{{.*}} {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64}
func.func @bwd_bias(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>,
                    %dy: memref<?x?xbf16>, %b: memref<?xbf16>, %dx: memref<?x?xbf16>,
                    %dw: memref<?x4xf32>, %db: memref<?xbf16>, %p: memref<?x?xf32>) {
  cake.conv1d_bwd %x, %w, %cu, %dy bias %b : memref<?xbf16>
      into %dx, %dw, %db : memref<?xbf16> partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x4xf32>, memref<?x?xf32>
  return
}

// -----

// The backward without bias: f64 partial rows under fp32.
// CHECK-LABEL: func.func @bwd_fp32
// CHECK: cake.conv1d_bwd {{.*}} into %{{.*}}, %{{.*}} partials %{{.*}} {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<fp32>, width = 4 : i64}
func.func @bwd_fp32(%x: memref<?x?xbf16>, %w: memref<?x4xbf16>, %cu: memref<?xi32>,
                    %dy: memref<?x?xbf16>, %dx: memref<?x?xbf16>,
                    %dw: memref<?x4xbf16>, %p: memref<?x?xf64>) {
  cake.conv1d_bwd %x, %w, %cu, %dy into %dx, %dw partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<fp32>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xbf16>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x4xbf16>, memref<?x?xf64>
  return
}

// -----

// The tile-level ops and the activation math.
// CHECK-LABEL: func.func @tiles
// CHECK: cake.fwd_tile %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} : memref<?xf32> into %{{.*}} rows[%[[FIRST:.*]], %[[END:.*]]) col %[[COL:.*]] {activation = #cake.activation<silu>, tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 8, unroll = 1>, width = 4 : i64}
// CHECK: cake.fwd_tile %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} rows[%[[FIRST]], %[[END]]) shared_by %[[COL]] col %[[COL]] {activation = #cake.activation<none>
// CHECK: cake.bwd_tile %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} rows[%[[FIRST]], %[[END]]) col %[[COL]] part %{{.*}} {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1>, width = 4 : i64}
// CHECK: cake.partials_reduce %{{.*}} into %{{.*}}, %{{.*}} : memref<?xf32> : memref<?x?xf32> -> memref<?x4xf32>
// CHECK: cake.silu %{{.*}} {approx} : vector<8xf32>
// CHECK: cake.silu_derivative %{{.*}} : f32
// CHECK: cake.lane_sum %{{.*}} lanes 8 : f32
func.func @tiles(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>,
                 %b: memref<?xf32>, %y: memref<?x?xbf16>, %p: memref<?x?xf32>,
                 %dw: memref<?x4xf32>, %db: memref<?xf32>, %first: index, %end: index,
                 %col: index, %part: index, %v: vector<8xf32>, %s: f32) {
  cake.fwd_tile %x, %w, %cu bias %b : memref<?xf32> into %y rows [%first, %end) col %col
      {activation = #cake.activation<silu>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 8, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  cake.fwd_tile %x, %w, %cu into %y rows [%first, %end) shared_by %col col %col
      {activation = #cake.activation<none>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 8, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  cake.bwd_tile %x, %w, %cu, %x into %y, %p rows [%first, %end) col %col part %part
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x?xf32>
  cake.partials_reduce %p into %dw, %db : memref<?xf32> : memref<?x?xf32> -> memref<?x4xf32>
  %0 = cake.silu %v {approx} : vector<8xf32>
  %1 = cake.silu_derivative %s : f32
  %2 = cake.lane_sum %s lanes 8 : f32
  return
}
