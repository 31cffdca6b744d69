// Checks on the values of an op's tensors that a device program cannot raise by itself: index
// values against the dimensions they index, checked on the device in every mode (Debug mode waits
// after each op, so there the error comes from the op's own call), a factorization's info read on
// the host as PyTorch reads it, and NaN/Inf results in Debug mode.
#include "aten/value_checks.h"

#include <string_view>

#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/all.h>
#include <ATen/ops/any.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/diff.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/isinf.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/le.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/sum.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "aten/tensor_view.h"
#include "engine/compile_log.h"
#include "engine/device_asserts.h"

namespace torchtpu::aten {
namespace {

std::string out_of_bounds(int64_t dim, int64_t size) {
  return "index {} is out of bounds for dimension " + std::to_string(dim) + " with size " +
         std::to_string(size);
}

const c10::IValue* argument(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                            std::string_view name) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (schema.arguments()[i].name() == name) return &args[i];
  }
  return nullptr;
}

// The index tensors of an op bound to `rule`, with their bounds and the error PyTorch's CPU
// kernel raises for a value outside them. Ops whose indices are known to be valid
// (_unsafe_index, unsafe index_put) have none.
// Names here and in the other checks every op runs are compared as views: a length check first,
// where a string's == against a literal measures the literal and compares (some 25 of them, with
// the argument lookups, cost every op 0.2 us).
std::vector<IndexAssert> index_bounds(std::string_view rule, const c10::FunctionSchema& schema,
                                     const std::vector<c10::IValue>& args) {
  auto arg = [&](const char* name) { return argument(schema, args, name); };
  std::vector<IndexAssert> bounds;
  auto add = [&](const at::Tensor& index, int64_t low, int64_t high, bool index_error,
                 std::string message, std::optional<int64_t> ignore = std::nullopt) {
    if (!index.defined() || index.numel() == 0) return;
    bounds.push_back({index, low, high, ignore, {index_error, std::move(message)}, 0});
  };
  if (std::string_view(schema.name()) == "aten::_unsafe_index") return bounds;
  if (rule == "segment_reduce") {
    // Not indices, but the CPU's checks of the segments: safe lengths are non-negative and sum
    // to the axis; even unsafe ones (and offsets) give no segment a negative length.
    const int64_t any = int64_t{1} << 62;
    const std::string negative =
        "Expected segment_length >= 0 to be true, but got false.  (Could this error message be "
        "improved?  If so, please report an enhancement request to PyTorch.)";
    const at::Tensor& data = arg("data")->toTensor();
    if (arg("lengths")->isTensor()) {
      const at::Tensor& lengths = arg("lengths")->toTensor();
      if (arg("unsafe")->toBool()) {
        add(lengths, 0, any, false, negative);
      } else if (lengths.dim() > 0 && lengths.dim() <= data.dim()) {
        int64_t n = data.size(lengths.dim() - 1);
        add(lengths, 0, any, false, "lengths contains negative value!");
        add(lengths.sum(-1), n, n + 1, false,
            "segment_reduce(): Expected all rows of lengths along axis to sum to "
            "data.size(lengths.dim()-1) when !unsafe.");
      }
    } else if (arg("offsets")->isTensor() && arg("offsets")->toTensor().dim() > 0) {
      const at::Tensor& offsets = arg("offsets")->toTensor();
      add(offsets.diff(1, -1), 0, any, false, negative);
      // The CPU's kernel reads past the data for an offset past its end (a segmentation fault
      // for empty data); here it is an error.
      if (offsets.dim() <= data.dim()) {
        int64_t n = data.size(offsets.dim() - 1);
        add(offsets, 0, n + 1, false,
            "segment_reduce(): offset {} lies outside the data's " + std::to_string(n) +
                " elements along axis");
      }
    }
    return bounds;
  }
  if (const c10::IValue* unsafe = arg("unsafe"); unsafe != nullptr && unsafe->toBool()) {
    return bounds;
  }
  if (rule == "index_select" || rule == "gather" || rule == "scatter" || rule == "scatter_add" ||
      rule == "scatter_reduce" || rule == "index_add" || rule == "index_copy" ||
      rule == "index_fill" || rule == "index_reduce") {
    const at::Tensor& x = arg("self")->toTensor();
    int64_t dim = at::maybe_wrap_dim(arg("dim")->toInt(), std::max<int64_t>(x.dim(), 1));
    int64_t size = x.dim() == 0 ? 1 : x.size(dim);
    if (rule == "index_select" && dim == 0) {
      add(arg("index")->toTensor(), 0, size, true,
          "index out of range in self (index {} of dimension 0 with size " +
              std::to_string(size) + ")");
    } else if (rule == "index_select") {  // CPU's kernel for other dimensions says it so
      add(arg("index")->toTensor(), 0, size, false,
          "INDICES element is out of DATA bounds, id={} axis_dim=" + std::to_string(size));
    } else if (rule == "index_copy") {
      add(arg("index")->toTensor(), 0, size, true, "index_copy_(): " + out_of_bounds(dim, size));
    } else if (rule == "index_fill") {
      add(arg("index")->toTensor(), -size, size, true, out_of_bounds(dim, size));
    } else if (rule == "index_reduce") {
      add(arg("index")->toTensor(), 0, size, true, "index out of range in self");
    } else {
      add(arg("index")->toTensor(), 0, size, false, out_of_bounds(dim, size));
    }
  } else if (rule == "put" || rule == "take") {
    int64_t n = arg("self")->toTensor().numel();
    add(arg("index")->toTensor(), -n, n, true,
        "out of range: tried to access index {} on a tensor of " + std::to_string(n) +
            " elements.");
  } else if (rule == "searchsorted" && arg("sorter") != nullptr && arg("sorter")->isTensor()) {
    const at::Tensor& sorted = arg("sorted_sequence")->toTensor();
    int64_t n = sorted.dim() == 0 ? 1 : sorted.size(-1);
    add(arg("sorter")->toTensor(), 0, n, false, "torch.searchsorted(): sorter index out of range");
  } else if (rule == "masked_scatter") {
    // Not an index, but a count the device knows: the mask's true elements, at most source's.
    const at::Tensor& mask = arg("mask")->toTensor();
    int64_t n = arg("source")->toTensor().numel();
    at::Tensor spread = mask.expand(at::infer_size(mask.sizes(), arg("self")->toTensor().sizes()));
    add(spread.sum(), 0, n + 1, false, "Number of elements of source < number of ones in mask");
  } else if (rule == "index" || rule == "index_put") {
    const at::Tensor& x = arg("self")->toTensor();
    int64_t dim = 0;
    for (const c10::IValue& e : arg("indices")->toListRef()) {
      if (e.isTensor() && e.toTensor().defined() && dim < x.dim()) {
        add(e.toTensor(), -x.size(dim), x.size(dim), true, out_of_bounds(dim, x.size(dim)));
      }
      ++dim;
    }
  } else if (rule == "nll_loss") {
    const at::Tensor& x = arg("self")->toTensor();
    int64_t classes = x.dim() <= 1 ? x.size(0) : x.size(1);
    add(arg("target")->toTensor(), 0, classes, true, "Target {} is out of bounds.",
        arg("ignore_index")->toInt());
  } else if (rule == "multi_margin_loss" || rule == "multilabel_margin_loss") {
    const at::Tensor& x = arg("self")->toTensor();
    int64_t classes = x.dim() == 0 ? 1 : x.size(-1);
    if (rule == "multi_margin_loss") {
      add(arg("target")->toTensor(), 0, classes, false, "target out of range");
    } else {
      add(arg("target")->toTensor(), -1, classes, false, "argument #2 'target' is out of range");
    }
  } else if (rule == "binary_cross_entropy") {
    // Values outside [0, 1] (or NaN) are a failed check: the op's flag of them, checked in [0, 1).
    for (const char* name : {"self", "target"}) {
      const at::Tensor& t = arg(name)->toTensor();
      add(t.ge(0).logical_and(t.le(1)).logical_not(), 0, 1, false,
          std::string("all elements of ") + (name[0] == 's' ? "input" : "target") +
              " should be between 0 and 1");
    }
  } else if (rule == "histc") {
    const at::Tensor& x = arg("self")->toTensor();
    double lo = arg("min")->toScalar().toDouble(), hi = arg("max")->toScalar().toDouble();
    if (lo == hi && x.numel() > 0) {
      // The range is the data's own: the CPU refuses NaN or an infinity in it, naming the range
      // it found (a NaN makes it [nan, nan]; an infinity's other end is not known here).
      add(x.isnan().any(), 0, 1, false, "torch.histc: range of [nan, nan] is not finite");
      add(x.isinf().any(), 0, 1, false,
          "torch.histc: range of [min, max] is not finite: the input holds an infinity");
    } else {
      if (lo == hi) {  // an empty input's range [min - 1, max + 1], as the CPU widens it
        lo -= 1;
        hi += 1;
      }
      TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histc: range of [", lo, ", ", hi,
                  "] is not finite");
    }
  } else if (rule == "max_unpool2d" || rule == "max_unpool3d") {
    int64_t plane = 1;
    std::string dims;
    for (int64_t s : arg("output_size")->toIntVector()) {
      plane *= s;
      dims += (dims.empty() ? "" : "x") + std::to_string(s);
    }
    add(arg("indices")->toTensor(), 0, plane, false,
        "Found an invalid max index: {} (output volumes are of size " + dims);
  } else if (rule == "embedding_bag") {
    int64_t n = arg("weight")->toTensor().size(0);
    // CPU's message also names the index's position, which a device check does not know.
    add(arg("indices")->toTensor(), 0, n, false,
        "Index of input takes value {} which is not in the valid range [0, " +
            std::to_string(n) + ")");
  } else if (rule == "div" || rule == "floor_divide" || rule == "remainder" || rule == "fmod") {
    // An integer division by zero raises on the CPU (CUDA returns whatever its hardware gives,
    // XLA -1 or the dividend): raise the CPU's error rather than return a made-up value.
    const c10::IValue *self = arg("self"), *other = arg("other"), *mode = arg("rounding_mode");
    if (self == nullptr || other == nullptr || (rule == "div" && (!mode || !mode->isString()))) {
      return bounds;
    }
    at::ScalarType type = self->isTensor() && other->isTensor()
                              ? at::result_type(self->toTensor(), other->toTensor())
                          : self->isTensor() ? at::result_type(self->toTensor(), other->toScalar())
                                             : at::result_type(self->toScalar(), other->toTensor());
    if (!at::isIntegralType(type, /*includeBool=*/false)) return bounds;
    if (other->isTensor()) {
      add(other->toTensor().eq(0), 0, 1, false, "ZeroDivisionError");
    } else {
      TORCH_CHECK(other->toScalar().toLong() != 0, "ZeroDivisionError");
    }
  } else if (rule == "embedding_backward") {
    int64_t n = arg("num_weights")->toInt();
    add(arg("indices")->toTensor(), 0, n, true, out_of_bounds(0, n));
  }
  return bounds;
}

// PyTorch's name for an op in the LinAlgError it raises when check_errors=True and the op's
// `info` output is not zero.
const char* checked_linalg_op(std::string_view op) {
  if (op == "aten::linalg_cholesky_ex") return "linalg.cholesky_ex";
  if (op == "aten::linalg_inv_ex") return "linalg.inv_ex";
  if (op == "aten::_linalg_solve_ex") return "torch.linalg.solve_ex";
  if (op == "aten::linalg_lu_factor_ex") return "torch.linalg.lu_factor_ex";
  return nullptr;
}

std::atomic<bool> index_checks{true};

// A failed device-side check, as PyTorch's CPU kernel would raise it.
void raise_failed_check(bool index_error, const std::string& message) {
  if (index_error) TORCH_CHECK_INDEX(false, message);
  TORCH_CHECK(false, message);
}
const bool raiser_installed = (engine::set_assert_raiser(raise_failed_check), true);

// The check's message names the op and the caller's line; its id is the message's.
void name_check(IndexAssert& a, const std::string& op, const std::string& where) {
  a.check.message = op + ": " + a.check.message +
                    (where.empty() ? "" : " (called at " + where + ")") +
                    "; checked on the device, raised at the next synchronization";
  a.id = engine::assert_id(a.check);
}

}  // namespace

std::vector<IndexAssert> index_asserts(const std::string& rule, const c10::FunctionSchema& schema,
                                       const std::vector<c10::IValue>& args) {
  if (!index_checks.load(std::memory_order_relaxed)) return {};
  std::vector<IndexAssert> asserts = index_bounds(rule, schema, args);
  if (asserts.empty()) return asserts;
  std::string where = engine::python_location();
  for (IndexAssert& a : asserts) name_check(a, schema.name(), where);
  return asserts;
}

std::vector<IndexAssert> zero_asserts(
    const std::string& op, const std::vector<std::pair<at::Tensor, std::string>>& flags) {
  if (!index_checks.load(std::memory_order_relaxed)) return {};
  std::string where = engine::python_location();
  std::vector<IndexAssert> asserts;
  for (const auto& [flag, message] : flags) {
    asserts.push_back({flag, 0, 1, std::nullopt, {false, message}, 0});
    name_check(asserts.back(), op, where);
  }
  return asserts;
}

void record_index_asserts(engine::Program& p, const std::vector<IndexAssert>& asserts) {
  for (const IndexAssert& a : asserts) {
    int values = is_cpu_scalar(a.index) ? scalar_argument(p, a.index.item(), a.index.scalar_type())
                                        : p.read(view_of(a.index));
    int64_t ignore = a.ignore.value_or(0);
    engine::record_range_assert(p, values, a.low, a.high, a.ignore ? &ignore : nullptr, a.id);
  }
}

void check_linalg_errors(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                         const std::vector<at::Tensor>& outputs) {
  if (std::string_view(schema.name()) == "aten::cholesky_inverse") {
    // LAPACK inverts the triangular factor, which fails at its first zero diagonal entry.
    const at::Tensor& factor = argument(schema, args, "self")->toTensor();
    if (factor.numel() == 0) return;
    at::Tensor zero = factor.diagonal(0, -2, -1).eq(0).cpu();  // one wait
    at::Tensor info = zero.any(-1).to(at::kInt).mul(zero.to(at::kInt).argmax(-1).add(1));
    at::_linalg_check_errors(info.to(at::kInt), "cholesky_inverse", factor.dim() == 2);
    return;
  }
  const char* api = checked_linalg_op(schema.name());
  const c10::IValue* check = argument(schema, args, "check_errors");
  if (api == nullptr || check == nullptr || !check->toBool()) return;
  const c10::IValue* a = argument(schema, args, "A");
  if (a == nullptr) a = argument(schema, args, "self");
  for (size_t r = 0; r < schema.returns().size() && r < outputs.size(); ++r) {
    if (schema.returns()[r].name() == "info") {
      at::_linalg_check_errors(outputs[r], api, a->toTensor().dim() == 2);
    }
  }
}

void set_index_checks(bool enabled) { index_checks = enabled; }

void check_finite(const c10::FunctionSchema& schema, const std::vector<at::Tensor>& outputs) {
  static const bool enabled = [] {
    const char* v = std::getenv("TORCHTPU_DEBUG_NANS");
    return v != nullptr && std::string(v) != "0" && std::string(v) != "";
  }();
  // The check runs ops itself (isfinite may decompose into abs, ne, ...): not those.
  static thread_local bool checking = false;
  if (!enabled || checking) return;
  checking = true;
  struct Reset {
    ~Reset() { checking = false; }
  } reset;
  for (const at::Tensor& out : outputs) {
    if (!out.defined() || !out.is_floating_point() || out.numel() == 0) continue;
    TORCH_CHECK(at::isfinite(out).all().item<bool>(), "torchtpu debug: ", schema.name(),
                " produced a NaN or an infinity (TORCHTPU_DEBUG_NANS=1)");
  }
}

}  // namespace torchtpu::aten
