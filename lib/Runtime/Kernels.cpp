//===- Kernels.cpp - The embedded kernel manifest and PTX module ----------===//
//
// SPDX-License-Identifier: Apache-2.0
//
//===----------------------------------------------------------------------===//
//
// This file implements the parsing of the embedded kernel manifest
// (docs/kernel-abi.md), the choice of a kernel for a call, the backward
// workspace size, and the loading of the embedded kernels once per CUDA
// context: the sm_90a cubin that the build checked on compute capability 9.0,
// the PTX (compiled by the driver) on any other device; and the lookup of the
// host kernels linked in.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

using namespace cake::runtime;
using namespace cake::runtime::detail;

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

/// Splits `text` at every character in `separators`, dropping empty pieces.
static std::vector<std::string_view> split(std::string_view text,
                                           std::string_view separators) {
  std::vector<std::string_view> pieces;
  while (!text.empty()) {
    size_t end = std::min(text.find_first_of(separators), text.size());
    if (end > 0)
      pieces.push_back(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return pieces;
}

/// Returns the error for line `lineNo` of the manifest.
static std::runtime_error manifestError(size_t lineNo,
                                        const std::string &message) {
  return std::runtime_error("cake: kernel manifest line " +
                            std::to_string(lineNo) + ": " + message);
}

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

namespace {
constexpr std::pair<Op, std::string_view> kOpNames[] = {
    {Op::Fwd, "fwd"}, {Op::Bwd, "bwd"}, {Op::Reduce, "reduce"}};
constexpr std::pair<DType, std::string_view> kDTypeNames[] = {
    {DType::None, "none"},
    {DType::F32, "f32"},
    {DType::BF16, "bf16"},
    {DType::F64, "f64"}};
constexpr std::pair<Policy, std::string_view> kPolicyNames[] = {
    {Policy::None, "none"}, {Policy::BF16, "bf16"}, {Policy::FP32, "fp32"}};

template <typename E, size_t N>
std::string_view nameIn(const std::pair<E, std::string_view> (&names)[N],
                        E value) {
  for (const auto &[known, name] : names)
    if (known == value)
      return name;
  return "?";
}

/// The value named `text` among `allowed`; throws naming `what` otherwise.
template <typename E, size_t N>
E parseIn(const std::pair<E, std::string_view> (&names)[N],
          std::string_view text, const char *what,
          std::initializer_list<E> allowed) {
  std::string expected;
  for (E value : allowed) {
    std::string_view name = nameIn(names, value);
    if (name == text)
      return value;
    expected += (expected.empty() ? "'" : ", '") + std::string(name) + "'";
  }
  throw std::runtime_error("cake: " + std::string(what) + " must be one of " +
                           expected + ", got '" + std::string(text) + "'");
}
} // namespace

std::string_view cake::runtime::nameOf(Op op) { return nameIn(kOpNames, op); }
std::string_view cake::runtime::nameOf(DType dtype) {
  return nameIn(kDTypeNames, dtype);
}
std::string_view cake::runtime::nameOf(Policy policy) {
  return nameIn(kPolicyNames, policy);
}
Op cake::runtime::parseOp(std::string_view text, const char *what,
                          std::initializer_list<Op> allowed) {
  return parseIn(kOpNames, text, what, allowed);
}
DType cake::runtime::parseDType(std::string_view text, const char *what,
                                std::initializer_list<DType> allowed) {
  return parseIn(kDTypeNames, text, what, allowed);
}
Policy cake::runtime::parsePolicy(std::string_view text, const char *what,
                                  std::initializer_list<Policy> allowed) {
  return parseIn(kPolicyNames, text, what, allowed);
}

//===----------------------------------------------------------------------===//
// Manifest parsing
//===----------------------------------------------------------------------===//

namespace {
/// Parses the `key=value` fields of one `kernel` line.
class KernelLineParser {
public:
  KernelLineParser(const std::vector<std::string_view> &tokens, size_t lineNo)
      : lineNo(lineNo) {
    for (std::string_view token : tokens) {
      size_t eq = token.find('=');
      if (eq == std::string_view::npos)
        throw error("expected key=value, got '" + std::string(token) + "'");
      if (!fields.emplace(token.substr(0, eq), token.substr(eq + 1)).second)
        throw error("duplicate field '" + std::string(token.substr(0, eq)) +
                    "'");
    }
  }

  /// Returns a manifest error about this line.
  std::runtime_error error(const std::string &message) const {
    return manifestError(lineNo, message);
  }

  /// Removes and returns field `key`.
  std::string_view take(const std::string &key) {
    auto it = fields.find(key);
    if (it == fields.end())
      throw error("missing field '" + key + "'");
    std::string_view value = it->second;
    fields.erase(it);
    return value;
  }

  /// Removes and returns field `key`, which must be one of `allowed`.
  std::string takeOneOf(const std::string &key,
                        const std::set<std::string_view> &allowed) {
    std::string_view value = take(key);
    if (!allowed.count(value))
      throw error("bad value '" + std::string(value) + "' of '" + key + "'");
    return std::string(value);
  }

  /// Parses `text`, an integer of at least `min`, for field `key`.
  int64_t parseInt(std::string_view text, const std::string &key,
                   int64_t min) const {
    int64_t value = 0;
    auto [end, ec] =
        std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < min)
      throw error("bad value '" + std::string(text) + "' of '" + key + "'");
    return value;
  }

  /// Removes and returns field `key`, an integer of at least `min`.
  int64_t takeInt(const std::string &key, int64_t min) {
    return parseInt(take(key), key, min);
  }

  /// Throws if a field was not taken.
  void checkAllTaken() const {
    if (!fields.empty())
      throw error("unknown field '" + std::string(fields.begin()->first) + "'");
  }

private:
  size_t lineNo;
  std::map<std::string_view, std::string_view, std::less<>> fields;
};
} // namespace

/// Parses a `kernel <name> key=value...` line, split into `tokens`.
static KernelInfo parseKernel(const std::vector<std::string_view> &tokens,
                              size_t lineNo) {
  KernelLineParser parser({tokens.begin() + 2, tokens.end()}, lineNo);
  KernelInfo kernel;
  kernel.name = std::string(tokens[1]);
  kernel.target = parser.takeOneOf("target", {"gpu", "host"}) == "gpu"
                      ? KernelInfo::Target::Gpu
                      : KernelInfo::Target::Host;
  auto field = [&](auto parse, const char *key, auto... allowed) {
    try {
      return parse(parser.take(key), key, {allowed...});
    } catch (const std::runtime_error &error) {
      throw parser.error(error.what());
    }
  };
  kernel.op = field(parseOp, "op", Op::Fwd, Op::Bwd, Op::Reduce);
  kernel.weight = field(parseDType, "weight", DType::F32, DType::BF16);
  kernel.bias = field(parseDType, "bias", DType::None, DType::F32, DType::BF16);
  kernel.policy =
      field(parsePolicy, "policy", Policy::None, Policy::BF16, Policy::FP32);
  kernel.acc = field(parseDType, "acc", DType::None, DType::F32, DType::F64);
  kernel.block = parser.takeInt("block", 1);
  kernel.waves = parser.takeInt("waves", 1);
  kernel.maxPartTokens = parser.takeInt("max_part_tokens", 0);
  if (kernel.maxPartTokens != 0 && kernel.op != Op::Fwd)
    throw parser.error("max_part_tokens is a forward's: a " +
                       std::string(tokens[1]) +
                       "'s parts must be bounded by C and the device");
  kernel.vectorChannels = parser.takeInt("vector_channels", 1);
  kernel.lanesPerItem = parser.takeInt("lanes_per_item", 1);
  if (kernel.target == KernelInfo::Target::Host && kernel.lanesPerItem != 1)
    throw parser.error("a host kernel has one thread per item, not " +
                       std::to_string(kernel.lanesPerItem));
  kernel.width = parser.takeInt("width", 1);
  std::string_view waitsFor = parser.take("waits_for");
  if (waitsFor != "none")
    kernel.waitsFor = std::string(waitsFor);
  for (std::string_view param : split(parser.take("params"), ",")) {
    size_t colon = param.find(':');
    if (colon == std::string_view::npos)
      throw parser.error("expected name:rank or name:index in params, got '" +
                         std::string(param) + "'");
    std::string name(param.substr(0, colon));
    std::string_view kind = param.substr(colon + 1);
    // Each operand is passed once: a launch packs at most one of each.
    for (const KernelInfo::Param &other : kernel.params)
      if (other.name == name)
        throw parser.error("duplicate param '" + name + "'");
    if (kind == "index")
      kernel.params.push_back({name, KernelInfo::Param::Kind::Index, 0});
    else
      kernel.params.push_back({name, KernelInfo::Param::Kind::Memref,
                               parser.parseInt(kind, "params", 0)});
  }
  for (std::string_view entry : split(parser.take("align"), ",")) {
    size_t colon = entry.find(':');
    std::string name(entry.substr(0, std::min(colon, entry.size())));
    auto param = std::find_if(
        kernel.params.begin(), kernel.params.end(), [&](const auto &p) {
          return p.name == name && p.kind == KernelInfo::Param::Kind::Memref;
        });
    if (colon == std::string_view::npos || param == kernel.params.end())
      throw parser.error("expected memref:bytes in align, got '" +
                         std::string(entry) + "'");
    param->align = parser.parseInt(entry.substr(colon + 1), "align", 1);
  }
  parser.checkAllTaken();

  // Only bwd has a policy; bwd and reduce have an accumulator; a reduce, and
  // only it, waits for a kernel.
  std::string op(nameOf(kernel.op));
  if ((kernel.policy == Policy::None) != (kernel.op != Op::Bwd) ||
      (kernel.acc == DType::None) != (kernel.op == Op::Fwd))
    throw parser.error("policy/acc do not fit op=" + op);
  if (kernel.waitsFor.empty() != (kernel.op != Op::Reduce))
    throw parser.error("waits_for does not fit op=" + op);
  return kernel;
}

static std::vector<KernelInfo> parseManifest(std::string_view text) {
  std::vector<KernelInfo> kernels;
  bool sawHeader = false;
  size_t lineNo = 0;
  while (!text.empty()) {
    size_t end = std::min(text.find('\n'), text.size());
    std::vector<std::string_view> tokens = split(text.substr(0, end), " \t\r");
    text.remove_prefix(std::min(end + 1, text.size()));
    ++lineNo;
    if (tokens.empty() || tokens[0].front() == '#')
      continue;
    if (!sawHeader) {
      if (tokens.size() != 2 || tokens[0] != "cake-manifest" ||
          tokens[1] != "6")
        throw manifestError(lineNo, "expected 'cake-manifest 6'");
      sawHeader = true;
      continue;
    }
    if (tokens.size() < 2 || tokens[0] != "kernel")
      throw manifestError(lineNo, "expected 'kernel <name> key=value...'");
    KernelInfo kernel = parseKernel(tokens, lineNo);
    // Each target's kernels are a library of their own: names repeat across.
    for (const KernelInfo &other : kernels)
      if (other.name == kernel.name && other.target == kernel.target)
        throw manifestError(lineNo, "duplicate kernel '" + other.name + "'");
    kernels.push_back(std::move(kernel));
  }
  if (kernels.empty())
    throw std::runtime_error("cake: the kernel manifest lists no kernels");
  // A reduce waits for a bwd of its own target and accumulator.
  for (const KernelInfo &kernel : kernels) {
    if (kernel.waitsFor.empty())
      continue;
    auto waited = std::find_if(
        kernels.begin(), kernels.end(), [&](const KernelInfo &other) {
          return other.name == kernel.waitsFor && other.target == kernel.target;
        });
    if (waited == kernels.end() || waited->op != Op::Bwd ||
        waited->acc != kernel.acc || waited->weight != kernel.weight ||
        waited->bias != kernel.bias)
      throw std::runtime_error("cake: kernel manifest: " + kernel.name +
                               " waits for " + kernel.waitsFor +
                               ", which is no bwd kernel it can reduce");
  }
  return kernels;
}

bool KernelInfo::supportsChannels(int64_t C) const {
  return C > 0 && C % vectorChannels == 0;
}

namespace {
/// The PTX and manifest the runtime launches from.
struct KernelLibrary {
  std::string ptx;
  std::string manifest;
  /// The sm_90a cubin; null for a library loaded from CAKE_KERNEL_LIBRARY,
  /// which runs from its PTX.
  const unsigned char *cubin;
};
} // namespace

static std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw std::runtime_error("cake: cannot read " + path +
                             " (CAKE_KERNEL_LIBRARY)");
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

/// The embedded library, or, for tuning runs, the one in the folder that
/// CAKE_KERNEL_LIBRARY names (as cake-kernel-gen writes it).
static const KernelLibrary &getLibrary() {
  static const KernelLibrary library = [] {
    const char *dir = std::getenv("CAKE_KERNEL_LIBRARY");
    if (!dir || !*dir)
      return KernelLibrary{embeddedPtx, embeddedManifest, embeddedCubin};
    return KernelLibrary{readFile(std::string(dir) + "/cake_kernels.ptx"),
                         readFile(std::string(dir) + "/cake_kernels.manifest"),
                         nullptr};
  }();
  return library;
}

namespace {
/// The manifest's kernels and what a launch looks up in them, resolved once
/// so that a launch scans no list and compares no names.
struct Manifest {
  std::vector<KernelInfo> kernels;
  /// The kernels of each (target, op, weight, bias, policy), in manifest
  /// order.
  std::map<std::tuple<KernelInfo::Target, Op, DType, DType, Policy>,
           std::vector<const KernelInfo *>>
      routes;
  /// By kernel position: the kernel that waits for it, or null.
  std::vector<const KernelInfo *> successors;

  explicit Manifest(std::vector<KernelInfo> parsed)
      : kernels(std::move(parsed)), successors(kernels.size(), nullptr) {
    for (const KernelInfo &kernel : kernels) {
      routes[{kernel.target, kernel.op, kernel.weight, kernel.bias,
              kernel.policy}]
          .push_back(&kernel);
      // The first kernel that waits for it, as a scan of the list would find.
      if (kernel.waitsFor.empty())
        continue;
      for (const KernelInfo &waited : kernels) {
        if (waited.name != kernel.waitsFor || waited.target != kernel.target)
          continue;
        const KernelInfo *&successor = successors[&waited - kernels.data()];
        if (!successor)
          successor = &kernel;
      }
    }
  }
};
} // namespace

static const Manifest &getManifest() {
  static const Manifest manifest(parseManifest(getLibrary().manifest));
  return manifest;
}

const std::vector<KernelInfo> &cake::runtime::getKernels() {
  return getManifest().kernels;
}

size_t detail::indexOf(const KernelInfo &kernel) {
  const std::vector<KernelInfo> &kernels = getKernels();
  if (&kernel < kernels.data() || &kernel >= kernels.data() + kernels.size())
    throw std::runtime_error("cake: kernel " + kernel.name +
                             " is not an entry of the manifest");
  return &kernel - kernels.data();
}

KernelInfo::Target cake::runtime::targetOf(int device) {
  return device == kHostDevice ? KernelInfo::Target::Host
                               : KernelInfo::Target::Gpu;
}

const std::vector<const KernelInfo *> &
cake::runtime::routeKernels(KernelInfo::Target target, Op op, DType weight,
                            DType bias, Policy policy, int64_t C) {
  const Manifest &manifest = getManifest();
  auto route = manifest.routes.find({target, op, weight, bias, policy});
  if (route != manifest.routes.end() &&
      std::all_of(route->second.begin(), route->second.end(),
                  [&](const KernelInfo *kernel) {
                    return kernel->supportsChannels(C);
                  }))
    return route->second;
  throw std::runtime_error(
      std::string("cake: no kernel in the manifest for target=") +
      (target == KernelInfo::Target::Gpu ? "gpu" : "host") + " op=" +
      std::string(nameOf(op)) + " weight=" + std::string(nameOf(weight)) +
      " bias=" + std::string(nameOf(bias)) +
      " policy=" + std::string(nameOf(policy)) + " C=" + std::to_string(C));
}

const KernelInfo &cake::runtime::selectKernel(KernelInfo::Target target, Op op,
                                              DType weight, DType bias,
                                              Policy policy, int64_t C) {
  return *routeKernels(target, op, weight, bias, policy, C).front();
}

const KernelInfo &cake::runtime::successorOf(const KernelInfo &kernel) {
  if (const KernelInfo *successor = getManifest().successors[indexOf(kernel)])
    return *successor;
  throw std::runtime_error("cake: no kernel in the manifest waits for " +
                           kernel.name);
}

const LaunchContract &cake::runtime::getLaunchContract() {
  static const LaunchContract contract = [] {
    const std::vector<KernelInfo> &kernels = getKernels();
    LaunchContract result{kernels.front().width, 1};
    for (const KernelInfo &kernel : kernels) {
      if (kernel.width != result.width)
        throw std::runtime_error("cake: kernel manifest: " + kernel.name +
                                 " has width " + std::to_string(kernel.width) +
                                 ", others " + std::to_string(result.width));
      result.channelMultiple =
          std::lcm(result.channelMultiple, kernel.vectorChannels);
    }
    return result;
  }();
  return contract;
}

std::vector<std::pair<std::string, int64_t>>
cake::runtime::launchAlignments(KernelInfo::Target target, Op op, DType weight,
                                DType bias, Policy policy) {
  // Every configuration a call may launch: one contract for all of them.
  std::vector<const KernelInfo *> kernels = routeKernels(
      target, op, weight, bias, policy, getLaunchContract().channelMultiple);
  if (op == Op::Bwd)
    for (size_t i = 0, configs = kernels.size(); i < configs; ++i)
      kernels.push_back(&successorOf(*kernels[i]));
  std::vector<std::pair<std::string, int64_t>> result;
  for (const KernelInfo *kernel : kernels) {
    for (const KernelInfo::Param &param : kernel->params) {
      if (param.kind != KernelInfo::Param::Kind::Memref)
        continue;
      auto known =
          std::find_if(result.begin(), result.end(),
                       [&](const auto &r) { return r.first == param.name; });
      if (known == result.end())
        result.emplace_back(param.name, param.align);
      else
        known->second = std::max(known->second, param.align);
    }
  }
  return result;
}

int64_t cake::runtime::backwardWorkspaceBytes(int64_t C, int device) {
  int64_t bytes = -1;
  for (const KernelInfo &kernel : getKernels())
    if (kernel.target == targetOf(device) && kernel.op == Op::Bwd &&
        kernel.supportsChannels(C))
      bytes = std::max(bytes, maxParts(kernel, C, device) * (kernel.width + 1) *
                                  C * 8);
  if (bytes < 0)
    throw std::runtime_error("cake: no bwd kernel in the manifest supports C=" +
                             std::to_string(C));
  return bytes;
}

//===----------------------------------------------------------------------===//
// Kernel module
//===----------------------------------------------------------------------===//

namespace {
/// Sets the calling thread's stream capture mode to relaxed for the scope's
/// life. Loading a module is no stream operation, but it may allocate device
/// memory, which a thread in the default (global) capture mode may not do
/// while a stream capture is under way; relaxed, the load runs at once,
/// outside any graph, and the capture stays valid. Nothing is issued to a
/// stream inside the scope.
class RelaxedCaptureScope {
public:
  explicit RelaxedCaptureScope(const Driver &driver) : driver(driver) {
    checkResult(driver.cuThreadExchangeStreamCaptureMode(&mode),
                "cuThreadExchangeStreamCaptureMode");
  }
  RelaxedCaptureScope(const RelaxedCaptureScope &) = delete;
  RelaxedCaptureScope &operator=(const RelaxedCaptureScope &) = delete;
  ~RelaxedCaptureScope() { driver.cuThreadExchangeStreamCaptureMode(&mode); }

private:
  const Driver &driver;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
};
} // namespace

/// Returns true if the current context's device runs the embedded cubin:
/// cmake/CheckPTX.cmake assembles it for sm_90a, which only compute
/// capability 9.0 runs. CAKE_KERNEL_IMAGE=ptx or =cubin overrides the choice
/// (to measure the JIT path, or to see the cubin fail elsewhere).
static bool useCubin(const Driver &driver) {
  if (!getLibrary().cubin)
    return false;
  const char *choice = std::getenv("CAKE_KERNEL_IMAGE");
  std::string_view value = choice ? choice : "";
  if (value == "ptx" || value == "cubin")
    return value == "cubin";
  if (!value.empty() && value != "auto")
    throw std::runtime_error("cake: CAKE_KERNEL_IMAGE must be 'auto', "
                             "'cubin' or 'ptx', got '" +
                             std::string(value) + "'");
  CUdevice device;
  checkResult(driver.cuCtxGetDevice(&device), "cuCtxGetDevice");
  int major = 0, minor = 0;
  checkResult(driver.cuDeviceGetAttribute(
                  &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
              "cuDeviceGetAttribute");
  checkResult(driver.cuDeviceGetAttribute(
                  &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
              "cuDeviceGetAttribute");
  return major == 9 && minor == 0;
}

/// Loads the embedded kernels into the current context, every function fully:
/// nothing is left for a later launch to load (which could fall inside a
/// CUDA graph capture, or race another stream's work). Queries each kernel's
/// occupancy too, so that a launch asks the driver for nothing but itself.
static LoadedModule loadModule(const Driver &driver) {
  LoadedModule loaded;
  bool cubin = useCubin(driver);
  loaded.image = cubin ? "cubin" : "ptx";
  std::string log(16384, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log.data(), reinterpret_cast<void *>(log.size())};
  const KernelLibrary &library = getLibrary();
  const void *image = cubin ? static_cast<const void *>(library.cubin)
                            : static_cast<const void *>(library.ptx.c_str());
  RelaxedCaptureScope relaxed(driver);
  CUresult result =
      driver.cuModuleLoadDataEx(&loaded.module, image, 2, options, values);
  if (result != CUDA_SUCCESS)
    throw std::runtime_error(
        std::string("cake: cuModuleLoadDataEx of the embedded ") +
        loaded.image + " failed: " + describeResult(result) +
        "\nJIT error log:\n" + log.c_str());
  checkResult(driver.cuCtxGetDevice(&loaded.device), "cuCtxGetDevice");
  int multiprocessors = 0;
  checkResult(driver.cuDeviceGetAttribute(
                  &multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                  loaded.device),
              "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  loaded.kernels.resize(getKernels().size());
  for (const KernelInfo &kernel : getKernels()) {
    if (kernel.target != KernelInfo::Target::Gpu)
      continue;
    CUfunction function;
    checkResult(driver.cuModuleGetFunction(&function, loaded.module,
                                           kernel.name.c_str()),
                "cuModuleGetFunction for kernel", kernel.name);
    // Under CUDA_MODULE_LOADING=LAZY (the default of recent drivers) a
    // function may still be partly loaded; drivers before 12.4 lack
    // cuFuncLoad and load it in cuModuleGetFunction.
    if (driver.cuFuncLoad)
      checkResult(driver.cuFuncLoad(function), "cuFuncLoad for kernel",
                  kernel.name);
    int blocks = 0;
    checkResult(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                    &blocks, function, int(kernel.block), 0),
                "cuOccupancyMaxActiveBlocksPerMultiprocessor of", kernel.name);
    loaded.kernels[indexOf(kernel)] = {function, std::max(1, blocks) *
                                                     int64_t(multiprocessors) *
                                                     kernel.block};
  }
  return loaded;
}

const LoadedModule &detail::getModule(CUcontext context) {
  if (!context)
    throw std::runtime_error(
        "cake: no current CUDA context to load the kernels into");
  static std::mutex mutex;
  static std::unordered_map<CUcontext, LoadedModule> modules;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = modules.find(context);
  if (it == modules.end())
    it = modules.emplace(context, loadModule(getDriver())).first;
  // Elements of an unordered_map stay put when it grows.
  return it->second;
}

const LoadedKernel &LoadedModule::get(const KernelInfo &kernel) const {
  const LoadedKernel &loaded = kernels[indexOf(kernel)];
  if (!loaded.function)
    throw std::runtime_error("cake: " + kernel.name +
                             " is not a GPU kernel of the loaded library");
  return loaded;
}

//===----------------------------------------------------------------------===//
// Host kernels
//===----------------------------------------------------------------------===//

HostKernel detail::getHostKernel(const KernelInfo &kernel) {
  for (const HostKernelEntry *entry = hostKernels; entry->name; ++entry)
    if (kernel.name == entry->name)
      return entry->run;
  throw std::runtime_error("cake: host kernel " + kernel.name +
                           " is not in the library this runtime was built "
                           "with");
}
