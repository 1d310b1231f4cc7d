//===- CakeModule.cpp - The cake._C Python extension ----------------------===//
//
// SPDX-License-Identifier: Apache-2.0
//
//===----------------------------------------------------------------------===//
//
// This file implements cake._C, a thin pybind11 layer over the Cake runtime.
// It knows nothing of PyTorch: tensors arrive as data pointers and streams as
// CUstream handles, both Python ints, and the package's Python code checks
// every argument before calling in. Runtime errors become RuntimeError.
//
//===----------------------------------------------------------------------===//

#include "cake/Runtime/Runtime.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;
using namespace cake::runtime;

/// Returns the manifest's kernels as dicts keyed by the manifest's field
/// names; params is a list of (name, rank or "index").
static py::list getKernelDicts() {
  py::list result;
  for (const KernelInfo &kernel : getKernels()) {
    py::list params;
    for (const KernelInfo::Param &param : kernel.params) {
      if (param.kind == KernelInfo::Param::Kind::Index)
        params.append(py::make_tuple(param.name, "index"));
      else
        params.append(py::make_tuple(param.name, param.rank));
    }
    py::dict entry;
    entry["name"] = kernel.name;
    entry["target"] =
        kernel.target == KernelInfo::Target::Gpu ? "gpu" : "host";
    entry["op"] = nameOf(kernel.op);
    entry["weight"] = nameOf(kernel.weight);
    entry["bias"] = nameOf(kernel.bias);
    entry["policy"] = nameOf(kernel.policy);
    entry["acc"] = nameOf(kernel.acc);
    entry["block"] = kernel.block;
    entry["waves"] = kernel.waves;
    entry["max_part_tokens"] = kernel.maxPartTokens;
    entry["vector_channels"] = kernel.vectorChannels;
    entry["width"] = kernel.width;
    entry["waits_for"] = kernel.waitsFor.empty() ? "none" : kernel.waitsFor;
    py::dict align;
    for (const KernelInfo::Param &param : kernel.params)
      if (param.kind == KernelInfo::Param::Kind::Memref)
        align[py::str(param.name)] = param.align;
    entry["align"] = align;
    entry["params"] = params;
    result.append(entry);
  }
  return result;
}

// The Python API's names of the dtypes and the policy, as enums. Which values
// a call takes is the runtime's to check (it names the argument and what it
// allows); here a name only has to exist.
static DType dtypeNamed(std::string_view name, const char *what) {
  return parseDType(name, what,
                    {DType::None, DType::F32, DType::BF16, DType::F64});
}
static Policy policyNamed(std::string_view name) {
  return parsePolicy(name, "policy",
                     {Policy::None, Policy::BF16, Policy::FP32});
}

static void launchForward(DevicePtr x, DevicePtr weight, DevicePtr cuSeqlens,
                          DevicePtr bias, DevicePtr y, int64_t S, int64_t C,
                          int64_t numDocs, const std::string &weightDtype,
                          const std::string &biasDtype, int device,
                          StreamHandle stream) {
  ForwardArgs args;
  args.x = x;
  args.weight = weight;
  args.cuSeqlens = cuSeqlens;
  args.bias = bias;
  args.y = y;
  args.S = S;
  args.C = C;
  args.numDocs = numDocs;
  args.weightDtype = dtypeNamed(weightDtype, "weight_dtype");
  args.biasDtype = dtypeNamed(biasDtype, "bias_dtype");
  args.device = device;
  args.stream = stream;
  forward(args);
}

static void launchBackward(DevicePtr x, DevicePtr weight, DevicePtr cuSeqlens,
                           DevicePtr bias, DevicePtr dy, DevicePtr dx,
                           DevicePtr dweight, DevicePtr dbias,
                           DevicePtr workspace, int64_t S, int64_t C,
                           int64_t numDocs, const std::string &weightDtype,
                           const std::string &biasDtype,
                           const std::string &policy,
                           int device, StreamHandle stream) {
  BackwardArgs args;
  args.x = x;
  args.weight = weight;
  args.cuSeqlens = cuSeqlens;
  args.bias = bias;
  args.dy = dy;
  args.dx = dx;
  args.dweight = dweight;
  args.dbias = dbias;
  args.workspace = workspace;
  args.S = S;
  args.C = C;
  args.numDocs = numDocs;
  args.weightDtype = dtypeNamed(weightDtype, "weight_dtype");
  args.biasDtype = dtypeNamed(biasDtype, "bias_dtype");
  args.policy = policyNamed(policy);
  args.device = device;
  args.stream = stream;
  backward(args);
}

/// The parts (partial rows) of a backward over S tokens: what its weight
/// gradient sums are split into (docs/kernel-abi.md).
static int64_t backwardParts(int64_t S, int64_t C, const std::string &weight,
                             const std::string &bias, const std::string &policy,
                             int device) {
  const KernelInfo &kernel =
      selectKernel(targetOf(device), Op::Bwd, dtypeNamed(weight, "weight_dtype"),
                   dtypeNamed(bias, "bias_dtype"), policyNamed(policy), C);
  return S == 0 ? 0 : partsFor(kernel, S, C, device);
}

static std::pair<std::string, int64_t>
forwardLaunchOf(int64_t S, int64_t C, const std::string &weight,
                const std::string &bias, int device) {
  ForwardLaunch launch =
      forwardLaunch(device, dtypeNamed(weight, "weight_dtype"),
                    dtypeNamed(bias, "bias_dtype"), S, C);
  return {launch.kernel->name, launch.parts};
}

static std::pair<std::string, int64_t>
gpuForwardRuleOf(int64_t S, int64_t C, const std::string &weight,
                 const std::string &bias,
                 const std::vector<int64_t> &residentThreads) {
  ForwardLaunch launch =
      gpuForwardRule(dtypeNamed(weight, "weight_dtype"),
                     dtypeNamed(bias, "bias_dtype"), S, C, residentThreads);
  return {launch.kernel->name, launch.parts};
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "Cake's runtime: launches the embedded kernels through the CUDA "
            "driver, or runs the host kernels on the CPU (device_index -1). "
            "Pointers and streams are ints; the Python package checks "
            "arguments before calling in.";
  m.attr("HOST_DEVICE_INDEX") = kHostDevice;

  // The first call loads the driver (cuInit), which can take a while.
  m.def("is_supported", &isSupported, py::arg("device_index"),
        py::call_guard<py::gil_scoped_release>(),
        "Whether the driver loads and the device exists with compute "
        "capability >= 9.0; for device_index -1, whether the host's CPU runs "
        "the host kernels.");
  m.def(
      "unavailable_reason",
      [](int device) {
        return device == kHostDevice ? hostUnavailableReason()
                                     : unavailableReason();
      },
      py::arg("device_index") = 0, py::call_guard<py::gil_scoped_release>(),
      "Why the CUDA driver cannot be used (for device_index -1: why the host "
      "cannot run the host kernels); empty when it can.");
  m.def("load_kernels", &loadKernels, py::arg("device_index"),
        py::call_guard<py::gil_scoped_release>(),
        "Loads the kernels into the device's current context (once per "
        "context, as its first launch would) and returns the image they came "
        "from: 'cubin' (the build's sm_90a cubin, on compute capability 9.0) "
        "or 'ptx' (compiled by the driver). CAKE_KERNEL_IMAGE=ptx|cubin in "
        "the environment overrides the choice.");
  m.def("backward_workspace_bytes", &backwardWorkspaceBytes, py::arg("C"),
        py::arg("device_index"), py::call_guard<py::gil_scoped_release>(),
        "Bytes of the backward workspace for C channels on the device; the "
        "first call per device loads the kernels.");
  m.def("forward", &launchForward, py::arg("x"), py::arg("weight"),
        py::arg("cu_seqlens"), py::arg("bias"), py::arg("y"), py::arg("S"),
        py::arg("C"), py::arg("num_docs"), py::arg("weight_dtype"),
        py::arg("bias_dtype"), py::arg("device_index"), py::arg("stream"),
        py::call_guard<py::gil_scoped_release>(),
        "Launches the forward pass on `stream`. Dtypes are 'f32' or 'bf16'; "
        "bias_dtype 'none' means no bias.");
  m.def("backward", &launchBackward, py::arg("x"), py::arg("weight"),
        py::arg("cu_seqlens"), py::arg("bias"), py::arg("dy"), py::arg("dx"),
        py::arg("dweight"), py::arg("dbias"), py::arg("workspace"),
        py::arg("S"), py::arg("C"), py::arg("num_docs"),
        py::arg("weight_dtype"), py::arg("bias_dtype"), py::arg("policy"),
        py::arg("device_index"), py::arg("stream"),
        py::call_guard<py::gil_scoped_release>(),
        "Launches the backward pass (bwd, then reduce as its programmatic "
        "dependent launch) on `stream`. policy is 'bf16' or 'fp32'.");
  m.def("backward_parts", &backwardParts, py::arg("S"), py::arg("C"),
        py::arg("weight_dtype"), py::arg("bias_dtype"), py::arg("policy"),
        py::arg("device_index"), py::call_guard<py::gil_scoped_release>(),
        "The partial rows a backward over S tokens sums the weight gradient "
        "in: part r covers the tokens [r * S / R, (r + 1) * S / R).");
  m.def("forward_launch", &forwardLaunchOf, py::arg("S"), py::arg("C"),
        py::arg("weight_dtype"), py::arg("bias_dtype"), py::arg("device_index"),
        py::call_guard<py::gil_scoped_release>(),
        "The forward kernel (its manifest name) and parts a forward over S "
        "tokens launches, whatever its documents (docs/kernel-abi.md).");
  m.def("gpu_forward_rule", &gpuForwardRuleOf, py::arg("S"), py::arg("C"),
        py::arg("weight_dtype"), py::arg("bias_dtype"),
        py::arg("resident_threads"),
        "forward_launch's rule on a GPU that holds resident_threads[i] threads "
        "of the route's i-th forward configuration at once; needs no GPU.");
  m.def("kernels", &getKernelDicts, "The kernel manifest's entries, as dicts.");
  m.def(
      "launch_contract",
      [] {
        const LaunchContract &contract = getLaunchContract();
        py::dict result;
        result["width"] = contract.width;
        result["channel_multiple"] = contract.channelMultiple;
        return result;
      },
      "What every call must respect, from the manifest: the weight's width "
      "and the multiple C must be of.");
  m.def(
      "alignments",
      [](const std::string &target, const std::string &op,
         const std::string &weight, const std::string &bias,
         const std::string &policy) {
        if (target != "gpu" && target != "host")
          throw std::invalid_argument("target must be 'gpu' or 'host'");
        py::dict result;
        for (const auto &[name, bytes] : launchAlignments(
                 target == "gpu" ? KernelInfo::Target::Gpu
                                 : KernelInfo::Target::Host,
                 parseOp(op, "op", {Op::Fwd, Op::Bwd}),
                 dtypeNamed(weight, "weight_dtype"),
                 dtypeNamed(bias, "bias_dtype"), policyNamed(policy)))
          result[py::str(name)] = bytes;
        return result;
      },
      py::arg("target"), py::arg("op"), py::arg("weight_dtype"),
      py::arg("bias_dtype"), py::arg("policy"),
      "The bytes each memref parameter's address must be a multiple of, for "
      "the kernels a call of op ('fwd', or 'bwd' with its reduce) runs on "
      "target ('gpu' or 'host'), from the manifest.");
}
