// RUN: cake-opt %s --verify-diagnostics --convert-cake-to-gpu="block-threads=48"

// A block of a partial subgroup cannot run a lane sum.
func.func @lanes_partial_block(%buf: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %buf, %c0 : memref<?xf32>
  scf.forall (%i) in (%n) {
    %v = memref.load %buf[%i] : memref<?xf32>
    // expected-error @+1 {{needs blocks of whole 32-lane subgroups, not 48 threads}}
    %s = cake.lane_sum %v lanes 4 : f32
    memref.store %s, %buf[%i] : memref<?xf32>
  }
  return
}
