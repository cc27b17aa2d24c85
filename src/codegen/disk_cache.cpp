// The on-disk kernel cache: entry format, verification before use, atomic stores, LRU eviction.
#include "src/codegen/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

#include "smelt/telemetry.h"
#include "src/core/byte_size.h"

namespace smelt::codegen {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'S', 'M', 'E', 'L', 'T', 'K', 'C', '1'};
constexpr size_t kDefaultLimit = size_t{1} << 30;
constexpr const char* kEntryExt = ".kernel";
constexpr const char* kTempExt = ".tmp";
// A temporary file older than this belongs to a writer that died (a write takes milliseconds).
constexpr auto kStaleTemp = std::chrono::hours(1);
// No kernel binary comes near this: a bigger "entry" is refused before it is read into memory.
constexpr uint64_t kMaxEntry = uint64_t{1} << 30;

// Little-endian fixed layout, written field by field (no struct padding in the format).
struct Header {
  uint32_t key_size = 0;
  uint64_t binary_size = 0;
  uint64_t checksum = 0;
};
constexpr size_t kHeaderSize = sizeof kMagic + 4 + 8 + 8;

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

uint64_t checksum(const std::string& key, const char* binary, size_t size) {
  return fnv1a64(binary, size, fnv1a64(key.data(), key.size()));
}

fs::path folder(const CacheEntry& e) { return fs::path(kernel_cache_dir()) / e.kind; }
fs::path entry_path(const CacheEntry& e) { return folder(e) / (e.hash + kEntryExt); }
fs::path source_path(const CacheEntry& e) { return folder(e) / (e.hash + "." + e.source_ext); }

void emit(const char* name, const CacheEntry& e, std::initializer_list<std::pair<std::string, std::string>> more) {
  if (!telemetry::enabled()) return;
  telemetry::Event ev{name, 0.0, {{"device", e.device}, {"hash", e.hash}}};
  for (auto& kv : more) ev.fields.insert(kv);
  telemetry::emit(ev);
}

// Removes whatever is at `p` without following a link: a directory in an entry's place goes with
// its contents (it is in smelt's own folder, under smelt's own name).
void remove_path(const fs::path& p) {
  std::error_code ec;
  const auto st = fs::symlink_status(p, ec);
  if (ec) return;
  if (st.type() == fs::file_type::directory) fs::remove_all(p, ec);
  else fs::remove(p, ec);
}

// Reads the whole of `fd` (a regular file of `size` bytes); false if it changed size meanwhile.
bool read_all(int fd, size_t size, std::string& out) {
  out.resize(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  char extra;
  return ::read(fd, &extra, 1) == 0;
}

std::string file_type_name(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  return "not a regular file";
}

// Writes `data` to a new temporary file in `dir` and renames it to `target`; "" or why not.
std::string write_atomically(const fs::path& dir, const fs::path& target, const std::string& data) {
  std::string tmpl = (dir / (target.filename().string() + ".XXXXXX" + kTempExt)).string();
  const int fd = ::mkstemps(tmpl.data(), static_cast<int>(std::strlen(kTempExt)));
  if (fd < 0) return "cannot create a file in " + dir.string() + ": " + std::strerror(errno);
  ::fchmod(fd, 0644);  // mkstemp's 0600 would hide the cache from other users sharing it
  size_t done = 0;
  std::string err;
  while (done < data.size() && err.empty()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) err = "cannot write " + tmpl + ": " + std::strerror(n < 0 ? errno : ENOSPC);
    else done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && err.empty()) err = "cannot write " + tmpl + ": " + std::strerror(errno);
  if (err.empty() && ::rename(tmpl.c_str(), target.c_str()) != 0)
    err = "cannot rename into " + target.string() + ": " + std::strerror(errno);
  if (!err.empty()) ::unlink(tmpl.c_str());
  return err;
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t size, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::string kernel_cache_dir() {
  const char* env = std::getenv("SMELT_CACHE_DIR");
  if (env && *env) return env;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/smelt";
}

size_t kernel_cache_limit() { return byte_size_from_env("SMELT_KERNEL_CACHE_LIMIT", kDefaultLimit); }

void reject_cache_entry(const CacheEntry& entry, const std::string& reason) {
  const fs::path p = entry_path(entry);
  remove_path(p);
  emit("compile.kernel.cache.reject", entry, {{"reason", reason}, {"path", p.string()}});
}

std::optional<std::string> read_cache_entry(const CacheEntry& entry) {
  const fs::path p = entry_path(entry);
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  // O_NOFOLLOW: a link in the entry's place is refused, not followed to whatever it names.
  const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return std::nullopt;  // not cached (or no folder yet)
    reject_cache_entry(entry, err == ELOOP ? "a symbolic link" : std::string("cannot open: ") + std::strerror(err));
    return std::nullopt;
  }
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_fd{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    reject_cache_entry(entry, std::string("cannot stat: ") + std::strerror(errno));
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    reject_cache_entry(entry, file_type_name(st.st_mode));
    return std::nullopt;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderSize) {
    reject_cache_entry(entry, "truncated: " + std::to_string(size) + " bytes, shorter than the header");
    return std::nullopt;
  }
  if (size > kMaxEntry) {
    reject_cache_entry(entry, "too large: " + std::to_string(size) + " bytes");
    return std::nullopt;
  }
  std::string data;
  if (!read_all(fd, static_cast<size_t>(size), data)) {
    reject_cache_entry(entry, "changed size while being read");
    return std::nullopt;
  }
  if (std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    reject_cache_entry(entry, "bad header: not a smelt kernel cache entry");
    return std::nullopt;
  }
  Header h;
  h.key_size = static_cast<uint32_t>(get(data.data() + 8, 4));
  h.binary_size = get(data.data() + 12, 8);
  h.checksum = get(data.data() + 20, 8);
  const uint64_t want = kHeaderSize + uint64_t{h.key_size} + h.binary_size;
  if (h.binary_size > kMaxEntry || want != size) {
    reject_cache_entry(entry, (want > size ? "truncated: " : "wrong size: ") + std::to_string(size) +
                                  " bytes, the header says " + std::to_string(want));
    return std::nullopt;
  }
  const std::string key = data.substr(kHeaderSize, h.key_size);
  if (key != entry.key) {
    reject_cache_entry(entry, "key mismatch: the entry was built from '" + key + "'");
    return std::nullopt;
  }
  const char* binary = data.data() + kHeaderSize + h.key_size;
  if (checksum(key, binary, static_cast<size_t>(h.binary_size)) != h.checksum) {
    reject_cache_entry(entry, "checksum mismatch");
    return std::nullopt;
  }
  ::futimens(fd, nullptr);  // used now: the LRU order (a read-only cache just keeps its order)
  return std::string(binary, static_cast<size_t>(h.binary_size));
}

std::string write_cache_entry(const CacheEntry& entry, const std::string& binary, const std::string& source) {
  const fs::path dir = folder(entry);
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::string err;
  if (ec) err = "cannot create " + dir.string() + ": " + ec.message();
  if (err.empty()) {
    // The source first: an entry never lacks its source, and eviction removes both.
    err = write_atomically(dir, source_path(entry), source);
  }
  if (err.empty()) {
    std::string data(kMagic, sizeof kMagic);
    put(data, entry.key.size(), 4);
    put(data, binary.size(), 8);
    put(data, checksum(entry.key, binary.data(), binary.size()), 8);
    data += entry.key;
    data += binary;
    err = write_atomically(dir, entry_path(entry), data);
  }
  if (!err.empty()) {
    emit("compile.kernel.cache.write_failed", entry, {{"reason", err}});
    return err;
  }
  if (const size_t limit = kernel_cache_limit(); limit != 0) evict_kernel_cache(limit, entry_path(entry).string());
  return {};
}

size_t evict_kernel_cache(size_t limit, const std::string& keep) {
  // One eviction at a time in this process; other processes may evict concurrently, and a file
  // another process removed first is simply gone (readers hold their own descriptors).
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  struct Found {
    fs::file_time_type used;
    size_t bytes;
    fs::path entry, source;
    std::string kind;
  };
  std::vector<Found> entries;
  size_t total = 0;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const char* kind : {"cpu", "cuda"}) {
    const fs::path dir = fs::path(kernel_cache_dir()) / kind;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path& p = it->path();
      const std::string name = p.filename().string();
      std::error_code fe;
      if (!it->is_regular_file(fe)) continue;
      const auto mtime = fs::last_write_time(p, fe);
      if (fe) continue;
      if (name.size() > 4 && name.ends_with(kTempExt)) {
        if (now - mtime > kStaleTemp) fs::remove(p, fe);
        continue;
      }
      if (!name.ends_with(kEntryExt)) continue;  // sources are counted with their entry
      const std::string stem = name.substr(0, name.size() - std::strlen(kEntryExt));
      size_t bytes = static_cast<size_t>(fs::file_size(p, fe));
      fs::path source;
      for (const char* ext : {".cpp", ".cu"})
        if (fs::exists(dir / (stem + ext), fe)) {
          source = dir / (stem + ext);
          bytes += static_cast<size_t>(fs::file_size(source, fe));
        }
      total += bytes;
      entries.push_back({mtime, bytes, p, source, kind});
    }
    ec.clear();
  }
  if (total <= limit) return total;
  std::sort(entries.begin(), entries.end(), [](const Found& a, const Found& b) { return a.used < b.used; });
  for (const Found& f : entries) {
    if (total <= limit) break;
    if (f.entry.string() == keep) continue;
    std::error_code fe;
    fs::remove(f.entry, fe);
    if (!f.source.empty()) fs::remove(f.source, fe);
    total -= f.bytes;
    if (telemetry::enabled()) {
      const std::string name = f.entry.filename().string();
      telemetry::emit({"compile.kernel.cache.evict",
                       0.0,
                       {{"kind", f.kind},
                        {"hash", name.substr(0, name.size() - std::strlen(kEntryExt))},
                        {"bytes", std::to_string(f.bytes)}}});
    }
  }
  return total;
}

}  // namespace smelt::codegen
