// Num: a value with arithmetic operators, so that lowering rules write formulas as formulas
// (`2.0 * x + y` emits the HLO for it). Operands share one shape and type.
#pragma once

#include "lowering/helpers.h"

namespace torchtpu::lowering {

struct Num {
  FunctionBuilder* b;
  Value v;
  Num k(double c) const { return {b, full(*b, v.shape.type, v.shape.dims, c)}; }
  Num op(const char* name) const { return {b, unary(*b, name, v)}; }
  Num in(FunctionBuilder& region) const { return {&region, v}; }  // for use inside a region
};
inline Num bin(const char* name, const Num& x, const Num& y) {
  return {x.b, binary(*x.b, name, x.v, y.v)};
}
#define TORCHTPU_NUM_OPERATOR(sym, name)                                              \
  inline Num operator sym(const Num& x, const Num& y) { return bin(name, x, y); }     \
  inline Num operator sym(const Num& x, double c) { return bin(name, x, x.k(c)); }    \
  inline Num operator sym(double c, const Num& y) { return bin(name, y.k(c), y); }
TORCHTPU_NUM_OPERATOR(+, "stablehlo.add")
TORCHTPU_NUM_OPERATOR(-, "stablehlo.subtract")
TORCHTPU_NUM_OPERATOR(*, "stablehlo.multiply")
TORCHTPU_NUM_OPERATOR(/, "stablehlo.divide")
#undef TORCHTPU_NUM_OPERATOR
inline Num operator-(const Num& x) { return x.op("stablehlo.negate"); }
inline Num exp(const Num& x) { return x.op("stablehlo.exponential"); }
inline Num log(const Num& x) { return x.op("stablehlo.log"); }
inline Num log1p(const Num& x) { return x.op("stablehlo.log_plus_one"); }
inline Num floor(const Num& x) { return x.op("stablehlo.floor"); }
inline Num sqrt(const Num& x) { return x.op("stablehlo.sqrt"); }
inline Num abs(const Num& x) { return x.op("stablehlo.abs"); }
inline Num sin(const Num& x) { return x.op("stablehlo.sine"); }
inline Num cos(const Num& x) { return x.op("stablehlo.cosine"); }
inline Value cmp(const Num& x, const char* direction, double c) {
  return compare(*x.b, x.v, x.k(c).v, direction);
}
inline Value cmp(const Num& x, const char* direction, const Num& y) {
  return compare(*x.b, x.v, y.v, direction);
}
inline Num where(const Value& pred, const Num& t, const Num& f) {
  return {t.b, select(*t.b, pred, t.v, f.v)};
}
inline Num where(const Value& pred, double t, const Num& f) { return where(pred, f.k(t), f); }
inline Num where(const Value& pred, const Num& t, double f) { return where(pred, t, t.k(f)); }
inline Value both(const Num& x, const Value& p, const Value& q) { return b_and(*x.b, p, q); }
inline Value either(const Num& x, const Value& p, const Value& q) { return b_or(*x.b, p, q); }

}  // namespace torchtpu::lowering
