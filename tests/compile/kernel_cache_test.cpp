// Generated-kernel caches: in memory across compiled functions and threads, on disk across
// processes, recovery from a damaged cache file, and the fallback when no compiler works.
//
// Each test that needs a build uses a program no other test builds (a constant of its own) and
// a fresh SMELT_CACHE_DIR. Tests about a second process re-run this binary on the helper test
// KernelCacheChild.Run, which does nothing unless SMELT_KERNEL_CACHE_CHILD names a report file.
#include <atomic>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include "compile_helpers.h"
#include "src/codegen/kernel_builder.h"

namespace smelt {
namespace {

namespace fs = std::filesystem;
using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

/// Sets an environment variable for the scope, then restores the previous value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// A new empty folder, removed with the object.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "smelt-kernel-cache-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// The program of these tests: exp(x) * c + c, one kernel per value of c.
Fn program(float c) {
  return [c](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0]) * c + c}; };
}

Array input() { return test::random_array({5, 7}, float32, -2.0, 2.0, 1); }

/// Runs the program for `c` compiled, checks it against eager, and returns the build events.
std::vector<telemetry::Event> build(float c, test::Dumps* dumps = nullptr) {
  test::EventLog log;
  Fn fn = program(c);
  auto f = compile_flat(fn, dumps ? dumps->options() : CompileOptions{});
  EXPECT_TRUE(test::bit_equal(f({input()})[0], fn({input()})[0]));
  return log.named("compile.kernel.build");
}

std::string hex_float(float c) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(c));
  return buf;
}

/// Re-runs this binary on KernelCacheChild.Run for program `c` with the given cache folder and
/// returns the child's report ("key=value" lines).
std::map<std::string, std::string> run_child(float c, const fs::path& cache_dir, const fs::path& report) {
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  const std::string cmd = "SMELT_KERNEL_CACHE_CHILD='" + report.string() + "' SMELT_KERNEL_CACHE_CONSTANT='" +
                          hex_float(c) + "' SMELT_CACHE_DIR='" + cache_dir.string() + "' '" + exe +
                          "' --gtest_filter=KernelCacheChild.Run >'" + report.string() + ".log' 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << "child failed; its output is in " << report << ".log";
  std::map<std::string, std::string> out;
  std::ifstream f(report);
  for (std::string line; std::getline(f, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// The second process of the disk-cache tests (a no-op in a normal run).
TEST(KernelCacheChild, Run) {
  const char* report = std::getenv("SMELT_KERNEL_CACHE_CHILD");
  if (!report) GTEST_SKIP() << "helper of the kernel cache tests";
  const float c = std::strtof(std::getenv("SMELT_KERNEL_CACHE_CONSTANT"), nullptr);
  auto events = build(c);
  std::ofstream f(report);
  f << "builds=" << events.size() << "\n";
  for (auto& e : events) f << "cached_on_disk=" << e.field("cached_on_disk") << "\nhash=" << e.field("hash") << "\n";
  f << "ok=" << (::testing::Test::HasFailure() ? "false" : "true") << "\n";
}

TEST(KernelCache, BuildEventsDescribeTheKernel) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  auto events = build(1.0625f);
  ASSERT_EQ(events.size(), 1u);
  const auto& e = events[0];
  EXPECT_EQ(e.field("device"), "cpu");
  EXPECT_EQ(e.field("cached_on_disk"), "false");
  EXPECT_EQ(e.field("program"), "add(multiply(exp(in0), 1.0625), 1.0625)");
  EXPECT_EQ(e.field("hash").size(), 16u);
  EXPECT_GT(e.duration_ms, 0.0);
  // The library and its source are in the cache folder under the hash; no temporary is left.
  const fs::path cpu = dir.path / "cpu";
  EXPECT_TRUE(fs::exists(cpu / (e.field("hash") + ".so")));
  EXPECT_TRUE(fs::exists(cpu / (e.field("hash") + ".cpp")));
  EXPECT_EQ(std::distance(fs::directory_iterator(cpu), fs::directory_iterator()), 2);
}

// Kernels are keyed by their source: compiled functions with the same chain share one build
// (or one load from disk, on a second run of the tests).
TEST(KernelCache, FunctionsWithTheSameChainShareOneKernel) {
  EXPECT_EQ(build(1.125f).size(), 1u);
  EXPECT_EQ(build(1.125f).size(), 0u);  // another compiled function, same program: from memory
  test::EventLog log;
  Fn other = [](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0] * 2.0f) * 1.125f + 1.125f}; };
  compile_flat(other)({input()});
  EXPECT_EQ(log.count("compile.kernel.build"), 1);  // a different program: its own kernel
}

TEST(KernelCache, SecondProcessLoadsFromDisk) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  auto events = build(1.1875f);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].field("cached_on_disk"), "false");
  auto child = run_child(1.1875f, dir.path, dir.path / "report.txt");
  EXPECT_EQ(child["ok"], "true");
  EXPECT_EQ(child["builds"], "1");
  EXPECT_EQ(child["cached_on_disk"], "true");
  EXPECT_EQ(child["hash"], events[0].field("hash"));
}

// A damaged library in the cache (a crash mid-write by an old version, a full disk) is
// rebuilt, not loaded and not fatal.
TEST(KernelCache, DamagedCacheFileIsRebuilt) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  auto events = build(1.25f);
  ASSERT_EQ(events.size(), 1u);
  const fs::path so = dir.path / "cpu" / (events[0].field("hash") + ".so");
  {
    // A new file renamed over the library, as writers of the cache do: truncating it in place
    // would pull the pages from under this process, which has it loaded.
    const fs::path junk = dir.path / "junk";
    std::ofstream(junk) << "not a shared library";
    fs::rename(junk, so);
  }
  auto child = run_child(1.25f, dir.path, dir.path / "report.txt");
  EXPECT_EQ(child["ok"], "true");
  EXPECT_EQ(child["builds"], "1");
  EXPECT_EQ(child["cached_on_disk"], "false");
  EXPECT_GT(fs::file_size(so), 1000u);
}

// Without a working compiler the function still runs, unfused, and says why.
TEST(KernelCache, FailingCompilerFallsBackToTheUnfusedTape) {
  TempDir dir;
  ScopedEnv cache("SMELT_CACHE_DIR", dir.path.string());
  test::EventLog log;
  test::Dumps dumps;
  {
    ScopedEnv cxx("SMELT_CXX", "/bin/false");
    Fn fn = program(1.3125f);
    auto f = compile_flat(fn, dumps.options(), "no_compiler");
    EXPECT_TRUE(test::bit_equal(f({input()})[0], fn({input()})[0]));
    EXPECT_TRUE(test::bit_equal(f({input()})[0], fn({input()})[0]));  // the cached, unfused entry
    EXPECT_EQ(f.stats().traces, 1u);
  }
  auto reasons = log.field("compile.fallback", "reason");
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("fuse: building a fused kernel failed: `/bin/false` exited with status 1"),
            std::string::npos)
      << reasons[0];
  EXPECT_EQ(log.field("compile.fallback", "function"), std::vector<std::string>{"no_compiler"});
  EXPECT_EQ(log.count("compile.kernel.build"), 0);
  EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "Fused"), 0) << dumps.final_tape();
  EXPECT_EQ(test::Dumps::count(dumps.final_tape(), "Unary(Exp)"), 1) << dumps.final_tape();
  // Nothing half-built is left behind, and with the compiler back the kernel builds.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path / "cpu"), fs::directory_iterator()), 0);
  EXPECT_EQ(build(1.3125f).size(), 1u);
}

// Groups whose kernels are already loaded stay fused when a later build fails.
TEST(KernelCache, FailingCompilerKeepsLoadedKernels) {
  TempDir dir;
  ScopedEnv cache("SMELT_CACHE_DIR", dir.path.string());
  ASSERT_EQ(build(1.375f).size(), 1u);  // loaded now
  ScopedEnv cxx("SMELT_CXX", "/bin/false");
  test::Dumps dumps;
  test::EventLog log;
  // The loaded chain comes last on the tape, so the pass lowers it first.
  Fn fn = [](const std::vector<Array>& in) {
    return std::vector<Array>{sin(in[0]) * 3.0f - 1.0f, exp(in[0]) * 1.375f + 1.375f};
  };
  auto f = compile_flat(fn, dumps.options());
  auto got = f({input()});
  auto want = fn({input()});
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i]));
  EXPECT_EQ(log.count("compile.fallback"), 1);
  auto fused = test::Dumps::lines(dumps.final_tape(), "Fused");
  ASSERT_EQ(fused.size(), 1u) << dumps.final_tape();
  EXPECT_NE(fused[0].find("exp(in0)"), std::string::npos) << fused[0];
}

// Threads that need the same new kernel at once build it once; the others wait for it.
TEST(KernelCache, ConcurrentFirstCallsBuildOnce) {
  test::EventLog log;
  Fn fn = program(1.4375f);
  Array x = input();
  Array want = fn({x})[0];
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      auto f = compile_flat(fn);  // one compiled function per thread: each traces and fuses
      if (!test::bit_equal(f({x})[0], want)) mismatches++;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(log.count("compile.kernel.build"), 1);
}

TEST(KernelCache, FolderComesFromTheEnvironmentElseHome) {
  {
    ScopedEnv env("SMELT_CACHE_DIR", "/some/where");
    EXPECT_EQ(codegen::kernel_cache_dir(), "/some/where");
  }
  ScopedEnv env("SMELT_CACHE_DIR", "");
  ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(codegen::kernel_cache_dir(), "/home/someone/.cache/smelt");
}

}  // namespace
}  // namespace smelt
