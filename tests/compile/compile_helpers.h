// Helpers shared by the compile tests: a per-binary kernel cache, event logs, pass dumps, tapes.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "compile/tape_helpers.h"
#include "smelt/compile.h"
#include "smelt/telemetry.h"
#include "src/codegen/fused_kernel.h"
#include "src/compile/passes.h"
#include "src/compile/tape.h"
#include "src/core/node.h"
#include "test_utils.h"

namespace smelt::test {

/// The kernel cache folder of this test binary: a fixed folder under the temp dir, named after
/// the binary, so that a second run of the tests loads its kernels instead of compiling them.
inline std::string binary_cache_dir() {
  std::error_code ec;
  std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).filename().string();
  if (exe.empty()) exe = "compile-tests";
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/smelt-test-kernels-" + std::to_string(::getuid()) + "/" + exe;
}

/// Points SMELT_CACHE_DIR at binary_cache_dir() before any test runs (unless the caller set it),
/// and compiles synchronously (SMELT_TIERED=0, unless the caller set it): these tests inspect
/// the fused tape, kernel builds and cache files right after the first call, which tiered
/// execution would leave to the background builder with a cold cache. tiered_test.cpp tests
/// tiering itself, switching it on per test.
class KernelCacheEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* set = std::getenv("SMELT_CACHE_DIR");
    if (!set || !*set) ::setenv("SMELT_CACHE_DIR", binary_cache_dir().c_str(), 1);
    const char* tiered = std::getenv("SMELT_TIERED");
    if (!tiered || !*tiered) ::setenv("SMELT_TIERED", "0", 1);
  }
};

inline ::testing::Environment* const kernel_cache_environment =
    ::testing::AddGlobalTestEnvironment(new KernelCacheEnvironment);

/// Records every telemetry event while it lives.
struct EventLog {
  mutable std::mutex mutex;
  std::vector<telemetry::Event> events;
  telemetry::Subscription sub{"*", [this](const telemetry::Event& e) {
                                std::lock_guard lock(mutex);
                                events.push_back(e);
                              }};

  std::vector<telemetry::Event> named(const std::string& name) const {
    std::lock_guard lock(mutex);
    std::vector<telemetry::Event> out;
    for (auto& e : events)
      if (e.name == name) out.push_back(e);
    return out;
  }
  int count(const std::string& name) const { return static_cast<int>(named(name).size()); }
  std::vector<std::string> field(const std::string& name, const std::string& key) const {
    std::vector<std::string> out;
    for (auto& e : named(name)) out.push_back(e.field(key));
    return out;
  }
};

/// Collects the tape text each pass hands to CompileOptions::dump. Must outlive the compiled
/// function whose options it filled.
struct Dumps {
  std::vector<std::pair<std::string, std::string>> passes;  // (pass name, tape text) in order

  CompileOptions options(CompileOptions o = {}) {
    o.dump = [this](const std::string& pass, const std::string& text) { passes.emplace_back(pass, text); };
    return o;
  }
  /// The latest dump of `pass` ("" when it did not run).
  std::string of(const std::string& pass) const {
    for (auto it = passes.rbegin(); it != passes.rend(); ++it)
      if (it->first == pass) return it->second;
    return "";
  }
  /// The tape after the last pass of the latest trace.
  std::string final_tape() const { return passes.empty() ? "" : passes.back().second; }
  /// Lines of `tape` whose step is `prim` ("Fused", "Unary", "Binary(Add)", "constant", ...).
  static std::vector<std::string> lines(const std::string& tape, const std::string& prim) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < tape.size()) {
      size_t end = tape.find('\n', pos);
      if (end == std::string::npos) end = tape.size();
      std::string line = tape.substr(pos, end - pos);
      size_t eq = line.find(" = ");
      if (eq != std::string::npos && line.compare(eq + 3, prim.size(), prim) == 0) out.push_back(line);
      pos = end + 1;
    }
    return out;
  }
  static int count(const std::string& tape, const std::string& prim) {
    return static_cast<int>(lines(tape, prim).size());
  }
};


/// The programs of the Fused steps of a tape, in tape order.
inline std::vector<const codegen::FusedProgram*> fused_programs(const compiler::Tape& tape) {
  std::vector<const codegen::FusedProgram*> out;
  for (auto* s : steps_of(tape, PrimKind::Fused)) out.push_back(&s->prim.get<FusedParams>().kernel->program);
  return out;
}

/// Arithmetic instructions of a program (what kMaxFusedInstructions counts).
inline int compute_instrs(const codegen::FusedProgram& p) {
  int n = 0;
  for (auto& in : p.instrs) n += in.kind != codegen::InstrKind::Input && in.kind != codegen::InstrKind::Constant;
  return n;
}

/// Values that exercise the edges of `dtype`: NaN (both signs, with payloads), ±inf, ±0,
/// subnormals, the extremes, small integers, then random bit patterns and random values in
/// [-4, 4), in a fixed order given `seed`.
inline Array special_array(Dtype dtype, int64_t n, uint32_t seed, Shape shape = {}) {
  if (shape.empty()) shape = {n};
  std::mt19937_64 rng(seed * 2654435761u + 99u);
  const size_t isz = size_of(dtype);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * isz);
  auto put_bits = [&](int64_t i, uint64_t bits) { std::memcpy(&bytes[i * isz], &bits, isz); };
  // Specials by their bits, per float format; integers by value.
  std::vector<uint64_t> specials;
  switch (dtype) {
    case Dtype::Float16:
      specials = {0x7e00, 0xfe00, 0x7c01, 0x7e55, 0x7c00, 0xfc00, 0x0000, 0x8000, 0x0001, 0x83ff,
                  0x7bff, 0xfbff, 0x3c00, 0xbc00, 0x3800, 0x4000, 0x4200, 0xc100, 0x3555, 0x6c00};
      break;
    case Dtype::BFloat16:
      specials = {0x7fc0, 0xffc0, 0x7f81, 0x7fd5, 0x7f80, 0xff80, 0x0000, 0x8000, 0x0001, 0x807f,
                  0x7f7f, 0xff7f, 0x3f80, 0xbf80, 0x3f00, 0x4000, 0x4040, 0xc020, 0x3eab, 0x4580};
      break;
    case Dtype::Float32:
      specials = {0x7fc00000, 0xffc00000, 0x7f800001, 0x7fc12345, 0x7f800000, 0xff800000, 0x00000000,
                  0x80000000, 0x00000001, 0x807fffff, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000,
                  0x3f000000, 0x40000000, 0x45801000, 0xc0400000, 0x3eaaaaab, 0x4b000001};
      break;
    case Dtype::Float64:
      specials = {0x7ff8000000000000, 0xfff8000000000000, 0x7ff0000000000001, 0x7ff8123456789abc, 0x7ff0000000000000,
                  0xfff0000000000000, 0x0000000000000000, 0x8000000000000000, 0x0000000000000001, 0x800fffffffffffff,
                  0x7fefffffffffffff, 0xffefffffffffffff, 0x3ff0000000000000, 0xbff0000000000000, 0x3fe0000000000000,
                  0x4000000000000000, 0x40b0020000000000, 0xc008000000000000, 0x3fd5555555555555, 0x4330000000000001};
      break;
    case Dtype::Bool: specials = {0, 1, 1, 0}; break;
    case Dtype::Int8:
    case Dtype::Int16:
    case Dtype::Int32:
    case Dtype::Int64:
    case Dtype::UInt8:
    case Dtype::UInt16:
    case Dtype::UInt32:
    case Dtype::UInt64: {
      const int bits = static_cast<int>(isz * 8);
      const uint64_t top = uint64_t{1} << (bits - 1);
      const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      // 0, ±1, ±2, the signed minimum and maximum (as bits), the unsigned maximum, shift counts.
      specials = {0,
                  1,
                  mask,
                  2,
                  mask - 1,
                  top,
                  top - 1,
                  mask,
                  3,
                  static_cast<uint64_t>(bits - 1),
                  static_cast<uint64_t>(bits),
                  static_cast<uint64_t>(bits + 1),
                  7,
                  mask - 6};
      break;
    }
  }
  // Values in [-4, 4) converted to the dtype with astype's rules.
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  std::vector<double> values(static_cast<size_t>(n));
  for (auto& v : values) v = value(rng);
  Array converted = astype(Array(values, Shape{n}), dtype);
  converted.eval();
  const auto* conv = static_cast<const uint8_t*>(converted.data());
  for (int64_t i = 0; i < n; ++i) {
    if (i < static_cast<int64_t>(specials.size())) {
      put_bits(i, specials[i]);
    } else if (dtype == Dtype::Bool) {
      bytes[i] = static_cast<uint8_t>(rng() & 1);
    } else if (i % 4 == 0) {
      put_bits(i, rng());  // any bit pattern
    } else {
      std::memcpy(&bytes[i * isz], conv + i * isz, isz);
    }
  }
  // Shuffle so the specials meet every operand of the other input, not just their twins.
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<uint8_t> shuffled(bytes.size());
  for (int64_t i = 0; i < n; ++i) std::memcpy(&shuffled[i * isz], &bytes[order[i] * isz], isz);
  return Array(shuffled.data(), shape, dtype);
}

/// Every dtype, in enum order.
/// `fn` compiled, and compiled with the pass `pass` switched off, against `fn` run eagerly, bit
/// for bit (`context`, such as the optimized tape, goes with each failure).
inline void expect_compiled_equals_eager(const std::function<std::vector<Array>(const std::vector<Array>&)>& fn,
                                         const std::vector<Array>& inputs, const std::string& pass,
                                         const std::string& context = "") {
  const auto want = fn(inputs);
  eval(want);
  CompileOptions off;
  off.disabled_passes = {pass};
  for (const CompileOptions& options : {CompileOptions{}, off}) {
    auto f = compile_flat(fn, options);
    const auto got = f(inputs);
    eval(got);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(bit_equal(got[i], want[i])) << "output " << i << (options.disabled_passes.empty() ? "" : " without ")
                                              << (options.disabled_passes.empty() ? "" : pass) << "\n"
                                              << context;
  }
}

/// float32 special_array of `shape` (its element count taken from the shape).
inline Array special_floats(const Shape& shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return special_array(float32, n, seed, shape);
}

inline std::vector<Dtype> all_dtypes() {
  std::vector<Dtype> out;
  for (int i = 0; i < kNumDtypes; ++i) out.push_back(static_cast<Dtype>(i));
  return out;
}

}  // namespace smelt::test
