//===- Launch.cpp - Launching the forward and backward passes -------------===//
//
// SPDX-License-Identifier: Apache-2.0
//
//===----------------------------------------------------------------------===//
//
// This file implements the forward and backward launches of
// docs/kernel-abi.md: the choice of kernels, the grids, the packing of memref
// parameters, and cuLaunchKernelEx on the caller's stream. Every check runs
// before the first launch; nothing reads device memory or synchronizes.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>

using namespace cake::runtime;
using namespace cake::runtime::detail;

static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

//===----------------------------------------------------------------------===//
// Device context
//===----------------------------------------------------------------------===//

/// Returns the primary context of `device`, retained once per process and
/// never released, like the one PyTorch uses.
static CUcontext getPrimaryContext(const Driver &driver, CUdevice device) {
  static std::mutex mutex;
  static std::map<CUdevice, CUcontext> contexts;
  std::lock_guard<std::mutex> lock(mutex);
  CUcontext &context = contexts[device];
  if (!context)
    checkResult(driver.cuDevicePrimaryCtxRetain(&context, device),
                "cuDevicePrimaryCtxRetain");
  return context;
}

namespace {
/// Makes a context of a device current for the guard's life, and gives the
/// kernels loaded into it. The current context (normally PyTorch's) is kept
/// when it belongs to the device. If no context is current, the device's
/// primary context is made current and stays so; if another device's is, the
/// primary context is pushed, then popped.
class DeviceContextGuard {
public:
  explicit DeviceContextGuard(int device) : device(device) {
    const Driver &driver = getDriver();
    // A thread launches on one device, in one context, call after call: when
    // the current context is the one the thread's last guard kept or made
    // current for the device, it is that device's and its kernels are loaded,
    // and one driver call is all it takes to know. (Like the modules, this
    // takes a context's handle to name it for the life of the process.)
    CUcontext current = nullptr;
    checkResult(driver.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    if (current && current == recent.context && device == recent.device) {
      context = current;
      loaded = recent.module;
      return;
    }
    CUdevice handle;
    checkResult(driver.cuDeviceGet(&handle, device), "cuDeviceGet");
    if (current) {
      CUdevice currentDevice;
      checkResult(driver.cuCtxGetDevice(&currentDevice), "cuCtxGetDevice");
      if (currentDevice == handle) {
        context = current;
        remember = true;
        return;
      }
    }
    context = getPrimaryContext(driver, handle);
    if (!current) {
      checkResult(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent");
      remember = true;
      return;
    }
    checkResult(driver.cuCtxPushCurrent(context), "cuCtxPushCurrent");
    pushed = true;
  }
  DeviceContextGuard(const DeviceContextGuard &) = delete;
  DeviceContextGuard &operator=(const DeviceContextGuard &) = delete;
  ~DeviceContextGuard() {
    CUcontext popped;
    if (pushed)
      getDriver().cuCtxPopCurrent(&popped);
  }

  /// Returns the kernels of the context, loading them on first use.
  const LoadedModule &module() {
    if (!loaded) {
      loaded = &getModule(context);
      // A pushed context is not the thread's own: the next call starts over.
      if (remember)
        recent = {context, device, loaded};
    }
    return *loaded;
  }

private:
  /// The context a thread's last guard left current, for `device`.
  struct Recent {
    CUcontext context = nullptr;
    int device = 0;
    const LoadedModule *module = nullptr;
  };
  static thread_local Recent recent;

  int device;
  CUcontext context = nullptr;
  const LoadedModule *loaded = nullptr;
  bool remember = false;
  bool pushed = false;
};

thread_local DeviceContextGuard::Recent DeviceContextGuard::recent;
} // namespace

std::string cake::runtime::loadKernels(int device) {
  DeviceContextGuard guard(device);
  return guard.module().image;
}

//===----------------------------------------------------------------------===//
// Kernel parameters
//===----------------------------------------------------------------------===//

namespace {
/// The operands the runtime passes to kernels.
enum class Operand : uint8_t {
  X,
  Weight,
  CuSeqlens,
  Bias,
  Y,
  Dy,
  Dx,
  Partials,
  Dweight,
  Dbias,
  Parts,
  TileBegin,
  TileEnd,
};
constexpr size_t kNumOperands = size_t(Operand::TileEnd) + 1;

/// The rank of an index operand in kOperandParams.
constexpr int kIndex = -1;

/// The manifest's parameter of each operand: its name and rank (kIndex for an
/// index), by Operand.
constexpr std::pair<const char *, int> kOperandParams[kNumOperands] = {
    {"x", 2},
    {"weight", 2},
    {"cu_seqlens", 1},
    {"bias", 1},
    {"y", 2},
    {"dy", 2},
    {"dx", 2},
    {"partials", 2},
    {"dweight", 2},
    {"dbias", 1},
    {"parts", kIndex},
    {"tile_begin", kIndex},
    {"tile_end", kIndex}};

/// The most 64-bit words a launch passes: a memref takes 3 + 2 * rank, an
/// index one, and a kernel takes each operand at most once (the manifest
/// names no parameter twice).
constexpr size_t kMaxWords = [] {
  size_t words = 0;
  for (const auto &param : kOperandParams)
    words += param.second == kIndex ? 1 : 3 + 2 * param.second;
  return words;
}();

/// The operands of one launch: which are given, and their values.
class Operands {
public:
  /// Gives memref `operand` with its data and its sizes (row-major,
  /// contiguous; as many as its rank).
  void memref(Operand operand, DevicePtr data, std::array<int64_t, 2> sizes) {
    Value &value = give(operand);
    value.data = data;
    value.sizes = sizes;
  }
  /// Gives index `operand`.
  void index(Operand operand, int64_t value) {
    give(operand).data = static_cast<uint64_t>(value);
  }

  bool has(Operand operand) const { return values[size_t(operand)].given; }
  size_t count() const { return given; }
  /// The data of a memref, the value of an index.
  uint64_t data(Operand operand) const { return values[size_t(operand)].data; }
  int64_t size(Operand operand, int dim) const {
    return values[size_t(operand)].sizes[dim];
  }

private:
  struct Value {
    bool given = false;
    uint64_t data = 0;
    std::array<int64_t, 2> sizes = {};
  };

  Value &give(Operand operand) {
    Value &value = values[size_t(operand)];
    if (!value.given)
      ++given;
    value.given = true;
    return value;
  }

  std::array<Value, kNumOperands> values;
  size_t given = 0;
};

/// A launch's parameters as 64-bit words; a fixed array, so that packing
/// allocates nothing.
struct ParamWords {
  std::array<uint64_t, kMaxWords> words;
  size_t size = 0;
};
} // namespace

/// Returns, by kernel position, each parameter's operand: the one of the same
/// name, kind and rank, or none when the runtime passes no such operand.
/// Resolved once, so that a launch compares no names.
static const std::vector<std::vector<std::optional<Operand>>> &getLayouts() {
  static const std::vector<std::vector<std::optional<Operand>>> layouts = [] {
    std::vector<std::vector<std::optional<Operand>>> result;
    for (const KernelInfo &kernel : getKernels()) {
      std::vector<std::optional<Operand>> &layout = result.emplace_back();
      for (const KernelInfo::Param &param : kernel.params) {
        bool index = param.kind == KernelInfo::Param::Kind::Index;
        std::optional<Operand> &operand = layout.emplace_back();
        for (size_t i = 0; i < kNumOperands; ++i) {
          auto [name, rank] = kOperandParams[i];
          if (param.name == name &&
              (index ? rank == kIndex : rank != kIndex && param.rank == rank))
            operand = Operand(i);
        }
      }
    }
    return result;
  }();
  return layouts;
}

/// Returns the operands of `kernel` as 64-bit words in the order of the
/// manifest's params: a memref as `allocated, aligned, offset, sizes...,
/// strides...`, an index as itself. Both targets take them so.
static ParamWords packParams(const KernelInfo &kernel,
                             const Operands &operands) {
  const std::vector<std::optional<Operand>> &layout =
      getLayouts()[indexOf(kernel)];
  ParamWords result;
  uint64_t *words = result.words.data();
  for (size_t i = 0; i < layout.size(); ++i) {
    if (!layout[i] || !operands.has(*layout[i])) {
      const KernelInfo::Param &param = kernel.params[i];
      throw std::runtime_error("cake: kernel " + kernel.name + " takes '" +
                               param.name + ":" +
                               (param.kind == KernelInfo::Param::Kind::Index
                                    ? std::string("index")
                                    : std::to_string(param.rank)) +
                               "', which the runtime does not pass");
    }
    Operand operand = *layout[i];
    int rank = kOperandParams[size_t(operand)].second;
    if (rank == kIndex) {
      *words++ = operands.data(operand);
      continue;
    }
    *words++ = operands.data(operand);
    *words++ = operands.data(operand);
    *words++ = 0;
    for (int d = 0; d < rank; ++d)
      words[d] = static_cast<uint64_t>(operands.size(operand, d));
    // Row-major strides, innermost last.
    uint64_t stride = 1;
    for (int d = rank; d-- > 0; stride *= operands.size(operand, d))
      words[rank + d] = stride;
    words += 2 * rank;
  }
  if (layout.size() != operands.count())
    throw std::runtime_error("cake: kernel " + kernel.name +
                             " takes fewer operands than the runtime passes");
  result.size = words - result.words.data();
  return result;
}

//===----------------------------------------------------------------------===//
// Kernel launch
//===----------------------------------------------------------------------===//

namespace {
/// One GPU kernel launch, prepared (function, grid, parameters) before any
/// launch is issued.
class Launch {
public:
  Launch(const KernelInfo &kernel, CUfunction function, int64_t gridX,
         const Operands &operands)
      : kernel(kernel), function(function),
        params(packParams(kernel, operands)) {
    if (gridX < 1 || gridX > INT32_MAX || kernel.block > 1024)
      throw std::runtime_error(
          "cake: kernel " + kernel.name + " cannot be launched with grid " +
          std::to_string(gridX) + " and block " + std::to_string(kernel.block));
    config.gridDimX = static_cast<unsigned>(gridX);
    config.gridDimY = 1;
    config.gridDimZ = 1;
    config.blockDimX = static_cast<unsigned>(kernel.block);
    config.blockDimY = 1;
    config.blockDimZ = 1;
  }
  Launch(const Launch &) = delete;
  Launch &operator=(const Launch &) = delete;

  /// Launches the kernel on `stream`; with `programmaticDependent`, as a
  /// programmatic dependent launch of the previous kernel on the stream.
  void issue(StreamHandle stream, bool programmaticDependent) {
    CUlaunchAttribute attribute = {};
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    config.hStream = reinterpret_cast<CUstream>(stream);
    config.attrs = programmaticDependent ? &attribute : nullptr;
    config.numAttrs = programmaticDependent ? 1 : 0;
    std::array<void *, kMaxWords> pointers;
    for (size_t i = 0; i < params.size; ++i)
      pointers[i] = &params.words[i];
    checkResult(getDriver().cuLaunchKernelEx(&config, function, pointers.data(),
                                             nullptr),
                "cuLaunchKernelEx of kernel", kernel.name);
  }

private:
  const KernelInfo &kernel;
  CUfunction function;
  CUlaunchConfig config = {};
  ParamWords params;
};
} // namespace

/// Runs the tiles [0, tiles) of host kernel `kernel`, split into contiguous
/// ranges among the host's cores, and returns when all are done. Which core
/// runs a tile changes nothing in the results: every tile writes its own
/// outputs.
static void runOnHost(const KernelInfo &kernel, int64_t tiles,
                      Operands operands) {
  HostKernel run = getHostKernel(kernel);
  int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1,
                                        std::max<int64_t>(1, tiles));
  std::vector<ParamWords> words;
  for (int64_t t = 0; t < threads; ++t) {
    operands.index(Operand::TileBegin, t * tiles / threads);
    operands.index(Operand::TileEnd, (t + 1) * tiles / threads);
    words.push_back(packParams(kernel, operands));
  }
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t) {
    try {
      workers.emplace_back(run, words[t].words.data());
    } catch (const std::system_error &) {
      run(words[t].words.data()); // No thread to be had: the range runs here.
    }
  }
  run(words[0].words.data());
  for (std::thread &worker : workers)
    worker.join();
}

//===----------------------------------------------------------------------===//
// Forward and backward
//===----------------------------------------------------------------------===//

/// Throws unless `value` (the Python argument `name`) is one of `allowed`.
template <typename E>
static void checkOneOf(const char *name, E value,
                       std::initializer_list<E> allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end())
    return;
  std::string expected;
  for (E option : allowed)
    expected +=
        (expected.empty() ? "'" : ", '") + std::string(nameOf(option)) + "'";
  throw std::runtime_error("cake: " + std::string(name) + " must be one of " +
                           expected + ", got '" + std::string(nameOf(value)) +
                           "'");
}

/// The most tokens a launch takes. The kernels count tokens in 32 bits (no
/// token exceeds cu_seqlens' int32 range), and a row loop runs past S by
/// its rows in flight, far fewer than the margin.
constexpr int64_t kMaxTokens = (int64_t(1) << 31) - (int64_t(1) << 16);

/// Throws unless S and C make sense.
static void checkSizes(int64_t S, int64_t C) {
  if (S < 0 || C <= 0)
    throw std::runtime_error("cake: bad sizes S=" + std::to_string(S) +
                             " C=" + std::to_string(C));
  if (S > kMaxTokens)
    throw std::runtime_error("cake: S=" + std::to_string(S) +
                             " tokens is more than the kernels take, " +
                             std::to_string(kMaxTokens) + " (2^31 - 2^16)");
}

/// Throws unless the sizes of a call over `numDocs` documents make sense.
static void checkSizes(int64_t S, int64_t C, int64_t numDocs) {
  checkSizes(S, C);
  if (numDocs < 0)
    throw std::runtime_error("cake: bad sizes num_docs=" +
                             std::to_string(numDocs));
}

/// Throws unless the weight and bias dtypes are ones the kernels take.
static void checkParameterDtypes(DType weight, DType bias) {
  checkOneOf("weight_dtype", weight, {DType::F32, DType::BF16});
  checkOneOf("bias_dtype", bias, {DType::None, DType::F32, DType::BF16});
}

/// The target of a call on `device`. On a GPU the driver loads first, so
/// that a machine without one says so before any argument is judged.
static KernelInfo::Target callTarget(int device) {
  KernelInfo::Target target = targetOf(device);
  if (target == KernelInfo::Target::Gpu)
    getDriver();
  return target;
}

//===----------------------------------------------------------------------===//
// Grid shape
//===----------------------------------------------------------------------===//

/// maxParts of a host kernel.
static int64_t hostMaxParts(const KernelInfo &kernel, int64_t C) {
  return std::max<int64_t>(1,
                           kHostPartialsBytes / ((kernel.width + 1) * C * 8));
}

/// maxParts of a GPU kernel of which the device holds `residentThreads`
/// threads at once: `waves` waves of them.
static int64_t gpuMaxParts(const KernelInfo &kernel, int64_t C,
                           int64_t residentThreads, int64_t waves) {
  return waves *
         std::max<int64_t>(1, residentThreads / (C / kernel.vectorChannels));
}

int64_t cake::runtime::maxParts(const KernelInfo &kernel, int64_t C,
                                int device) {
  if (!kernel.supportsChannels(C) || kernel.target != targetOf(device))
    throw std::runtime_error("cake: kernel " + kernel.name +
                             " cannot run with C=" + std::to_string(C) +
                             " on device " + std::to_string(device));
  if (kernel.target == KernelInfo::Target::Host)
    return hostMaxParts(kernel, C);
  DeviceContextGuard guard(device);
  return gpuMaxParts(kernel, C, guard.module().get(kernel).residentThreads,
                     kernel.waves);
}

/// partsFor of a kernel that may split into `maxParts` parts.
static int64_t partsWithin(const KernelInfo &kernel, int64_t S,
                           int64_t maxParts) {
  int64_t minTokens = kernel.target == KernelInfo::Target::Host
                          ? kMinHostPartTokens
                          : kMinPartTokens;
  int64_t byLength = std::max<int64_t>(1, ceilDiv(S, minTokens));
  return std::min(maxParts, byLength);
}

int64_t cake::runtime::partsFor(const KernelInfo &kernel, int64_t S, int64_t C,
                                int device) {
  return partsWithin(kernel, S, maxParts(kernel, C, device));
}

/// The tiles of a fwd or bwd launch: one per (part, channel group).
static int64_t tileCount(const KernelInfo &kernel, int64_t parts, int64_t C) {
  return parts * (C / kernel.vectorChannels);
}

/// The most parts a GPU forward in `kernel`'s configuration splits S tokens
/// into: its waves, or more where those would make parts longer than its
/// max_part_tokens.
static int64_t gpuForwardMaxParts(const KernelInfo &kernel, int64_t S,
                                  int64_t C, int64_t residentThreads) {
  int64_t byWaves = gpuMaxParts(kernel, C, residentThreads, kernel.waves);
  if (kernel.maxPartTokens == 0)
    return byWaves;
  return std::max(byWaves, ceilDiv(S, kernel.maxPartTokens));
}

/// The share of their waves within which two forward grids count as filling
/// them alike. Past a few waves blocks do not run in lockstep, and a last
/// wave's idle slots cost less than they count: at 65536 x 8192 on the H100
/// the `_long` configuration in parts of 18 tokens, 98.5% filled, was 5%
/// faster than the first, 100% (docs/benchmarks.md, 2026-12-07 21:2x and
/// 2026-12-08 01:04).
static constexpr double kFillTolerance = 0.02;

namespace {
/// The grid of a GPU forward in one configuration, and how well it fills the
/// device's waves.
struct GpuForwardGrid {
  const KernelInfo *kernel;
  int64_t parts, blocks;
  /// Blocks the device holds at once, and the block slots of the waves the
  /// grid takes (whole waves: the last one's idle slots included).
  int64_t residentBlocks, slots;

  GpuForwardGrid(const KernelInfo &kernel, int64_t residentThreads, int64_t S,
                 int64_t C)
      : kernel(&kernel),
        parts(partsWithin(kernel, S,
                          gpuForwardMaxParts(kernel, S, C, residentThreads))),
        blocks(ceilDiv(tileCount(kernel, parts, C), kernel.block)),
        residentBlocks(std::max<int64_t>(1, residentThreads / kernel.block)),
        slots(ceilDiv(blocks, residentBlocks) * residentBlocks) {}

  /// The share of its waves' block slots the grid fills.
  double filled() const { return double(blocks) / double(slots); }

  /// Whether this grid leaves less of its waves idle than `other`, past
  /// kFillTolerance, or about as little with more threads (rows in flight)
  /// resident.
  bool fillsBetterThan(const GpuForwardGrid &other) const {
    if (std::abs(filled() - other.filled()) > kFillTolerance)
      return filled() > other.filled();
    return residentBlocks * kernel->block >
           other.residentBlocks * other.kernel->block;
  }
};
} // namespace

/// The forward rule of docs/kernel-abi.md on a GPU that holds
/// `residentThreads(i)` threads of `configs[i]` at once: each configuration
/// at its waves and longest part, the one that fills them best among the
/// first and those whose grid takes at least a whole wave. More rows in
/// flight make a configuration faster unless its grid leaves much of a last
/// wave idle; below a wave nothing was measured to beat the first. Documents
/// shorter than the window need no case of their own since a part's subgroup
/// searches cu_seqlens together (docs/benchmark-history-2026-12-07.md, 13:02).
/// The forward sums nothing across parts, so y does not depend on the
/// choice.
template <typename ResidentThreads>
static ForwardLaunch
gpuForwardRuleOf(const std::vector<const KernelInfo *> &configs,
                 ResidentThreads residentThreads, int64_t S, int64_t C) {
  std::optional<GpuForwardGrid> best;
  for (size_t i = 0; i < configs.size(); ++i) {
    GpuForwardGrid grid(*configs[i], residentThreads(i), S, C);
    if (!best)
      best = grid;
    else if (grid.blocks >= grid.residentBlocks && grid.fillsBetterThan(*best))
      best = grid;
  }
  return {best->kernel, best->parts};
}

/// The forward's kernel and parts over S tokens: on the GPU whose kernels
/// `module` holds, or on the host where it is null.
static ForwardLaunch
forwardLaunchOn(const LoadedModule *module,
                const std::vector<const KernelInfo *> &configs, int64_t S,
                int64_t C) {
  const KernelInfo &first = *configs.front();
  if (!module)
    return {&first, partsWithin(first, S, hostMaxParts(first, C))};
  return gpuForwardRuleOf(
      configs,
      [&](size_t i) { return module->get(*configs[i]).residentThreads; }, S,
      C);
}

void cake::runtime::forward(const ForwardArgs &args) {
  KernelInfo::Target target = callTarget(args.device);
  checkSizes(args.S, args.C, args.numDocs);
  checkParameterDtypes(args.weightDtype, args.biasDtype);
  const std::vector<const KernelInfo *> &configs = routeKernels(
      target, Op::Fwd, args.weightDtype, args.biasDtype, Policy::None, args.C);
  if (args.S == 0)
    return;

  int64_t S = args.S, C = args.C, width = configs.front()->width;
  Operands operands;
  operands.memref(Operand::X, args.x, {S, C});
  operands.memref(Operand::Weight, args.weight, {C, width});
  operands.memref(Operand::CuSeqlens, args.cuSeqlens, {args.numDocs + 1});
  operands.memref(Operand::Y, args.y, {S, C});
  if (args.biasDtype != DType::None)
    operands.memref(Operand::Bias, args.bias, {C});

  if (target == KernelInfo::Target::Host) {
    ForwardLaunch launch = forwardLaunchOn(nullptr, configs, S, C);
    operands.index(Operand::Parts, launch.parts);
    return runOnHost(*launch.kernel, tileCount(*launch.kernel, launch.parts, C),
                     operands);
  }
  DeviceContextGuard guard(args.device);
  ForwardLaunch launch = forwardLaunchOn(&guard.module(), configs, S, C);
  const KernelInfo &kernel = *launch.kernel;
  operands.index(Operand::Parts, launch.parts);
  Launch(kernel, guard.module().get(kernel).function,
         ceilDiv(tileCount(kernel, launch.parts, C), kernel.block), operands)
      .issue(args.stream, false);
}

ForwardLaunch cake::runtime::forwardLaunch(int device, DType weight, DType bias,
                                           int64_t S, int64_t C) {
  KernelInfo::Target target = callTarget(device);
  checkSizes(S, C);
  const std::vector<const KernelInfo *> &configs =
      routeKernels(target, Op::Fwd, weight, bias, Policy::None, C);
  if (S == 0)
    return {configs.front(), 0};
  if (target == KernelInfo::Target::Host)
    return forwardLaunchOn(nullptr, configs, S, C);
  DeviceContextGuard guard(device);
  return forwardLaunchOn(&guard.module(), configs, S, C);
}

ForwardLaunch
cake::runtime::gpuForwardRule(DType weight, DType bias, int64_t S, int64_t C,
                              const std::vector<int64_t> &residentThreads) {
  checkSizes(S, C);
  const std::vector<const KernelInfo *> &configs = routeKernels(
      KernelInfo::Target::Gpu, Op::Fwd, weight, bias, Policy::None, C);
  if (residentThreads.size() != configs.size())
    throw std::runtime_error("cake: " + std::to_string(residentThreads.size()) +
                             " resident thread counts for " +
                             std::to_string(configs.size()) +
                             " forward configurations");
  for (int64_t threads : residentThreads)
    if (threads < 1)
      throw std::runtime_error("cake: resident threads must be positive");
  if (S == 0)
    return {configs.front(), 0};
  return gpuForwardRuleOf(
      configs, [&](size_t i) { return residentThreads[i]; }, S, C);
}

void cake::runtime::backward(const BackwardArgs &args) {
  KernelInfo::Target target = callTarget(args.device);
  checkSizes(args.S, args.C, args.numDocs);
  checkParameterDtypes(args.weightDtype, args.biasDtype);
  checkOneOf("policy", args.policy, {Policy::BF16, Policy::FP32});
  const KernelInfo &bwd = selectKernel(target, Op::Bwd, args.weightDtype,
                                       args.biasDtype, args.policy, args.C);
  const KernelInfo &reduce = successorOf(bwd);

  int64_t S = args.S, C = args.C, width = bwd.width;
  bool hasBias = args.biasDtype != DType::None;
  int64_t columns = width * C + (hasBias ? C : 0);
  Operands bwdOperands, reduceOperands;
  bwdOperands.memref(Operand::X, args.x, {S, C});
  bwdOperands.memref(Operand::Weight, args.weight, {C, width});
  bwdOperands.memref(Operand::CuSeqlens, args.cuSeqlens, {args.numDocs + 1});
  bwdOperands.memref(Operand::Dy, args.dy, {S, C});
  bwdOperands.memref(Operand::Dx, args.dx, {S, C});
  reduceOperands.memref(Operand::Dweight, args.dweight, {C, width});
  if (hasBias) {
    bwdOperands.memref(Operand::Bias, args.bias, {C});
    reduceOperands.memref(Operand::Dbias, args.dbias, {C});
  }
  // The partial rows: one per part, which on a GPU the occupancy in the
  // launch's context decides.
  auto givePartials = [&](int64_t parts) {
    for (Operands *operands : {&bwdOperands, &reduceOperands})
      operands->memref(Operand::Partials, args.workspace,
                       {parts, (width + 1) * C});
  };

  if (target == KernelInfo::Target::Host) {
    int64_t parts = S == 0 ? 0 : partsWithin(bwd, S, hostMaxParts(bwd, C));
    givePartials(parts);
    if (S > 0)
      runOnHost(bwd, tileCount(bwd, parts, C), bwdOperands);
    return runOnHost(reduce, columns, reduceOperands);
  }
  DeviceContextGuard guard(args.device);
  const LoadedModule &module = guard.module();
  std::optional<Launch> bwdLaunch;
  if (S > 0) {
    const LoadedKernel &loaded = module.get(bwd);
    int64_t parts = partsWithin(
        bwd, S, gpuMaxParts(bwd, C, loaded.residentThreads, bwd.waves));
    givePartials(parts);
    bwdLaunch.emplace(bwd, loaded.function,
                      ceilDiv(tileCount(bwd, parts, C), bwd.block),
                      bwdOperands);
  } else {
    givePartials(0);
  }
  // A reduce whose columns are shared by several lanes runs whole subgroups.
  int64_t reduceThreads = columns;
  if (reduce.lanesPerItem > 1)
    reduceThreads = ceilDiv(columns * reduce.lanesPerItem, 32) * 32;
  Launch reduceLaunch(reduce, module.get(reduce).function,
                      ceilDiv(reduceThreads, reduce.block), reduceOperands);
  if (bwdLaunch)
    bwdLaunch->issue(args.stream, false);
  // Without a bwd launch, plain stream order is all the reduce needs.
  reduceLaunch.issue(args.stream,
                     /*programmaticDependent=*/bwdLaunch.has_value());
}
