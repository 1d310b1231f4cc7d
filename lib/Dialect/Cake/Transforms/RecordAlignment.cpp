//===- RecordAlignment.cpp - The alignment kernel arguments need ----------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements the cake-record-alignment pass (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "cake/Dialect/Cake/Transforms/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::cake {
#define GEN_PASS_DEF_CAKERECORDALIGNMENTPASS
#include "cake/Dialect/Cake/Transforms/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

static int64_t bytesOf(Type element, int64_t count) {
  return count * static_cast<int64_t>(element.getIntOrFloatBitWidth()) / 8;
}

/// What the lowering assumes of a vector access's address: its `alignment`
/// when it has one, else its element's (LLVM's default for the load).
template <typename VectorAccess>
static int64_t assumedAlignment(VectorAccess access) {
  if (std::optional<uint64_t> alignment = access.getAlignment())
    return static_cast<int64_t>(*alignment);
  return bytesOf(access.getVectorType().getElementType(), 1);
}

/// The largest alignment an access to the memory of `memref` assumes, in
/// bytes; 0 for none.
static int64_t widestAccess(Value memref) {
  int64_t widest = 0;
  for (OpOperand &use : memref.getUses()) {
    Operation *user = use.getOwner();
    int64_t bytes = 0;
    if (auto load = dyn_cast<vector::LoadOp>(user))
      bytes = assumedAlignment(load);
    else if (auto store = dyn_cast<vector::StoreOp>(user))
      bytes = assumedAlignment(store);
    else if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(user))
      bytes = use.get() == copy.getSrc()
                  ? bytesOf(copy.getSrc().getType().getElementType(),
                            copy.getDstElements().getZExtValue())
                  : 0;
    else if (isa<memref::LoadOp, memref::StoreOp>(user))
      bytes = bytesOf(cast<MemRefType>(memref.getType()).getElementType(), 1);
    else if (isa<ViewLikeOpInterface>(user))
      bytes = widestAccess(user->getResult(0));
    widest = std::max(widest, bytes);
  }
  return widest;
}

namespace {
struct CakeRecordAlignmentPass
    : cake::impl::CakeRecordAlignmentPassBase<CakeRecordAlignmentPass> {
  void runOnOperation() override {
    getOperation()->walk([](FunctionOpInterface function) {
      if (function.isExternal())
        return;
      // Only the parameters: a gpu.func's entry block also holds its
      // workgroup buffers.
      for (unsigned i = 0, e = function.getArgumentTypes().size(); i < e; ++i) {
        BlockArgument argument = function.getArgument(i);
        if (!isa<MemRefType>(argument.getType()))
          continue;
        int64_t bytes = widestAccess(argument);
        if (bytes > 0)
          function.setArgAttr(i, kAlignAttrName,
                              IntegerAttr::get(IntegerType::get(
                                                   function->getContext(), 64),
                                               bytes));
      }
    });
  }
};
} // namespace
