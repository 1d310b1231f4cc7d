// RUN: cake-opt %s --cake-to-nvvm | FileCheck %s --check-prefix=NVVM
// The PTX prints as one escaped string: one PTX line per line for FileCheck.
// RUN: cake-opt %s --cake-to-ptx="chip=sm_90 features=+ptx80 stages=2" | sed -e 's/\\0A/\n/g' | FileCheck %s --check-prefix=PTX
// RUN: cake-opt %s --cake-to-ptx | not grep -E "\\.extern|call\\.uni|__nv_"
// RUN: cake-opt %s --cake-to-ptx="subgroup-search-probes=2" | sed -e 's/\\0A/\n/g' | FileCheck %s --check-prefix=SUBGROUP

// The forward, from the op to an NVVM kernel: nothing of cake, nvgpu, scf or
// the host function is left, and the kernel says its block size and tiling.
// NVVM: gpu.module @cake_kernels [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">]
// NVVM: llvm.func @fwd({{.*}} attributes {cake.tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 4>, gpu.kernel, gpu.known_block_size = array<i32: 128, 1, 1>, nvvm.kernel, nvvm.maxntid = array<i32: 128, 1, 1>}
// NVVM-NOT: cake.
// NVVM-NOT: nvgpu.
// NVVM-NOT: scf.
// NVVM-NOT: func.func

// PTX for sm_90: the rows come through shared memory by 16-byte async
// copies, 2 groups ahead, each with a source size (0 past the tile's rows);
// y leaves by 16-byte stores, the activation uses the native ex2 and rcp.
// PTX: .version 8.0
// PTX: .target sm_90
// PTX-LABEL: .visible .entry fwd(
// PTX: .shared .align {{[0-9]+}} .b8
// PTX-COUNT-2: cp.async.cg.shared.global [%rd{{[0-9]+(\+[0-9]+)?}}], [%rd{{[0-9]+}}], 16, %r{{[0-9]+}};
// PTX-DAG: cp.async.wait_group {{.*}}1;
// PTX-DAG: ld.shared.v4.b32
// PTX-DAG: ex2.approx.ftz.f32
// PTX-DAG: rcp.approx.ftz.f32
// PTX-DAG: st.global.v4.b32
// PTX-DAG: cp.async.commit_group;
// PTX: cp.async.wait_group {{.*}}0;
// PTX-NEXT: $L__
// PTX-NEXT: ret;
// With the subgroup's search of cu_seqlens: its count is one redux.sync, and
// its bounds' entries come by two indexed shuffles a step.
// SUBGROUP-LABEL: .visible .entry fwd(
// SUBGROUP: redux.sync.add.s32
// SUBGROUP-COUNT-2: shfl.sync.idx.b32
// SUBGROUP-NOT: redux.sync
// SUBGROUP: ret;
func.func @fwd(%x: memref<?x?xbf16>, %w: memref<?x4xbf16>, %cu: memref<?xi32>,
               %b: memref<?xbf16>, %y: memref<?x?xbf16>, %parts: index) {
  cake.conv1d_fwd %x, %w, %cu bias %b : memref<?xbf16> into %y parts %parts
      {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xbf16>, memref<?xi32> -> memref<?x?xbf16>
  return
}
