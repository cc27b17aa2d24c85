// The on-disk kernel cache (shared by CPU libraries and CUDA cubins): verified reads, rejection of
// damaged or foreign entries and of things that are not files, atomic stores, LRU eviction.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <thread>

#include "smelt/telemetry.h"
#include "src/codegen/disk_cache.h"
#include "src/core/byte_size.h"
#include "env_test_utils.h"
#include "test_utils.h"

namespace smelt::codegen {
namespace {

namespace fs = std::filesystem;

using test::ScopedEnv;

/// Records the events of the disk cache while it lives.
struct Events {
  std::mutex mutex;
  std::vector<telemetry::Event> events;
  telemetry::Subscription sub{"compile.kernel.cache.*", [this](const telemetry::Event& e) {
                                std::lock_guard lock(mutex);
                                events.push_back(e);
                              }};
  std::vector<telemetry::Event> named(const std::string& name) {
    std::lock_guard lock(mutex);
    std::vector<telemetry::Event> out;
    for (auto& e : events)
      if (e.name == name) out.push_back(e);
    return out;
  }
};

/// A fresh cache folder for the test, removed after it.
class DiskCacheTest : public ::testing::Test {
 protected:
  fs::path root;
  std::optional<ScopedEnv> env;
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "smelt-disk-cache-XXXXXX").string();
    root = ::mkdtemp(tmpl.data());
    env.emplace("SMELT_CACHE_DIR", root.string());
  }
  void TearDown() override {
    env.reset();
    std::error_code ec;
    fs::remove_all(root, ec);
  }

  static CacheEntry entry(const std::string& hash, const std::string& key = "source-fnv1a=1\nflags=-O3") {
    return CacheEntry{"cpu", "cpu", hash, key, "cpp"};
  }
  fs::path path_of(const CacheEntry& e) const { return root / e.kind / (e.hash + ".kernel"); }

  /// A binary of `n` pseudo-random bytes (NUL bytes and all).
  static std::string binary(size_t n, unsigned seed) {
    std::string b(n, '\0');
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<char>((i * 2654435761u + seed) >> 7);
    return b;
  }

  /// Reads `e` and expects nothing back, the file gone and one reject event whose reason starts
  /// with `reason`.
  void expect_rejected(const CacheEntry& e, const std::string& reason) {
    Events events;
    EXPECT_FALSE(read_cache_entry(e).has_value());
    auto rejects = events.named("compile.kernel.cache.reject");
    ASSERT_EQ(rejects.size(), 1u);
    EXPECT_EQ(rejects[0].field("reason").rfind(reason, 0), 0u) << rejects[0].field("reason");
    EXPECT_EQ(rejects[0].field("hash"), e.hash);
    EXPECT_EQ(rejects[0].field("device"), "cpu");
    std::error_code ec;
    EXPECT_FALSE(fs::exists(fs::symlink_status(path_of(e), ec))) << path_of(e);
    // The place is free again: a store and a verified read work.
    ASSERT_EQ(write_cache_entry(e, binary(100, 5), "src"), "");
    EXPECT_EQ(read_cache_entry(e), binary(100, 5));
  }
};

TEST_F(DiskCacheTest, StoredEntryReadsBackWithItsSource) {
  const CacheEntry e = entry("00000000000000a1");
  EXPECT_FALSE(read_cache_entry(e).has_value());  // absent: no event, nothing
  const std::string bin = binary(5000, 1);
  ASSERT_EQ(write_cache_entry(e, bin, "int main() {}"), "");
  EXPECT_EQ(read_cache_entry(e), bin);
  std::ifstream src(root / "cpu" / "00000000000000a1.cpp");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>()), "int main() {}");
  // Only the entry and its source: the temporary files were renamed.
  EXPECT_EQ(std::distance(fs::directory_iterator(root / "cpu"), fs::directory_iterator()), 2);
  // An empty binary is a valid entry too.
  ASSERT_EQ(write_cache_entry(entry("00000000000000a2"), "", ""), "");
  EXPECT_EQ(read_cache_entry(entry("00000000000000a2")), std::string());
}

TEST_F(DiskCacheTest, TruncatedEntryIsRejected) {
  const CacheEntry e = entry("00000000000000b1");
  ASSERT_EQ(write_cache_entry(e, binary(5000, 2), "s"), "");
  fs::resize_file(path_of(e), fs::file_size(path_of(e)) - 1000);
  expect_rejected(e, "truncated: ");
}

TEST_F(DiskCacheTest, EntryShorterThanItsHeaderIsRejected) {
  const CacheEntry e = entry("00000000000000b2");
  ASSERT_EQ(write_cache_entry(e, binary(5000, 2), "s"), "");
  fs::resize_file(path_of(e), 10);
  expect_rejected(e, "truncated: 10 bytes, shorter than the header");
}

TEST_F(DiskCacheTest, DamagedBinaryFailsTheChecksum) {
  const CacheEntry e = entry("00000000000000c1");
  ASSERT_EQ(write_cache_entry(e, binary(5000, 3), "s"), "");
  {
    std::fstream f(path_of(e), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3000);
    f.write("\xcc\xcc\xcc\xcc", 4);  // the header and the size stay right
  }
  expect_rejected(e, "checksum mismatch");
}

TEST_F(DiskCacheTest, ForeignFileIsRejected) {
  const CacheEntry e = entry("00000000000000c2");
  fs::create_directories(root / "cpu");
  std::ofstream(path_of(e)) << "\x7f" "ELF and whatever a plain shared library holds, long enough for a header";
  expect_rejected(e, "bad header");
}

TEST_F(DiskCacheTest, AnotherKernelsEntryCopiedUnderTheHashIsRejected) {
  const CacheEntry mine = entry("00000000000000d1", "source-fnv1a=1");
  const CacheEntry other = entry("00000000000000d2", "source-fnv1a=2");
  ASSERT_EQ(write_cache_entry(other, binary(3000, 4), "s"), "");
  fs::create_directories(root / "cpu");
  fs::copy_file(path_of(other), path_of(mine));
  expect_rejected(mine, "key mismatch: the entry was built from 'source-fnv1a=2'");
  EXPECT_EQ(read_cache_entry(other), binary(3000, 4));  // the original is untouched
}

// A FIFO is refused without being opened in blocking mode. Should a regression block the read,
// the test opens the FIFO's other end itself, so it fails instead of hanging.
TEST_F(DiskCacheTest, FifoIsRejectedWithoutBlocking) {
  const CacheEntry e = entry("00000000000000e1");
  fs::create_directories(root / "cpu");
  ASSERT_EQ(::mkfifo(path_of(e).c_str(), 0644), 0);
  Events events;
  auto read = std::async(std::launch::async, [&] { return read_cache_entry(e); });
  if (read.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    const int fd = ::open(path_of(e).c_str(), O_WRONLY | O_NONBLOCK);  // releases a blocked reader
    if (fd >= 0) ::close(fd);
    FAIL() << "reading a FIFO entry blocked";
  }
  EXPECT_FALSE(read.get().has_value());
  auto rejects = events.named("compile.kernel.cache.reject");
  ASSERT_EQ(rejects.size(), 1u);
  EXPECT_EQ(rejects[0].field("reason"), "a FIFO");
  EXPECT_FALSE(fs::exists(fs::symlink_status(path_of(e))));
  ASSERT_EQ(write_cache_entry(e, "x", "s"), "");
  EXPECT_EQ(read_cache_entry(e), "x");
}

TEST_F(DiskCacheTest, DirectoryInTheEntrysPlaceIsRejected) {
  const CacheEntry e = entry("00000000000000e2");
  fs::create_directories(path_of(e) / "inside");
  std::ofstream(path_of(e) / "inside" / "file") << "x";
  expect_rejected(e, "a directory");
}

TEST_F(DiskCacheTest, SymbolicLinkIsRejectedNotFollowed) {
  const CacheEntry e = entry("00000000000000e3"), target = entry("00000000000000e4");
  ASSERT_EQ(write_cache_entry(target, binary(100, 6), "s"), "");
  fs::create_symlink(path_of(target), path_of(e));
  expect_rejected(e, "a symbolic link");
  EXPECT_EQ(read_cache_entry(target), binary(100, 6));  // the link's target is left alone
}

// A cache folder that cannot be created: the store fails with a reason and an event, nothing
// throws (the caller keeps its binary in memory). A regular file in the folder's way stops
// even root, so the test holds whoever runs it.
TEST_F(DiskCacheTest, UnwritableFolderFailsTheStoreWithAnEvent) {
  std::ofstream(root / "file") << "x";
  ScopedEnv env2("SMELT_CACHE_DIR", (root / "file" / "cache").string());
  Events events;
  const CacheEntry e = entry("00000000000000f1");
  const std::string err = write_cache_entry(e, binary(100, 7), "s");
  EXPECT_EQ(err.rfind("cannot create " + (root / "file" / "cache" / "cpu").string(), 0), 0u) << err;
  auto failed = events.named("compile.kernel.cache.write_failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].field("reason"), err);
  EXPECT_FALSE(read_cache_entry(e).has_value());
  EXPECT_TRUE(events.named("compile.kernel.cache.reject").empty());
}

// Past the limit the least recently used entries go, whatever their kind; a read counts as a use.
TEST_F(DiskCacheTest, EvictsLeastRecentlyUsedPastTheLimit) {
  const std::string bin = binary(10000, 8);
  const CacheEntry a = entry("0000000000000001"), b = entry("0000000000000002");
  const CacheEntry c{"cuda", "cuda:0", "0000000000000003", a.key, "cu"};  // a cubin: same limit
  const CacheEntry d = entry("0000000000000004");
  ASSERT_EQ(write_cache_entry(a, bin, "a"), "");
  const size_t one = fs::file_size(path_of(a)) + 1;  // an entry and its one-byte source
  ScopedEnv limit("SMELT_KERNEL_CACHE_LIMIT", std::to_string(3 * one));
  // Distinct, increasing use times without sleeping: set them.
  auto age = [&](const CacheEntry& e, int seconds_ago) {
    fs::last_write_time(path_of(e), fs::file_time_type::clock::now() - std::chrono::seconds(seconds_ago));
  };
  age(a, 100);
  ASSERT_EQ(write_cache_entry(b, bin, "b"), "");
  age(b, 90);
  ASSERT_EQ(write_cache_entry(c, bin, "c"), "");
  age(c, 80);
  EXPECT_EQ(read_cache_entry(a), bin);  // a is now the most recently used
  Events events;
  ASSERT_EQ(write_cache_entry(d, bin, "d"), "");  // four entries, room for three: b goes
  auto evicted = events.named("compile.kernel.cache.evict");
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].field("hash"), b.hash);
  EXPECT_EQ(evicted[0].field("kind"), "cpu");
  EXPECT_EQ(evicted[0].field("bytes"), std::to_string(one));
  EXPECT_FALSE(fs::exists(path_of(b)));
  EXPECT_FALSE(fs::exists(root / "cpu" / (b.hash + ".cpp")));  // its source went with it
  EXPECT_EQ(read_cache_entry(a), bin);
  EXPECT_EQ(read_cache_entry(c), bin);
  EXPECT_EQ(read_cache_entry(d), bin);
  // A limit below one entry keeps the entry just written, and only it.
  ScopedEnv tiny("SMELT_KERNEL_CACHE_LIMIT", "1");
  const CacheEntry e = entry("0000000000000005");
  ASSERT_EQ(write_cache_entry(e, bin, "e"), "");
  EXPECT_EQ(read_cache_entry(e), bin);
  EXPECT_EQ(events.named("compile.kernel.cache.evict").size(), 4u);
  EXPECT_EQ(evict_kernel_cache(1, path_of(e).string()), one);
}

TEST_F(DiskCacheTest, NoLimitKeepsEverything) {
  ScopedEnv limit("SMELT_KERNEL_CACHE_LIMIT", "0");
  Events events;
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(write_cache_entry(entry("000000000000010" + std::to_string(i)), binary(1000, static_cast<unsigned>(i)), "s"),
              "");
  EXPECT_TRUE(events.named("compile.kernel.cache.evict").empty());
  EXPECT_EQ(std::distance(fs::directory_iterator(root / "cpu"), fs::directory_iterator()), 10);
}

TEST_F(DiskCacheTest, StaleTemporaryFilesAreRemovedFreshOnesKept) {
  fs::create_directories(root / "cpu");
  const fs::path stale = root / "cpu" / "00000000000000aa.kernel.Xy12Zq.tmp";
  const fs::path fresh = root / "cpu" / "00000000000000ab.kernel.Ab34Cd.tmp";
  std::ofstream(stale) << "half";
  std::ofstream(fresh) << "half";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  evict_kernel_cache(size_t{1} << 30, "");
  EXPECT_FALSE(fs::exists(stale));  // a writer that died
  EXPECT_TRUE(fs::exists(fresh));   // maybe a writer at work in another process
}

TEST(DiskCacheLimit, DefaultAndEnvironment) {
  {
    ScopedEnv env("SMELT_KERNEL_CACHE_LIMIT", "256M");
    EXPECT_EQ(kernel_cache_limit(), size_t{256} << 20);
  }
  {
    ScopedEnv env("SMELT_KERNEL_CACHE_LIMIT", "lots");  // unparsable: the default, not zero
    EXPECT_EQ(kernel_cache_limit(), size_t{1} << 30);
  }
  ::unsetenv("SMELT_KERNEL_CACHE_LIMIT");
  EXPECT_EQ(kernel_cache_limit(), size_t{1} << 30);
}

TEST(ByteSize, Parses) {
  EXPECT_EQ(parse_byte_size("1073741824"), size_t{1} << 30);
  EXPECT_EQ(parse_byte_size("8G"), size_t{8} << 30);
  EXPECT_EQ(parse_byte_size("8gb"), size_t{8} << 30);
  EXPECT_EQ(parse_byte_size("512M"), size_t{512} << 20);
  EXPECT_EQ(parse_byte_size("64k"), size_t{64} << 10);
  EXPECT_EQ(parse_byte_size("0"), size_t{0});
  EXPECT_EQ(parse_byte_size(nullptr), std::nullopt);
  EXPECT_EQ(parse_byte_size(""), std::nullopt);
  EXPECT_EQ(parse_byte_size("-1"), std::nullopt);
  EXPECT_EQ(parse_byte_size("12X"), std::nullopt);
  EXPECT_EQ(parse_byte_size("1G2"), std::nullopt);
  EXPECT_EQ(parse_byte_size("99999999999999999999"), std::nullopt);
  EXPECT_EQ(parse_byte_size("17179869184G"), std::nullopt);  // 2^34 GiB overflows 64 bits
}

TEST(Checksum, Fnv1a64KnownValues) {
  // Published FNV-1a 64 test vectors.
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ull);
}

}  // namespace
}  // namespace smelt::codegen
