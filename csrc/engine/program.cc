#include "engine/program.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "engine/eager.h"
#include "engine/runtime.h"
#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::engine {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool TensorView::covers_storage() const {
  return offset == 0 && numel() == storage->numel(type) && lowering::is_dense(sizes, strides);
}

Program::Program(int device) : device_(device) {
  flush(device);
  // Room for an op's program at once (a few arguments and reads, the op, its writes: some 600
  // bytes of fingerprint): grown one push at a time they reallocate some 15 times per op.
  nodes_.reserve(8);
  arguments_.reserve(4);
  argument_storages_.reserve(4);
  storages_.reserve(4);
  fingerprint_.reserve(1024);
}

Program::~Program() { release_storages(); }

void Program::release_storages() {
  if (!deferred_ || storages_.empty()) return;
  // Under the device's lock, as a dying storage reads its pending program (forget_storage): a
  // captured program runs and dies outside the recording lock.
  std::unique_lock<std::recursive_mutex> lock = lock_device(device_);
  for (StorageState& s : storages_) {
    if (s.storage != nullptr && s.storage->pending() == this) s.storage->set_pending(nullptr);
  }
}

void Program::forget(StorageHandle* storage) {
  if (storage->pending() != this) return;  // only a deferred program marks the storages it holds
  StorageState& s = storages_[storage->pending_slot()];
  s.storage = nullptr;
  if (s.argument >= 0) argument_storages_[s.argument] = nullptr;
}

int Program::add_argument(std::shared_ptr<pjrt::Buffer> buffer, const hlo::Shape& shape,
                          StorageHandle* storage) {
  Node node;
  node.shape = shape;
  nodes_.push_back(std::move(node));
  arguments_.push_back(std::move(buffer));
  argument_storages_.push_back(storage);
  fingerprint_.add(int64_t{-1});
  fingerprint_.add(shape);
  return static_cast<int>(nodes_.size() - 1);
}

int Program::argument(std::shared_ptr<pjrt::Buffer> buffer, hlo::Shape shape) {
  return add_argument(std::move(buffer), shape);
}

int Program::scalar(hlo::ElementType type, const void* bits) {
  int node = add_argument(Runtime::get().scalar(type, bits, device_), hlo::Shape{type, {}});
  nodes_[node].has_bits = true;
  std::memcpy(nodes_[node].bits, bits, std::min(hlo::byte_width(type), sizeof(Node::bits)));
  return node;
}

Program::StorageState& Program::state_of(StorageHandle* storage) {
  // A deferred program marks the storages it touches with where their state is: a long program
  // (DeferAndFuse's) touches thousands. A program run right away touches a few.
  if (deferred_) {
    if (storage->pending() == this) return storages_[storage->pending_slot()];
  } else {
    for (auto s = storages_.rbegin(); s != storages_.rend(); ++s) {
      if (s->storage == storage) return *s;
    }
  }
  StorageState s{storage, -1, storage->type()};
  if (deferred_) storage->set_pending(this, storages_.size());
  if (storage->buffer()) {
    s.argument = static_cast<int>(arguments_.size());
    s.read_type = storage->type();
    s.current = add_argument(storage->buffer(), hlo::Shape{s.type, {storage->numel(s.type)}},
                             storage);
  }
  storages_.push_back(s);
  return storages_.back();
}

int Program::apply(const std::string& op, std::vector<int> inputs, lowering::Attrs attrs,
                   int num_outputs) {
  fingerprint_.add(op);
  fingerprint_.add_ints(inputs);
  attrs.fingerprint(fingerprint_);
  return add_node(op, std::move(inputs), std::move(attrs), nullptr, num_outputs);
}

int Program::apply(const std::string& op, std::vector<int> inputs,
                   std::shared_ptr<const lowering::Attrs> attrs,
                   const hlo::Fingerprint& fingerprinted, int num_outputs) {
  fingerprint_.add(op);
  fingerprint_.add_ints(inputs);
  fingerprint_.add_bytes(fingerprinted);
  return add_node(op, std::move(inputs), {}, std::move(attrs), num_outputs);
}

int Program::add_node(const std::string& op, std::vector<int> inputs, lowering::Attrs own,
                      std::shared_ptr<const lowering::Attrs> shared, int num_outputs) {
  if (op == "convolution") ++convolutions_;
  int first = static_cast<int>(nodes_.size());
  nodes_.push_back(Node{op, std::move(inputs), std::move(own), {}});
  nodes_.back().shared = std::move(shared);
  for (int i = 1; i < num_outputs; ++i) nodes_.push_back(Node{"#", {first}, {}, {}, i});
  return first;
}

int Program::read(TensorView view) {
  if (view.numel() == 0) {
    return apply("zeros", {},
                 lowering::Attrs().set_type("type", view.type).set("sizes", view.sizes));
  }
  StorageState& state = state_of(view.storage);
  if (state.seen_at == state.current && same_view(state.seen_node, view)) return state.seen_value;
  int flat = state.current;
  if (flat < 0) {
    flat = apply("zeros", {},
                 lowering::Attrs()
                     .set_type("type", view.type)
                     .set("sizes", std::vector<int64_t>{view.storage->numel(view.type)}));
  }
  int node = apply("view_read", {flat},
                   lowering::Attrs()
                       .set_type("type", view.type)
                       .set("sizes", std::move(view.sizes))
                       .set("strides", std::move(view.strides))
                       .set("offset", view.offset));
  state.seen_at = state.current;
  state.seen_node = state.seen_value = node;
  return node;
}

bool Program::same_view(int node, const TensorView& view) const {
  if (node < 0) return false;
  const lowering::Attrs& a = nodes_[node].attrs();
  return a.i("offset") == view.offset && a.type("type") == view.type &&
         a.ints("sizes") == view.sizes && a.ints("strides") == view.strides;
}

void Program::write(TensorView view, int value) {
  if (view.numel() == 0) return;
  StorageState& state = state_of(view.storage);
  std::vector<int> inputs;
  inputs.reserve(2);
  if (state.current >= 0) inputs.push_back(state.current);
  inputs.push_back(value);
  int64_t numel = view.storage->numel(view.type);
  // Through a dense view (no element twice), reading the same view back is `value` itself.
  bool dense = lowering::is_dense(view.sizes, view.strides);
  state.current = apply("view_write", std::move(inputs),
                        lowering::Attrs()
                            .set("sizes", std::move(view.sizes))
                            .set("strides", std::move(view.strides))
                            .set("offset", view.offset)
                            .set("numel", numel)
                            .set_type("type", view.type));
  state.type = view.type;
  state.written = true;
  state.seen_at = state.current;
  state.seen_node = dense ? state.current : -1;
  state.seen_value = value;
}

void Program::result(int value) {
  fingerprint_.add(int64_t{-2});
  fingerprint_.add(int64_t{value});
  results_.push_back(value);
}

void Program::check_lowering(const std::string& op, const std::vector<hlo::Shape>& operands,
                             const lowering::Attrs& attrs, int num_outputs) {
  hlo::FunctionBuilder b;
  lowering::Values values;
  for (const hlo::Shape& shape : operands) values.push_back(b.parameter(shape));
  lowering::Values out = lowering::rule(op)(b, values, attrs);
  if (static_cast<int>(out.size()) < num_outputs) {
    throw std::logic_error("torchtpu: lowering rule '" + op + "' produced too few values");
  }
}

std::string Program::hlo_text() const {
  hlo::FunctionBuilder b;
  std::vector<hlo::Value> values;
  std::vector<lowering::Values> outputs_of(nodes_.size());
  values.reserve(nodes_.size());
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const Node& node = nodes_[n];
    if (node.op.empty()) {
      values.push_back(b.parameter(node.shape));
    } else if (node.op == "#") {
      values.push_back(outputs_of.at(node.inputs[0]).at(node.index));
    } else {
      lowering::Values operands;
      for (int i : node.inputs) operands.push_back(values[i]);
      outputs_of[n] = lowering::rule(node.op)(b, operands, node.attrs());
      if (outputs_of[n].empty()) {
        throw std::logic_error("torchtpu: lowering rule '" + node.op + "' produced no value");
      }
      values.push_back(outputs_of[n][0]);
    }
  }
  std::vector<hlo::Value> outputs;
  for (const StorageState& s : storages_) {
    if (s.written && s.storage != nullptr) outputs.push_back(values[s.current]);
  }
  for (int r : results_) outputs.push_back(values[r]);
  return b.module(outputs, donated_);
}

std::vector<NodeDescription> Program::describe() const {
  std::vector<NodeDescription> nodes;
  nodes.reserve(nodes_.size());
  for (const Node& n : nodes_) {
    if (n.op.empty()) {
      nodes.push_back({"argument", {{"shape", n.shape.mlir()}}});
      continue;
    }
    NodeDescription d{n.op, n.attrs().described()};
    for (auto& [key, value] : d.attrs) {
      if (key == "type") value = hlo::short_name(n.attrs().type(key));
    }
    nodes.push_back(std::move(d));
  }
  return nodes;
}

std::string Program::debug_string() const {
  std::string s;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    s += "%" + std::to_string(i) + " = ";
    if (n.op.empty()) {
      s += "argument " + n.shape.mlir() + "\n";
      continue;
    }
    s += n.op + "(";
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      s += (j ? ", %" : "%") + std::to_string(n.inputs[j]);
    }
    s += ") " + n.attrs().debug_string() + "\n";
  }
  return s;
}

namespace {

// Fills are made on the host (no program) from the third shape of the same kind on: the first
// two compile, as a fill that recurs at one shape is cheapest replayed; a loop over varying sizes
// would compile one per size. Bounded in bytes, as the host's copy crosses to the device.
constexpr int kCompiledFillShapes = 2;
constexpr int64_t kHostFillBytes = int64_t{4} << 20;
std::atomic<uint64_t> fills_made_on_host{0};

bool fill_without_compiling(const std::string& kind) {
  static std::mutex mutex;
  static std::unordered_map<std::string, int> compiled;  // shapes compiled, per kind of fill
  std::lock_guard<std::mutex> lock(mutex);
  int& shapes = compiled[kind];
  if (shapes >= kCompiledFillShapes) return true;
  ++shapes;
  return false;
}

}  // namespace

int Program::filled_from(const std::vector<Node>& nodes, int node, hlo::ElementType type) {
  const Node& write = nodes[node];
  const lowering::Attrs& a = write.attrs();
  if (write.op != "view_write" || write.inputs.size() != 1 || a.i("offset") != 0 ||
      a.type("type") != type) {
    return -1;
  }
  const std::vector<int64_t>& sizes = a.ints("sizes");
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  if (numel != a.i("numel") || !lowering::is_dense(sizes, a.ints("strides"))) return -1;
  int value = write.inputs[0];
  if (nodes[value].op == "cast" && nodes[value].attrs().type("type") == type) {
    value = nodes[value].inputs[0];
  }
  const Node& scalar = nodes[value];
  return scalar.op.empty() && scalar.has_bits && scalar.shape.type == type ? value : -1;
}

bool Program::only_fills() const {
  if (!results_.empty()) return false;
  bool any = false;
  int64_t bytes = 0;
  for (const StorageState& s : storages_) {
    if (s.argument >= 0) return false;  // it read contents: more than a fill
    if (!s.written || s.storage == nullptr) continue;
    if (filled_from(nodes_, s.current, s.type) < 0) return false;
    bytes += static_cast<int64_t>(s.storage->nbytes());
    any = true;
  }
  return any && bytes <= kHostFillBytes;
}

void Program::fill_on_host() {
  Runtime& runtime = Runtime::get();
  for (const StorageState& s : storages_) {
    if (!s.written || s.storage == nullptr) continue;
    const Node& scalar = nodes_[filled_from(nodes_, s.current, s.type)];
    size_t width = hlo::byte_width(s.type);
    int64_t numel = s.storage->numel(s.type);
    size_t bytes = static_cast<size_t>(numel) * width;
    // Aligned as the CPU plugin needs to use the memory in place.
    void* data = std::aligned_alloc(64, std::max<size_t>((bytes + 63) / 64 * 64, 64));
    if (data == nullptr) throw std::bad_alloc();
    std::shared_ptr<const void> keep(data, std::free);
    auto* out = static_cast<char*>(data);
    std::memcpy(out, scalar.bits, width);
    for (size_t done = width; done < bytes; done *= 2) {
      std::memcpy(out + done, out, std::min(done, bytes - done));
    }
    s.storage->set_buffer(runtime.adopt_host(data, s.type, {numel}, device_, std::move(keep)),
                          s.type);
    fills_made_on_host.fetch_add(1, std::memory_order_relaxed);
  }
}

uint64_t host_fills() { return fills_made_on_host.load(std::memory_order_relaxed); }

bool donatable(const std::shared_ptr<pjrt::Buffer>& buffer, long holders) {
  return buffer.use_count() == holders && !buffer->borrows_host_memory();
}

namespace {
std::atomic<uint64_t> donated_so_far{0};
}  // namespace

uint64_t donated_buffers() { return donated_so_far.load(std::memory_order_relaxed); }
void count_donations(size_t n) { donated_so_far.fetch_add(n, std::memory_order_relaxed); }

Donations donations(const std::vector<int64_t>& donated,
                    const std::vector<const std::shared_ptr<pjrt::Buffer>*>& buffers,
                    const std::function<bool(int64_t)>& fixed) {
  Donations d;
  for (int64_t k : donated) {
    if ((fixed && fixed(k)) || !donatable(*buffers[k], 1)) {
      d.keep.push_back(k);
      continue;
    }
    if (!d.given) d.given = std::make_shared<std::vector<std::shared_ptr<pjrt::Buffer>>>();
    d.given->push_back(*buffers[k]);
  }
  count_donations(donated.size() - d.keep.size());
  return d;
}

bool OpReplay::of(const Launch& launch, const std::vector<StorageHandle*>& storages,
                  size_t scalars, OpReplay* out) {
  if (!launch.executable || launch.results > 0) return false;
  auto index = [&](StorageHandle* storage) {
    auto it = std::find(storages.begin(), storages.end(), storage);
    return it == storages.end() ? -1 : static_cast<int>(it - storages.begin());
  };
  OpReplay op;
  size_t scalar = 0;
  for (StorageHandle* storage : launch.argument_storages) {
    int k = storage == nullptr ? -1 : index(storage);
    if (storage == nullptr ? scalar++ >= scalars : k < 0) return false;
    op.arguments.push_back(k);
  }
  if (scalar != scalars) return false;
  for (StorageHandle* storage : launch.written) {
    op.written.push_back(index(storage));
    if (op.written.back() < 0) return false;
  }
  op.executable = launch.executable;
  op.donated = launch.donated;
  op.written_types = launch.written_types;
  *out = std::move(op);
  return true;
}

std::vector<std::shared_ptr<pjrt::Buffer>> Program::run(Launch* launch) {
  size_t written = 0;
  donated_.clear();
  std::vector<int64_t> keep;  // arguments the program may take over that this run must not give
  // The buffers given over, which outlive this program in the launch (Runtime::execute's `hold`).
  std::shared_ptr<std::vector<std::shared_ptr<pjrt::Buffer>>> given;
  for (const StorageState& s : storages_) {
    if (s.written && s.storage != nullptr) {
      fingerprint_.add(int64_t{-3});
      fingerprint_.add(int64_t{s.current});
      // Donated: the storage's own old buffer, of the same element type (so of the same shape)
      // as its new contents, held by nothing but the storage and this program. A captured
      // program's first run donates none: which of its arguments a replay binds afresh (inputs,
      // persistent storages) and which it keeps (constants made in the capture) is known later.
      bool own = s.argument >= 0 && s.read_type == s.type &&
                 arguments_[s.argument] == s.storage->buffer();
      bool now = launch == nullptr && own && donatable(arguments_[s.argument], 2);
      if (launch != nullptr ? own : now) {
        donated_.emplace_back(s.argument, static_cast<int>(written));
        fingerprint_.add(int64_t{-4});
        fingerprint_.add(int64_t{s.argument});
        if (!now) {
          keep.push_back(s.argument);
        } else {
          if (!given) given = std::make_shared<std::vector<std::shared_ptr<pjrt::Buffer>>>();
          given->push_back(arguments_[s.argument]);
        }
        if (launch != nullptr) launch->donated.push_back(s.argument);
      }
      ++written;
    }
  }
  if (written == 0 && results_.empty()) {
    release_storages();
    return {};
  }
  Runtime& runtime = Runtime::get();
  if (launch == nullptr && only_fills() && !runtime.executables().contains(fingerprint_)) {
    std::string kind;  // the element types and ranks written: what the fill's shapes vary within
    for (const StorageState& s : storages_) {
      if (!s.written || s.storage == nullptr) continue;
      kind += hlo::short_name(s.type);
      kind += std::to_string(nodes_[s.current].attrs().ints("sizes").size()) + ",";
    }
    if (fill_without_compiling(kind)) {
      fill_on_host();
      release_storages();
      return {};
    }
  }
  std::shared_ptr<pjrt::Executable> exe;
  try {
    exe = runtime.executables().get_or_compile(
        fingerprint_, [this] { return hlo_text(); }, runtime.client(), &cache_hit_);
    if (!cache_hit_) log_compile(describe());
  } catch (const pjrt::Error& e) {
    // A program torchtpu built and the plugin refused: say which ops it held.
    static const bool show_text = std::getenv("TORCHTPU_DEBUG_HLO") != nullptr;
    throw pjrt::Error(e.code(), std::string(e.what()) + "\nin the torchtpu program:\n" +
                                    debug_string() + (show_text ? hlo_text() : ""));
  }
  std::vector<PJRT_Buffer*> args;
  args.reserve(arguments_.size());
  for (const auto& a : arguments_) args.push_back(a->raw());
  std::vector<std::shared_ptr<pjrt::Buffer>> outputs;
  count_donations(donated_.size() - keep.size());
  try {
    outputs = runtime.execute(*exe, args, device_, keep, given);
  } catch (const pjrt::Error& e) {
    // An executable from the disk cache that cannot run is discarded and compiled afresh; a
    // program compiled here that cannot run is a real error.
    exe = runtime.executables().recompile_failed(
        fingerprint_, exe.get(), e.what(), [this] { return hlo_text(); }, runtime.client());
    if (exe == nullptr) throw;
    outputs = runtime.execute(*exe, args, device_, keep, given);
  }
  if (launch != nullptr) {
    launch->executable = exe;
    launch->arguments = arguments_;
    launch->argument_storages = argument_storages_;
    launch->results = results_.size();
  }
  size_t next = 0;
  for (StorageState& s : storages_) {
    if (!s.written || s.storage == nullptr) continue;
    if (launch != nullptr) {
      launch->written.push_back(s.storage);
      launch->written_types.push_back(s.type);
    }
    s.storage->set_buffer(std::move(outputs[next++]), s.type);
  }
  release_storages();
  std::vector<std::shared_ptr<pjrt::Buffer>> results;
  while (next < outputs.size()) results.push_back(std::move(outputs[next++]));
  return results;
}

}  // namespace torchtpu::engine
