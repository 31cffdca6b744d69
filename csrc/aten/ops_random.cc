// Random ops: each records one op that reads the generator's device state and writes the next
// one with the numbers, so draws are asynchronous, deferrable and reproducible from
// torch.manual_seed.
#include <ATen/core/DistributionsHelper.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

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
  if (self.numel() == 0) return self;
  draw("rng_uniform", gen, {self}, [&](engine::Program& p) {
    return std::vector<int>{f64(p, from), f64(p, to)};
  });
  return self;
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  check_floating(self, "normal_kernel_tpu");
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.numel() == 0) return self;
  draw("rng_normal", gen, {self}, [&](engine::Program& p) {
    return std::vector<int>{f64(p, mean), f64(p, std)};
  });
  return self;
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (self.numel() == 0) return self;
  draw("rng_bernoulli", gen, {self}, [&](engine::Program& prog) {
    return std::vector<int>{f64(prog, p)};
  });
  return self;
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

}  // namespace torchtpu::aten
