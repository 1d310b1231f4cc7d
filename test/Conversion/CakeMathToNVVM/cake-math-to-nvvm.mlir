// RUN: cake-opt %s --split-input-file --verify-diagnostics --convert-cake-math-to-nvvm --canonicalize --cse | FileCheck %s

// SiLU with approximations, lane by lane: h = ex2(-|x| log2(e) / 2) (never
// subnormal where it matters), r = rcp(1 + h h), sigmoid r for x >= 0 and
// (h r) h below. No division, no libdevice, no infinity into the rcp.
// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[V:.*]]: vector<2xf32>)
// CHECK-DAG: %[[NEG:.*]] = arith.negf %[[V]]
// CHECK-DAG: %[[ABS:.*]] = arith.maximumf %[[V]], %[[NEG]]
// CHECK: %[[T:.*]] = arith.mulf %[[ABS]], %{{.*}} : vector<2xf32>
// CHECK-COUNT-2: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: %[[H:.*]] = vector.from_elements
// CHECK: %[[D:.*]] = llvm.intr.fma(%[[H]], %[[H]], %{{.*}})
// CHECK-COUNT-2: nvvm.rcp.approx.ftz.f
// CHECK: %[[R:.*]] = vector.from_elements
// CHECK: %[[HR:.*]] = arith.mulf %[[H]], %[[R]]
// CHECK: %[[SMALL:.*]] = arith.mulf %[[HR]], %[[H]]
// CHECK: %[[POS:.*]] = arith.cmpf oge, %[[V]]
// CHECK: %[[S:.*]] = arith.select %[[POS]], %[[R]], %[[SMALL]]
// CHECK: %[[Y:.*]] = arith.mulf %[[V]], %[[S]]
// CHECK: return %[[Y]]
// CHECK-NOT: arith.divf
func.func @silu(%v: vector<2xf32>) -> vector<2xf32> {
  %0 = cake.silu %v {approx} : vector<2xf32>
  return %0 : vector<2xf32>
}

// -----

// The exact form refines the reciprocal with a Newton step. The derivative
// s (1 + x (1 - s)) is s + x (r * small): neither side from 1 minus the
// other, one select.
// CHECK-LABEL: func.func @derivative
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK: %[[R0:.*]] = nvvm.rcp.approx.ftz.f %[[D:.*]] : f32
// CHECK: %[[ND:.*]] = arith.negf %[[D]]
// CHECK: %[[RES:.*]] = llvm.intr.fma(%[[ND]], %[[R0]], %{{.*}})
// CHECK: %[[R:.*]] = llvm.intr.fma(%[[R0]], %[[RES]], %[[R0]])
// CHECK: %[[HR:.*]] = arith.mulf %[[H:.*]], %[[R]]
// CHECK: %[[SMALL:.*]] = arith.mulf %[[HR]], %[[H]]
// CHECK: %[[POS:.*]] = arith.cmpf oge, %[[X]]
// CHECK: %[[S:.*]] = arith.select %[[POS]], %[[R]], %[[SMALL]] : f32
// CHECK: %[[RS:.*]] = arith.mulf %[[R]], %[[SMALL]]
// CHECK: %[[DS:.*]] = llvm.intr.fma(%[[X]], %[[RS]], %[[S]])
// CHECK: return %[[DS]]
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
