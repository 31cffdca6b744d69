// A stand-in PJRT plugin that reports an API version newer than the header's, to test how
// torchtpu refuses or explains it. FAKE_MAJOR / FAKE_MINOR come from CMake.
#include <cstring>
#include <string>

#include "pjrt_c_api.h"

struct PJRT_Error {
  std::string message;
  PJRT_Error_Code code;
};

namespace {

void error_destroy(PJRT_Error_Destroy_Args* args) { delete args->error; }

void error_message(PJRT_Error_Message_Args* args) {
  args->message = args->error->message.data();
  args->message_size = args->error->message.size();
}

PJRT_Error* error_code(PJRT_Error_GetCode_Args* args) {
  args->code = args->error->code;
  return nullptr;
}

PJRT_Error* initialize(PJRT_Plugin_Initialize_Args*) { return nullptr; }

// What a newer plugin answers when our struct is smaller than its own definition.
PJRT_Error* client_create(PJRT_Client_Create_Args* args) {
  return new PJRT_Error{"Unexpected PJRT_Client_Create_Args size: expected " +
                            std::to_string(args->struct_size + 8) + ", got " +
                            std::to_string(args->struct_size) +
                            ". The plugin is likely built with a later version than the framework.",
                        PJRT_Error_Code_INVALID_ARGUMENT};
}

PJRT_Api make_api() {
  PJRT_Api api;
  std::memset(&api, 0, sizeof(api));
  api.struct_size = PJRT_Api_STRUCT_SIZE;
  api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  api.pjrt_api_version.major_version = FAKE_MAJOR;
  api.pjrt_api_version.minor_version = FAKE_MINOR;
  api.PJRT_Error_Destroy = error_destroy;
  api.PJRT_Error_Message = error_message;
  api.PJRT_Error_GetCode = error_code;
  api.PJRT_Plugin_Initialize = initialize;
  api.PJRT_Client_Create = client_create;
  return api;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  static PJRT_Api api = make_api();
  return &api;
}
