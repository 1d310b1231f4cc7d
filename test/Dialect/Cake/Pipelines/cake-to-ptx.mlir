// RUN: cake-opt %s --cake-to-nvvm | FileCheck %s --check-prefix=NVVM
// RUN: cake-opt %s --cake-to-ptx="chip=sm_90 features=+ptx80 rows-ahead=2" | FileCheck %s --check-prefix=PTX

// The forward, from the op to an NVVM kernel: nothing of cake, scf or the
// host function is left, and the kernel says its block size.
// NVVM: gpu.module @cake_kernels [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">]
// NVVM-NOT: llvm.func @__nv
// NVVM: llvm.func @fwd({{.*}} attributes {gpu.kernel, gpu.known_block_size = array<i32: 128, 1, 1>, nvvm.kernel, nvvm.maxntid = array<i32: 128, 1, 1>}
// NVVM-NOT: llvm.func @__nv
// NVVM-NOT: cake.
// NVVM-NOT: scf.
// NVVM-NOT: func.func

// PTX for sm_90 with 16-byte accesses, native ex2 and rcp, no calls.
// PTX: gpu.binary @cake_kernels
// PTX-SAME: .version 8.0
// PTX-SAME: .target sm_90
// PTX-SAME: .visible .entry fwd(
// PTX-SAME: ld.global.v4.b32
// PTX-SAME: ex2.approx
// PTX-SAME: rcp.approx.ftz.f32
// PTX-SAME: st.global.v4.b32
// PTX-NOT: .extern
// PTX-NOT: call.uni
func.func @fwd(%x: memref<?x?xbf16>, %w: memref<?x4xbf16>, %cu: memref<?xi32>,
               %b: memref<?xbf16>, %y: memref<?x?xbf16>) {
  cake.conv1d_fwd %x, %w, %cu bias %b : memref<?xbf16> into %y
      {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xbf16>, memref<?xi32> -> memref<?x?xbf16>
  return
}
