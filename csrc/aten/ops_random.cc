// Random ops: each records one op that reads the generator's device state and writes the next
// one with the numbers, so draws are asynchronous, deferrable and reproducible from
// torch.manual_seed.
#include <ATen/core/DistributionsHelper.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/where.h>
#include <c10/util/Exception.h>
#include <c10/util/TypeIndex.h>
#include <c10/util/complex.h>

#include <functional>
#include <limits>
#include <mutex>

#include "aten/TpuGenerator.h"
#include "aten/ops.h"
#include "aten/tensor_view.h"
#include "engine/eager.h"

namespace torchtpu::aten {
namespace {

TpuGeneratorImpl* generator_for(const at::Tensor& t, const std::optional<at::Generator>& gen) {
  return at::get_generator_or_default<TpuGeneratorImpl>(gen, default_generator(t.device().index()));
}

// Records `rule` on (state, operands...), writing its outputs into `outputs` and the new state
// back.
void draw(const std::string& rule, const std::optional<at::Generator>& gen,
          const std::vector<at::Tensor>& outputs,
          const std::function<std::vector<int>(engine::Program&)>& operands) {
  const at::Tensor& first = outputs[0];
  TpuGeneratorImpl* g = generator_for(first, gen);
  std::lock_guard<std::mutex> lock(g->mutex_);
  engine::TensorView state = g->device_state();
  engine::Recording recording(first.device().index());
  engine::Program& p = recording.program();
  std::vector<int> inputs{p.read(state)};
  for (int v : operands(p)) inputs.push_back(v);
  lowering::Attrs attrs;
  for (size_t k = 0; k < outputs.size(); ++k) {
    std::string suffix = k == 0 ? "" : std::to_string(k);
    attrs.set_type("type" + suffix, element_type(outputs[k].scalar_type()));
    attrs.set("shape" + suffix,
              std::vector<int64_t>(outputs[k].sizes().begin(), outputs[k].sizes().end()));
  }
  int result = p.apply(rule, std::move(inputs), std::move(attrs),
                       static_cast<int>(outputs.size()) + 1);
  for (size_t k = 0; k < outputs.size(); ++k) p.write(view_of(outputs[k]), result + k);
  p.write(state, result + static_cast<int>(outputs.size()));
  recording.finish();
  g->advance();
}

int f64(engine::Program& p, double v) { return scalar_argument(p, v, at::kDouble); }

// Fills `self` by `rule` with the distribution's parameters `params`.
at::Tensor& fill_by(at::Tensor& self, const std::string& rule, std::vector<double> params,
                    const std::optional<at::Generator>& gen) {
  if (self.numel() == 0) return self;
  draw(rule, gen, {self}, [&](engine::Program& p) {
    std::vector<int> operands;
    for (double x : params) operands.push_back(f64(p, x));
    return operands;
  });
  return self;
}

// Floating and, as on the CPU, complex tensors (both parts drawn); the CPU's error otherwise.
void check_floating(const at::Tensor& self, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()), "\"",
      kernel, "\" not implemented for '", c10::toString(self.scalar_type()), "'");
}

}  // namespace

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  check_floating(self, "check_uniform_bounds");
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  return fill_by(self, "rng_uniform", {from, to}, gen);
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  check_floating(self, "normal_kernel_tpu");
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  return fill_by(self, "rng_normal", {mean, std}, gen);
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  return fill_by(self, "rng_bernoulli", {p}, gen);
}

at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p,
                             std::optional<at::Generator> gen) {
  if (self.numel() == 0) return self;
  if (is_cpu_scalar(p)) return bernoulli_float(self, p.item<double>(), gen);
  common_device({&self, &p});
  draw("rng_bernoulli", gen, {self}, [&](engine::Program& prog) {
    return std::vector<int>{prog.read(view_of(p.expand(self.sizes())))};
  });
  return self;
}

at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  return bernoulli_tensor(out, self, gen);
}

at::Tensor& random_from_to(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                           std::optional<at::Generator> gen) {
  // Without `to`, up to the largest value of the dtype (its exactly representable integers for
  // floating types), as PyTorch does.
  int64_t end;
  if (to) {
    end = *to;
  } else if (at::isFloatingType(self.scalar_type())) {
    int digits = self.scalar_type() == at::kDouble  ? std::numeric_limits<double>::digits
                 : self.scalar_type() == at::kFloat ? std::numeric_limits<float>::digits
                 : self.scalar_type() == at::kHalf  ? 11
                                                    : 8;
    end = (int64_t{1} << digits) + 1;
  } else if (self.scalar_type() == at::kBool) {
    end = 2;
  } else {
    switch (self.scalar_type()) {
      case at::kByte: end = 256; break;
      case at::kChar: end = 128; break;
      case at::kShort: end = 32768; break;
      case at::kInt: end = int64_t{1} << 31; break;
      default: end = std::numeric_limits<int64_t>::max(); break;
    }
  }
  TORCH_CHECK(from < end, "random_ expects 'from' to be less than 'to', but got from=", from,
              " >= to=", end);
  if (self.numel() == 0) return self;
  draw("rng_integers", gen, {self}, [&](engine::Program& p) {
    return std::vector<int>{scalar_argument(p, from, at::kLong),
                            scalar_argument(p, end, at::kLong)};
  });
  return self;
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from_to(self, 0, to, gen);
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  return random_from_to(self, 0, std::nullopt, gen);
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  at::Tensor mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
  if (!train.value_or(true) || p == 0) {
    mask.fill_(true);
    return {input.clone(), mask};
  }
  at::Tensor out = at::empty(input.sizes(), input.options());
  if (p == 1) {
    mask.fill_(false);
    return {out.zero_(), mask};
  }
  if (input.numel() == 0) return {out, mask};
  draw("rng_dropout", std::nullopt, {out, mask}, [&](engine::Program& prog) {
    return std::vector<int>{prog.read(view_of(input)), f64(prog, p)};
  });
  return {out, mask};
}

namespace {

// The C++ name of a non-floating scalar type ("long int"), as the CPU's Cauchy check spells it.
std::string cpp_type_name(at::ScalarType type) {
  using c10::util::get_fully_qualified_type_name;
  switch (type) {
    case at::kBool: return std::string(get_fully_qualified_type_name<bool>());
    case at::kByte: return std::string(get_fully_qualified_type_name<uint8_t>());
    case at::kChar: return std::string(get_fully_qualified_type_name<int8_t>());
    case at::kShort: return std::string(get_fully_qualified_type_name<int16_t>());
    case at::kInt: return std::string(get_fully_qualified_type_name<int32_t>());
    case at::kLong: return std::string(get_fully_qualified_type_name<int64_t>());
    case at::kComplexFloat:
      return std::string(get_fully_qualified_type_name<c10::complex<float>>());
    case at::kComplexDouble:
      return std::string(get_fully_qualified_type_name<c10::complex<double>>());
    default: return c10::toString(type);
  }
}

// The CPU's check of a continuous law's dtype, with its message.
void check_continuous(const at::Tensor& self, const char* law, const std::string& type_name) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), law,
              " distribution is a continuous probability distribution. dtype must be a floating "
              "point but you specified ", type_name);
}

}  // namespace

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  check_continuous(self, "Exponential", c10::toString(self.scalar_type()));
  return fill_by(self, "rng_exponential", {lambd}, gen);
}

at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  TORCH_CHECK_NOT_IMPLEMENTED(
      self.scalar_type() != at::kBool && !at::isComplexType(self.scalar_type()),
      "\"geometric_tpu\" not implemented for '", c10::toString(self.scalar_type()), "'");
  return fill_by(self, "rng_geometric", {p}, gen);
}

at::Tensor& log_normal_(at::Tensor& self, double mean, double std,
                        std::optional<at::Generator> gen) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"log_normal_tpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  return fill_by(self, "rng_log_normal", {mean, std}, gen);
}

at::Tensor& cauchy_(at::Tensor& self, double median, double sigma,
                    std::optional<at::Generator> gen) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  check_continuous(self, "Cauchy", cpp_type_name(self.scalar_type()));
  return fill_by(self, "rng_cauchy", {median, sigma}, gen);
}

namespace {

// normal() with a tensor mean or std: standard normal values times std plus mean, as the CPU
// computes them. A negative or NaN std raises the CPU's error at the next wait (a device-side
// check).
void check_std(const at::Tensor& std) {
  TORCH_CHECK(!std.is_complex(), "normal expects standard deviation to be non-complex");
  if (std.numel() == 0) return;
  assert_zero("aten::normal",
              {{std.ge(0).logical_not(), "normal expects all elements of std >= 0.0"}});
}

void check_std(double std) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
}

}  // namespace

at::Tensor& normal_tensor_float_out(const at::Tensor& mean, double std,
                                    std::optional<at::Generator> gen, at::Tensor& out) {
  check_std(std);
  at::native::resize_output(out, mean.sizes());
  return normal_(out, 0, std, gen).add_(mean);
}

// The functional forms: the out= forms into an empty tensor, which they check and size.
at::Tensor normal_tensor_float(const at::Tensor& mean, double std,
                               std::optional<at::Generator> gen) {
  at::Tensor out = at::empty({0}, mean.options());
  return normal_tensor_float_out(mean, std, gen, out);
}

at::Tensor& normal_float_tensor_out(double mean, const at::Tensor& std,
                                    std::optional<at::Generator> gen, at::Tensor& out) {
  check_std(std);
  at::native::resize_output(out, std.sizes());
  return normal_(out, 0, 1, gen).mul_(std).add_(mean);
}

at::Tensor normal_float_tensor(double mean, const at::Tensor& std,
                               std::optional<at::Generator> gen) {
  at::Tensor out = at::empty({0}, std.options());
  return normal_float_tensor_out(mean, std, gen, out);
}

at::Tensor& normal_tensor_tensor_out(const at::Tensor& mean, const at::Tensor& std,
                                     std::optional<at::Generator> gen, at::Tensor& out) {
  check_std(std);
  at::native::resize_output(out, at::infer_size(mean.sizes(), std.sizes()));
  return normal_(out, 0, 1, gen).mul_(std).add_(mean);
}

at::Tensor normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std,
                                std::optional<at::Generator> gen) {
  at::Tensor out = at::empty({0}, mean.options());
  return normal_tensor_tensor_out(mean, std, gen, out);
}

at::Tensor& bernoulli_out(const at::Tensor& self, std::optional<at::Generator> gen,
                          at::Tensor& out) {
  out.resize_(self.sizes());  // as the CPU: a resize, never a warning
  return bernoulli_tensor(out, self, gen);
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t n_sample, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(out.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(out.scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ",
              out.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  int64_t categories = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= categories,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(categories <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  if (self.dim() == 1) {
    out.resize_({n_sample});
  } else {
    out.resize_({self.size(0), n_sample});
  }
  if (out.numel() == 0) return out;
  at::Tensor p = (self.dim() == 1 ? self.unsqueeze(0) : self)
                     .to(self.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
  at::Tensor total = p.sum(-1, true);
  at::Tensor drawn;
  if (!replacement || n_sample == 1) {
    assert_zero("aten::multinomial",
                {{p.ge(0).logical_and(p.isfinite()).logical_not(),
                  "probability tensor contains either `inf`, `nan` or element < 0"},
                 {total.eq(0), "invalid multinomial distribution (sum of probabilities <= 0)"}});
    // The n largest p / q for q ~ Exp(1) (the Gumbel-max trick, exponentiated) are a draw
    // without replacement.
    at::Tensor q = at::empty(p.sizes(), p.options());
    at::Tensor score = p.div(exponential_(q, 1, gen));
    drawn = n_sample == 1 ? score.argmax(-1, true) : std::get<1>(score.topk(n_sample));
  } else {
    assert_zero(
        "aten::multinomial",
        {{p.ge(0).logical_not(), "invalid multinomial distribution (encountering probability "
                                 "entry < 0)"},
         {p.isinf(), "invalid multinomial distribution (encountering probability entry = "
                     "infinity or NaN)"},
         {total.le(0), "invalid multinomial distribution (sum of probabilities <= 0)"}});
    // The inverse of the running sums at u * total: a category of probability 0 covers nothing.
    at::Tensor sums = p.cumsum(-1);
    at::Tensor u = at::empty({p.size(0), n_sample}, p.options());
    drawn = at::searchsorted(sums, uniform_(u, 0, 1, gen).mul_(total), false, true);
    // u * total rounded up to the total: the last category of probability above 0.
    at::Tensor last = p.gt(0).flip(-1).to(at::kInt).argmax(-1, true).neg().add(categories - 1);
    drawn = at::minimum(drawn, last);
  }
  return out.copy_(self.dim() == 1 ? drawn.squeeze(0) : drawn);
}

at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> gen) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return multinomial_out(self, n_sample, replacement, gen, out);
}

// A stable sort of random 63-bit keys.
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  at::ScalarType type = out.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(type != at::kBool && !at::isComplexType(type),
                              "\"randperm\" not implemented for '", c10::toString(type), "'");
  // The CPU's checks that the largest value fits the dtype, exactly in a floating one.
  at::scalar_tensor(n > 0 ? n - 1 : n, out.options().device(at::kCPU));
  TORCH_CHECK(type != at::kHalf || n <= (int64_t{1} << 11) + 1,
              "n cannot be greater than 2049 for Half type.");
  TORCH_CHECK(type != at::kFloat || n <= (int64_t{1} << 24) + 1,
              "n cannot be greater than 2^24+1 for Float type.");
  TORCH_CHECK(type != at::kDouble || n <= (int64_t{1} << 53) + 1,
              "n cannot be greater than 2^53+1 for Double type.");
  out.resize_({n});
  if (n == 0) return out;
  at::Tensor keys = at::empty({n}, out.options().dtype(at::kLong));
  return out.copy_(std::get<1>(random_(keys, gen).sort(true, 0, false)));
}

// In training, each value <= 0 times a draw from U(lower, upper), the draws kept in `noise`
// (1 for the others); otherwise leaky_relu with the middle slope.
at::Tensor& rrelu_with_noise_out(const at::Tensor& self, at::Tensor& noise,
                                 const at::Scalar& lower, const at::Scalar& upper, bool training,
                                 std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"rrelu_with_noise_out_tpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  double low = lower.toDouble(), high = upper.toDouble();
  TORCH_CHECK(low <= high, "Lower bound should be less than or equal to the upper bound");
  if (!training) return at::leaky_relu_out(out, self, (low + high) / 2);
  at::Tensor slopes = at::empty(self.sizes(), self.options());
  uniform_(slopes, low, high, gen);
  noise.copy_(at::where(self.le(0), slopes, at::ones_like(slopes)));
  return at::mul_out(out, self, noise);
}

at::Tensor rrelu_with_noise(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                            const at::Scalar& upper, bool training,
                            std::optional<at::Generator> gen) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  return rrelu_with_noise_out(self, noise, lower, upper, training, gen, out);
}

at::Tensor& rrelu_with_noise_(at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                              const at::Scalar& upper, bool training,
                              std::optional<at::Generator> gen) {
  return rrelu_with_noise_out(self, noise, lower, upper, training, gen, self);
}

namespace {

// Fills a new tensor like `param` by `rule` from the values of `param` (one per element).
at::Tensor draw_from(const at::Tensor& param, const std::string& rule,
                     const std::optional<at::Generator>& gen) {
  at::Tensor out = at::empty(param.sizes(), param.options());
  if (out.numel() == 0) return out;
  draw(rule, gen, {out}, [&](engine::Program& p) {
    return std::vector<int>{p.read(view_of(param))};
  });
  return out;
}

// Floating types, as on CUDA (the CPU's gamma and Dirichlet take float32 and float64 only).
void check_floating_param(const at::Tensor& self, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"", kernel,
                              "\" not implemented for '", c10::toString(self.scalar_type()), "'");
}

}  // namespace

at::Tensor standard_gamma(const at::Tensor& self, std::optional<at::Generator> gen) {
  check_floating_param(self, "gamma_tpu");
  return draw_from(self, "rng_gamma", gen);
}

at::Tensor sample_dirichlet(const at::Tensor& self, std::optional<at::Generator> gen) {
  check_floating_param(self, "dirichlet");
  if (self.dim() == 0) return draw_from(self.reshape({1}), "rng_dirichlet", gen).reshape({});
  return draw_from(self, "rng_dirichlet", gen);
}

at::Tensor poisson(const at::Tensor& self, std::optional<at::Generator> gen) {
  check_floating_param(self, "poisson_tpu");
  if (self.numel() != 0) {
    assert_zero("aten::poisson", {{self.ge(0).logical_not(),
                                   "invalid Poisson rate, expected rate to be non-negative"}});
  }
  return draw_from(self, "rng_poisson", gen);
}

at::Tensor binomial(const at::Tensor& count, const at::Tensor& prob,
                    std::optional<at::Generator> gen) {
  TORCH_CHECK_VALUE(at::isFloatingType(count.scalar_type()),
                    "binomial only supports floating-point dtypes for count, got: ",
                    count.scalar_type());
  TORCH_CHECK(prob.scalar_type() == count.scalar_type(), "Found dtype ", prob.scalar_type(),
              " but expected ", count.scalar_type());
  common_device({&count, &prob});
  std::vector<int64_t> shape = at::infer_size(count.sizes(), prob.sizes());
  at::Tensor out = at::empty(shape, count.options());
  if (out.numel() == 0) return out;
  draw("rng_binomial", gen, {out}, [&](engine::Program& p) {
    return std::vector<int>{p.read(view_of(count.expand(shape))),
                            p.read(view_of(prob.expand(shape)))};
  });
  return out;
}

// Output shapes for FakeTensor, which otherwise runs an op without a meta kernel on zeros on the
// device while torch.compile traces: that drew from the tpu generator, and a compiled call's first
// draws differed from eager ones after the same seed.
at::Tensor sample_dirichlet_meta(const at::Tensor& self, std::optional<at::Generator> /*gen*/) {
  return at::empty(self.sizes(), self.options());
}

at::Tensor binomial_meta(const at::Tensor& count, const at::Tensor& prob,
                         std::optional<at::Generator> /*gen*/) {
  return at::empty(at::infer_size(count.sizes(), prob.sizes()), count.options());
}

}  // namespace torchtpu::aten
