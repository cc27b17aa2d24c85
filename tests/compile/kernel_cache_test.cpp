// Generated-kernel caches: in memory across compiled functions and threads, on disk across
// processes, entries that are damaged, foreign or not files at all (rejected and rebuilt), an
// unwritable cache folder, eviction past the size limit, unloading of kernels no longer used,
// and the fallback when no compiler works.
//
// Each test that needs a build uses a program no other test builds (a constant of its own) and
// a fresh SMELT_CACHE_DIR. Tests about a second process re-run this binary on the helper test
// KernelCacheChild.Run, which does nothing unless SMELT_KERNEL_CACHE_CHILD names a report file.
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <optional>
#include <set>
#include <thread>

#include "compile_helpers.h"
#include "env_test_utils.h"
#include "src/codegen/kernel_builder.h"

namespace smelt {
namespace {

namespace fs = std::filesystem;
using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

using test::ScopedEnv;

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
  test::EventLog log;
  auto events = build(c);
  std::ofstream f(report);
  f << "builds=" << events.size() << "\n";
  for (auto& r : log.field("compile.kernel.cache.reject", "reason")) f << "reject=" << r << "\n";
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
  // The entry (checksummed library) and its source are in the cache folder under the hash; no
  // temporary is left.
  const fs::path cpu = dir.path / "cpu";
  EXPECT_TRUE(fs::exists(cpu / (e.field("hash") + ".kernel")));
  EXPECT_TRUE(fs::exists(cpu / (e.field("hash") + ".cpp")));
  EXPECT_EQ(std::distance(fs::directory_iterator(cpu), fs::directory_iterator()), 2);
}

// Kernels are keyed by their source: compiled functions with the same chain share one build
// (or one load from disk, on a second run of the tests).
TEST(KernelCache, FunctionsWithTheSameChainShareOneKernel) {
  // The first function keeps the kernel loaded (a kernel nothing uses is unloaded).
  Fn fn = program(1.125f);
  test::EventLog first;
  auto f = compile_flat(fn);
  EXPECT_TRUE(test::bit_equal(f({input()})[0], fn({input()})[0]));
  EXPECT_EQ(first.count("compile.kernel.build"), 1);
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
  const fs::path so = dir.path / "cpu" / (events[0].field("hash") + ".kernel");
  std::ofstream(so, std::ios::trunc) << "not a shared library";  // in place: loaded copies are in memory
  auto child = run_child(1.25f, dir.path, dir.path / "report.txt");
  EXPECT_EQ(child["ok"], "true");
  EXPECT_EQ(child["builds"], "1");
  EXPECT_EQ(child["cached_on_disk"], "false");
  EXPECT_EQ(child["reject"], "truncated: 20 bytes, shorter than the header");
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
  EXPECT_FALSE(fs::exists(dir.path / "cpu"));
  EXPECT_EQ(build(1.3125f).size(), 1u);
}

// Groups whose kernels are already loaded stay fused when a later build fails.
TEST(KernelCache, FailingCompilerKeepsLoadedKernels) {
  TempDir dir;
  ScopedEnv cache("SMELT_CACHE_DIR", dir.path.string());
  Fn loaded = program(1.375f);
  auto keep = compile_flat(loaded);  // holds the kernel loaded
  EXPECT_TRUE(test::bit_equal(keep({input()})[0], loaded({input()})[0]));
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
  // One compiled function per thread: each traces and fuses. They live until every thread is
  // done, so no thread finds the kernel already unloaded by a faster one.
  std::vector<Compiled<std::vector<Array>, const std::vector<Array>&>> fs_;
  for (int t = 0; t < 4; ++t) fs_.push_back(compile_flat(fn));
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      if (!test::bit_equal(fs_[t]({x})[0], want)) mismatches++;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(log.count("compile.kernel.build"), 1);
}

// ---- entries that cannot be trusted: rejected, deleted, rebuilt -----------------------------

/// The kernel's entry in the cache folder `dir`.
fs::path entry_path(const fs::path& dir, const std::string& hash) { return dir / "cpu" / (hash + ".kernel"); }

/// Builds program `c` in `dir`, lets `damage` spoil its entry, and builds it again after the
/// first kernel was unloaded (so the second build reads the disk). The second build must
/// rebuild (results checked by build()) and leave a good entry that a third build loads. Returns
/// the reasons of the reject events. The second build runs on another thread with a time limit:
/// should a regression block on a FIFO, the test opens the FIFO's other end (releasing it) and
/// fails instead of hanging.
std::vector<std::string> damage_and_rebuild(float c, const fs::path& dir,
                                            const std::function<void(const fs::path& entry)>& damage) {
  auto first = build(c);
  if (first.size() != 1u) {
    ADD_FAILURE() << "the first build did not build";
    return {};
  }
  const fs::path entry = entry_path(dir, first[0].field("hash"));
  EXPECT_TRUE(fs::is_regular_file(entry));
  damage(entry);
  test::EventLog log;
  auto second = std::async(std::launch::async, [c] { return build(c); });
  if (second.wait_for(std::chrono::minutes(5)) != std::future_status::ready) {
    const int fd = ::open(entry.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    ADD_FAILURE() << "the build blocked on the damaged entry";
    second.wait();
    return {};
  }
  auto rebuilt = second.get();
  EXPECT_EQ(rebuilt.size(), 1u);
  if (rebuilt.size() == 1u) {
    EXPECT_EQ(rebuilt[0].field("cached_on_disk"), "false");
    EXPECT_EQ(rebuilt[0].field("hash"), first[0].field("hash"));
  }
  auto rejects = log.named("compile.kernel.cache.reject");
  for (auto& r : rejects) {
    EXPECT_EQ(r.field("hash"), first[0].field("hash"));
    EXPECT_EQ(r.field("device"), "cpu");
  }
  EXPECT_TRUE(fs::is_regular_file(entry));
  auto third = build(c);
  EXPECT_EQ(third.size(), 1u);
  if (third.size() == 1u) {
    EXPECT_EQ(third[0].field("cached_on_disk"), "true");
  }
  return log.field("compile.kernel.cache.reject", "reason");
}

TEST(KernelCache, TruncatedEntryIsRejectedAndRebuilt) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  auto reasons = damage_and_rebuild(1.5f, dir.path, [](const fs::path& entry) {
    fs::resize_file(entry, fs::file_size(entry) / 2);  // in place, as a full disk leaves it
  });
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0].rfind("truncated: ", 0), 0u) << reasons[0];
}

// Garbage over the code with every header intact (the ELF header and the entry's): only the
// checksum can tell, and it does, before anything is loaded.
TEST(KernelCache, GarbageInTheCodeFailsTheChecksum) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  auto reasons = damage_and_rebuild(1.53125f, dir.path, [](const fs::path& entry) {
    const auto size = fs::file_size(entry);
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    const std::string junk(256, '\xcc');  // int3 over whatever was there
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  });
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0], "checksum mismatch");
}

// Another kernel's well-formed entry under this kernel's hash would run other code: the key
// stored in the entry (its source's hash among others) refuses it.
TEST(KernelCache, AnotherKernelsEntryUnderTheHashIsRejected) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  auto other = build(1.546875f);
  ASSERT_EQ(other.size(), 1u);
  const fs::path other_entry = entry_path(dir.path, other[0].field("hash"));
  auto reasons = damage_and_rebuild(1.5625f, dir.path, [&](const fs::path& entry) {
    fs::copy_file(other_entry, entry, fs::copy_options::overwrite_existing);
  });
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0].rfind("key mismatch: the entry was built from 'source-fnv1a=", 0), 0u) << reasons[0];
  EXPECT_TRUE(fs::is_regular_file(other_entry));  // the other kernel's own entry stays
}

// An entry whose checksum and key are right but whose binary the loader refuses (written by a
// broken toolchain, say): rejected when dlopen fails, and rebuilt.
TEST(KernelCache, EntryTheLoaderRefusesIsRejected) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  auto reasons = damage_and_rebuild(1.5703125f, dir.path, [](const fs::path& entry) {
    std::ifstream f(entry, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_GT(data.size(), 28u);
    uint32_t key_size = 0;
    for (int i = 0; i < 4; ++i) key_size |= static_cast<uint32_t>(static_cast<unsigned char>(data[8 + i])) << (8 * i);
    const std::string key = data.substr(28, key_size);  // after magic, key size, binary size, checksum
    const std::string hash = entry.stem().string();
    ASSERT_EQ(codegen::write_cache_entry({"cpu", "cpu", hash, key, "cpp"}, "not an ELF file at all", "// source"), "");
  });
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0].rfind("cannot load: ", 0), 0u) << reasons[0];
}

TEST(KernelCache, FifoInTheEntrysPlaceIsRejectedWithoutHanging) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  auto reasons = damage_and_rebuild(1.578125f, dir.path, [](const fs::path& entry) {
    fs::remove(entry);
    ASSERT_EQ(::mkfifo(entry.c_str(), 0644), 0);
  });
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0], "a FIFO");
}

TEST(KernelCache, DirectoryInTheEntrysPlaceIsRejected) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  auto reasons = damage_and_rebuild(1.59375f, dir.path, [](const fs::path& entry) {
    fs::remove(entry);
    fs::create_directories(entry / "sub");
  });
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0], "a directory");
}

// A cache folder that cannot be made (a file in its way stops root too): kernels are built in a
// private temporary folder, loaded from memory and run; each process then builds them again.
TEST(KernelCache, UnwritableCacheFolderStillBuildsAndRuns) {
  TempDir dir;
  std::ofstream(dir.path / "file") << "x";
  ScopedEnv env("SMELT_CACHE_DIR", (dir.path / "file" / "cache").string());
  test::EventLog log;
  auto first = build(1.609375f);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].field("cached_on_disk"), "false");
  auto failed = log.field("compile.kernel.cache.write_failed", "reason");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].rfind("cannot create " + (dir.path / "file" / "cache" / "cpu").string(), 0), 0u) << failed[0];
  auto again = build(1.609375f);  // unloaded meanwhile, and not on disk: built again
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].field("cached_on_disk"), "false");
  EXPECT_EQ(log.count("compile.kernel.cache.reject"), 0);
}

// Past SMELT_KERNEL_CACHE_LIMIT the least recently used entries go; loading an entry uses it.
TEST(KernelCache, EvictsLeastRecentlyUsedEntriesPastTheLimit) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  auto a = build(1.625f);
  ASSERT_EQ(a.size(), 1u);
  const std::string ha = a[0].field("hash");
  const size_t one = fs::file_size(entry_path(dir.path, ha)) + fs::file_size(dir.path / "cpu" / (ha + ".cpp"));
  ScopedEnv limit("SMELT_KERNEL_CACHE_LIMIT", std::to_string(one * 5 / 2));  // room for two
  auto b = build(1.640625f);
  ASSERT_EQ(b.size(), 1u);
  const std::string hb = b[0].field("hash");
  auto a_again = build(1.625f);  // from disk: a is now more recently used than b
  ASSERT_EQ(a_again.size(), 1u);
  EXPECT_EQ(a_again[0].field("cached_on_disk"), "true");
  test::EventLog log;
  auto c = build(1.65625f);
  ASSERT_EQ(c.size(), 1u);
  auto evicted = log.field("compile.kernel.cache.evict", "hash");
  ASSERT_EQ(evicted, std::vector<std::string>{hb});
  EXPECT_FALSE(fs::exists(entry_path(dir.path, hb)));
  EXPECT_FALSE(fs::exists(dir.path / "cpu" / (hb + ".cpp")));
  EXPECT_TRUE(fs::exists(entry_path(dir.path, ha)));
  EXPECT_TRUE(fs::exists(entry_path(dir.path, c[0].field("hash"))));
  // The evicted kernel still works: it is built again.
  auto b_again = build(1.640625f);
  ASSERT_EQ(b_again.size(), 1u);
  EXPECT_EQ(b_again[0].field("cached_on_disk"), "false");
}

/// Distinct generated-kernel libraries mapped into this process (/proc/self/maps): proves an
/// unload really unmapped the code, not just that a counter went down.
size_t mapped_kernel_libraries() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> names;
  for (std::string line; std::getline(maps, line);)
    if (auto at = line.find("memfd:smelt-kernel-"); at != std::string::npos) names.insert(line.substr(at));
  return names.size();
}

TEST(KernelCache, KernelsNoLongerUsedAreUnloaded) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  const size_t loaded = codegen::loaded_cpu_kernels(), mapped = mapped_kernel_libraries();
  test::EventLog log;
  {
    Fn fn = program(1.671875f);
    auto f = compile_flat(fn);
    EXPECT_TRUE(test::bit_equal(f({input()})[0], fn({input()})[0]));
    EXPECT_EQ(codegen::loaded_cpu_kernels(), loaded + 1);
    EXPECT_EQ(mapped_kernel_libraries(), mapped + 1);
    EXPECT_EQ(log.count("compile.kernel.unload"), 0);
  }
  EXPECT_EQ(codegen::loaded_cpu_kernels(), loaded);
  EXPECT_EQ(mapped_kernel_libraries(), mapped);
  EXPECT_EQ(log.field("compile.kernel.unload", "hash"), log.field("compile.kernel.build", "hash"));
}

// Issue #12: a static float with a new value per call makes a new kernel per call. The compiled
// function's LRU (cache_capacity entries) drops old entries, and their kernels are unloaded, so
// the loaded kernels stay bounded by the capacity.
TEST(KernelCache, NewConstantPerCallKeepsLoadedKernelsBounded) {
  TempDir dir;
  ScopedEnv env("SMELT_CACHE_DIR", dir.path.string());
  const size_t loaded = codegen::loaded_cpu_kernels(), mapped = mapped_kernel_libraries();
  CompileOptions options;
  options.cache_capacity = 2;
  auto eager = [](const Array& x, float k) { return exp(x) * k + k; };
  auto f = compile(eager, options);
  test::EventLog log;
  const Array x = input();
  const int calls = 6;
  for (int i = 0; i < calls; ++i) {
    const float k = 1.6875f + static_cast<float>(i) / 64.0f;
    EXPECT_TRUE(test::bit_equal(f(x, k), eager(x, k))) << k;
    EXPECT_LE(codegen::loaded_cpu_kernels(), loaded + 2) << "call " << i;
  }
  EXPECT_EQ(log.count("compile.kernel.build"), calls);  // one kernel per constant...
  EXPECT_EQ(f.stats().evictions, static_cast<uint64_t>(calls - 2));
  EXPECT_EQ(log.count("compile.kernel.unload"), calls - 2);  // each evicted entry's kernel
  EXPECT_LE(mapped_kernel_libraries(), mapped + 2);  // ...but never more than two at a time
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
