// File helpers of the io tests (.npy, .safetensors): temporary paths, raw bytes in and out, every dtype.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "smelt/dtype.h"

namespace smelt::test {

inline const Dtype kAllDtypes[] = {bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                                   float16, bfloat16, float32, float64};

/// A path under the test's temporary folder, unique per process: `prefix` names the test file.
inline std::string temp_path(const std::string& prefix, const std::string& name) {
  return ::testing::TempDir() + prefix + std::to_string(::getpid()) + "_" + name;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace smelt::test
