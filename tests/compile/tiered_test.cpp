// Tiered execution: the first call of an entry runs its tape unfused while the kernels build in
// the background, gives the fused tier's bits (NaN and ±inf included), switches once under
// concurrent calls, counts calls per tier, and an exit with builds pending leaves the disk cache
// whole.
//
// Each test uses a program no other test builds (a constant of its own) and a fresh
// SMELT_CACHE_DIR, so that its kernels are neither loaded nor on disk when it starts.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "compile_helpers.h"
#include "env_test_utils.h"
#include "src/codegen/kernel_builder.h"

namespace smelt {
namespace {

namespace fs = std::filesystem;
using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;
using test::ScopedEnv;

/// A fresh cache folder and tiering left to the options (compile_helpers.h switches it off for
/// the other compile tests), for the scope.
struct TieredScope : test::ColdKernelCache {
  TieredScope() : ColdKernelCache("smelt-tiered") {}
  size_t entries() const {
    size_t n = 0;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dir / "cpu", ec))
      if (e.path().extension() == ".kernel") ++n;
    return n;
  }
};

/// Reductions (a softmax row program, a sum of squares), a select, casts through float16 and
/// scalar constants: each constant `c` gives kernels of their own.
Fn program(float c) {
  return [c](const std::vector<Array>& in) {
    const Array& x = in[0];
    const Array& y = in[1];
    Array s = softmax(x * c, {-1});
    Array g = where(y > 0.0f, s * y + c, exp(-y) - c);
    Array h = astype(astype(g, float16), float32) * 0.5f + y;
    return std::vector<Array>{h, sum(h * h, {-1}) + c, astype(s, float64) * 3.0};
  };
}

/// NaN or ±inf.
bool is_special32(uint32_t bits) { return (bits & 0x7f800000u) == 0x7f800000u; }

/// `a` (float32, 2-d) with the NaNs and infinities of each row past the first `per_row`
/// replaced by 1.5.
Array limit_specials(const Array& a, int per_row) {
  const std::vector<float> values = a.to_vector<float>();
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), bits.size() * 4);
  const size_t cols = static_cast<size_t>(a.shape()[1]);
  for (size_t row = 0; row * cols < bits.size(); ++row) {
    int kept = 0;
    for (size_t i = row * cols; i < (row + 1) * cols; ++i) {
      if (!is_special32(bits[i])) continue;
      if (kept < per_row) ++kept;
      else bits[i] = 0x3fc00000u;  // 1.5
    }
  }
  return Array(bits.data(), a.shape(), float32);
}

/// x: per row one NaN (either sign, payloads) or infinity, with ±0, subnormals, extremes and
/// random values; y: the same without NaN and infinities (its extremes still overflow exp).
/// When two different NaNs meet in an add or a multiply, IEEE 754 leaves the result to the
/// implementation and the C++ compiler may swap the operands (tests/compile/bitexact_test.cpp,
/// align_nans). With these inputs every NaN of a row has the same bits (the one NaN of x, or
/// inf - inf's), so every output bit is defined and must match.
std::vector<Array> inputs(uint32_t seed) {
  const Array x = test::special_array(float32, 8 * 33, seed, {8, 33});
  const Array y = test::special_array(float32, 8 * 33, seed + 1, {8, 33});
  return {limit_specials(x, 1), limit_specials(y, 0)};
}

::testing::AssertionResult all_bit_equal(const std::vector<Array>& a, const std::vector<Array>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " outputs against " << b.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (auto r = test::bit_equal(a[i], b[i]); !r) return r << " (output " << i << ")";
  return ::testing::AssertionSuccess();
}

TEST(Tiered, FirstCallRunsUnfusedThenTheFusedTierGivesTheSameBits) {
  TieredScope scope;
  test::EventLog log;
  const Fn fn = program(1.0625f);
  const std::vector<Array> in = inputs(3);
  const std::vector<Array> expected = fn(in);  // eager
  auto f = compile_flat(fn);
  CompileStats s;
  {
    codegen::BackgroundBuildsPaused hold;  // however fast a build, the first call runs unfused
    EXPECT_TRUE(all_bit_equal(f(in), expected)) << "interpreter tier";
    EXPECT_TRUE(all_bit_equal(f(in), expected)) << "interpreter tier, second call";
    s = f.stats();
  }
  EXPECT_EQ(s.interpreter_calls, 2u);
  EXPECT_EQ(s.fused_calls, 0u);
  ASSERT_EQ(log.count("compile.tier.interpreter"), 1);
  EXPECT_GE(std::stoi(log.named("compile.tier.interpreter")[0].field("kernels")), 2);

  codegen::wait_for_background_builds();
  EXPECT_TRUE(all_bit_equal(f(in), expected)) << "fused tier";
  EXPECT_TRUE(all_bit_equal(f(inputs(11)), fn(inputs(11)))) << "fused tier, other inputs";
  s = f.stats();
  EXPECT_EQ(s.interpreter_calls, 2u);
  EXPECT_EQ(s.fused_calls, 2u);
  ASSERT_EQ(log.count("compile.tier.switch"), 1);
  const telemetry::Event sw = log.named("compile.tier.switch")[0];
  EXPECT_EQ(sw.field("kernels"), log.named("compile.tier.interpreter")[0].field("kernels"));
  EXPECT_EQ(sw.field("failed"), "0");
  EXPECT_EQ(log.field("compile.call", "tier"), (std::vector<std::string>{"interpreter", "interpreter", "fused", "fused"}));
  // The kernels were built by the background builder and stored on disk.
  for (const auto& e : log.named("compile.kernel.build")) EXPECT_EQ(e.field("background"), "true");
  EXPECT_GE(scope.entries(), 1u);

  // The synchronous behaviour (tiered off) gives the same bits, fused from the first call.
  ScopedEnv off("SMELT_TIERED", "0");
  auto g = compile_flat(fn);
  EXPECT_TRUE(all_bit_equal(g(in), expected)) << "synchronous";
  EXPECT_EQ(g.stats().fused_calls, 1u);
  EXPECT_EQ(g.stats().interpreter_calls, 0u);
}

TEST(Tiered, OffBuildsEveryKernelBeforeTheFirstCall) {
  TieredScope scope;
  test::EventLog log;
  const Fn fn = program(1.125f);
  CompileOptions o;
  o.tiered = false;
  auto f = compile_flat(fn, o);
  EXPECT_TRUE(all_bit_equal(f(inputs(5)), fn(inputs(5))));
  EXPECT_EQ(f.stats().fused_calls, 1u);
  EXPECT_EQ(f.stats().interpreter_calls, 0u);
  EXPECT_EQ(log.count("compile.tier.interpreter"), 0);
  EXPECT_GE(log.count("compile.kernel.build"), 2);
  for (const auto& e : log.named("compile.kernel.build")) EXPECT_EQ(e.field("background"), "false");
  EXPECT_GE(scope.entries(), 1u);  // on disk before the call returned

  // SMELT_TIERED=1 switches it on whatever the options say.
  ScopedEnv on("SMELT_TIERED", "1");
  const Fn other = program(1.1875f);
  auto g = compile_flat(other, o);
  codegen::BackgroundBuildsPaused hold;
  EXPECT_TRUE(all_bit_equal(g(inputs(5)), other(inputs(5))));
  EXPECT_EQ(g.stats().interpreter_calls, 1u);
}

TEST(Tiered, KernelsOnDiskLoadInTheBackgroundWithoutTheCompiler) {
  TieredScope scope;
  const Fn fn = program(1.25f);
  {
    auto f = compile_flat(fn);
    f(inputs(7));
    codegen::wait_for_background_builds();
  }  // the kernels are unloaded with the last compiled function holding them
  test::EventLog log;
  auto f = compile_flat(fn);
  {
    // The first call does not wait for the disk either: it runs unfused while they load.
    codegen::BackgroundBuildsPaused hold;
    EXPECT_TRUE(all_bit_equal(f(inputs(7)), fn(inputs(7))));
    EXPECT_EQ(f.stats().interpreter_calls, 1u);
  }
  codegen::wait_for_background_builds();
  EXPECT_TRUE(all_bit_equal(f(inputs(7)), fn(inputs(7))));
  EXPECT_EQ(f.stats().fused_calls, 1u);
  ASSERT_GE(log.count("compile.kernel.build"), 1);
  for (const auto& e : log.named("compile.kernel.build")) {
    EXPECT_EQ(e.field("cached_on_disk"), "true");
    EXPECT_EQ(e.field("background"), "true");
  }
}

TEST(Tiered, KernelsLoadedInTheProcessServeTheFirstCallFused) {
  TieredScope scope;
  const Fn fn = program(1.3125f);
  auto f = compile_flat(fn);
  f(inputs(8));
  codegen::wait_for_background_builds();
  EXPECT_TRUE(all_bit_equal(f(inputs(8)), fn(inputs(8))));  // switches; f holds the kernels
  test::EventLog log;
  auto g = compile_flat(fn);  // another function, same kernels
  EXPECT_TRUE(all_bit_equal(g(inputs(8)), fn(inputs(8))));
  EXPECT_EQ(g.stats().fused_calls, 1u);
  EXPECT_EQ(g.stats().interpreter_calls, 0u);
  EXPECT_EQ(log.count("compile.tier.interpreter"), 0);
  EXPECT_EQ(log.count("compile.kernel.build"), 0);
}

TEST(Tiered, ConcurrentCallsAcrossTheSwitchGiveOneSetOfBits) {
  TieredScope scope;
  test::EventLog log;
  const Fn fn = program(1.375f);
  const std::vector<Array> in = inputs(9);
  const std::vector<Array> expected = fn(in);
  auto f = compile_flat(fn);
  constexpr int kThreads = 6, kCalls = 25;
  std::atomic<int> mismatches{0};
  // Paused until the first thread is halfway: the trace's call runs on the interpreter tier,
  // and the switch happens among running calls.
  std::optional<codegen::BackgroundBuildsPaused> hold(std::in_place);
  std::once_flag resume;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        if (!all_bit_equal(f(in), expected)) mismatches++;
        if (i == kCalls / 2) {
          std::call_once(resume, [&] { hold.reset(); });
          codegen::wait_for_background_builds();
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  const CompileStats s = f.stats();
  EXPECT_EQ(s.traces, 1u);
  EXPECT_EQ(s.interpreter_calls + s.fused_calls, static_cast<uint64_t>(kThreads * kCalls));
  EXPECT_GE(s.interpreter_calls, 1u);
  EXPECT_GE(s.fused_calls, 1u);
  EXPECT_EQ(log.count("compile.tier.switch"), 1);
  // Every call after the switch is fused.
  EXPECT_TRUE(all_bit_equal(f(in), expected));
  EXPECT_EQ(f.stats().fused_calls, s.fused_calls + 1);
}

TEST(Tiered, ShapelessEntriesSwitchToo) {
  TieredScope scope;
  const Fn fn = program(1.4375f);
  CompileOptions o;
  o.shapeless = true;
  auto f = compile_flat(fn, o);
  {
    codegen::BackgroundBuildsPaused hold;
    EXPECT_TRUE(all_bit_equal(f(inputs(13)), fn(inputs(13))));
  }
  codegen::wait_for_background_builds();
  const std::vector<Array> other = {limit_specials(test::special_array(float32, 5 * 7, 17, {5, 7}), 1),
                                    limit_specials(test::special_array(float32, 5 * 7, 18, {5, 7}), 0)};
  EXPECT_TRUE(all_bit_equal(f(other), fn(other)));
  EXPECT_EQ(f.stats().traces, 1u);
  EXPECT_EQ(f.stats().interpreter_calls, 1u);
  EXPECT_EQ(f.stats().fused_calls, 1u);
}

// The child of ExitWithBuildsPendingLeavesTheCacheWhole (a no-op in a normal run): starts a
// background build and exits at once.
TEST(TieredChild, ExitWithBuildPending) {
  const char* c = std::getenv("SMELT_TIERED_EXIT_CHILD");
  if (!c) GTEST_SKIP() << "helper of the exit test";
  ScopedEnv tiered("SMELT_TIERED", nullptr);
  const Fn fn = program(std::strtof(c, nullptr));
  auto f = compile_flat(fn);
  f(inputs(1));
  if (f.stats().interpreter_calls != 1) std::_Exit(3);  // the build was not pending: says so
  std::exit(0);  // static destructors run: the builder kills its compiler and joins
}

TEST(Tiered, ExitWithBuildsPendingLeavesTheCacheWhole) {
  TieredScope scope;
  const float c = 1.5625f;
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  char cs[32];
  std::snprintf(cs, sizeof cs, "%a", static_cast<double>(c));
  const std::string cmd = "SMELT_TIERED_EXIT_CHILD='" + std::string(cs) + "' SMELT_CACHE_DIR='" + scope.dir.string() +
                          "' '" + exe + "' --gtest_filter=TieredChild.ExitWithBuildPending >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc)) << "the child did not exit normally (wait status " << rc << ")";
  ASSERT_EQ(WEXITSTATUS(rc), 0) << "3: its first call was not on the interpreter tier";
  // No temporary file is left, and every entry there is whole: a synchronous build of the same
  // program loads what it finds without rejecting anything.
  std::error_code ec;
  for (auto& e : fs::directory_iterator(scope.dir / "cpu", ec))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  test::EventLog log;
  ScopedEnv off("SMELT_TIERED", "0");
  const Fn fn = program(c);
  auto f = compile_flat(fn);
  EXPECT_TRUE(all_bit_equal(f(inputs(1)), fn(inputs(1))));
  EXPECT_EQ(log.count("compile.kernel.cache.reject"), 0);
}

}  // namespace
}  // namespace smelt
