// The programs of one torch.compile graph (torchtpu/_compile.py): the graph runs once per input
// signature through the ordinary kernels under a capture (engine/eager.h), and the one program
// that recorded is then replayed on new inputs of that signature without running the graph again.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/program.h"

namespace torchtpu::aten {

// One capture, replayable on inputs of the signature it was captured on.
class GraphProgram {
 public:
  // Replays the program on `inputs` of its signature, as CompiledGraph::signature left them
  // (their pending work run): writes the inputs it mutates and returns new outputs.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const;

 private:
  friend class CompiledGraph;

  // Where an argument comes from on a replay.
  struct Argument {
    int input = -1;                           // the storage of this input, or
    engine::StorageHandle* storage = nullptr;  // this persistent storage, or
    std::shared_ptr<pjrt::Buffer> fixed;      // this buffer (a constant of the graph)
  };
  // Where an output of the executable goes: an input's storage, a persistent storage, a new
  // storage, or nowhere (an intermediate something kept alive during the capture).
  struct Target {
    int input = -1;
    engine::StorageHandle* storage = nullptr;
    int made = -1;
    hlo::ElementType type = hlo::ElementType::kU8;
  };
  // A graph output: a view of an input's storage or of a new storage.
  struct Output {
    int input = -1;
    int made = -1;
    c10::ScalarType dtype;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
    bool conj = false, neg = false;  // a conjugate or negative view (vdot's result, say)
  };

  int device_ = 0;
  mutable uint64_t last_use_ = 0;  // CompiledGraph's clock at its last find()
  std::shared_ptr<pjrt::Executable> executable_;
  std::vector<Argument> arguments_;
  std::vector<int64_t> donated_;  // arguments it may take over (engine::Launch::donated)
  std::vector<Target> targets_;
  std::vector<size_t> made_nbytes_;  // the storages a run makes
  std::vector<Output> outputs_;
};

class CompiledGraph {
 public:
  // The signature of a call: everything a captured program depends on besides the inputs'
  // contents (`host` holds the graph's non-tensor arguments, already encoded). Empty when an
  // input is not on a tpu device: such a graph runs eagerly.
  static std::string signature(const std::vector<at::Tensor>& inputs, const std::string& host);

  // The program captured for this signature, or null.
  const GraphProgram* find(const std::string& signature) const;
  // Programs kept per graph: past this many signatures, the least recently run one is dropped
  // (its executable with it, unless the executable cache keeps it) and captured again when it
  // comes back, so a graph called on ever new shapes holds neither memory nor the process's
  // memory mappings without bound.
  static constexpr size_t kMaxPrograms = 64;
  // Whether this signature was found not to replay (it runs eagerly).
  bool eager(const std::string& signature) const { return eager_.count(signature) > 0; }

  // Starts a capture on the inputs' device.
  static void begin_capture(const std::vector<at::Tensor>& inputs);
  // Ends the capture the graph just ran under, on `inputs`, returning `outputs`, and keeps the
  // program for `signature`. Returns why it cannot be replayed (the signature then runs
  // eagerly), or "" when kept. With `hlo_text`, also gives the program's StableHLO.
  std::string end_capture(const std::string& signature, const std::vector<at::Tensor>& inputs,
                          const std::vector<at::Tensor>& outputs, std::string* hlo_text);
  // Ends a capture whose graph raised: its recorded work runs as DeferAndFuse's would.
  static void abort_capture();

 private:
  // Keeps `graph` for `signature`, dropping the least recently run program past kMaxPrograms.
  void keep(const std::string& signature, std::unique_ptr<GraphProgram> graph);

  std::unordered_map<std::string, std::unique_ptr<GraphProgram>> programs_;
  mutable uint64_t clock_ = 0;
  std::unordered_map<std::string, bool> eager_;
};

}  // namespace torchtpu::aten
