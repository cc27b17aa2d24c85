// NVRTC builds of the CUDA kernels with an in-memory and an on-disk cache.
//
// Why NVRTC and not nvcc at build time: the fused kernels of the compile layer must be built at
// run time anyway, and one compilation path for both keeps unfused and fused math identical;
// kernels are specialized to the exact op, dtypes and layout (no template explosion in the
// library build, which CI compiles without a GPU); and the code is SASS for the GPU that runs,
// whatever it is. The disk cache makes the cost a one-time one per machine.
#include "src/backend/cuda/compiler.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "smelt/errors.h"
#include "smelt/telemetry.h"
#include "src/backend/cuda/graph.h"
#include "src/backend/cuda/kernel_lifetime.h"
#include "src/backend/cuda/nvrtc_process.h"
#include "src/backend/cuda/nvrtc_program.h"
#include "src/codegen/disk_cache.h"

namespace smelt::cuda {

namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  return codegen::fnv1a64(s.data(), s.size(), h);
}

std::string hex64(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

/// Per kernel: its static shared memory and the dynamic shared memory it is opted in to.
struct SharedInfo {
  bool known = false;     // static_bytes asked
  uint64_t static_bytes = 0;
  uint64_t opted_in = 0;  // 0: the default limit
  bool carveout = false;  // asked to prefer shared memory over L1
};

/// A module whose last reference went, waiting for the streams that launched it.
struct PendingUnload {
  int device = 0;
  CUmodule module = nullptr;
  std::string name, hash;
  std::vector<CUevent> events;  // one per stream that launched it, recorded when it was retired
};

struct Unloads {
  std::mutex mutex;
  DeferredReleases<PendingUnload> pending;
  std::unordered_map<int, size_t> loaded;  // per GPU: modules loaded and not yet unloaded
};

Unloads& unloads() {
  static Unloads* u = new Unloads();  // never destroyed: modules may be retired during exit
  return *u;
}

void retire_module(int device, CUmodule module, std::string name, std::string hash, std::vector<CUstream> streams);

/// A launch of a module's kernel seen before: its stream, configuration and argument bytes, and
/// once it has been seen twice, a one-kernel graph that replays it.
struct RepeatedLaunch {
  CUstream stream = nullptr;
  uint64_t grid_x = 0, grid_y = 0, block = 0, shared = 0;
  std::string args;            // the argument struct's bytes
  CUgraphExec exec = nullptr;  // null: not instantiated yet
  int seen = 1;                // sightings so far
  uint64_t used = 0;           // the module's repeat_clock at the last use
};

/// Destroys the graphs of a module's repeated launches (one still running is freed by the driver
/// when it completes).
void drop_repeats(int device, std::vector<RepeatedLaunch>& repeats) {
  const DriverApi* d = driver();
  if (!d) return;
  bool any = false;
  for (const RepeatedLaunch& r : repeats) any = any || r.exec;
  if (!any) return;
  try {
    device_state(device);  // the graphs' context, current on this thread
  } catch (...) {
    return;  // the device is gone (exit)
  }
  for (RepeatedLaunch& r : repeats)
    if (r.exec) d->cuGraphExecDestroy(r.exec);
  repeats.clear();
}

}  // namespace

/// One loaded module and the kernel `k` in it. The last reference (Kernel, LRU, captured graph)
/// retires it: events are recorded on the streams that launched it, and the module is unloaded
/// once they have passed (unload_retired_kernels).
struct LoadedModule {
  int device = 0;
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  std::string name;  // get_kernel's key: launch errors and telemetry
  std::string hash;  // the disk cache's
  std::mutex mutex;  // guards streams and shared
  std::vector<CUstream> streams;  // where it was launched outside captures (streams live for good)
  std::atomic<CUstream> last_stream{nullptr};  // the hot path's check: launched here before
  SharedInfo shared;
  std::atomic<unsigned> occupancy_block{0};  // 0: not asked yet
  std::atomic<int> resident_blocks{0};       // blocks_per_sm's answer; 0: not asked yet
  // Launches that repeat, replayed as one-kernel graphs (replay_launch), under `mutex`.
  int param_bytes = -1;  // the size of k's one parameter; 0: not replayable; -1: not asked yet
  std::vector<RepeatedLaunch> repeats;
  uint64_t repeat_clock = 0;
  uint64_t graphs_made = 0, graph_launches = 0;  // whether instantiating pays off for this kernel

  LoadedModule() = default;
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;
  ~LoadedModule() {
    drop_repeats(device, repeats);  // before the unload: the graphs hold the function
    retire_module(device, module, std::move(name), std::move(hash), std::move(streams));
  }
};

namespace {

/// The string-keyed in-memory cache (the template one lives in compiler.h).
/// The string-keyed kernels, by "<device>|<key>".
kernel_cache_detail::KernelMaps<std::string>& string_cache() {
  static auto* c = new kernel_cache_detail::KernelMaps<std::string>();  // never destroyed: kernels may be released during exit
  return *c;
}

/// The LRUs, one per GPU, under kernel_cache_detail::mutex().
struct Lrus {
  size_t capacity = 0;
  std::unordered_map<int, KeepLru<LoadedModule>> by_device;
  KeepLru<LoadedModule>& of(int device) { return by_device.try_emplace(device, capacity).first->second; }
};

Lrus& lrus() {
  static Lrus* l = [] {
    auto* x = new Lrus();  // never destroyed, like the caches
    x->capacity = 512;
    if (const char* env = std::getenv("SMELT_CUDA_KERNEL_CACHE"); env && *env >= '0' && *env <= '9') {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(env, &end, 10);
      if (end && *end == '\0') x->capacity = static_cast<size_t>(v);
    }
    return x;
  }();
  return *l;
}

std::string error_name(CUresult r) {
  const char* name = nullptr;
  if (const DriverApi* d = driver(); d && d->cuGetErrorName) d->cuGetErrorName(r, &name);
  return name ? name : "CUDA error " + std::to_string(r);
}

/// Records the unload of `module`: an event on each stream that launched it (work queued there
/// so far includes its every launch, since the caller held it while launching), then unloads
/// what is ready. Never throws: it runs in destructors, possibly during exit.
void retire_module(int device, CUmodule module, std::string name, std::string hash, std::vector<CUstream> streams) {
  const DriverApi* d = driver();
  if (!d || !module) return;
  try {
    device_state(device);  // the module's context, current on this thread
  } catch (...) {
    return;  // the device is gone (exit): nothing to unload into
  }
  PendingUnload p{device, module, std::move(name), std::move(hash), {}};
  for (CUstream st : streams) {
    CUevent e = nullptr;
    if (d->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS && d->cuEventRecord(e, st) == CUDA_SUCCESS) {
      p.events.push_back(e);
      continue;
    }
    if (e) d->cuEventDestroy(e);
    d->cuStreamSynchronize(st);  // no event: wait here instead (rare: the driver is failing)
  }
  {
    auto& u = unloads();
    std::lock_guard lock(u.mutex);
    u.pending.push(std::move(p));
  }
  try {
    unload_retired_kernels(device);
  } catch (...) {
  }
}

}  // namespace

NvrtcBuild nvrtc_build(int compute_capability, const std::string& source, bool sass, const std::string& what) {
  const NvrtcApi& n = nvrtc();  // throws when NVRTC cannot be loaded here: the helper would not find it either
  NvrtcBuild build;
  std::optional<NvrtcOutcome> out;
  // One compile at a time runs here (the slot), the others in helpers: a lone compile does not
  // pay a helper's start (20 ms of NVRTC's own set-up per process), and compiles that overlap
  // run side by side even where NVRTC serializes those of one process.
  static std::atomic<bool> slot_taken{false};
  struct Slot {
    bool held = false;
    ~Slot() {
      if (held) slot_taken.store(false);
    }
  } slot;
  bool always = false;
  if (const std::string helper = nvrtc_helper_path(build.helper_problem, always); !helper.empty()) {
    slot.held = !always && !slot_taken.exchange(true);
    if (!slot.held) {
      out = compile_in_helper(helper, nvrtc_library_path(n), compute_capability, source, sass, build.helper_problem);
      build.in_helper = out.has_value();
    }
  }
  if (!out) out = run_nvrtc(n, compute_capability, source, sass, nvrtc_version());
  switch (out->status) {
    case NvrtcOutcome::Compiled:
      build.image = std::move(out->image);
      return build;
    case NvrtcOutcome::Rejected:
      throw DeviceError(what + ": NVRTC could not compile the kernel: " + out->error + "\n" + out->log);
    case NvrtcOutcome::Failed:
      break;
  }
  throw DeviceError(what + ": " + out->call + " failed: " + out->error);  // check_nvrtc's message
}

std::string nvrtc_compile(int compute_capability, const std::string& source, bool sass, const std::string& what) {
  return nvrtc_build(compute_capability, source, sass, what).image;
}

const std::string& nvrtc_version() {
  // Asked once per process (loading NVRTC takes about 10 ms, on the warm path too): a newer NVRTC
  // may emit other code for the same source, so it is part of the cubin's key.
  static const std::string v = [] {
    try {
      return nvrtc_version_of(nvrtc());
    } catch (const DeviceError&) {
      return std::string("unavailable");  // nothing is built then: the build reports why
    }
  }();
  return v;
}

codegen::CacheEntry cubin_cache_entry(int device, int compute_capability, const std::string& source,
                                      const std::string& nvrtc_version) {
  // The key is what the hash covers besides the source; it is stored in the entry, so another
  // kernel's entry copied under this hash is refused. CUDA_VERSION: the toolkit whose headers
  // and NVRTC soname the library was built for.
  std::string options;
  for (const auto& o : nvrtc_options(compute_capability, true, nvrtc_version)) options += o + " ";
  const std::string key = "source-fnv1a=" + hex64(fnv1a(source)) + "\nsmelt=" SMELT_VERSION "\narch=sm_" +
                          std::to_string(compute_capability) + "\ncuda=" + std::to_string(CUDA_VERSION) +
                          "\nnvrtc-version=" + nvrtc_version + "\nnvrtc=" + options;
  return {"cuda", "cuda:" + std::to_string(device), hex64(fnv1a(key, fnv1a(source))), key, "cu"};
}

namespace kernel_cache_detail {

std::mutex& mutex() {
  static std::mutex* m = new std::mutex();  // never destroyed, like the caches
  return *m;
}

Kernel revive(const std::weak_ptr<LoadedModule>& w, std::vector<std::shared_ptr<LoadedModule>>& dropped) {
  std::shared_ptr<LoadedModule> m = w.lock();
  if (!m) return {};
  for (auto& d : lrus().of(m->device).use(m)) dropped.push_back(std::move(d));
  return Kernel{m->fn, std::move(m)};
}

void remember(const Kernel& k, std::vector<std::shared_ptr<LoadedModule>>& dropped) {
  for (auto& d : lrus().of(k.module->device).use(k.module)) dropped.push_back(std::move(d));
}

}  // namespace kernel_cache_detail

Kernel get_kernel(int device, const std::string& key, const std::function<std::string()>& body,
                  const std::string& what) {
  using namespace kernel_cache_detail;
  const std::string full_key = std::to_string(device) + "|" + key;
  auto& c = string_cache();
  std::vector<std::shared_ptr<LoadedModule>> dropped;  // released after the lock
  std::promise<Kernel> built;
  std::shared_future<Kernel> other;
  {
    std::lock_guard lock(mutex());
    if (auto it = c.kernels.find(full_key); it != c.kernels.end())
      if (Kernel k = revive(it->second, dropped)) return k;
    // Another thread builds it (a prebuild): wait for that build instead of a second one.
    if (auto it = c.building.find(full_key); it != c.building.end()) other = it->second;
    else c.building.emplace(full_key, built.get_future().share());
  }
  if (other.valid()) return other.get();
  return run_claimed_build(built, [&] { return build_kernel(device, key, body(), what); }, [&](const Kernel* k) {
    if (k) {
      c.kernels[full_key] = k->module;
      remember(*k, dropped);
      prune(c.kernels, c.prune_at);
    }
    c.building.erase(full_key);
  });
}

size_t loaded_kernel_modules(int device) {
  auto& u = unloads();
  std::lock_guard lock(u.mutex);
  auto it = u.loaded.find(device);
  return it == u.loaded.end() ? 0 : it->second;
}

size_t pending_kernel_unloads(int device) {
  auto& u = unloads();
  std::lock_guard lock(u.mutex);
  return u.pending.count_if([&](const PendingUnload& p) { return p.device == device; });
}

size_t unload_retired_kernels(int device) {
  const DriverApi* d = driver();
  // A capture in progress on this thread unloads nothing: the next safe point does.
  if (!d || thread_capture()) return 0;
  device_state(device);  // the context of the device's modules and events, current here
  auto& u = unloads();
  std::vector<PendingUnload> ready;
  {
    std::lock_guard lock(u.mutex);
    ready = u.pending.take_ready([&](const PendingUnload& p) {
      if (p.device != device) return false;
      // Anything but "not ready" has passed: an error here is a dead context, which runs nothing.
      for (CUevent e : p.events)
        if (d->cuEventQuery(e) == CUDA_ERROR_NOT_READY) return false;
      return true;
    });
  }
  for (PendingUnload& p : ready) {
    for (CUevent e : p.events) d->cuEventDestroy(e);
    d->cuModuleUnload(p.module);
    {
      std::lock_guard lock(u.mutex);
      --u.loaded[device];
    }
    if (telemetry::enabled())
      telemetry::emit({"compile.kernel.unload",
                       0.0,
                       {{"device", "cuda:" + std::to_string(device)}, {"hash", p.hash}, {"program", p.name}}});
  }
  return ready.size();
}

size_t kernel_cache_capacity() {
  std::lock_guard lock(kernel_cache_detail::mutex());
  return lrus().capacity;
}

size_t set_kernel_cache_capacity(size_t modules) {
  std::vector<std::shared_ptr<LoadedModule>> dropped;  // released after the lock
  std::lock_guard lock(kernel_cache_detail::mutex());
  auto& l = lrus();
  const size_t old = l.capacity;
  l.capacity = modules;
  for (auto& [device, lru] : l.by_device)
    for (auto& m : lru.set_capacity(modules)) dropped.push_back(std::move(m));
  return old;
}

/// With SMELT_CUDA_DUMP_DIR set (created when missing), every kernel built in the process is
/// written there as <hash>.cu (its key on the first line) and the shared preamble as preamble.cu,
/// for reading and profiling generated code; failures to write are ignored.
static void dump_kernel_source(const std::string& name, const std::string& hash, const std::string& body) {
  static const char* dir = std::getenv("SMELT_CUDA_DUMP_DIR");
  if (!dir || !*dir) return;
  static std::once_flag preamble_once;
  std::call_once(preamble_once, [] {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::ofstream(std::string(dir) + "/preamble.cu") << device_preamble();
  });
  std::ofstream(std::string(dir) + "/" + hash + ".cu") << "// " << name << "\n" << body;
}

Kernel build_kernel(int device, const std::string& name, const std::string& body, const std::string& what) {
  DeviceState& s = device_state(device);
  const DriverApi& d = *driver();
  unload_retired_kernels(device);  // a safe point: modules whose launches have run go first
  auto t0 = std::chrono::steady_clock::now();
  const std::string source = std::string(device_preamble()) + body;
  const codegen::CacheEntry entry = cubin_cache_entry(device, s.cc_major * 10 + s.cc_minor, source, nvrtc_version());
  const std::string& hex = entry.hash;
  dump_kernel_source(name, hex, body);
  CUmodule module = nullptr;
  bool on_disk = false;
  if (auto image = codegen::read_cache_entry(entry)) {  // verified: header, key and checksum
    const CUresult r = d.cuModuleLoadData(&module, image->data());
    if (r == CUDA_SUCCESS) {
      on_disk = true;
    } else {
      module = nullptr;
      const char* name = nullptr;
      if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
      codegen::reject_cache_entry(entry, std::string("cannot load: cuModuleLoadData failed: ") + (name ? name : "?"));
    }
  }
  NvrtcBuild built;  // where it compiled, for telemetry
  if (!module) {
    bool sass = true;
    try {
      built = nvrtc_build(s.cc_major * 10 + s.cc_minor, source, true, what);
    } catch (const DeviceError&) {
      // An NVRTC older than the GPU cannot emit its SASS: PTX for the driver to finish.
      sass = false;
      built = nvrtc_build(s.cc_major * 10 + s.cc_minor, source, false, what);
    }
    check(d.cuModuleLoadData(&module, built.image.data()), "cuModuleLoadData", what);
    // Best effort: a read-only or full disk only costs a rebuild next time. PTX is not kept: the
    // driver's own JIT cache holds what it makes of it.
    if (sass) codegen::write_cache_entry(entry, built.image, source);
  }
  // Owned from here: an error below unloads it (nothing launched it yet).
  auto m = std::make_shared<LoadedModule>();
  m->device = device;
  m->module = module;
  m->name = name;
  m->hash = hex;
  {
    auto& u = unloads();
    std::lock_guard lock(u.mutex);
    ++u.loaded[device];
  }
  check(d.cuModuleGetFunction(&m->fn, module, "k"), "cuModuleGetFunction", what);
  if (telemetry::enabled()) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    // compiler: where NVRTC ran (a smelt-nvrtc process or this one; "none" for a disk-cache hit);
    // helper_problem: why not in a helper, when none could be used.
    telemetry::Event e{"compile.kernel.build",
                       ms,
                       {{"device", "cuda:" + std::to_string(device)},
                        {"hash", hex},
                        {"cached_on_disk", on_disk ? "true" : "false"},
                        {"compiler", on_disk ? "none" : built.in_helper ? "process" : "in-process"},
                        {"program", name}}};
    if (!built.helper_problem.empty()) e.fields["helper_problem"] = built.helper_problem;
    telemetry::emit(e);
  }
  return Kernel{m->fn, std::move(m)};
}

namespace {

struct Prebuilder;
Prebuilder& prebuilder();

/// The prebuild threads and their queue (never destroyed: threads may run during exit).
struct Prebuilder {
  std::mutex mutex;
  std::condition_variable work, idle;
  std::deque<std::function<void()>> queue;
  size_t running = 0;
  bool started = false;
  pid_t owner = 0;

  void start() {  // under mutex
    started = true;
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const unsigned threads = std::clamp(cores / 2, 1u, 8u);
    for (unsigned i = 0; i < threads; ++i) std::thread([this] { loop(); }).detach();
    // At exit, queued builds are dropped and running ones waited for, before the destructors of
    // what existed when the first prebuild was queued (the atexit order): telemetry and the
    // kernel caches are made first, so that a build never outlives what it uses. A forked
    // child, which has no prebuild threads, waits for nothing.
    telemetry::enabled();
    kernel_cache_capacity();
    owner = ::getpid();
    std::atexit([] {
      Prebuilder& p = prebuilder();
      if (::getpid() != p.owner) return;
      std::unique_lock lock(p.mutex);
      p.queue.clear();
      p.idle.wait(lock, [&] { return p.running == 0; });
    });
  }
  void loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      work.wait(lock, [&] { return !queue.empty(); });
      std::function<void()> job = std::move(queue.front());
      queue.pop_front();
      ++running;
      lock.unlock();
      try {
        job();
      } catch (...) {  // the launch that needs the kernel builds it again and reports why
      }
      lock.lock();
      --running;
      if (queue.empty() && running == 0) idle.notify_all();
    }
  }
};

Prebuilder& prebuilder() {
  static auto* p = new Prebuilder();
  return *p;
}

}  // namespace

void prebuild_kernel(std::function<void()> job) {
  Prebuilder& p = prebuilder();
  {
    std::lock_guard lock(p.mutex);
    if (!p.started) p.start();
    p.queue.push_back(std::move(job));
  }
  p.work.notify_one();
}

void wait_for_prebuilds() {
  Prebuilder& p = prebuilder();
  std::unique_lock lock(p.mutex);
  p.idle.wait(lock, [&] { return p.queue.empty() && p.running == 0; });
}

std::string kernel_name(const Kernel& k) { return k.module ? k.module->name : "?"; }

namespace {

/// The kernel's shared-memory record (its static size asked once); call under m.mutex.
SharedInfo& shared_info(LoadedModule& m) {
  if (m.shared.known) return m.shared;
  int bytes = 0;
  check(driver()->cuFuncGetAttribute(&bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, m.fn), "cuFuncGetAttribute",
        "kernel " + m.name);
  m.shared.static_bytes = static_cast<uint64_t>(bytes);
  m.shared.known = true;
  return m.shared;
}

std::atomic<uint64_t> replayed_count{0};

/// Launches `m`'s kernel through a one-kernel graph when the same launch (stream,
/// configuration, argument bytes) came before: cuLaunchKernel took 3-5 us of host time on the
/// H200's host, cuGraphLaunch of an instantiated graph 1-2 us, and an eager loop repeats its
/// launches exactly (the caching allocator hands the same buffers back). A launch seen the first
/// time is only remembered (a few per kernel, least recently used first out); its third sighting
/// instantiates its graph. A kernel whose graphs are mostly launched once or
/// twice before their launch stops repeating (W11: a new box count each call, so new sizes and
/// buffers) launches plainly from then on: instantiating (and destroying) a graph costs several
/// launches' host time, and W11 on the H200 ran 1.95 ms a call with them against 1.39 without.
/// False when the caller must launch it itself (not repeated, graphs off or missing, a kernel whose
/// parameter cannot be read or whose graphs do not pay).
bool replay_launch(LoadedModule& m, const LaunchConfig& c, uint64_t shared, CUstream stream, void* args) {
  const DriverApi& d = *driver();
  if (!graphs_enabled() || !d.graphs_missing.empty()) return false;
  constexpr size_t kRepeatsPerKernel = 4;
  std::lock_guard lock(m.mutex);
  if (m.param_bytes < 0) {
    // Replayable: one parameter (the argument struct), its size known.
    size_t offset = 0, size = 0, next_offset = 0, next_size = 0;
    const bool one = d.cuFuncGetParamInfo(m.fn, 0, &offset, &size) == CUDA_SUCCESS &&
                     d.cuFuncGetParamInfo(m.fn, 1, &next_offset, &next_size) != CUDA_SUCCESS;
    m.param_bytes = one && size > 0 && size <= 4096 ? static_cast<int>(size) : 0;
  }
  if (m.param_bytes == 0) return false;
  const std::string_view bytes(static_cast<const char*>(args), static_cast<size_t>(m.param_bytes));
  RepeatedLaunch* hit = nullptr;
  for (RepeatedLaunch& r : m.repeats)
    if (r.stream == stream && r.grid_x == c.grid_x && r.grid_y == c.grid_y && r.block == c.block &&
        r.shared == shared && r.args == bytes)
      hit = &r;
  if (!hit) {
    RepeatedLaunch* slot = nullptr;
    if (m.repeats.size() >= kRepeatsPerKernel) {
      // The least recently used entry is overwritten in place: its argument buffer is reused, so
      // a loop that never repeats (new buffers each call) allocates nothing here once warm.
      slot = &*std::min_element(m.repeats.begin(), m.repeats.end(),
                                [](const RepeatedLaunch& a, const RepeatedLaunch& b) { return a.used < b.used; });
      // The evicted graph may still run: the driver frees it when it completes.
      if (slot->exec) d.cuGraphExecDestroy(slot->exec);
    } else {
      slot = &m.repeats.emplace_back();
    }
    slot->stream = stream;
    slot->grid_x = c.grid_x;
    slot->grid_y = c.grid_y;
    slot->block = c.block;
    slot->shared = shared;
    slot->args.assign(bytes);
    slot->exec = nullptr;
    slot->seen = 1;
    slot->used = ++m.repeat_clock;
    return false;
  }
  hit->used = ++m.repeat_clock;
  constexpr int kSightingsBeforeGraph = 3;
  if (!hit->exec && ++hit->seen < kSightingsBeforeGraph) return false;
  if (!hit->exec) {
    // Judged once enough graphs were made: fewer than 4 launches a graph means churn.
    constexpr uint64_t kJudgeAfter = 16, kLaunchesPerGraph = 4;
    if (m.graphs_made >= kJudgeAfter && m.graph_launches < kLaunchesPerGraph * m.graphs_made) {
      m.param_bytes = 0;  // plainly from now on; the graphs made stay until the module goes
      return false;
    }
    CUgraph graph = nullptr;
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = m.fn;
    p.gridDimX = static_cast<unsigned>(c.grid_x);
    p.gridDimY = static_cast<unsigned>(c.grid_y);
    p.gridDimZ = 1;
    p.blockDimX = static_cast<unsigned>(c.block);
    p.blockDimY = p.blockDimZ = 1;
    p.sharedMemBytes = static_cast<unsigned>(shared);
    void* params[] = {hit->args.data()};
    p.kernelParams = params;
    CUgraphNode node = nullptr;
    CUgraphExec exec = nullptr;
    const bool made = d.cuGraphCreate(&graph, 0) == CUDA_SUCCESS &&
                d.cuGraphAddKernelNode(&node, graph, nullptr, 0, &p) == CUDA_SUCCESS &&
                d.cuGraphInstantiate(&exec, graph, 0) == CUDA_SUCCESS;
    if (graph) d.cuGraphDestroy(graph);
    if (!made) {
      // Launched plainly from now on: remembered as not replayable.
      m.param_bytes = 0;
      return false;
    }
    hit->exec = exec;
    ++m.graphs_made;
  }
  if (d.cuGraphLaunch(hit->exec, stream) != CUDA_SUCCESS) return false;  // cuLaunchKernel reports
  ++m.graph_launches;
  replayed_count.fetch_add(1, std::memory_order_relaxed);
  return true;
}

/// Notes that `k` was launched on `stream` (outside a capture): its unload waits for that stream.
void note_stream(LoadedModule& m, CUstream stream) {
  if (m.last_stream.load(std::memory_order_relaxed) == stream) return;
  std::lock_guard lock(m.mutex);
  if (std::find(m.streams.begin(), m.streams.end(), stream) == m.streams.end()) m.streams.push_back(stream);
  m.last_stream.store(stream, std::memory_order_relaxed);
}

}  // namespace

uint64_t max_dynamic_shared(const DeviceState& s, const Kernel& k) {
  std::lock_guard lock(k.module->mutex);
  const uint64_t limit = static_cast<uint64_t>(s.smem_per_block_optin);
  const uint64_t st = shared_info(*k.module).static_bytes;
  return st < limit ? limit - st : 0;
}

std::string launch_config_problem(const LaunchConfig& c) {
  if (c.block < 1 || c.block > 1024) return "a block of " + std::to_string(c.block) + " threads (1 to 1024)";
  if (c.grid_x < 1 || c.grid_x > 0x7fffffffull) return "grid x of " + std::to_string(c.grid_x) + " blocks (1 to 2^31 - 1)";
  if (c.grid_y < 1 || c.grid_y > 65535) return "grid y of " + std::to_string(c.grid_y) + " (1 to 65535)";
  if (c.grid_z < 1 || c.grid_z > 65535) return "grid z of " + std::to_string(c.grid_z) + " (1 to 65535)";
  if (c.shared + c.static_shared > c.max_shared)
    return std::to_string(c.shared + c.static_shared) + " bytes of shared memory per block (the device allows " +
           std::to_string(c.max_shared) + ")";
  return "";
}

void check_launch_config(const LaunchConfig& c, const std::string& name, const std::string& what) {
  const std::string why = launch_config_problem(c);
  if (why.empty()) return;
  throw DeviceError(what + ": kernel " + name + " cannot be launched: " + why + "; grid " + std::to_string(c.grid_x) +
                    " x " + std::to_string(c.grid_y) + " x " + std::to_string(c.grid_z) + ", block " +
                    std::to_string(c.block) + ", " + std::to_string(c.shared) + " bytes of dynamic and " +
                    std::to_string(c.static_shared) + " of static shared memory");
}


unsigned occupancy_block_size(const Kernel& k) {
  LoadedModule& m = *k.module;
  if (unsigned b = m.occupancy_block.load(std::memory_order_relaxed)) return b;
  int min_grid = 0, block = 0;
  check(driver()->cuOccupancyMaxPotentialBlockSize(&min_grid, &block, m.fn, nullptr, 0, 0),
        "cuOccupancyMaxPotentialBlockSize", "kernel launch (" + m.name + ")");
  const unsigned b = static_cast<unsigned>(std::clamp(block, 128, 1024));
  m.occupancy_block.store(b, std::memory_order_relaxed);  // two threads asking store the same
  return b;
}

int blocks_per_sm(const Kernel& k, unsigned block, uint64_t shared) {
  LoadedModule& m = *k.module;
  if (int b = m.resident_blocks.load(std::memory_order_relaxed)) return b;
  int blocks = 0;
  check(driver()->cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, m.fn, static_cast<int>(block), shared),
        "cuOccupancyMaxActiveBlocksPerMultiprocessor", "kernel launch (" + m.name + ")");
  blocks = std::max(blocks, 1);
  m.resident_blocks.store(blocks, std::memory_order_relaxed);  // two threads asking store the same
  return blocks;
}

void prefer_shared_memory(const DeviceState& s, const Kernel& k, int blocks, uint64_t shared) {
  LoadedModule& m = *k.module;
  std::lock_guard lock(m.mutex);
  SharedInfo& info = shared_info(m);
  if (info.carveout) return;
  // The carveout is a percentage of the SM's shared memory (the most a block may opt in to plus
  // the 1 KiB the system keeps per block: 228 KiB on sm_90), rounded up by the driver to a
  // supported split; each block also takes that 1 KiB.
  const uint64_t most = static_cast<uint64_t>(s.smem_per_block_optin) + 1024;
  const uint64_t want = static_cast<uint64_t>(std::max(blocks, 1)) * (shared + info.static_bytes + 1024);
  const int percent = static_cast<int>(std::min<uint64_t>(100, (want * 100 + most - 1) / most));
  check(driver()->cuFuncSetAttribute(m.fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent), "cuFuncSetAttribute",
        "kernel " + m.name);
  info.carveout = true;
}

void launch(const DeviceState& s, const Kernel& k, uint64_t grid, unsigned block, void* args, const std::string& what,
            uint64_t shared) {
  SMELT_ASSERT(k.module, what + ": launch of an empty cuda::Kernel");
  const DriverApi& d = *driver();
  CUfunction fn = k.fn;
  LoadedModule& m = *k.module;
  void* params[] = {args};
  // Grids past the x limit fold into y; kernels compute their linear block id from both.
  const uint64_t kMaxX = 0x7fffffffull;
  LaunchConfig c;
  c.grid_x = grid < kMaxX ? grid : kMaxX;
  c.grid_y = (grid + kMaxX - 1) / kMaxX;
  c.block = block;
  c.shared = shared;
  c.max_shared = static_cast<uint64_t>(s.smem_per_block_optin);
  if (grid == 0) c.grid_x = c.grid_y = 0;
  if (shared > 0) {
    // A kernel may use more than the default per-block limit only once opted in
    // (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES): without it the launch fails with
    // CUDA_ERROR_INVALID_VALUE. Opted in once per kernel, to the most the device allows.
    std::lock_guard lock(m.mutex);
    SharedInfo& info = shared_info(m);
    c.static_shared = info.static_bytes;
    check_launch_config(c, m.name, what);
    const uint64_t default_dynamic = static_cast<uint64_t>(s.smem_per_block) > info.static_bytes
                                         ? static_cast<uint64_t>(s.smem_per_block) - info.static_bytes
                                         : 0;
    if (!info.carveout) {
      // Blocks that bring their own row cache want shared memory more than L1 (a hint: the
      // driver may still choose otherwise, which changes speed only).
      check(d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, CU_SHAREDMEM_CARVEOUT_MAX_SHARED),
            "cuFuncSetAttribute", what + ": kernel " + m.name);
      info.carveout = true;
    }
    if (shared > default_dynamic && shared > info.opted_in) {
      const uint64_t most = c.max_shared - info.static_bytes;
      check(d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(most)),
            "cuFuncSetAttribute", what + ": kernel " + m.name);
      info.opted_in = most;
    }
  } else {
    // Grid and block only (no driver query on the hot path); the kernel is named on failure.
    if (!launch_config_problem(c).empty()) check_launch_config(c, m.name, what);
  }
  // The module must outlive the launch: a capture's graph keeps it; otherwise its unload waits
  // for this stream (the caller holds `k` until the launch is queued).
  const CUstream stream = current_stream(s);
  if (const ThreadCapture* tc = thread_capture(); tc && tc->device == s.index) {
    if (tc->kernels) tc->kernels->push_back(k.module);
  } else {
    note_stream(m, stream);
    if (replay_launch(m, c, shared, stream, args)) return;
  }
  const CUresult r = d.cuLaunchKernel(fn, static_cast<unsigned>(c.grid_x), static_cast<unsigned>(c.grid_y), 1, block, 1, 1,
                                      static_cast<unsigned>(shared), stream, params, nullptr);
  if (r != CUDA_SUCCESS)
    check(r, "cuLaunchKernel",
          what + " (kernel " + m.name + ", grid " + std::to_string(c.grid_x) + " x " + std::to_string(c.grid_y) +
              ", block " + std::to_string(block) + ", shared " + std::to_string(shared) + " + " +
              std::to_string(c.static_shared) + " static bytes)");
}

uint64_t replayed_launches() { return replayed_count.load(std::memory_order_relaxed); }

}  // namespace smelt::cuda
