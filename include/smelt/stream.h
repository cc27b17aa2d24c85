// Streams: independent queues of GPU work, a per-thread current stream, and waiting for one.
#pragma once

#include <cstdint>
#include <string>

#include "smelt/device.h"

namespace smelt {

/// A queue of work on one device. Every kernel, copy, cuBLASLt and cuDNN call that a thread
/// issues on a GPU goes to that thread's current stream of the GPU (see StreamScope), else to
/// the GPU's default stream, which is what all code that never names a stream uses. Work on
/// different streams of one GPU may run at the same time: threads that each hold their own
/// stream run one shared model concurrently. Results are the same bits on any stream; an array
/// made on one stream and used on another is ready when it is used (smelt orders them).
///
/// A Stream on the CPU is accepted everywhere and means "the calling thread": CPU kernels run
/// inside eval on the thread that evaluates, so there is nothing to queue or wait for.
///
/// Streams are small handles (copies name the same stream). The GPU streams they name live
/// until the process ends, so create a few and reuse them (one per worker thread).
class Stream {
 public:
  /// A new stream on `device` (DeviceError for a GPU that this build or machine does not have).
  static Stream create(Device device);

  Device device() const { return device_; }
  /// 0 for the device's default stream; streams made by create() count up from 1 per device.
  uint64_t id() const { return id_; }
  bool is_default() const { return id_ == 0; }
  bool operator==(const Stream&) const = default;
  /// "cuda:0/stream 2", "cpu/default".
  std::string str() const;

 private:
  Stream(Device device, uint64_t id) : device_(device), id_(id) {}
  friend Stream default_stream(Device device);
  friend Stream current_stream(Device device);
  Device device_;
  uint64_t id_;
};

/// The stream that code which names no stream uses on `device` (DeviceError for a missing GPU).
Stream default_stream(Device device);
/// This thread's current stream of `device`: the innermost StreamScope of a stream of that
/// device, else its default stream.
Stream current_stream(Device device);

/// Makes `stream` the calling thread's current stream of its device while it lives. Scopes nest;
/// scopes for different devices are independent (a thread may hold one stream per GPU). Other
/// threads are not affected, including threads that evaluate nodes this thread's graph shares.
class StreamScope {
 public:
  explicit StreamScope(const Stream& stream);
  /// The same, checking that `stream` belongs to `device` (DeviceError naming both otherwise):
  /// for code that holds a stream meant for a given device.
  StreamScope(Device device, const Stream& stream);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  Device device_;
};

/// Waits until every kernel and copy queued on `stream` has finished (a no-op on the CPU).
/// synchronize(Device) waits for every stream of the device.
void synchronize(const Stream& stream);

}  // namespace smelt
