//===- Runtime.h - Launching Cake's generated kernels -----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0
//
//===----------------------------------------------------------------------===//
//
// This file declares the Cake runtime: the manifest of the kernels embedded at
// build time, the choice of a kernel for a call, the backward workspace size,
// the loading of the kernels, and the launches of the forward and backward
// passes on a caller's stream (docs/kernel-abi.md). The runtime loads the CUDA
// driver at run time, so everything here that needs no GPU also works on a
// machine without one.
//
// Every function reports errors by throwing std::runtime_error.
//
//===----------------------------------------------------------------------===//

#ifndef CAKE_RUNTIME_RUNTIME_H
#define CAKE_RUNTIME_RUNTIME_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cake::runtime {

/// One `kernel` line of the manifest; field meanings are in
/// docs/kernel-abi.md.
struct KernelInfo {
  /// One parameter of the kernel, in launch order: a memref of some rank or
  /// an index.
  struct Param {
    enum class Kind { Memref, Index };
    std::string name;
    Kind kind;
    int64_t rank; ///< Memrefs only.
  };

  std::string name;
  std::string op;     ///< "fwd", "bwd" or "reduce".
  std::string weight; ///< "f32" or "bf16".
  std::string bias;   ///< "none", "f32" or "bf16".
  std::string policy; ///< "bf16", "fp32" or "none".
  std::string acc;    ///< "f32", "f64" or "none".
  int64_t block;
  int64_t vectorChannels;
  int64_t width;
  std::vector<Param> params;

  /// Returns true if the kernel can run with `C` channels.
  bool supportsChannels(int64_t C) const;
};

/// Returns the kernels of the embedded manifest, parsed on first use.
const std::vector<KernelInfo> &getKernels();

/// Returns the kernel to launch for the given manifest fields and channel
/// count; throws if the manifest holds none.
const KernelInfo &selectKernel(std::string_view op, std::string_view weight,
                               std::string_view bias, std::string_view policy,
                               std::string_view acc, int64_t C);

/// Returns the most parts (token ranges) a launch of the fwd or bwd kernel
/// `kernel` splits its tokens into on device `device`: one thread per
/// (part, channel group) for every thread the device holds at once,
/// max(1, floor(resident_threads / (C / vector_channels))), where
/// resident_threads is the kernel's occupancy (blocks per multiprocessor, from
/// the driver) * multiprocessors * block.
int64_t maxParts(const KernelInfo &kernel, int64_t C, int device);

/// Returns the parts of a launch over S tokens: maxParts, but at most one per
/// kMinPartTokens tokens (and at least one).
int64_t partsFor(const KernelInfo &kernel, int64_t S, int64_t C, int device);

/// Tokens below which a part is not split further: its halo of width - 1
/// rows then costs at most a fifth of its reads.
inline constexpr int64_t kMinPartTokens = 16;

/// Returns the bytes of the backward workspace for `C` channels on device
/// `device`: the largest maxParts(...) * (W + 1) * C * 8 over the manifest's
/// bwd kernels, so one workspace serves every route and every S.
int64_t backwardWorkspaceBytes(int64_t C, int device);

/// Returns true if the driver loads, device `device` exists and its compute
/// capability is at least 9.0.
bool isSupported(int device);

/// Returns why the CUDA driver cannot be used, or an empty string if it can.
std::string unavailableReason();

/// Loads the embedded kernels into the current context of device `device`
/// (once per context, as the first launch there would) and returns the image
/// they were loaded from: "cubin", the sm_90a cubin the build assembled and
/// checked, on compute capability 9.0; "ptx", compiled by the driver, on any
/// other device. The environment variable CAKE_KERNEL_IMAGE=ptx|cubin
/// overrides the choice when it is read, at a context's first load.
std::string loadKernels(int device);

/// A device address, as torch.Tensor.data_ptr() gives it.
using DevicePtr = std::uint64_t;
/// A CUstream, as torch.cuda.Stream.cuda_stream gives it (0 is the legacy
/// default stream).
using StreamHandle = std::uintptr_t;

/// The operands of the forward pass; all tensors are contiguous.
struct ForwardArgs {
  DevicePtr x = 0;         ///< bf16 [S, C]
  DevicePtr weight = 0;    ///< weightDtype [C, 4]
  DevicePtr cuSeqlens = 0; ///< int32 [numDocs + 1]
  DevicePtr bias = 0;      ///< biasDtype [C]; unused when biasDtype is "none"
  DevicePtr y = 0;         ///< bf16 [S, C]
  int64_t S = 0;
  int64_t C = 0;
  int64_t numDocs = 0;
  std::string weightDtype; ///< "f32" or "bf16".
  std::string biasDtype;   ///< "none", "f32" or "bf16".
  int device = 0;
  StreamHandle stream = 0;
};

/// Launches the forward pass on `args.stream`; nothing when S is 0.
void forward(const ForwardArgs &args);

/// The operands of the backward pass; all tensors are contiguous.
struct BackwardArgs {
  DevicePtr x = 0;         ///< bf16 [S, C]
  DevicePtr weight = 0;    ///< weightDtype [C, 4]
  DevicePtr cuSeqlens = 0; ///< int32 [numDocs + 1]
  DevicePtr bias = 0;      ///< biasDtype [C]; unused when biasDtype is "none"
  DevicePtr dy = 0;        ///< bf16 [S, C]
  DevicePtr dx = 0;        ///< bf16 [S, C]
  DevicePtr dweight = 0;   ///< weightDtype [C, 4]
  DevicePtr dbias = 0;     ///< biasDtype [C]; unused when biasDtype is "none"
  /// backwardWorkspaceBytes(C, device) bytes, 16-byte aligned.
  DevicePtr workspace = 0;
  int64_t S = 0;
  int64_t C = 0;
  int64_t numDocs = 0;
  std::string weightDtype; ///< "f32" or "bf16".
  std::string biasDtype;   ///< "none", "f32" or "bf16".
  std::string policy;      ///< SiLU' preactivation: "bf16" or "fp32".
  int device = 0;
  StreamHandle stream = 0;
};

/// Launches the backward pass on `args.stream`: the bwd kernel, then the
/// reduce kernel as its programmatic dependent launch, which writes dweight
/// and dbias. When S is 0, only the reduce runs (in plain stream order) and
/// writes zeros.
void backward(const BackwardArgs &args);

} // namespace cake::runtime

#endif // CAKE_RUNTIME_RUNTIME_H
