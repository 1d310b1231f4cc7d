// RUN: cake-opt %s --split-input-file --cake-tile=stages=0 --convert-cake-to-host | FileCheck %s
// RUN: cake-opt %s --split-input-file --cake-to-host | FileCheck %s --check-prefix=WRAP

// A forward becomes one host kernel: the function's arguments, then the
// range of tiles to run, clamped to the forall's (parts * channel groups).
// CHECK-LABEL: func.func @fwd(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?xbf16>, {{.*}}, %[[PARTS:[a-z0-9]+]]: index, %[[BEGIN:[a-z0-9]+]]: index {cake.param = "tile_begin"}, %[[END:[a-z0-9]+]]: index {cake.param = "tile_end"})
// CHECK-SAME: attributes {cake.host_kernel, cake.tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 0, unroll = 4>}
// CHECK: %[[GROUPS:.*]] = arith.divui
// CHECK: %[[TILES:.*]] = arith.muli %[[PARTS]], %[[GROUPS]]
// CHECK: %[[LAST:.*]] = arith.minui %[[END]], %[[TILES]]
// CHECK: scf.for %[[TILE:.*]] = %[[BEGIN]] to %[[LAST]]
// CHECK:   cake.fwd_tile {{.*}} rows[{{.*}}) shared_by %{{.*}} col
// CHECK-NOT: scf.forall

// The packed entry point reads every parameter as a 64-bit word, memrefs as
// their descriptors, and calls the kernel: 34 words (x, weight and y take 7,
// cu_seqlens and bias 5, then parts, tile_begin and tile_end).
// WRAP-LABEL: llvm.func @fwd_packed(%{{.*}}: !llvm.ptr)
// WRAP: llvm.getelementptr %{{.*}}[0]
// WRAP: llvm.inttoptr
// WRAP: llvm.getelementptr %{{.*}}[33]
// WRAP-NOT: llvm.getelementptr %{{.*}}[34]
// WRAP: llvm.call @fwd(
func.func @fwd(%x: memref<?x?xbf16>, %w: memref<?x4xbf16>, %cu: memref<?xi32>,
               %b: memref<?xbf16>, %y: memref<?x?xbf16>, %parts: index) {
  cake.conv1d_fwd %x, %w, %cu bias %b : memref<?xbf16> into %y parts %parts
      {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xbf16>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// A backward becomes the bwd kernel and its reduction, which names the
// kernel it waits for; each keeps only the arguments it uses.
// CHECK-LABEL: func.func @bwd(
// CHECK-SAME: %[[P:[a-z0-9]+]]: memref<?x?xf32>, %[[BEGIN:[a-z0-9]+]]: index {cake.param = "tile_begin"}, %{{.*}}: index {cake.param = "tile_end"})
// CHECK-SAME: attributes {cake.host_kernel, cake.tiling = #cake.tiling<
// CHECK: scf.for %{{.*}} = %[[BEGIN]] to
// CHECK:   cake.bwd_tile {{.*}} part
// CHECK-LABEL: func.func @bwd_1(
// CHECK-SAME: %{{.*}}: memref<?x4xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?x?xf32>, %{{.*}}: index {cake.param = "tile_begin"}, %{{.*}}: index {cake.param = "tile_end"})
// CHECK-SAME: attributes {cake.host_kernel, cake.waits_for = @bwd}
// CHECK-NOT: cake.bwd_tile

// WRAP-LABEL: llvm.func @bwd(
// WRAP-SAME: cake.host_kernel
// WRAP-LABEL: llvm.func @bwd_packed(
// WRAP: llvm.call @bwd(
// WRAP-LABEL: llvm.func @bwd_1(
// WRAP-SAME: cake.waits_for = @bwd
// WRAP-LABEL: llvm.func @bwd_1_packed(
// WRAP: llvm.call @bwd_1(
func.func @bwd(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
               %b: memref<?xf32>, %dx: memref<?x?xbf16>, %dw: memref<?x4xf32>, %db: memref<?xf32>,
               %p: memref<?x?xf32>) {
  cake.conv1d_bwd %x, %w, %cu, %dy bias %b : memref<?xf32> into %dx, %dw, %db : memref<?xf32> partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16> -> memref<?x?xbf16>, memref<?x4xf32>, memref<?x?xf32>
  return
}
