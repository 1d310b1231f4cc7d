// RUN: cake-opt %s --split-input-file --verify-diagnostics --convert-cake-to-gpu="block-threads=256" | FileCheck %s

// A one-dimensional forall: index = block_id.x * 256 + thread_id.x, guarded;
// the bound is recomputed in the kernel; the host function is gone.
// CHECK: module attributes {gpu.container_module}
// CHECK: gpu.module @cake_kernels
// CHECK-LABEL: gpu.func @one_dim
// CHECK-SAME: (%[[BUF:.*]]: memref<?xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CHECK-NOT: griddepcontrol
// CHECK-DAG: %[[N:.*]] = memref.dim %[[BUF]]
// CHECK-DAG: %[[TID:.*]] = gpu.thread_id x
// CHECK-DAG: %[[BID:.*]] = gpu.block_id x
// CHECK: %[[BASE:.*]] = arith.muli %[[BID]], %c256
// CHECK: %[[I:.*]] = arith.addi %[[BASE]], %[[TID]]
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[I]], %[[N]]
// CHECK: scf.if %[[IN]]
// CHECK:   memref.store %{{.*}}, %[[BUF]][%[[I]]]
// CHECK: gpu.return
// CHECK-NOT: func.func @one_dim
func.func @one_dim(%buf: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %buf, %c0 : memref<?xf32>
  %zero = arith.constant 0.0 : f32
  scf.forall (%i) in (%n) {
    memref.store %zero, %buf[%i] : memref<?xf32>
  }
  return
}

// -----

// Two foralls: two kernels chained for programmatic dependent launch, each
// taking only the arguments it uses (with their attributes); the second names
// the first in cake.waits_for.
// CHECK-LABEL: gpu.func @chain
// CHECK-SAME: (%[[A:.*]]: memref<?xf32> {cake.param = "a"}) kernel
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK: memref.store %{{.*}}, %[[A]]
// CHECK-LABEL: gpu.func @chain_1
// CHECK-SAME: (%[[A2:.*]]: memref<?xf32> {cake.param = "a"}, %[[B:.*]]: memref<?xf32> {cake.param = "b"}) kernel
// CHECK-SAME: cake.waits_for = @chain
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NOT: launch_dependents
// CHECK: memref.load %[[A2]]
// CHECK: memref.store %{{.*}}, %[[B]]
func.func @chain(%a: memref<?xf32> {cake.param = "a"}, %b: memref<?xf32> {cake.param = "b"},
                 %unused: memref<?xf32> {cake.param = "unused"}) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %a, %c0 : memref<?xf32>
  %one = arith.constant 1.0 : f32
  scf.forall (%i) in (%n) {
    memref.store %one, %a[%i] : memref<?xf32>
  }
  scf.forall (%j) in (%n) {
    %v = memref.load %a[%j] : memref<?xf32>
    memref.store %v, %b[%j] : memref<?xf32>
  }
  return
}

// -----

// A forall of tiles takes its block size and its register cap from their
// tiling, which the kernel keeps for whoever launches it; index arguments stay
// kernel parameters.
// CHECK-LABEL: gpu.func @tiles
// CHECK-SAME: %{{.*}}: index) kernel attributes {cake.tiling = #cake.tiling<vector_channels = 8, block_threads = 64, stages = 4, unroll = 1, max_registers = 168>, known_block_size = array<i32: 64, 1, 1>, nvvm.maxnreg = 168 : i32}
// CHECK: %[[BASE:.*]] = arith.muli %{{.*}}, %c64
// CHECK: cake.fwd_tile
func.func @tiles(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  %c0 = arith.constant 0 : index
  scf.forall (%i) in (%n) {
    cake.fwd_tile %x, %w, %cu into %y rows [%i, %n) col %c0
        {activation = #cake.activation<silu>, width = 4 : i64,
         tiling = #cake.tiling<vector_channels = 8, block_threads = 64, stages = 4, unroll = 1, max_registers = 168>}
        : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  }
  return
}

// -----

// Only normalized one-dimensional foralls map to threads.
func.func @two_dims(%buf: memref<?x?xf32>, %n: index) {
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{cannot map to the GPU: only normalized one-dimensional foralls without results}}
  scf.forall (%i, %j) in (%n, %n) {
    memref.store %zero, %buf[%i, %j] : memref<?x?xf32>
  }
  return
}

// -----

// Work outside the foralls would be lost.
func.func @stray(%buf: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{cannot map to the GPU: only scf.forall loops and pure ops may appear at the top of a tiled function}}
  memref.store %zero, %buf[%c0] : memref<?xf32>
  scf.forall (%i) in (%c0) {
    memref.store %zero, %buf[%i] : memref<?xf32>
  }
  return
}

// -----

// cake.lane_sum becomes a butterfly of xor shuffles across the 32-lane
// subgroup, lanes / 2 apart first; the kernel records its lanes per item.
// CHECK-LABEL: gpu.func @lanes
// CHECK-SAME: cake.lanes_per_item = 4 : i64
// CHECK: %[[V:.*]] = memref.load
// CHECK: %[[S2:.*]], %{{.*}} = gpu.shuffle xor %[[V]], %c2_i32, %{{c32_i32.*}} : f32
// CHECK: %[[A2:.*]] = arith.addf %[[V]], %[[S2]]
// CHECK: %[[S1:.*]], %{{.*}} = gpu.shuffle xor %[[A2]], %c1_i32, %{{c32_i32.*}} : f32
// CHECK: %[[A1:.*]] = arith.addf %[[A2]], %[[S1]]
// CHECK: memref.store %[[A1]]
// CHECK-NOT: cake.lane_sum
func.func @lanes(%buf: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %buf, %c0 : memref<?xf32>
  scf.forall (%i) in (%n) {
    %v = memref.load %buf[%i] : memref<?xf32>
    %s = cake.lane_sum %v lanes 4 : f32
    memref.store %s, %buf[%i] : memref<?xf32>
  }
  return
}
