// The op-case harness: every case of tests/op_cases.h (every element-wise primitive) on every dtype
// it accepts, eagerly and compiled, on every available device (the CPU always, CUDA when a GPU is
// present): compiled against eager on the same device bit for bit, and a device's eager result
// against the CPU's within the case's device bound.
//
// Kernel builds are the cost, so each test puts many ops into one compiled function that the
// fuse pass turns into one or two generated kernels (checked on the final tape): every op runs
// on its own copy of the inputs and a where(sel == k, ...) chain per result dtype keeps each
// element's own op (expect_cases_bit_exact). Inputs hold NaN of both signs and with payloads,
// ±inf, ±0, subnormals, the integer extremes and random bit patterns. Each function runs
// twice: on contiguous inputs and on negative-stride views, which take the kernel's strided
// path.
#include <cstring>
#include <set>

#include "compile_helpers.h"
#include "op_cases.h"

namespace smelt {
namespace {

/// Elements per case: every case sees the same m input values, specials included.
constexpr int64_t kM = 256;

/// Ties `results` into one bool value so they all land in one fusion group.
Array tie_all(const std::vector<Array>& results) {
  Array t = logical_not(results[0]);
  for (size_t i = 1; i < results.size(); ++i) t = logical_or(t, results[i]);
  return t;
}

/// A reversed view (negative stride) of a twice-longer array holding x's values at odd
/// positions: the same values as x, read through the kernel's strided path.
Array reversed_view(const Array& x) {
  const int64_t n = x.shape(0);
  Array doubled = reshape(stack({flip(x), flip(x)}, 1), {2 * n});
  Array view = slice(doubled, {-1}, {-2 * n - 1}, {-2});
  EXPECT_FALSE(view.is_contiguous());
  return view;
}

/// One op applied to the inputs of a test (x; or x and y; or c, x and y). `op`: its row of
/// tests/op_cases.h, whose domain limits the device comparison when `device_ulps` > 0; another
/// device's eager result matches the CPU's within `device_ulps` (0: bit for bit).
struct Case {
  std::string name;
  std::function<Array(const std::vector<Array>&)> fn;
  const test::OpCase* op = nullptr;
  int64_t device_ulps = 0;
};

/// The devices the harness runs on: the CPU, and the first GPU when there is one.
std::vector<Device> harness_devices() {
  std::vector<Device> d = {Device::cpu()};
  if (cuda_available()) d.push_back(Device::cuda(0));
  return d;
}

/// Whether element i's inputs lie in the case's reference domain (where the device bound holds).
bool in_domain(const test::OpCase& op, const std::vector<std::vector<double>>& inputs, size_t i) {
  for (const auto& dom : op.domains) {
    const double a = inputs[0][i];
    if (!(a >= dom.lo && a <= dom.hi)) continue;
    if (op.arity == 2) {
      const double b = inputs[1][i];
      if (!(b >= dom.blo && b <= dom.bhi)) continue;
    }
    return true;
  }
  return false;
}

/// The device's eager results against the CPU's (`want`), element by element under the rule of
/// the case that produced each element (muxed outputs: see expect_chunk_bit_exact). Cases with a
/// device bound are compared where their inputs lie in their domain; the others bit for bit
/// (NaN payloads aside).
void expect_device_matches_cpu(const std::vector<Case>& cases, const std::vector<Dtype>& case_dtypes,
                               const std::vector<Array>& args_cpu, const std::vector<Array>& got,
                               const std::vector<Array>& want, const std::string& label, Device device) {
  std::vector<std::vector<double>> inputs;
  for (size_t a = 0; a + 1 < args_cpu.size(); ++a) inputs.push_back(test::as_doubles(args_cpu[a]));
  for (size_t o = 0; o + 1 < want.size(); ++o) {  // the last output ties the others together
    const Dtype dt = want[o].dtype();
    size_t first = 0;
    while (first < cases.size() && case_dtypes[first] != dt) ++first;
    auto g = test::raw_bytes(to_device(got[o], Device::cpu())), w = test::raw_bytes(want[o]);
    const size_t isz = size_of(dt);
    std::set<std::string> bad;
    for (size_t i = 0; i * isz < w.size(); ++i) {
      const size_t k = i / static_cast<size_t>(kM);
      const Case& owner = case_dtypes[k] == dt ? cases[k] : cases[first];
      // Integer and bool results are exact on every device; a float bound holds in the domain.
      const int64_t ulps = is_floating(dt) ? owner.device_ulps : 0;
      if (ulps > 0 && owner.op && !in_domain(*owner.op, inputs, i)) continue;
      if (!test::same_within_ulps(&g[i * isz], &w[i * isz], dt, ulps)) bad.insert(owner.name);
    }
    for (auto& name : bad)
      ADD_FAILURE() << name << " (" << label << "): " << device.str() << " and the CPU differ beyond the case's bound";
  }
}

/// Runs every case on the same inputs in ONE compiled function, so that one generated kernel
/// (two at most) covers them all: case k owns elements [k*m, (k+1)*m), which hold the m input
/// values again, and a chain of where(sel == k, ...) per result dtype keeps each element's own
/// case. The function runs compiled and eagerly, on contiguous inputs and on reversed views;
/// the results must match bit for bit and the final tape must keep no unfused element-wise step.
void expect_chunk_bit_exact(const std::vector<Case>& cases, const std::vector<Array>& base_inputs,
                            const std::string& label, std::string* final_tape) {
  const int64_t k = static_cast<int64_t>(cases.size());
  std::vector<Array> inputs;
  for (auto& x : base_inputs) inputs.push_back(tile(x, {k}));
  std::vector<int32_t> sel(static_cast<size_t>(k * kM));
  for (size_t i = 0; i < sel.size(); ++i) sel[i] = static_cast<int32_t>(i / kM);
  inputs.push_back(Array(sel, Shape{k * kM}));
  auto fn = [&cases](const std::vector<Array>& in) {
    std::vector<Array> args(in.begin(), in.end() - 1);
    const Array& which = in.back();
    std::vector<Array> muxed;  // one per result dtype, in the order of first appearance
    for (size_t c = 0; c < cases.size(); ++c) {
      Array r = cases[c].fn(args);
      bool placed = false;
      for (auto& m : muxed)
        if (m.dtype() == r.dtype()) {
          m = where(which == static_cast<int32_t>(c), r, m);
          placed = true;
        }
      if (!placed) muxed.push_back(r);
    }
    muxed.push_back(tie_all(muxed));
    return muxed;
  };
  test::Dumps dumps;
  auto compiled = compile_flat(fn, dumps.options({.fallback = CompileFallback::Raise}));
  std::vector<Dtype> case_dtypes;
  {
    std::vector<Array> probe(inputs.begin(), inputs.end() - 1);
    for (auto& c : cases) case_dtypes.push_back(c.fn(probe).dtype());
  }
  const std::vector<Array> cpu_want = fn(inputs);
  const std::vector<Device> devices = harness_devices();
  for (const Device& device : devices) {
    for (int run = 0; run < 2; ++run) {
      std::vector<Array> args;
      for (auto& x : inputs) {
        Array on = device == Device::cpu() ? x : to_device(x, device);
        args.push_back(run == 0 ? on : reversed_view(on));
      }
      std::vector<Array> got = compiled(args);
      std::vector<Array> want = fn(args);
      if (run == 0 && !(device == Device::cpu()))
        expect_device_matches_cpu(cases, case_dtypes, inputs, want, cpu_want, label, device);
      ASSERT_EQ(got.size(), want.size());
      for (size_t o = 0; o < got.size(); ++o) {
        ASSERT_EQ(got[o].dtype(), want[o].dtype());
        ASSERT_EQ(got[o].shape(), want[o].shape());
        auto g = test::raw_bytes(to_device(got[o], Device::cpu()));
        auto w = test::raw_bytes(to_device(want[o], Device::cpu()));
        const size_t isz = size_of(got[o].dtype());
        std::set<std::string> bad;
        for (size_t i = 0; i < g.size(); i += isz)
          if (std::memcmp(&g[i], &w[i], isz) != 0) bad.insert(cases[i / isz / kM].name);
        for (auto& name : bad)
          ADD_FAILURE() << name << " (" << label << "): compiled and eager results differ on " << device.str()
                        << (run ? " (strided inputs)" : "");
      }
    }
  }
  // The views hit the same entry: one kernel, two paths, per device.
  EXPECT_EQ(compiled.stats().traces, devices.size());
  const std::string tape = dumps.final_tape();
  EXPECT_GE(test::Dumps::count(tape, "Fused"), 1) << tape;
  for (const char* prim : {"Unary", "Binary", "Select", "Cast"})
    EXPECT_EQ(test::Dumps::count(tape, prim), 0) << label << ": an unfused " << prim << " step\n" << tape;
  if (final_tape) *final_tape += tape;
}

/// Cases per compiled function: about 4 instructions each (the op, its operand conversion, the
/// comparison and the select of the mux), so a function fits in one or two kernels of
/// kMaxFusedInstructions instead of breaking into many small ones.
constexpr size_t kCasesPerFunction = 32;

/// expect_chunk_bit_exact over chunks of at most kCasesPerFunction cases.
void expect_cases_bit_exact(const std::vector<Case>& cases, const std::vector<Array>& base_inputs,
                            const std::string& label, std::string* final_tape = nullptr) {
  const size_t chunks = (cases.size() + kCasesPerFunction - 1) / kCasesPerFunction;
  const size_t per = (cases.size() + chunks - 1) / chunks;
  for (size_t lo = 0; lo < cases.size(); lo += per) {
    std::vector<Case> chunk(cases.begin() + lo, cases.begin() + std::min(cases.size(), lo + per));
    expect_chunk_bit_exact(chunk, base_inputs, label, final_tape);
  }
}

/// True when `bits` (an element of `dtype`) is a NaN.
bool is_nan_bits(Dtype dtype, uint64_t bits) {
  switch (dtype) {
    case Dtype::Float16: return (bits & 0x7c00) == 0x7c00 && (bits & 0x03ff) != 0;
    case Dtype::BFloat16: return (bits & 0x7f80) == 0x7f80 && (bits & 0x007f) != 0;
    case Dtype::Float32: return (bits & 0x7f800000) == 0x7f800000 && (bits & 0x007fffff) != 0;
    case Dtype::Float64: return (bits & 0x7ff0000000000000) == 0x7ff0000000000000 && (bits & 0x000fffffffffffff) != 0;
    default: return false;
  }
}

/// `y` with every NaN that meets a NaN of `x` at the same position replaced by x's NaN.
///
/// When both operands of an operation are NaNs, IEEE 754 leaves the payload and sign of the
/// result to the implementation, and x86 returns the first operand's: a C++ compiler may swap
/// the operands of a commutative add or multiply (to use a memory operand), so which NaN comes
/// out differs between two compilations of the same code. NaN meeting the same NaN keeps the
/// propagation covered without depending on that.
Array align_nans(const Array& x, const Array& y) {
  if (!is_floating(x.dtype())) return y;
  auto xb = test::raw_bytes(x), yb = test::raw_bytes(y);
  const size_t isz = size_of(x.dtype());
  for (size_t i = 0; i < yb.size(); i += isz) {
    uint64_t a = 0, b = 0;
    std::memcpy(&a, &xb[i], isz);
    std::memcpy(&b, &yb[i], isz);
    if (is_nan_bits(x.dtype(), a) && is_nan_bits(x.dtype(), b)) std::memcpy(&yb[i], &a, isz);
  }
  return Array(yb.data(), y.shape(), y.dtype());
}

/// `x` with its NaNs replaced by 1.5 (for operations with a NaN constant; see align_nans).
Array without_nans(const Array& x) {
  auto xb = test::raw_bytes(x);
  Array one_and_half = astype(Array(1.5), x.dtype());
  const size_t isz = size_of(x.dtype());
  for (size_t i = 0; i < xb.size(); i += isz) {
    uint64_t a = 0;
    std::memcpy(&a, &xb[i], isz);
    if (is_nan_bits(x.dtype(), a)) std::memcpy(&xb[i], one_and_half.data(), isz);
  }
  return Array(xb.data(), x.shape(), x.dtype());
}

class BitExact : public ::testing::TestWithParam<Dtype> {};

TEST_P(BitExact, EveryUnaryOpAndCast) {
  const Dtype dt = GetParam();
  std::vector<Case> cases;
  for (const test::OpCase* c : test::op_cases_of_arity(1))
    if (c->accepts(dt)) cases.push_back({c->name, [c](const std::vector<Array>& in) { return c->unary(in[0]); }, c, c->device_ulps});
  for (Dtype to : test::all_dtypes())
    if (to != dt)
      cases.push_back({std::string("astype(") + dtype_name(to) + ")",
                       [to](const std::vector<Array>& in) { return astype(in[0], to); }});
  expect_cases_bit_exact(cases, {test::special_array(dt, kM, 1)}, dtype_name(dt));
}

TEST_P(BitExact, EveryBinaryOpAndSelect) {
  const Dtype dt = GetParam();
  std::vector<Case> cases;
  for (const test::OpCase* c : test::op_cases_of_arity(2))
    if (c->accepts(dt))
      cases.push_back({c->name, [c](const std::vector<Array>& in) { return c->binary(in[0], in[1]); }, c,
                       c->device_ulps});
  cases.push_back({"where", [](const std::vector<Array>& in) { return where(in[2], in[0], in[1]); }});
  // The second operand has its own specials, so NaN meets numbers, infinities and NaN.
  Array x = test::special_array(dt, kM, 2);
  Array y = align_nans(x, test::special_array(dt, kM, 3));
  expect_cases_bit_exact(cases, {x, y, test::special_array(bool_, kM, 4)}, dtype_name(dt));
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, BitExact, ::testing::ValuesIn(test::all_dtypes()),
                         [](const ::testing::TestParamInfo<Dtype>& info) {
                           return std::string(dtype_name(info.param));
                         });

// tests/op_cases.h names every operator: each traced case contributes its UnaryOp or BinaryOp.
TEST(BitExactCoverage, TablesCoverEveryOperator) {
  std::set<int> unary, binary;
  for (Dtype dt : {float32, int32, bool_}) {
    Array probe = zeros({2}, dt);
    for (const test::OpCase& c : test::op_cases()) {
      if (!c.accepts(dt)) continue;
      auto tape = test::trace_tape([&](const std::vector<Array>& in) { return std::vector<Array>{c.apply(in)}; },
                                   std::vector<Array>(c.arity, probe));
      for (auto* s : test::steps_of(tape, PrimKind::Unary))
        unary.insert(static_cast<int>(s->prim.get<UnaryParams>().op));
      for (auto* s : test::steps_of(tape, PrimKind::Binary))
        binary.insert(static_cast<int>(s->prim.get<BinaryParams>().op));
    }
  }
  int num_unary = 0, num_binary = 0;
#define X(name) ++num_unary;
  SMELT_UNARY_OPS(X)
#undef X
#define X(name) ++num_binary;
  SMELT_BINARY_OPS(X)
#undef X
  EXPECT_EQ(static_cast<int>(unary.size()), num_unary);
  EXPECT_EQ(static_cast<int>(binary.size()), num_binary);
  EXPECT_EQ(test::op_cases().size(), static_cast<size_t>(num_unary + num_binary));  // one row each
}

// Scalar constants are literals in the kernel, written exactly: results match the unfused
// kernels that read the same value from memory (MLX printed 7 digits and came out 1 ulp off).
// All four float dtypes in one function: input d is x in dtype d.
TEST(BitExactConstants, ScalarLiteralsAreExactInEveryFloatDtype) {
  const std::vector<double> constants = {
      0.1, 1.0 / 3.0, 3.141592653589793, 1e-300,        6.1e-5,   65504.0,  1e38, -0.0, 2.0, -1.0,
      0.5, 0.0,       std::nan(""),      -std::nan(""), INFINITY, -INFINITY};
  const std::vector<Dtype> dtypes = {float16, bfloat16, float32, float64};
  std::vector<Case> cases;
  std::vector<Array> inputs;
  for (size_t d = 0; d < dtypes.size(); ++d) {
    inputs.push_back(without_nans(test::special_array(dtypes[d], kM, static_cast<uint32_t>(6 + d))));
    for (double c : constants)
      cases.push_back({std::string("x * c + c with c = ") + std::to_string(c) + " in " + dtype_name(dtypes[d]),
                       [c, d](const std::vector<Array>& in) { return in[d] * c + c; }});
  }
  std::string tape;
  expect_cases_bit_exact(cases, inputs, "scalar literals", &tape);
  // Every scalar became a literal: the kernels read only the function's inputs.
  EXPECT_EQ(test::Dumps::count(tape, "constant"), 0) << tape;
  EXPECT_EQ(test::Dumps::count(tape, "Broadcast"), 0) << tape;
}

// pow with a literal exponent must not be rewritten by the C++ compiler (pow(x, 2) -> x * x,
// pow(x, -1) -> 1 / x): those round differently from the C library's pow for some inputs,
// such as 4097^2, which lies exactly between two floats.
TEST(BitExactConstants, PowerWithLiteralExponents) {
  std::vector<float> base;
  for (int k = 4097; base.size() < 200; k += 2) base.push_back(static_cast<float>(k));
  for (int k = 1; base.size() < static_cast<size_t>(kM); ++k) base.push_back(1.0f + static_cast<float>(k) * 0x1p-12f);
  Array x(base, Shape{kM});
  std::vector<Case> cases;
  const std::vector<Dtype> dtypes = {float16, float32, float64};
  std::vector<Array> inputs;
  for (size_t d = 0; d < dtypes.size(); ++d) {
    inputs.push_back(astype(x, dtypes[d]));
    for (double e : {2.0, -1.0, 0.5, 1.0, 3.0, -2.0})
      cases.push_back({std::string("power(x, ") + std::to_string(e) + ") in " + dtype_name(dtypes[d]),
                       [e, d](const std::vector<Array>& in) { return power(in[d], e); }, nullptr,
                       test::kMathUlps});
  }
  expect_cases_bit_exact(cases, inputs, "literal exponents");
}

// maximum and minimum with a literal bound that is not NaN take one-compare forms in the kernel
// (scalar_math.h's *_not_nan): the literal first or second, against inputs holding NaN of both
// signs with payloads, +-0 and +-inf, must give the two-compare kernel's bits (which operand wins
// a tie of +0 and -0, which NaN comes out), as must ReLU6 and hardswish built from them. A NaN
// literal keeps the general form.
TEST(BitExactConstants, MaximumAndMinimumWithALiteralBound) {
  const std::vector<double> bounds = {0.0, -0.0, 6.0, -1.0, INFINITY, -INFINITY, std::nan("")};
  const std::vector<Dtype> dtypes = {float16, bfloat16, float32, float64};
  std::vector<Case> cases;
  std::vector<Array> inputs;
  for (size_t d = 0; d < dtypes.size(); ++d) {
    const Dtype dt = dtypes[d];
    inputs.push_back(test::special_array(dt, kM, static_cast<uint32_t>(11 + d)));
    const std::string name = dtype_name(dt);
    auto literal = [dt](double v) {
      Array c = astype(Array(std::vector<double>{v}, Shape{}), dt);
      c.eval();
      return c;
    };
    for (double b : bounds) {
      const Array c = literal(b);
      const std::string cs = std::to_string(b) + " in " + name;
      cases.push_back({"maximum(x, c) c = " + cs, [d, c](const std::vector<Array>& in) { return maximum(in[d], c); }});
      cases.push_back({"maximum(c, x) c = " + cs, [d, c](const std::vector<Array>& in) { return maximum(c, in[d]); }});
      cases.push_back({"minimum(x, c) c = " + cs, [d, c](const std::vector<Array>& in) { return minimum(in[d], c); }});
      cases.push_back({"minimum(c, x) c = " + cs, [d, c](const std::vector<Array>& in) { return minimum(c, in[d]); }});
    }
    const Array zero = literal(0.0), one = literal(1.0), six = literal(6.0), sixth = literal(1.0 / 6.0),
                half = literal(0.5);
    cases.push_back({"relu6 in " + name, [d, zero, six](const std::vector<Array>& in) { return clip(in[d], zero, six); }});
    cases.push_back({"hardswish in " + name, [=](const std::vector<Array>& in) {
                       return in[d] * minimum(maximum(in[d] * sixth + half, zero), one);
                     }});
    cases.push_back({"relu in " + name, [d](const std::vector<Array>& in) { return relu(in[d]); }});
  }
  std::string tape;
  expect_cases_bit_exact(cases, inputs, "literal bounds", &tape);
  EXPECT_EQ(test::Dumps::count(tape, "constant"), 0) << tape;
}

// Integer literals at the extremes of their dtype (the minimum has no literal of its own).
TEST(BitExactConstants, IntegerLiteralsAtTheExtremes) {
  const std::vector<Dtype> dtypes = {int8, int16, int32, int64, uint8, uint16, uint32, uint64};
  std::vector<Case> cases;
  std::vector<Array> inputs;
  for (size_t d = 0; d < dtypes.size(); ++d) {
    const Dtype dt = dtypes[d];
    // The dtype's minimum and maximum as captured 0-d arrays, from their bits.
    const int bits = static_cast<int>(size_of(dt) * 8);
    uint64_t min_bits = is_signed_integral(dt) ? uint64_t{1} << (bits - 1) : 0;
    uint64_t max_bits = (bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1) ^ min_bits;
    Array lo(&min_bits, Shape{}, dt), hi(&max_bits, Shape{}, dt);
    inputs.push_back(test::special_array(dt, kM, 7));
    const std::string name = dtype_name(dt);
    cases.push_back({"x + min in " + name, [d, lo](const std::vector<Array>& in) { return in[d] + lo; }});
    cases.push_back(
        {"(x ^ max) * min in " + name, [d, lo, hi](const std::vector<Array>& in) { return (in[d] ^ hi) * lo; }});
    cases.push_back({"maximum(x, max) - min in " + name,
                     [d, lo, hi](const std::vector<Array>& in) { return maximum(in[d], hi) - lo; }});
  }
  std::string tape;
  expect_cases_bit_exact(cases, inputs, "integer extremes", &tape);
  EXPECT_EQ(test::Dumps::count(tape, "constant"), 0) << tape;
}

}  // namespace
}  // namespace smelt
