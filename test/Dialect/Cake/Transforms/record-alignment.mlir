// RUN: cake-opt %s --split-input-file --cake-record-alignment | FileCheck %s

// Each memref argument gets the largest alignment its accesses assume, seen
// through views: a vector access's `alignment`, else its element's size; a
// cp.async's bytes; a scalar access's element. Arguments without accesses,
// and other arguments, get nothing.
// CHECK-LABEL: func.func @kernel(
// CHECK-SAME: %{{.*}}: memref<?x?xbf16> {cake.align = 16 : i64},
// CHECK-SAME: %{{.*}}: memref<?x4xf32> {cake.align = 4 : i64},
// CHECK-SAME: %{{.*}}: memref<?xf32> {cake.align = 4 : i64},
// CHECK-SAME: %{{.*}}: memref<?xi32>,
// CHECK-SAME: %{{.*}}: index)
func.func @kernel(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %p: memref<?xf32>,
                  %unused: memref<?xi32>, %i: index) {
  %flat = memref.collapse_shape %x [[0, 1]] : memref<?x?xbf16> into memref<?xbf16>
  %row = vector.load %flat[%i] {alignment = 16 : i64} : memref<?xbf16>, vector<8xbf16>
  %taps = vector.load %w[%i, %i] : memref<?x4xf32>, vector<4xf32>
  %v = memref.load %p[%i] : memref<?xf32>
  memref.store %v, %p[%i] : memref<?xf32>
  return
}

// -----

// A cp.async from global memory needs its bytes aligned: 8 bf16 = 16.
// CHECK-LABEL: gpu.func @staged(
// CHECK-SAME: %{{.*}}: memref<?xbf16> {cake.align = 16 : i64}
gpu.module @kernels {
  gpu.func @staged(%x: memref<?xbf16>, %i: index)
      workgroup(%ring: memref<2x128x8xbf16, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %t = nvgpu.device_async_copy %x[%i], %ring[%c0, %c0, %c0], 8
        : memref<?xbf16> to memref<2x128x8xbf16, #gpu.address_space<workgroup>>
    gpu.return
  }
}
