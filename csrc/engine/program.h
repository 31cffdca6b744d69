// A program under construction: reads of tensor views, op applications and writes back into
// storages, recorded as plain data. Its fingerprint is built as it is recorded; HLO text is only
// emitted when the executable cache misses. In Strict mode each ATen op records and runs one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/compile_log.h"
#include "engine/storage.h"
#include "pjrt/executable.h"
#include "hlo/fingerprint.h"
#include "lowering/attrs.h"

namespace torchtpu::engine {

// A strided view of a storage, in the viewer's element type and units.
struct TensorView {
  StorageHandle* storage = nullptr;
  hlo::ElementType type = hlo::ElementType::kF32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;

  int64_t numel() const;
  // Dense, from offset 0, over every element of the storage: the storage's buffer is the view.
  bool covers_storage() const;
};

// What one run of a program bound and produced, so that it can be run again on other storages
// (a torch.compile graph replayed on new inputs; csrc/aten/compiled_graph.cc).
struct Launch {
  std::shared_ptr<pjrt::Executable> executable;
  std::vector<std::shared_ptr<pjrt::Buffer>> arguments;  // as bound in this run
  // Per argument, the storage whose contents it was (null for scalars and uploaded constants).
  std::vector<StorageHandle*> argument_storages;
  // Per output, the storage it was written into and in which element type; the outputs
  // asked for with result() follow, `results` of them.
  std::vector<StorageHandle*> written;
  std::vector<hlo::ElementType> written_types;
  size_t results = 0;
  // The arguments the program may take over (each the old buffer of a storage it rewrites);
  // a replay donates those whose buffer nothing else holds (donatable()).
  std::vector<int64_t> donated;
};

// One op's program as a Strict or Debug run bound it, kept so that the same op on storages laid
// out the same way runs again without being recorded (csrc/aten/lowered_kernel.cc keys it by the
// op's call signature and its storages' layout; eager.h's replay() runs it).
struct OpReplay {
  std::shared_ptr<pjrt::Executable> executable;
  // Per argument of the executable: the index of its storage among the op's storages, or -1 for
  // the op's next scalar argument.
  std::vector<int> arguments;
  std::vector<int64_t> donated;  // the arguments it may take over (Launch::donated)
  // Per output: the index of the storage it is written into, and in which element type.
  std::vector<int> written;
  std::vector<hlo::ElementType> written_types;

  // What `launch`, a run of the op's program over `storages` with `scalars` scalar arguments,
  // bound; false (and `out` unset) when it bound anything else (a result asked for, a buffer of
  // no storage of the op's but a scalar) or ran no program.
  static bool of(const Launch& launch, const std::vector<StorageHandle*>& storages,
                 size_t scalars, OpReplay* out);
};

// Whether a run may hand `buffer` to its program's output: nothing but its storage holds it
// (`holders`: the references the caller knows of), and it is not host memory on loan.
bool donatable(const std::shared_ptr<pjrt::Buffer>& buffer, long holders);
// Buffers donated so far in this process (a metric), and counting `n` more.
uint64_t donated_buffers();
void count_donations(size_t n);
// What a replay of a program gives over of the arguments it may take over (`donated`): each
// whose buffer nothing but its holder holds (`buffers`: the holders' own references) and
// `fixed` does not mark (a constant bound again by every replay). Counts them.
struct Donations {
  std::vector<int64_t> keep;  // the others, copied by the program instead
  // The buffers given over, which must outlive the launch (Runtime::execute's `hold`).
  std::shared_ptr<std::vector<std::shared_ptr<pjrt::Buffer>>> given;
};
Donations donations(const std::vector<int64_t>& donated,
                    const std::vector<const std::shared_ptr<pjrt::Buffer>*>& buffers,
                    const std::function<bool(int64_t)>& fixed = nullptr);
// Storages filled from host memory instead of by a compiled program (see Program::run), so far.
uint64_t host_fills();

class Program {
 public:
  enum Deferred { kDeferred };
  // A program run right away: the device's pending (deferred) work runs first, so it reads
  // current contents.
  explicit Program(int device);
  // A program recorded now and run later (see eager.h): it marks the storages it touches.
  Program(int device, Deferred) : device_(device), deferred_(true) {}
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program();

  int device() const { return device_; }
  // The view's current contents as a value of shape `sizes`.
  int read(TensorView view);  // by value: a temporary's sizes and strides move into the node
  // A 0-d argument holding one element of `type` (cached on the device, not part of the key).
  int scalar(hlo::ElementType type, const void* bits);
  // An argument bound to an existing buffer.
  int argument(std::shared_ptr<pjrt::Buffer> buffer, hlo::Shape shape);
  // Records one op; returns the value of its first output, and the following `num_outputs - 1`
  // ids are its other outputs.
  int apply(const std::string& op, std::vector<int> inputs, lowering::Attrs attrs,
            int num_outputs = 1);
  // The same with attributes shared by every op of its kind (an ATen op's call signature:
  // csrc/aten/lowered_kernel.cc), `fingerprinted` being their fingerprint alone.
  int apply(const std::string& op, std::vector<int> inputs,
            std::shared_ptr<const lowering::Attrs> attrs, const hlo::Fingerprint& fingerprinted,
            int num_outputs = 1);
  // Writes `value` (of the view's type and shape) through the view into its storage.
  void write(TensorView view, int value);
  // Asks for `value` as a dense buffer returned by run().
  void result(int value);

  // Compiles (or fetches) and launches the program; written storages get their new buffers.
  // Returns the buffers asked for with result(), in order. Does not wait. With `launch`, also
  // says what the run bound and wrote. A storage it rewrites whose old buffer nothing else holds
  // donates that buffer to its new contents. Without `launch` the program is compiled for
  // exactly the buffers donated now; with it (a program to be replayed on other buffers), for
  // every storage it rewrites, each run donating those it may (Launch::donated).
  std::vector<std::shared_ptr<pjrt::Buffer>> run(Launch* launch = nullptr);

  // Lowers one op on operands of these shapes by itself, so a rule's refusal surfaces when the
  // op is recorded rather than when a deferred program runs. Its caller checks each case once
  // (csrc/aten/lowered_kernel.cc keeps the attributes of the ops that lowered).
  static void check_lowering(const std::string& op, const std::vector<hlo::Shape>& operands,
                             const lowering::Attrs& attrs, int num_outputs);
  // A storage that died before the program ran: its contents are no longer an output.
  void forget(StorageHandle* storage);
  size_t size() const { return nodes_.size(); }
  int convolutions() const { return convolutions_; }
  // Whether the last run found its executable in the cache.
  bool cache_hit() const { return cache_hit_; }

  const hlo::Fingerprint& fingerprint() const { return fingerprint_; }
  std::string hlo_text() const;
  // One line per node, for debugging.
  std::string debug_string() const;

 private:
  struct Node {
    std::string op;  // empty for an argument; "#" for output `index` of node `inputs[0]`
    std::vector<int> inputs;
    lowering::Attrs own;  // its attributes, unless it shares them
    hlo::Shape shape;  // arguments only
    int index = 0;
    bool has_bits = false;  // a scalar argument whose element is known: `bits`
    uint64_t bits[2] = {0, 0};
    std::shared_ptr<const lowering::Attrs> shared;

    const lowering::Attrs& attrs() const { return shared ? *shared : own; }
  };
  int add_node(const std::string& op, std::vector<int> inputs, lowering::Attrs own,
               std::shared_ptr<const lowering::Attrs> shared, int num_outputs);
  struct StorageState {
    StorageHandle* storage;
    int current;  // value holding its contents, -1 while it has none
    hlo::ElementType type;
    bool written = false;
    int argument = -1;                          // its contents as an argument, if it had any
    hlo::ElementType read_type = hlo::ElementType::kU8;  // that argument's element type
    // The value last read or written through one dense view of it, while `current` is still
    // `seen_at`: reading that view again is that value, with no node (a weight read by every
    // step's ops, an op's result read by the next op). `seen_node`'s attributes hold the view.
    int seen_at = -2;
    int seen_node = -1;
    int seen_value = -1;
  };

  StorageState& state_of(StorageHandle* storage);
  // Whether node `node` (a view_read or view_write) goes through exactly this view.
  bool same_view(int node, const TensorView& view) const;
  // The scalar argument whose value node `node` writes, if it is a view_write filling a whole
  // storage with a scalar of the storage's type (through a cast that only broadcasts it), else -1.
  static int filled_from(const std::vector<Node>& nodes, int node, hlo::ElementType type);
  // Whether every storage the program writes is a fresh one (no contents before) filled whole
  // with a scalar of its own type, and it asks for no results: a fill, which needs no program.
  bool only_fills() const;
  // Gives each written storage a buffer of its scalar repeated, made on the host (only_fills()).
  void fill_on_host();
  // The nodes as the compile log compares programs (compile_log.h).
  std::vector<NodeDescription> describe() const;
  int add_argument(std::shared_ptr<pjrt::Buffer> buffer, const hlo::Shape& shape,
                   StorageHandle* storage = nullptr);
  void release_storages();

  int device_;
  bool deferred_ = false;
  std::vector<Node> nodes_;
  std::vector<std::shared_ptr<pjrt::Buffer>> arguments_;
  std::vector<StorageHandle*> argument_storages_;  // parallel to arguments_
  std::vector<StorageState> storages_;
  std::vector<int> results_;
  hlo::Fingerprint fingerprint_;
  bool cache_hit_ = false;
  int convolutions_ = 0;
  // (argument, output) pairs whose output reuses the argument's buffer (see run()).
  std::vector<std::pair<int, int>> donated_;
};

}  // namespace torchtpu::engine
