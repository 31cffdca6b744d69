// Device-side asserts, CUDA's model for checks a device program cannot raise by itself (an index
// out of range): the program folds the first failed check into the device's assert flag, a
// persistent storage, and the engine reads the flag whenever it next waits on that device (a
// read to the host, synchronize, Debug's wait after each op), raising the check's error then.
// So no op waits for its own check.
#pragma once

#include <cstdint>
#include <string>

#include "engine/program.h"

namespace torchtpu::engine {

struct AssertCheck {
  bool index_error = true;  // raised as IndexError (else RuntimeError)
  std::string message;      // "{}" stands for the value that failed the check
};

// The id (> 0) of a check; the same check, the same id.
int64_t assert_id(const AssertCheck& check);

// Records in `p` that every element of `values` (an integer value of `p`) must lie in [low, high)
// (or equal `ignore`, when given), failing check `id` otherwise.
void record_range_assert(Program& p, int values, int64_t low, int64_t high, const int64_t* ignore,
                         int64_t id);

// Reads the device's flag if a program wrote it since the last read; when a check failed, resets
// the flag and raises that check's error. The device's pending work must have run.
void raise_failed_asserts(int device);

// How a failed check is raised; the PyTorch glue installs one that raises PyTorch's error types.
// The default throws std::out_of_range or std::runtime_error.
using AssertRaiser = void (*)(bool index_error, const std::string& message);
void set_assert_raiser(AssertRaiser raiser);

}  // namespace torchtpu::engine
