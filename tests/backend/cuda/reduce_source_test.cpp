// The Reduce rows-plan kernels and fused row kernels (softmax, RMSNorm, LayerNorm, var, every
// reduction operator and dtype) compile with NVRTC for sm_90 on any machine with the toolkit.
#include <gtest/gtest.h>

#include "backend/cuda/nvrtc_test_utils.h"

#include <functional>
#include <string>
#include <tuple>

#if SMELT_HAS_CUDA
#include "smelt/errors.h"
#include "src/backend/cuda/compiler.h"
#include "src/backend/cuda/elementwise_sources.h"
#include "src/backend/cuda/reduce_sources.h"
#include "src/codegen/cuda_emitter.h"
#include "src/codegen/gpu_row_order.h"
#endif

#include "compile/compile_helpers.h"

namespace smelt::test {
namespace {

#if SMELT_HAS_CUDA
using RowFn = std::function<std::vector<Array>(const std::vector<Array>&)>;

/// The normalizations the row kernels are checked on (inputs: x, a weight, a residual).
std::vector<std::pair<std::string, RowFn>> normalization_fns() {
  return {
      {"softmax", [](const std::vector<Array>& in) { return std::vector<Array>{softmax(in[0], {-1})}; }},
      {"rms_norm", [](const std::vector<Array>& in) { return std::vector<Array>{rms_norm(in[0], in[1], 1e-6)}; }},
      {"layer_norm_residual", [](const std::vector<Array>& in) {
         Array h = add(in[0], in[2]);
         return std::vector<Array>{layer_norm(h, in[1], in[1], 1e-5), h};
       }},
      {"layer_norm_of_sum", [](const std::vector<Array>& in) {  // keeps float32(x + r) in registers
         return std::vector<Array>{layer_norm(add(in[0], in[2]), in[1], in[1], 1e-5)};
       }},
  };
}
#endif

TEST(CudaReduceSource, RowPlanKernelsCompileForEveryOperatorAndDtype) {
#if SMELT_HAS_CUDA
  const std::vector<std::pair<ReduceOp, std::vector<Dtype>>> cases = {
      {ReduceOp::Sum, {float32, bfloat16, float16, float64, int32, uint8, bool_}},
      {ReduceOp::Mean, {float32, float64}},
      {ReduceOp::Max, {float32, bfloat16, int64}},
      {ReduceOp::Min, {float16, uint16}},
      {ReduceOp::Prod, {float32, int8}},
      {ReduceOp::All, {bool_, float32}},
      {ReduceOp::Any, {int16}},
  };
  for (const auto& [op, dtypes] : cases)
    for (Dtype dt : dtypes) {
      Dtype out = dt;
      if (op == ReduceOp::All || op == ReduceOp::Any) out = bool_;
      else if ((op == ReduceOp::Sum || op == ReduceOp::Prod) && !is_floating(dt))
        out = dt == bool_ || is_signed_integral(dt) ? int64 : uint64;  // NumPy's accumulator dtypes
      const std::string what = std::string(reduce_op_name(op)) + " " + dtype_name(dt);
      expect_compiles(cuda::reduce_rows_source(op, dt, out, false), what);
      expect_compiles(cuda::reduce_rows_source(op, dt, out, true) , what + " split");
      expect_compiles(cuda::reduce_rows_warp_source(op, dt, out, 8), what + " warp replay of 8");
      expect_compiles(cuda::reduce_rows_warp_source(op, dt, out, 16), what + " warp replay of 16");
      expect_compiles(cuda::reduce_rows_combine_source(op, dt, out), what + " combine");
      expect_compiles(cuda::reduce_columns_source(op, dt, out, false), what + " columns");
      expect_compiles(cuda::reduce_columns_source(op, dt, out, true), what + " columns split");
      const int vec = static_cast<int>(16 / size_of(dt));
      expect_compiles(cuda::reduce_columns_source(op, dt, out, false, vec), what + " columns vectors");
      expect_compiles(cuda::reduce_columns_source(op, dt, out, true, vec), what + " columns vectors split");
    }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaReduceSource, RowOrderDependsOnTheSizesOnly) {
#if SMELT_HAS_CUDA
  // Short rows: a warp each; long rows: a block; few long rows: chunks that keep vectors whole.
  EXPECT_EQ(codegen::gpu_row_order(100000, 512).threads, 32);
  EXPECT_EQ(codegen::gpu_row_order(16384, 4096).threads, 256);
  EXPECT_EQ(codegen::gpu_row_order(16384, 4096).groups, 1);
  // Long rows that are not split take 512 threads (W5's [4096, 32768]); split ones keep 256.
  EXPECT_EQ(codegen::gpu_row_order(4096, 32768).threads, 512);
  EXPECT_EQ(codegen::gpu_row_order(3, 20000).threads, 512);
  EXPECT_EQ(codegen::gpu_row_order(1024, 1 << 20).threads, 512);
  EXPECT_EQ(codegen::gpu_row_order(16384, 16383).threads, 256);
  const auto few = codegen::gpu_row_order(4, 1 << 20);
  EXPECT_GT(few.groups, 1);
  EXPECT_EQ(few.threads, 256);
  EXPECT_EQ(few.chunk % 4096, 0);
  EXPECT_GE(few.groups * few.chunk, int64_t{1} << 20);
  EXPECT_LT((few.groups - 1) * few.chunk, int64_t{1} << 20);
  EXPECT_EQ(codegen::gpu_row_vector(float32), 4);
  EXPECT_EQ(codegen::gpu_row_vector(bfloat16), 8);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(CudaReduceSource, FusedRowKernelsCompile) {
#if SMELT_HAS_CUDA
  using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;
  const std::vector<std::pair<std::string, Fn>> fns = {
      {"softmax", [](const std::vector<Array>& in) { return std::vector<Array>{softmax(in[0], {-1})}; }},
      {"rms_norm", [](const std::vector<Array>& in) { return std::vector<Array>{rms_norm(in[0], in[1], 1e-6)}; }},
      {"layer_norm", [](const std::vector<Array>& in) { return std::vector<Array>{layer_norm(add(in[0], in[0]), in[1], in[1], 1e-5)}; }},
      {"std", [](const std::vector<Array>& in) { return std::vector<Array>{std(in[0], {-1}, true, 1)}; }},
      {"logsumexp", [](const std::vector<Array>& in) { return std::vector<Array>{logsumexp(in[0], {-1}, true)}; }},
      // A bool output (16-element vectors: 64 bytes of float32 input each) and an integer sum.
      {"is_max", [](const std::vector<Array>& in) { return std::vector<Array>{greater_equal(in[0], max(in[0], {-1}, true))}; }},
      {"int_sum", [](const std::vector<Array>& in) { return std::vector<Array>{subtract(in[0], astype(sum(astype(in[0], int32), {-1}, true), in[0].dtype()))}; }},
  };
  for (const auto& [name, fn] : fns)
    for (Dtype dt : {float32, bfloat16, float16, float64}) {
      // 16- and 64-bit rows move in vectors of other widths: two programs cover them.
      if ((dt == float16 || dt == float64) && name != "softmax" && name != "is_max") continue;
      auto tape = optimized_tape(fn, {zeros({8, 64}, dt), zeros({64}, dt)});
      auto programs = fused_programs(tape);
      ASSERT_FALSE(programs.empty()) << name;
      for (auto* p : programs) {
        ASSERT_TRUE(p->is_row_program()) << name;
        expect_compiles(codegen::emit_cuda_row_kernel(*p), name + " " + dtype_name(dt));
      }
    }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// The shared-memory row cache holds exactly the inputs that more than one pass reads: the row
// of softmax and RMSNorm, both summands of a residual LayerNorm; never a weight that only the
// epilogue reads.
TEST(CudaReduceSource, RowCacheHoldsTheInputsSeveralPassesRead) {
#if SMELT_HAS_CUDA
  using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;
  const std::vector<std::tuple<std::string, Fn, size_t>> fns = {
      {"softmax", [](const std::vector<Array>& in) { return std::vector<Array>{softmax(in[0], {-1})}; }, 1},
      {"rms_norm", [](const std::vector<Array>& in) { return std::vector<Array>{rms_norm(in[0], in[1], 1e-6)}; }, 1},
      {"layer_norm_residual",
       [](const std::vector<Array>& in) { return std::vector<Array>{layer_norm(add(in[0], in[2]), in[1], in[1], 1e-5)}; }, 2},
  };
  for (const auto& [name, fn, want] : fns) {
    auto tape = optimized_tape(fn, {zeros({8, 64}, bfloat16), zeros({64}, bfloat16), zeros({8, 64}, bfloat16)});
    auto programs = fused_programs(tape);
    ASSERT_EQ(programs.size(), 1u) << name;
    const codegen::FusedProgram& p = *programs[0];
    const std::vector<int> cached = codegen::gpu_row_cached_inputs(p);
    EXPECT_EQ(cached.size(), want) << name;
    // The cached inputs are full rows (of the row's dtype), the others (weights) are not.
    for (int k : cached) EXPECT_EQ(p.input_dtypes[k], bfloat16) << name;
    if (name != "softmax") {
      EXPECT_LT(cached.size(), p.input_dtypes.size()) << name << ": the weight is not cached";
    }
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// The row kernels keep their vectors in registers: the 16-byte moves land in arrays of 32-bit
// words indexed by constants once unrolled, so the PTX has no local memory (an element array
// written through a vector pointer would put it there). On sm_90 the row cache is filled with
// cp.async.
TEST(CudaReduceSource, FusedRowKernelsUseNoLocalMemory) {
#if SMELT_HAS_CUDA
  const auto fns = normalization_fns();
  for (const auto& [name, fn] : fns)
    for (Dtype dt : {float32, bfloat16}) {
      auto tape = optimized_tape(fn, {zeros({8, 64}, dt), zeros({64}, dt), zeros({8, 64}, dt)});
      for (auto* p : fused_programs(tape)) {
        std::string ptx;
        try {
          ptx = cuda::nvrtc_compile(90, std::string(cuda::device_preamble()) + codegen::emit_cuda_row_kernel(*p), false, name);
        } catch (const DeviceError& e) {
          if (std::string(e.what()).find("NVRTC could not compile") != std::string::npos) FAIL() << e.what();
          GTEST_SKIP() << "NVRTC is not usable here: " << e.what();
        }
        EXPECT_EQ(ptx.find(".local"), std::string::npos) << name << " " << dtype_name(dt);
        // Each of these re-reads its row, which the row cache fetches with asynchronous copies.
        EXPECT_NE(ptx.find("cp.async.cg.shared.global"), std::string::npos) << name << " " << dtype_name(dt);
      }
    }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// Which row programs hold their rows in registers, and with how many vectors a thread: the
// normalizations of W4/W6 ([16384, 4096] bfloat16, float32 statistics: 4 vectors of 4) and the
// 768-wide rows of GPT-2 and BERT (warp rows: 6 vectors, as many as the row needs; BERT's bias +
// residual + LayerNorm reads 3 bfloat16 inputs, 36 words) and W5's 32768-wide float32 softmax
// rows (512 threads a row, 16 vectors of 4 words: 64 words) do; longer rows, split rows and a sum
// of squares (no input read twice) do not.
TEST(CudaReduceSource, RegisterRowsArePlannedFromTheProgramAndTheSizes) {
#if SMELT_HAS_CUDA
  auto program = [](auto fn, Dtype dt) {
    auto tape = optimized_tape(fn, {zeros({8, 64}, dt), zeros({64}, dt), zeros({8, 64}, dt)});
    auto programs = fused_programs(tape);
    EXPECT_EQ(programs.size(), 1u);
    return *programs.at(0);
  };
  const auto rms = program([](const std::vector<Array>& in) { return std::vector<Array>{rms_norm(in[0], in[1], 1e-6)}; }, bfloat16);
  const auto ln = program([](const std::vector<Array>& in) {
    Array h = add(in[0], in[2]);
    return std::vector<Array>{layer_norm(h, in[1], in[1], 1e-5), h};
  }, bfloat16);
  const auto soft = program([](const std::vector<Array>& in) { return std::vector<Array>{softmax(in[0], {-1})}; }, float32);
  const auto total = program([](const std::vector<Array>& in) { return std::vector<Array>{sum(multiply(in[0], in[0]), {-1})}; }, float32);
  const codegen::GpuRowRegisters r = codegen::gpu_row_registers(rms), l = codegen::gpu_row_registers(ln),
                                 s = codegen::gpu_row_registers(soft);
  EXPECT_EQ(r.vec, 4);  // the statistics are float32
  EXPECT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.words, 2);  // 4 bfloat16
  EXPECT_EQ(l.inputs.size(), 2u);
  EXPECT_EQ(l.words, 4);
  EXPECT_EQ(s.words, 4);
  EXPECT_EQ(codegen::gpu_row_registers(total).vec, 0);
  // Kept values: the instructions marked, by what they compute.
  auto kept = [](const codegen::FusedProgram& p, const codegen::GpuRowRegisters& g) {
    std::vector<std::string> k;
    for (size_t i = 0; i < p.instrs.size(); ++i)
      if (g.keep.at(i)) {
        const codegen::Instr& in = p.instrs[i];
        k.push_back(in.kind == codegen::InstrKind::Unary  ? std::string(unary_op_name(in.unary))
                    : in.kind == codegen::InstrKind::Cast ? "cast to " + std::string(dtype_name(in.dtype))
                                                          : "other");
      }
    return k;
  };
  EXPECT_EQ(kept(rms, r), std::vector<std::string>{}) << "RMSNorm's float32 x is a cast of the input";
  EXPECT_EQ(kept(soft, s), std::vector<std::string>{"Exp"}) << "softmax's exp(x - max), for the division";
  // W9's LayerNorm also returns h = x + r (bfloat16): keeping h and its float32 cast would take 6
  // words a vector at once against the inputs' 4, so nothing is kept.
  EXPECT_EQ(kept(ln, l), std::vector<std::string>{});
  const auto ln_only = program([](const std::vector<Array>& in) {
    return std::vector<Array>{layer_norm(add(in[0], in[2]), in[1], in[1], 1e-5)};
  }, bfloat16);
  const codegen::GpuRowRegisters lo = codegen::gpu_row_registers(ln_only);
  EXPECT_EQ(lo.words, 4);
  // W6: float32(x + r) for the variance's pass and the epilogue, which recompute x - mean from it.
  EXPECT_EQ(kept(ln_only, lo), std::vector<std::string>{"cast to float32"});
  auto vectors = [](const codegen::GpuRowRegisters& g, int64_t rows, int64_t n) {
    return codegen::gpu_row_register_vectors(g, codegen::gpu_row_order(rows, n), n);
  };
  EXPECT_EQ(vectors(r, 16384, 4096), 4);
  EXPECT_EQ(vectors(l, 16384, 4096), 4);
  EXPECT_EQ(vectors(l, 4096, 768), 6);
  const auto bias_ln = program([](const std::vector<Array>& in) {
    return std::vector<Array>{layer_norm(add(add(in[0], in[1]), in[2]), in[1], in[1], 1e-12)};
  }, bfloat16);
  const codegen::GpuRowRegisters b = codegen::gpu_row_registers(bias_ln);
  EXPECT_EQ(b.words, 6);
  EXPECT_EQ(vectors(b, 4096, 768), 6);
  EXPECT_EQ(vectors(b, 4096, 1024), 8);
  EXPECT_EQ(vectors(b, 4096, 1100), 0);  // 9 vectors: 54 words
  EXPECT_EQ(kept(bias_ln, b), std::vector<std::string>{"cast to float32"}) << "as W6: float32(x + b + r)";
  EXPECT_EQ(vectors(s, 4096, 32768), 16);
  EXPECT_EQ(codegen::gpu_row_register_block(codegen::gpu_row_order(4096, 32768)), 512);
  EXPECT_EQ(codegen::gpu_row_register_block(codegen::gpu_row_order(16384, 4096)), 256);
  EXPECT_EQ(vectors(s, 4096, 65536), 0);
  EXPECT_EQ(vectors(s, 4096, 8192), 8);
  EXPECT_EQ(vectors(r, 4, 1 << 20), 0);  // split into chunks
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// The pipelined row kernel's persistent grid: every block takes the same number of rows, give or
// take one, and no block more than the resident blocks alone would give it.
TEST(CudaReduceSource, PersistentRowGridsGiveEveryBlockAsManyRows) {
  using codegen::gpu_row_persistent_grid;
  // W4's 16384 rows over 132 SMs x 4 blocks: 512 blocks of 32 rows, not 528 of 31 or 32.
  EXPECT_EQ(gpu_row_persistent_grid(16384, 528), 512u);
  // W5's 4096 rows over 132 x 2: 256 blocks of 16.
  EXPECT_EQ(gpu_row_persistent_grid(4096, 264), 256u);
  // Fewer units than resident blocks: one a block; none resident (unknown): every unit its block.
  EXPECT_EQ(gpu_row_persistent_grid(100, 528), 100u);
  EXPECT_EQ(gpu_row_persistent_grid(100, 0), 100u);
  for (uint64_t needed : {1ull, 529ull, 1000ull, 16385ull, 123457ull})
    for (uint64_t resident : {1ull, 7ull, 132ull, 528ull}) {
      const uint64_t grid = gpu_row_persistent_grid(needed, resident);
      SCOPED_TRACE(std::to_string(needed) + " over " + std::to_string(resident));
      EXPECT_LE(grid, std::max(needed <= resident ? needed : resident, uint64_t{1}));
      // Every block gets ceil(needed / grid) or one less, and the most any block gets is what the
      // resident blocks alone would give.
      const uint64_t most = (needed + grid - 1) / grid;
      EXPECT_EQ(most, (needed + std::min(needed, resident) - 1) / std::min(needed, resident));
      EXPECT_GT(needed, (most - 1) * grid);
    }
}

// The register kernels (any layout, and the pipelined one for clean rows) compile for every
// vector count the planner gives and keep their rows in registers (no local memory: the word
// arrays are indexed by constants once unrolled); the first reads rows with vector loads, the
// pipelined one copies the next row with cp.async.
TEST(CudaReduceSource, RegisterRowKernelsCompileWithoutLocalMemory) {
#if SMELT_HAS_CUDA
  auto fns = normalization_fns();
  fns.push_back({"logsumexp", [](const std::vector<Array>& in) { return std::vector<Array>{logsumexp(in[0], {-1}, true)}; }});
  for (const auto& [name, fn] : fns)
    for (Dtype dt : {float32, bfloat16, float16}) {
      auto tape = optimized_tape(fn, {zeros({8, 64}, dt), zeros({64}, dt), zeros({8, 64}, dt)});
      for (auto* p : fused_programs(tape)) {
        const codegen::GpuRowRegisters regs = codegen::gpu_row_registers(*p);
        ASSERT_GT(regs.vec, 0) << name;
        // Rows of 256 threads with every vector count; rows of 512 (long rows: 16384 elements or
        // more, so at least 8 vectors) with the fewest, which keep values when the program has
        // some, and the most that fit; warp rows; exact rows (a compile-time n). float16 takes
        // the fewest and the most only: its source differs from bfloat16's in the type names
        // alone, and each NVRTC compile costs about a second on a CI core.
        struct Layout {
          int vectors, threads;
          bool exact;
        };
        std::vector<Layout> layouts;
        // Vector counts of 256-thread rows: the powers of two and the most that fit (any count
        // is planned: gpu_row_register_vectors).
        const int most = codegen::kGpuRowRegisterWords / regs.words;
        for (int vectors = 1; vectors <= most; vectors = vectors * 2 > most && vectors < most ? most : vectors * 2)
          if (dt != float16 || vectors == 1 || vectors == most) layouts.push_back({vectors, 256, false});
        int wide = 1;
        while (2 * wide * regs.words <= codegen::kGpuWideRowRegisterWords) wide *= 2;
        if (wide > 8 && dt != float16) layouts.push_back({8, 512, false});
        layouts.push_back({wide, 512, false});
        layouts.push_back({wide, 512, true});
        layouts.push_back({1, 32, true});
        if (dt == bfloat16) layouts.push_back({6, 32, true});  // GPT-2 and BERT's rows of 768
        for (const Layout& l : layouts)
          for (bool pipelined : {false, true}) {
            const std::string what =
                name + " " + dtype_name(dt) + " " + codegen::register_row_layout(pipelined, l.vectors, l.threads, l.exact);
            const std::string source = pipelined ? codegen::emit_cuda_row_pipelined_kernel(*p, l.vectors, l.threads, l.exact)
                                                 : codegen::emit_cuda_row_register_kernel(*p, l.vectors, l.threads, l.exact);
            std::string ptx;
            try {
              ptx = cuda::nvrtc_compile(90, std::string(cuda::device_preamble()) + source, false, what);
            } catch (const DeviceError& e) {
              if (std::string(e.what()).find("NVRTC could not compile") != std::string::npos) FAIL() << e.what();
              GTEST_SKIP() << "NVRTC is not usable here: " << e.what();
            }
            EXPECT_EQ(ptx.find(".local"), std::string::npos) << what;
            EXPECT_NE(ptx.find(pipelined ? "cp.async" : "ld.global.v"), std::string::npos) << what;
          }
      }
    }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// The element-wise rows layout (broadcast columns and rows such as x - col) compiles.
TEST(CudaReduceSource, ElementwiseRowsLayoutCompiles) {
#if SMELT_HAS_CUDA
  expect_compiles(cuda::elementwise_rows_source({"float", "float"}, "float", "smelt::scalar::subtract<float>(v0, v1)"), "x - col");
  expect_compiles(cuda::elementwise_rows_source({"bf16"}, "float", "cvt<float, bf16>(v0)"), "cast");
  expect_compiles(cuda::elementwise_rows_source({"bool", "i64", "i64"}, "i64", "(v0 ? v1 : v2)"), "where");
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

}  // namespace
}  // namespace smelt::test
