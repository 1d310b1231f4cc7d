//===- HostObject.cpp - Host kernels as an object file --------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file compiles the host kernels, at build time, into the object file
// the runtime links: there is no MLIR or LLVM at run time.
//
//===----------------------------------------------------------------------===//

#include "HostObject.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;

FailureOr<std::string> mlir::cake::emitHostObject(ModuleOp module) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple("x86_64-unknown-linux-gnu");
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module.emitError("no LLVM target for the host kernels: ") << error;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, kHostCpu, "", llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));

  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context, "cake_host_kernels");
  if (!llvmModule)
    return module.emitError("cannot translate the host kernels to LLVM IR");
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());
  if (llvm::Error failure =
          makeOptimizingTransformer(3, 0, machine.get())(llvmModule.get()))
    return module.emitError("cannot optimize the host kernels: ")
           << llvm::toString(std::move(failure));

  SmallString<0> object;
  llvm::raw_svector_ostream stream(object);
  llvm::legacy::PassManager passes;
  if (machine->addPassesToEmitFile(passes, stream, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return module.emitError("cannot emit an object file for ") << kHostCpu;
  passes.run(*llvmModule);
  return std::string(object.str());
}
