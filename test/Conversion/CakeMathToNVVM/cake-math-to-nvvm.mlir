// RUN: cake-opt %s --split-input-file --verify-diagnostics --convert-cake-math-to-nvvm --canonicalize --cse | FileCheck %s

// SiLU with approximations, lane by lane: e = ex2(64 - |x| log2 e) (2^64
// exp(-|x|), never subnormal), r = rcp(1 + e 2^-64), sigmoid r for x >= 0 and
// e r 2^-64 below. No division, no libdevice, no infinity into the rcp.
// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[V:.*]]: vector<2xf32>)
// CHECK-DAG: %[[NEG:.*]] = arith.negf %[[V]]
// CHECK-DAG: %[[ABS:.*]] = arith.maximumf %[[V]], %[[NEG]]
// CHECK: %[[T:.*]] = llvm.intr.fma(%[[ABS]], %{{.*}}, %{{.*}}) : (vector<2xf32>, vector<2xf32>, vector<2xf32>) -> vector<2xf32>
// CHECK-COUNT-2: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: %[[D:.*]] = llvm.intr.fma
// CHECK-COUNT-2: nvvm.rcp.approx.ftz.f
// CHECK: %[[SMALL:.*]] = arith.mulf
// CHECK: %[[POS:.*]] = arith.cmpf oge, %[[V]]
// CHECK: %[[S:.*]] = arith.select %[[POS]]
// CHECK: %[[Y:.*]] = arith.mulf %[[V]], %[[S]]
// CHECK: return %[[Y]]
// CHECK-NOT: arith.divf
func.func @silu(%v: vector<2xf32>) -> vector<2xf32> {
  %0 = cake.silu %v {approx} : vector<2xf32>
  return %0 : vector<2xf32>
}

// -----

// The exact form refines the reciprocal with a Newton step; the derivative
// takes 1 - sigmoid from the other side of the select, not from 1 - s.
// CHECK-LABEL: func.func @derivative
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK: %[[R0:.*]] = nvvm.rcp.approx.ftz.f %[[D:.*]] : f32
// CHECK: %[[ND:.*]] = arith.negf %[[D]]
// CHECK: %[[RES:.*]] = llvm.intr.fma(%[[ND]], %[[R0]], %{{.*}})
// CHECK: %[[R:.*]] = llvm.intr.fma(%[[R0]], %[[RES]], %[[R0]])
// CHECK: %[[POS:.*]] = arith.cmpf oge, %[[X]]
// CHECK-DAG: %[[S:.*]] = arith.select %[[POS]], %[[R]], %[[Q:.*]] : f32
// CHECK-DAG: %[[C:.*]] = arith.select %[[POS]], %[[Q]], %[[R]] : f32
// CHECK: %[[P:.*]] = llvm.intr.fma(%[[X]], %[[C]], %{{.*}})
// CHECK: arith.mulf %[[S]], %[[P]]
func.func @derivative(%x: f32) -> f32 {
  %0 = cake.silu_derivative %x : f32
  return %0 : f32
}

// -----

// Only f32 is lowered.
func.func @f64(%x: f64) -> f64 {
  // expected-error @+1 {{cannot lower to NVVM: only f32 is supported}}
  %0 = cake.silu %x : f64
  return %0 : f64
}
