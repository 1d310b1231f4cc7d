//===- InitAll.h - Everything Cake registers --------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_INITALL_H
#define CAKE_INITALL_H

namespace mlir {
class DialectRegistry;

namespace cake {

/// The cake dialect, the upstream dialects its pipelines produce, and the
/// interfaces and translations that lowering them to PTX needs.
void registerCakeDialects(DialectRegistry &registry);

/// Cake's passes and pipelines, and the upstream passes that appear in them.
void registerCakePasses();

} // namespace cake
} // namespace mlir

#endif // CAKE_INITALL_H
