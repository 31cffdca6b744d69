// The device in the PyTorch profiler (ProfilerActivity.PrivateUse1): a Kineto activity profiler,
// registered through PyTorch's PrivateUse1ProfilerRegistry, whose session records the engine's
// intervals (engine/trace.h) and hands them to Kineto as device activities linked to the ops that
// launched them, so key_averages() shows each op's device time and the Chrome trace has a track
// per device. Device time is execution timing: from a program's launch (or the end of the
// program before it on the device) to PJRT's completion event; the plugin gives no device-side
// timestamps.
//
// Only Kineto's and this file's headers: the registry header is guarded by USE_KINETO, which
// PyTorch's wheels are built with (libtorch_cpu exports the registry and libkineto).
#ifndef USE_KINETO
#define USE_KINETO 1
#endif
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "engine/trace.h"

namespace torchtpu::aten {
namespace {

namespace trace = engine::trace;
using libkineto::ActivityType;

// Device tracks: one process per device (pid = device index, as Kineto numbers GPUs), with
// programs on one thread and copies on another.
constexpr int32_t kProgramsTrack = 0;
constexpr int32_t kCopiesTrack = 1;

std::string name_of(const trace::Interval& i, const libkineto::ITraceActivity* op) {
  if (!i.name.empty()) return i.name;
  std::string amount = std::to_string(i.amount);
  switch (i.kind) {
    case trace::Kind::kExecute:
      return op != nullptr ? "program " + op->name() : "program";
    case trace::Kind::kCopyToDevice:
      return "copy host to device";
    case trace::Kind::kCopyToHost:
      return "copy device to host";
    case trace::Kind::kCompile:
      return "compile";
    case trace::Kind::kFlush:
      return "DeferAndFuse flush (" + amount + " nodes)";
  }
  return "?";
}

ActivityType type_of(trace::Kind kind) {
  switch (kind) {
    case trace::Kind::kExecute:
      return ActivityType::CONCURRENT_KERNEL;
    case trace::Kind::kCopyToDevice:
    case trace::Kind::kCopyToHost:
      return ActivityType::GPU_MEMCPY;
    default:
      return ActivityType::PRIVATEUSE1_RUNTIME;
  }
}

class TpuProfilerSession : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    trace::start();
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    intervals_ = trace::stop();
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked, int64_t start_time,
                    int64_t end_time) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_time, end_time, "tpu");
    buffer_->gpuOpCount = 0;
    // Per device and record_function range: the first start and last end of its device work.
    std::map<std::pair<int, uint64_t>, std::pair<int64_t, int64_t>> ranges;
    for (const trace::Interval& i : intervals_) {
      log_interval(i, linked, logger);
      if (!trace::on_device(i.kind)) continue;
      for (uint64_t range : i.user_ranges) {
        auto& span = ranges.try_emplace({i.device, range}, i.start_ns, i.end_ns).first->second;
        span.first = std::min(span.first, i.start_ns);
        span.second = std::max(span.second, i.end_ns);
      }
    }
    for (const auto& [key, span] : ranges) {
      const libkineto::ITraceActivity* range = linked(static_cast<int32_t>(key.second));
      if (range == nullptr) continue;
      auto& act = add(ActivityType::GPU_USER_ANNOTATION, range->name(), span.first, span.second,
                      nullptr);
      act.id = static_cast<int32_t>(key.second);
      act.device = key.first;
      act.resource = kProgramsTrack;
      act.log(logger);
    }
    // Kineto asks the session for one device (getDeviceInfo); the others are named here.
    for (int d : devices_) {
      if (d != *devices_.begin()) logger.handleDeviceInfo(*device_info(d), start_time);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return device_info(devices_.empty() ? 0 : *devices_.begin());
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (int d : devices_) {
      infos.push_back({kProgramsTrack, kProgramsTrack, d, "programs"});
      infos.push_back({kCopiesTrack, kCopiesTrack, d, "copies"});
    }
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override { trace::push_correlation(id, false); }
  void popCorrelationId() override { trace::pop_correlation(false); }
  void pushUserCorrelationId(uint64_t id) override { trace::push_correlation(id, true); }
  void popUserCorrelationId() override { trace::pop_correlation(true); }

 private:
  static std::unique_ptr<libkineto::DeviceInfo> device_info(int device) {
    std::string name = "tpu:" + std::to_string(device);
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{device, device, name, name});
  }

  // Device work goes on the device's tracks, linked to the op that launched it (so it counts as
  // that op's device time); compiles and flushes on the thread that ran them.
  void log_interval(const trace::Interval& i, const libkineto::getLinkedActivityCallback& linked,
                    libkineto::ActivityLogger& logger) {
    const libkineto::ITraceActivity* op =
        i.correlation != 0 ? linked(static_cast<int32_t>(i.correlation)) : nullptr;
    auto& act = add(type_of(i.kind), name_of(i, op), i.start_ns, i.end_ns, op);
    act.id = static_cast<int32_t>(i.correlation);
    if (trace::on_device(i.kind)) {
      devices_.insert(i.device);
      act.device = i.device;
      act.resource = i.kind == trace::Kind::kExecute ? kProgramsTrack : kCopiesTrack;
      ++buffer_->gpuOpCount;
    } else {
      act.device = static_cast<int32_t>(getpid());
      act.resource = act.threadId = i.thread;
    }
    // Quoted: addMetadata formats with fmt, which libtorch does not export.
    if (i.kind == trace::Kind::kFlush || (i.kind == trace::Kind::kExecute && i.amount >= 0)) {
      act.addMetadataQuoted("nodes", std::to_string(i.amount));
    } else if (i.kind == trace::Kind::kCopyToDevice || i.kind == trace::Kind::kCopyToHost) {
      act.addMetadataQuoted("bytes", std::to_string(i.amount));
    }
    act.log(logger);
  }

  // The activities live in the buffer, which Kineto keeps with the trace it logged them to.
  libkineto::GenericTraceActivity& add(ActivityType type, const std::string& name, int64_t start,
                                       int64_t end, const libkineto::ITraceActivity* op) {
    buffer_->emplace_activity(buffer_->span, type, name);
    libkineto::GenericTraceActivity& act = *buffer_->activities.back();
    act.startTime = start;
    act.endTime = end;
    act.linked = op;
    return act;
  }

  std::vector<trace::Interval> intervals_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::set<int> devices_;
};

class TpuProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config& /*config*/) override {
    // Only when the user asked for the device (ProfilerActivity.PrivateUse1): a CPU-only
    // profile selects the runtime type, not the kernels.
    if (types.count(ActivityType::CONCURRENT_KERNEL) == 0) return nullptr;
    return std::make_unique<TpuProfilerSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/, const std::set<ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "torchtpu";
  std::set<ActivityType> activities_ = {ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                        ActivityType::PRIVATEUSE1_RUNTIME};
};

REGISTER_PRIVATEUSE1_PROFILER(TpuProfiler);

}  // namespace
}  // namespace torchtpu::aten
