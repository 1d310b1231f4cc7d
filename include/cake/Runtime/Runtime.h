//===- Runtime.h - Launching Cake's generated kernels -----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0
//
//===----------------------------------------------------------------------===//
//
// This file declares the Cake runtime: the manifest of the kernels embedded at
// build time, the choice of a kernel for a call, the backward workspace size,
// the loading of the kernels, and the launches of the forward and backward
// passes on a caller's stream (docs/kernel-abi.md). Every kernel exists for
// two targets: the GPU, through the CUDA driver that the runtime loads at run
// time, and the host, as native code linked in; device index kHostDevice
// (-1) names the host.
//
// Every function reports errors by throwing std::runtime_error.
//
//===----------------------------------------------------------------------===//

#ifndef CAKE_RUNTIME_RUNTIME_H
#define CAKE_RUNTIME_RUNTIME_H

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace cake::runtime {

/// The device index of the host (the CPU) in every function that takes one.
inline constexpr int kHostDevice = -1;

/// What a kernel does.
enum class Op { Fwd, Bwd, Reduce };
/// An element type of the API's parameters and accumulators; None for an
/// absent bias or a kernel without accumulators.
enum class DType { None, F32, BF16, F64 };
/// The SiLU' preactivation policy of a backward (SPEC.md); None for the other
/// kernels.
enum class Policy { None, BF16, FP32 };

/// The manifest's and the Python API's names: "fwd", "f32", "bf16", "none"...
std::string_view nameOf(Op op);
std::string_view nameOf(DType dtype);
std::string_view nameOf(Policy policy);
/// Parses such a name; throws std::runtime_error naming `what` and the names
/// allowed unless `text` is one of `allowed`.
Op parseOp(std::string_view text, const char *what,
           std::initializer_list<Op> allowed);
DType parseDType(std::string_view text, const char *what,
                 std::initializer_list<DType> allowed);
Policy parsePolicy(std::string_view text, const char *what,
                   std::initializer_list<Policy> allowed);

/// One `kernel` line of the manifest; field meanings are in
/// docs/kernel-abi.md.
struct KernelInfo {
  /// One parameter of the kernel, in launch order: a memref of some rank or
  /// an index.
  struct Param {
    enum class Kind { Memref, Index };
    std::string name;
    Kind kind;
    int64_t rank;      ///< Memrefs only.
    int64_t align = 1; ///< Memrefs only: the bytes its address is a multiple of.
  };

  /// What runs the kernel: a GPU (PTX and cubin) or the host (native code).
  enum class Target { Gpu, Host };

  std::string name; ///< Unique among the kernels of its target.
  Target target;
  Op op;
  DType weight; ///< F32 or BF16.
  DType bias;   ///< None, F32 or BF16.
  Policy policy;
  DType acc; ///< F32, F64, or None for a fwd.
  int64_t block;
  /// The parts of S a GPU launch may have, in waves of the threads the
  /// device holds at once (the host rule has no waves).
  int64_t waves;
  /// A forward's longest part on a GPU where `waves` would make them longer,
  /// more parts than the waves then; 0 for none.
  int64_t maxPartTokens;
  int64_t vectorChannels;
  /// Threads that share one item (a reduce's gradient column), adding their
  /// sums across a 32-lane subgroup; the items' threads come in whole
  /// subgroups.
  int64_t lanesPerItem;
  int64_t width;
  /// The kernel this one runs after, on the same target (the bwd kernel of a
  /// reduce); empty for none.
  std::string waitsFor;
  std::vector<Param> params;

  /// Returns true if the kernel can run with `C` channels.
  bool supportsChannels(int64_t C) const;
};

/// Returns the kernels of the embedded manifest, parsed on first use.
const std::vector<KernelInfo> &getKernels();

/// Returns the target of device index `device`.
KernelInfo::Target targetOf(int device);

/// Returns the kernels of one route on `target`, in manifest order: the
/// configurations a call of the route may launch; throws if the manifest holds
/// none, or one that cannot run with `C` channels (the launch contract asks C
/// to suit every kernel).
const std::vector<const KernelInfo *> &
routeKernels(KernelInfo::Target target, Op op, DType weight, DType bias,
             Policy policy, int64_t C);

/// Returns the first of routeKernels: the kernel a call of the route launches
/// where the route has one configuration (every bwd, every host kernel).
const KernelInfo &selectKernel(KernelInfo::Target target, Op op, DType weight,
                               DType bias, Policy policy, int64_t C);

/// The forward kernel a call launches, and its parts.
struct ForwardLaunch {
  const KernelInfo *kernel;
  int64_t parts;
};

/// Returns the ForwardLaunch of a call over S tokens on device `device`: the
/// host rule of docs/kernel-abi.md over the route's configurations. The first
/// one on the host; on a GPU, of the first and those whose grid takes a whole
/// wave, the one whose grid leaves the smallest share of its waves idle (ties,
/// within 2 points: the one the device holds more threads of). S and C are
/// checked as a forward call checks them.
ForwardLaunch forwardLaunch(int device, DType weight, DType bias, int64_t S,
                            int64_t C);

/// forwardLaunch's rule for a GPU that holds `residentThreads[i]` threads of
/// the route's i-th GPU forward configuration at once, without one: what the
/// rule picks on any device, for tests.
ForwardLaunch gpuForwardRule(DType weight, DType bias, int64_t S, int64_t C,
                             const std::vector<int64_t> &residentThreads);

/// Returns the kernel that waits for `kernel` (the reduce of a bwd); throws if
/// the manifest holds none.
const KernelInfo &successorOf(const KernelInfo &kernel);

/// What every caller of the kernels must respect, read off the manifest: the
/// convolution width (all kernels have it) and the multiple C must be of (the
/// least common multiple of the kernels' vector channels, so that every route
/// and target serves it).
struct LaunchContract {
  int64_t width;
  int64_t channelMultiple;
};
const LaunchContract &getLaunchContract();

/// Returns, for each memref parameter of the kernels that a call of `op`
/// (Fwd, or Bwd with its reduce) on `target` may run for the given dtypes and
/// policy (every configuration of the route), the alignment its address
/// needs, in bytes (the largest of the kernels' for a parameter they share).
std::vector<std::pair<std::string, int64_t>>
launchAlignments(KernelInfo::Target target, Op op, DType weight, DType bias,
                 Policy policy);

/// Returns the most parts (token ranges) a launch of the fwd or bwd kernel
/// `kernel` splits its tokens into on device `device`. On a GPU: one thread
/// per (part, channel group) for every thread the device holds at once,
/// max(1, floor(resident_threads / (C / vector_channels))), where
/// resident_threads is the kernel's occupancy (blocks per multiprocessor, from
/// the driver) * multiprocessors * block. On the host: as many as keep the
/// backward's partial rows within kHostPartialsBytes,
/// max(1, floor(kHostPartialsBytes / ((width + 1) * C * 8))).
int64_t maxParts(const KernelInfo &kernel, int64_t C, int device);

/// The bytes of partial rows the host's parts rule allows: enough parts for
/// every core at any C a model uses, few enough that the reduce stays small.
inline constexpr int64_t kHostPartialsBytes = int64_t(16) << 20;

/// Returns the parts of a launch over S tokens: maxParts, but at most one per
/// kMinPartTokens tokens on a GPU, kMinHostPartTokens on the host (and at
/// least one).
int64_t partsFor(const KernelInfo &kernel, int64_t S, int64_t C, int device);

/// Tokens below which a part is not split further on a GPU: its halo of
/// width - 1 rows then costs at most a fifth of its reads.
inline constexpr int64_t kMinPartTokens = 16;

/// The same on the host, where a part is a thread's unit of work and its
/// partial row costs a cache line per channel group.
inline constexpr int64_t kMinHostPartTokens = 64;

/// Returns the bytes of the backward workspace for `C` channels on device
/// `device`: the largest maxParts(...) * (W + 1) * C * 8 over the manifest's
/// bwd kernels, so one workspace serves every route and every S.
int64_t backwardWorkspaceBytes(int64_t C, int device);

/// Returns true if the driver loads, device `device` exists and its compute
/// capability is at least 9.0; for kHostDevice, if the host's CPU runs the
/// host kernels (x86-64 with AVX2 and FMA).
bool isSupported(int device);

/// Returns why the CUDA driver cannot be used, or an empty string if it can.
/// For the host, hostUnavailableReason.
std::string unavailableReason();

/// Returns why the host cannot run the host kernels, or an empty string if it
/// can.
std::string hostUnavailableReason();

/// Loads the embedded kernels into the current context of device `device`
/// (once per context, as the first launch there would) and returns the image
/// they were loaded from: "cubin", the sm_90a cubin the build assembled and
/// checked, on compute capability 9.0; "ptx", compiled by the driver, on any
/// other device. The environment variable CAKE_KERNEL_IMAGE=ptx|cubin
/// overrides the choice when it is read, at a context's first load.
std::string loadKernels(int device);

/// A device address, as torch.Tensor.data_ptr() gives it (a host address for
/// kHostDevice).
using DevicePtr = std::uint64_t;
/// A CUstream, as torch.cuda.Stream.cuda_stream gives it (0 is the legacy
/// default stream); ignored on the host.
using StreamHandle = std::uintptr_t;

/// The operands of the forward pass; all tensors are contiguous.
struct ForwardArgs {
  DevicePtr x = 0;         ///< bf16 [S, C]
  DevicePtr weight = 0;    ///< weightDtype [C, 4]
  DevicePtr cuSeqlens = 0; ///< int32 [numDocs + 1]
  DevicePtr bias = 0;      ///< biasDtype [C]; unused when biasDtype is None
  DevicePtr y = 0;         ///< bf16 [S, C]
  int64_t S = 0;
  int64_t C = 0;
  int64_t numDocs = 0;
  DType weightDtype = DType::F32; ///< F32 or BF16.
  DType biasDtype = DType::None;  ///< None, F32 or BF16.
  int device = 0;
  StreamHandle stream = 0;
};

/// Launches the forward pass on `args.stream`; nothing when S is 0. On the
/// host, runs it on the host's cores and returns when it is done.
void forward(const ForwardArgs &args);

/// The operands of the backward pass; all tensors are contiguous.
struct BackwardArgs {
  DevicePtr x = 0;         ///< bf16 [S, C]
  DevicePtr weight = 0;    ///< weightDtype [C, 4]
  DevicePtr cuSeqlens = 0; ///< int32 [numDocs + 1]
  DevicePtr bias = 0;      ///< biasDtype [C]; unused when biasDtype is None
  DevicePtr dy = 0;        ///< bf16 [S, C]
  DevicePtr dx = 0;        ///< bf16 [S, C]
  DevicePtr dweight = 0;   ///< weightDtype [C, 4]
  DevicePtr dbias = 0;     ///< biasDtype [C]; unused when biasDtype is None
  /// backwardWorkspaceBytes(C, device) bytes, 16-byte aligned.
  DevicePtr workspace = 0;
  int64_t S = 0;
  int64_t C = 0;
  int64_t numDocs = 0;
  DType weightDtype = DType::F32; ///< F32 or BF16.
  DType biasDtype = DType::None;  ///< None, F32 or BF16.
  Policy policy = Policy::BF16;   ///< SiLU' preactivation: BF16 or FP32.
  int device = 0;
  StreamHandle stream = 0;
};

/// Launches the backward pass on `args.stream`: the bwd kernel, then the
/// reduce kernel as its programmatic dependent launch, which writes dweight
/// and dbias. When S is 0, only the reduce runs (in plain stream order) and
/// writes zeros. On the host, runs both on the host's cores, one after the
/// other, and returns when they are done.
void backward(const BackwardArgs &args);

} // namespace cake::runtime

#endif // CAKE_RUNTIME_RUNTIME_H
