//===- CakeToHost.cpp - Turn tiled functions into host kernels ------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements convert-cake-to-host: every scf.forall of a tiled
// function becomes a function that runs the iterations [tile_begin, tile_end)
// of it in a loop, for the runtime to split among host threads (see
// Passes.td), and cake-wrap-host-kernels, which gives each kernel a packed
// entry point the runtime can call with any parameter list.
//
//===----------------------------------------------------------------------===//

#include "../ForallOutlining.h"

#include "cake/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::cake {
#define GEN_PASS_DEF_CONVERTCAKETOHOSTPASS
#define GEN_PASS_DEF_CAKEWRAPHOSTKERNELSPASS
#include "cake/Conversion/Passes.h.inc"
} // namespace mlir::cake

using namespace mlir;
using namespace mlir::cake;

namespace {
LogicalResult buildHostKernel(const ForallKernel &outlined, func::FuncOp func) {
  scf::ForallOp forall = outlined.forall;
  Location loc = forall.getLoc();
  OpBuilder b(func);
  Type index = b.getIndexType();
  SmallVector<Type> inputs(func.getArgumentTypes());
  inputs.append({index, index});
  auto kernel = func::FuncOp::create(b, loc, outlined.name,
                                     b.getFunctionType(inputs, {}));
  kernel->setAttr(kHostKernelAttrName, b.getUnitAttr());
  markKernel(kernel, outlined);
  unsigned beginArg = func.getNumArguments(), endArg = beginArg + 1;
  kernel.setArgAttr(beginArg, kParamAttrName, b.getStringAttr("tile_begin"));
  kernel.setArgAttr(endArg, kParamAttrName, b.getStringAttr("tile_end"));

  Block *entry = kernel.addEntryBlock();
  b.setInsertionPointToStart(entry);
  IRMapping mapping;
  mapping.map(func.getArguments(), entry->getArguments().take_front(beginArg));
  for (Operation *producer : producersOf(forall))
    b.clone(*producer, mapping);
  // The range the runtime asks for, within the forall's.
  Value bound = mapping.lookupOrDefault(
      getValueOrCreateConstantIndexOp(b, loc, forall.getUpperBound(b)[0]));
  Value end = arith::MinUIOp::create(b, loc, entry->getArgument(endArg), bound);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(b, loc, entry->getArgument(beginArg), end, one);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  mapping.map(forall.getInductionVars()[0], loop.getInductionVar());
  for (Operation &op : forall.getBody()->without_terminator())
    b.clone(op, mapping);
  b.setInsertionPointToEnd(entry);
  func::ReturnOp::create(b, loc);
  // tile_begin and tile_end are used: only the function's arguments go.
  return keepUsedArguments(kernel, func);
}

struct ConvertCakeToHostPass
    : cake::impl::ConvertCakeToHostPassBase<ConvertCakeToHostPass> {
  void runOnOperation() override {
    for (func::FuncOp func : tiledFunctions(getOperation())) {
      FailureOr<SmallVector<ForallKernel>> outlined =
          forallKernels(func, "the host");
      if (failed(outlined))
        return signalPassFailure();
      for (const ForallKernel &kernel : *outlined)
        if (failed(buildHostKernel(kernel, func)))
          return signalPassFailure();
      func.erase();
    }
  }
};

/// Adds `<name>_packed(ptr)`, which loads the kernel's parameters as 64-bit
/// words from the array the pointer points to, in order, and calls it.
void wrapHostKernel(LLVM::LLVMFuncOp kernel) {
  Location loc = kernel.getLoc();
  OpBuilder b(kernel->getContext());
  b.setInsertionPointAfter(kernel);
  MLIRContext *context = kernel->getContext();
  auto ptr = LLVM::LLVMPointerType::get(context);
  auto i64 = IntegerType::get(context, 64);
  auto wrapper = LLVM::LLVMFuncOp::create(
      b, loc, (kernel.getName() + "_packed").str(),
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(context), {ptr}));
  Block *entry = wrapper.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  SmallVector<Value> arguments;
  for (auto [i, type] :
       llvm::enumerate(kernel.getFunctionType().getParams())) {
    Value slot = LLVM::GEPOp::create(b, loc, ptr, i64, entry->getArgument(0),
                                     ArrayRef<LLVM::GEPArg>{int32_t(i)});
    Value word = LLVM::LoadOp::create(b, loc, i64, slot);
    arguments.push_back(isa<LLVM::LLVMPointerType>(type)
                            ? Value(LLVM::IntToPtrOp::create(b, loc, type, word))
                            : word);
  }
  LLVM::CallOp::create(b, loc, kernel, arguments);
  LLVM::ReturnOp::create(b, loc, ValueRange());
}

struct CakeWrapHostKernelsPass
    : cake::impl::CakeWrapHostKernelsPassBase<CakeWrapHostKernelsPass> {
  void runOnOperation() override {
    SmallVector<LLVM::LLVMFuncOp> kernels;
    for (auto func : getOperation().getOps<LLVM::LLVMFuncOp>())
      if (func->hasAttr(kHostKernelAttrName))
        kernels.push_back(func);
    for (LLVM::LLVMFuncOp kernel : kernels) {
      if (!llvm::all_of(kernel.getFunctionType().getParams(), [](Type type) {
            return isa<LLVM::LLVMPointerType>(type) || type.isInteger(64);
          })) {
        kernel.emitError("cake-wrap-host-kernels: parameters must be "
                         "pointers or 64-bit integers");
        return signalPassFailure();
      }
      wrapHostKernel(kernel);
    }
  }
};
} // namespace
