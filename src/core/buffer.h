// A block of device memory owned through shared_ptr; views of one buffer share it.
#pragma once

#include <cstddef>
#include <memory>

#include "smelt/device.h"

namespace smelt {

class Allocator;

/// Memory from an allocator, given back to it (cached) when the last owner drops it.
struct Buffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device;
  Allocator* allocator = nullptr;  // null: not owned (external memory)

  Buffer(void* p, size_t n, Device d, Allocator* a) : ptr(p), bytes(n), device(d), allocator(a) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

using BufferPtr = std::shared_ptr<Buffer>;

}  // namespace smelt
