//===- HostObject.h - Host kernels as an object file ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_TOOLS_CAKE_KERNEL_GEN_HOSTOBJECT_H
#define CAKE_TOOLS_CAKE_KERNEL_GEN_HOSTOBJECT_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::cake {

/// The CPU the host kernels are compiled for: AVX2 and FMA, what every x86-64
/// server since 2015 has (the runtime checks before it runs them).
inline constexpr llvm::StringLiteral kHostCpu = "x86-64-v3";

/// Translates `module` (in the LLVM dialect) to LLVM IR, optimizes it at O3
/// and compiles it into an ELF object for x86-64 Linux, position-independent.
FailureOr<std::string> emitHostObject(ModuleOp module);

} // namespace mlir::cake

#endif // CAKE_TOOLS_CAKE_KERNEL_GEN_HOSTOBJECT_H
