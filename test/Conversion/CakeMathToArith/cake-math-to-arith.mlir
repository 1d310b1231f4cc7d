// RUN: cake-opt %s --split-input-file --convert-cake-math-to-arith | FileCheck %s

// The host's SiLU: the formulas of the GPU with exp expanded to its
// polynomial on the whole vector (no call to a libm exp) and an IEEE division
// for the reciprocal; `approx` changes nothing.
// CHECK-LABEL: func.func @silu
// CHECK-NOT: cake.silu
// CHECK-NOT: math.exp
// CHECK: math.fma {{.*}} : vector<8xf32>
// CHECK: arith.divf {{.*}} : vector<8xf32>
// CHECK-NOT: cake.silu
// CHECK-NOT: math.exp
// CHECK: return
func.func @silu(%x: vector<8xf32>) -> vector<8xf32> {
  %y = cake.silu %x {approx} : vector<8xf32>
  return %y : vector<8xf32>
}

// -----

// CHECK-LABEL: func.func @silu_derivative
// CHECK-NOT: cake.silu_derivative
// CHECK: arith.divf {{.*}} : f32
// CHECK-NOT: math.exp
func.func @silu_derivative(%x: f32) -> f32 {
  %y = cake.silu_derivative %x : f32
  return %y : f32
}

// -----

// f64 -> bf16 in two roundings that give the correct one: to f32 rounded to
// odd (an inexact result moved toward zero, then its last bit set), then to
// bf16; f32 -> bf16 stays as it is.
// CHECK-LABEL: func.func @truncate
// CHECK-SAME: (%[[D:.*]]: vector<4xf64>, %[[F:.*]]: f32)
// CHECK: %[[NEAREST:.*]] = arith.truncf %[[D]] : vector<4xf64> to vector<4xf32>
// CHECK: %[[BACK:.*]] = arith.extf %[[NEAREST]] : vector<4xf32> to vector<4xf64>
// CHECK: %[[INEXACT:.*]] = arith.cmpf one, %[[BACK]], %[[D]]
// CHECK: %[[BITS:.*]] = arith.bitcast %[[NEAREST]] : vector<4xf32> to vector<4xi32>
// CHECK: %[[ODD:.*]] = arith.ori
// CHECK: %[[PICK:.*]] = arith.select %[[INEXACT]], %[[ODD]], %[[BITS]]
// CHECK: %[[ROUNDED:.*]] = arith.bitcast %[[PICK]] : vector<4xi32> to vector<4xf32>
// CHECK: arith.truncf %[[ROUNDED]] : vector<4xf32> to vector<4xbf16>
// CHECK: arith.truncf %[[F]] : f32 to bf16
func.func @truncate(%d: vector<4xf64>, %f: f32) -> (vector<4xbf16>, bf16) {
  %0 = arith.truncf %d : vector<4xf64> to vector<4xbf16>
  %1 = arith.truncf %f : f32 to bf16
  return %0, %1 : vector<4xbf16>, bf16
}
