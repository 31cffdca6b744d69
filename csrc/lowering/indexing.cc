// Gathers and scatters: index_select, gather, scatter(_add), advanced indexing and index_put.
#include <algorithm>

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

// scatter.src / scatter.value / scatter_add(self, dim, index, src|value[, reduce])
LoweringRule scatter_rule(bool add) {
  return [add](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a);
    Value x = convert(b, v[0], t);
    size_t rank = x.shape.rank();
    Value index = v[1];
    if (index.shape.numel() == 0 || x.shape.numel() == 0) return Values{x};
    if (rank == 0) {  // the one element, replaced by (or added to) the source's
      Value src = reshape(b, convert(b, v[2], t), {});
      bool sum = add || (a.has("reduce") && a.s("reduce") == "add");
      return Values{sum ? binary(b, "stablehlo.add", x, src) : src};
    }
    int64_t dim = normalize_dim(a.i("dim"), rank);
    bool accumulate = add || (a.has("reduce") && a.s("reduce") == "add");
    if (a.has("reduce") && a.s("reduce") != "add") {
      throw Unsupported("torchtpu: scatter with reduce='" + a.s("reduce") + "' is not lowered");
    }
    Value src = v[2].shape.rank() == 0 ? broadcast_in_dim(b, convert(b, v[2], t),
                                                          index.shape.dims, {})
                                       : convert(b, v[2], t);
    src = slice(b, src, Dims(rank, 0), index.shape.dims);  // src may be larger than index
    Value coords = coordinates(b, index, dim, x.shape.dims[dim]);
    Dims all;
    for (size_t d = 0; d < rank; ++d) all.push_back(static_cast<int64_t>(d));
    std::string dims = "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = " +
                       list(all) + ", scatter_dims_to_operand_dims = " + list(all) +
                       ", index_vector_dim = " + std::to_string(rank) + ">";
    return Values{scatter(b, x, coords, src, accumulate, dims)};
  };
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
         "scatter_.value", "scatter.reduce", "scatter_.reduce", "scatter.value_reduce",
         "scatter_.value_reduce"});
  r.add("scatter_add", scatter_rule(true), {"scatter_add", "scatter_add.out", "scatter_add_"});
  r.add("index", index, {"index.Tensor", "index.Tensor_out", "_unsafe_index.Tensor"});
  r.add("index_put", index_put, {"index_put_", "index_put", "_index_put_impl_"});
}

}  // namespace torchtpu::lowering
