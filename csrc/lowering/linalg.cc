// Matrix products on stablehlo.dot_general, and the cross product. float16 and bfloat16 accumulate in float32, as
// PyTorch's CPU kernels do.
#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

// x @ y over the last dim of x and dim `rhs_contract` of y, with `batch` leading batch dims.
Value dot(FunctionBuilder& b, const Value& x, const Value& y, int64_t batch, ElementType out) {
  ElementType c = opmath(out);
  Value l = convert(b, x, c), r = convert(b, y, c);
  Dims lb, rb;
  for (int64_t d = 0; d < batch; ++d) {
    lb.push_back(d);
    rb.push_back(d);
  }
  int64_t lc = static_cast<int64_t>(l.shape.rank()) - 1;
  int64_t rc = batch;
  Dims dims;
  for (int64_t d = 0; d < batch; ++d) dims.push_back(l.shape.dims[d]);
  for (int64_t d = batch; d < lc; ++d) dims.push_back(l.shape.dims[d]);
  for (int64_t d = batch; d < static_cast<int64_t>(r.shape.rank()); ++d) {
    if (d != rc) dims.push_back(r.shape.dims[d]);
  }
  Value product = b.op(
      "stablehlo.dot_general", {l, r}, Shape{c, dims},
      "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " +
          FunctionBuilder::i64_list(lb) + ", rhs_batching_dimensions = " +
          FunctionBuilder::i64_list(rb) + ", lhs_contracting_dimensions = " +
          FunctionBuilder::i64_list({lc}) + ", rhs_contracting_dimensions = " +
          FunctionBuilder::i64_list({rc}) + ">");
  return product;
}

Values mm(FunctionBuilder& b, const Values& v, const Attrs& a) {
  return {convert(b, dot(b, v[0], v[1], 0, out_type(a)), out_type(a))};
}

Values bmm(FunctionBuilder& b, const Values& v, const Attrs& a) {
  return {convert(b, dot(b, v[0], v[1], 1, out_type(a)), out_type(a))};
}

Values dot_rule(FunctionBuilder& b, const Values& v, const Attrs& a) {
  return {convert(b, dot(b, v[0], v[1], 0, out_type(a)), out_type(a))};
}

Values mv(FunctionBuilder& b, const Values& v, const Attrs& a) {
  return {convert(b, dot(b, v[0], v[1], 0, out_type(a)), out_type(a))};
}

// beta * self + alpha * product; beta == 0 ignores self (its NaNs too), as PyTorch does.
Value scale_add(FunctionBuilder& b, const Value& self, const Value& product, const Value& beta,
                const Value& alpha, ElementType out) {
  ElementType c = product.shape.type;
  const Dims& dims = product.shape.dims;
  Value bs = splat(b, beta, c, dims), as = splat(b, alpha, c, dims);
  Value s = broadcast_to(b, convert(b, self, c), dims);
  Value scaled_self = binary(b, "stablehlo.multiply", bs, s);
  Value zero = full(b, c, dims, 0);
  scaled_self = select(b, compare(b, bs, zero, "EQ"), zero, scaled_self);
  return convert(b, binary(b, "stablehlo.add", scaled_self,
                           binary(b, "stablehlo.multiply", as, product)), out);
}

// addmm(self, mat1, mat2, beta, alpha), baddbmm(self, batch1, batch2, beta, alpha),
// addmv(self, mat, vec, beta, alpha).
LoweringRule add_product(int64_t batch) {
  return [batch](FunctionBuilder& b, const Values& v, const Attrs& a) {
    Value product = dot(b, v[1], v[2], batch, out_type(a));
    return Values{scale_add(b, v[0], product, v[3], v[4], out_type(a))};
  };
}

// linalg_cross(self, other, dim): the 3-vectors along `dim`, operands broadcast.
Values cross(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Dims dims = out_shape(a);
  ElementType t = out_type(a);
  int64_t d = normalize_dim(a.i("dim"), static_cast<int64_t>(dims.size()));
  Value x = promote(b, v[0], t, dims), y = promote(b, v[1], t, dims);
  auto part = [&](const Value& z, int64_t i) {
    Dims start(dims.size(), 0), limit = dims;
    start[d] = i;
    limit[d] = i + 1;
    return slice(b, z, start, limit);
  };
  auto term = [&](int64_t i, int64_t j) {
    return binary(b, "stablehlo.subtract", binary(b, "stablehlo.multiply", part(x, i), part(y, j)),
                  binary(b, "stablehlo.multiply", part(x, j), part(y, i)));
  };
  return {concatenate(b, {term(1, 2), term(2, 0), term(0, 1)}, d)};
}

// addbmm(self, batch1, batch2, beta, alpha): the batch's products summed, then added to self.
Values addbmm(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value products = dot(b, v[1], v[2], 1, out_type(a));
  Value sum = reduce(b, products, {0}, constant(b, products.shape.type, 0), "stablehlo.add");
  return {scale_add(b, v[0], sum, v[3], v[4], out_type(a))};
}

// vdot(self, other): the conjugate of self dotted with other.
Values vdot(FunctionBuilder& b, const Values& v, const Attrs& a) {
  return {convert(b, dot(b, conjugate(b, v[0]), v[1], 0, out_type(a)), out_type(a))};
}

}  // namespace

void register_linalg_rules(Registry& r) {
  r.add("mm", mm, {"mm", "mm.out"});
  r.add("bmm", bmm, {"bmm", "bmm.out"});
  r.add("dot", dot_rule, {"dot", "dot.out"});
  r.add("mv", mv, {"mv", "mv.out"});
  r.add("addmm", add_product(0), {"addmm", "addmm.out", "addmm_"});
  r.add("baddbmm", add_product(1), {"baddbmm", "baddbmm.out", "baddbmm_"});
  r.add("addmv", add_product(0), {"addmv", "addmv.out", "addmv_"});
  r.add("linalg_cross", cross, {"linalg_cross", "linalg_cross.out"});
  r.add("addbmm", addbmm, {"addbmm", "addbmm.out"});  // addbmm_: ops_linalg.cc
  r.add("vdot", vdot, {"vdot", "vdot.out"});
}

}  // namespace torchtpu::lowering
