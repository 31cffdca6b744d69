// The index arguments of the indexing ops, checked with PyTorch's exception types and messages
// before the meta functions run: those cannot see a mask (its coordinates depend on its values),
// and raise RuntimeError where the CPU raises IndexError, or nothing at all.
//
// Advanced indexing (x[idx], x[idx] = v: index, _unsafe_index, index_put_) is put in the one form
// its lowering rules take, integer index tensors on self's device: a boolean or uint8 mask stands
// for the coordinates of its true elements, and an index tensor may live on the CPU (CUDA moves it
// to the device).
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/nonzero.h>
#include <c10/util/Exception.h>

#include <sstream>
#include <string_view>

#include "aten/ops.h"
#include "aten/tensor_view.h"

namespace torchtpu::aten {
namespace {

bool is_mask(const at::Tensor& t) {
  return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte;
}

// The position of the op's `Tensor?[] indices` argument, or -1.
int indices_argument(const c10::FunctionSchema& schema) {
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (schema.arguments()[i].name() == "indices") return static_cast<int>(i);
  }
  return -1;
}

// index_put_ and its kin: (self, indices, values, accumulate...).
bool is_put(const c10::FunctionSchema& schema) {
  return schema.arguments().size() > 2 && schema.arguments()[2].name() == "values";
}

std::optional<at::Tensor> entry(const c10::IValue& e) {
  if (!e.isTensor() || !e.toTensor().defined()) return std::nullopt;
  return e.toTensor();
}

void check_index_types(const at::Tensor& self, const c10::List<c10::IValue>& list) {
  TORCH_CHECK_INDEX(list.size() <= static_cast<size_t>(self.dim()),
                    "too many indices for tensor of dimension ", self.dim(), " (got ",
                    list.size(), ")");
  for (const c10::IValue& e : list) {
    std::optional<at::Tensor> t = entry(e);
    if (!t) continue;
    at::ScalarType s = t->scalar_type();
    TORCH_CHECK_INDEX(s == at::kLong || s == at::kInt || s == at::kByte || s == at::kBool,
                      "tensors used as indices must be long, int, byte or bool tensors");
    // CUDA's rule: an index lives on the CPU or on the indexed tensor's device.
    TORCH_CHECK(t->is_cpu() || t->device() == self.device(),
                "indices should be either on cpu or on the same device as the indexed tensor (",
                self.device(), ")");
  }
}

// The coordinates of the mask's true elements, one index tensor per mask dimension, on `device`.
void expand_mask(const at::Tensor& self, const at::Tensor& mask, c10::Device device,
                 c10::List<std::optional<at::Tensor>>& out) {
  if (mask.scalar_type() == at::kByte) {
    TORCH_WARN("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
               "torch.bool instead.");
  }
  for (int64_t j = 0; j < mask.dim(); ++j) {
    int64_t dim = static_cast<int64_t>(out.size()) + j;
    TORCH_CHECK_INDEX(dim < self.dim() && mask.size(j) == self.size(dim), "The shape of the mask ",
                      mask.sizes(), " at index ", j,
                      " does not match the shape of the indexed tensor ", self.sizes(),
                      " at index ", dim);
  }
  at::Tensor coords = mask.is_cpu() ? at::nonzero(mask).to(device) : torchtpu::aten::nonzero(mask);
  for (int64_t j = 0; j < mask.dim(); ++j) out.push_back(coords.select(1, j));
}

std::string shapes_of(const std::vector<at::Tensor>& indices) {
  std::ostringstream s;
  for (size_t k = 0; k < indices.size(); ++k) s << (k ? ", " : "") << indices[k].sizes();
  return s.str();
}

// The shape x[indices] has: the broadcast index shape replaces the indexed dims where they are
// adjacent, and leads otherwise.
std::vector<int64_t> indexing_result_shape(const at::Tensor& self,
                                           const c10::List<c10::IValue>& list,
                                           at::IntArrayRef batch) {
  std::vector<int64_t> before, after;
  int64_t first = -1, last = -1;
  for (size_t d = 0; d < list.size(); ++d) {
    if (!entry(list.get(d))) continue;
    if (first < 0) first = static_cast<int64_t>(d);
    last = static_cast<int64_t>(d);
  }
  bool adjacent = true;
  for (int64_t d = first; d <= last; ++d) adjacent = adjacent && entry(list.get(d)).has_value();
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    bool indexed = d < static_cast<int64_t>(list.size()) && entry(list.get(d));
    if (d == first) shape.insert(shape.end(), batch.begin(), batch.end());
    if (!indexed) shape.push_back(self.size(d));
  }
  if (!adjacent) {
    std::vector<int64_t> rest(shape.begin() + first, shape.begin() + first + batch.size());
    shape.erase(shape.begin() + first, shape.begin() + first + batch.size());
    shape.insert(shape.begin(), rest.begin(), rest.end());
  }
  return shape;
}

// Checks of a list of integer device indices: they broadcast together, index a dim of size 0 only
// when empty, and (index_put) the values broadcast to the indexed region in self's dtype.
void check_index_shapes(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                        const at::Tensor& self, const c10::List<c10::IValue>& list) {
  std::vector<at::Tensor> defined;
  at::DimVector batch;
  bool indexes_empty_dim = false;
  for (size_t d = 0; d < list.size(); ++d) {
    std::optional<at::Tensor> t = entry(list.get(d));
    if (!t) continue;
    defined.push_back(*t);
    indexes_empty_dim = indexes_empty_dim || self.size(static_cast<int64_t>(d)) == 0;
  }
  bool put = is_put(schema);
  TORCH_CHECK_INDEX(!list.empty() || put, "at least one index must be provided");
  if (defined.empty() && put) {  // the CPU's message where it has one
    const at::Tensor& values = args[2].toTensor();
    TORCH_CHECK(at::is_expandable_to(values.sizes(), self.sizes()),
                "shape mismatch: value tensor of shape ", values.sizes(),
                " cannot be broadcast to indexing result of shape ", self.sizes());
  }
  TORCH_CHECK(!defined.empty(), "torchtpu: advanced indexing needs at least one index tensor");
  try {
    for (const at::Tensor& t : defined) batch = at::infer_size_dimvector(batch, t.sizes());
  } catch (const c10::Error&) {
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together "
                             "with shapes ", shapes_of(defined));
  }
  bool empty = std::find(batch.begin(), batch.end(), 0) != batch.end();
  TORCH_CHECK_INDEX(!indexes_empty_dim || empty,
                    "index is out of bounds for dimension with size 0");
  if (!put) return;
  const at::Tensor& values = args[2].toTensor();
  std::vector<int64_t> result = indexing_result_shape(self, list, batch);
  TORCH_CHECK(at::is_expandable_to(values.sizes(), result),
              "shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", at::IntArrayRef(result));
  TORCH_CHECK(values.scalar_type() == self.scalar_type(),
              "Index put requires the source and destination dtypes match, got ",
              self.scalar_type(), " for the destination and ", values.scalar_type(),
              " for the source.");
}

// index_select(self, dim, index), as the CPU kernel checks it.
void check_index_select(const std::vector<c10::IValue>& args) {
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& index = args[2].toTensor();
  at::maybe_wrap_dim(args[1].toInt(), self.dim());  // raises PyTorch's IndexError
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(self.dim() > 0 || index.numel() == 1,
              "index_select(): Index to scalar can have only 1 value, got ", index.numel(),
              " value(s)");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
}

// PyTorch's index_put_ (CPU and CUDA alike) writes a one-element CPU value through a single mask
// with masked_fill_: so it casts the value, refuses a uint8 mask, and here waits for no count.
bool put_as_masked_fill(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                        const c10::List<c10::IValue>& list, torch::jit::Stack* stack) {
  at::Tensor self = args[0].toTensor();
  const at::Tensor& value = args[2].toTensor();
  if (args[3].toBool() || !value.is_cpu() || value.numel() != 1) return false;
  std::optional<at::Tensor> mask;
  int64_t dims = 0;
  for (const c10::IValue& e : list) {
    std::optional<at::Tensor> t = entry(e);
    if (!t) {
      ++dims;
      continue;
    }
    if (!is_mask(*t) || t->device() != self.device() || mask) return false;
    mask = t;
    for (int64_t j = 0; j < t->dim(); ++j) {
      TORCH_CHECK_INDEX(dims + j < self.dim() && t->size(j) == self.size(dims + j),
                        "The shape of the mask ", t->sizes(), " at index ", j,
                        " does not match the shape of the indexed tensor ", self.sizes(),
                        " at index ", dims + j);
    }
    dims += t->dim();
  }
  if (!mask) return false;
  at::Tensor m = *mask;
  for (int64_t d = dims; d < self.dim(); ++d) m = m.unsqueeze(-1);
  c10::Scalar v = value.item();
  stack->push_back(schema.name() == "aten::index_put" ? self.masked_fill(m, v)
                                                     : self.masked_fill_(m, v));
  return true;
}

}  // namespace

bool prepare_index_arguments(const c10::OperatorHandle& op, std::vector<c10::IValue>& args,
                             torch::jit::Stack* stack) {
  std::string_view name = op.schema().name();  // a length check first in each comparison
  if (name == "aten::index_select") {
    check_index_select(args);
    return false;
  }
  if (name == "aten::masked_fill" || name == "aten::masked_fill_") {
    const at::Tensor& mask = args[1].toTensor();
    TORCH_CHECK(mask.scalar_type() == at::kBool,
                "masked_fill_ only supports boolean masks, but got mask with dtype ", mask.dtype());
    if (args[2].isTensor()) {
      TORCH_CHECK(args[2].toTensor().dim() == 0,
                  "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
                  args[2].toTensor().dim(), " dimension(s).");
      // A CPU value is read as a number, as CUDA's kernel reads it.
      if (args[2].toTensor().is_cpu()) args[2] = args[2].toTensor().to(args[0].toTensor().device());
    }
    return false;
  }
  int pos = indices_argument(op.schema());
  if (pos < 0 || !args[pos].isList()) return false;
  const at::Tensor& self = args[0].toTensor();
  c10::List<c10::IValue> list = args[pos].toList();
  check_index_types(self, list);
  if (!self.is_privateuseone()) {
    // A CPU self with CPU indices: here for a tpu value, which PyTorch moves to self's device
    // when it is 0-d, as CUDA's does.
    bool scalar_value = is_put(op.schema()) && args[2].toTensor().dim() == 0;
    TORCH_CHECK(scalar_value, "Expected all tensors to be on the same device, but found at least "
                              "two devices, ", self.device(), " and tpu!");
    args[2] = args[2].toTensor().to(self.device());
    for (c10::IValue& a : args) stack->push_back(std::move(a));
    op.callBoxed(stack);
    return true;
  }
  if (is_put(op.schema()) && put_as_masked_fill(op.schema(), args, list, stack)) return true;
  bool rewrite = false;
  for (const c10::IValue& e : list) {
    std::optional<at::Tensor> t = entry(e);
    rewrite = rewrite || (t && (is_mask(*t) || t->is_cpu()));
  }
  if (!rewrite) {
    check_index_shapes(op.schema(), args, self, list);
    return false;
  }
  c10::List<std::optional<at::Tensor>> expanded;
  for (const c10::IValue& e : list) {
    std::optional<at::Tensor> t = entry(e);
    if (t && is_mask(*t)) {
      expand_mask(self, *t, self.device(), expanded);
    } else {
      expanded.push_back(t && t->is_cpu() ? std::optional<at::Tensor>(t->to(self.device())) : t);
    }
  }
  bool any = false;  // a 0-d mask contributes no index tensor
  for (const std::optional<at::Tensor>& t : expanded) any = any || t.has_value();
  TORCH_CHECK(any || list.empty(), "torchtpu: advanced indexing needs at least one index tensor");
  args[pos] = expanded;
  for (c10::IValue& a : args) stack->push_back(std::move(a));
  op.callBoxed(stack);
  return true;
}

}  // namespace torchtpu::aten
