//===- TorchOps.cpp - The cake._torch_ops extension -----------------------===//
//
// SPDX-License-Identifier: Apache-2.0
//
//===----------------------------------------------------------------------===//
//
// This file implements cake._torch_ops, the package's eager route in C++: the
// forward, the backward and the autograd function (a
// torch::autograd::Function, so a backward runs no Python), over libtorch and
// the Cake runtime.
//
// Each entry point runs a call only when it is the common valid case, checked
// here from tensor metadata and data pointers: plain tensors (torch.Tensor or
// nn.Parameter, no subclass, functorch wrapper or mode) on one CPU or CUDA
// device that runs the kernels, the dtypes, shapes and layouts of SPEC.md,
// data aligned to the strictest rule of the manifest, no output overlapping
// another tensor, and no input that requires grad under grad mode for the
// explicit forward and backward. For any other call it returns None and the
// Python package takes it on its own route, which raises the documented
// errors: the errors have one source, python/cake/_checks.py
// (docs/host-overhead.md). Nothing here reads tensor contents or syncs.
//
// It links the libtorch of one torch version; python/cake/_ops.py imports it
// only under that version.
//
//===----------------------------------------------------------------------===//

#include "cake/Runtime/Runtime.h"

#include <ATen/TensorSubclassLikeUtils.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/python_variable.h>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>

namespace py = pybind11;
using namespace cake::runtime;
using at::Tensor;

namespace {

/// What every call must respect, from the manifest: the launch contract, and
/// the strictest alignment any kernel asks of a parameter. The fast path asks
/// it of every tensor; a valid call with a looser pointer takes the Python
/// route, which applies each parameter's own rule.
struct Contract {
  int64_t width;
  int64_t channelMultiple;
  int64_t align = 1;
};

const Contract &contract() {
  static const Contract value = [] {
    Contract result{getLaunchContract().width,
                    getLaunchContract().channelMultiple};
    for (const KernelInfo &kernel : getKernels())
      for (const KernelInfo::Param &param : kernel.params)
        result.align = std::max(result.align, param.align);
    return result;
  }();
  return value;
}

/// Returns the runtime's index of `device` (the host for the CPU) when it runs
/// the kernels; asks the runtime once per device.
std::optional<int> runtimeDevice(c10::Device device) {
  int index;
  if (device.is_cpu())
    index = kHostDevice;
  else if (device.is_cuda() && device.has_index())
    index = device.index();
  else
    return std::nullopt;
  // By index + 1 (c10's indices are at most 127): 0 not yet asked, 1
  // supported, 2 not. No lock on the way of every call; two threads asking
  // at once get the same answer.
  static std::array<std::atomic<int8_t>, 129> supported{};
  std::atomic<int8_t> &known = supported[index + 1];
  int8_t answer = known.load(std::memory_order_relaxed);
  if (answer == 0) {
    answer = isSupported(index) ? 1 : 2;
    known.store(answer, std::memory_order_relaxed);
  }
  return answer == 1 ? std::optional<int>(index) : std::nullopt;
}

/// The handle of the current stream of `device` (0 on the host), through
/// c10's device-generic interface: no CUDA header needed here.
StreamHandle currentStream(c10::Device device) {
  if (device.is_cpu())
    return 0;
  const c10::impl::DeviceGuardImplInterface *impl =
      c10::impl::getDeviceGuardImpl(device.type());
  return reinterpret_cast<StreamHandle>(
      impl->getStreamNativeHandle(impl->getStream(device)));
}

/// backwardWorkspaceBytes, computed once per (C, device).
int64_t workspaceBytes(int64_t C, int device) {
  // A thread calls with one (C, device) call after call: no lock then.
  thread_local struct {
    int64_t C = 0;
    int device = 0;
    int64_t bytes = -1;
  } last;
  if (last.bytes >= 0 && last.C == C && last.device == device)
    return last.bytes;
  static std::mutex mutex;
  static std::map<std::pair<int64_t, int>, int64_t> bytes;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = bytes.try_emplace({C, device}, 0);
  if (inserted)
    it->second = backwardWorkspaceBytes(C, device);
  last = {C, device, it->second};
  return it->second;
}

std::optional<DType> paramDType(const Tensor &t) {
  if (t.scalar_type() == at::kFloat)
    return DType::F32;
  if (t.scalar_type() == at::kBFloat16)
    return DType::BF16;
  return std::nullopt;
}

/// Whether `t` is a dense contiguous tensor on `device`, not subclass-like,
/// with an aligned data pointer.
bool usable(const Tensor &t, c10::Device device) {
  return t.layout() == c10::kStrided && t.device() == device &&
         !at::isTensorSubclassLike(t) && t.is_contiguous() &&
         reinterpret_cast<uintptr_t>(t.data_ptr()) % contract().align == 0;
}

/// `usable`, of `dtype` and `sizes`.
bool usable(const Tensor &t, c10::Device device, at::ScalarType dtype,
            c10::IntArrayRef sizes) {
  return t.scalar_type() == dtype && t.sizes() == sizes && usable(t, device);
}

/// The inputs of a call and what they decide.
struct Inputs {
  Tensor x, weight, cuSeqlens, bias; ///< bias undefined when not given
  int64_t S = 0, C = 0, numDocs = 0;
  DType weightDtype = DType::F32, biasDtype = DType::None;
  int device = 0;
};

/// Fills in what the inputs decide; returns false unless they are the common
/// valid case.
bool checkInputs(Inputs &in) {
  const Tensor &x = in.x;
  std::optional<int> device = runtimeDevice(x.device());
  if (!device || x.scalar_type() != at::kBFloat16 ||
      !(x.dim() == 2 || (x.dim() == 3 && x.size(0) == 1)) ||
      !usable(x, x.device()))
    return false;
  int64_t C = x.size(-1);
  if (C == 0 || C % contract().channelMultiple != 0)
    return false;
  std::optional<DType> weightDtype = paramDType(in.weight);
  if (!weightDtype ||
      !usable(in.weight, x.device(), in.weight.scalar_type(),
              {C, contract().width}) ||
      !usable(in.cuSeqlens, x.device()) ||
      in.cuSeqlens.scalar_type() != at::kInt || in.cuSeqlens.dim() != 1 ||
      in.cuSeqlens.numel() == 0)
    return false;
  std::optional<DType> biasDtype = DType::None;
  if (in.bias.defined()) {
    biasDtype = paramDType(in.bias);
    if (!biasDtype || !usable(in.bias, x.device(), in.bias.scalar_type(), {C}))
      return false;
  }
  in.S = x.numel() / C;
  in.C = C;
  in.numDocs = in.cuSeqlens.numel() - 1;
  in.weightDtype = *weightDtype;
  in.biasDtype = *biasDtype;
  in.device = *device;
  return true;
}

/// Whether an output (from `firstOutput` on; undefined ones skipped) shares a
/// byte with an input or an earlier output. Empty tensors overlap nothing.
template <size_t N>
bool overlap(const std::array<const Tensor *, N> &tensors, size_t firstOutput) {
  auto extent = [](const Tensor &t) {
    auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
    return std::pair(begin, begin + t.numel() * t.element_size());
  };
  for (size_t i = firstOutput; i < N; ++i) {
    if (!tensors[i]->defined())
      continue;
    auto [begin, end] = extent(*tensors[i]);
    for (size_t j = 0; j < i; ++j) {
      if (!tensors[j]->defined())
        continue;
      auto [otherBegin, otherEnd] = extent(*tensors[j]);
      if (begin < end && otherBegin < otherEnd && begin < otherEnd &&
          otherBegin < end)
        return true;
    }
  }
  return false;
}

/// Whether a launch on these tensors should be recorded by autograd: the
/// Python route then takes the call (the custom ops say that they have no
/// autograd formula, where a launch here would silently give no gradient).
template <size_t N>
bool recordsGrad(const std::array<const Tensor *, N> &tensors) {
  if (!at::GradMode::is_enabled())
    return false;
  for (const Tensor *t : tensors)
    if (t->defined() && t->requires_grad())
      return true;
  return false;
}

/// Bumps the version counters of the outputs a caller gave, as an in-place
/// aten op does, so that autograd sees a saved tensor overwritten.
void bumpVersions(std::initializer_list<const Tensor *> outputs) {
  for (const Tensor *t : outputs)
    if (t->defined())
      torch::autograd::impl::bump_version(*t);
}

/// at::empty_like(t), in one dispatch instead of two for the tensors here
/// (dense, unnamed): what empty_like itself then allocates.
Tensor emptyLike(const Tensor &t) {
  if (!t.is_non_overlapping_and_dense() || t.has_names())
    return at::empty_like(t);
  return at::empty_strided(t.sizes(), t.strides(), t.options());
}

uintptr_t pointer(const Tensor &t) {
  return t.defined() ? reinterpret_cast<uintptr_t>(t.data_ptr()) : 0;
}

/// ForwardArgs or BackwardArgs with the fields they share set from checked
/// inputs.
template <typename Args> Args argsOf(const Inputs &in) {
  Args args;
  args.x = pointer(in.x);
  args.weight = pointer(in.weight);
  args.cuSeqlens = pointer(in.cuSeqlens);
  args.bias = pointer(in.bias);
  args.S = in.S;
  args.C = in.C;
  args.numDocs = in.numDocs;
  args.weightDtype = in.weightDtype;
  args.biasDtype = in.biasDtype;
  args.device = in.device;
  args.stream = currentStream(in.x.device());
  return args;
}

/// Launches the forward of checked inputs into `y` (allocated when
/// undefined); returns y.
Tensor launchForward(const Inputs &in, Tensor y) {
  if (!y.defined())
    y = emptyLike(in.x);
  ForwardArgs args = argsOf<ForwardArgs>(in);
  args.y = pointer(y);
  forward(args);
  return y;
}

/// The forward with the caller's `out` and `workspace` (undefined when not
/// given); undefined when declined.
Tensor tryForward(Inputs &in, const Tensor &out, const Tensor &workspace) {
  if (!checkInputs(in))
    return {};
  c10::Device device = in.x.device();
  if ((out.defined() && !usable(out, device, at::kBFloat16, in.x.sizes())) ||
      (workspace.defined() &&
       (workspace.scalar_type() != at::kInt || !usable(workspace, device))))
    return {};
  std::array<const Tensor *, 6> tensors{&in.x,    &in.weight, &in.cuSeqlens,
                                        &in.bias, &out,       &workspace};
  if (recordsGrad(tensors) || overlap(tensors, 4))
    return {};
  bumpVersions({&out, &workspace});
  return launchForward(in, out);
}

/// (dx, dweight, dbias), dbias undefined without bias.
using Grads = std::array<Tensor, 3>;

/// The backward with the caller's buffers (undefined when not given);
/// nothing when declined.
std::optional<Grads> tryBackward(Inputs &in, const Tensor &dy, Policy policy,
                                 Tensor dx, Tensor dweight, Tensor dbias,
                                 Tensor workspace) {
  if (!checkInputs(in))
    return std::nullopt;
  c10::Device device = in.x.device();
  int64_t bytes = workspaceBytes(in.C, in.device);
  if (!usable(dy, device, at::kBFloat16, in.x.sizes()) ||
      (dx.defined() && !usable(dx, device, at::kBFloat16, in.x.sizes())) ||
      (dweight.defined() &&
       !usable(dweight, device, in.weight.scalar_type(), in.weight.sizes())) ||
      (dbias.defined() &&
       (!in.bias.defined() ||
        !usable(dbias, device, in.bias.scalar_type(), in.bias.sizes()))) ||
      (workspace.defined() &&
       (!usable(workspace, device) ||
        workspace.numel() * workspace.element_size() < bytes)))
    return std::nullopt;
  std::array<const Tensor *, 9> tensors{&in.x,    &in.weight, &in.cuSeqlens,
                                        &in.bias, &dy,        &dx,
                                        &dweight, &dbias,     &workspace};
  if (recordsGrad(tensors) || overlap(tensors, 5))
    return std::nullopt;
  bumpVersions({&dx, &dweight, &dbias, &workspace});
  if (!dx.defined())
    dx = emptyLike(in.x);
  if (!dweight.defined())
    dweight = emptyLike(in.weight);
  if (!dbias.defined() && in.bias.defined())
    dbias = emptyLike(in.bias);
  if (!workspace.defined())
    workspace = at::empty({bytes}, in.x.options().dtype(at::kByte));
  BackwardArgs args = argsOf<BackwardArgs>(in);
  args.dy = pointer(dy);
  args.dx = pointer(dx);
  args.dweight = pointer(dweight);
  args.dbias = pointer(dbias);
  args.workspace = pointer(workspace);
  args.policy = policy;
  backward(args);
  return Grads{dx, dweight, dbias};
}

/// Unpacks a plain tensor argument (None when `optional`); false for anything
/// else, subclasses included (they may override torch functions).
bool unpack(py::handle value, Tensor &t, bool optional = false) {
  static PyObject *parameter =
      py::object(py::module_::import("torch.nn").attr("Parameter"))
          .release()
          .ptr();
  if (optional && value.is_none())
    return true;
  PyObject *type = reinterpret_cast<PyObject *>(Py_TYPE(value.ptr()));
  if (type != THPVariableClass && type != parameter)
    return false;
  t = THPVariable_Unpack(value.ptr());
  return true;
}

bool unpackInputs(py::handle x, py::handle weight, py::handle cuSeqlens,
                  py::handle bias, Inputs &in) {
  return unpack(x, in.x) && unpack(weight, in.weight) &&
         unpack(cuSeqlens, in.cuSeqlens) && unpack(bias, in.bias, true);
}

/// The policy named by `value`, when it is one.
std::optional<Policy> policyOf(py::handle value) {
  if (!PyUnicode_Check(value.ptr()))
    return std::nullopt;
  if (PyUnicode_CompareWithASCIIString(value.ptr(), "bf16") == 0)
    return Policy::BF16;
  if (PyUnicode_CompareWithASCIIString(value.ptr(), "fp32") == 0)
    return Policy::FP32;
  return std::nullopt;
}

py::object wrap(const Tensor &t) {
  return t.defined() ? py::reinterpret_steal<py::object>(THPVariable_Wrap(t))
                     : py::none();
}

/// The backward on the Python route, which raises the documented error of a
/// call the fast path declines.
Grads pythonBackward(const Inputs &in, const Tensor &dy, Policy policy) {
  py::gil_scoped_acquire gil;
  py::object grads =
      py::module_::import("cake").attr("cake_causal_conv1d_train_backward")(
          wrap(in.x), wrap(in.weight), wrap(in.cuSeqlens), wrap(dy),
          py::arg("bias") = wrap(in.bias),
          py::arg("silu_grad_preactivation") = nameOf(policy));
  py::tuple gradTuple(grads);
  Grads result;
  for (size_t i = 0; i < result.size(); ++i) {
    PyObject *grad = gradTuple[i].ptr();
    if (THPVariable_Check(grad)) // dbias is None without bias
      result[i] = THPVariable_Unpack(grad);
  }
  return result;
}

/// cake_causal_conv1d's autograd, as CakeCausalConv1dFunction: saves only
/// (x, weight, cu_seqlens, bias), so in-place changes to them are detected,
/// and recomputes the pre-activation in the backward.
struct CakeCausalConv1d : torch::autograd::Function<CakeCausalConv1d> {
  static Tensor forward(torch::autograd::AutogradContext *ctx, const Tensor &x,
                        const Tensor &weight, const Tensor &cuSeqlens,
                        const std::optional<Tensor> &bias, const Inputs *in,
                        int64_t policy) {
    ctx->save_for_backward({x, weight, cuSeqlens, bias.value_or(Tensor())});
    ctx->saved_data["policy"] = policy;
    return launchForward(*in, Tensor());
  }

  static torch::autograd::variable_list
  backward(torch::autograd::AutogradContext *ctx,
           torch::autograd::variable_list gradOutputs) {
    torch::autograd::variable_list saved = ctx->get_saved_variables();
    Inputs in{saved[0], saved[1], saved[2], saved[3]};
    // As CakeCausalConv1dFunction: the kernels read dy as packed bf16. The
    // common grad_y is already that: no dispatch then.
    Tensor dy = gradOutputs[0];
    if (dy.scalar_type() != at::kBFloat16 || !dy.is_contiguous())
      dy = dy.to(at::kBFloat16).contiguous();
    auto policy = Policy(ctx->saved_data["policy"].toInt());
    std::optional<Grads> grads =
        tryBackward(in, dy, policy, Tensor(), Tensor(), Tensor(), Tensor());
    if (!grads)
      grads = pythonBackward(in, dy, policy);
    auto &[dx, dweight, dbias] = *grads;
    return {dx, dweight, Tensor(), dbias, Tensor(), Tensor()};
  }
};

py::object forwardEntry(py::handle x, py::handle weight, py::handle cuSeqlens,
                        py::handle bias, py::handle out, py::handle workspace) {
  Inputs in;
  Tensor outTensor, workspaceTensor;
  if (!unpackInputs(x, weight, cuSeqlens, bias, in) ||
      !unpack(out, outTensor, true) ||
      !unpack(workspace, workspaceTensor, true))
    return py::none();
  Tensor y;
  {
    py::gil_scoped_release noGil;
    y = tryForward(in, outTensor, workspaceTensor);
  }
  return wrap(y);
}

py::object backwardEntry(py::handle x, py::handle weight, py::handle cuSeqlens,
                         py::handle dy, py::handle bias, py::handle policy,
                         py::handle workspace, py::handle dx,
                         py::handle dweight, py::handle dbias) {
  Inputs in;
  Tensor dyTensor, buffers[4];
  std::optional<Policy> parsed = policyOf(policy);
  if (!parsed || !unpackInputs(x, weight, cuSeqlens, bias, in) ||
      !unpack(dy, dyTensor) || !unpack(workspace, buffers[0], true) ||
      !unpack(dx, buffers[1], true) || !unpack(dweight, buffers[2], true) ||
      !unpack(dbias, buffers[3], true))
    return py::none();
  std::optional<Grads> grads;
  {
    py::gil_scoped_release noGil;
    grads = tryBackward(in, dyTensor, *parsed, buffers[1], buffers[2],
                        buffers[3], buffers[0]);
  }
  if (!grads)
    return py::none();
  return py::make_tuple(wrap((*grads)[0]), wrap((*grads)[1]),
                        wrap((*grads)[2]));
}

py::object conv1dEntry(py::handle x, py::handle weight, py::handle cuSeqlens,
                       py::handle bias, py::handle policy) {
  Inputs in;
  std::optional<Policy> parsed = policyOf(policy);
  if (!parsed || !unpackInputs(x, weight, cuSeqlens, bias, in))
    return py::none();
  Tensor y;
  {
    py::gil_scoped_release noGil;
    if (checkInputs(in))
      y = CakeCausalConv1d::apply(
          in.x, in.weight, in.cuSeqlens,
          in.bias.defined() ? std::optional<Tensor>(in.bias) : std::nullopt,
          &in, int64_t(*parsed));
  }
  return wrap(y);
}

} // namespace

PYBIND11_MODULE(_torch_ops, m) {
  m.doc() = "Cake's eager route in C++ over libtorch: each function runs the "
            "common valid call and returns None for any other, which the "
            "Python package then takes (docs/host-overhead.md).";
  m.def("forward", &forwardEntry, py::arg("x"), py::arg("weight"),
        py::arg("cu_seqlens"), py::arg("bias"), py::arg("out"),
        py::arg("workspace"),
        "cake_causal_conv1d_train_forward's eager call: y, or None.");
  m.def("backward", &backwardEntry, py::arg("x"), py::arg("weight"),
        py::arg("cu_seqlens"), py::arg("dy"), py::arg("bias"),
        py::arg("silu_grad_preactivation"), py::arg("workspace"), py::arg("dx"),
        py::arg("dweight"), py::arg("dbias"),
        "cake_causal_conv1d_train_backward's eager call: (dx, dweight, "
        "dbias), or None.");
  m.def("conv1d", &conv1dEntry, py::arg("x"), py::arg("weight"),
        py::arg("cu_seqlens"), py::arg("bias"),
        py::arg("silu_grad_preactivation"),
        "cake_causal_conv1d's eager call through a C++ autograd function: "
        "y, or None.");
}
