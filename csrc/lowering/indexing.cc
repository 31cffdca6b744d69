// Gathers and scatters: index_select, gather, take, scatter(_add, _reduce), index_add/copy/fill/
// reduce, put_, masked_scatter, advanced indexing and index_put.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

// Negative indices count from the end of a dimension of `size`.
Value wrap_index(FunctionBuilder& b, const Value& index, int64_t size) {
  Value i = convert(b, index, ElementType::kS64);
  Value negative = compare(b, i, full(b, ElementType::kS64, i.shape.dims, 0), "LT");
  return select(b, negative,
                binary(b, "stablehlo.add", i,
                       full(b, ElementType::kS64, i.shape.dims, static_cast<double>(size))),
                i);
}

std::string list(const Dims& d) { return FunctionBuilder::i64_list(d); }

// Whether the op's output has no elements: a gather or reshape to it is not a valid program (the
// operand may have one element, or none), so the rules return an empty constant instead.
bool empty_output(const Attrs& a) {
  Dims shape = out_shape(a);
  return std::find(shape.begin(), shape.end(), 0) != shape.end();
}

// index_select(self, dim, index)
Values index_select(FunctionBuilder& b, const Values& v, const Attrs& a) {
  if (empty_output(a)) return {full(b, v[0].shape.type, out_shape(a), 0)};
  Value x = v[0];
  if (x.shape.rank() == 0) return {reshape(b, x, out_shape(a))};
  int64_t dim = normalize_dim(a.i("dim"), x.shape.rank());
  Value idx = wrap_index(b, v[1], x.shape.dims[dim]);
  int64_t n = idx.shape.numel();
  idx = reshape(b, idx, {n, 1});
  Dims offset, slice_sizes = x.shape.dims, out = x.shape.dims;
  slice_sizes[dim] = 1;
  out[dim] = n;
  for (int64_t d = 0; d < static_cast<int64_t>(x.shape.rank()); ++d) {
    if (d != dim) offset.push_back(d);
  }
  Value g = b.op("stablehlo.gather", {x, idx}, Shape{x.shape.type, out},
                 "dimension_numbers = #stablehlo.gather<offset_dims = " + list(offset) +
                     ", collapsed_slice_dims = " + list({dim}) + ", start_index_map = " +
                     list({dim}) + ", index_vector_dim = 1>, slice_sizes = " +
                     FunctionBuilder::i64_array(slice_sizes) + ", indices_are_sorted = false");
  return {reshape(b, g, out_shape(a))};
}

// Full coordinates for gather/scatter along `dim`: [..., rank] with `index` at `dim` and the
// position itself elsewhere.
Value coordinates(FunctionBuilder& b, const Value& index, int64_t dim, int64_t size) {
  const Dims& shape = index.shape.dims;
  size_t rank = shape.size();
  Dims with_one = shape;
  with_one.push_back(1);
  std::vector<Value> parts;
  for (size_t d = 0; d < rank; ++d) {
    Value c = static_cast<int64_t>(d) == dim ? wrap_index(b, index, size)
                                             : iota(b, ElementType::kS64, shape, d);
    parts.push_back(reshape(b, c, with_one));
  }
  return concatenate(b, parts, static_cast<int64_t>(rank));
}

// gather(self, dim, index, sparse_grad)
Values gather(FunctionBuilder& b, const Values& v, const Attrs& a) {
  if (empty_output(a)) return {full(b, v[0].shape.type, out_shape(a), 0)};
  Value x = v[0];
  size_t rank = x.shape.rank();
  if (rank == 0) return {reshape(b, x, out_shape(a))};
  int64_t dim = normalize_dim(a.i("dim"), rank);
  Value coords = coordinates(b, v[1], dim, x.shape.dims[dim]);
  Dims all;
  for (size_t d = 0; d < rank; ++d) all.push_back(static_cast<int64_t>(d));
  return {b.op("stablehlo.gather", {x, coords}, Shape{x.shape.type, v[1].shape.dims},
               "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = " + list(all) +
                   ", start_index_map = " + list(all) + ", index_vector_dim = " +
                   std::to_string(rank) + ">, slice_sizes = " +
                   FunctionBuilder::i64_array(Dims(rank, 1)) + ", indices_are_sorted = false")};
}

// How a scatter combines an update with what is there: replace, or a reduction.
enum class Combine { kReplace, kSum, kProd, kMax, kMin };

Combine combine_of(const std::string& reduce) {
  if (reduce == "sum" || reduce == "add" || reduce == "mean") return Combine::kSum;
  if (reduce == "prod" || reduce == "multiply") return Combine::kProd;
  if (reduce == "amax") return Combine::kMax;
  if (reduce == "amin") return Combine::kMin;
  throw Refused("torchtpu: unknown reduction '" + reduce + "'");
}

// The identity of a combination, for slices a reduction excluding self starts from.
Value identity(FunctionBuilder& b, Combine c, ElementType t) {
  if (c == Combine::kMax || c == Combine::kMin) return extreme(b, t, c == Combine::kMin);
  return constant(b, t, c == Combine::kProd ? 1 : 0);
}

// stablehlo.scatter of `updates` (one per row of `coords`, [..., rank]) into `base` at full
// coordinates, combined as `c` says.
Value scatter_at(FunctionBuilder& b, const Value& base, const Value& coords, const Value& updates,
                 Combine c) {
  size_t rank = base.shape.rank();
  Dims all;
  for (size_t d = 0; d < rank; ++d) all.push_back(static_cast<int64_t>(d));
  std::string dims = "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = " +
                     list(all) + ", scatter_dims_to_operand_dims = " + list(all) +
                     ", index_vector_dim = " + std::to_string(coords.shape.rank() - 1) + ">";
  if (c == Combine::kReplace || c == Combine::kSum) {
    return scatter(b, base, coords, updates, c == Combine::kSum, dims);
  }
  Shape scalar{base.shape.type, {}};
  return b.op_with_region(
      "stablehlo.scatter", {base, coords, updates}, {base.shape}, {scalar, scalar},
      [c](FunctionBuilder& r, const std::vector<Value>& args) {
        if (c == Combine::kProd) return std::vector<Value>{binary(r, "stablehlo.multiply", args[0],
                                                                  args[1])};
        return std::vector<Value>{c == Combine::kMax ? maximum(r, args[0], args[1])
                                                     : minimum(r, args[0], args[1])};
      },
      dims + ", indices_are_sorted = false, unique_indices = false")[0];
}

// a / n for counts n >= 1, rounding down for integers (as PyTorch's div(..., "floor")).
Value divide_by_count(FunctionBuilder& b, const Value& a, const Value& n) {
  Value q = binary(b, "stablehlo.divide", a, n);
  if (hlo::is_floating(a.shape.type) || hlo::is_complex(a.shape.type)) return q;
  Value r = binary(b, "stablehlo.remainder", a, n);
  Value zero = full(b, a.shape.type, a.shape.dims, 0);
  return select(b, compare(b, r, zero, "LT"),
                binary(b, "stablehlo.subtract", q, full(b, a.shape.type, a.shape.dims, 1)), q);
}

// The reductions of scatter_reduce and index_reduce: `updates` reduced into `x` at `coords`;
// without `include_self` the reached elements start from the reduction's identity, and a mean
// divides by how many values each element received.
Value reduce_at(FunctionBuilder& b, const Value& x, const Value& coords, const Value& updates,
                const std::string& reduce, bool include_self) {
  Combine c = combine_of(reduce);
  ElementType t = x.shape.type;
  Value base = x;
  if (!include_self) {
    base = scatter_at(b, x, coords, broadcast_in_dim(b, identity(b, c, t), updates.shape.dims, {}),
                      Combine::kReplace);
  }
  Value r = scatter_at(b, base, coords, updates, c);
  if (reduce != "mean") return r;
  Value count = scatter_at(b, full(b, t, x.shape.dims, include_self ? 1 : 0), coords,
                           full(b, t, updates.shape.dims, 1), Combine::kSum);
  Value one = full(b, t, x.shape.dims, 1);
  count = select(b, compare(b, count, full(b, t, x.shape.dims, 0), "EQ"), one, count);
  return divide_by_count(b, r, count);
}

// Full coordinates of index_add/index_copy/index_fill/index_reduce: `index` (one entry per slice
// of the updates along `dim`) broadcast over updates of shape `dims`.
Value slice_coordinates(FunctionBuilder& b, const Value& index, int64_t dim, const Dims& dims,
                        int64_t size) {
  Value i = reshape(b, index, {index.shape.numel()});
  return coordinates(b, broadcast_in_dim(b, i, dims, {dim}), dim, size);
}

bool has_zero(const Dims& dims) { return std::find(dims.begin(), dims.end(), 0) != dims.end(); }

// scatter.src / scatter.value / scatter_add / scatter.reduce (add, multiply) /
// scatter_reduce.two: (self, dim, index, src|value[, reduce[, include_self]]).
LoweringRule scatter_rule(bool add) {
  return [add](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a);
    Value x = convert(b, v[0], t);
    Value index = v[1];
    if (index.shape.numel() == 0 || x.shape.numel() == 0) return Values{x};
    Dims shape = x.shape.dims;
    if (x.shape.rank() == 0) {  // one element: as a 1-element vector
      x = reshape(b, x, {1});
      index = reshape(b, index, {index.shape.numel()});
    }
    size_t rank = x.shape.rank();
    int64_t dim = normalize_dim(a.i("dim"), rank);
    Value src = convert(b, v[2], t);
    if (src.shape.rank() == 0) {
      src = broadcast_in_dim(b, src, index.shape.dims, {});
    } else if (src.shape.rank() != rank) {  // beside a 0-d self
      src = reshape(b, src, {src.shape.numel()});
    }
    src = slice(b, src, Dims(rank, 0), index.shape.dims);  // src may be larger than index
    Value coords = coordinates(b, index, dim, x.shape.dims[dim]);
    Value r;
    if (a.has("include_self")) {
      r = reduce_at(b, x, coords, src, a.s("reduce"), a.i("include_self") != 0);
    } else {
      Combine c = add ? Combine::kSum
                      : a.has("reduce") ? combine_of(a.s("reduce")) : Combine::kReplace;
      r = scatter_at(b, x, coords, src, c);
    }
    return Values{reshape(b, r, shape)};
  };
}

// The operands of index_add/index_copy/index_fill/index_reduce (self, dim, index, source) in
// the output type, a 0-d self as a 1-element vector, with the updates' full coordinates.
struct SliceUpdate {
  Value x, coords, updates;
  bool empty;
};

// PyTorch's name of an element type, for the errors its CPU kernels raise.
std::string torch_name(ElementType t) {
  switch (t) {
    case ElementType::kPred: return "Bool";
    case ElementType::kS8: return "Char";
    case ElementType::kS16: return "Short";
    case ElementType::kS32: return "Int";
    case ElementType::kU8: return "Byte";
    case ElementType::kF16: return "Half";
    case ElementType::kBF16: return "BFloat16";
    case ElementType::kF32: return "Float";
    case ElementType::kF64: return "Double";
    default: return hlo::short_name(t);
  }
}

// The CPU kernels' own checks that PyTorch's meta functions do not make.
void check_slice_update(const Values& v, const std::string& rule) {
  if (rule == "index_copy" && v[1].shape.type != ElementType::kS64) {
    throw std::runtime_error("index_copy_(): Expected a long tensor for index, but got " +
                             torch_name(v[1].shape.type));
  }
  if ((rule == "index_add" || rule == "index_reduce") && v[0].shape.rank() == 0 &&
      v[2].shape.rank() > 0) {
    std::string dims;
    for (int64_t d : v[2].shape.dims) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    throw std::runtime_error(
        "source tensor shape must match self tensor shape, excluding the specified dimension. "
        "Got self.shape = [] source.shape = [" + dims + "]");
  }
}

SliceUpdate slice_update(FunctionBuilder& b, const Values& v, const Attrs& a, bool fill) {
  ElementType t = out_type(a);
  SliceUpdate u;
  u.x = convert(b, v[0], t);
  if (u.x.shape.rank() == 0) u.x = reshape(b, u.x, {1});
  int64_t dim = normalize_dim(a.i("dim"), u.x.shape.rank());
  Dims dims = u.x.shape.dims;
  dims[dim] = v[1].shape.numel();
  u.empty = has_zero(dims);
  if (u.empty) return u;
  u.updates = fill ? splat(b, v[2], t, dims) : reshape(b, convert(b, v[2], t), dims);
  u.coords = slice_coordinates(b, v[1], dim, dims, u.x.shape.dims[dim]);
  return u;
}

// index_add(self, dim, index, source, alpha): duplicates accumulate.
Values index_add(FunctionBuilder& b, const Values& v, const Attrs& a) {
  check_slice_update(v, "index_add");
  SliceUpdate u = slice_update(b, v, a, false);
  if (u.empty) return {reshape(b, u.x, out_shape(a))};
  Value alpha = splat(b, v[3], u.x.shape.type, u.updates.shape.dims);
  Value scaled = u.x.shape.type == ElementType::kPred
                     ? b_and(b, u.updates, alpha)
                     : binary(b, "stablehlo.multiply", u.updates, alpha);
  Combine c = u.x.shape.type == ElementType::kPred ? Combine::kMax : Combine::kSum;
  return {reshape(b, scatter_at(b, u.x, u.coords, scaled, c), out_shape(a))};
}

// index_copy(self, dim, index, source) / index_fill(self, dim, index, value).
LoweringRule index_replace(bool fill) {
  return [fill](FunctionBuilder& b, const Values& v, const Attrs& a) {
    if (!fill) check_slice_update(v, "index_copy");
    SliceUpdate u = slice_update(b, v, a, fill);
    if (u.empty) return Values{reshape(b, u.x, out_shape(a))};
    return Values{reshape(b, scatter_at(b, u.x, u.coords, u.updates, Combine::kReplace),
                          out_shape(a))};
  };
}

// index_reduce(self, dim, index, source, reduce, include_self)
Values index_reduce(FunctionBuilder& b, const Values& v, const Attrs& a) {
  check_slice_update(v, "index_reduce");
  SliceUpdate u = slice_update(b, v, a, false);
  if (u.empty) return {reshape(b, u.x, out_shape(a))};
  return {reshape(b, reduce_at(b, u.x, u.coords, u.updates, a.s("reduce"),
                               a.i("include_self") != 0),
                  out_shape(a))};
}

// put_(self, index, source, accumulate): into the flattened self.
Values put(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Value x = convert(b, v[0], t);
  int64_t n = x.shape.numel(), k = v[1].shape.numel();
  if (n == 0 || k == 0) return {x};
  Value flat = reshape(b, x, {n});
  Value coords = reshape(b, wrap_index(b, v[1], n), {k, 1});
  Value source = reshape(b, convert(b, v[2], t), {k});
  Combine c = a.i("accumulate") == 0          ? Combine::kReplace
              : t == ElementType::kPred ? Combine::kMax
                                        : Combine::kSum;
  return {reshape(b, scatter_at(b, flat, coords, source, c), x.shape.dims)};
}

// Elements of the flattened `x` at `positions` (already non-negative), shaped like them.
Value take_flat(FunctionBuilder& b, const Value& x, const Value& positions) {
  int64_t n = x.shape.numel(), k = positions.shape.numel();
  Value g = b.op("stablehlo.gather", {reshape(b, x, {n}), reshape(b, positions, {k, 1})},
                 Shape{x.shape.type, {k}},
                 "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], "
                 "start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1>, "
                 "indices_are_sorted = false");
  return reshape(b, g, positions.shape.dims);
}

// take(self, index)
Values take(FunctionBuilder& b, const Values& v, const Attrs& a) {
  if (empty_output(a) || v[0].shape.numel() == 0) return {full(b, v[0].shape.type, out_shape(a), 0)};
  return {take_flat(b, v[0], wrap_index(b, v[1], v[0].shape.numel()))};
}

// masked_scatter_(self, mask, source): the true elements of the mask, in row-major order, take
// source's elements one after another. Out of place, self and mask broadcast together.
Values masked_scatter(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Value x = broadcast_to(b, convert(b, v[0], t), out_shape(a));
  int64_t n = x.shape.numel(), k = v[2].shape.numel();
  if (n == 0 || k == 0) return {x};
  Value mask = reshape(b, broadcast_to(b, convert(b, v[1], ElementType::kPred), x.shape.dims), {n});
  Value position = binary(b, "stablehlo.subtract",
                          prefix_sum(b, convert(b, mask, ElementType::kS64), 0),
                          full(b, ElementType::kS64, {n}, 1));
  position = b.op("stablehlo.clamp", {constant(b, ElementType::kS64, 0), position,
                                      constant(b, ElementType::kS64, static_cast<double>(k - 1))},
                  position.shape);
  Value taken = take_flat(b, convert(b, v[2], t), position);
  return {reshape(b, select(b, mask, taken, reshape(b, x, {n})), x.shape.dims)};
}

// The broadcast index tensors of advanced indexing, stacked as [B..., k], and the dims they index.
struct Advanced {
  Value coords;
  Dims indexed;     // operand dims that are indexed
  Dims batch;       // B, the broadcast index shape
  bool consecutive;
};

Advanced advanced(FunctionBuilder& b, const Value& x, const Values& v, size_t first,
                  const Dims& present) {
  Advanced r;
  std::vector<Value> indices;
  size_t next = first;
  for (size_t d = 0; d < present.size(); ++d) {
    if (!present[d]) continue;
    r.indexed.push_back(static_cast<int64_t>(d));
    indices.push_back(v.at(next++));
  }
  // csrc/aten/index_arguments.cc raises PyTorch's error for a list without index tensors.
  if (indices.empty()) throw Refused("torchtpu: advanced indexing needs at least one index tensor");
  for (const Value& i : indices) {  // broadcast shape of all index tensors
    Dims s = i.shape.dims;
    if (s.size() > r.batch.size()) r.batch.insert(r.batch.begin(), s.size() - r.batch.size(), 1);
    for (size_t k = 0; k < s.size(); ++k) {
      int64_t& d = r.batch[r.batch.size() - s.size() + k];
      if (d == 1) d = s[k];
    }
  }
  Dims with_one = r.batch;
  with_one.push_back(1);
  std::vector<Value> parts;
  for (size_t k = 0; k < indices.size(); ++k) {
    Value i = wrap_index(b, indices[k], x.shape.dims[r.indexed[k]]);
    parts.push_back(reshape(b, broadcast_to(b, i, r.batch), with_one));
  }
  r.coords = concatenate(b, parts, static_cast<int64_t>(r.batch.size()));
  r.consecutive = true;
  for (size_t k = 1; k < r.indexed.size(); ++k) {
    r.consecutive = r.consecutive && r.indexed[k] == r.indexed[k - 1] + 1;
  }
  return r;
}

// Where the non-indexed dims of the operand sit in the (PyTorch) result.
Dims window_positions(const Advanced& adv, size_t rank) {
  Dims positions;
  size_t batch = adv.batch.size();
  int64_t first = adv.indexed.empty() ? 0 : adv.indexed[0];
  size_t out = 0;
  for (size_t d = 0; d < rank; ++d) {
    bool is_indexed = std::find(adv.indexed.begin(), adv.indexed.end(),
                                static_cast<int64_t>(d)) != adv.indexed.end();
    if (adv.consecutive && static_cast<int64_t>(d) == first) out += batch;
    if (is_indexed) continue;
    positions.push_back(static_cast<int64_t>(adv.consecutive ? out : batch + positions.size()));
    ++out;
  }
  return positions;
}

// index.Tensor(self, indices): operands self, then the present index tensors.
Values index(FunctionBuilder& b, const Values& v, const Attrs& a) {
  if (empty_output(a)) return {full(b, v[0].shape.type, out_shape(a), 0)};
  Value x = v[0];
  Advanced adv = advanced(b, x, v, 1, a.ints("indices_present"));
  Dims slice_sizes = x.shape.dims;
  for (int64_t d : adv.indexed) slice_sizes[d] = 1;
  return {b.op("stablehlo.gather", {x, adv.coords}, Shape{x.shape.type, out_shape(a)},
               "dimension_numbers = #stablehlo.gather<offset_dims = " +
                   list(window_positions(adv, x.shape.rank())) + ", collapsed_slice_dims = " +
                   list(adv.indexed) + ", start_index_map = " + list(adv.indexed) +
                   ", index_vector_dim = " + std::to_string(adv.batch.size()) +
                   ">, slice_sizes = " + FunctionBuilder::i64_array(slice_sizes) +
                   ", indices_are_sorted = false")};
}

// index_put_ / _index_put_impl_(self, indices, values, accumulate[, unsafe])
Values index_put(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Value x = convert(b, v[0], t);
  if (x.shape.numel() == 0) return {x};
  Advanced adv = advanced(b, x, v, 1, a.ints("indices_present"));
  if (std::find(adv.batch.begin(), adv.batch.end(), 0) != adv.batch.end()) return {x};
  Value values = convert(b, v.back(), t);
  // The shape indexing would give: PyTorch broadcasts `values` to it.
  Dims result;
  Dims positions = window_positions(adv, x.shape.rank());
  size_t out_rank = adv.batch.size() + x.shape.rank() - adv.indexed.size();
  result.assign(out_rank, 0);
  std::vector<bool> is_window(out_rank, false);
  size_t w = 0;
  for (size_t d = 0; d < x.shape.rank(); ++d) {
    if (std::find(adv.indexed.begin(), adv.indexed.end(), static_cast<int64_t>(d)) !=
        adv.indexed.end()) {
      continue;
    }
    result[positions[w]] = x.shape.dims[d];
    is_window[positions[w++]] = true;
  }
  size_t bi = 0;
  for (size_t d = 0; d < out_rank; ++d) {
    if (!is_window[d]) result[d] = adv.batch[bi++];
  }
  values = broadcast_to(b, values, result);
  std::string dims = "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = " +
                     list(positions) + ", inserted_window_dims = " + list(adv.indexed) +
                     ", scatter_dims_to_operand_dims = " + list(adv.indexed) +
                     ", index_vector_dim = " + std::to_string(adv.batch.size()) + ">";
  return {scatter(b, x, adv.coords, values, a.i("accumulate") != 0, dims)};
}

}  // namespace

void register_indexing_rules(Registry& r) {
  r.add("index_select", index_select, {"index_select", "index_select.out"});
  r.add("gather", gather, {"gather", "gather.out"});
  r.add("scatter", scatter_rule(false),
        {"scatter.src", "scatter.value", "scatter.src_out", "scatter.value_out", "scatter_.src",
         "scatter_.value", "scatter.reduce", "scatter.reduce_out", "scatter_.reduce",
         "scatter.value_reduce", "scatter.value_reduce_out", "scatter_.value_reduce"});
  r.add("scatter_add", scatter_rule(true), {"scatter_add", "scatter_add.out", "scatter_add_"});
  r.add("scatter_reduce", scatter_rule(false),
        {"scatter_reduce.two", "scatter_reduce.two_out", "scatter_reduce_.two"});
  r.add("index_add", index_add, {"index_add", "index_add.out", "index_add_"});
  r.add("index_copy", index_replace(false), {"index_copy", "index_copy.out", "index_copy_"});
  r.add("index_fill", index_replace(true),
        {"index_fill.int_Scalar", "index_fill.int_Tensor", "index_fill_.int_Scalar",
         "index_fill_.int_Tensor"});
  r.add("index_reduce", index_reduce, {"index_reduce", "index_reduce.out", "index_reduce_"});
  r.add("put", put, {"put_", "put"});
  r.add("take", take, {"take", "take.out"});
  r.add("masked_scatter", masked_scatter, {"masked_scatter_", "masked_scatter"});
  r.add("index", index, {"index.Tensor", "index.Tensor_out", "_unsafe_index.Tensor"});
  r.add("index_put", index_put, {"index_put_", "index_put", "_index_put_impl_"});
}

}  // namespace torchtpu::lowering
