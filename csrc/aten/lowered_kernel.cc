// One kernel for every ATen operator that has a lowering rule. PyTorch's own meta function infers
// the outputs' shapes, strides and dtypes, and raises PyTorch's errors for bad arguments; the rule
// then lowers the op. Functional, in-place and out= overloads all go through here.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "aten/TpuAllocator.h"
#include "aten/cpu_verdict.h"
#include "aten/ops.h"
#include "aten/tensor_view.h"
#include "aten/value_checks.h"
#include "engine/compile_log.h"
#include "engine/eager.h"
#include "engine/runtime.h"
#include "lowering/registry.h"

namespace torchtpu::aten {
namespace {

// Whether binding name "exp.*" (any overload of exp or exp_) or "add.Tensor" names `op`.
bool matches(const std::string& binding, const c10::OperatorName& op) {
  std::string base = op.name.substr(op.name.find("::") + 2);
  if (binding.size() > 2 && binding.compare(binding.size() - 2, 2, ".*") == 0) {
    std::string stem = binding.substr(0, binding.size() - 2);
    return base == stem || base == stem + "_";
  }
  return binding == (op.overload_name.empty() ? base : base + "." + op.overload_name);
}

const lowering::AtenBinding& binding_for(const c10::OperatorHandle& op) {
  static std::mutex mutex;
  static std::unordered_map<const void*, const lowering::AtenBinding*> bindings;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = bindings.find(&op.schema());
  if (it != bindings.end()) return *it->second;
  const c10::OperatorName& name = op.operator_name();
  std::string aten = name.name.substr(name.name.find("::") + 2);
  if (!name.overload_name.empty()) aten += "." + name.overload_name;
  for (const auto& binding : lowering::aten_bindings()) {
    if (matches(binding.aten_op, name)) {
      return *bindings.emplace(&op.schema(), &binding).first->second;
    }
  }
  TORCH_CHECK(false, "torchtpu: no lowering rule is bound to ", aten);
}

at::Tensor to_meta(const at::Tensor& t) {
  if (!t.defined() || is_cpu_scalar(t)) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

c10::IValue to_meta(const c10::IValue& v) {
  return map_tensors(v, [](const at::Tensor& t) { return to_meta(t); });
}

// The dtype a Python number is given to a program in, by its kind.
at::ScalarType operand_dtype(const c10::Scalar& s) {
  if (s.isBoolean()) return at::kBool;
  if (s.isIntegral(false)) return at::kLong;
  if (s.isComplex()) return at::kComplexDouble;
  return at::kDouble;
}

// The argument's type, looking through Optional.
c10::TypeKind kind_of(const c10::Argument& arg) {
  const c10::TypePtr& t = arg.real_type();
  if (t->kind() != c10::TypeKind::OptionalType) return t->kind();
  return t->expectRef<c10::OptionalType>().getElementType()->kind();
}

bool is_scalar_type(const c10::Argument& arg) {
  return kind_of(arg) == c10::TypeKind::NumberType || kind_of(arg) == c10::TypeKind::FloatType;
}

// Scalars that choose an algorithm rather than a value (a norm's order, an upsampling's scales,
// which fix its source positions): attributes, part of the cache key, instead of device arguments.
// Names are compared as views: a length check first, where a string's == against a literal
// measures the literal and compares (these run for each scalar of every op).
bool is_static_scalar(const c10::Argument& arg) {
  std::string_view n = arg.name();
  return (n == "ord" || n == "p" || n == "scales" || n == "scales_d" || n == "scales_h" ||
          n == "scales_w") &&
         is_scalar_type(arg);
}

// Scalars that take part in type promotion, as wrapped numbers in PyTorch's TensorIterator ops
// (alpha, beta, value, weight and the like do not).
bool promotes(const c10::Argument& arg) {
  static constexpr std::string_view kNames[] = {"self", "other", "exponent", "min", "max"};
  if (kind_of(arg) != c10::TypeKind::NumberType) return false;
  for (std::string_view name : kNames) {
    if (arg.name() == name) return true;
  }
  return false;
}

// A scalar operand: the argument that holds it (a Python number or a CPU 0-d tensor) and the
// dtype it is given to the program in.
struct ScalarOperand {
  size_t argument;
  at::ScalarType dtype;
};

// Adds argument `index`, `arg` with value `v`: tensors and scalars as operands (each scalar also
// listed in `scalars`), the rest as attributes, into `attrs` unless it is null (an op whose
// attributes its call signature already gave).
void add_argument(engine::Program& p, size_t index, const c10::Argument& arg,
                  const c10::IValue& v, std::vector<int>& operands, lowering::Attrs* attrs,
                  at::native::ResultTypeState& promotion, bool& promoted,
                  std::vector<ScalarOperand>& scalars) {
  const std::string& name = arg.name();
  auto absent = [&] {
    if (attrs != nullptr) attrs->set(name + "_absent", int64_t{1});
  };
  if (v.isNone() && kind_of(arg) == c10::TypeKind::TensorType) return absent();
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return absent();
    promotion = at::native::update_result_type_state(t, promotion);
    promoted = true;
    if (is_cpu_scalar(t)) {
      scalars.push_back({index, t.scalar_type()});
      operands.push_back(scalar_argument(p, t.item(), t.scalar_type()));
    } else {
      operands.push_back(p.read(view_of(t)));
    }
    return;
  }
  if (v.isTensorList() || (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList())) {
    std::vector<int64_t> present;
    for (const c10::IValue& e : v.toListRef()) {
      bool defined = e.isTensor() && e.toTensor().defined();
      present.push_back(defined);
      if (defined) operands.push_back(p.read(view_of(e.toTensor())));
    }
    if (attrs != nullptr) attrs->set(name + "_present", present);
    return;
  }
  if (is_scalar_type(arg) && !is_static_scalar(arg)) {
    if (v.isNone()) return absent();
    c10::Scalar s = v.toScalar();
    if (promotes(arg)) {
      promotion = at::native::update_result_type_state(s, promotion);
      promoted = true;
    }
    scalars.push_back({index, operand_dtype(s)});
    operands.push_back(scalar_argument(p, s, scalars.back().dtype));
    return;
  }
  if (attrs == nullptr) return;
  if (is_static_scalar(arg)) {
    if (v.isNone()) return absent();
    attrs->set(name, v.toScalar().toDouble());
  } else if (v.isNone()) {
    // an absent optional attribute: rules test attrs.has(name)
  } else if (kind_of(arg) == c10::TypeKind::DeviceObjType ||
             kind_of(arg) == c10::TypeKind::LayoutType ||
             kind_of(arg) == c10::TypeKind::MemoryFormatType) {
    // placement and layout of the outputs: already decided by the meta function
  } else if (kind_of(arg) == c10::TypeKind::ScalarTypeType) {
    attrs->set_type(name, element_type(v.toScalarType()));
  } else if (v.isBool()) {
    attrs->set(name, int64_t{v.toBool()});
  } else if (v.isInt()) {
    attrs->set(name, v.toInt());
  } else if (v.isIntList()) {
    attrs->set(name, v.toIntVector());
  } else if (v.isBoolList()) {
    std::vector<int64_t> flags;
    for (bool f : v.toBoolList()) flags.push_back(f);
    attrs->set(name, flags);
  } else if (v.isString()) {
    attrs->set(name, std::string(v.toStringRef()));
  } else {
    TORCH_CHECK(false, "torchtpu: argument '", name, "' of type ", arg.real_type()->str(),
                " is not supported by the lowered kernel");
  }
}

// Index of the argument a mutable return aliases (in-place self, or out=), or -1.
int aliased_argument(const c10::FunctionSchema& schema, size_t ret) {
  const c10::AliasInfo* info = schema.returns()[ret].alias_info();
  if (info == nullptr || !info->isWrite()) return -1;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::AliasInfo* a = args[i].alias_info();
    if (a != nullptr && a->isWrite() && a->beforeSets() == info->beforeSets()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// What PyTorch's meta function said about one call signature: each output's geometry.
struct OutputSpec {
  std::vector<int64_t> sizes, strides;
  at::ScalarType dtype;
  bool defined = true;  // false for outputs a mask turned off (native_layer_norm_backward)
};
struct ReturnSpec {
  int aliased_argument;  // the mutated argument it returns (in-place, out=), or -1
  bool is_list;
  std::vector<OutputSpec> outputs;
};
using MetaResult = std::vector<ReturnSpec>;

// Results by call signature, shared and never changed once stored: another thread may be reading
// one while this one inserts the same signature, or clears the table. Past `most` entries the
// table starts again, which bounds what shape-varying loads hold.
template <typename T>
class SignatureCache {
 public:
  using Entry = std::shared_ptr<const T>;
  explicit SignatureCache(size_t most) : most_(most) {}
  Entry find(const hlo::Fingerprint& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = results_.find(key);
    return it == results_.end() ? nullptr : it->second;
  }
  // The result stored for `key`: `result`, or the one another thread stored first.
  Entry insert(const hlo::Fingerprint& key, T result) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (results_.size() >= most_) results_.clear();
    return results_.try_emplace(key, std::make_shared<const T>(std::move(result))).first->second;
  }

 private:
  const size_t most_;
  std::mutex mutex_;
  std::unordered_map<hlo::Fingerprint, Entry, hlo::FingerprintHash> results_;
};

// PyTorch's meta function's results by call signature (dtypes, sizes, strides, attribute values;
// not scalar values), so that function, written in Python for most ops, runs once per signature.
SignatureCache<MetaResult>& meta_cache() {
  static auto* cache = new SignatureCache<MetaResult>(100000);
  return *cache;
}

// Strict and Debug: an op's program once run, kept to run the same op again without recording it
// (engine::OpReplay), with where its scalar operands come from.
struct KeptOp {
  engine::OpReplay program;
  std::vector<ScalarOperand> scalars;
};

// Kept ops by rule, call signature and storage layout (replay_key). Each holds its executable:
// the bound keeps what outlives the executable cache's own bound small.
SignatureCache<KeptOp>& kept_ops() {
  static auto* cache = new SignatureCache<KeptOp>(1024);
  return *cache;
}

// Scalar values enter the key only `with_value`: for factories, whose output shape depends on them
// (arange's end), and for static scalars.
void add_key(hlo::Fingerprint& f, const c10::IValue& v, bool scalar_argument, bool with_value) {
  if (v.isTensor()) {
    f.add(int64_t{1});
    add_tensor_key(f, v.toTensor());
  } else if (v.isTensorList() || (v.isList() && !v.isIntList() && !v.isDoubleList() &&
                                  !v.isBoolList())) {
    f.add(int64_t{2});
    f.add(static_cast<int64_t>(v.toListRef().size()));
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor()) {
        add_tensor_key(f, e.toTensor());
      } else {
        f.add(int64_t{-2});
      }
    }
  } else if (scalar_argument && v.isScalar()) {
    c10::Scalar s = v.toScalar();
    f.add(int64_t{3});
    f.add(int64_t{s.isBoolean()} + 2 * s.isIntegral(false) + 4 * s.isComplex());
    if (with_value) f.add(s.isComplex() ? s.toComplexDouble().real() : s.toDouble());
  } else if (v.isBool() || v.isInt()) {
    f.add(int64_t{4});
    f.add(v.isBool() ? int64_t{v.toBool()} : v.toInt());
  } else if (v.isIntList()) {
    f.add(int64_t{5});
    f.add(v.toIntVector());
  } else if (v.isBoolList()) {  // an output mask: which outputs the op makes
    f.add(int64_t{10});
    f.add(static_cast<int64_t>(v.toBoolList().size()));
    for (bool b : v.toBoolList()) f.add(int64_t{b});
  } else if (v.isString()) {
    f.add(int64_t{6});
    f.add(v.toStringRef());
  } else if (v.isNone()) {
    f.add(int64_t{7});
  } else if (v.isDevice()) {
    f.add(int64_t{8});
    f.add(v.toDevice().str());
  } else {
    f.add(int64_t{9});
  }
}

// An op's call signature: the op and each argument's key (add_key), scalar values only for
// static scalars or, `with_values`, every scalar; a written argument also says which other
// arguments share its storage, and how they overlap it.
void add_signature(hlo::Fingerprint& key, const c10::FunctionSchema& schema,
                   const std::vector<c10::IValue>& args, bool with_values) {
  const auto& arguments = schema.arguments();
  key.reserve(512);
  key.add(static_cast<int64_t>(reinterpret_cast<intptr_t>(&schema)));
  for (size_t i = 0; i < args.size(); ++i) {
    add_key(key, args[i], is_scalar_type(arguments[i]),
            with_values || is_static_scalar(arguments[i]));
    if (!written(schema, i)) continue;
    c10::SmallVector<int64_t, 8> overlaps;
    written_overlaps(args, i, overlaps);
    key.add(static_cast<int64_t>(overlaps.size()));
    key.add_ints(overlaps.data(), overlaps.size());
  }
}

// PyTorch's TensorIterator checks, with its messages: operands broadcast, and the result type
// casts safely to each written output (a bool result casts to any).
void check_elementwise(const std::vector<c10::IValue>& args, const c10::FunctionSchema& schema,
                       bool boolean_result) {
  at::DimVector shape;
  at::native::ResultTypeState promotion;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].isTensor() || !args[i].toTensor().defined() || schema.arguments()[i].is_out()) {
      continue;
    }
    const at::Tensor& t = args[i].toTensor();
    shape = at::infer_size_dimvector(shape, t.sizes());
    promotion = at::native::update_result_type_state(t, promotion);
  }
  at::ScalarType common = at::native::result_type(promotion);
  for (size_t i = 0; i < args.size(); ++i) {
    if (schema.arguments()[i].name() == "alpha" && args[i].isScalar()) {
      at::native::alpha_check(common, args[i].toScalar());
    }
  }
  for (size_t r = 0; r < schema.returns().size(); ++r) {
    int alias = aliased_argument(schema, r);
    if (alias < 0) continue;
    const at::Tensor& out = args[alias].toTensor();
    TORCH_CHECK(boolean_result || at::canCast(common, out.scalar_type()), "result type ", common,
                " can't be cast to the desired output type ", out.scalar_type());
    if (!schema.arguments()[alias].is_out()) {
      TORCH_CHECK(out.sizes().equals(shape), "output with shape ", out.sizes(),
                  " doesn't match the broadcast shape ", at::IntArrayRef(shape));
    }
  }
}

// The geometry of a call's results, from a run of it (on meta tensors, or the CPU's): `stack`
// holds what it returned, `inputs` the arguments it ran on (an aliased result is its argument,
// resized).
MetaResult result_geometry(const c10::FunctionSchema& schema,
                           const std::vector<c10::IValue>& args,
                           const std::vector<c10::IValue>& inputs,
                           const std::vector<c10::IValue>& stack) {
  auto spec = [](const at::Tensor& m) {
    if (!m.defined()) return OutputSpec{{}, {}, at::kFloat, false};
    return OutputSpec{std::vector<int64_t>(m.sizes().begin(), m.sizes().end()),
                      std::vector<int64_t>(m.strides().begin(), m.strides().end()),
                      m.scalar_type()};
  };
  // Batch norm's backward leaves out the gradients its output mask does not ask for, as its CPU
  // kernel does, where its meta function makes them all. (Other ops' meta functions follow
  // their masks already, or, as grid_sampler's backward, make what the CPU kernel makes.)
  std::optional<int> mask;
  if (schema.name() == "aten::native_batch_norm_backward" ||
      schema.name() == "aten::batch_norm_backward") {
    mask = schema.argumentIndexWithName("output_mask");
  }
  MetaResult result;
  for (size_t r = 0; r < schema.returns().size(); ++r) {
    const c10::IValue& meta = stack.at(r);
    TORCH_CHECK(meta.isTensor() || meta.isTensorList(), "torchtpu: ", schema.name(),
                " returns a non-tensor, which the lowered kernel cannot produce");
    ReturnSpec ret{aliased_argument(schema, r), meta.isTensorList(), {}};
    if (ret.aliased_argument >= 0) {
      ret.outputs.push_back(spec(inputs[ret.aliased_argument].toTensor()));
    } else if (meta.isTensor()) {
      ret.outputs.push_back(spec(meta.toTensor()));
      if (mask && args[*mask].isBoolList() && r < args[*mask].toBoolList().size() &&
          !args[*mask].toBoolList().get(r)) {
        ret.outputs.back().defined = false;
      }
    } else {
      for (const at::Tensor& m : meta.toTensorVector()) ret.outputs.push_back(spec(m));
    }
    result.push_back(std::move(ret));
  }
  // The margin losses' meta functions give an unreduced loss of one unbatched sample the shape
  // [1], where the CPU kernels give [].
  if (schema.name() == "aten::multi_margin_loss" ||
      schema.name() == "aten::multilabel_margin_loss_forward") {
    std::optional<int> reduction = schema.argumentIndexWithName("reduction");
    if (args[0].toTensor().dim() <= 1 && args[*reduction].toInt() == 0) {
      result[0].outputs[0].sizes.clear();
      result[0].outputs[0].strides.clear();
    }
  }
  return result;
}

MetaResult run_meta(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args) {
  std::vector<c10::IValue> stack;
  for (const c10::IValue& v : args) stack.push_back(to_meta(v));
  std::vector<c10::IValue> meta_inputs = stack;  // keeps the meta out= tensors, for resizes
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    op.callBoxed(stack);
  }
  return result_geometry(op.schema(), args, meta_inputs, stack);
}

}  // namespace

void add_tensor_key(hlo::Fingerprint& f, const at::Tensor& t) {
  if (!t.defined()) {
    f.add(int64_t{-1});
    return;
  }
  f.add(static_cast<int64_t>(t.scalar_type()));
  f.add(int64_t{t.is_cpu()} * 2 + int64_t{t.unsafeGetTensorImpl()->is_wrapped_number()});
  f.add_ints(t.sizes().data(), t.sizes().size());
  f.add_ints(t.strides().data(), t.strides().size());
}

namespace {

// The key of an op's kept program: its rule, device and call signature (`signature`, which fixes
// its outputs' geometry), and how its tensors lie in their storages (which share one, where each
// view starts, each storage's size, element type and whether it has contents), which fix the
// program's arguments and outputs. Lists each storage once in `storages`, inputs' first. False
// when the op is not kept: no input has contents to read (a fill, which is made on the host where
// its shapes vary).
bool replay_key(const std::string& rule, const c10::FunctionSchema& schema,
                const std::vector<c10::IValue>& args, const std::vector<at::Tensor>& outputs,
                c10::Device device, const hlo::Fingerprint& signature, hlo::Fingerprint& key,
                std::vector<engine::StorageHandle*>& storages) {
  const auto& arguments = schema.arguments();
  key.reserve(signature.bytes().size() + 256);
  key.add(rule);
  key.add(int64_t{device.index()});
  key.add_bytes(signature);
  bool reads = false;
  auto add_storage = [&](const at::Tensor& t) {
    engine::StorageHandle* storage = &storage_handle(t.storage());
    auto it = std::find(storages.begin(), storages.end(), storage);
    key.add(static_cast<int64_t>(it - storages.begin()));
    key.add(t.storage_offset());
    if (it != storages.end()) return storage;
    storages.push_back(storage);
    key.add(static_cast<int64_t>(storage->nbytes()));
    key.add(static_cast<int64_t>(storage->type()));
    key.add(int64_t{storage->buffer() != nullptr});
    return storage;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (arguments[i].is_out()) continue;
    const c10::IValue& v = args[i];
    for (const at::Tensor& t : tensors_of(v)) {
      if (is_cpu_scalar(t) && v.isTensor()) continue;  // a scalar operand
      if (!t.is_privateuseone()) return false;
      if (add_storage(t)->buffer() != nullptr && t.numel() > 0) reads = true;
    }
  }
  for (const at::Tensor& t : outputs) {
    if (t.defined()) add_storage(t);
  }
  return reads;
}

// The shapes of the operands add_argument adds for the op's arguments, in order.
std::vector<hlo::Shape> operand_shapes(const c10::FunctionSchema& schema,
                                       const std::vector<c10::IValue>& args) {
  const auto& arguments = schema.arguments();
  std::vector<hlo::Shape> shapes;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].is_out()) continue;
    const c10::IValue& v = args[i];
    if (v.isTensor() || v.isTensorList() || (v.isList() && !v.isIntList() && !v.isBoolList())) {
      for (const at::Tensor& t : tensors_of(v)) {
        std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
        shapes.push_back(hlo::Shape{element_type(t.scalar_type()),
                                    is_cpu_scalar(t) ? std::vector<int64_t>{} : sizes});
      }
    } else if (is_scalar_type(arguments[i]) && !v.isNone() && !is_static_scalar(arguments[i])) {
      c10::Scalar sc = v.toScalar();
      shapes.push_back(hlo::Shape{sc.isBoolean()          ? hlo::ElementType::kPred
                                  : sc.isIntegral(false) ? hlo::ElementType::kS64
                                  : sc.isComplex()       ? hlo::ElementType::kC128
                                                         : hlo::ElementType::kF64,
                                  {}});
    }
  }
  return shapes;
}

// A deferred op's attributes (its attribute arguments, its outputs' types and shapes, the
// promoted type), which its call signature fixes (lowered_kernel's meta-cache key), with their
// fingerprint: made and lowered alone once per signature, then shared by every op recorded with
// it.
struct SharedAttrs {
  std::shared_ptr<const lowering::Attrs> attrs;
  hlo::Fingerprint fingerprint;
};

SignatureCache<SharedAttrs>& shared_attrs() {
  static auto* cache = new SignatureCache<SharedAttrs>(100000);
  return *cache;
}

// Runs a kept op on this call's storages and scalars.
void replay(const KeptOp& op, const std::vector<c10::IValue>& args,
            const std::vector<engine::StorageHandle*>& storages, c10::Device device) {
  engine::Runtime& runtime = engine::Runtime::get();
  std::vector<std::shared_ptr<pjrt::Buffer>> scalars;
  scalars.reserve(op.scalars.size());
  for (const ScalarOperand& s : op.scalars) {
    const c10::IValue& v = args[s.argument];
    ScalarBits bits = scalar_bits(v.isTensor() ? v.toTensor().item() : v.toScalar(), s.dtype);
    scalars.push_back(runtime.scalar(bits.type, bits.bits, device.index()));
  }
  engine::replay(device.index(), op.program, storages, scalars);
}

}  // namespace

void run_rule(const std::string& rule, const c10::FunctionSchema& schema,
              const std::vector<c10::IValue>& args, const std::vector<at::Tensor>& outputs,
              c10::Device device, const hlo::Fingerprint* signature) {
  const auto& arguments = schema.arguments();
  hlo::Fingerprint own;
  if (signature == nullptr) {  // an op's kernel calling its rule: its arguments and outputs
    add_signature(own, schema, args, false);
    for (const at::Tensor& t : outputs) add_tensor_key(own, t);
    signature = &own;
  }
  std::vector<IndexAssert> asserts = index_asserts(rule, schema, args);
  // Strict and Debug keep each op's program, to run the same op on storages laid out the same way
  // again without recording it; an op with index checks records them each time.
  hlo::Fingerprint key;
  std::vector<engine::StorageHandle*> storages;
  bool keep = !engine::deferring() && asserts.empty() &&
              replay_key(rule, schema, args, outputs, device, *signature, key, storages);
  if (keep) {
    if (SignatureCache<KeptOp>::Entry kept = kept_ops().find(key)) {
      replay(*kept, args, storages, device);
      return;
    }
  }
  // A deferred op of a call signature recorded before takes the attributes it was given then.
  SignatureCache<SharedAttrs>::Entry shared;
  if (engine::deferring()) shared = shared_attrs().find(*signature);
  std::vector<ScalarOperand> scalars;
  engine::Recording recording(device.index());
  engine::Program& p = recording.program();
  std::vector<int> operands;
  operands.reserve(arguments.size());
  lowering::Attrs attrs;
  at::native::ResultTypeState promotion;
  bool promoted = false;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].is_out()) continue;
    add_argument(p, i, arguments[i], args[i], operands, shared ? nullptr : &attrs, promotion,
                 promoted, scalars);
  }
  try {
    if (!shared) {
      for (size_t k = 0; k < outputs.size(); ++k) {
        if (!outputs[k].defined()) continue;
        std::string suffix = k == 0 ? "" : std::to_string(k);
        attrs.set_type("type" + suffix, element_type(outputs[k].scalar_type()));
        attrs.set("shape" + suffix,
                  std::vector<int64_t>(outputs[k].sizes().begin(), outputs[k].sizes().end()));
      }
      if (promoted) {
        attrs.set_type("compute_type", element_type(at::native::result_type(promotion)));
      }
      if (engine::deferring()) {
        // Deferred ops run later, inside a larger program: lower this one alone now, so a
        // refusal surfaces at its own call (and an unsupported case can still run on the CPU).
        std::vector<hlo::Shape> shapes = operand_shapes(schema, args);
        if (shapes.size() == operands.size()) {
          engine::Program::check_lowering(rule, shapes, attrs, static_cast<int>(outputs.size()));
        }
        SharedAttrs made{std::make_shared<const lowering::Attrs>(std::move(attrs)), {}};
        made.attrs->fingerprint(made.fingerprint);
        shared = shared_attrs().insert(*signature, std::move(made));
      }
    }
    int n = static_cast<int>(outputs.size());
    int first = shared ? p.apply(rule, std::move(operands), shared->attrs, shared->fingerprint, n)
                       : p.apply(rule, std::move(operands), std::move(attrs), n);
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (outputs[k].defined()) p.write(view_of(outputs[k]), first + static_cast<int>(k));
    }
    record_index_asserts(p, asserts);
    engine::Launch launch;
    recording.finish(keep ? &launch : nullptr);
    KeptOp kept{{}, std::move(scalars)};
    if (keep && engine::OpReplay::of(launch, storages, kept.scalars.size(), &kept.program)) {
      kept_ops().insert(key, std::move(kept));
    }
  } catch (const lowering::Refused& e) {
    TORCH_CHECK(!e.runtime_error, e.what());
    TORCH_CHECK_NOT_IMPLEMENTED(false, e.what());
  }
}

std::vector<c10::IValue> take_arguments(const c10::OperatorHandle& op,
                                       torch::jit::Stack* stack) {
  size_t n = op.schema().arguments().size();
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  return args;
}

namespace {

bool lazy(const at::Tensor& t) { return t.defined() && (t.is_conj() || t.is_neg()); }

// PyTorch leaves a conjugate or negative view's bit to the kernels of its products (mm, bmm,
// addmm, baddbmm, dot, vdot, mv, ... fall through its Conjugate and Negative keys), while a
// lowering reads a storage as it lies: such an operand is materialized first. (Read as it lay,
// `a.mH @ b` of complex matrices was `a.mT @ b`.) Writing through such a view is refused.
void resolve_lazy_operands(const c10::FunctionSchema& schema, std::vector<c10::IValue>& args) {
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& a = args[i];
    bool any = a.isTensor() && lazy(a.toTensor());
    if (a.isTensorList()) {
      for (const c10::IValue& t : a.toListRef()) any = any || lazy(t.toTensor());
    }
    if (!any) continue;
    const c10::AliasInfo* alias = arguments[i].alias_info();
    TORCH_CHECK_NOT_IMPLEMENTED(alias == nullptr || !alias->isWrite(), schema.name(),
                                ": writing through a conjugate or negative view is not supported "
                                "on tpu; call resolve_conj() (or resolve_neg()) on it first");
    a = map_tensors(a, [](const at::Tensor& t) {
      return lazy(t) ? t.resolve_conj().resolve_neg() : t;
    });
  }
}

// Integer arguments the CPU kernels refuse and the meta functions accept: a negative integer
// exponent of an integer tensor, and round's decimals for an integer tensor.
void check_integer_arguments(const c10::FunctionSchema& schema,
                             const std::vector<c10::IValue>& args) {
  std::string_view name = schema.name();  // run for every op: a length check first
  if ((name != "aten::pow" && name != "aten::pow_" && name != "aten::round" &&
       name != "aten::round_") || !args[0].isTensor()) {
    return;
  }
  at::ScalarType type = args[0].toTensor().scalar_type();
  if (!at::isIntegralType(type, /*includeBool=*/true)) return;
  if (name[6] == 'p') {  // aten::pow
    if (!args[1].isScalar()) return;
    at::Scalar exponent = args[1].toScalar();
    TORCH_CHECK(!exponent.isIntegral(/*includeBool=*/false) || exponent.toLong() >= 0,
                "Integers to negative integer powers are not allowed.");
  } else if (schema.overload_name() == "decimals") {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"round_tpu\" not implemented for '", c10::toString(type),
                                "'");
  }
}

}  // namespace

void lowered_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& arguments = schema.arguments();
  const lowering::AtenBinding& binding = binding_for(op);
  std::vector<c10::IValue> args = take_arguments(op, stack);
  resolve_lazy_operands(schema, args);

  std::vector<std::vector<at::Tensor>> held;  // each argument's tensors
  held.reserve(args.size());
  for (const c10::IValue& v : args) held.push_back(tensors_of(v));
  std::vector<const at::Tensor*> all;
  all.reserve(args.size());
  for (const auto& list : held) {
    for (const at::Tensor& t : list) all.push_back(&t);
  }
  if (prepare_index_arguments(op, args, stack)) return;
  prepare_linalg_arguments(op, args);
  check_integer_arguments(schema, args);
  c10::Device device = common_device_of(all);
  c10::DeviceGuard guard(device);

  // Debug's checks read values to the host: not while a compiled graph is being captured.
  bool debug = engine::eager_mode() == engine::EagerMode::kDebug && !engine::capturing();

  bool factory = true;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!arguments[i].is_out() && !held[i].empty()) factory = false;
  }
  hlo::Fingerprint key;
  add_signature(key, schema, args, factory);
  // Small integer work whose shapes keep changing at its line runs on the host, before the meta
  // function of a new shape (host_ops.cc).
  if (!factory && small_integer_work(all) &&
      run_on_host_when_shapes_vary(op, args, all, key, stack)) {
    return;
  }
  SignatureCache<MetaResult>::Entry meta = meta_cache().find(key);
  if (meta == nullptr) {
    // Where the meta function is a looser judge than the CPU kernel, the CPU decides.
    bool judged = needs_cpu_verdict(op, args, binding.elementwise);
    std::optional<CpuRun> cpu;
    if (judged) cpu = cpu_verdict(op, args);
    if (binding.elementwise && !judged) check_elementwise(args, schema, binding.boolean_result);
    MetaResult geometry;
    try {
      geometry = run_meta(op, args);
    } catch (...) {
      // The CPU's exception type; or, where the meta function refuses what the CPU kernel takes
      // (mse_loss_backward's divides by an empty input's size), the CPU results' geometry.
      if (!cpu && !engine::capturing()) cpu = cpu_verdict(op, args);
      if (!cpu) throw;
      geometry = result_geometry(schema, args, cpu->inputs, cpu->results);
    }
    meta = meta_cache().insert(key, std::move(geometry));
  }

  // A small integer factory's results are made on the host (host_ops.cc).
  if (factory && small_integer_work(all)) {
    std::vector<std::pair<at::ScalarType, size_t>> made;
    for (const ReturnSpec& ret : *meta) {
      for (const OutputSpec& o : ret.outputs) {
        if (!o.defined) continue;
        made.emplace_back(o.dtype, c10::multiply_integers(o.sizes) * c10::elementSize(o.dtype));
      }
    }
    if (make_on_host(op, args, all, key, made, stack)) return;
  }

  // The real outputs: the mutated arguments (resized as the meta function resized its own), or
  // new tensors with the meta function's geometry.
  bool overlaps_by_rule = overlaps_by_iterator_rule(op, binding.elementwise);
  std::vector<at::Tensor> outputs;
  std::vector<c10::IValue> results;
  for (const ReturnSpec& ret : *meta) {
    if (ret.aliased_argument >= 0) {
      at::Tensor out = args[ret.aliased_argument].toTensor();
      // TensorIterator's rule, before a resize as there: no partial overlap with an input. Other
      // ops' overlaps were judged by the CPU (cpu_verdict), which knows each op's own rule.
      at::assert_no_internal_overlap(out);
      if (overlaps_by_rule) {
        for (const at::Tensor* input : all) {
          if (input->is_privateuseone() && !input->is_same(out)) {
            at::assert_no_partial_overlap(out, *input);
          }
        }
      }
      if (out.sizes() != ret.outputs[0].sizes) out.resize_(ret.outputs[0].sizes);
      outputs.push_back(out);
      results.emplace_back(out);
      continue;
    }
    std::vector<at::Tensor> made;
    for (const OutputSpec& o : ret.outputs) {
      made.push_back(o.defined ? at::empty_strided(o.sizes, o.strides,
                                                   at::TensorOptions().dtype(o.dtype).device(
                                                       device))
                               : at::Tensor());
      outputs.push_back(made.back());
    }
    if (ret.is_list) {
      results.emplace_back(made);
    } else {
      results.emplace_back(made[0]);
    }
  }

  try {
    run_rule(binding.rule, schema, args, outputs, device, &key);
  } catch (const lowering::Unsupported&) {
    for (c10::IValue& a : args) stack->push_back(std::move(a));
    cpu_fallback(op, stack);
    return;
  }
  check_linalg_errors(schema, args, outputs);
  if (debug) check_finite(schema, outputs);
  engine::locate_compiles();
  for (c10::IValue& r : results) stack->push_back(std::move(r));
}

namespace {

bool supported_kind(const c10::TypePtr& type) {
  c10::TypePtr t = type;
  if (t->kind() == c10::TypeKind::OptionalType) {
    t = t->expectRef<c10::OptionalType>().getElementType();
  }
  switch (t->kind()) {
    case c10::TypeKind::TensorType:
    case c10::TypeKind::NumberType:
    case c10::TypeKind::FloatType:
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
    case c10::TypeKind::BoolType:
    case c10::TypeKind::StringType:
    case c10::TypeKind::ScalarTypeType:
    case c10::TypeKind::LayoutType:
    case c10::TypeKind::DeviceObjType:
    case c10::TypeKind::MemoryFormatType:
      return true;
    case c10::TypeKind::ListType: {
      c10::TypePtr e = t->expectRef<c10::ListType>().getElementType();
      if (e->kind() == c10::TypeKind::OptionalType) {
        return e->expectRef<c10::OptionalType>().getElementType()->kind() ==
               c10::TypeKind::TensorType;
      }
      return e->kind() == c10::TypeKind::TensorType || e->kind() == c10::TypeKind::IntType ||
             e->kind() == c10::TypeKind::SymIntType || e->kind() == c10::TypeKind::BoolType;
    }
    default:
      return false;
  }
}

bool supported_schema(const c10::FunctionSchema& schema) {
  for (const c10::Argument& arg : schema.arguments()) {
    if (!supported_kind(arg.real_type())) return false;
  }
  for (const c10::Argument& ret : schema.returns()) {
    c10::TypePtr t = ret.real_type();
    bool tensor = t->kind() == c10::TypeKind::TensorType ||
                  (t->kind() == c10::TypeKind::ListType &&
                   t->expectRef<c10::ListType>().getElementType()->kind() ==
                       c10::TypeKind::TensorType);
    if (!tensor) return false;
  }
  return !schema.returns().empty();
}

}  // namespace

std::vector<std::string> lowered_operators() {
  std::vector<std::string> ops;
  c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    bool bound = false;
    for (const auto& binding : lowering::aten_bindings()) {
      bound = bound || matches(binding.aten_op, name);
    }
    if (!bound) continue;
    std::optional<c10::OperatorHandle> op = dispatcher.findOp(name);
    if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
        !supported_schema(op->schema())) {
      continue;
    }
    std::string aten = name.name.substr(6);
    ops.push_back(name.overload_name.empty() ? aten : aten + "." + name.overload_name);
  }
  return ops;
}

}  // namespace torchtpu::aten
