// The float32 math kernels for the library's baseline ISA, and the choice of ISA at run time.
#define SMELT_MATH_ISA isa_base
#include "src/backend/cpu/elementwise_math_impl.h"

#include <algorithm>
#include <cstdlib>

#include "smelt/errors.h"

namespace smelt::cpu {

bool has_isa_v3() {
#if defined(__x86_64__) && defined(SMELT_HAVE_ISA_V3)
  static const bool yes = [] {
    __builtin_cpu_init();
#if defined(__clang__)
    // Clang before 16 knows no level names: the features that set v3 apart (with AVX2, a CPU
    // has F16C, LZCNT and MOVBE too).
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
           __builtin_cpu_supports("bmi2");
#else
    return __builtin_cpu_supports("x86-64-v3") != 0;
#endif
  }();
  return yes;
#else
  return false;
#endif
}

bool has_isa_v4() {
#if defined(__x86_64__) && defined(SMELT_HAVE_ISA_V3)
  static const bool yes = [] {
    __builtin_cpu_init();
#if defined(__clang__)
    return has_isa_v3() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
#else
    return __builtin_cpu_supports("x86-64-v4") != 0;
#endif
  }();
  return yes;
#else
  return false;
#endif
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Baseline:
      return "baseline";
    case CpuIsa::Avx2:
      return "avx2";
    case CpuIsa::Avx512:
      return "avx512";
  }
  return "?";
}

CpuIsa parse_cpu_isa(const std::string& value) {
  for (CpuIsa isa : {CpuIsa::Baseline, CpuIsa::Avx2, CpuIsa::Avx512})
    if (value == cpu_isa_name(isa)) return isa;
  throw InvalidArgument("SMELT_CPU_ISA: unknown value '" + value + "' (accepted: baseline, avx2, avx512)");
}

CpuIsa cpu_isa_supported() {
  return has_isa_v4() ? CpuIsa::Avx512 : has_isa_v3() ? CpuIsa::Avx2 : CpuIsa::Baseline;
}

CpuIsa cpu_isa() {
  // A bad value throws here on every call (a static whose initializer throws is retried), so
  // each kernel that would use it reports the error instead of silently running uncapped.
  static const CpuIsa isa = [] {
    const CpuIsa best = cpu_isa_supported();
    const char* env = std::getenv("SMELT_CPU_ISA");
    if (!env || !*env) return best;
    return std::min(best, parse_cpu_isa(env));
  }();
  return isa;
}

const MathKernels& math_kernels_for(CpuIsa isa) {
  switch (std::min(isa, cpu_isa_supported())) {
    case CpuIsa::Avx512:
      return isa_v4::math_kernels();
    case CpuIsa::Avx2:
      return isa_v3::math_kernels();
    case CpuIsa::Baseline:
      return isa_base::math_kernels();
  }
  return isa_base::math_kernels();
}

const MathKernels& math_kernels() {
  static const MathKernels& k = math_kernels_for(cpu_isa());
  return k;
}

}  // namespace smelt::cpu
