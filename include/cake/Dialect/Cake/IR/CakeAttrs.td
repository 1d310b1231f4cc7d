//===- CakeAttrs.td - Attributes of the cake dialect -------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_DIALECT_CAKE_IR_CAKEATTRS_TD
#define CAKE_DIALECT_CAKE_IR_CAKEATTRS_TD

include "cake/Dialect/Cake/IR/CakeDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Cake_ActivationNone : I32EnumCase<"none", 0>;
def Cake_ActivationSilu : I32EnumCase<"silu", 1>;
def Cake_Activation : I32Enum<"Activation",
    "activation applied to the preactivation",
    [Cake_ActivationNone, Cake_ActivationSilu]> {
  let cppNamespace = "::mlir::cake";
}
def Cake_ActivationAttr : EnumAttr<Cake_Dialect, Cake_Activation, "activation"> {
  let assemblyFormat = "`<` $value `>`";
}

// The preactivation the SiLU derivative is evaluated at in the backward: the
// bf16-rounded value the forward's output was computed from, or the exact fp32
// one. It also fixes the precision of the weight-gradient accumulators.
def Cake_SiluGradBf16 : I32EnumCase<"bf16", 0>;
def Cake_SiluGradFp32 : I32EnumCase<"fp32", 1>;
def Cake_SiluGrad : I32Enum<"SiluGrad",
    "preactivation policy of the SiLU derivative",
    [Cake_SiluGradBf16, Cake_SiluGradFp32]> {
  let cppNamespace = "::mlir::cake";
}
def Cake_SiluGradAttr : EnumAttr<Cake_Dialect, Cake_SiluGrad, "silu_grad"> {
  let assemblyFormat = "`<` $value `>`";
}

// How a tile is mapped to threads and fed. Without it, the options of
// cake-tile decide; with it, the op decides for itself (kernels of different
// routes want different register budgets).
def Cake_TilingAttr : AttrDef<Cake_Dialect, "Tiling"> {
  let mnemonic = "tiling";
  let summary = "channels per thread, threads per block and load pipelining";
  let description = [{
    - `vector_channels`: channels one thread owns (8 bf16 are one 16-byte
      access);
    - `block_threads`: threads per GPU block (a multiple of 32);
    - `stages`: row loads in flight ahead of the row being computed, staged
      through shared memory on the GPU (0: loads go straight to registers);
    - `unroll`: rows per iteration of the row loop;
    - `max_registers` (optional): the registers a thread may use, which
      steers ptxas's schedule as much as it bounds occupancy (0: ptxas
      decides; docs/design.md says why the backward has one);
    - `waves` (optional): the parts the runtime splits S into, in waves of
      the device's resident threads (1: one wave of long parts; more: shorter
      parts, never under 16 tokens). A host rule of S, C and the device, so
      the summation order of a backward still depends on those alone
      (docs/kernel-abi.md);
    - `max_part_tokens` (optional, a forward's only): the longest part the
      runtime launches where `waves` would make them longer, as many more
      parts as that takes (0: `waves` alone), however large S grows; a
      backward's parts must stay bounded by C and the device, which size its
      workspace.
  }];
  let parameters = (ins "int64_t":$vector_channels, "int64_t":$block_threads,
                        "int64_t":$stages, "int64_t":$unroll,
                        DefaultValuedParameter<"int64_t", "0">:$max_registers,
                        DefaultValuedParameter<"int64_t", "1">:$waves,
                        DefaultValuedParameter<"int64_t", "0">:$max_part_tokens);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // CAKE_DIALECT_CAKE_IR_CAKEATTRS_TD
