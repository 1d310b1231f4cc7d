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
/// Makes a context of a device current for the guard's life. The current
/// context (normally PyTorch's) is kept when it belongs to the device. If no
/// context is current, the device's primary context is made current and stays
/// so; if another device's is, the primary context is pushed, then popped.
class DeviceContextGuard {
public:
  explicit DeviceContextGuard(int device) {
    const Driver &driver = getDriver();
    CUdevice handle;
    checkResult(driver.cuDeviceGet(&handle, device), "cuDeviceGet");
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
  const char *name;
  DevicePtr data;
  std::vector<int64_t> sizes;
};

/// An index operand.
struct Index {
  const char *name;
  int64_t value;
};
} // namespace

/// Returns the operands of `kernel` as 64-bit words in the order of the
/// manifest's params: a memref as `allocated, aligned, offset, sizes...,
/// strides...`, an index as itself. Both targets take them so.
static std::vector<uint64_t> packParams(const KernelInfo &kernel,
                                        const std::vector<Memref> &memrefs,
                                        const std::vector<Index> &indices) {
  auto missing = [&](const std::string &param) {
    return std::runtime_error("cake: kernel " + kernel.name + " takes '" +
                              param + "', which the runtime does not pass");
  };
  std::vector<uint64_t> words;
  // A memref takes 3 + 2 * rank words, and ranks are at most 2.
  words.reserve(7 * memrefs.size() + indices.size());
  size_t used = 0;
  for (const KernelInfo::Param &param : kernel.params) {
    if (param.kind == KernelInfo::Param::Kind::Index) {
      auto it =
          std::find_if(indices.begin(), indices.end(),
                       [&](const Index &i) { return i.name == param.name; });
      if (it == indices.end())
        throw missing(param.name + ":index");
      words.push_back(static_cast<uint64_t>(it->value));
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
    words.insert(words.end(), {it->data, it->data, 0});
    words.insert(words.end(), it->sizes.begin(), it->sizes.end());
    // Row-major strides, innermost last.
    size_t rank = it->sizes.size();
    words.resize(words.size() + rank);
    uint64_t stride = 1;
    for (size_t i = rank; i-- > 0; stride *= it->sizes[i])
      words[words.size() - rank + i] = stride;
  }
  if (used != memrefs.size() + indices.size())
    throw std::runtime_error("cake: kernel " + kernel.name +
                             " takes fewer operands than the runtime passes");
  return words;
}

namespace {
/// One GPU kernel launch, prepared (function, grid, parameters) before any
/// launch is issued.
class Launch {
public:
  Launch(const KernelInfo &kernel, int64_t gridX,
         const std::vector<Memref> &memrefs,
         const std::vector<Index> &indices = {})
      : kernel(kernel), function(getFunction(kernel)),
        paramValues(packParams(kernel, memrefs, indices)) {
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
    paramPointers.reserve(paramValues.size());
    for (uint64_t &value : paramValues)
      paramPointers.push_back(&value);
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
                "cuLaunchKernelEx of kernel", kernel.name);
  }

private:
  const KernelInfo &kernel;
  CUfunction function;
  CUlaunchConfig config = {};
  std::vector<uint64_t> paramValues;
  std::vector<void *> paramPointers;
};
} // namespace

/// Runs the tiles [0, tiles) of host kernel `kernel`, split into contiguous
/// ranges among the host's cores, and returns when all are done. Which core
/// runs a tile changes nothing in the results: every tile writes its own
/// outputs.
static void runOnHost(const KernelInfo &kernel, int64_t tiles,
                      const std::vector<Memref> &memrefs,
                      std::vector<Index> indices) {
  HostKernel run = getHostKernel(kernel);
  int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1,
                                        std::max<int64_t>(1, tiles));
  indices.push_back({"tile_begin", 0});
  indices.push_back({"tile_end", 0});
  std::vector<std::vector<uint64_t>> words;
  for (int64_t t = 0; t < threads; ++t) {
    indices[indices.size() - 2].value = t * tiles / threads;
    indices.back().value = (t + 1) * tiles / threads;
    words.push_back(packParams(kernel, memrefs, indices));
  }
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t) {
    try {
      workers.emplace_back(run, words[t].data());
    } catch (const std::system_error &) {
      run(words[t].data()); // No thread to be had: the range runs here.
    }
  }
  run(words[0].data());
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

/// Throws unless S, C and numDocs make sense.
static void checkSizes(int64_t S, int64_t C, int64_t numDocs) {
  if (S < 0 || C <= 0 || numDocs < 0)
    throw std::runtime_error("cake: bad sizes S=" + std::to_string(S) +
                             " C=" + std::to_string(C) +
                             " num_docs=" + std::to_string(numDocs));
}

//===----------------------------------------------------------------------===//
// Grid shape
//===----------------------------------------------------------------------===//

/// Returns the threads of `kernel` the device holds at once, from the
/// driver's occupancy of the kernel, computed once per kernel and device.
static int64_t residentThreads(const KernelInfo &kernel, int device) {
  static std::mutex mutex;
  // Keyed by the manifest's entry, which lives as long as the process: no
  // string is built or compared per launch.
  static std::map<std::pair<const KernelInfo *, int>, int64_t> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace({&kernel, device}, 0);
  if (!inserted)
    return it->second;
  const Driver &driver = getDriver();
  DeviceContextGuard guard(device);
  CUdevice handle;
  checkResult(driver.cuDeviceGet(&handle, device), "cuDeviceGet");
  int multiprocessors = 0, blocks = 0;
  checkResult(
      driver.cuDeviceGetAttribute(
          &multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, handle),
      "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  checkResult(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                  &blocks, getFunction(kernel), int(kernel.block), 0),
              "cuOccupancyMaxActiveBlocksPerMultiprocessor of", kernel.name);
  it->second = std::max(1, blocks) * int64_t(multiprocessors) * kernel.block;
  return it->second;
}

int64_t cake::runtime::maxParts(const KernelInfo &kernel, int64_t C,
                                int device) {
  if (!kernel.supportsChannels(C) || kernel.target != targetOf(device))
    throw std::runtime_error("cake: kernel " + kernel.name +
                             " cannot run with C=" + std::to_string(C) +
                             " on device " + std::to_string(device));
  if (kernel.target == KernelInfo::Target::Host)
    return std::max<int64_t>(1,
                             kHostPartialsBytes / ((kernel.width + 1) * C * 8));
  int64_t groups = C / kernel.vectorChannels;
  return std::max<int64_t>(1, residentThreads(kernel, device) / groups);
}

int64_t cake::runtime::partsFor(const KernelInfo &kernel, int64_t S, int64_t C,
                                int device) {
  int64_t minTokens = kernel.target == KernelInfo::Target::Host
                          ? kMinHostPartTokens
                          : kMinPartTokens;
  int64_t byLength = std::max<int64_t>(1, ceilDiv(S, minTokens));
  return std::min(maxParts(kernel, C, device), byLength);
}

/// The tiles of a fwd or bwd launch: one per (part, channel group).
static int64_t tileCount(const KernelInfo &kernel, int64_t parts, int64_t C) {
  return parts * (C / kernel.vectorChannels);
}

void cake::runtime::forward(const ForwardArgs &args) {
  KernelInfo::Target target = targetOf(args.device);
  if (target == KernelInfo::Target::Gpu)
    getDriver();
  checkSizes(args.S, args.C, args.numDocs);
  checkOneOf("weight_dtype", args.weightDtype, {DType::F32, DType::BF16});
  checkOneOf("bias_dtype", args.biasDtype,
             {DType::None, DType::F32, DType::BF16});
  const KernelInfo &kernel = selectKernel(target, Op::Fwd, args.weightDtype,
                                          args.biasDtype, Policy::None, args.C);
  if (args.S == 0)
    return;

  int64_t S = args.S, C = args.C, width = kernel.width;
  int64_t parts = partsFor(kernel, S, C, args.device);
  std::vector<Memref> memrefs = {
      {"x", args.x, {S, C}},
      {"weight", args.weight, {C, width}},
      {"cu_seqlens", args.cuSeqlens, {args.numDocs + 1}},
      {"y", args.y, {S, C}}};
  if (args.biasDtype != DType::None)
    memrefs.push_back({"bias", args.bias, {C}});
  int64_t tiles = tileCount(kernel, parts, C);

  if (target == KernelInfo::Target::Host)
    return runOnHost(kernel, tiles, memrefs, {{"parts", parts}});
  DeviceContextGuard guard(args.device);
  Launch(kernel, ceilDiv(tiles, kernel.block), memrefs, {{"parts", parts}})
      .issue(args.stream, false);
}

void cake::runtime::backward(const BackwardArgs &args) {
  KernelInfo::Target target = targetOf(args.device);
  if (target == KernelInfo::Target::Gpu)
    getDriver();
  checkSizes(args.S, args.C, args.numDocs);
  checkOneOf("weight_dtype", args.weightDtype, {DType::F32, DType::BF16});
  checkOneOf("bias_dtype", args.biasDtype,
             {DType::None, DType::F32, DType::BF16});
  checkOneOf("policy", args.policy, {Policy::BF16, Policy::FP32});
  const KernelInfo &bwd = selectKernel(target, Op::Bwd, args.weightDtype,
                                       args.biasDtype, args.policy, args.C);
  const KernelInfo &reduce = successorOf(bwd);

  int64_t S = args.S, C = args.C, width = bwd.width;
  bool hasBias = args.biasDtype != DType::None;
  int64_t parts = S == 0 ? 0 : partsFor(bwd, S, C, args.device);
  int64_t columns = width * C + (hasBias ? C : 0);
  Memref partials = {"partials", args.workspace, {parts, (width + 1) * C}};

  std::vector<Memref> bwdMemrefs = {
      {"x", args.x, {S, C}},
      {"weight", args.weight, {C, width}},
      {"cu_seqlens", args.cuSeqlens, {args.numDocs + 1}},
      {"dy", args.dy, {S, C}},
      {"dx", args.dx, {S, C}},
      partials};
  std::vector<Memref> reduceMemrefs = {partials,
                                       {"dweight", args.dweight, {C, width}}};
  if (hasBias) {
    bwdMemrefs.push_back({"bias", args.bias, {C}});
    reduceMemrefs.push_back({"dbias", args.dbias, {C}});
  }
  int64_t tiles = tileCount(bwd, parts, C);

  if (target == KernelInfo::Target::Host) {
    if (S > 0)
      runOnHost(bwd, tiles, bwdMemrefs, {});
    return runOnHost(reduce, columns, reduceMemrefs, {});
  }
  DeviceContextGuard guard(args.device);
  std::optional<Launch> bwdLaunch;
  if (S > 0)
    bwdLaunch.emplace(bwd, ceilDiv(tiles, bwd.block), bwdMemrefs);
  Launch reduceLaunch(reduce, ceilDiv(columns, reduce.block), reduceMemrefs);
  if (bwdLaunch)
    bwdLaunch->issue(args.stream, false);
  // Without a bwd launch, plain stream order is all the reduce needs.
  reduceLaunch.issue(args.stream,
                     /*programmaticDependent=*/bwdLaunch.has_value());
}
