//===- Passes.td - Conversions out of the cake dialect -----*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_CONVERSION_PASSES_TD
#define CAKE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertCakeToGPUPass : Pass<"convert-cake-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Turn each tiled function into GPU kernels";
  let description = [{
    Each `func.func` whose work is `scf.forall` loops becomes kernels in the
    `gpu.module @cake_kernels`: one `gpu.func` per forall, named after the
    function (`<name>`, then `<name>_1`, ... when there are several), taking the
    function's arguments that it uses, with their argument attributes. The
    function itself is removed: launching is the runtime's job.

    A forall of tiles gets the block size of its tiles' `#cake.tiling`, any
    other the pass's `block-threads`. Its index maps to threads as
    `block_id.x * block + thread_id.x`; threads past the bound do nothing.

    A `cake.lane_sum` becomes a butterfly of `gpu.shuffle xor` over the
    32-lane subgroup, and the kernel records its lanes in
    `cake.lanes_per_item`; the block size must be a multiple of 32.

    Consecutive kernels of one function form a programmatic dependent launch
    chain: a kernel with a successor lets it launch early
    (`griddepcontrol.launch_dependents`), a kernel with a predecessor waits for
    it to complete before its first instruction (`griddepcontrol.wait`). A
    kernel records its predecessor in `cake.waits_for`.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
  let options = [
    Option<"blockThreads", "block-threads", "int64_t",
           /*default=*/"::mlir::cake::DefaultTiling::blockThreads",
           "Threads per block of kernels without tiles">,
  ];
}

def ConvertCakeMathToNVVMPass : Pass<"convert-cake-math-to-nvvm"> {
  let summary = "Lower the activation math to NVVM approximations";
  let description = [{
    Expands `cake.silu` and `cake.silu_derivative` (f32, scalar or vector)
    into arith ops and, per lane, the GPU's `ex2.approx` and `rcp.approx`.
    The sigmoid is formed from h = exp(-|x| / 2), which stays normal (the
    approximation flushes subnormals) down to |x| = 175, and
    r = 1 / (1 + h * h) in [1/2, 1]: sigmoid is r for x >= 0 and
    (h * r) * h otherwise, 1 - sigmoid the other one; the derivative
    s (1 + x (1 - s)) is s + x * r * (h * r) * h. No infinity reaches the
    reciprocal, neither side is computed as 1 minus the other, and small
    results keep their subnormal digits. Without `approx`, r gets one Newton
    step.

    With `common-range`, an op whose lanes are all at least -87 (the common
    case) takes the shorter s = 1 / (1 + exp(-x)), 1 - s = exp(-x) * s
    instead, by one `scf.if` on the lanes' minimum: exp(-x) stays finite and
    s normal there, and the derivative is s + x * (s * (1 - s)) as before.
    Off by default: on an H100 (2026-12-05) it was no faster, and the
    duplicated formula made the many-document backward 2 points slower.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
  let options = [
    Option<"commonRange", "common-range", "bool", /*default=*/"false",
           "Branch to the shorter formula where every lane is at least -87">,
  ];
}

def ConvertCakeMathToArithPass : Pass<"convert-cake-math-to-arith"> {
  let summary = "Lower the activation math to arith and math for the host";
  let description = [{
    Expands `cake.silu` and `cake.silu_derivative` (f32, scalar or vector)
    into the formulas of convert-cake-math-to-nvvm with `math.exp`, itself
    expanded into its polynomial approximation (so that vectors stay
    vectors), and an IEEE division for the reciprocal. `approx` changes
    nothing here; `common-range` is the GPU's.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
  let options = [
    Option<"commonRange", "common-range", "bool", /*default=*/"false",
           "Branch to the shorter formula where every lane is at least -87">,
  ];
}

def ConvertCakeToHostPass : Pass<"convert-cake-to-host", "::mlir::ModuleOp"> {
  let summary = "Turn each tiled function into host kernels";
  let description = [{
    Each `func.func` whose work is `scf.forall` loops becomes functions of its
    own: one per forall, named after the function (`<name>`, then
    `<name>_1`, ...), taking the function's arguments that it uses and two
    more, `tile_begin` and `tile_end` (`cake.param` names), and running the
    forall's iterations `[tile_begin, min(tile_end, bound))` in order. The
    runtime splits a forall's range among its threads; a kernel with a
    predecessor names it in `cake.waits_for` and runs after it. The kernels
    are marked `cake.host_kernel`; the function itself is removed.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect"];
}

def CakeWrapHostKernelsPass : Pass<"cake-wrap-host-kernels",
                                   "::mlir::ModuleOp"> {
  let summary = "Give each host kernel an entry point over packed parameters";
  let description = [{
    After the lowering to the LLVM dialect: for each `llvm.func` marked
    `cake.host_kernel`, adds `<name>_packed(ptr)`, which reads the kernel's
    parameters (pointers and 64-bit integers: memrefs as their expanded
    descriptors) in order as 64-bit words from the array it is given, and
    calls the kernel. The runtime then calls every kernel the same way, with
    the words it would pass a GPU kernel.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // CAKE_CONVERSION_PASSES_TD
