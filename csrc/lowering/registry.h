// The lowering table: op name -> a pure function from operand values and attributes to HLO.
// Rules never see buffers, so one rule serves every eager mode and torch.compile.
//
// A rule may also name the ATen operators it implements ("exp", "exp_", "exp.out"); the PyTorch
// glue runs those through one generic kernel. Operands arrive in schema order (tensors, and
// Scalar/float arguments as 0-d values); other arguments are attributes under their schema names.
// Attributes "type"/"shape" (and "type1"/"shape1", ... for further outputs) give each output's
// element type and dimensions as PyTorch's meta function inferred them; "compute_type" is
// PyTorch's result_type of the tensor operands and of the Scalars named self, other, exponent, min
// and max (the ones PyTorch promotes with, as wrapped numbers).
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "lowering/attrs.h"

namespace torchtpu::lowering {

// Operand and result lists; indexing is bounds-checked, so a rule reading an operand that is not
// there raises instead of reading past the end.
class Values : public std::vector<hlo::Value> {
 public:
  using std::vector<hlo::Value>::vector;
  Values(std::vector<hlo::Value> v) : std::vector<hlo::Value>(std::move(v)) {}  // NOLINT
  const hlo::Value& operator[](size_t i) const { return at(i); }
  hlo::Value& operator[](size_t i) { return at(i); }
};
using LoweringRule =
    std::function<Values(hlo::FunctionBuilder& b, const Values& operands, const Attrs& attrs)>;

// Thrown by a rule for an input PyTorch itself refuses on every device: the glue raises it as
// PyTorch does, a NotImplementedError (rounding division of booleans) or, with `runtime_error`,
// a RuntimeError (subtraction of booleans).
class Refused : public std::runtime_error {
 public:
  explicit Refused(const std::string& what, bool runtime_error = false)
      : std::runtime_error(what), runtime_error(runtime_error) {}
  bool runtime_error;
};

// Thrown by a rule for a case it does not lower (yet): the glue runs that call on the CPU.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws std::out_of_range naming the op when no rule is registered.
LoweringRule rule(const std::string& op);
bool has_rule(const std::string& op);

struct AtenBinding {
  std::string aten_op;  // "add.Tensor", "exp_", "sum.IntList_out"
  std::string rule;
  // Broadcasting elementwise op: the glue checks shapes and output casts as PyTorch's
  // TensorIterator does, with its messages.
  bool elementwise = false;
  // Its result is bool (comparisons, logical ops), which PyTorch casts into any output dtype.
  bool boolean_result = false;
};
// Every ATen operator a rule implements.
const std::vector<AtenBinding>& aten_bindings();

// The binding name for every overload of `name`, in-place and out= included ("exp.*").
inline std::vector<std::string> all(const std::string& name) { return {name + ".*"}; }

class Registry {
 public:
  void add(const std::string& op, LoweringRule rule, std::vector<std::string> aten_ops = {});
  // The same, for a broadcasting elementwise op.
  void elementwise(const std::string& op, LoweringRule rule, std::vector<std::string> aten_ops);
  // The same, for a broadcasting elementwise op with a bool result.
  void predicate(const std::string& op, LoweringRule rule, std::vector<std::string> aten_ops);

 private:
  void bind(const std::string& op, LoweringRule rule, std::vector<std::string> aten_ops,
            bool elementwise, bool boolean_result = false);
};

// Each op family adds its rules here; called once when the table is built.
void register_view_rules(Registry& r);
void register_elementwise_rules(Registry& r);
void register_math_rules(Registry& r);
void register_special_rules(Registry& r);
void register_reduction_rules(Registry& r);
void register_linalg_rules(Registry& r);
void register_factorization_rules(Registry& r);
void register_matrix_function_rules(Registry& r);
void register_ldl_rules(Registry& r);
void register_fft_rules(Registry& r);
void register_decomposition_rules(Registry& r);
void register_nn_rules(Registry& r);
void register_indexing_rules(Registry& r);
void register_shape_rules(Registry& r);
void register_random_rules(Registry& r);
void register_conv_rules(Registry& r);
void register_pooling_rules(Registry& r);
void register_assert_rules(Registry& r);
void register_activation_rules(Registry& r);
void register_loss_rules(Registry& r);
void register_distance_rules(Registry& r);
void register_scan_rules(Registry& r);
void register_sort_rules(Registry& r);
void register_search_rules(Registry& r);
void register_upsample_rules(Registry& r);
void register_padding_rules(Registry& r);
void register_grid_sample_rules(Registry& r);
void register_embedding_bag_rules(Registry& r);
void register_segment_reduce_rules(Registry& r);
void register_ctc_loss_rules(Registry& r);
void register_amp_rules(Registry& r);
void register_inline_module_rules(Registry& r);

}  // namespace torchtpu::lowering
