// RUN: cake-opt %s --cake-to-host | FileCheck %s
// RUN: cake-opt %s --cake-to-host | not grep -E "llvm.call @[a-z]*(exp|__)"

// The backward for the host, from the op to the LLVM dialect: the bwd kernel
// and its reduction with their packed entry points, the tile math on 8-lane
// vectors with fused multiply-adds, nothing of cake, scf, math, memref or
// vector left but the kernels' attributes.
// CHECK-LABEL: llvm.func @bwd(
// CHECK-SAME: cake.host_kernel
// CHECK-SAME: cake.tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 0, unroll = {{[0-9]+}}>
// CHECK: llvm.intr.fma({{.*}}) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK-LABEL: llvm.func @bwd_packed(
// CHECK-LABEL: llvm.func @bwd_1(
// CHECK-SAME: cake.waits_for = @bwd
// CHECK-LABEL: llvm.func @bwd_1_packed(
// CHECK-NOT: cake.{{[a-z_]+}} %
// CHECK-NOT: {{scf|math|memref|vector}}.
func.func @bwd(%x: memref<?x?xbf16>, %w: memref<?x4xbf16>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
               %b: memref<?xbf16>, %dx: memref<?x?xbf16>, %dw: memref<?x4xbf16>, %db: memref<?xbf16>,
               %p: memref<?x?xf32>) {
  cake.conv1d_bwd %x, %w, %cu, %dy bias %b : memref<?xbf16> into %dx, %dw, %db : memref<?xbf16> partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xbf16>, memref<?xi32>, memref<?x?xbf16> -> memref<?x?xbf16>, memref<?x4xbf16>, memref<?x?xf32>
  return
}
