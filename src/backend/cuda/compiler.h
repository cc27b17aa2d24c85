// Run-time kernel builds: NVRTC for the running GPU's architecture, cached in memory and on disk.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "src/backend/cuda/runtime.h"
#include "src/codegen/disk_cache.h"

namespace smelt::cuda {

/// The device-side preamble pasted in front of every kernel: element types, conversions with
/// astype's rules (device_preamble.cpp), then the CPU's own scalar math and reduction operators
/// (scalar_math.h, reduce_math.h, embedded as text).
const char* device_preamble();

/// A compile's image and where it ran.
struct NvrtcBuild {
  std::string image;           // the cubin or PTX
  bool in_helper = false;      // compiled by a smelt-nvrtc process, not in this one
  std::string helper_problem;  // why no helper could be used ("SMELT_CUDA_NVRTC_HELPER=0", not found,
                               // its failure); "" also when this process was free to compile
};

/// Compiles `source` (the whole translation unit, preamble included) with NVRTC for compute
/// capability `compute_capability` (90 for sm_90) and smelt's options (nvrtc_program.h) to a
/// cubin (`sass`) or PTX. One compile at a time runs in this process; those that start meanwhile
/// run in smelt-nvrtc helper processes when one is found (nvrtc_process.h, which also has the
/// SMELT_CUDA_NVRTC_HELPER switch: NVRTC serializes the compiles of one process on some machines,
/// processes run side by side), and in this process when none is or the helper itself fails:
/// the same image either way. Needs NVRTC but no GPU: tests use it to check kernel sources on machines without
/// one. Throws DeviceError "<what>: NVRTC could not compile the kernel: ..." with NVRTC's log.
NvrtcBuild nvrtc_build(int compute_capability, const std::string& source, bool sass, const std::string& what);
/// nvrtc_build's image.
std::string nvrtc_compile(int compute_capability, const std::string& source, bool sass, const std::string& what);

/// NVRTC's version ("13.0"), asked once per process; "unavailable" when NVRTC cannot be loaded.
const std::string& nvrtc_version();

/// Where the cubin of `source` (the whole translation unit) for compute capability
/// `compute_capability` lives in the disk cache ($SMELT_CACHE_DIR/cuda/<hash>.kernel): the hash
/// and the key cover the source, smelt's version, the architecture, the toolkit version, NVRTC's
/// version and its options (codegen/disk_cache.h verifies both before use). Pure.
codegen::CacheEntry cubin_cache_entry(int device, int compute_capability, const std::string& source,
                                      const std::string& nvrtc_version);

struct LoadedModule;  // compiler.cpp: one loaded CUmodule, its function and its launch bookkeeping

/// A loaded kernel: its function, and a reference that keeps its module loaded. A module is
/// unloaded once nothing references it (no Kernel held by a caller, no captured graph, no entry
/// of the in-memory LRU) and the streams that launched it have run past its last launch (events
/// recorded when the last reference went; unload_retired_kernels). Hold the Kernel across the
/// launch: the LRU may let go of its entry meanwhile.
struct Kernel {
  CUfunction fn = nullptr;
  std::shared_ptr<LoadedModule> module;
  explicit operator bool() const { return fn != nullptr; }
};

/// The kernel `k` of `body` (CUDA C++ after the preamble) on GPU `device`. `key` names the kernel
/// uniquely among those of the process (op, dtypes, layout): found in memory by key without
/// building the source; else the source is built, looked up on disk under
/// $SMELT_CACHE_DIR/cuda/<hash>.kernel (source beside it as .cu), else compiled by NVRTC to SASS
/// for the device's compute capability. `what` names the op in error messages.
Kernel get_kernel(int device, const std::string& key, const std::function<std::string()>& body,
                  const std::string& what);

/// Builds the kernel `k` of `body` on GPU `device` without looking in memory: from the disk cache
/// (cubin_cache_entry; a damaged or foreign entry is deleted and rebuilt), else by NVRTC. `name`
/// names it in telemetry and launch errors. get_kernel's caches call it once per kernel (again
/// after the LRU let it go and it was unloaded).
Kernel build_kernel(int device, const std::string& name, const std::string& body, const std::string& what);

/// A kernel family's typed parameters (codegen/kernel_params.h): source() is the body generated
/// from the fields alone, name() names it, == (defaulted: every field) and hash() identify it.
template <class P>
concept KernelParams = std::equality_comparable<P> && requires(const P& p) {
  { p.source() } -> std::convertible_to<std::string>;
  { p.name() } -> std::convertible_to<std::string>;
  { p.hash() } -> std::convertible_to<size_t>;
};

/// The in-memory kernel caches. Each maps its keys to weak references; the strong ones are kept
/// by one LRU per GPU shared by every cache (kernel_cache_capacity modules), so a kernel stays
/// loaded while it is among the most recently used or someone holds it.
namespace kernel_cache_detail {

template <class P>
struct Key {
  int device;
  P params;
};
template <class P>
struct Ref {  // a lookup without copying the params
  int device;
  const P* params;
};
template <class P>
struct KeyHash {
  using is_transparent = void;
  size_t operator()(const Key<P>& k) const { return k.params.hash() * 31 + static_cast<size_t>(k.device); }
  size_t operator()(const Ref<P>& k) const { return k.params->hash() * 31 + static_cast<size_t>(k.device); }
};
template <class P>
struct KeyEqual {
  using is_transparent = void;
  bool operator()(const Key<P>& a, const Key<P>& b) const { return a.device == b.device && a.params == b.params; }
  bool operator()(const Ref<P>& a, const Key<P>& b) const { return a.device == b.device && *a.params == b.params; }
  bool operator()(const Key<P>& a, const Ref<P>& b) const { return a.device == b.device && a.params == *b.params; }
};

/// The one lock of every in-memory kernel cache and of the LRUs.
std::mutex& mutex();
/// Under mutex(): the kernel `w` refers to, marked most recently used, or an empty Kernel when
/// its module is gone. A module the LRU had let go (still held elsewhere) comes back into it, and
/// the modules that makes it let go are added to `dropped`, for the caller to drop after unlocking.
Kernel revive(const std::weak_ptr<LoadedModule>& w, std::vector<std::shared_ptr<LoadedModule>>& dropped);
/// Under mutex(): keeps `k` in its GPU's LRU. Adds the modules the LRU let go to `dropped`, for
/// the caller to drop after unlocking (the last reference records the unload's events).
void remember(const Kernel& k, std::vector<std::shared_ptr<LoadedModule>>& dropped);

/// Drops the entries of unloaded kernels once the map has doubled since the last sweep: amortized
/// constant time, and the map stays proportional to the kernels loaded. Under mutex().
template <class Map>
void prune(Map& map, size_t& prune_at) {
  if (map.size() < prune_at) return;
  std::erase_if(map, [](const auto& kv) { return kv.second.expired(); });
  prune_at = std::max<size_t>(64, 2 * map.size());
}

/// Runs `build`, the one build of a kernel that other threads may be waiting for on `built`'s
/// future: `finish(k)` runs under mutex() afterwards, with the kernel or, when `build` threw,
/// null (it removes the in-flight entry and, on success, publishes the kernel); then the waiters
/// get the kernel or the error, which is rethrown here too.
template <class Finish>
Kernel run_claimed_build(std::promise<Kernel>& built, const std::function<Kernel()>& build, Finish finish) {
  Kernel k;
  try {
    k = build();
  } catch (...) {
    {
      std::lock_guard lock(mutex());
      finish(nullptr);
    }
    built.set_exception(std::current_exception());
    throw;
  }
  {
    std::lock_guard lock(mutex());
    finish(&k);
  }
  built.set_value(k);
  return k;
}

/// One in-memory kernel cache under mutex(): the loaded kernels by key (weak: the LRU holds
/// them) and the builds in flight by the same key.
template <class K, class Hash = std::hash<K>, class Equal = std::equal_to<K>>
struct KernelMaps {
  std::unordered_map<K, std::weak_ptr<LoadedModule>, Hash, Equal> kernels;
  std::unordered_map<K, std::shared_future<Kernel>, Hash, Equal> building;
  size_t prune_at = 64;
};
/// The cache of one params type. A function of P alone: get_kernel is also a template of its
/// `what` callable, and statics there would give each call site's lambda its own maps (a prebuild
/// and the launch it runs ahead of would then build the same kernel twice).
template <class P>
KernelMaps<Key<P>, KeyHash<P>, KeyEqual<P>>& typed_cache() {
  static auto* cache = new KernelMaps<Key<P>, KeyHash<P>, KeyEqual<P>>();  // never destroyed: kernels may be released during exit
  return *cache;
}

}  // namespace kernel_cache_detail

/// The kernel `params` describe on GPU `device`, found in memory by the whole params struct (no
/// source is built on a hit), so a field that changes the source always changes the key. A
/// kernel another thread is building (a prebuild, prebuild_kernel) is waited for, not built
/// twice; its build error is rethrown here. `what()` names the operation in build errors and
/// telemetry: it is called only when the kernel is built (describing a fused program on every
/// launch cost microseconds of host time a call).
template <KernelParams P, class What>
  requires std::is_invocable_r_v<std::string, const What&>
Kernel get_kernel(int device, const P& params, const What& what) {
  using namespace kernel_cache_detail;
  auto& c = typed_cache<P>();
  std::vector<std::shared_ptr<LoadedModule>> dropped;  // released after the lock
  std::promise<Kernel> built;
  std::shared_future<Kernel> other;
  {
    std::lock_guard lock(mutex());
    if (auto it = c.kernels.find(Ref<P>{device, &params}); it != c.kernels.end())
      if (Kernel k = revive(it->second, dropped)) return k;
    if (auto it = c.building.find(Ref<P>{device, &params}); it != c.building.end()) other = it->second;
    else c.building.emplace(Key<P>{device, params}, built.get_future().share());
  }
  if (other.valid()) return other.get();
  return run_claimed_build(
      built, [&] { return build_kernel(device, params.name(), params.source(), what()); },
      [&](const Kernel* k) {
        if (k) {
          c.kernels[Key<P>{device, params}] = k->module;
          remember(*k, dropped);
          prune(c.kernels, c.prune_at);
        }
        if (auto it = c.building.find(Ref<P>{device, &params}); it != c.building.end()) c.building.erase(it);
      });
}

/// The same, named by a string.
template <KernelParams P>
Kernel get_kernel(int device, const P& params, const std::string& what) {
  return get_kernel(device, params, [&] { return what; });
}

/// Runs `job` on one of the kernel prebuild threads (half the cores, 1 to 8) and returns at
/// once: kernels a compiled program will launch are built there side by side (NVRTC takes
/// 20-60 ms a kernel) while the first call runs. An error `job` throws is dropped (the launch
/// that needs the kernel builds it again and reports it). At exit, queued jobs are dropped and
/// running ones waited for.
void prebuild_kernel(std::function<void()> job);

/// Blocks until no prebuild is queued or running (tests).
void wait_for_prebuilds();

/// How many modules GPU `device` has loaded now: those in use or in the LRU, and those whose
/// unload waits for their streams.
size_t loaded_kernel_modules(int device);
/// How many of them wait for their streams before they are unloaded.
size_t pending_kernel_unloads(int device);
/// Unloads the modules of `device` nothing references whose streams have run past their last
/// launch; returns how many (none while this thread captures a graph). Every build and release
/// calls it; tests call it after synchronizing.
size_t unload_retired_kernels(int device);

/// Modules each GPU's in-memory LRU keeps: $SMELT_CUDA_KERNEL_CACHE (a count; default 512), read
/// once. Modules held elsewhere (a launch, a captured graph) count but are never let go; 0 keeps
/// only those.
size_t kernel_cache_capacity();
/// Sets the capacity of every GPU's LRU (the least recently used modules nobody holds go at
/// once); returns the previous one.
size_t set_kernel_cache_capacity(size_t modules);

/// Launches kernel `k` with one by-value argument struct `args` on the thread's current stream of
/// the device (noted in the module, or, during a capture, the module kept by the graph): `grid`
/// blocks (folded into y past 2^31 - 1) of `block` threads, with `shared` bytes of dynamic shared
/// memory (past the default limit the kernel is opted in once, up to the device's
/// limit). The configuration is checked first (check_launch_config), and a failed launch names
/// the kernel and its configuration.
void launch(const DeviceState& s, const Kernel& k, uint64_t grid, unsigned block, void* args, const std::string& what,
            uint64_t shared = 0);

/// Launches replayed as one-kernel graphs so far in the process (a launch outside a capture that
/// repeats an earlier one exactly: stream, configuration and argument bytes; SMELT_CUDA_GRAPHS=0
/// turns it off with the other graphs).
uint64_t replayed_launches();

/// A kernel launch's configuration and the limits it must respect.
struct LaunchConfig {
  uint64_t grid_x = 1, grid_y = 1, grid_z = 1;
  uint64_t block = 1;
  uint64_t shared = 0;         // dynamic shared memory, bytes
  uint64_t static_shared = 0;  // the kernel's own __shared__ variables, bytes
  uint64_t max_shared = 0;     // the device's limit per block for both together, after opting in
};

/// What breaks a limit of the device in `c` ("a block of 2048 threads (1 to 1024)"), or "" when
/// nothing does: a block of 1 to 1024 threads, grid x below 2^31, y and z at most 65535, static
/// plus dynamic shared memory within `max_shared`. Pure (testable without a GPU).
std::string launch_config_problem(const LaunchConfig& c);

/// Throws DeviceError "<what>: kernel <name> cannot be launched: <problem>; grid ..., block ...,
/// ... shared memory" when launch_config_problem finds one. Pure.
void check_launch_config(const LaunchConfig& c, const std::string& name, const std::string& what);

/// Dynamic shared memory `k` may use on the device once opted in: the device's per-block limit
/// less the kernel's static shared memory.
uint64_t max_dynamic_shared(const DeviceState& s, const Kernel& k);

/// The key `k` was built under (get_kernel), or "?" for an empty Kernel.
std::string kernel_name(const Kernel& k);

/// The block size that gives `k` the most resident threads per SM (the driver's occupancy
/// calculator, asked once per kernel), between 128 and 1024. Kernels whose launches use it must
/// work for any block size.
unsigned occupancy_block_size(const Kernel& k);

/// Blocks of `block` threads with `shared` bytes of dynamic shared memory that fit on one SM at
/// once (at least 1), asked once per kernel: callers pass the same block and shared sizes on
/// every launch of it (persistent kernels size their grid with it).
int blocks_per_sm(const Kernel& k, unsigned block, uint64_t shared);

/// Asks (once per kernel, before its first launch) for an SM's split of on-chip memory that gives
/// shared memory room for `blocks` blocks with `shared` bytes of dynamic shared memory each and
/// leaves the rest to L1. Without it a kernel with dynamic shared memory prefers the most shared
/// memory (launch), which left W6's row kernel 28 KiB of L1: its 32 KiB of weight and bias were
/// read from L2 for every row.
void prefer_shared_memory(const DeviceState& s, const Kernel& k, int blocks, uint64_t shared);

/// Blocks of `block` threads covering n items (at least 1).
inline uint64_t blocks_for(int64_t n, int64_t per_block) {
  return n <= 0 ? 1 : static_cast<uint64_t>((n + per_block - 1) / per_block);
}

}  // namespace smelt::cuda
