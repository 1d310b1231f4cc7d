//===- Pipelines.h - From the cake dialect to PTX ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_DIALECT_CAKE_PIPELINES_PIPELINES_H
#define CAKE_DIALECT_CAKE_PIPELINES_PIPELINES_H

#include "cake/Dialect/Cake/IR/CakeDialect.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;

namespace cake {

/// Everything that shapes the generated kernels. One struct serves cake-opt,
/// the kernel library build and the tests.
struct CakeToPTXOptions : public PassPipelineOptions<CakeToPTXOptions> {
  PassOptions::Option<std::string> chip{*this, "chip",
                                        llvm::cl::desc("GPU to compile for"),
                                        llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> features{
      *this, "features", llvm::cl::desc("PTX version, as an LLVM feature"),
      llvm::cl::init("+ptx80")};
  PassOptions::Option<unsigned> optLevel{
      *this, "opt-level", llvm::cl::desc("LLVM optimization level"),
      llvm::cl::init(3)};
  PassOptions::Option<int64_t> vectorChannels{
      *this, "vector-channels", llvm::cl::desc("Channels one thread owns"),
      llvm::cl::init(DefaultTiling::vectorChannels)};
  PassOptions::Option<int64_t> blockThreads{
      *this, "block-threads", llvm::cl::desc("Threads per block"),
      llvm::cl::init(DefaultTiling::blockThreads)};
  PassOptions::Option<int64_t> stages{
      *this, "stages",
      llvm::cl::desc("Row loads in flight ahead of the row being computed"),
      llvm::cl::init(DefaultTiling::stages)};
  PassOptions::Option<int64_t> unroll{
      *this, "unroll", llvm::cl::desc("Rows per iteration of the row loop"),
      llvm::cl::init(DefaultTiling::unroll)};
  PassOptions::Option<int64_t> reduceChains{
      *this, "reduce-chains",
      llvm::cl::desc("Running sums per column of the weight-gradient "
                     "reduction"),
      llvm::cl::init(DefaultTiling::reduceChains)};
  PassOptions::Option<int64_t> reduceSlices{
      *this, "reduce-slices",
      llvm::cl::desc("Threads per column of the weight-gradient reduction"),
      llvm::cl::init(DefaultTiling::reduceSlices)};
  PassOptions::Option<bool> fastMath{
      *this, "fast-math",
      llvm::cl::desc("Let the activation use hardware approximations"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> commonRange{
      *this, "common-range",
      llvm::cl::desc("Branch the activation to its shorter formula where "
                     "every lane is at least -87"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> waves{
      *this, "waves",
      llvm::cl::desc("Parts the runtime splits S into, in waves of resident "
                     "threads"),
      llvm::cl::init(1)};
  PassOptions::Option<int64_t> maxPartTokens{
      *this, "max-part-tokens",
      llvm::cl::desc("The longest forward part where waves would make them "
                     "longer (0: waves alone)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> searchFanout{
      *this, "search-fanout",
      llvm::cl::desc("Pieces a step of a tile's document search splits its "
                     "range into"),
      llvm::cl::init(8)};
  PassOptions::Option<int64_t> subgroupSearchProbes{
      *this, "subgroup-search-probes",
      llvm::cl::desc("Entries each lane reads a step where a subgroup's "
                     "forward tiles search cu_seqlens together (0: every "
                     "thread searches alone)"),
      llvm::cl::init(1)};
};

/// Cake ops to `gpu.func` kernels in `gpu.module @cake_kernels`, expanded to
/// row loops over vectors with their loads staged (arith, cake activation
/// math, memref, nvgpu, nvvm, scf, vector).
void buildCakeToKernelsPipeline(OpPassManager &pm,
                                const CakeToPTXOptions &options);

/// Those kernels to the NVVM dialect, with the NVVM target attached.
void buildKernelsToNVVMPipeline(OpPassManager &pm,
                                const CakeToPTXOptions &options);

/// buildCakeToKernelsPipeline, then buildKernelsToNVVMPipeline: what
/// serialization to PTX starts from.
void buildCakeToNVVMPipeline(OpPassManager &pm,
                             const CakeToPTXOptions &options);

/// buildKernelsToNVVMPipeline, then PTX in a `gpu.binary` (format isa).
void buildKernelsToPTXPipeline(OpPassManager &pm,
                               const CakeToPTXOptions &options);

/// buildCakeToKernelsPipeline, then buildKernelsToPTXPipeline.
void buildCakeToPTXPipeline(OpPassManager &pm, const CakeToPTXOptions &options);

/// What shapes the host kernels.
struct CakeToHostOptions : public PassPipelineOptions<CakeToHostOptions> {
  PassOptions::Option<int64_t> vectorChannels{
      *this, "vector-channels", llvm::cl::desc("Channels one thread owns"),
      llvm::cl::init(DefaultTiling::vectorChannels)};
  PassOptions::Option<int64_t> unroll{
      *this, "unroll", llvm::cl::desc("Rows per iteration of the row loop"),
      llvm::cl::init(DefaultTiling::unroll)};
};

/// Cake ops to host kernels (convert-cake-to-host), each a function over a
/// range of its tiles, expanded to row loops: the same tiles as on the GPU,
/// their rows loaded straight from memory.
void buildCakeToHostKernelsPipeline(OpPassManager &pm,
                                    const CakeToHostOptions &options);

/// Those kernels to the LLVM dialect, the activation with math.exp and IEEE
/// divisions, each with a packed entry point (cake-wrap-host-kernels).
void buildHostKernelsToLLVMPipeline(OpPassManager &pm);

/// buildCakeToHostKernelsPipeline, then buildHostKernelsToLLVMPipeline.
void buildCakeToHostPipeline(OpPassManager &pm,
                             const CakeToHostOptions &options);

/// Registers `cake-to-kernels`, `cake-to-nvvm`, `cake-to-ptx` and
/// `cake-to-host`.
void registerCakePipelines();

} // namespace cake
} // namespace mlir

#endif // CAKE_DIALECT_CAKE_PIPELINES_PIPELINES_H
