// Cumulative ops: cumprod, logcumsumexp, cummax, cummin (cumsum lives with the reductions).
#include "lowering/scan.h"

#include <cmath>

#include "lowering/registry.h"

namespace torchtpu::lowering {

std::vector<Value> scan(FunctionBuilder& b, const std::vector<Value>& xs,
                        const std::vector<Value>& inits, int64_t axis,
                        const TupleCombiner& combine) {
  const Shape& shape = xs[0].shape;
  if (shape.dims[axis] == 0) return xs;  // a window of no elements is not a valid program
  size_t rank = shape.rank(), n = xs.size();
  Dims window(rank, 1), strides(rank, 1);
  window[axis] = shape.dims[axis];
  std::vector<std::pair<int64_t, int64_t>> pads(rank, {0, 0});
  pads[axis].first = shape.dims[axis] - 1;
  std::vector<Value> operands = xs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  std::vector<Shape> results, scalars;
  for (const Value& x : xs) results.push_back(x.shape);
  for (const Value& x : xs) scalars.push_back(Shape{x.shape.type, {}});
  scalars.insert(scalars.end(), scalars.begin(), scalars.end());
  return b.op_with_region(
      "stablehlo.reduce_window", operands, results, scalars,
      [n, combine](FunctionBuilder& r, const std::vector<Value>& args) {
        std::vector<Value> lhs(args.begin(), args.begin() + n), rhs(args.begin() + n, args.end());
        return combine(r, lhs, rhs);
      },
      "window_dimensions = " + FunctionBuilder::i64_array(window) +
          ", window_strides = " + FunctionBuilder::i64_array(strides) +
          ", padding = " + FunctionBuilder::padding(pads));
}

std::pair<Value, Value> running_extreme(FunctionBuilder& b, const Value& x, int64_t axis,
                                        bool largest) {
  ElementType t = x.shape.type;
  Value index = iota(b, ElementType::kS64, x.shape.dims, axis);
  auto combine = [largest, t](FunctionBuilder& r, const std::vector<Value>& p,
                              const std::vector<Value>& q) {
    // The pair to keep: the better value, the later position among equals; NaN beats numbers.
    Value later = compare(r, p[1], q[1], "GT");
    Value take_p = b_or(r, compare(r, p[0], q[0], largest ? "GT" : "LT"),
                        b_and(r, compare(r, p[0], q[0], "EQ"), later));
    if (hlo::is_floating(t)) {
      Value nan_p = compare(r, p[0], p[0], "NE"), nan_q = compare(r, q[0], q[0], "NE");
      Value p_wins = b_and(r, nan_p, b_or(r, unary(r, "stablehlo.not", nan_q), later));
      take_p = select(r, b_or(r, nan_p, nan_q), p_wins, take_p);
    }
    return std::vector<Value>{select(r, take_p, p[0], q[0]), select(r, take_p, p[1], q[1])};
  };
  auto r = scan(b, {x, index}, {extreme(b, t, !largest), constant(b, ElementType::kS64, -1)},
                axis, combine);
  return {r[0], r[1]};
}

namespace {

int64_t scan_axis(const Attrs& a, const Value& x) { return normalize_dim(a.i("dim"), x.shape.rank()); }

// cumprod(self, dim, dtype?)
Values cumprod(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  if (x.shape.rank() == 0 || x.shape.numel() == 0) return {convert(b, x, t)};
  auto r = scan(b, {x}, {constant(b, c, 1)}, scan_axis(a, x),
                [](FunctionBuilder& f, const std::vector<Value>& p, const std::vector<Value>& q) {
                  return std::vector<Value>{binary(f, "stablehlo.multiply", p[0], q[0])};
                });
  return {convert(b, r[0], t)};
}

// log(exp(p) + exp(q)) without overflow; equal operands (infinities included) give p + log 2.
Value log_add_exp(FunctionBuilder& b, const Value& p, const Value& q) {
  Value hi = maximum(b, p, q), lo = minimum(b, p, q);
  Value spread = unary(b, "stablehlo.log_plus_one",
                       unary(b, "stablehlo.exponential", binary(b, "stablehlo.subtract", lo, hi)));
  Value same = binary(b, "stablehlo.add", hi, full(b, hi.shape.type, hi.shape.dims, M_LN2));
  return select(b, compare(b, p, q, "EQ"), same, binary(b, "stablehlo.add", hi, spread));
}

// logcumsumexp(self, dim)
Values logcumsumexp(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  if (x.shape.rank() == 0 || x.shape.numel() == 0) return {convert(b, x, t)};
  bool complex = hlo::is_complex(c);
  Value start = extreme(b, real_part(c), false);  // -inf (+ 0i)
  if (complex) {
    start = make_complex(b, start, constant(b, real_part(c), 0), c);
  }
  auto r = scan(b, {x}, {start}, scan_axis(a, x),
                [complex](FunctionBuilder& f, const std::vector<Value>& p,
                          const std::vector<Value>& q) {
                  return std::vector<Value>{complex ? complex_log_add_exp(f, p[0], q[0])
                                                    : log_add_exp(f, p[0], q[0])};
                });
  if (complex) {
    // A prefix of real parts -inf keeps the CPU's running value, its start -inf + 0i (the window
    // reduces in no fixed order, and a pair of them gives one of the two).
    auto [re, im] = real_and_imag(b, r[0]);
    Value minus_inf = compare(b, re, full(b, re.shape.type, re.shape.dims, -INFINITY), "EQ");
    r[0] = make_complex(b, re, select(b, minus_inf, full(b, im.shape.type, im.shape.dims, 0), im),
                        c);
  }
  return {convert(b, r[0], t)};
}

// cummax / cummin(self, dim) -> (values, indices)
LoweringRule cumulative_extreme(bool largest) {
  return [largest](FunctionBuilder& b, const Values& v, const Attrs& a) {
    Value x = convert(b, v[0], out_type(a));
    if (x.shape.rank() == 0) return Values{x, constant(b, ElementType::kS64, 0)};
    if (x.shape.numel() == 0) return Values{x, full(b, ElementType::kS64, x.shape.dims, 0)};
    auto [values, indices] = running_extreme(b, x, scan_axis(a, x), largest);
    return Values{values, indices};
  };
}

}  // namespace

void register_scan_rules(Registry& r) {
  r.add("cumprod", cumprod, {"cumprod", "cumprod.out", "cumprod_"});
  r.add("logcumsumexp", logcumsumexp, {"logcumsumexp", "logcumsumexp.out"});
  r.add("cummax", cumulative_extreme(true), {"cummax", "cummax.out"});
  r.add("cummin", cumulative_extreme(false), {"cummin", "cummin.out"});
}

}  // namespace torchtpu::lowering
