// torchtpu._C: the Python face of the runtime. The only file that includes torch/extension.h.
#include <torch/csrc/Event.h>
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include "aten/TpuGenerator.h"
#include "aten/TpuGuard.h"
#include "aten/compiled_graph.h"
#include "aten/ops.h"
#include "aten/value_checks.h"
#include "engine/compile_log.h"
#include "engine/eager.h"
#include "engine/runtime.h"
#include "engine/storage.h"
#include "lowering/inline_module.h"
#include "pjrt/device_description.h"
#include "python/kernel_calls.h"

namespace py = pybind11;
using namespace torchtpu;

namespace {

// The folders of torch's and torchtpu's Python code, found at import (not lazily: a static
// initialized under the GIL could wait on another thread that holds the GIL and waits for it).
std::vector<std::string>& library_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

void find_library_dirs() {
  py::module_ os = py::module_::import("os");
  for (const char* name : {"torch", "torchtpu"}) {
    py::object module = py::module_::import("sys").attr("modules").attr("get")(name);
    if (module.is_none() || !py::hasattr(module, "__file__")) continue;
    library_dirs().push_back(
        py::str(os.attr("path").attr("dirname")(module.attr("__file__"))).cast<std::string>() + "/");
  }
}

// The innermost Python frame outside torch and torchtpu ("train.py:12"): where a user called the
// op whose device-side check failed. Empty on a thread running no Python (autograd's workers).
std::string python_location() {
  // Not while the interpreter shuts down: a daemon thread taking the GIL then never returns.
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return "";
  py::gil_scoped_acquire gil;
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  std::string where;
  while (frame != nullptr && where.empty()) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    std::string name = file != nullptr ? file : "";
    bool library = false;
    for (const std::string& dir : library_dirs()) library = library || name.rfind(dir, 0) == 0;
    // FX's generated code (a compiled graph's eager run or capture) is torch's too.
    bool generated = name.rfind("<eval_with_key>", 0) == 0;
    if (!library && !generated && !name.empty()) {
      where = name + ":" + std::to_string(PyFrame_GetLineNumber(frame));
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  return where;
}

std::vector<pjrt::ClientOption> client_options(const py::dict& options) {
  std::vector<pjrt::ClientOption> result;
  for (auto item : options) {
    std::string name = py::str(item.first);
    py::handle value = item.second;
    if (py::isinstance<py::bool_>(value)) {
      result.push_back({name, value.cast<bool>()});
    } else if (py::isinstance<py::int_>(value)) {
      result.push_back({name, value.cast<int64_t>()});
    } else if (py::isinstance<py::float_>(value)) {
      result.push_back({name, value.cast<float>()});
    } else {
      result.push_back({name, value.cast<std::string>()});
    }
  }
  return result;
}

py::dict memory_stats(int device) {
  engine::Runtime& runtime = engine::Runtime::get();
  py::dict stats;
  if (auto pjrt_stats = runtime.device(device).memory_stats()) {
    stats["allocated_bytes.all.current"] = pjrt_stats->bytes_in_use;
    if (pjrt_stats->peak_bytes_in_use) {
      stats["allocated_bytes.all.peak"] = *pjrt_stats->peak_bytes_in_use;
    }
    if (pjrt_stats->bytes_limit) stats["bytes_limit"] = *pjrt_stats->bytes_limit;
    stats["source"] = "pjrt";
  } else {
    engine::StorageBytes bytes = engine::storage_bytes(device);
    stats["allocated_bytes.all.current"] = bytes.in_use;
    stats["allocated_bytes.all.peak"] = bytes.peak;
    stats["source"] = "torchtpu";
  }
  return stats;
}

// Everything the plugin says about one device; plugin attributes keep their names and types.
py::dict device_description(int device) {
  const engine::Runtime& runtime = engine::Runtime::get();
  pjrt::DeviceDescription d = pjrt::describe(runtime.client().plugin(), runtime.device(device));
  py::dict attributes;
  for (const auto& [name, value] : d.attributes) {
    attributes[py::str(name)] = std::visit([](const auto& v) { return py::cast(v); }, value);
  }
  py::dict out;
  out["id"] = d.id;
  out["process_index"] = d.process_index;
  out["kind"] = d.kind;
  out["local_hardware_id"] = d.local_hardware_id ? py::cast(*d.local_hardware_id) : py::none();
  out["debug_string"] = d.debug_string;
  out["to_string"] = d.to_string;
  out["attributes"] = attributes;
  return out;
}

py::dict metrics() {
  py::dict m;
  m["donated_buffers"] = engine::donated_buffers();
  m["host_fills"] = engine::host_fills();
  m["host_ops"] = aten::host_ops();
  if (engine::Runtime::started()) {
    engine::CacheStats cache = engine::Runtime::get().executables().stats();
    m["executables_compiled"] = cache.compiled;
    m["executable_cache_hits"] = cache.hits;
    m["executable_cache_misses"] = cache.misses;
    m["executables_loaded_from_disk"] = cache.disk_loads;
    m["compile_seconds"] = cache.compile_seconds;
    m["memory_cache_entries"] = cache.entries;
    m["memory_cache_bytes"] = cache.bytes;
    m["memory_cache_evictions"] = cache.evictions;
    if (auto disk = engine::Runtime::get().executables().disk_cache()) {
      engine::DiskCacheStats d = disk->stats();
      m["disk_cache_dir"] = disk->directory();
      m["disk_cache_hits"] = d.hits;
      m["disk_cache_misses"] = d.misses;
      m["disk_cache_writes"] = d.writes;
      m["disk_cache_bad_entries"] = d.bad_entries;
      m["disk_cache_refused"] = d.refused;
    }
  } else {
    m["executables_compiled"] = 0;
    m["executables_loaded_from_disk"] = 0;
    m["executable_cache_hits"] = 0;
    m["executable_cache_misses"] = 0;
    m["compile_seconds"] = 0.0;
    m["memory_cache_entries"] = 0;
    m["memory_cache_bytes"] = 0;
    m["memory_cache_evictions"] = 0;
  }
  engine::DeferStats defer = engine::defer_stats();
  m["deferred_flushes"] = defer.flushes;
  m["deferred_nodes"] = defer.nodes;
  m["deferred_cache_hits"] = defer.cache_hits;
  m["deferred_cache_misses"] = defer.cache_misses;
  m["deferred_repeat_flushes"] = defer.repeats;
  m["kept_op_replays"] = engine::op_replays();
  py::dict fallbacks;
  int64_t total = 0;
  for (const auto& [op, count] : aten::cpu_fallback_counts()) {
    fallbacks[py::str(op)] = count;
    total += count;
  }
  m["cpu_fallbacks"] = fallbacks;
  m["cpu_fallback_calls"] = total;
  return m;
}

// Runs `f` with the GIL released: waiting on the device must not block other Python threads.
template <typename F>
auto without_gil(F f) {
  py::gil_scoped_release release;
  return f();
}

// One torch.compile graph's programs, for torchtpu/_compile.py: the graph's arguments arrive as
// a list of tensors and host values, its results as a list of tensors and other objects.
class PyCompiledGraph {
 public:
  // Replays the program of this call's signature: (outputs, signature), outputs None when there
  // is no program for it yet (or it runs eagerly), signature None when it can never have one.
  py::tuple run(const py::list& args) {
    std::vector<at::Tensor> tensors = tensors_of(args);
    std::string sig = aten::CompiledGraph::signature(tensors, host_values(args));
    if (sig.empty()) return py::make_tuple(py::none(), py::none());
    const aten::GraphProgram* program = graph_.find(sig);
    py::bytes key(sig);
    if (program == nullptr) return py::make_tuple(py::none(), key);
    std::vector<at::Tensor> results = without_gil([&] { return program->run(tensors); });
    const py::list& like = outputs_.at(sig);
    py::list out(like.size());
    for (size_t i = 0; i < results.size(); ++i) {
      out[i] = results[i].defined() ? py::cast(results[i]) : like[i];
    }
    return py::make_tuple(out, key);
  }
  bool eager(const py::bytes& sig) const { return graph_.eager(sig); }
  void begin_capture(const py::list& args) {
    std::vector<at::Tensor> tensors = tensors_of(args);
    without_gil([&] {
      aten::CompiledGraph::begin_capture(tensors);
      return 0;
    });
  }
  void abort_capture() {
    without_gil([] {
      aten::CompiledGraph::abort_capture();
      return 0;
    });
  }
  // Ends the capture of a call that returned `results`: "" when its program is kept, else why it
  // runs eagerly. With `want_hlo`, returns (why, StableHLO text).
  py::tuple end_capture(const py::bytes& sig, const py::list& args, const py::sequence& results,
                        bool want_hlo) {
    std::vector<at::Tensor> tensors = tensors_of(args), outputs;
    py::list like;
    for (py::handle r : results) {
      if (THPVariable_Check(r.ptr())) {
        outputs.push_back(THPVariable_Unpack(r.ptr()));
        like.append(py::none());
      } else {
        outputs.emplace_back();
        like.append(r);
      }
    }
    std::string text;
    std::string why = without_gil([&] {
      return graph_.end_capture(sig, tensors, outputs, want_hlo ? &text : nullptr);
    });
    engine::locate_compiles();  // the captured program, compiled at its end
    if (why.empty()) outputs_[std::string(sig)] = like;
    return py::make_tuple(why, text);
  }

 private:
  // The tensors of `args`, undefined where an argument is a host value.
  static std::vector<at::Tensor> tensors_of(const py::list& args) {
    std::vector<at::Tensor> tensors;
    tensors.reserve(args.size());
    for (py::handle a : args) {
      tensors.push_back(THPVariable_Check(a.ptr()) ? THPVariable_Unpack(a.ptr()) : at::Tensor());
    }
    return tensors;
  }
  // The host values of `args`, by position, type and value.
  static std::string host_values(const py::list& args) {
    std::string host;
    for (size_t i = 0; i < args.size(); ++i) {
      py::handle a = args[i];
      if (THPVariable_Check(a.ptr())) continue;
      host += std::to_string(i) + ":" + std::string(py::str(a.get_type().attr("__name__"))) +
              "=" + std::string(py::repr(a)) + ";";
    }
    return host;
  }

  aten::CompiledGraph graph_;
  std::unordered_map<std::string, py::list> outputs_;  // per signature, the non-tensor results
};


}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torchtpu's C++ runtime";
  engine::set_thread_questions(
      {[] {  // PyGILState_Check says yes to everyone once finalization disabled its check
         PyThreadState* mine = PyGILState_GetThisThreadState();
         return mine != nullptr && mine == _PyThreadState_UncheckedGet();
       },
       [] { return Py_IsInitialized() && PyGILState_GetThisThreadState() != nullptr; }});
  find_library_dirs();
  engine::set_python_location(python_location);
  m.def(
      "_configure",
      [](const std::string& plugin_path, const std::string& platform, const py::dict& options,
         const std::string& unavailable, const std::string& cache_dir, uint64_t cache_max_bytes,
         const std::string& version, uint64_t memory_cache_max_bytes, bool keep_host_memory) {
        engine::configure_runtime(engine::RuntimeConfig{
            plugin_path, platform, client_options(options), unavailable, cache_dir,
            cache_max_bytes, version, memory_cache_max_bytes, keep_host_memory});
      },
      py::arg("plugin_path"), py::arg("platform"), py::arg("options"), py::arg("unavailable"),
      py::arg("cache_dir"), py::arg("cache_max_bytes"), py::arg("version"),
      py::arg("memory_cache_max_bytes"), py::arg("keep_host_memory"));
  m.def("_compile_log", [] {
    py::list records;
    for (const engine::CompileRecord& r : engine::compile_log()) {
      records.append(py::make_tuple(r.ops, r.reason, r.where, r.same_ops));
    }
    return records;
  });
  m.def("_compile_log_version", &engine::compile_log_version);
  m.def("_clear_compile_log", &engine::clear_compile_log);
  m.def("_set_compile_warning_after", [](int64_t programs) {
    engine::set_compile_warning(
        [](const std::string& message) { TORCH_WARN("torchtpu: ", message); }, programs);
  });
  m.def("_start", [] { without_gil([] { return &engine::Runtime::get(); }); });
  m.def("_started", &engine::Runtime::started);
  m.def("_is_in_bad_fork", &engine::in_forked_child);
  m.def("_device_count", &engine::Runtime::device_count_or_zero);
  m.def("_device_name", [] { return engine::Runtime::get().device_name(); });
  m.def("_device_description", &device_description);
  m.def("_platform_name", [] { return engine::Runtime::get().client().platform_name(); });
  m.def("_platform_version", [] { return engine::Runtime::get().client().platform_version(); });
  m.def("_pjrt_api_version",
        [] { return engine::Runtime::get().client().plugin().api_version(); });
  m.def("_plugin_path", [] { return engine::Runtime::get().client().plugin().path(); });
  m.def("_current_device", &aten::current_device);
  m.def("_set_device", &aten::set_current_device);
  m.def("_synchronize", [](int device) {
    without_gil([device] {
      engine::EngineWork work;
      engine::flush(device);
      engine::Runtime::get().synchronize(device);
      return 0;
    });
  });
  m.def("_set_eager_mode", [](int mode) {
    without_gil([mode] {
      engine::set_eager_mode(static_cast<engine::EagerMode>(mode));
      return 0;
    });
  });
  m.def("_eager_mode", [] { return static_cast<int>(engine::eager_mode()); });
  m.def("_defer_max_nodes", &engine::max_pending_nodes);
  m.def("_set_defer_max_nodes", &engine::set_max_pending_nodes);
  m.def("_flush", [](int device) {
    without_gil([device] {
      engine::flush(device);
      return 0;
    });
  });
  m.def("_capturing", &engine::capturing);
  // At interpreter exit (an atexit hook): other threads' tpu work never returns into Python.
  m.def("_close_for_exit", [] {
    without_gil([] {
      engine::close_for_exit();
      return 0;
    });
  });
  py::class_<PyCompiledGraph>(m, "_CompiledGraph")
      .def(py::init<>())
      .def("run", &PyCompiledGraph::run)
      .def("eager", &PyCompiledGraph::eager)
      .def("begin_capture", &PyCompiledGraph::begin_capture)
      .def("abort_capture", &PyCompiledGraph::abort_capture)
      .def("end_capture", &PyCompiledGraph::end_capture);
  m.def("_memory_stats", &memory_stats);
  m.def("_reset_peak_memory_stats", &engine::reset_peak_storage_bytes);
  m.def("_default_generator", [](int device) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(aten::default_generator(device)));
  });
  m.def("_set_cpu_fallback_policy", &aten::set_cpu_fallback_policy);
  m.def("_set_index_checks", &aten::set_index_checks);
  m.def("_set_host_ops", &aten::set_host_ops);
  m.def("_register_inlined_module", &lowering::register_inlined_module);
  python::bind_kernel_calls(m);
  m.def("_call_module", [](const std::string& entry, const std::vector<at::Tensor>& inputs,
                           const std::vector<at::Tensor>& outputs) {
    without_gil([&] { aten::call_module(entry, inputs, outputs); });
  });
  m.def("_adopt_pinned", [](const at::Tensor& src, const at::Tensor& dst) {
    without_gil([&] { aten::adopt_pinned(src, dst); });
  });
  m.def("_launches_in_flight", [](int device) {
    return without_gil([device] { return engine::Runtime::get().launches_in_flight(device); });
  });
  // torch.Event.elapsed_time refuses a subclass (torch.tpu.Event) as its argument.
  m.def("_event_elapsed_time", torch::wrap_pybind_function([](py::handle start, py::handle end) {
          TORCH_CHECK(PyObject_TypeCheck(start.ptr(), &THPEventType) &&
                          PyObject_TypeCheck(end.ptr(), &THPEventType),
                      "expected other to be a torch.Event object");
          return reinterpret_cast<THPEvent*>(start.ptr())
              ->event.elapsedTime(reinterpret_cast<THPEvent*>(end.ptr())->event);
        }));
  m.def("_metrics", &metrics);
  m.def("_prune_disk_cache", [](const std::string& directory, uint64_t max_bytes) {
    return engine::DiskCache(directory, max_bytes, "").prune();
  });
  // Other records beside the executables in the disk cache (torchtpu.kernels' exports), under the
  // same trust, integrity and eviction rules; their keys must not be program text. None where the
  // cache is off or has no entry.
  m.def("_disk_cache_load", [](const std::string& key) -> py::object {
    auto disk = engine::Runtime::get().executables().disk_cache();
    std::optional<std::string> bytes = disk ? disk->load(key) : std::nullopt;
    return bytes ? py::object(py::bytes(*bytes)) : py::object(py::none());
  });
  m.def("_disk_cache_store", [](const std::string& key, const py::bytes& bytes) {
    if (auto disk = engine::Runtime::get().executables().disk_cache()) {
      disk->store(key, std::string(bytes));
    }
  });
  m.attr("_memory_cache_default_max_bytes") = engine::ExecutableCache::kDefaultMaxBytes;
  m.def("_clear_executable_cache", [] { engine::Runtime::get().executables().clear(); });
  // Compiles StableHLO text on the plugin (raises its error): for checking what it accepts.
  m.def("_compile_hlo", [](const std::string& text) {
    without_gil([&] {
      return engine::Runtime::get().client().compile(text, pjrt::portable_compile_options());
    });
  });
}
