// RUN: cake-opt %s --split-input-file --cake-unroll-rows --canonicalize | FileCheck %s

// A row loop runs `unroll` rows an iteration, its leftover rows in a second
// loop; both stay row loops. Loops without the mark are left alone.
// CHECK-LABEL: func.func @rows
// CHECK: scf.for {{.*}} step %c3
// CHECK-COUNT-3: vector.load
// CHECK: } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 3>}
// CHECK: scf.for {{.*}} step %c1
// CHECK: } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 3>}
// CHECK: scf.for {{.*}} step %c1
// CHECK-NOT: cake.row_loop
func.func @rows(%x: memref<?x?xbf16>, %y: memref<?x?xbf16>, %first: index, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %first to %end step %c1 {
    %row = vector.load %x[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
    vector.store %row, %y[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
  } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 3>}
  scf.for %t = %first to %end step %c1 {
    %row = vector.load %x[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
    vector.store %row, %y[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
  }
  return
}

// -----

// 4 rows an iteration over a ring of 2 stages: each row's slot is the same in
// every iteration, so it is computed before the loop (a constant here) and
// the mark is gone. The leftover loop keeps its own slots.
// CHECK-LABEL: func.func @ring_slots
// CHECK-SAME: %[[RING:[a-z0-9]+]]: memref<2x8xbf16, 3>
// CHECK: scf.for {{.*}} step %c4
// CHECK-NOT: arith.remui
// CHECK: vector.load %[[RING]][%c0, %c0]
// CHECK: vector.load %[[RING]][%c1, %c0]
// CHECK: vector.load %[[RING]][%c0, %c0]
// CHECK: vector.load %[[RING]][%c1, %c0]
// CHECK: } {cake.row_loop
// CHECK: scf.for {{.*}} step %c1
// CHECK: arith.remui
// CHECK-NOT: cake.ring_slot
func.func @ring_slots(%ring: memref<2x8xbf16, 3>, %y: memref<?x?xbf16>, %first: index, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %t = %first to %end step %c1 {
    %iteration = arith.subi %t, %first : index
    %slot = arith.remui %iteration, %c2 {cake.ring_slot} : index
    %row = vector.load %ring[%slot, %c0] : memref<2x8xbf16, 3>, vector<8xbf16>
    vector.store %row, %y[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
  } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 2, unroll = 4>}
  return
}

// -----

// Row offsets (i + c) * C of the unrolled loop become i * C once an iteration
// plus c * C computed before the loop.
// CHECK-LABEL: func.func @row_offsets
// CHECK-SAME: %[[C:[a-z0-9]+]]: index)
// CHECK: %[[TWICE:.*]] = arith.muli %[[C]], %c2 overflow<nsw> : index
// CHECK: scf.for %[[I:.*]] = {{.*}} step %c2
// CHECK-NEXT: %[[BASE:.*]] = arith.muli %[[I]], %[[C]] overflow<nsw> : index
// CHECK-NEXT: %[[FIRST:.*]] = arith.addi %[[BASE]], %[[C]] overflow<nsw> : index
// CHECK-NEXT: vector.load %{{.*}}[%[[FIRST]]]
// CHECK: %[[SECOND:.*]] = arith.addi %[[BASE]], %[[TWICE]] overflow<nsw> : index
// CHECK-NEXT: vector.load %{{.*}}[%[[SECOND]]]
// CHECK: } {cake.row_loop
func.func @row_offsets(%x: memref<?xbf16>, %first: index, %end: index, %c: index) {
  %c1 = arith.constant 1 : index
  scf.for %t = %first to %end step %c1 {
    %next = arith.addi %t, %c1 : index
    %at = arith.muli %next, %c overflow<nsw> : index
    %row = vector.load %x[%at] : memref<?xbf16>, vector<8xbf16>
    vector.store %row, %x[%at] : memref<?xbf16>, vector<8xbf16>
  } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 0, unroll = 2>}
  return
}
