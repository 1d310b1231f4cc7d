// RUN: cake-opt %s --split-input-file --verify-diagnostics --cake-map-to-gpu="block-threads=256" | FileCheck %s

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
// taking only the arguments it uses (with their attributes). The second dimension of
// a 2-D forall spreads over block_id.y and the threads.
// CHECK-LABEL: gpu.func @chain
// CHECK-SAME: (%[[A:.*]]: memref<?x?xf32> {cake.param = "a"}) kernel
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-DAG: %[[BX:.*]] = gpu.block_id x
// CHECK-DAG: %[[BY:.*]] = gpu.block_id y
// CHECK-DAG: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[J0:.*]] = arith.muli %[[BY]], %c256
// CHECK: %[[J:.*]] = arith.addi %[[J0]], %[[TID]]
// CHECK: memref.store %{{.*}}, %[[A]][%[[BX]], %[[J]]]
// CHECK-LABEL: gpu.func @chain_1
// CHECK-SAME: (%[[A2:.*]]: memref<?x?xf32> {cake.param = "a"}, %[[B:.*]]: memref<?xf32> {cake.param = "b"}) kernel
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NOT: launch_dependents
// CHECK: memref.load %[[A2]]
// CHECK: memref.store %{{.*}}, %[[B]]
func.func @chain(%a: memref<?x?xf32> {cake.param = "a"}, %b: memref<?xf32> {cake.param = "b"},
                 %unused: memref<?xf32> {cake.param = "unused"}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = memref.dim %a, %c0 : memref<?x?xf32>
  %cols = memref.dim %a, %c1 : memref<?x?xf32>
  %one = arith.constant 1.0 : f32
  scf.forall (%i, %j) in (%rows, %cols) {
    memref.store %one, %a[%i, %j] : memref<?x?xf32>
  }
  scf.forall (%j) in (%cols) {
    %v = memref.load %a[%c0, %j] : memref<?x?xf32>
    memref.store %v, %b[%j] : memref<?xf32>
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
