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

/// One kernel launch, prepared (function, grid, parameters) before any launch
/// is issued.
class Launch {
public:
  Launch(const KernelInfo &kernel, int64_t gridX, int64_t gridY,
         const std::vector<Memref> &memrefs)
      : kernel(kernel), function(getFunction(kernel)) {
    if (gridX < 1 || gridX > INT32_MAX || gridY < 1 || gridY > 65535 ||
        kernel.block > 1024)
      throw std::runtime_error(
          "cake: kernel " + kernel.name + " cannot be launched with grid (" +
          std::to_string(gridX) + ", " + std::to_string(gridY) +
          ") and block " + std::to_string(kernel.block));
    config.gridDimX = static_cast<unsigned>(gridX);
    config.gridDimY = static_cast<unsigned>(gridY);
    config.gridDimZ = 1;
    config.blockDimX = static_cast<unsigned>(kernel.block);
    config.blockDimY = 1;
    config.blockDimZ = 1;
    packParams(memrefs);
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
  /// Packs `memrefs` in the order of the manifest's params, each as
  /// `allocated, aligned, offset, sizes..., strides...`, all 64-bit.
  void packParams(const std::vector<Memref> &memrefs) {
    std::vector<bool> used(memrefs.size());
    for (const KernelInfo::Param &param : kernel.params) {
      auto it =
          std::find_if(memrefs.begin(), memrefs.end(),
                       [&](const Memref &m) { return m.name == param.name; });
      if (it == memrefs.end() ||
          static_cast<int64_t>(it->sizes.size()) != param.rank)
        throw std::runtime_error("cake: kernel " + kernel.name +
                                 " takes memref '" + param.name + ":" +
                                 std::to_string(param.rank) +
                                 "', which the runtime does not pass");
      used[it - memrefs.begin()] = true;
      paramValues.insert(paramValues.end(), {it->data, it->data, 0});
      paramValues.insert(paramValues.end(), it->sizes.begin(), it->sizes.end());
      std::vector<uint64_t> strides(it->sizes.size());
      uint64_t stride = 1;
      for (size_t i = strides.size(); i-- > 0; stride *= it->sizes[i])
        strides[i] = stride;
      paramValues.insert(paramValues.end(), strides.begin(), strides.end());
    }
    for (size_t i = 0; i < memrefs.size(); ++i)
      if (!used[i])
        throw std::runtime_error("cake: kernel " + kernel.name +
                                 " takes no memref '" + memrefs[i].name + "'");
    for (uint64_t &value : paramValues)
      paramPointers.push_back(&value);
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
  int64_t groups = C / kernel.vectorChannels;
  int64_t gridX = ceilDiv(ceilDiv(S, kernel.tileTokens) * groups, kernel.block);
  std::vector<Memref> memrefs = {
      {"x", args.x, {S, C}},
      {"weight", args.weight, {C, kWidth}},
      {"cu_seqlens", args.cuSeqlens, {args.numDocs + 1}},
      {"y", args.y, {S, C}}};
  if (args.biasDtype != "none")
    memrefs.push_back({"bias", args.bias, {C}});

  DeviceContextGuard guard(args.device);
  Launch(kernel, gridX, 1, memrefs).issue(args.stream, false);
}

void cake::runtime::backward(const BackwardArgs &args) {
  getDriver();
  checkSizes(args.S, args.C, args.numDocs);
  checkOneOf("weight_dtype", args.weightDtype, {"f32", "bf16"});
  checkOneOf("bias_dtype", args.biasDtype, {"none", "f32", "bf16"});
  checkOneOf("policy", args.policy, {"bf16", "fp32"});
  if (args.numSMs <= 0)
    throw std::runtime_error("cake: num_sms must be positive, got " +
                             std::to_string(args.numSMs));
  // SPEC.md: weight-gradient partials are fp32 under the "bf16" policy and
  // fp64 under "fp32".
  const KernelInfo &bwd =
      selectForLaunch("bwd", args.weightDtype, args.biasDtype, args.policy,
                      args.policy == "bf16" ? "f32" : "f64", args.C);
  const KernelInfo &reduce = selectForLaunch(
      "reduce", args.weightDtype, args.biasDtype, "none", bwd.acc, args.C);

  int64_t S = args.S, C = args.C;
  bool hasBias = args.biasDtype != "none";
  int64_t rows = S == 0 ? 0
                        : std::min(partialRowsMax(C, args.numSMs, bwd),
                                   ceilDiv(S, bwd.tileTokens));
  int64_t channelBlocks = ceilDiv(C / bwd.vectorChannels, bwd.block);
  int64_t columns = kWidth * C + (hasBias ? C : 0);
  Memref partials = {"partials", args.workspace, {rows, (kWidth + 1) * C}};

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
    bwdLaunch.emplace(bwd, rows, channelBlocks, bwdMemrefs);
  Launch reduceLaunch(reduce, ceilDiv(columns, reduce.block), 1, reduceMemrefs);
  if (bwdLaunch)
    bwdLaunch->issue(args.stream, false);
  // Without a bwd launch, plain stream order is all the reduce needs.
  reduceLaunch.issue(args.stream,
                     /*programmaticDependent=*/bwdLaunch.has_value());
}
