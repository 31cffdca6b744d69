// The "tpu" random generator. Its state lives on the device: a ThreeFry state (ui64[2]: the key,
// which is the seed, and a counter that every draw advances) in a persistent storage that every random op reads and replaces in the same program, so random
// numbers are drawn without a host round trip, deferred and compiled programs draw them in place,
// and torch.manual_seed reproduces a run.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <memory>

#include "engine/program.h"

namespace torchtpu::aten {

class TpuGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit TpuGeneratorImpl(c10::DeviceIndex device);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  // The state is a 16-byte CPU uint8 tensor laid out as CUDA's Philox state, (seed, offset): the
  // ThreeFry key and counter. A counter-based state is what DTensor's RNG tracker moves per shard.
  void set_state(const c10::TensorImpl& state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // The device state as a u64[2] view ([seed, 0] until the first draw); a draw writes its
  // successor through it and calls advance().
  engine::TensorView device_state();
  void advance() { ++offset_; }

 private:
  TpuGeneratorImpl* clone_impl() const override;
  // Runs the pending draw, if any, that replaces the device state.
  void settle_state() const;
  // Sets the device state (after running any pending draw that would overwrite it).
  void upload_state(const uint64_t words[2]) const;

  uint64_t seed_;
  uint64_t offset_ = 0;  // draws so far
  std::unique_ptr<engine::StorageHandle> state_;
  bool seeded_ = false;  // state_ holds the state of seed_
};

const at::Generator& default_generator(c10::DeviceIndex device);

}  // namespace torchtpu::aten
