// The exception hierarchy: every error a user can hit derives from smelt::Error.
#pragma once

#include <stdexcept>
#include <string>

namespace smelt {

/// Base of every smelt exception. Messages start with the operation's name.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// An argument value is out of its domain (axis out of range, negative size, ...).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
/// Shapes do not agree (broadcasting, matmul inner dims, concatenation, ...).
class ShapeError : public Error {
 public:
  using Error::Error;
};
/// A dtype is not allowed for the operation.
class DtypeError : public Error {
 public:
  using Error::Error;
};
/// A value was needed on the host while tracing (data-dependent shape or branch).
class UnknownValueError : public Error {
 public:
  using Error::Error;
};
/// The operation is not supported on this device or in this build.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};
/// An ONNX model is malformed or uses something that cannot be run.
class OnnxError : public Error {
 public:
  using Error::Error;
};
/// An allocation failed or exceeded the allocator's limit.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};
/// A device is missing or failed.
class DeviceError : public Error {
 public:
  using Error::Error;
};

/// Internal invariant failure: always on, never compiled out.
[[noreturn]] void assertion_failed(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace smelt

#define SMELT_ASSERT(cond, msg)                                         \
  do {                                                                  \
    if (!(cond)) ::smelt::assertion_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
