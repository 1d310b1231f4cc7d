//===- Internal.h - Runtime-private declarations ----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0
//
//===----------------------------------------------------------------------===//
//
// This file declares what the runtime's source files share and nothing else
// sees: the table of CUDA driver entry points, resolved at run time, the
// driver error check, the kernels loaded into a context, the embedded kernel
// images, and the host kernels linked in.
//
//===----------------------------------------------------------------------===//

#ifndef CAKE_LIB_RUNTIME_INTERNAL_H
#define CAKE_LIB_RUNTIME_INTERNAL_H

#include "cake/Runtime/Runtime.h"

// For types and enums only: the runtime never links libcuda.
#include <cuda.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cake::runtime::detail {

/// The driver entry points the runtime calls. cuda.h maps some names to
/// versioned symbols (cuCtxPushCurrent is cuCtxPushCurrent_v2); the loader
/// looks up the name after that mapping, as a program linked to libcuda would.
#define CAKE_DRIVER_FUNCTIONS(X)                                               \
  X(cuInit)                                                                    \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxGetCurrent)                                                           \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxGetDevice)                                                            \
  X(cuCtxPushCurrent)                                                          \
  X(cuCtxPopCurrent)                                                           \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleGetFunction)                                                       \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                               \
  X(cuThreadExchangeStreamCaptureMode)                                         \
  X(cuLaunchKernelEx)

/// Entry points of newer drivers than the runtime needs; null when the driver
/// lacks them. cuFuncLoad (CUDA 12.4) finishes loading a function that lazy
/// module loading left partly loaded.
#define CAKE_OPTIONAL_DRIVER_FUNCTIONS(X) X(cuFuncLoad)

/// Pointers to the CUDA driver's entry points, one member per function, named
/// like the function.
struct Driver {
#define CAKE_DRIVER_MEMBER(fn) decltype(&::fn) fn = nullptr;
  CAKE_DRIVER_FUNCTIONS(CAKE_DRIVER_MEMBER)
  CAKE_OPTIONAL_DRIVER_FUNCTIONS(CAKE_DRIVER_MEMBER)
#undef CAKE_DRIVER_MEMBER
};

/// Returns the driver, loading and initializing it on first use; throws
/// std::runtime_error saying why when it cannot be used.
const Driver &getDriver();

/// Returns the driver's name and description of `result`.
std::string describeResult(CUresult result);

/// Throws std::runtime_error naming `what` (followed by `subject`, when
/// given) and describing `result` unless `result` is CUDA_SUCCESS. The message
/// is built only then: every launch checks its driver calls.
void checkResult(CUresult result, const char *what,
                 std::string_view subject = {});

/// Returns the position of `kernel` in getKernels(); throws unless it is an
/// entry of that list.
size_t indexOf(const KernelInfo &kernel);

/// A GPU kernel loaded into a context: what a launch there needs of it.
struct LoadedKernel {
  CUfunction function = nullptr;
  /// The kernel's threads the device holds at once: its occupancy (blocks
  /// per multiprocessor, from the driver, at least 1) * multiprocessors *
  /// block.
  int64_t residentThreads = 0;
};

/// The embedded kernels loaded into one context, and the image they came from.
struct LoadedModule {
  CUmodule module = nullptr;
  CUdevice device = 0;
  const char *image = nullptr; ///< "cubin" or "ptx".
  /// By the kernel's position in getKernels(); no function for host kernels.
  std::vector<LoadedKernel> kernels;

  /// Returns `kernel` as loaded here; throws unless it is a GPU kernel of the
  /// loaded library.
  const LoadedKernel &get(const KernelInfo &kernel) const;
};

/// Returns the kernels of `context`, which is current, loading them into it
/// on first use. Modules stay loaded, and their addresses fixed, for the life
/// of the process.
const LoadedModule &getModule(CUcontext context);

/// The build-time copies of cake_kernels.ptx, cake_kernels.manifest and the
/// sm_90a cubin that cmake/CheckPTX.cmake assembles from that PTX, each
/// followed by a NUL (defined in the .cpp that cmake/EmbedKernels.cmake
/// writes). The cubin is an ELF image, aligned for the driver to read it in
/// place.
extern const char embeddedPtx[];
extern const char embeddedManifest[];
alignas(64) extern const unsigned char embeddedCubin[];

/// A host kernel's entry point: it reads the kernel's parameters, in the
/// manifest's order, as 64-bit words (a memref as its expanded descriptor), as
/// cake-wrap-host-kernels writes it.
using HostKernel = void (*)(const uint64_t *params);

/// One host kernel of cake_kernels_host.o.
struct HostKernelEntry {
  const char *name;
  HostKernel run;
};

/// The host kernels, ended by an entry with a null name (defined in the
/// cake_kernels_host.cpp that cake-kernel-gen writes).
extern const HostKernelEntry hostKernels[];

/// Returns the entry point of host kernel `kernel`.
HostKernel getHostKernel(const KernelInfo &kernel);

} // namespace cake::runtime::detail

#endif // CAKE_LIB_RUNTIME_INTERNAL_H
