// The on-disk kernel cache: checksummed, keyed entries written atomically, verified before use,
// evicted least-recently-used past a size limit. Shared by the CPU and CUDA kernel builders.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace smelt::codegen {

/// Where one compiled kernel lives in the cache: $SMELT_CACHE_DIR/<kind>/<hash>.kernel, its
/// source beside it as <hash>.<source_ext> (for people reading it; never loaded).
///
/// An entry file is a header (magic, format version, key length, binary length, checksum), the
/// key, then the binary. The key is the text the hash was computed from minus the source itself
/// (the source's own hash, compiler, flags, smelt's version), so another kernel's entry copied
/// under this hash is refused even though it is well formed. The checksum (64-bit FNV-1a over
/// key and binary) catches truncation and damaged bytes; it is not a defence against someone
/// who may write the cache folder, who could as well write any library there.
struct CacheEntry {
  std::string kind;        // "cpu" or "cuda": the subfolder
  std::string device;      // for events: "cpu", "cuda:0"
  std::string hash;        // 16 hex digits
  std::string key;         // what the hash covers, minus the source
  std::string source_ext;  // "cpp", "cu"
};

/// The verified binary of `entry`, or nothing when there is none. An entry that is not a regular
/// file (a FIFO, a directory, a symbolic link, a device), is short, has a bad header, another key
/// or a wrong checksum is deleted and reported (`compile.kernel.cache.reject`, with `reason`).
/// A FIFO is never opened in blocking mode. A hit marks the entry as used now (its mtime), for
/// the LRU eviction.
std::optional<std::string> read_cache_entry(const CacheEntry& entry);

/// Deletes `entry` and reports `compile.kernel.cache.reject` with `reason`: for callers that
/// found a verified binary unusable (the loader refused it).
void reject_cache_entry(const CacheEntry& entry, const std::string& reason);

/// Stores `binary` (and `source`) under `entry`: written to a temporary file in the same folder,
/// then renamed, so no process ever sees part of an entry. Then evicts the least recently used
/// entries of the whole cache past kernel_cache_limit(), never this one. Returns an empty string,
/// else why the entry could not be stored (an unwritable or full disk: the caller still has the
/// binary in memory; the event `compile.kernel.cache.write_failed` says so).
std::string write_cache_entry(const CacheEntry& entry, const std::string& binary, const std::string& source);

/// The disk cache's size limit in bytes: $SMELT_KERNEL_CACHE_LIMIT (bytes, or with a K/M/G
/// suffix; 0 for no limit), default 1 GiB. Read on every store.
size_t kernel_cache_limit();

/// Removes the least recently used entries of $SMELT_CACHE_DIR (every kind) until the total size
/// of entries and their sources is at most `limit`, keeping the entry `keep` (a path, may be
/// empty); emits `compile.kernel.cache.evict` per entry. Also removes temporary files that a
/// crashed writer left more than an hour ago. Returns the bytes left.
size_t evict_kernel_cache(size_t limit, const std::string& keep);

/// The disk cache folder: $SMELT_CACHE_DIR, else ~/.cache/smelt (created on first store).
std::string kernel_cache_dir();

/// 64-bit FNV-1a: the kernels' hashes and the entries' checksums.
uint64_t fnv1a64(const void* data, size_t size, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace smelt::codegen
