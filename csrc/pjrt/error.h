// PJRT errors as C++ exceptions: every PJRT_Error becomes a pjrt::Error carrying its code.
#pragma once

#include <stdexcept>
#include <string>

namespace torchtpu::pjrt {

// Mirrors PJRT_Error_Code (absl status codes) so callers need not include the C header.
enum class ErrorCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kNotFound = 5,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace torchtpu::pjrt
