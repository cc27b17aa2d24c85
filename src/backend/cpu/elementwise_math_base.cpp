// The float32 math kernels for the library's baseline ISA, and the choice of ISA at run time.
#define SMELT_MATH_ISA isa_base
#include "src/backend/cpu/elementwise_math_impl.h"

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

const MathKernels& math_kernels() {
  static const MathKernels& k = has_isa_v4()   ? isa_v4::math_kernels()
                                : has_isa_v3() ? isa_v3::math_kernels()
                                               : isa_base::math_kernels();
  return k;
}

}  // namespace smelt::cpu
