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
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

using namespace cake::runtime;
using namespace cake::runtime::detail;

/// The convolution width of the API: weight is [C, 4].
static constexpr int64_t kWidth = 4;

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
/// Makes a context of a device current for the guard's life. The current
/// context (normally PyTorch's) is kept when it belongs to the device. If no
/// context is current, the device's primary context is made current and stays
/// so; if another device's is, the primary context is pushed, then popped.
class DeviceContextGuard {
public:
  explicit DeviceContextGuard(int device) {
    const Driver &driver = getDriver();
    CUdevice handle;
    checkResult(driver.cuDeviceGet(&handle, device),
                "cuDeviceGet(" + std::to_string(device) + ")");
    CUcontext current;
    checkResult(driver.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    if (current) {
      CUdevice currentDevice;
      checkResult(driver.cuCtxGetDevice(&currentDevice), "cuCtxGetDevice");
      if (currentDevice == handle)
        return;
    }
    CUcontext primary = getPrimaryContext(driver, handle);
    if (!current) {
      checkResult(driver.cuCtxSetCurrent(primary), "cuCtxSetCurrent");
      return;
    }
    checkResult(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent");
    pushed = true;
  }
  DeviceContextGuard(const DeviceContextGuard &) = delete;
  DeviceContextGuard &operator=(const DeviceContextGuard &) = delete;
  ~DeviceContextGuard() {
    CUcontext popped;
    if (pushed)
      getDriver().cuCtxPopCurrent(&popped);
  }

private:
  bool pushed = false;
};
} // namespace

std::string cake::runtime::loadKernels(int device) {
  DeviceContextGuard guard(device);
  return getLoadedImage();
}

//===----------------------------------------------------------------------===//
// Kernel launch
//===----------------------------------------------------------------------===//

namespace {
/// A memref operand: its name in the manifest, its data pointer and its sizes
/// (row-major, contiguous).
struct Memref {
  std::string name;
  DevicePtr data;
  std::vector<int64_t> sizes;
};

/// An index operand.
struct Index {
  std::string name;
  int64_t value;
};

/// One kernel launch, prepared (function, grid, parameters) before any launch
/// is issued.
class Launch {
public:
  Launch(const KernelInfo &kernel, int64_t gridX,
         const std::vector<Memref> &memrefs,
         const std::vector<Index> &indices = {})
      : kernel(kernel), function(getFunction(kernel)) {
    if (gridX < 1 || gridX > INT32_MAX || kernel.block > 1024)
      throw std::runtime_error("cake: kernel " + kernel.name +
                               " cannot be launched with grid " +
                               std::to_string(gridX) + " and block " +
                               std::to_string(kernel.block));
    config.gridDimX = static_cast<unsigned>(gridX);
    config.gridDimY = 1;
    config.gridDimZ = 1;
    config.blockDimX = static_cast<unsigned>(kernel.block);
    config.blockDimY = 1;
    config.blockDimZ = 1;
    packParams(memrefs, indices);
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
    checkResult(getDriver().cuLaunchKernelEx(&config, function,
                                             paramPointers.data(), nullptr),
                "cuLaunchKernelEx of kernel " + kernel.name);
  }

private:
  /// Packs the operands in the order of the manifest's params: a memref as
  /// `allocated, aligned, offset, sizes..., strides...`, an index as itself,
  /// all 64-bit.
  void packParams(const std::vector<Memref> &memrefs,
                  const std::vector<Index> &indices) {
    size_t used = 0;
    for (const KernelInfo::Param &param : kernel.params) {
      if (param.kind == KernelInfo::Param::Kind::Index) {
        auto it = std::find_if(indices.begin(), indices.end(),
                               [&](const Index &i) { return i.name == param.name; });
        if (it == indices.end())
          throw missing(param.name + ":index");
        paramValues.push_back(static_cast<uint64_t>(it->value));
        ++used;
        continue;
      }
      auto it =
          std::find_if(memrefs.begin(), memrefs.end(),
                       [&](const Memref &m) { return m.name == param.name; });
      if (it == memrefs.end() ||
          static_cast<int64_t>(it->sizes.size()) != param.rank)
        throw missing(param.name + ":" + std::to_string(param.rank));
      ++used;
      paramValues.insert(paramValues.end(), {it->data, it->data, 0});
      paramValues.insert(paramValues.end(), it->sizes.begin(), it->sizes.end());
      std::vector<uint64_t> strides(it->sizes.size());
      uint64_t stride = 1;
      for (size_t i = strides.size(); i-- > 0; stride *= it->sizes[i])
        strides[i] = stride;
      paramValues.insert(paramValues.end(), strides.begin(), strides.end());
    }
    if (used != memrefs.size() + indices.size())
      throw std::runtime_error("cake: kernel " + kernel.name +
                               " takes fewer operands than the runtime passes");
    for (uint64_t &value : paramValues)
      paramPointers.push_back(&value);
  }

  std::runtime_error missing(const std::string &param) const {
    return std::runtime_error("cake: kernel " + kernel.name + " takes '" +
                              param + "', which the runtime does not pass");
  }

  const KernelInfo &kernel;
  CUfunction function;
  CUlaunchConfig config = {};
  std::vector<uint64_t> paramValues;
  std::vector<void *> paramPointers;
};
} // namespace

//===----------------------------------------------------------------------===//
// Forward and backward
//===----------------------------------------------------------------------===//

/// Throws unless `value` (the Python argument `name`) is one of `allowed`.
static void checkOneOf(const char *name, const std::string &value,
                       std::initializer_list<std::string_view> allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end())
    return;
  std::string expected;
  for (std::string_view option : allowed)
    expected += (expected.empty() ? "'" : ", '") + std::string(option) + "'";
  throw std::runtime_error("cake: " + std::string(name) + " must be one of " +
                           expected + ", got '" + value + "'");
}

/// Throws unless S, C and numDocs make sense.
static void checkSizes(int64_t S, int64_t C, int64_t numDocs) {
  if (S < 0 || C <= 0 || numDocs < 0)
    throw std::runtime_error("cake: bad sizes S=" + std::to_string(S) +
                             " C=" + std::to_string(C) +
                             " num_docs=" + std::to_string(numDocs));
}

/// Returns selectKernel(...) after checking the kernel's width is the API's.
static const KernelInfo &selectForLaunch(std::string_view op,
                                         std::string_view weight,
                                         std::string_view bias,
                                         std::string_view policy,
                                         std::string_view acc, int64_t C) {
  const KernelInfo &kernel = selectKernel(op, weight, bias, policy, acc, C);
  if (kernel.width != kWidth)
    throw std::runtime_error("cake: kernel " + kernel.name + " has width " +
                             std::to_string(kernel.width) + ", expected " +
                             std::to_string(kWidth));
  return kernel;
}

//===----------------------------------------------------------------------===//
// Grid shape
//===----------------------------------------------------------------------===//

/// Returns the threads of `kernel` the device holds at once, from the
/// driver's occupancy of the kernel, computed once per kernel and device.
static int64_t residentThreads(const KernelInfo &kernel, int device) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, int64_t> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace({kernel.name, device}, 0);
  if (!inserted)
    return it->second;
  const Driver &driver = getDriver();
  DeviceContextGuard guard(device);
  CUdevice handle;
  checkResult(driver.cuDeviceGet(&handle, device), "cuDeviceGet");
  int multiprocessors = 0, blocks = 0;
  checkResult(driver.cuDeviceGetAttribute(
                  &multiprocessors,
                  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, handle),
              "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  checkResult(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                  &blocks, getFunction(kernel), int(kernel.block), 0),
              "cuOccupancyMaxActiveBlocksPerMultiprocessor of " + kernel.name);
  it->second = std::max(1, blocks) * int64_t(multiprocessors) * kernel.block;
  return it->second;
}

int64_t cake::runtime::maxParts(const KernelInfo &kernel, int64_t C,
                                int device) {
  if (!kernel.supportsChannels(C))
    throw std::runtime_error("cake: kernel " + kernel.name +
                             " cannot run with C=" + std::to_string(C));
  int64_t groups = C / kernel.vectorChannels;
  return std::max<int64_t>(1, residentThreads(kernel, device) / groups);
}

int64_t cake::runtime::partsFor(const KernelInfo &kernel, int64_t S, int64_t C,
                                int device) {
  int64_t byLength = std::max<int64_t>(1, ceilDiv(S, kMinPartTokens));
  return std::min(maxParts(kernel, C, device), byLength);
}

/// Blocks of a one-dimensional grid over (part, channel group) tiles.
static int64_t tileBlocks(const KernelInfo &kernel, int64_t parts, int64_t C) {
  return ceilDiv(parts * (C / kernel.vectorChannels), kernel.block);
}

void cake::runtime::forward(const ForwardArgs &args) {
  getDriver();
  checkSizes(args.S, args.C, args.numDocs);
  checkOneOf("weight_dtype", args.weightDtype, {"f32", "bf16"});
  checkOneOf("bias_dtype", args.biasDtype, {"none", "f32", "bf16"});
  const KernelInfo &kernel = selectForLaunch(
      "fwd", args.weightDtype, args.biasDtype, "none", "none", args.C);
  if (args.S == 0)
    return;

  int64_t S = args.S, C = args.C;
  int64_t parts = partsFor(kernel, S, C, args.device);
  std::vector<Memref> memrefs = {
      {"x", args.x, {S, C}},
      {"weight", args.weight, {C, kWidth}},
      {"cu_seqlens", args.cuSeqlens, {args.numDocs + 1}},
      {"y", args.y, {S, C}}};
  if (args.biasDtype != "none")
    memrefs.push_back({"bias", args.bias, {C}});

  DeviceContextGuard guard(args.device);
  Launch(kernel, tileBlocks(kernel, parts, C), memrefs, {{"parts", parts}})
      .issue(args.stream, false);
}

void cake::runtime::backward(const BackwardArgs &args) {
  getDriver();
  checkSizes(args.S, args.C, args.numDocs);
  checkOneOf("weight_dtype", args.weightDtype, {"f32", "bf16"});
  checkOneOf("bias_dtype", args.biasDtype, {"none", "f32", "bf16"});
  checkOneOf("policy", args.policy, {"bf16", "fp32"});
  // SPEC.md: weight-gradient partials are fp32 under the "bf16" policy and
  // fp64 under "fp32".
  const KernelInfo &bwd =
      selectForLaunch("bwd", args.weightDtype, args.biasDtype, args.policy,
                      args.policy == "bf16" ? "f32" : "f64", args.C);
  const KernelInfo &reduce = selectForLaunch(
      "reduce", args.weightDtype, args.biasDtype, "none", bwd.acc, args.C);

  int64_t S = args.S, C = args.C;
  bool hasBias = args.biasDtype != "none";
  int64_t parts = S == 0 ? 0 : partsFor(bwd, S, C, args.device);
  int64_t columns = kWidth * C + (hasBias ? C : 0);
  Memref partials = {"partials", args.workspace, {parts, (kWidth + 1) * C}};

  std::vector<Memref> bwdMemrefs = {
      {"x", args.x, {S, C}},
      {"weight", args.weight, {C, kWidth}},
      {"cu_seqlens", args.cuSeqlens, {args.numDocs + 1}},
      {"dy", args.dy, {S, C}},
      {"dx", args.dx, {S, C}},
      partials};
  std::vector<Memref> reduceMemrefs = {partials,
                                       {"dweight", args.dweight, {C, kWidth}}};
  if (hasBias) {
    bwdMemrefs.push_back({"bias", args.bias, {C}});
    reduceMemrefs.push_back({"dbias", args.dbias, {C}});
  }

  DeviceContextGuard guard(args.device);
  std::optional<Launch> bwdLaunch;
  if (S > 0)
    bwdLaunch.emplace(bwd, tileBlocks(bwd, parts, C), bwdMemrefs);
  Launch reduceLaunch(reduce, ceilDiv(columns, reduce.block), reduceMemrefs);
  if (bwdLaunch)
    bwdLaunch->issue(args.stream, false);
  // Without a bwd launch, plain stream order is all the reduce needs.
  reduceLaunch.issue(args.stream,
                     /*programmaticDependent=*/bwdLaunch.has_value());
}
