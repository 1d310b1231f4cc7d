//===- cake-opt.cpp - Cake's mlir-opt -------------------------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements cake-opt: mlir-opt with exactly Cake's dialects, passes
// and pipelines.
//
//===----------------------------------------------------------------------===//

#include "cake/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::cake::registerCakeDialects(registry);
  mlir::cake::registerCakePasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Cake optimizer driver\n", registry));
}
