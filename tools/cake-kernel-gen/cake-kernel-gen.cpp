//===- cake-kernel-gen.cpp - Build the kernel library ---------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// This file implements cake-kernel-gen, which compiles every kernel variant the
// runtime launches (one per route: weight dtype, bias dtype or none, SiLU'
// policy; the GPU's forward has a second configuration) twice: into one PTX
// module for the GPU, and into one object file of host kernels for the CPU,
// with the table the runtime finds them by. It
// writes the manifest the runtime selects and launches them by
// (docs/kernel-abi.md), read off the kernels' own attributes.
//
//===----------------------------------------------------------------------===//

#include "HostObject.h"

#include "cake/Conversion/Passes.h"
#include "cake/Dialect/Cake/IR/CakeOps.h"
#include "cake/Dialect/Cake/Pipelines/Pipelines.h"
#include "cake/Dialect/Cake/Transforms/Passes.h"
#include "cake/InitAll.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>

using namespace mlir;
using namespace mlir::cake;

static llvm::cl::opt<std::string>
    outputDir("o", llvm::cl::desc("Folder to write the kernels into"),
              llvm::cl::value_desc("dir"), llvm::cl::Required);
static llvm::cl::opt<std::string>
    pipelineOptions("pipeline",
                    llvm::cl::desc("Options of the cake-to-ptx pipeline, e.g. "
                                   "'stages=4 unroll=2'"),
                    llvm::cl::init(""));
static llvm::cl::opt<std::string> hostPipelineOptions(
    "host-pipeline",
    llvm::cl::desc("Options of the cake-to-host pipeline, e.g. 'unroll=2'"),
    llvm::cl::init(""));
// Parts of 16 tokens (the host rule's shortest) instead of one wave of long
// ones: on the H100, 1.5-4% faster on five shapes of eight, and within 1-3%
// of one wave on the other three (docs/benchmarks.md, 2026-12-06).
static llvm::cl::opt<std::string> forwardTiling(
    "fwd-tiling",
    llvm::cl::desc("#cake.tiling of the forward (empty: the one --pipeline "
                   "makes)"),
    llvm::cl::init("#cake.tiling<vector_channels = 8, block_threads = 128, "
                   "stages = 4, unroll = 4, waves = 16>"));
// A second forward configuration on the GPU, which the runtime's rule picks
// where its grid fills its waves best (docs/kernel-abi.md): 4 channels a
// thread at 64-72 registers hold 7-8 blocks an SM and 8 stages, 57 KB of rows
// in flight an SM against 32 KB. On the H100, 1-4% faster than the first on
// five shapes of eight, slower on grids of few waves
// (docs/benchmark-history-2026-12-07.md, 09:24). Unroll 1: at 2, with the
// subgroup's search and its fallback, ptxas takes 80 registers (6 blocks an
// SM). Parts of at most 18 tokens, where 16 waves would make them longer: at
// 65536 x 8192 and 131072 x 4096, 5% faster than parts of 72 (and 36: no
// faster), 2.7% at 32768 x 5376 in parts of 16 (two H100s,
// docs/benchmarks.md, 2026-12-07); 16 rather than 18 is 1-2% slower at
// 32768 x 4096 with 16384 documents. Empty: none.
static llvm::cl::opt<std::string> forwardLongTiling(
    "fwd-long-tiling",
    llvm::cl::desc("#cake.tiling of the GPU's second forward configuration, "
                   "for long documents (empty: none)"),
    llvm::cl::init("#cake.tiling<vector_channels = 4, block_threads = 128, "
                   "stages = 8, unroll = 1, waves = 16, "
                   "max_part_tokens = 18>"));
// 216 registers instead of ptxas's own 229-234: the same 8 warps an SM, a
// schedule with fewer stall cycles, 3-6% faster on the H200
// (docs/design.md; the measurements in docs/benchmark-history.md, 2026-12-04).
static llvm::cl::opt<std::string> backwardTiling(
    "bwd-tiling",
    llvm::cl::desc("#cake.tiling of the backward under silu_grad bf16 (f32 "
                   "partial sums)"),
    llvm::cl::init("#cake.tiling<vector_channels = 8, block_threads = 128, "
                   "stages = 8, unroll = 3, max_registers = 216>"));
static llvm::cl::opt<std::string> backwardFp64Tiling(
    "bwd-fp64-tiling",
    llvm::cl::desc("#cake.tiling of the backward under silu_grad fp32, whose "
                   "f64 partial sums take twice the registers"),
    llvm::cl::init("#cake.tiling<vector_channels = 4, block_threads = 128, "
                   "stages = 8, unroll = 1>"));
static llvm::cl::opt<bool>
    dumpKernels("dump-kernels",
                llvm::cl::desc("Print the kernels before NVVM lowering"),
                llvm::cl::init(false));

namespace {
constexpr int64_t kWidth = 4; // the width the PyTorch API serves

/// What a function of the library computes, as the runtime selects it; its
/// second kernel, which waits for the first, is its reduction.
struct Route {
  std::string op; // fwd or bwd
  std::string weight, bias, policy;
};

/// What launching a kernel needs, read off the kernel.
struct KernelRecord {
  std::string params; ///< `name:rank` or `name:index`, in order.
  std::string align;  ///< `name:bytes` of each memref parameter.
  std::string acc;    ///< The partial rows' element type; "none" without.
  int64_t width;      ///< The weight's taps.
  int64_t block;
  int64_t waves; ///< The tiling's parts, in waves of resident threads.
  int64_t maxPartTokens; ///< The tiling's longest part (0: none).
  int64_t vectorChannels;
  int64_t lanesPerItem; ///< Threads per iteration of the kernel's forall.
  std::string waitsFor; ///< "none" for a kernel that waits for none.
};

class KernelLibrary {
public:
  explicit KernelLibrary(MLIRContext &context)
      : context(context), b(&context),
        module(ModuleOp::create(UnknownLoc::get(&context))) {}

  /// Adds a forward of the route; `suffix` names a further configuration,
  /// which only the GPU gets.
  void addForward(StringRef weight, StringRef bias, TilingAttr tiling,
                  StringRef suffix = "") {
    std::string name = ("cake_fwd_w" + weight + "_b" + bias + suffix).str();
    if (!suffix.empty())
      gpuOnly.insert(name);
    SmallVector<std::pair<StringRef, Type>> params = {
        {"x", tokens()}, {"weight", weightType(weight)}, {"cu_seqlens", cu()}};
    if (bias != "none")
      params.push_back({"bias", vectorType(bias)});
    params.append({{"y", tokens()}, {"parts", b.getIndexType()}});
    Block *body = addFunction(name, params);
    Value noBias;
    ValueRange args = body->getArguments();
    Conv1dFwdOp::create(b, b.getUnknownLoc(), args[0], args[1], args[2],
                        bias != "none" ? args[3] : noBias, args.end()[-2],
                        args.back(), kWidth, Activation::silu, tiling);
    func::ReturnOp::create(b, b.getUnknownLoc());
    routes[name] = {"fwd", weight.str(), bias.str(), "none"};
  }

  void addBackward(StringRef weight, StringRef bias, StringRef policy,
                   TilingAttr tiling) {
    std::string name =
        ("cake_bwd_w" + weight + "_b" + bias + "_p" + policy).str();
    bool hasBias = bias != "none";
    SiluGrad siluGrad = policy == "bf16" ? SiluGrad::bf16 : SiluGrad::fp32;
    // Parameter order: the backward kernel's, then what only the reduction
    // writes (docs/kernel-abi.md).
    SmallVector<std::pair<StringRef, Type>> params = {
        {"x", tokens()}, {"weight", weightType(weight)}, {"cu_seqlens", cu()}};
    if (hasBias)
      params.push_back({"bias", vectorType(bias)});
    params.append(
        {{"dy", tokens()},
         {"dx", tokens()},
         {"partials",
          MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                          partialsElementType(&context, siluGrad))},
         {"dweight", weightType(weight)}});
    if (hasBias)
      params.push_back({"dbias", vectorType(bias)});
    Block *body = addFunction(name, params);
    auto arg = [&](StringRef param) -> Value {
      for (auto [i, p] : llvm::enumerate(params))
        if (p.first == param)
          return body->getArgument(i);
      return Value();
    };
    Conv1dBwdOp::create(b, b.getUnknownLoc(), arg("x"), arg("weight"),
                        arg("cu_seqlens"), arg("dy"), arg("bias"), arg("dx"),
                        arg("dweight"), arg("dbias"), arg("partials"), kWidth,
                        Activation::silu, siluGrad, tiling);
    func::ReturnOp::create(b, b.getUnknownLoc());
    routes[name] = {"bwd", weight.str(), bias.str(), policy.str()};
  }

  LogicalResult build(const CakeToPTXOptions &options,
                      const CakeToHostOptions &hostOptions) {
    OwningOpRef<ModuleOp> host = module->clone();
    for (const std::string &name : gpuOnly)
      host->lookupSymbol<func::FuncOp>(name).erase();
    PassManager toKernels(&context);
    buildCakeToKernelsPipeline(toKernels, options);
    if (failed(toKernels.run(*module)))
      return failure();
    if (dumpKernels)
      module->print(llvm::outs());
    module->walk([&](gpu::GPUFuncOp kernel) {
      gpuKernels[kernel.getName().str()] =
          record(kernel, (*kernel.getKnownBlockSize())[0]);
    });
    PassManager toPTX(&context);
    buildKernelsToPTXPipeline(toPTX, options);
    if (failed(toPTX.run(*module)))
      return failure();
    auto binary = module->lookupSymbol<gpu::BinaryOp>("cake_kernels");
    if (!binary || binary.getObjects().size() != 1)
      return module->emitError("expected one gpu.binary @cake_kernels");
    ptx = cast<gpu::ObjectAttr>(binary.getObjects()[0]).getObject().str();

    PassManager toHostKernels(&context);
    buildCakeToHostKernelsPipeline(toHostKernels, hostOptions);
    if (failed(toHostKernels.run(*host)))
      return failure();
    host->walk([&](func::FuncOp kernel) {
      if (kernel->hasAttr(kHostKernelAttrName))
        hostKernels[kernel.getName().str()] = record(kernel, /*block=*/1);
    });
    PassManager toLLVM(&context);
    buildHostKernelsToLLVMPipeline(toLLVM);
    if (failed(toLLVM.run(*host)))
      return failure();
    FailureOr<std::string> object = emitHostObject(*host);
    if (failed(object))
      return failure();
    hostObject = std::move(*object);
    return success();
  }

  LogicalResult write() {
    if (std::error_code error = llvm::sys::fs::create_directories(outputDir))
      return emitError(UnknownLoc::get(&context))
             << "cannot create " << outputDir << ": " << error.message();
    if (failed(writeFile("cake_kernels.ptx", ptx)) ||
        failed(writeFile("cake_kernels_host.o", hostObject)) ||
        failed(writeFile("cake_kernels_host.cpp", hostTable())))
      return failure();

    std::string manifest;
    llvm::raw_string_ostream os(manifest);
    os << "cake-manifest 6\n# options: " << pipelineOptions
       << "\n# host options: " << hostPipelineOptions << "\n";
    for (auto [target, kernels] :
         {std::pair{"gpu", &gpuKernels}, std::pair{"host", &hostKernels}}) {
      for (const auto &[name, kernel] : *kernels) {
        bool reduce = kernel.waitsFor != "none";
        const Route &route = routes.at(reduce ? kernel.waitsFor : name);
        os << "kernel " << name << " target=" << target
           << " op=" << (reduce ? "reduce" : route.op)
           << " weight=" << route.weight << " bias=" << route.bias
           << " policy=" << (reduce ? "none" : route.policy)
           << " acc=" << kernel.acc << " block=" << kernel.block
           << " waves=" << kernel.waves
           << " max_part_tokens=" << kernel.maxPartTokens
           << " vector_channels=" << kernel.vectorChannels
           << " lanes_per_item=" << kernel.lanesPerItem
           << " width=" << kernel.width << " waits_for=" << kernel.waitsFor
           << " params=" << kernel.params << " align=" << kernel.align << "\n";
      }
    }
    return writeFile("cake_kernels.manifest", manifest);
  }

private:
  Type elementType(StringRef dtype) {
    return dtype == "bf16" ? Type(b.getBF16Type()) : Type(b.getF32Type());
  }
  MemRefType tokens() {
    return MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                           b.getBF16Type());
  }
  MemRefType weightType(StringRef dtype) {
    return MemRefType::get({ShapedType::kDynamic, kWidth}, elementType(dtype));
  }
  MemRefType vectorType(StringRef dtype) {
    return MemRefType::get({ShapedType::kDynamic}, elementType(dtype));
  }
  MemRefType cu() {
    return MemRefType::get({ShapedType::kDynamic}, b.getI32Type());
  }

  /// A function over `params`, each argument named by `cake.param`; leaves
  /// the builder in its body and returns it.
  Block *addFunction(StringRef name,
                     ArrayRef<std::pair<StringRef, Type>> params) {
    SmallVector<Type> types;
    for (const auto &param : params)
      types.push_back(param.second);
    b.setInsertionPointToEnd(module->getBody());
    auto func = func::FuncOp::create(b, b.getUnknownLoc(), name,
                                     b.getFunctionType(types, {}));
    for (auto [i, param] : llvm::enumerate(params))
      func.setArgAttr(i, kParamAttrName, b.getStringAttr(param.first));
    Block *body = func.addEntryBlock();
    b.setInsertionPointToStart(body);
    return body;
  }

  /// What launching `kernel` needs: its parameters (names from
  /// `cake.param`), its tiling's vector and the kernel it waits for.
  KernelRecord record(FunctionOpInterface kernel, int64_t block) {
    KernelRecord result{"", "", "none", 0, block, 1, 0, 1, 1, "none"};
    llvm::raw_string_ostream params(result.params), align(result.align);
    for (unsigned i = 0; i < kernel.getNumArguments(); ++i) {
      StringRef name =
          kernel.getArgAttrOfType<StringAttr>(i, kParamAttrName).getValue();
      params << (i ? "," : "") << name << ":";
      auto memref = dyn_cast<MemRefType>(kernel.getArgumentTypes()[i]);
      if (!memref) {
        params << "index";
        continue;
      }
      params << memref.getRank();
      if (auto bytes = kernel.getArgAttrOfType<IntegerAttr>(i, kAlignAttrName))
        align << (result.align.empty() ? "" : ",") << name << ":"
              << bytes.getInt();
      if (name == "partials")
        result.acc = memref.getElementType().isF64() ? "f64" : "f32";
      if (name == "weight" || name == "dweight")
        result.width = memref.getDimSize(1);
    }
    if (auto tiling =
            kernel->getAttrOfType<TilingAttr>(kKernelTilingAttrName)) {
      result.vectorChannels = tiling.getVectorChannels();
      result.waves = tiling.getWaves();
      result.maxPartTokens = tiling.getMaxPartTokens();
    }
    if (auto lanes = kernel->getAttrOfType<IntegerAttr>(kLanesPerItemAttrName))
      result.lanesPerItem = lanes.getInt();
    if (auto waitsFor =
            kernel->getAttrOfType<FlatSymbolRefAttr>(kWaitsForAttrName))
      result.waitsFor = waitsFor.getValue().str();
    return result;
  }

  /// The table of the host kernels' packed entry points, which the runtime
  /// finds them by.
  std::string hostTable() {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "// Generated by cake-kernel-gen: the host kernels of "
          "cake_kernels_host.o; do not edit.\n\n"
       << "#include \"Internal.h\"\n\nextern \"C\" {\n";
    for (const auto &entry : hostKernels)
      os << "void " << entry.first << "_packed(const uint64_t *);\n";
    os << "}\n\nnamespace cake::runtime::detail {\n\n"
       << "extern const HostKernelEntry hostKernels[] = {\n";
    for (const auto &entry : hostKernels)
      os << "    {\"" << entry.first << "\", " << entry.first << "_packed},\n";
    os << "    {nullptr, nullptr}};\n\n} // namespace cake::runtime::detail\n";
    return text;
  }

  LogicalResult writeFile(StringRef name, StringRef contents) {
    std::error_code error;
    llvm::raw_fd_ostream file((outputDir + "/" + name).str(), error);
    if (error)
      return emitError(UnknownLoc::get(&context))
             << "cannot write " << name << ": " << error.message();
    file << contents;
    return success();
  }

  MLIRContext &context;
  OpBuilder b;
  OwningOpRef<ModuleOp> module;
  std::map<std::string, Route> routes;
  std::set<std::string> gpuOnly;
  std::map<std::string, KernelRecord> gpuKernels, hostKernels;
  std::string ptx, hostObject;
};
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "Cake kernel library generator\n");
  DialectRegistry registry;
  registerCakeDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  std::unique_ptr<CakeToPTXOptions> options =
      CakeToPTXOptions::createFromString(pipelineOptions);
  std::unique_ptr<CakeToHostOptions> hostOptions =
      CakeToHostOptions::createFromString(hostPipelineOptions);
  if (!options || !hostOptions)
    return 1;

  auto parseTiling = [&](StringRef text) {
    return dyn_cast_or_null<TilingAttr>(parseAttribute(text, &context));
  };
  TilingAttr fwdTiling =
      forwardTiling.empty() ? TilingAttr() : parseTiling(forwardTiling);
  TilingAttr fwdLongTiling =
      forwardLongTiling.empty() ? TilingAttr() : parseTiling(forwardLongTiling);
  TilingAttr bf16Tiling = parseTiling(backwardTiling);
  TilingAttr fp32Tiling = parseTiling(backwardFp64Tiling);
  if ((!forwardTiling.empty() && !fwdTiling) ||
      (!forwardLongTiling.empty() && !fwdLongTiling) || !bf16Tiling ||
      !fp32Tiling) {
    llvm::errs() << "--fwd-tiling, --fwd-long-tiling, --bwd-tiling and "
                    "--bwd-fp64-tiling take #cake.tiling<...>\n";
    return 1;
  }

  KernelLibrary library(context);
  for (StringRef weight : {"f32", "bf16"}) {
    for (StringRef bias : {"none", "f32", "bf16"}) {
      library.addForward(weight, bias, fwdTiling);
      if (fwdLongTiling)
        library.addForward(weight, bias, fwdLongTiling, "_long");
      library.addBackward(weight, bias, "bf16", bf16Tiling);
      library.addBackward(weight, bias, "fp32", fp32Tiling);
    }
  }
  if (failed(library.build(*options, *hostOptions)) || failed(library.write()))
    return 1;
  return 0;
}
