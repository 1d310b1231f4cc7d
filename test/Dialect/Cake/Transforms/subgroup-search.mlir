// RUN: cake-opt %s --split-input-file --cake-expand-tiles="subgroup-search-probes=4" | FileCheck %s
// RUN: cake-opt %s --split-input-file --cake-expand-tiles | FileCheck %s --check-prefix=ALONE
// RUN: not cake-opt %s --split-input-file --cake-expand-tiles="subgroup-search-probes=3" 2>&1 | FileCheck %s --check-prefix=BAD

// In a GPU kernel whose tiles come in runs of `shared_by` that share their
// rows, the subgroup searches together where the run is a whole number of
// subgroups, and each thread alone elsewhere.
// CHECK-LABEL: gpu.func @shared
// CHECK-SAME: %[[CU:[a-z0-9]+]]: memref<?xi32>
// CHECK-SAME: %[[FIRST:[a-z0-9]+]]: index, %{{[a-z0-9]+}}: index, %[[SHARED:[a-z0-9]+]]: index
// CHECK: %[[TOKEN:.*]] = arith.index_cast %[[FIRST]] : index to i32
// CHECK: %[[REM:.*]] = arith.remui %[[SHARED]], %c32
// CHECK: %[[WHOLE:.*]] = arith.cmpi eq, %[[REM]], %c0
// CHECK: %[[CURSOR:.*]]:3 = scf.if %[[WHOLE]] -> (index, i32, i32) {
// Lane l reads probes 4 l + 1 .. 4 l + 4 of a step's 128: one load each,
// independent, the last lane's last (hi itself) counting nothing.
// CHECK:   %[[LANE:.*]] = gpu.lane_id
// CHECK:   %[[MINE:.*]] = arith.muli %[[LANE]], %c4
// CHECK:   scf.while
// CHECK:   } do {
// CHECK:   ^bb0(%[[LO:.*]]: index, %[[HI:.*]]: index, %[[ATLO:.*]]: i32, %[[ATHI:.*]]: i32):
// CHECK:     %[[SPAN:.*]] = arith.subi %[[HI]], %[[LO]]
// CHECK:     %[[K1:.*]] = arith.addi %[[MINE]], %c1
// CHECK:     %[[REAL1:.*]] = arith.cmpi slt, %[[K1]], %c128
// CHECK:     %[[PIECE1:.*]] = arith.muli %[[SPAN]], %[[K1]]
// CHECK:     %[[OFF1:.*]] = arith.shrui %[[PIECE1]], %c7
// CHECK:     %[[P1:.*]] = arith.addi %[[LO]], %[[OFF1]]
// CHECK:     %[[AT1:.*]] = arith.minsi %[[P1]]
// CHECK:     %[[E1:.*]] = memref.load %[[CU]][%[[AT1]]]
// CHECK:     arith.cmpi sle, %[[E1]], %[[TOKEN]]
// CHECK-COUNT-3: memref.load %[[CU]]
// CHECK-NOT: memref.load
// One sum over the subgroup counts the probes at or below the token ...
// CHECK:     %[[COUNT:.*]] = gpu.subgroup_reduce add %{{.*}} uniform : (i32) -> i32
// ... and the lanes that read the new bounds' entries hand them round.
// CHECK:     gpu.shuffle idx
// CHECK:     gpu.shuffle idx
// CHECK-NOT: memref.load
// CHECK:     scf.yield
// CHECK:   }
// CHECK:   scf.yield
// CHECK: } else {
// CHECK-NOT: gpu.
// CHECK:   scf.while
// CHECK:   scf.yield
// CHECK: }
// CHECK: scf.for {{.*}} iter_args({{.*}}%{{.*}} = %[[CURSOR]]#0, %{{.*}} = %[[CURSOR]]#1, %{{.*}} = %[[CURSOR]]#2
// ALONE-LABEL: gpu.func @shared
// ALONE-NOT: gpu.subgroup_reduce
// ALONE-NOT: gpu.shuffle
// ALONE: gpu.return
// BAD: subgroup-search-probes must be 0 or a power of two, got 3
gpu.module @kernels {
  gpu.func @shared(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>,
                   %y: memref<?x?xbf16>, %first: index, %end: index, %run: index,
                   %col: index) kernel {
    cake.fwd_tile %x, %w, %cu into %y rows [%first, %end) shared_by %run col %col
        {activation = #cake.activation<silu>, width = 4 : i64,
         tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 0, unroll = 1>}
        : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
    gpu.return
  }
}

// -----

// Without shared_by, or outside a GPU kernel, each thread searches alone.
// CHECK-LABEL: gpu.func @not_shared
// CHECK-NOT: gpu.subgroup_reduce
// CHECK: gpu.return
// CHECK-LABEL: func.func @host
// CHECK-NOT: gpu.
// CHECK: return
gpu.module @kernels {
  gpu.func @not_shared(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>,
                       %y: memref<?x?xbf16>, %first: index, %end: index, %col: index) kernel {
    cake.fwd_tile %x, %w, %cu into %y rows [%first, %end) col %col
        {activation = #cake.activation<silu>, width = 4 : i64,
         tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 0, unroll = 1>}
        : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
    gpu.return
  }
}
func.func @host(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>,
                %y: memref<?x?xbf16>, %first: index, %end: index, %run: index, %col: index) {
  cake.fwd_tile %x, %w, %cu into %y rows [%first, %end) shared_by %run col %col
      {activation = #cake.activation<silu>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 0, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}
