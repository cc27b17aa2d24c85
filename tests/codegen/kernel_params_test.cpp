// A fused kernel's identity is its whole program: every field of the IR changes the key, equal
// programs give equal keys and equal sources (kernel_params.h).
#include <gtest/gtest.h>

#include <unordered_map>

#include "codegen/fused_program_cases.h"
#include "src/codegen/cpp_emitter.h"
#include "src/codegen/kernel_params.h"

namespace smelt::test {
namespace {

TEST(KernelParams, EveryFieldOfTheProgramChangesTheKey) {
  const codegen::FusedProgram base = softmax_row_program();
  const auto variants = program_field_variants(base);
  EXPECT_EQ(variants.size(), 14u);
  for (const auto& [field, p] : variants) {
    SCOPED_TRACE(field);
    EXPECT_FALSE(p == base);
    EXPECT_NE(codegen::hash_program(p), codegen::hash_program(base));
  }
  // The CPU kernel cache's map tells them all apart.
  std::unordered_map<codegen::FusedProgram, int, codegen::ProgramHash> cache;
  cache[base] = -1;
  for (size_t i = 0; i < variants.size(); ++i) cache[variants[i].second] = static_cast<int>(i);
  EXPECT_EQ(cache.size(), variants.size() + 1);
  EXPECT_EQ(cache.at(base), -1);
}

TEST(KernelParams, EqualProgramsGiveEqualKeysAndSources) {
  const codegen::FusedProgram a = softmax_row_program(), b = softmax_row_program();
  EXPECT_TRUE(a == b);
  EXPECT_EQ(codegen::hash_program(a), codegen::hash_program(b));
  EXPECT_EQ(codegen::emit_cpu_kernel(a), codegen::emit_cpu_kernel(b));
}

TEST(KernelParams, ProgramsThatDifferInTheirReductionHaveDifferentSources) {
  // The fields a source depends on: a key that missed them would hand out the wrong kernel.
  const codegen::FusedProgram base = softmax_row_program();
  for (const auto& [field, p] : program_field_variants(base)) {
    if (field != "instr.reduce" && field != "instr.ddof" && field != "instr.value" && field != "instr.value -0")
      continue;
    SCOPED_TRACE(field);
    EXPECT_NE(codegen::emit_cpu_kernel(p), codegen::emit_cpu_kernel(base));
  }
}

}  // namespace
}  // namespace smelt::test
