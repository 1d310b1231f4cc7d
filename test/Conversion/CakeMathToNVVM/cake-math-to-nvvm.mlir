// RUN: cake-opt %s --split-input-file --verify-diagnostics --convert-cake-math-to-nvvm --canonicalize --cse | FileCheck %s
// RUN: cake-opt %s --split-input-file --verify-diagnostics --convert-cake-math-to-nvvm="common-range=true" --canonicalize --cse | FileCheck %s --check-prefix=COMMON

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
// With common-range (off by default), one branch on the least lane: at -87 and
// above, sigmoid is rcp(1 + ex2(-x log2(e))); below (or for a NaN minimum),
// the formula above.
// COMMON-LABEL: func.func @silu
// COMMON-SAME: (%[[V:.*]]: vector<2xf32>)
// COMMON: %[[LEAST:.*]] = vector.reduction <minnumf>, %[[V]] : vector<2xf32> into f32
// COMMON: %[[IN:.*]] = arith.cmpf oge, %[[LEAST]], %{{.*}} : f32
// COMMON: %[[Y:.*]] = scf.if %[[IN]] -> (vector<2xf32>) {
// COMMON-NEXT: %[[T:.*]] = arith.mulf %[[V]], %{{.*}} : vector<2xf32>
// COMMON-COUNT-2: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// COMMON: %[[E:.*]] = vector.from_elements
// COMMON-NEXT: %[[D:.*]] = arith.addf %[[E]], %{{.*}} : vector<2xf32>
// COMMON-COUNT-2: nvvm.rcp.approx.ftz.f
// COMMON: %[[S:.*]] = vector.from_elements
// COMMON-NEXT: %[[CY:.*]] = arith.mulf %[[V]], %[[S]]
// COMMON-NEXT: scf.yield %[[CY]]
// COMMON-NEXT: } else {
// COMMON: arith.maximumf
// COMMON: arith.select
// COMMON: scf.yield
// COMMON: return %[[Y]]
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
// The common range's derivative: 1 - s as e * s, s + x (s (1 - s)); the
// Newton step as before.
// COMMON-LABEL: func.func @derivative
// COMMON-SAME: (%[[X:.*]]: f32)
// COMMON: %[[IN:.*]] = arith.cmpf oge, %[[X]], %{{.*}} : f32
// COMMON: scf.if %[[IN]] -> (f32) {
// COMMON: %[[E:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// COMMON: %[[D:.*]] = arith.addf %[[E]], %{{.*}} : f32
// COMMON: %[[R0:.*]] = nvvm.rcp.approx.ftz.f %[[D]] : f32
// COMMON: %[[S:.*]] = llvm.intr.fma(%[[R0]], %{{.*}}, %[[R0]])
// COMMON: %[[Q:.*]] = arith.mulf %[[E]], %[[S]]
// COMMON: %[[SQ:.*]] = arith.mulf %[[S]], %[[Q]]
// COMMON: %[[DS:.*]] = llvm.intr.fma(%[[X]], %[[SQ]], %[[S]])
// COMMON: scf.yield %[[DS]]
// COMMON: } else {
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
