// NVRTC builds of the CUDA kernels with an in-memory and an on-disk cache.
//
// Why NVRTC and not nvcc at build time: the fused kernels of the compile layer must be built at
// run time anyway, and one compilation path for both keeps unfused and fused math identical;
// kernels are specialized to the exact op, dtypes and layout (no template explosion in the
// library build, which CI compiles without a GPU); and the code is SASS for the GPU that runs,
// whatever it is. The disk cache makes the cost a one-time one per machine.
#include "src/backend/cuda/compiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "smelt/errors.h"
#include "smelt/telemetry.h"
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

struct KernelCache {
  std::mutex mutex;
  std::unordered_map<std::string, CUfunction> by_key;  // "<device>|<key>" -> function
  std::unordered_map<CUfunction, std::string> names;   // function -> key, for launch errors
};

/// Per kernel: its static shared memory and the dynamic shared memory it is opted in to.
struct SharedInfo {
  uint64_t static_bytes = 0;
  uint64_t opted_in = 0;  // 0: the default limit
  bool carveout = false;  // asked to prefer shared memory over L1
};

KernelCache& kernel_cache() {
  // Never destroyed, and modules are never unloaded: CUfunction handles are handed out raw
  // (find_kernel, the occupancy cache) and a module may only go once no queued launch uses it,
  // which nothing tracks. Unfused kernels are a fixed set per (op, dtypes, layout); fused ones
  // live as long as the process (docs/cuda.md).
  static KernelCache* c = new KernelCache();
  return *c;
}

// Bit-exact IEEE arithmetic as on the CPU: no FMA contraction, IEEE division and square root,
// denormals kept. Matches the CPU build's -ffp-contract=off -fno-fast-math.
std::vector<std::string> nvrtc_options(int compute_capability, bool sass) {
  const std::string cc = std::to_string(compute_capability);
  return {sass ? "--gpu-architecture=sm_" + cc : "--gpu-architecture=compute_" + cc,
          "--std=c++17", "--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false",
          "-default-device"};
}


}  // namespace

std::string nvrtc_compile(int compute_capability, const std::string& source, bool sass, const std::string& what) {
  const NvrtcApi& n = nvrtc();
  nvrtcProgram prog = nullptr;
  check_nvrtc(n.nvrtcCreateProgram(&prog, source.c_str(), "smelt_kernel.cu", 0, nullptr, nullptr),
              "nvrtcCreateProgram", what);
  struct Destroy {
    const NvrtcApi& n;
    nvrtcProgram* p;
    ~Destroy() { n.nvrtcDestroyProgram(p); }
  } destroy{n, &prog};
  auto opts = nvrtc_options(compute_capability, sass);
  std::vector<const char*> argv;
  for (auto& o : opts) argv.push_back(o.c_str());
  nvrtcResult r = n.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  if (r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    n.nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    if (log_size) n.nvrtcGetProgramLog(prog, log.data());
    throw DeviceError(what + ": NVRTC could not compile the kernel: " + n.nvrtcGetErrorString(r) + "\n" + log);
  }
  std::string image;
  size_t size = 0;
  if (sass) {
    check_nvrtc(n.nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize", what);
    image.resize(size);
    check_nvrtc(n.nvrtcGetCUBIN(prog, image.data()), "nvrtcGetCUBIN", what);
  } else {
    check_nvrtc(n.nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize", what);
    image.resize(size);
    check_nvrtc(n.nvrtcGetPTX(prog, image.data()), "nvrtcGetPTX", what);
  }
  return image;
}

CUfunction find_kernel(int device, const std::string& key) {
  auto& c = kernel_cache();
  std::lock_guard lock(c.mutex);
  auto it = c.by_key.find(std::to_string(device) + "|" + key);
  return it == c.by_key.end() ? nullptr : it->second;
}

CUfunction get_kernel(int device, const std::string& key, const std::function<std::string()>& body,
                      const std::string& what) {
  const std::string full_key = std::to_string(device) + "|" + key;
  auto& c = kernel_cache();
  {
    std::lock_guard lock(c.mutex);
    if (auto it = c.by_key.find(full_key); it != c.by_key.end()) return it->second;
  }
  CUfunction fn = build_kernel(device, key, body(), what);
  std::lock_guard lock(c.mutex);
  c.by_key.emplace(full_key, fn);
  return fn;
}

CUfunction build_kernel(int device, const std::string& name, const std::string& body, const std::string& what) {
  auto& c = kernel_cache();
  DeviceState& s = device_state(device);
  const DriverApi& d = *driver();
  auto t0 = std::chrono::steady_clock::now();
  const std::string source = std::string(device_preamble()) + body;
  // The toolkit version the library was built with, not NVRTC's own: asking NVRTC would load
  // it (several ms) on the warm path, which only reads the disk cache. A cubin is SASS for one
  // architecture and stays valid whichever NVRTC built it. The key is what the hash covers
  // besides the source; it is stored in the disk entry, so another kernel's entry copied under
  // this hash is refused.
  const int cc = s.cc_major * 10 + s.cc_minor;
  std::string options;
  for (const auto& o : nvrtc_options(cc, true)) options += o + " ";
  const std::string key_text = "source-fnv1a=" + hex64(fnv1a(source)) + "\nsmelt=" SMELT_VERSION "\narch=sm_" +
                               std::to_string(cc) + "\ncuda=" + std::to_string(CUDA_VERSION) + "\nnvrtc=" + options;
  const std::string hex = hex64(fnv1a(key_text, fnv1a(source)));
  const codegen::CacheEntry entry{"cuda", "cuda:" + std::to_string(device), hex, key_text, "cu"};
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
  if (!module) {
    bool sass = true;
    std::string image;
    try {
      image = nvrtc_compile(s.cc_major * 10 + s.cc_minor, source, true, what);
    } catch (const DeviceError&) {
      // An NVRTC older than the GPU cannot emit its SASS: PTX for the driver to finish.
      sass = false;
      image = nvrtc_compile(s.cc_major * 10 + s.cc_minor, source, false, what);
    }
    check(d.cuModuleLoadData(&module, image.data()), "cuModuleLoadData", what);
    // Best effort: a read-only or full disk only costs a rebuild next time. PTX is not kept: the
    // driver's own JIT cache holds what it makes of it.
    if (sass) codegen::write_cache_entry(entry, image, source);
  }
  CUfunction fn = nullptr;
  check(d.cuModuleGetFunction(&fn, module, "k"), "cuModuleGetFunction", what);
  if (telemetry::enabled()) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    telemetry::emit({"compile.kernel.build",
                     ms,
                     {{"device", "cuda:" + std::to_string(device)},
                      {"hash", hex},
                      {"cached_on_disk", on_disk ? "true" : "false"},
                      {"program", name}}});
  }
  std::lock_guard lock(c.mutex);
  c.names.emplace(fn, name);
  return fn;
}


std::string kernel_name(CUfunction fn) {
  auto& c = kernel_cache();
  std::lock_guard lock(c.mutex);
  auto it = c.names.find(fn);
  return it == c.names.end() ? "?" : it->second;
}

namespace {

std::mutex& shared_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}

/// The kernel's shared-memory record (its static size asked once); call under shared_mutex().
SharedInfo& shared_info(CUfunction fn) {
  static auto* infos = new std::unordered_map<CUfunction, SharedInfo>();  // kernels are never unloaded
  auto it = infos->find(fn);
  if (it != infos->end()) return it->second;
  int bytes = 0;
  check(driver()->cuFuncGetAttribute(&bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn), "cuFuncGetAttribute",
        "kernel " + kernel_name(fn));
  SharedInfo info;
  info.static_bytes = static_cast<uint64_t>(bytes);
  return infos->emplace(fn, info).first->second;
}

}  // namespace

uint64_t max_dynamic_shared(const DeviceState& s, CUfunction fn) {
  std::lock_guard lock(shared_mutex());
  const uint64_t limit = static_cast<uint64_t>(s.smem_per_block_optin);
  const uint64_t st = shared_info(fn).static_bytes;
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


unsigned occupancy_block_size(CUfunction fn) {
  static std::mutex mutex;
  static auto* sizes = new std::unordered_map<CUfunction, unsigned>();  // kernels are never unloaded
  std::lock_guard lock(mutex);
  if (auto it = sizes->find(fn); it != sizes->end()) return it->second;
  int min_grid = 0, block = 0;
  check(driver()->cuOccupancyMaxPotentialBlockSize(&min_grid, &block, fn, nullptr, 0, 0),
        "cuOccupancyMaxPotentialBlockSize", "kernel launch");
  const unsigned b = static_cast<unsigned>(std::clamp(block, 128, 1024));
  sizes->emplace(fn, b);
  return b;
}

void launch(const DeviceState& s, CUfunction fn, uint64_t grid, unsigned block, void* args, const std::string& what,
            uint64_t shared) {
  const DriverApi& d = *driver();
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
    std::lock_guard lock(shared_mutex());
    SharedInfo& info = shared_info(fn);
    c.static_shared = info.static_bytes;
    check_launch_config(c, kernel_name(fn), what);
    const uint64_t default_dynamic = static_cast<uint64_t>(s.smem_per_block) > info.static_bytes
                                         ? static_cast<uint64_t>(s.smem_per_block) - info.static_bytes
                                         : 0;
    if (!info.carveout) {
      // Blocks that bring their own row cache want shared memory more than L1 (a hint: the
      // driver may still choose otherwise, which changes speed only).
      check(d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, CU_SHAREDMEM_CARVEOUT_MAX_SHARED),
            "cuFuncSetAttribute", what + ": kernel " + kernel_name(fn));
      info.carveout = true;
    }
    if (shared > default_dynamic && shared > info.opted_in) {
      const uint64_t most = c.max_shared - info.static_bytes;
      check(d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(most)),
            "cuFuncSetAttribute", what + ": kernel " + kernel_name(fn));
      info.opted_in = most;
    }
  } else {
    // Grid and block only (no driver query on the hot path); the kernel is named on failure.
    if (!launch_config_problem(c).empty()) check_launch_config(c, kernel_name(fn), what);
  }
  const CUresult r = d.cuLaunchKernel(fn, static_cast<unsigned>(c.grid_x), static_cast<unsigned>(c.grid_y), 1, block, 1, 1,
                                      static_cast<unsigned>(shared), current_stream(s), params, nullptr);
  if (r != CUDA_SUCCESS)
    check(r, "cuLaunchKernel",
          what + " (kernel " + kernel_name(fn) + ", grid " + std::to_string(c.grid_x) + " x " + std::to_string(c.grid_y) +
              ", block " + std::to_string(block) + ", shared " + std::to_string(shared) + " + " +
              std::to_string(c.static_shared) + " static bytes)");
}

}  // namespace smelt::cuda
