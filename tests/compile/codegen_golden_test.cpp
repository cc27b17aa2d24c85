// Golden-file tests of the generated C++ kernels, and the exactness of the literals they print.
//
// The sources of a few representative programs are compared with tests/compile/golden/*.cpp,
// so that a change to the kernels shows up in review. The shared preamble (dtype.h, convert.h,
// scalar_math.h) is replaced by one marker line: it is covered by the bit-exactness tests.
// Regenerate with SMELT_UPDATE_GOLDEN=1 after an intended change.
#include <cmath>
#include <fstream>
#include <sstream>

#include "compile_helpers.h"
#include "src/codegen/cpp_emitter.h"
#include "src/codegen/cuda_emitter.h"
#include "src/codegen/embedded_sources.h"

namespace smelt {
namespace {

namespace fs = std::filesystem;
using codegen::FusedProgram;
using codegen::Instr;
using codegen::InstrKind;

fs::path golden_dir() { return fs::path(__FILE__).parent_path() / "golden"; }

/// Programs written as instruction lists, one helper per instruction kind.
struct Builder {
  FusedProgram p;
  int input(Dtype d) {
    Instr in{};
    in.kind = InstrKind::Input;
    in.dtype = d;
    in.index = static_cast<int>(p.input_dtypes.size());
    p.input_dtypes.push_back(d);
    return push(in);
  }
  int constant(Scalar v) {
    Instr in{};
    in.kind = InstrKind::Constant;
    in.dtype = v.dtype;
    in.value = v;
    return push(in);
  }
  int unary(UnaryOp op, int a, Dtype out) {
    Instr in{};
    in.kind = InstrKind::Unary;
    in.dtype = out;
    in.unary = op;
    in.operands = {a};
    return push(in);
  }
  int binary(BinaryOp op, int a, int b, Dtype out) {
    Instr in{};
    in.kind = InstrKind::Binary;
    in.dtype = out;
    in.binary = op;
    in.operands = {a, b};
    return push(in);
  }
  int select(int c, int a, int b) {
    Instr in{};
    in.kind = InstrKind::Select;
    in.dtype = p.instrs[a].dtype;
    in.operands = {c, a, b};
    return push(in);
  }
  int cast(int a, Dtype to) {
    Instr in{};
    in.kind = InstrKind::Cast;
    in.dtype = to;
    in.operands = {a};
    return push(in);
  }
  int push(Instr in) {
    p.instrs.push_back(std::move(in));
    return static_cast<int>(p.instrs.size()) - 1;
  }
};

/// exp(x) * y + 1 in float32: the common case, one output, a literal.
FusedProgram float32_chain() {
  Builder b;
  // Inputs are numbered as the fuse pass meets them, so the fusion tests build this kernel too.
  int x = b.input(float32);
  int e = b.unary(UnaryOp::Exp, x, float32);
  int m = b.binary(BinaryOp::Multiply, e, b.input(float32), float32);
  b.p.outputs = {b.binary(BinaryOp::Add, m, b.constant(Scalar::of_float(1.0, float32)), float32)};
  return b.p;
}

/// Integer bit ops, a comparison, a select and casts, with two outputs of different dtypes.
FusedProgram int_select_cast() {
  Builder b;
  int x = b.input(int32), y = b.input(int32);
  int masked = b.binary(BinaryOp::BitwiseAnd, x, b.constant(Scalar::of_int(3, int32)), int32);
  int shifted = b.binary(BinaryOp::LeftShift, masked, b.constant(Scalar::of_int(1, int32)), int32);
  int big = b.binary(BinaryOp::Greater, shifted, y, bool_);
  int f = b.cast(shifted, float32);
  int picked = b.select(big, f, b.constant(Scalar::of_float(-INFINITY, float32)));
  b.p.outputs = {shifted, picked};
  return b.p;
}

/// float16 math with special constants (NaN, -0, inf) and a value 0.1 that has no exact half.
FusedProgram float16_constants() {
  Builder b;
  int x = b.input(float16);
  int a = b.binary(BinaryOp::Maximum, x, b.constant(Scalar::of_float(std::nan(""), float16)), float16);
  int c = b.binary(BinaryOp::Multiply, a, b.constant(Scalar::of_float(-0.0, float16)), float16);
  int d = b.binary(BinaryOp::Add, c, b.constant(Scalar::of_float(INFINITY, float16)), float16);
  // One builder call per statement: the order of instructions must not depend on the order in
  // which a C++ compiler evaluates function arguments.
  int r = b.unary(UnaryOp::Sqrt, d, float16);
  int e = b.binary(BinaryOp::Power, r, b.constant(Scalar::of_float(0.1, float16)), float16);
  b.p.outputs = {b.unary(UnaryOp::IsNan, e, bool_)};
  return b.p;
}

/// Integer extremes as literals, an unsigned 64-bit maximum, float64 and bfloat16 casts.
FusedProgram int64_literals() {
  Builder b;
  int x = b.input(int64), u = b.input(uint64);
  int lo = b.constant(Scalar::of_int(INT64_MIN, int64));
  int s = b.binary(BinaryOp::Subtract, x, lo, int64);
  int v = b.binary(BinaryOp::BitwiseXor, u, b.constant(Scalar::of_uint(UINT64_MAX, uint64)), uint64);
  int sd = b.cast(s, float64);
  int vd = b.cast(v, float64);
  int d = b.binary(BinaryOp::Divide, sd, vd, float64);
  int t = b.binary(BinaryOp::Add, d, b.constant(Scalar::of_float(0.1, float64)), float64);
  b.p.outputs = {b.cast(t, bfloat16), s};
  return b.p;
}

/// The emitted source with the preamble replaced by a marker.
std::string emitted(const FusedProgram& p) {
  std::string src = codegen::emit_cpu_kernel(p);
  const std::string preamble = codegen::embedded_kernel_preamble();
  const size_t at = src.find(preamble);
  EXPECT_NE(at, std::string::npos) << "the preamble is pasted in front of every kernel";
  if (at != std::string::npos)
    src.replace(at, preamble.size(), "// <embedded preamble: dtype.h, convert.h, scalar_math.h>\n");
  return src;
}

void expect_golden_text(const std::string& name, const std::string& got) {
  const fs::path file = golden_dir() / name;
  const char* update = std::getenv("SMELT_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    fs::create_directories(golden_dir());
    std::ofstream(file, std::ios::binary) << got;
    return;
  }
  std::ifstream f(file, std::ios::binary);
  ASSERT_TRUE(f) << file << " is missing; run with SMELT_UPDATE_GOLDEN=1 to create it";
  std::stringstream want;
  want << f.rdbuf();
  EXPECT_EQ(got, want.str()) << "the generated source of " << name << " changed; if intended, rerun with "
                             << "SMELT_UPDATE_GOLDEN=1 and review the diff of " << file;
}

void expect_golden(const std::string& name, const FusedProgram& p) { expect_golden_text(name + ".cpp", emitted(p)); }

/// The one program that fusing `fn` over `examples` gives (a row program for the norms).
FusedProgram traced_program(const std::function<std::vector<Array>(const std::vector<Array>&)>& fn,
                            const std::vector<Array>& examples) {
  const compiler::Tape tape = test::optimized_tape(fn, examples);  // owns the kernels
  auto programs = test::fused_programs(tape);
  EXPECT_EQ(programs.size(), 1u);
  return programs.empty() ? FusedProgram{} : *programs[0];
}

FusedProgram rms_norm_rows() {
  return traced_program([](const std::vector<Array>& in) { return std::vector<Array>{rms_norm(in[0], in[1], 1e-6)}; },
                        {zeros({4, 64}, bfloat16), zeros({64}, bfloat16)});
}

FusedProgram softmax_rows() {
  return traced_program([](const std::vector<Array>& in) { return std::vector<Array>{softmax(in[0], {-1})}; },
                        {zeros({4, 64}, float32)});
}

// LayerNorm of a residual sum in bfloat16 (W6): two means, the centred row kept for the
// variance pass and the epilogue, bfloat16 stored through its bits.
FusedProgram layer_norm_residual_rows() {
  return traced_program(
      [](const std::vector<Array>& in) { return std::vector<Array>{layer_norm(add(in[0], in[1]), in[2], in[3], 1e-5)}; },
      {zeros({4, 64}, bfloat16), zeros({4, 64}, bfloat16), zeros({64}, bfloat16), zeros({64}, bfloat16)});
}

// Fused reductions: RMSNorm (a prologue cast and square, a mean, the per-row rsqrt, the epilogue
// with the weight) for the CPU, and softmax (two reductions) for both devices.
TEST(CodegenGolden, RmsNormRowKernel) { expect_golden("rms_norm_rows_bf16", rms_norm_rows()); }
TEST(CodegenGolden, LayerNormResidualRowKernel) {
  expect_golden("layer_norm_residual_rows_bf16", layer_norm_residual_rows());
}
TEST(CodegenGolden, SoftmaxRowKernel) { expect_golden("softmax_rows_f32", softmax_rows()); }
TEST(CodegenGolden, SoftmaxRowKernelCuda) {
  expect_golden_text("softmax_rows_f32.cu", codegen::emit_cuda_row_kernel(softmax_rows()));
}
// bfloat16 rows: the reduction moves 4 elements (16 bytes of its float32 operand), the epilogue
// 8 (16 bytes of the bfloat16 output); the row is cached for the second pass.
TEST(CodegenGolden, RmsNormRowKernelCuda) {
  expect_golden_text("rms_norm_rows_bf16.cu", codegen::emit_cuda_row_kernel(rms_norm_rows()));
}

// W4's rows ([16384, 4096] bfloat16) in registers: each thread loads its 4 vectors of 4 once,
// the mean's pass and the epilogue read them there; one barrier for the mean's tree.
TEST(CodegenGolden, RmsNormRegisterRowKernelCuda) {
  expect_golden_text("rms_norm_regs4_bf16.cu", codegen::emit_cuda_row_register_kernel(rms_norm_rows(), 4, 256, false));
}
// The same rows when clean: persistent blocks, the next row's vectors copied into shared memory
// (cp.async) while this one is computed, no element-by-element path.
TEST(CodegenGolden, RmsNormPipelinedRowKernelCuda) {
  expect_golden_text("rms_norm_pipe4_bf16.cu", codegen::emit_cuda_row_pipelined_kernel(rms_norm_rows(), 4, 256, false));
}

// W6's rows (exact: 4096 elements are 256 threads' 4 vectors of 4, so n is a constant and no
// guard against the row's end is left): float32(x + r) (x + r rounded to bfloat16) kept in registers for the variance's pass
// and the epilogue, which loads the weight's and bias's vectors one at a time (32 words: loaded
// all first, they took the registers of a block an SM). RMSNorm's weight (16 words) loads first.
TEST(CodegenGolden, LayerNormResidualPipelinedRowKernelCuda) {
  expect_golden_text("layer_norm_residual_pipe4_bf16.cu",
                     codegen::emit_cuda_row_pipelined_kernel(layer_norm_residual_rows(), 4, 256, true));
}

// W5's rows ([4096, 32768] float32, 512 threads of 16 vectors of 4, exact): three passes over the
// registers, the division taking exp(x - max) again (64 words leave no room to keep it).
TEST(CodegenGolden, SoftmaxWidePipelinedRowKernelCuda) {
  expect_golden_text("softmax_pipe16x512_f32.cu", codegen::emit_cuda_row_pipelined_kernel(softmax_rows(), 16, 512, true));
}

TEST(CodegenGolden, Float32Chain) { expect_golden("float32_chain", float32_chain()); }
TEST(CodegenGolden, IntegerSelectAndCasts) { expect_golden("int_select_cast", int_select_cast()); }
TEST(CodegenGolden, Float16Constants) { expect_golden("float16_constants", float16_constants()); }
TEST(CodegenGolden, Int64Literals) { expect_golden("int64_literals", int64_literals()); }

// The hand-written programs are real: they build and run like fused ones. (One build: the
// chain the fusion tests use as well.)
TEST(CodegenGolden, GoldenProgramBuildsAndRuns) {
  auto kernel = codegen::make_fused_kernel(float32_chain(), Device::cpu());
  ASSERT_NE(kernel->cpu, nullptr);
  std::vector<float> x = {0.0f, 1.0f, -1.0f}, y = {2.0f, 3.0f, 4.0f}, out(3);
  char* args[] = {reinterpret_cast<char*>(x.data()), reinterpret_cast<char*>(y.data()),
                  reinterpret_cast<char*>(out.data())};
  const int64_t shape[] = {3}, strides[] = {1, 1, 1};
  kernel->cpu(0, 3, 1, shape, args, strides, 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], std::exp(x[i]) * y[i] + 1.0f);
}

// No shape reaches the source: chains traced at different shapes give byte-identical kernels.
TEST(CodegenGolden, SourceDoesNotDependOnShapes) {
  auto fn = [](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0]) * in[1] + 1.0f}; };
  std::vector<std::string> sources;
  for (const Shape& s : {Shape{3}, Shape{4, 5}, Shape{}, Shape{2, 0, 7}}) {
    auto tape = test::optimized_tape(fn, {zeros(s), zeros(s)});
    auto programs = test::fused_programs(tape);
    ASSERT_EQ(programs.size(), 1u);
    sources.push_back(codegen::emit_cpu_kernel(*programs[0]));
  }
  for (auto& s : sources) EXPECT_EQ(s, sources[0]);
  EXPECT_EQ(emitted(*test::fused_programs(test::optimized_tape(fn, {zeros({3}), zeros({3})}))[0]),
            emitted(float32_chain()));
}

// Float literals are exact: parsing the printed text gives back every bit (MLX printed
// 7 significant digits, 1 ulp off for many float32 values and most float64 ones).
TEST(CodegenLiterals, FloatLiteralsRoundTripExactly) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, 8);
    if (!std::isfinite(d)) continue;
    std::string lit = codegen::cpp_literal(Scalar::of_float(d, float64));
    EXPECT_EQ(std::strtod(lit.c_str(), nullptr), d) << lit;
    uint32_t fbits = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &fbits, 4);
    if (!std::isfinite(f)) continue;
    lit = codegen::cpp_literal(Scalar::of_float(f, float32));
    ASSERT_EQ(lit.back(), 'f') << lit;
    const float parsed = std::strtof(lit.substr(0, lit.size() - 1).c_str(), nullptr);
    uint32_t pbits;
    std::memcpy(&pbits, &parsed, 4);
    EXPECT_EQ(pbits, fbits) << lit;
  }
}

TEST(CodegenLiterals, SpecialValuesAreWrittenByTheirBits) {
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_float(0.1, float32)), "0x1.99999ap-4f");
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_float(0.1, float64)), "0x1.999999999999ap-4");
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_float(-0.0, float64)), "-0x0p+0");
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_float(INFINITY, float32)), "std::bit_cast<float>(0x7f800000u)");
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_float(-INFINITY, float64)), "std::bit_cast<double>(0xfff0000000000000ull)");
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_float(std::nan(""), float64)),
            "std::bit_cast<double>(0x7ff8000000000000ull)");
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_float(1.0, float16)), "smelt::float16_t::from_bits(0x3c00)");
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_float(-2.0, bfloat16)), "smelt::bfloat16_t::from_bits(0xc000)");
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_int(INT64_MIN, int64)),
            "static_cast<int64_t>(static_cast<int64_t>(0x8000000000000000ull))");
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_int(-1, int8)),
            "static_cast<int8_t>(static_cast<int64_t>(0xffffffffffffffffull))");
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_uint(UINT64_MAX, uint64)), "static_cast<uint64_t>(0xffffffffffffffffull)");
  EXPECT_EQ(codegen::cpp_literal(Scalar::of_bool(true)), "true");
}

}  // namespace
}  // namespace smelt
