// Matmul + element-wise epilogue cases (bias, GELU tanh/erf, SiLU, ReLU, residual, output cast,
// a transposed weight) and their check on one device, shared by the CPU and GPU tests.
#pragma once

#include <cmath>

#include "tests/compile/compile_helpers.h"

namespace smelt::test::matmul_epilogue {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

inline Array rand(const Shape& shape, uint32_t seed, Dtype dtype = float32) {
  return random_array(shape, dtype, -2.0, 2.0, seed);
}

/// Puts NaN, +inf and -inf at a few places of `x` (a float array).
inline Array with_specials(const Array& x) {
  std::vector<double> v = as_doubles(x);
  const double specials[] = {NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < 3 && i * 7 < v.size(); ++i) v[i * 7] = specials[i];
  return astype(Array(v, x.shape()), x.dtype());
}

struct Case {
  std::string name;
  Fn fn;
  std::vector<Array> inputs;
};

inline std::vector<Case> epilogue_cases() {
  std::vector<Case> cases;
  for (Dtype dt : {float32, bfloat16}) {
    const std::string d = dtype_name(dt);
    auto x = [&](uint32_t s) { return rand({24, 40}, s, dt); };
    auto w = [&](uint32_t s) { return rand({40, 48}, s, dt); };
    auto bias = [&](uint32_t s) { return rand({48}, s, dt); };
    auto res = [&](uint32_t s) { return rand({24, 48}, s, dt); };
    cases.push_back({d + " gelu_tanh(x@w+b)+r",
                     [](const std::vector<Array>& in) {
                       return std::vector<Array>{gelu(matmul(in[0], in[1]) + in[2], true) + in[3]};
                     },
                     {x(1), w(2), bias(3), res(4)}});
    cases.push_back({d + " gelu_erf(x@w+b)+r",
                     [](const std::vector<Array>& in) {
                       return std::vector<Array>{gelu(matmul(in[0], in[1]) + in[2], false) + in[3]};
                     },
                     {x(5), w(6), bias(7), res(8)}});
    cases.push_back({d + " silu(x@w+b)",
                     [](const std::vector<Array>& in) { return std::vector<Array>{silu(matmul(in[0], in[1]) + in[2])}; },
                     {x(9), w(10), bias(11)}});
    cases.push_back({d + " cast(relu(x@w+b))",
                     [dt](const std::vector<Array>& in) {
                       return std::vector<Array>{astype(relu(matmul(in[0], in[1]) + in[2]), dt == float32 ? bfloat16 : float32)};
                     },
                     {x(12), w(13), bias(14)}});
    // A linear layer's x @ w^T with the weight stored [out, in], over a batch.
    cases.push_back({d + " gelu(x@w^T+b), batched",
                     [](const std::vector<Array>& in) {
                       return std::vector<Array>{gelu(matmul(in[0], transpose(in[1])) + in[2], true)};
                     },
                     {rand({3, 8, 40}, 15, dt), rand({48, 40}, 16, dt), bias(17)}});
  }
  return cases;
}

/// The cases on `device`: one Matmul step and one Fused step on the final tape, nothing else
/// that computes or copies, and compiled == eager bit for bit (also with NaN and infinities).
inline void check_epilogues(Device device) {
  for (auto& c : epilogue_cases()) {
    SCOPED_TRACE(c.name + " on " + device.str());
    std::vector<Array> inputs, specials;
    for (auto& a : c.inputs) {
      inputs.push_back(to_device(a, device));
      specials.push_back(to_device(with_specials(a), device));
    }
    Dumps dumps;
    auto f = compile_flat(c.fn, dumps.options());
    auto got = f(inputs);
    auto want = c.fn(inputs);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].device() == device);
    EXPECT_TRUE(bit_equal(got[0], want[0]));
    EXPECT_TRUE(bit_equal(f(specials)[0], c.fn(specials)[0]));
    const std::string tape = dumps.final_tape();
    EXPECT_EQ(Dumps::count(tape, "Matmul"), 1) << tape;
    EXPECT_EQ(Dumps::count(tape, "Fused"), 1) << tape;
    for (const char* prim : {"Unary", "Binary", "Cast", "Copy", "Select"})
      EXPECT_EQ(Dumps::count(tape, prim), 0) << prim << "\n" << tape;
  }
}

}  // namespace smelt::test::matmul_epilogue
