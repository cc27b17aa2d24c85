// ScopedEnv: an environment variable set (or unset) for a scope, for tests of environment switches;
// ColdKernelCache: a fresh kernel cache folder with tiering left to the options.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "smelt/compile.h"

namespace smelt::test {

/// Sets an environment variable for the scope (unsets it when `value` is null), then restores
/// the previous value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ScopedEnv(const char* name, const std::string& value) : ScopedEnv(name, value.c_str()) {}
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

/// A new empty folder as SMELT_CACHE_DIR and tiering left to the options (SMELT_TIERED unset),
/// for the scope: the first calls of the scope's compiled functions find no kernel. Waits for
/// the background kernel builds before the folder is removed (none writes into a removed folder).
struct ColdKernelCache {
  std::filesystem::path dir;
  std::optional<ScopedEnv> cache_dir;
  ScopedEnv tiered{"SMELT_TIERED", nullptr};
  explicit ColdKernelCache(const std::string& prefix = "smelt-cold-cache") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    dir = ::mkdtemp(tmpl.data());
    cache_dir.emplace("SMELT_CACHE_DIR", dir.string());
  }
  ~ColdKernelCache() {
    wait_for_kernel_builds();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  ColdKernelCache(const ColdKernelCache&) = delete;
  ColdKernelCache& operator=(const ColdKernelCache&) = delete;
};

}  // namespace smelt::test
