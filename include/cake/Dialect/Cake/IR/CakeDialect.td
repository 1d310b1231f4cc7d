//===- CakeDialect.td - The cake dialect -------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_DIALECT_CAKE_IR_CAKEDIALECT_TD
#define CAKE_DIALECT_CAKE_IR_CAKEDIALECT_TD

include "mlir/IR/OpBase.td"

def Cake_Dialect : Dialect {
  let name = "cake";
  let cppNamespace = "::mlir::cake";
  let summary = "Packed variable-length causal depthwise conv1d for training";
  let description = [{
    The cake dialect describes the forward and backward of the causal depthwise
    conv1d that state-space and linear-attention models run in every layer, over
    documents packed back to back and delimited by `cu_seqlens`.

    It has two levels. The op level (`cake.conv1d_fwd`, `cake.conv1d_bwd`) is what
    a user thinks of: whole buffers in, whole buffers out. The tile level
    (`cake.fwd_tile`, `cake.bwd_tile`, `cake.partials_reduce`) is what tiling
    produces: one thread's share of the work, with the fusion decisions already
    made, which later passes map to the GPU and expand into loops.

    All ops work on memrefs in destination-passing style: the kernels are the
    product, so there is no tensor-level program to bufferize.
  }];
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

#endif // CAKE_DIALECT_CAKE_IR_CAKEDIALECT_TD
