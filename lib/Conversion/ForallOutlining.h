//===- ForallOutlining.h - Tiled functions into kernels ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// What convert-cake-to-gpu and convert-cake-to-host share: the foralls of a
// tiled function, each becoming a kernel of its own named after the function,
// with the body ops it depends on recomputed inside and only the arguments it
// uses.
//
//===----------------------------------------------------------------------===//

#ifndef CAKE_LIB_CONVERSION_FORALLOUTLINING_H
#define CAKE_LIB_CONVERSION_FORALLOUTLINING_H

#include "cake/Dialect/Cake/IR/CakeOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::cake {

/// One forall of a tiled function and the kernel it becomes.
struct ForallKernel {
  scf::ForallOp forall;
  std::string name;        ///< <function>, then <function>_1, ...
  std::string predecessor; ///< The kernel before it; empty for the first.
  bool hasSuccessor;
};

/// The functions of `module` whose work is scf.forall loops.
SmallVector<func::FuncOp> tiledFunctions(ModuleOp module);

/// The kernels of `func`; fails, naming `target`, when the function has
/// effects outside its foralls (they would be lost).
FailureOr<SmallVector<ForallKernel>> forallKernels(func::FuncOp func,
                                                   StringRef target);

/// The tiling of the tiles of `forall`; null for a forall of other work.
TilingAttr tilingOf(scf::ForallOp forall);

/// Marks `kernel` with what launching it needs: the tiling of its tiles and
/// the kernel it waits for.
void markKernel(Operation *kernel, const ForallKernel &outlined);

/// The ops of `forall`'s function body that it depends on, in body order.
SmallVector<Operation *> producersOf(scf::ForallOp forall);

/// Gives `kernel` the argument attributes of `func` (names, for whoever
/// launches it), then erases the arguments it does not use.
LogicalResult keepUsedArguments(FunctionOpInterface kernel,
                                func::FuncOp func);

} // namespace mlir::cake

#endif // CAKE_LIB_CONVERSION_FORALLOUTLINING_H
