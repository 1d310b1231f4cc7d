// RUN: cake-opt %s --split-input-file --cake-tile --verify-diagnostics

// Channels the vector does not divide cannot be tiled.
func.func @channels(%x: memref<?x12xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x12xbf16>, %n: index) {
  // expected-error @+1 {{could not be tiled (channels not a multiple of vector-channels?)}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x12xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x12xbf16>
  return
}

// RUN: not cake-opt %s --cake-tile="block-threads=100 stages=2" 2>&1 | FileCheck %s --check-prefix=BADOPTS
// BADOPTS: block_threads (100) must be a multiple of 32 up to 1024

// RUN: not cake-opt %s --cake-tile="reduce-chains=6" 2>&1 | FileCheck %s --check-prefix=BADCHAINS
// BADCHAINS: reduce-chains must be a power of two, got 6

// RUN: not cake-opt %s --cake-tile="reduce-slices=64" 2>&1 | FileCheck %s --check-prefix=BADSLICES
// BADSLICES: reduce-slices must be a power of two up to 32, got 64
