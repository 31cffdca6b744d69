#include "aten/compiled_graph.h"

#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include "aten/TpuAllocator.h"
#include "aten/TpuGuard.h"
#include "engine/eager.h"
#include "engine/runtime.h"
#include "hlo/fingerprint.h"

namespace torchtpu::aten {
namespace {

// Runs the pending work any input waits on, so the inputs' buffers are current.
void settle(const std::vector<at::Tensor>& inputs) {
  for (const at::Tensor& t : inputs) {
    if (!t.defined()) continue;
    const engine::StorageHandle& s = storage_handle(t.storage());
    if (s.pending() != nullptr) engine::flush(s.device());
  }
}

int device_of(const std::vector<at::Tensor>& inputs) {
  for (const at::Tensor& t : inputs) {
    if (t.defined()) return t.device().index();
  }
  return current_device();
}

}  // namespace

std::string CompiledGraph::signature(const std::vector<at::Tensor>& inputs,
                                     const std::string& host) {
  hlo::Fingerprint f;
  f.add(host);
  for (const at::Tensor& t : inputs) {
    if (t.defined() && !t.is_privateuseone()) return "";
  }
  settle(inputs);  // whether an input has contents must be current
  std::vector<const engine::StorageHandle*> storages;
  for (const at::Tensor& t : inputs) {
    if (!t.defined()) {
      f.add(int64_t{-1});
      continue;
    }
    const engine::StorageHandle& s = storage_handle(t.storage());
    int64_t alias = -1;  // inputs that share a storage are read and written as one
    for (size_t j = 0; j < storages.size(); ++j) {
      if (storages[j] == &s) alias = static_cast<int64_t>(j);
    }
    storages.push_back(&s);
    f.add(int64_t{t.device().index()});
    f.add(static_cast<int64_t>(t.scalar_type()));
    f.add_ints(t.sizes().data(), t.sizes().size());
    f.add_ints(t.strides().data(), t.strides().size());
    f.add(std::vector<int64_t>{t.storage_offset(), static_cast<int64_t>(s.nbytes()),
                               s.buffer() ? static_cast<int64_t>(s.type()) : -1, alias,
                               t.is_conj(), t.is_neg()});
  }
  return f.bytes();
}

const GraphProgram* CompiledGraph::find(const std::string& signature) const {
  auto it = programs_.find(signature);
  if (it == programs_.end()) return nullptr;
  it->second->last_use_ = ++clock_;
  return it->second.get();
}

void CompiledGraph::keep(const std::string& signature, std::unique_ptr<GraphProgram> graph) {
  if (programs_.size() >= kMaxPrograms && programs_.count(signature) == 0) {
    auto oldest = programs_.begin();
    for (auto it = programs_.begin(); it != programs_.end(); ++it) {
      if (it->second->last_use_ < oldest->second->last_use_) oldest = it;
    }
    programs_.erase(oldest);
  }
  graph->last_use_ = ++clock_;
  programs_[signature] = std::move(graph);
}

void CompiledGraph::begin_capture(const std::vector<at::Tensor>& inputs) {
  engine::begin_capture(device_of(inputs));
}

void CompiledGraph::abort_capture() {
  std::string broken;
  std::unique_ptr<engine::Program> program = engine::end_capture(&broken);
  if (program) program->run();
}

std::string CompiledGraph::end_capture(const std::string& signature,
                                       const std::vector<at::Tensor>& inputs,
                                       const std::vector<at::Tensor>& outputs,
                                       std::string* hlo_text) {
  std::string broken;
  std::unique_ptr<engine::Program> program = engine::end_capture(&broken);
  auto refuse = [&](const std::string& why) {
    if (program) program->run();  // the call's own results
    eager_[signature] = true;
    return why;
  };
  if (!broken.empty()) return refuse(broken);
  auto graph = std::make_unique<GraphProgram>();
  graph->device_ = device_of(inputs);
  std::unordered_map<const engine::StorageHandle*, int> input_of;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined()) input_of.emplace(&storage_handle(inputs[i].storage()), i);
  }
  const uint64_t start = engine::capture_serial();
  std::unordered_map<const engine::StorageHandle*, int> made_of;
  for (const at::Tensor& t : outputs) {
    GraphProgram::Output o;
    if (t.defined()) {
      if (!t.is_privateuseone() || t.device().index() != graph->device_) {
        return refuse("it returns a tensor that is not on " + c10::Device(
            c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(graph->device_)).str());
      }
      const engine::StorageHandle* s = &storage_handle(t.storage());
      if (auto in = input_of.find(s); in != input_of.end()) {
        o.input = in->second;
      } else if (s->serial() >= start) {
        auto [it, added] = made_of.emplace(s, static_cast<int>(graph->made_nbytes_.size()));
        if (added) graph->made_nbytes_.push_back(s->nbytes());
        o.made = it->second;
      } else {
        return refuse("it returns a tensor it neither made nor took as an input");
      }
      o.dtype = t.scalar_type();
      o.sizes.assign(t.sizes().begin(), t.sizes().end());
      o.strides.assign(t.strides().begin(), t.strides().end());
      o.offset = t.storage_offset();
      o.conj = t.is_conj();
      o.neg = t.is_neg();
    }
    graph->outputs_.push_back(std::move(o));
  }
  if (!program) {
    keep(signature, std::move(graph));
    return "";
  }
  if (hlo_text != nullptr) *hlo_text = program->hlo_text();
  engine::Launch launch;
  program->run(&launch);
  program.reset();
  if (launch.results > 0) return refuse("it asked for results outside tensors");
  for (const auto& [storage, index] : made_of) {
    bool written = false;
    for (const engine::StorageHandle* w : launch.written) written |= w == storage;
    if (!written && storage->buffer()) {
      return refuse("an output got its contents outside the recorded program");
    }
  }
  graph->executable_ = launch.executable;
  graph->donated_ = launch.donated;
  for (size_t k = 0; k < launch.arguments.size(); ++k) {
    GraphProgram::Argument a;
    engine::StorageHandle* s = launch.argument_storages[k];
    if (auto in = input_of.find(s); s != nullptr && in != input_of.end()) {
      a.input = in->second;
    } else if (s != nullptr && s->persistent()) {
      a.storage = s;
    } else {
      a.fixed = launch.arguments[k];  // a scalar or a constant the graph made
    }
    graph->arguments_.push_back(std::move(a));
  }
  for (size_t k = 0; k < launch.written.size(); ++k) {
    GraphProgram::Target target;
    engine::StorageHandle* s = launch.written[k];
    target.type = launch.written_types[k];
    if (auto in = input_of.find(s); in != input_of.end()) {
      target.input = in->second;
    } else if (s->persistent()) {
      target.storage = s;
    } else if (auto made = made_of.find(s); made != made_of.end()) {
      target.made = made->second;
    } else if (s->serial() < start) {
      return refuse("it writes into a tensor it did not take as an input");
    }
    graph->targets_.push_back(target);
  }
  keep(signature, std::move(graph));
  return "";
}

std::vector<at::Tensor> GraphProgram::run(const std::vector<at::Tensor>& inputs) const {
  // The inputs were settled by CompiledGraph::signature; persistent storages may still wait on
  // pending work (a deferred draw).
  for (const Argument& a : arguments_) {
    if (a.storage != nullptr && a.storage->pending() != nullptr) engine::flush(device_);
  }
  engine::Runtime& runtime = engine::Runtime::get();
  std::vector<c10::Storage> made;
  made.reserve(made_nbytes_.size());
  for (size_t nbytes : made_nbytes_) {
    made.emplace_back(c10::Storage::use_byte_size_t(), nbytes, allocate_on(device_, nbytes),
                      tpu_allocator(), /*resizable=*/true);
  }
  if (executable_) {
    std::vector<PJRT_Buffer*> args;
    std::vector<const std::shared_ptr<pjrt::Buffer>*> buffers;
    args.reserve(arguments_.size());
    for (const Argument& a : arguments_) {
      const std::shared_ptr<pjrt::Buffer>& buffer =
          a.input >= 0 ? storage_handle(inputs[a.input].storage()).buffer()
          : a.storage  ? a.storage->buffer()
                       : a.fixed;
      TORCH_INTERNAL_ASSERT(buffer, "torchtpu: a compiled graph's argument has no buffer");
      args.push_back(buffer->raw());
      buffers.push_back(&buffer);
    }
    // Kept: a constant of the graph (bound again by every replay), or a buffer held elsewhere
    // too (a tensor sharing it, a copy in flight).
    engine::Donations given = engine::donations(
        donated_, buffers, [&](int64_t k) { return arguments_[k].fixed != nullptr; });
    std::vector<std::shared_ptr<pjrt::Buffer>> results =
        runtime.execute(*executable_, args, device_, given.keep, given.given);
    for (size_t k = 0; k < targets_.size(); ++k) {
      const Target& t = targets_[k];
      std::shared_ptr<pjrt::Buffer> buffer = std::move(results[k]);
      engine::StorageHandle* s = t.input >= 0 ? &storage_handle(inputs[t.input].storage())
                                 : t.storage  ? t.storage
                                 : t.made >= 0 ? &storage_handle(made[t.made])
                                               : nullptr;
      if (s != nullptr) s->set_buffer(std::move(buffer), t.type);
    }
  }
  std::vector<at::Tensor> outputs;
  outputs.reserve(outputs_.size());
  for (const Output& o : outputs_) {
    if (o.input < 0 && o.made < 0) {
      outputs.emplace_back();
      continue;
    }
    c10::Storage storage = o.input >= 0 ? inputs[o.input].storage() : made[o.made];
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
        caffe2::TypeMeta::fromScalarType(o.dtype));
    t.unsafeGetTensorImpl()->set_sizes_and_strides(o.sizes, o.strides, o.offset);
    if (o.conj) t._set_conj(true);
    if (o.neg) t._set_neg(true);
    outputs.push_back(std::move(t));
  }
  return outputs;
}

}  // namespace torchtpu::aten
