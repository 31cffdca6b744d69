// torchtpu.kernels' call path for the common case: a JaxOp called on plain tpu tensors, wanting no
// gradient, with nothing that would see the op in the dispatcher (a dispatch or function mode, a
// functorch transform, a forced dispatch key, the profiler), for a signature exported before.
// What the op's tpu kernel does in Python (signature lookup, output allocation, the module call)
// happens here in one step; anything else returns None and Python takes the dispatcher's path.
#include "python/kernel_calls.h"

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/profiler/api.h>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aten/ops.h"

namespace torchtpu::python {
namespace {

namespace py = pybind11;
using Shape = std::vector<int64_t>;

// The lookup key of a call: its static arguments, then each input's dtype and sizes.
void append_input(std::string& key, at::ScalarType dtype, c10::IntArrayRef sizes) {
  key += static_cast<char>(dtype);
  key += static_cast<char>(sizes.size());
  key.append(reinterpret_cast<const char*>(sizes.data()), sizes.size() * sizeof(int64_t));
}

// Whether something would see the op on its way through the dispatcher. A functorch transform
// (vmap, grad) shows as its dynamic-layer keys in the thread's included set.
bool observed() {
  const c10::impl::LocalDispatchKeySet tls = c10::impl::tls_local_dispatch_key_set();
  return c10::impl::TorchDispatchModeTLS::stack_len() > 0 ||
         at::impl::torch_function_mode_enabled() ||
         !(tls.included_ - c10::default_included_set).empty() ||
         torch::profiler::impl::profilerEnabled();
}

// One JaxOp's exports by call signature.
class KernelCalls {
 public:
  // `inputs`: the signature's (dtype, shape) per input; `kept`: the inputs the module reads;
  // `single`: the op returns its one output, not a tuple.
  void add(const std::string& statics, const std::vector<std::pair<at::ScalarType, Shape>>& inputs,
           std::string entry, std::vector<int64_t> kept,
           std::vector<std::pair<Shape, at::ScalarType>> outputs, bool single) {
    std::string key = statics + '\0';
    for (const auto& [dtype, shape] : inputs) append_input(key, dtype, shape);
    exports_[key] = Export{std::move(entry), std::move(kept), std::move(outputs), single};
  }

  // The op's result, or None where the call must go through the dispatcher.
  py::object call(const py::tuple& args, const std::string& statics) const {
    if (args.empty() || observed()) return py::none();
    bool grad = at::GradMode::is_enabled();
    std::string key = statics + '\0';
    std::vector<at::Tensor> tensors;
    tensors.reserve(args.size());
    for (py::handle arg : args) {
      if (!THPVariable_CheckExact(arg.ptr())) return py::none();
      const at::Tensor& t = THPVariable_Unpack(arg.ptr());
      if (!t.device().is_privateuseone() || (grad && t.requires_grad())) return py::none();
      append_input(key, t.scalar_type(), t.sizes());
      tensors.push_back(t);
    }
    auto found = exports_.find(key);
    if (found == exports_.end()) return py::none();
    const Export& e = found->second;
    std::vector<at::Tensor> outputs;
    outputs.reserve(e.outputs.size());
    for (const auto& [shape, dtype] : e.outputs) {
      outputs.push_back(at::empty(shape, at::TensorOptions(tensors[0].device()).dtype(dtype)));
    }
    std::vector<at::Tensor> read;
    read.reserve(e.kept.size());
    for (int64_t i : e.kept) read.push_back(tensors[i]);
    std::string entry = e.entry;  // (`add` may replace the export once the GIL is released)
    {
      py::gil_scoped_release no_gil;
      aten::call_module(entry, read, outputs);
    }
    if (e.single) return py::cast(outputs[0]);
    py::tuple result(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) result[i] = py::cast(outputs[i]);
    return result;
  }

 private:
  struct Export {
    std::string entry;
    std::vector<int64_t> kept;
    std::vector<std::pair<Shape, at::ScalarType>> outputs;
    bool single;
  };
  std::unordered_map<std::string, Export> exports_;
};

}  // namespace

void bind_kernel_calls(py::module_& m) {
  py::class_<KernelCalls>(m, "_KernelCalls")
      .def(py::init<>())
      .def("add", &KernelCalls::add)
      .def("call", &KernelCalls::call);
}

}  // namespace torchtpu::python
