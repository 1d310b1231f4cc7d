//===- Driver.cpp - Loading the CUDA driver at run time -------------------===//
//
// SPDX-License-Identifier: Apache-2.0
//
//===----------------------------------------------------------------------===//
//
// This file implements the loading of the CUDA driver with dlopen/dlsym, once
// per process, the driver error check, and the device support query. The
// runtime never links libcuda, so that the Python package imports, and its
// driver-free functions work, on a machine without the NVIDIA driver.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <dlfcn.h>

#include <stdexcept>

using namespace cake::runtime;
using namespace cake::runtime::detail;

#define CAKE_STRINGIFY_IMPL(x) #x
/// Expands `x` first, so a function name becomes the symbol cuda.h maps it to.
#define CAKE_STRINGIFY(x) CAKE_STRINGIFY_IMPL(x)

namespace {
/// The outcome of loading the driver: the entry points, or why not.
struct LoadedDriver {
  Driver driver;
  std::string error;
};
} // namespace

/// Returns the error for a driver without entry point `name`.
static LoadedDriver missingEntryPoint(const char *name) {
  return {{},
          std::string("the NVIDIA driver (libcuda.so.1) has no ") + name +
              "; a driver for CUDA 12.0 or newer is needed"};
}

static LoadedDriver loadDriver() {
  LoadedDriver result;
  // The handle is kept for the life of the process.
  void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    result.error = std::string("the NVIDIA driver (libcuda.so.1) was not "
                               "found: ") +
                   (reason ? reason : "dlopen failed");
    return result;
  }
  Driver &driver = result.driver;
#define CAKE_DRIVER_LOAD(fn)                                                   \
  driver.fn =                                                                  \
      reinterpret_cast<decltype(&::fn)>(dlsym(handle, CAKE_STRINGIFY(fn)));    \
  if (!driver.fn)                                                              \
    return missingEntryPoint(CAKE_STRINGIFY(fn));
  CAKE_DRIVER_FUNCTIONS(CAKE_DRIVER_LOAD)
#undef CAKE_DRIVER_LOAD
#define CAKE_DRIVER_LOAD_OPTIONAL(fn)                                          \
  driver.fn =                                                                  \
      reinterpret_cast<decltype(&::fn)>(dlsym(handle, CAKE_STRINGIFY(fn)));
  CAKE_OPTIONAL_DRIVER_FUNCTIONS(CAKE_DRIVER_LOAD_OPTIONAL)
#undef CAKE_DRIVER_LOAD_OPTIONAL

  if (CUresult status = driver.cuInit(0); status != CUDA_SUCCESS) {
    const char *name = nullptr;
    driver.cuGetErrorName(status, &name);
    result.error = std::string("the NVIDIA driver (libcuda.so.1) failed to "
                               "initialize: cuInit returned ") +
                   (name ? name : std::to_string(status));
  }
  return result;
}

static const LoadedDriver &getLoadedDriver() {
  static const LoadedDriver loaded = loadDriver();
  return loaded;
}

const Driver &detail::getDriver() {
  const LoadedDriver &loaded = getLoadedDriver();
  if (!loaded.error.empty())
    throw std::runtime_error("cake: " + loaded.error);
  return loaded.driver;
}

std::string detail::describeResult(CUresult result) {
  const Driver &driver = getDriver();
  const char *name = nullptr;
  const char *description = nullptr;
  driver.cuGetErrorName(result, &name);
  driver.cuGetErrorString(result, &description);
  return (name ? std::string(name) : "CUresult " + std::to_string(result)) +
         (description ? std::string(" (") + description + ")" : "");
}

void detail::checkResult(CUresult result, const char *what,
                         std::string_view subject) {
  if (result == CUDA_SUCCESS)
    return;
  std::string message = std::string("cake: ") + what;
  if (!subject.empty())
    message += " " + std::string(subject);
  throw std::runtime_error(message + " failed: " + describeResult(result));
}

std::string cake::runtime::unavailableReason() {
  return getLoadedDriver().error;
}

std::string cake::runtime::hostUnavailableReason() {
  // cake-kernel-gen compiles the host kernels for x86-64-v3.
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v3"))
    return "";
  return "the host kernels need an x86-64-v3 CPU (AVX2, FMA, BMI2, F16C)";
#else
  return "the host kernels are built for x86-64; this host is not";
#endif
}

bool cake::runtime::isSupported(int device) {
  if (device == kHostDevice)
    return hostUnavailableReason().empty();
  if (!unavailableReason().empty())
    return false;
  const Driver &driver = getDriver();
  int count = 0;
  if (driver.cuDeviceGetCount(&count) != CUDA_SUCCESS || device < 0 ||
      device >= count)
    return false;
  CUdevice handle;
  int major = 0;
  return driver.cuDeviceGet(&handle, device) == CUDA_SUCCESS &&
         driver.cuDeviceGetAttribute(
             &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle) ==
             CUDA_SUCCESS &&
         major >= 9;
}
