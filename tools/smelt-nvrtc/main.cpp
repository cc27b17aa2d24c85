// smelt-nvrtc: compiles one CUDA source with NVRTC and smelt's options, in a process of its own.
//
// Why a process: on some machines (the H200 host with NVRTC 13.0) NVRTC serializes the compiles
// of one process, so the kernels a compiled function prebuilds on several threads build one after
// another; separate processes compile side by side. libsmelt runs this helper for each kernel
// build (src/backend/cuda/nvrtc_process.cpp) and falls back to compiling in-process when it
// cannot. It links only nvrtc_program.cpp, the code libsmelt compiles with, and the C++ runtime:
// it must start in a few milliseconds.
//
// usage: smelt-nvrtc --arch CC [--ptx] [--nvrtc LIBRARY] SOURCE OUTPUT
// Exit status 0: OUTPUT holds the cubin (PTX with --ptx). 1: NVRTC rejected the source; OUTPUT
// holds nvrtcGetErrorString's text on its first line, then NVRTC's log. 2: anything else (usage,
// NVRTC missing, a file unreadable); the reason is on stderr.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "src/backend/cuda/nvrtc_program.h"

namespace {

constexpr const char* kUsage = "usage: smelt-nvrtc --arch CC [--ptx] [--nvrtc LIBRARY] SOURCE OUTPUT\n";

int fail(const std::string& message) {
  std::fprintf(stderr, "smelt-nvrtc: %s\n", message.c_str());
  return 2;
}

bool write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  f.close();
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  int arch = 0;
  bool sass = true;
  std::string library, source_path, output_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--arch" && i + 1 < argc) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (!end || *end != '\0' || v <= 0 || v > 10000) return fail(std::string("--arch: not a compute capability: '") + argv[i] + "'");
      arch = static_cast<int>(v);
    } else if (a == "--ptx") {
      sass = false;
    } else if (a == "--nvrtc" && i + 1 < argc) {
      library = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::fputs(kUsage, stderr);
      return fail("unknown or incomplete option '" + a + "'");
    } else if (source_path.empty()) {
      source_path = a;
    } else if (output_path.empty()) {
      output_path = a;
    } else {
      std::fputs(kUsage, stderr);
      return fail("too many arguments: '" + a + "'");
    }
  }
  if (arch == 0 || source_path.empty() || output_path.empty()) {
    std::fputs(kUsage, stderr);
    return fail("--arch, SOURCE and OUTPUT are required");
  }

  std::ifstream in(source_path, std::ios::binary);
  if (!in) return fail("cannot read " + source_path);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string source = text.str();

  // The library the calling process loaded (--nvrtc), so that both compile with the same NVRTC.
  void* lib = nullptr;
  if (!library.empty()) {
    lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return fail("cannot load " + library + ": " + dlerror());
  } else {
    for (const auto& name : smelt::cuda::toolkit_library_names("libnvrtc"))
      if ((lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) return fail("NVRTC could not be loaded (tried " + smelt::cuda::toolkit_library_names("libnvrtc").front() + ")");
  }
  smelt::cuda::NvrtcApi api;
  std::string missing;
  smelt::cuda::fill_nvrtc_api(lib, api, missing);
  if (!missing.empty()) return fail("NVRTC lacks " + missing);

  const auto out = smelt::cuda::run_nvrtc(api, arch, source, sass, smelt::cuda::nvrtc_version_of(api));
  switch (out.status) {
    case smelt::cuda::NvrtcOutcome::Compiled:
      return write_file(output_path, out.image) ? 0 : fail("cannot write " + output_path);
    case smelt::cuda::NvrtcOutcome::Rejected:
      return write_file(output_path, out.error + "\n" + out.log) ? 1 : fail("cannot write " + output_path);
    case smelt::cuda::NvrtcOutcome::Failed:
      break;
  }
  return fail(out.call + " failed: " + out.error);
}
