// Streams: the public handles, the per-thread stack of current streams, and synchronize(stream).
#include "smelt/stream.h"

#include <atomic>
#include <vector>

#include "smelt/errors.h"
#include "src/core/stream_state.h"

#if SMELT_HAS_CUDA
#include "src/backend/cuda/cuda.h"
#endif

namespace smelt {

namespace {

struct ScopeEntry {
  Device device;
  uint64_t id;
};

// The StreamScopes of this thread, innermost last. A thread holds a handful at most, so a
// backwards scan is cheaper than any map.
thread_local std::vector<ScopeEntry> scopes;

// CPU streams only need distinct ids: they queue nothing.
std::atomic<uint64_t> next_cpu_stream{1};

void check_gpu(Device device, const char* what) {
  if (device.type == Device::Type::Cpu) return;
  const int count = cuda_device_count();
  if (device.index >= 0 && device.index < count) return;
  throw DeviceError(std::string(what) + ": " + device.str() + " is not available (" + std::to_string(count) +
                    " GPUs visible" + (count == 0 ? "; no CUDA in this build or no GPU" : "") + ")");
}

}  // namespace

namespace detail {

uint64_t current_stream_id(Device device) {
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it)
    if (it->device == device) return it->id;
  return 0;
}

}  // namespace detail

Stream Stream::create(Device device) {
  check_gpu(device, "Stream::create");
  if (device.type == Device::Type::Cpu) return Stream(device, next_cpu_stream.fetch_add(1));
#if SMELT_HAS_CUDA
  return Stream(device, cuda::create_stream(device.index));
#else
  throw DeviceError("Stream::create: " + device.str() + " is not available (no CUDA in this build)");
#endif
}

std::string Stream::str() const {
  return device_.str() + (id_ == 0 ? "/default" : "/stream " + std::to_string(id_));
}

Stream default_stream(Device device) {
  check_gpu(device, "default_stream");
  return Stream(device, 0);
}

Stream current_stream(Device device) {
  check_gpu(device, "current_stream");
  return Stream(device, detail::current_stream_id(device));
}

StreamScope::StreamScope(const Stream& stream) : device_(stream.device()) {
  scopes.push_back({stream.device(), stream.id()});
}

StreamScope::StreamScope(Device device, const Stream& stream) : device_(stream.device()) {
  if (!(stream.device() == device))
    throw DeviceError("StreamScope: " + stream.str() + " belongs to " + stream.device().str() +
                      " and cannot be the current stream of " + device.str());
  scopes.push_back({stream.device(), stream.id()});
}

StreamScope::~StreamScope() {
  // Scopes end in reverse order of their making (they are RAII objects of one thread).
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it)
    if (it->device == device_) {
      scopes.erase(std::next(it).base());
      return;
    }
}

void synchronize(const Stream& stream) {
  if (stream.device().type == Device::Type::Cpu) return;
#if SMELT_HAS_CUDA
  cuda::synchronize_stream(stream.device().index, stream.id());
#else
  throw DeviceError("synchronize: " + stream.device().str() + " is not available (no CUDA in this build)");
#endif
}

}  // namespace smelt
