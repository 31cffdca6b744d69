// torchtpu.kernels' call path in C++ (kernel_calls.cc): _C._KernelCalls.
#pragma once

#include <pybind11/pybind11.h>

namespace torchtpu::python {

void bind_kernel_calls(pybind11::module_& m);

}  // namespace torchtpu::python
