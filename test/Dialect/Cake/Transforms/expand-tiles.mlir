// RUN: cake-opt %s --split-input-file --cake-expand-tiles --canonicalize --cse | FileCheck %s
// RUN: cake-opt %s --split-input-file --cake-expand-tiles="fast-math=false" | FileCheck %s --check-prefix=EXACT

// The forward: taps and bias as vectors of the thread's 8 channels, the 3
// rows before the tile and the document cursor (an 8-ary search) before a loop
// over the tile's rows, marked for staging. Rows are read through a flat view
// of x from the thread's first channel, at row * C with the row the loop's
// own index (no clamp: a tile's rows lie in x), and widened by moving bits:
// tokens are i32, and only the offset is 64-bit. A row deep enough in its document
// takes the branch without tests; the others advance the cursor entry by
// entry and switch on how deep into its document the row is: 0, 1 or 2 rows
// of the window in it leave the taps of the others out, nothing is masked.
// CHECK-LABEL: func.func @fwd
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?xbf16>, {{.*}} %[[Y:[a-z0-9]+]]: memref<?x?xbf16>, %[[FIRST:[a-z0-9]+]]: index, %[[END:[a-z0-9]+]]: index, %[[COL:[a-z0-9]+]]: index)
// CHECK-COUNT-8: vector.load {{.*}} : memref<?x4xf32>, vector<4xf32>
// CHECK: %[[BIAS:.*]] = vector.load {{.*}} : memref<?xbf16>, vector<8xbf16>
// CHECK: %[[XALL:.*]] = memref.collapse_shape %[[X]] {{\[\[}}0, 1]] : memref<?x?xbf16> into memref<?xbf16>
// CHECK: %[[XF:.*]] = memref.subview %[[XALL]][%[[COL]]]
// CHECK: %[[C:.*]] = memref.dim %[[X]], %c1
// CHECK: %[[YALL:.*]] = memref.collapse_shape %[[Y]] {{\[\[}}0, 1]]
// CHECK: %[[YF:.*]] = memref.subview %[[YALL]][%[[COL]]]
// CHECK-COUNT-3: vector.load %[[XF]]
// CHECK: scf.while
// CHECK: scf.for %[[T:.*]] = %[[FIRST]] to %[[END]] step %c1 iter_args(
// CHECK:   %[[TOKEN:.*]] = arith.index_cast %[[T]] : index to i32
// CHECK:   %[[AT:.*]] = arith.muli %[[T]], %[[C]] overflow<nsw> : index
// CHECK:   %[[ROW:.*]] = vector.load %[[XF]][%[[AT]]] {alignment = 16 : i64} : memref<?xbf16, strided<[1], offset: ?>>, vector<8xbf16>
// CHECK:   %[[ROWPAIRS:.*]] = vector.bitcast %[[ROW]] : vector<8xbf16> to vector<4xi32>
// CHECK:   %[[WIDE:.*]] = vector.interleave {{.*}} : vector<4xf32> -> vector<8xf32>
// CHECK:   %[[INTERIOR:.*]] = arith.andi
// CHECK:   scf.if %[[INTERIOR]]
// CHECK-NOT:   arith.select
// CHECK:     vector.fma
// CHECK:     %[[ACT:.*]] = cake.silu %{{.*}} {approx} : vector<8xf32>
// CHECK:     %[[OUT:.*]] = arith.truncf %[[ACT]] : vector<8xf32> to vector<8xbf16>
// CHECK:     vector.store %[[OUT]], %[[YF]][%{{.*}}] {alignment = 16 : i64}
// CHECK:   } else {
// CHECK:     %[[CURSOR:.*]]:3 = scf.while
// CHECK:       memref.load
// CHECK:     %[[DEPTH:.*]] = arith.subi %[[TOKEN]], %[[CURSOR]]#1 : i32
// CHECK:     %[[DEPTHINDEX:.*]] = arith.index_cast %[[DEPTH]] : i32 to index
// CHECK:     scf.index_switch %[[DEPTHINDEX]]
// CHECK-NEXT: case 0 {
// CHECK-NEXT:   %[[ONLY:.*]] = arith.mulf %{{.*}}, %[[WIDE]]
// CHECK-NEXT:   arith.addf %[[ONLY]]
// CHECK-NEXT:   cake.silu
// CHECK:      case 1 {
// CHECK-NEXT:   arith.mulf
// CHECK-NEXT:   vector.fma
// CHECK-NEXT:   arith.addf
// CHECK-NEXT:   cake.silu
// CHECK:      case 2 {
// CHECK-NEXT:   arith.mulf
// CHECK-COUNT-2: vector.fma
// CHECK-NEXT:   arith.addf
// CHECK-NEXT:   cake.silu
// CHECK:      default {
// CHECK-NEXT:   arith.mulf
// CHECK-COUNT-3: vector.fma
// CHECK-NEXT:   arith.addf
// CHECK-NEXT:   cake.silu
// CHECK-NOT: arith.select {{.*}} : vector<8xf32>
// CHECK: } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1>}
// EXACT-LABEL: func.func @fwd
// EXACT: cake.silu %{{.*}} : vector<8xf32>
func.func @fwd(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %b: memref<?xbf16>,
               %y: memref<?x?xbf16>, %first: index, %end: index, %col: index) {
  cake.fwd_tile %x, %w, %cu bias %b : memref<?xbf16> into %y rows [%first, %end) col %col
      {activation = #cake.activation<silu>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// The backward under the fp32 policy: rows to end + 3 (the dx of the tile's
// last tokens needs the g of 3 more), SiLU' never approximated, f64 sums of
// the 4 taps and the bias, stored as partial row `part`: 4 taps per channel,
// then the bias sums at 4 * C + col. The loop carries the rows that take the
// mask-free path, [max(start + 3, first + 3), min(next, end)), next to the
// cursor. Masks are selects; a row past the tile adds no terms (a branch).
// A row past the tensor is not read: its x and dy are zeros.
// CHECK-LABEL: func.func @bwd_fp32
// CHECK-SAME: %[[DX:[a-z0-9]+]]: memref<?x?xbf16>, %[[P:[a-z0-9]+]]: memref<?x?xf64>, %[[FIRST:[a-z0-9]+]]: index, %[[END:[a-z0-9]+]]: index, %[[COL:[a-z0-9]+]]: index, %[[PART:[a-z0-9]+]]: index)
// CHECK: %[[END32:.*]] = arith.index_cast %[[END]] : index to i32
// CHECK: %[[DXALL:.*]] = memref.collapse_shape %[[DX]]
// CHECK: %[[DXF:.*]] = memref.subview %[[DXALL]][%[[COL]]]
// CHECK: %[[WALK:.*]] = arith.addi %[[END]], %c3
// CHECK: %[[SUMS:.*]]:16 = scf.for %[[T:.*]] = %[[FIRST]] to %[[WALK]] step %c1 iter_args({{.*}}, %[[BEGIN:[a-z0-9]+]] = %{{.*}}, %[[UNTIL:[a-z0-9]+]] = %{{.*}}, %{{.*}} = %[[ZERO:cst[_0-9]*]], %{{.*}} = %[[ZERO]], %{{.*}} = %[[ZERO]], %{{.*}} = %[[ZERO]], %{{.*}} = %[[ZERO]])
// CHECK: %[[TOKEN:.*]] = arith.index_cast %[[T]] : index to i32
// CHECK: %[[AT:.*]] = arith.muli %[[T]], %{{.*}} overflow<nsw> : index
// CHECK: %[[EXISTS:.*]] = arith.cmpi slt, %[[TOKEN]], %{{.*}} : i32
// CHECK: scf.if %[[EXISTS]] -> (vector<4xbf16>) {
// CHECK-NEXT: vector.load %{{.*}}[%[[AT]]]
// CHECK: } else {
// CHECK-NEXT: scf.yield %{{.*}} : vector<4xbf16>
// CHECK-DAG: arith.cmpi slt, %[[TOKEN]], %[[UNTIL]] : i32
// CHECK-DAG: arith.cmpi sge, %[[TOKEN]], %[[BEGIN]] : i32
// CHECK:   scf.if
// CHECK:     cake.silu_derivative %{{.*}} : vector<4xf32>
// CHECK:     vector.store %{{.*}}, %[[DXF]]
// CHECK:     vector.fma %{{.*}} : vector<4xf64>
// CHECK:   } else {
// CHECK:     scf.while
// CHECK:     arith.maxsi
// CHECK:     arith.minsi %{{.*}}, %[[END32]] : i32
// CHECK:     scf.if
// CHECK:       vector.store %{{.*}}, %[[DXF]]
// CHECK:     %[[OWN:.*]] = arith.cmpi slt, %[[TOKEN]], %[[END32]] : i32
// CHECK:     scf.if %[[OWN]] -> (vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>)
// CHECK-COUNT-4: vector.fma %{{.*}} : vector<4xf64>
// CHECK-NOT: arith.select %{{.*}} : vector<4xf64>
// CHECK: } {cake.row_loop =
// CHECK: vector.store %{{.*}}, %[[P]][%[[PART]], %{{.*}}] {alignment = 16 : i64} : memref<?x?xf64>, vector<4xf64>

// CHECK: %[[BIASCOL:.*]] = arith.addi %{{.*}}, %[[COL]]
// CHECK: vector.store %[[SUMS]]#15, %[[P]][%[[PART]], %[[BIASCOL]]]
func.func @bwd_fp32(%x: memref<?x?xbf16>, %w: memref<?x4xbf16>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
                    %b: memref<?xf32>, %dx: memref<?x?xbf16>, %p: memref<?x?xf64>,
                    %first: index, %end: index, %col: index, %part: index) {
  cake.bwd_tile %x, %w, %cu, %dy bias %b : memref<?xf32> into %dx, %p rows [%first, %end) col %col part %part
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<fp32>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 4, block_threads = 128, stages = 4, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xbf16>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x?xf64>
  return
}


// -----

// The bf16 policy rounds pre to bf16 before SiLU': lanes in pairs (one
// conversion of two lanes on a GPU), widened back by moving each half's bits
// into place, the even lane's low half and the odd lane's high.
// CHECK-LABEL: func.func @bwd_bf16
// CHECK: scf.for
// CHECK:   scf.if
// CHECK:     %[[ROUNDED:.*]] = arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK:     %[[PAIRS:.*]] = vector.bitcast %[[ROUNDED]] : vector<8xbf16> to vector<4xi32>
// CHECK-DAG: %[[LOW:.*]] = arith.shli %[[PAIRS]], %{{.*}} : vector<4xi32>
// CHECK-DAG: %[[HIGH:.*]] = arith.andi %[[PAIRS]], %{{.*}} : vector<4xi32>
// CHECK-DAG: %[[EVEN:.*]] = arith.bitcast %[[LOW]] : vector<4xi32> to vector<4xf32>
// CHECK-DAG: %[[ODD:.*]] = arith.bitcast %[[HIGH]] : vector<4xi32> to vector<4xf32>
// CHECK:     %[[Z:.*]] = vector.interleave %[[EVEN]], %[[ODD]] : vector<4xf32> -> vector<8xf32>
// CHECK:     cake.silu_derivative %[[Z]] {approx} : vector<8xf32>
func.func @bwd_bf16(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
                    %dx: memref<?x?xbf16>, %p: memref<?x?xf32>,
                    %first: index, %end: index, %col: index, %part: index) {
  cake.bwd_tile %x, %w, %cu, %dy into %dx, %p rows [%first, %end) col %col part %part
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x?xf32>
  return
}
