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
