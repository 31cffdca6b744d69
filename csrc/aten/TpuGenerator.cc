#include "aten/TpuGenerator.h"

#include <ATen/core/TensorBase.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "aten/TpuGuard.h"
#include "engine/eager.h"
#include "engine/runtime.h"

namespace torchtpu::aten {
namespace {

constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default_rng_seed_val
constexpr size_t kStateBytes = 2 * sizeof(uint64_t);

}  // namespace

TpuGeneratorImpl::TpuGeneratorImpl(c10::DeviceIndex device)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(kDefaultSeed),
      state_(std::make_unique<engine::StorageHandle>(device, 2 * sizeof(uint64_t))) {
  state_->set_persistent();
}

void TpuGeneratorImpl::settle_state() const {
  if (state_->pending() != nullptr) engine::flush(device().index());
}

void TpuGeneratorImpl::upload_state(const uint64_t words[2]) const {
  settle_state();
  state_->set_buffer(
      engine::Runtime::get().upload(words, hlo::ElementType::kU64, {2}, device().index()),
      hlo::ElementType::kU64);
}

void TpuGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
  seeded_ = false;
  // A replayed compiled program reads the state storage directly: set it now (before the
  // runtime starts no program can exist, and the first draw sets it).
  if (engine::Runtime::started()) device_state();
}

engine::TensorView TpuGeneratorImpl::device_state() {
  if (!seeded_) {
    uint64_t words[2] = {seed_, 0};
    upload_state(words);
    seeded_ = true;
  }
  return engine::TensorView{state_.get(), hlo::ElementType::kU64, {2}, {1}, 0};
}

uint64_t TpuGeneratorImpl::seed() {
  uint64_t s = c10::detail::getNonDeterministicRandom(true);
  set_current_seed(s);
  return s;
}

void TpuGeneratorImpl::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK_TYPE(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.device().is_cpu(),
                   "RNG state must be a torch.ByteTensor");
  TORCH_CHECK(state.numel() == static_cast<int64_t>(kStateBytes),
              "RNG state is wrong size: expected ", kStateBytes, " bytes, got ", state.numel());
  uint64_t values[2];
  std::memcpy(values, state.data(), kStateBytes);
  seed_ = values[0];
  upload_state(values);
  seeded_ = true;
}

c10::intrusive_ptr<c10::TensorImpl> TpuGeneratorImpl::get_state() const {
  engine::refuse_in_forked_child();
  at::Tensor state = at::empty({static_cast<int64_t>(kStateBytes)},
                               at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  uint64_t values[2] = {seed_, 0};
  if (seeded_) {
    settle_state();
    state_->buffer()->to_host(values, kStateBytes);
  }
  std::memcpy(state.data_ptr(), values, kStateBytes);
  return state.getIntrusivePtr();
}

TpuGeneratorImpl* TpuGeneratorImpl::clone_impl() const {
  auto* g = new TpuGeneratorImpl(device().index());
  g->seed_ = seed_;
  g->offset_ = offset_;
  if (seeded_) {
    settle_state();
    g->state_->set_buffer(state_->buffer(), hlo::ElementType::kU64);  // buffers are immutable
    g->seeded_ = true;
  }
  return g;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::deque<at::Generator> generators;  // deque: references stay valid as it grows
  int index = device < 0 ? current_device() : device;
  check_device_index(index);
  std::lock_guard<std::mutex> lock(mutex);
  while (static_cast<int>(generators.size()) <= index) {
    generators.push_back(at::make_generator<TpuGeneratorImpl>(
        static_cast<c10::DeviceIndex>(generators.size())));
  }
  return generators[index];
}

}  // namespace torchtpu::aten
