// The connectionist temporal classification loss (_ctc_loss) and its gradient, as the CPU kernel
// computes them (Graves et al. 2006, in log space): the forward variables alpha over the
// extended target l' = (blank, l1, blank, l2, ..., blank) in a while loop over time, every batch
// item at once and each masked by its own input and target length; the gradient runs the
// backward variables beta the other way and collects alpha * beta per class. Lengths are
// attributes (int[] input_lengths, target_lengths, as PyTorch's meta function needs them);
// targets come padded [B, max] or concatenated [sum(target_lengths)].
#include <algorithm>
#include <cmath>
#include <limits>

#include "lowering/arith.h"
#include "lowering/registry.h"
#include "lowering/resample.h"

namespace torchtpu::lowering {
namespace {

const ElementType kIndex = ElementType::kS64;
const double kInf = std::numeric_limits<double>::infinity();

// One call's lengths and extended targets.
struct Lattice {
  int64_t batch = 0, time = 0, classes = 0, states = 0;  // states: 2 * max target length + 1
  std::vector<int64_t> input, target;                     // each item's lengths
  int64_t longest = 0;                                    // the largest input length
  Value labels;  // l' [B, S] s64
  Value valid;   // [B, S] pred: s < 2 * target + 1
  Value skip;    // [B, S] pred: alpha may come from s - 2 (l'[s] != l'[s - 2])
  Value lp;      // [B, T, S]: log_probs at l'
};

Value per_item(FunctionBuilder& b, ElementType type, const std::vector<int64_t>& values,
               const Dims& dims) {
  std::vector<double> v(values.begin(), values.end());
  return broadcast_in_dim(b, constant_vector(b, type, v), dims, {0});
}

// x [B, S] moved `k` states up (k > 0: x[s - k] at s) or down (k < 0), `fill` where none.
Value shift(FunctionBuilder& b, const Value& x, int64_t k, double fill) {
  int64_t n = x.shape.dims[0], s = x.shape.dims[1], m = std::abs(k);
  if (m >= s) return full(b, x.shape.type, {n, s}, fill);
  Value pad = full(b, x.shape.type, {n, m}, fill);
  if (k > 0) return concatenate(b, {pad, slice(b, x, {0, 0}, {n, s - m})}, 1);
  return concatenate(b, {slice(b, x, {0, m}, {n, s}), pad}, 1);
}

// The targets' labels [B, L] (each item's first target[b], blank after them), in [0, C).
Value target_labels(FunctionBuilder& b, const Lattice& l, const Value& targets, int64_t blank) {
  int64_t n = l.batch, m = (l.states - 1) / 2;
  Value t = convert(b, targets, kIndex);
  if (targets.shape.rank() == 2) {
    t = slice(b, t, {0, 0}, {n, m});
  } else {
    std::vector<double> index;
    int64_t offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < m; ++k) {
        int64_t within = std::min(k, std::max<int64_t>(l.target[i] - 1, 0));
        index.push_back(static_cast<double>(offset + within));
      }
      offset += l.target[i];
    }
    Value rows = gather_rows(b, reshape(b, t, {t.shape.dims[0], 1}),
                             constant_vector(b, kIndex, index));
    t = reshape(b, rows, {n, m});
  }
  Value real = compare(b, iota(b, kIndex, {n, m}, 1), per_item(b, kIndex, l.target, {n, m}), "LT");
  t = select(b, real, t, full(b, kIndex, {n, m}, static_cast<double>(blank)));
  // Out-of-range labels read out of bounds on the CPU; here they are clamped.
  return minimum(b, maximum(b, t, full(b, kIndex, {n, m}, 0)),
                 full(b, kIndex, {n, m}, static_cast<double>(l.classes - 1)));
}

Lattice lattice(FunctionBuilder& b, const Value& log_probs, const Value& targets, const Attrs& a,
                int64_t states, ElementType c) {
  Lattice l;
  l.time = log_probs.shape.dims[0];
  l.batch = log_probs.shape.dims[1];
  l.classes = log_probs.shape.dims[2];
  l.states = states;
  l.input = a.ints("input_lengths");
  l.target = a.ints("target_lengths");
  for (int64_t i : l.input) l.longest = std::max(l.longest, i);
  int64_t n = l.batch, s = states, m = (s - 1) / 2, blank = a.i("blank");
  auto blanks = [&](const Dims& dims) { return full(b, kIndex, dims, static_cast<double>(blank)); };
  Value labels = reshape(b, target_labels(b, l, targets, blank), {n, m, 1});
  Value pairs = reshape(b, concatenate(b, {blanks({n, m, 1}), labels}, 2), {n, 2 * m});
  l.labels = concatenate(b, {pairs, blanks({n, 1})}, 1);
  Value state = iota(b, kIndex, {n, s}, 1);
  std::vector<int64_t> ends;
  for (int64_t t : l.target) ends.push_back(2 * t + 1);
  l.valid = compare(b, state, per_item(b, kIndex, ends, {n, s}), "LT");
  l.skip = b_and(b, compare(b, l.labels, shift(b, l.labels, 2, -1), "NE"),
                 compare(b, state, full(b, kIndex, {n, s}, 2), "GE"));
  // log_probs at the labels: rows b * C + l'[b, s] of [B * C, T].
  Value by_class = reshape(b, transpose(b, convert(b, log_probs, c), {1, 2, 0}),
                           {n * l.classes, l.time});
  Value item_rows = mul(b, iota(b, kIndex, {n, s}, 0),
                        full(b, kIndex, {n, s}, static_cast<double>(l.classes)));
  Value row = add(b, l.labels, item_rows);
  Value picked = gather_rows(b, by_class, reshape(b, row, {n * s}));
  l.lp = transpose(b, reshape(b, picked, {n, s, l.time}), {0, 2, 1});
  return l;
}

// Row t of x [B, T, K] (t a 0-d s64): [B, K].
Value at_time(FunctionBuilder& b, const Value& x, const Value& t) {
  int64_t n = x.shape.dims[0], k = x.shape.dims[2];
  Value zero = constant(b, kIndex, 0);
  Value row = b.op("stablehlo.dynamic_slice", {x, zero, t, zero}, Shape{x.shape.type, {n, 1, k}},
                   "slice_sizes = " + FunctionBuilder::i64_array({n, 1, k}));
  return reshape(b, row, {n, k});
}

Value put_time(FunctionBuilder& b, const Value& x, const Value& row, const Value& t) {
  int64_t n = x.shape.dims[0], k = x.shape.dims[2];
  Value zero = constant(b, kIndex, 0);
  return b.op("stablehlo.dynamic_update_slice", {x, reshape(b, row, {n, 1, k}), zero, t, zero},
              x.shape);
}

// log(sum of exp(terms)) as the CPU computes it: shifted by the largest term, by 0 if that is -inf.
Value log_add(FunctionBuilder& b, const std::vector<Value>& terms) {
  Value m = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) m = maximum(b, m, terms[i]);
  m = select(b, compare(b, m, like(b, m, -kInf), "EQ"), like(b, m, 0), m);
  Value sum = unary(b, "stablehlo.exponential", sub(b, terms[0], m));
  for (size_t i = 1; i < terms.size(); ++i) {
    sum = add(b, sum, unary(b, "stablehlo.exponential", sub(b, terms[i], m)));
  }
  return add(b, unary(b, "stablehlo.log", sum), m);
}

// Per item, whether the loop's time `t` is `relation` ("EQ", "LT") its input length less `less`.
Value at_length(FunctionBuilder& b, const Lattice& l, const Value& t, int64_t less,
                const std::string& relation, const Dims& dims) {
  std::vector<int64_t> last;
  for (int64_t i : l.input) last.push_back(i - less);
  return compare(b, broadcast_in_dim(b, t, dims, {}), per_item(b, kIndex, last, dims), relation);
}

Value neg_inf(FunctionBuilder& b, const Value& x) { return like(b, x, -kInf); }

// _ctc_loss(log_probs [T, B, C], targets, input_lengths, target_lengths, blank, zero_infinity)
//   -> (neg_log_likelihood [B], log_alpha [B, T, S])
Values ctc_loss(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Lattice l = lattice(b, v[0], v[1], a, out_shape(a, 1)[2], t);
  int64_t n = l.batch, s = l.states;
  Dims row{n, s};
  Value first = at_time(b, l.lp, constant(b, kIndex, 0));
  Value starts = b_and(b, l.valid,
                       compare(b, iota(b, kIndex, row, 1), full(b, kIndex, row, 2), "LT"));
  starts = b_and(b, starts, compare(b, per_item(b, kIndex, l.input, row), full(b, kIndex, row, 0),
                                    "GT"));
  Value alpha0 = select(b, starts, first, neg_inf(b, first));
  Value log_alpha = reshape(b, alpha0, {n, 1, s});
  if (l.time > 1) log_alpha = concatenate(b, {log_alpha, full(b, t, {n, l.time - 1, s}, -kInf)}, 1);
  Value last = alpha0;
  if (l.longest > 1) {
    std::vector<Value> out = while_loop(
        b, {constant(b, kIndex, 1), alpha0, log_alpha, alpha0},
        [&](FunctionBuilder& r, const std::vector<Value>& st) {
          Value end = constant(r, kIndex, static_cast<double>(l.longest));
          return std::vector<Value>{compare(r, st[0], end, "LT")};
        },
        [&](FunctionBuilder& r, const std::vector<Value>& st) {
          const Value &time = st[0], &prev = st[1];
          Value from_skip = select(r, l.skip, shift(r, prev, 2, -kInf), neg_inf(r, prev));
          Value next = add(r, log_add(r, {prev, shift(r, prev, 1, -kInf), from_skip}),
                           at_time(r, l.lp, time));
          Value live = b_and(r, l.valid, at_length(r, l, time, 0, "LT", row));
          next = select(r, live, next, neg_inf(r, next));
          Value ended = at_length(r, l, time, 1, "EQ", row);
          return std::vector<Value>{add(r, time, constant(r, kIndex, 1)), next,
                                    put_time(r, st[2], next, time), select(r, ended, next, st[3])};
        });
    log_alpha = out[2];
    last = out[3];
  }
  // The likelihood: the last two alphas (the last one alone for an empty target).
  auto pick = [&](int64_t back) {
    std::vector<int64_t> position;
    for (int64_t k : l.target) position.push_back(2 * k - back);
    Value at = compare(b, iota(b, kIndex, row, 1), per_item(b, kIndex, position, row), "EQ");
    return reduce_extreme(b, select(b, at, last, neg_inf(b, last)), {1}, true);
  };
  Value nll = unary(b, "stablehlo.negate", log_add(b, {pick(0), pick(1)}));
  std::vector<int64_t> nothing;
  for (int64_t i = 0; i < n; ++i) nothing.push_back(l.input[i] == 0 && l.target[i] == 0);
  Value empty = compare(b, per_item(b, kIndex, nothing, {n}), full(b, kIndex, {n}, 0), "NE");
  nll = select(b, empty, full(b, t, {n}, 0), nll);
  return {nll, log_alpha};
}

// log sum exp of `ab` [B, S] over the states of each class: [B, C]. `member` [B, S, C] says
// which class each (valid) state is.
Value log_sum_by_class(FunctionBuilder& b, const Value& ab, const Value& member) {
  const Dims& cls = member.shape.dims;
  Value spread = select(b, member, broadcast_in_dim(b, ab, cls, {0, 1}),
                        full(b, ab.shape.type, cls, -kInf));
  Value top = reduce_extreme(b, spread, {1}, true);
  top = select(b, compare(b, top, neg_inf(b, top), "EQ"), like(b, top, 0), top);
  Value e = unary(b, "stablehlo.exponential",
                  sub(b, spread, broadcast_in_dim(b, top, cls, {0, 2})));
  Value sum = reduce(b, e, {1}, constant(b, ab.shape.type, 0), "stablehlo.add");
  return add(b, unary(b, "stablehlo.log", sum), top);
}

// The log of the sum of alpha * beta per class, [B, T, C]: beta from the last frame back, each
// item starting at its own last frame (from the last two states).
Value collect_alpha_beta(FunctionBuilder& b, const Lattice& l, const Value& alpha) {
  ElementType t = alpha.shape.type;
  int64_t n = l.batch, s = l.states;
  Dims row{n, s}, cls{n, s, l.classes};
  Value collected = full(b, t, {n, l.time, l.classes}, -kInf);
  if (l.longest == 0) return collected;
  std::vector<int64_t> second_last;
  for (int64_t k : l.target) second_last.push_back(2 * k - 1);
  Value ends = b_and(b, l.valid, compare(b, iota(b, kIndex, row, 1),
                                         per_item(b, kIndex, second_last, row), "GE"));
  // beta may come from s + 2 where alpha may come from s to s + 2.
  Value skip = compare(b, shift(b, convert(b, l.skip, kIndex), -2, 0), full(b, kIndex, row, 0),
                       "NE");
  Value member = b_and(b, compare(b, broadcast_in_dim(b, l.labels, cls, {0, 1}),
                                  iota(b, kIndex, cls, 2), "EQ"),
                       broadcast_in_dim(b, l.valid, cls, {0, 1}));
  Value first = constant(b, kIndex, static_cast<double>(l.longest - 1));
  std::vector<Value> out = while_loop(
      b, {first, full(b, t, row, -kInf), collected},
      [](FunctionBuilder& r, const std::vector<Value>& st) {
        return std::vector<Value>{compare(r, st[0], constant(r, kIndex, 0), "GE")};
      },
      [&](FunctionBuilder& r, const std::vector<Value>& st) {
        const Value &time = st[0], &next = st[1];
        Value lp = at_time(r, l.lp, time);
        Value from_skip = select(r, skip, shift(r, next, -2, -kInf), neg_inf(r, next));
        Value inner = add(r, log_add(r, {next, shift(r, next, -1, -kInf), from_skip}), lp);
        Value last = at_length(r, l, time, 1, "EQ", row);
        Value before = b_and(r, l.valid, at_length(r, l, time, 1, "LT", row));
        Value beta = select(r, last, select(r, ends, lp, neg_inf(r, lp)),
                            select(r, before, inner, neg_inf(r, inner)));
        Value ab = add(r, at_time(r, alpha, time), beta);
        ab = select(r, b_and(r, l.valid, b_or(r, last, before)), ab, neg_inf(r, ab));
        return std::vector<Value>{sub(r, time, constant(r, kIndex, 1)), beta,
                                  put_time(r, st[2], log_sum_by_class(r, ab, member), time)};
      });
  return out[2];
}

// _ctc_loss_backward(grad [B], log_probs, targets, input_lengths, target_lengths,
//                    neg_log_likelihood [B], log_alpha [B, T, S], blank, zero_infinity)
//   -> the gradient of log_probs [T, B, C]: (exp(lp) - exp(collected + nll - lp)) * grad
Values ctc_loss_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Lattice l = lattice(b, v[1], v[2], a, v[4].shape.dims[2], t);
  Dims out{l.batch, l.time, l.classes};
  Value collected = collect_alpha_beta(b, l, convert(b, v[4], t));
  Value lp = transpose(b, convert(b, v[1], t), {1, 0, 2});
  Value nll = broadcast_in_dim(b, convert(b, v[3], t), out, {0});
  Value g = broadcast_in_dim(b, convert(b, v[0], t), out, {0});
  Value share = unary(b, "stablehlo.exponential", sub(b, add(b, collected, nll), lp));
  Value grad = mul(b, sub(b, unary(b, "stablehlo.exponential", lp), share), g);
  Value live = compare(b, iota(b, kIndex, out, 1), per_item(b, kIndex, l.input, out), "LT");
  if (a.i("zero_infinity") != 0) live = b_and(b, live, compare(b, nll, like(b, nll, kInf), "NE"));
  grad = select(b, live, grad, like(b, grad, 0));
  return {transpose(b, grad, {1, 0, 2})};
}

}  // namespace

void register_ctc_loss_rules(Registry& r) {
  r.add("ctc_loss", ctc_loss, {"_ctc_loss", "_ctc_loss.out"});
  r.add("ctc_loss_backward", ctc_loss_backward, {"_ctc_loss_backward", "_ctc_loss_backward.out"});
}

}  // namespace torchtpu::lowering
