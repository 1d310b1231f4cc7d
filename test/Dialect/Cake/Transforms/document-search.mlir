// RUN: cake-opt %s --cake-expand-tiles="search-fanout=4" | FileCheck %s
// RUN: cake-opt %s --cake-expand-tiles="search-fanout=2" | FileCheck %s --check-prefix=BINARY
// RUN: not cake-opt %s --cake-expand-tiles="search-fanout=6" 2>&1 | FileCheck %s --check-prefix=BAD

// The search for the tile's first document: each step splits [lo, hi) into
// search-fanout pieces, reading the entries at lo + (span * k) / fanout,
// k = 1 .. fanout - 1, all before any is compared: independent loads, one
// wait for memory a step. The last probe at or below the token is the new
// lo, the first above it the new hi; their entries go with them (cu[0] and
// "infinity" at first), so the cursor is the loop's result, with no load
// after the last step.
// CHECK-LABEL: func.func @fwd
// CHECK-SAME: %[[CU:[a-z0-9]+]]: memref<?xi32>
// CHECK: %[[ENTRIES:.*]] = memref.dim %[[CU]]
// CHECK: %[[FIRST:.*]] = memref.load %[[CU]][%[[C0:.*]]]
// CHECK: %[[SEARCH:.*]]:4 = scf.while (%{{.*}} = %[[C0]], %{{.*}} = %[[ENTRIES]], %{{.*}} = %[[FIRST]], %{{.*}} = %c2147483647_i32) : (index, index, i32, i32) -> (index, index, i32, i32)
// CHECK: } do {
// CHECK: ^bb0(%[[LO:.*]]: index, %[[HI:.*]]: index, %[[ATLO:.*]]: i32, %[[ATHI:.*]]: i32):
// CHECK:   %[[SPAN:.*]] = arith.subi %[[HI]], %[[LO]]
// CHECK:   %[[P1:.*]] = arith.addi %[[LO]], %{{.*}}
// CHECK:   %[[E1:.*]] = memref.load %[[CU]][%[[P1]]]
// CHECK:   %[[B1:.*]] = arith.cmpi sle, %[[E1]]
// CHECK:   %[[P2:.*]] = arith.addi %[[LO]], %{{.*}}
// CHECK:   %[[E2:.*]] = memref.load %[[CU]][%[[P2]]]
// CHECK:   %[[B2:.*]] = arith.cmpi sle, %[[E2]]
// CHECK:   %[[P3:.*]] = arith.addi %[[LO]], %{{.*}}
// CHECK:   %[[E3:.*]] = memref.load %[[CU]][%[[P3]]]
// CHECK:   %[[B3:.*]] = arith.cmpi sle, %[[E3]]
// CHECK-NOT: memref.load
// CHECK:   %[[L1:.*]] = arith.select %[[B1]], %[[P1]], %[[LO]]
// CHECK:   %[[V1:.*]] = arith.select %[[B1]], %[[E1]], %[[ATLO]]
// CHECK:   %[[L2:.*]] = arith.select %[[B2]], %[[P2]], %[[L1]]
// CHECK:   %[[V2:.*]] = arith.select %[[B2]], %[[E2]], %[[V1]]
// CHECK:   %[[L3:.*]] = arith.select %[[B3]], %[[P3]], %[[L2]]
// CHECK:   %[[V3:.*]] = arith.select %[[B3]], %[[E3]], %[[V2]]
// CHECK:   %[[H3:.*]] = arith.select %[[B3]], %[[HI]], %[[P3]]
// CHECK:   %[[W3:.*]] = arith.select %[[B3]], %[[ATHI]], %[[E3]]
// CHECK:   %[[H2:.*]] = arith.select %[[B2]], %[[H3]], %[[P2]]
// CHECK:   %[[W2:.*]] = arith.select %[[B2]], %[[W3]], %[[E2]]
// CHECK:   %[[H1:.*]] = arith.select %[[B1]], %[[H2]], %[[P1]]
// CHECK:   %[[W1:.*]] = arith.select %[[B1]], %[[W2]], %[[E1]]
// CHECK:   scf.yield %[[L3]], %[[H1]], %[[V3]], %[[W1]]
// CHECK: }
// The cursor (document, its start, the next start) goes straight into the
// row loop.
// CHECK-NOT: memref.load %[[CU]]
// CHECK: scf.for {{.*}} iter_args({{.*}}%{{.*}} = %[[SEARCH]]#0, %{{.*}} = %[[SEARCH]]#2, %{{.*}} = %[[SEARCH]]#3

// A binary search reads one entry a step.
// BINARY: scf.while
// BINARY: } do {
// BINARY-COUNT-1: memref.load
// BINARY-NOT: memref.load
// BINARY: scf.yield

// BAD: search-fanout must be a power of two from 2, got 6
func.func @fwd(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %b: memref<?xbf16>,
               %y: memref<?x?xbf16>, %first: index, %end: index, %col: index) {
  cake.fwd_tile %x, %w, %cu bias %b : memref<?xbf16> into %y rows [%first, %end) col %col
      {activation = #cake.activation<silu>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}
