// scaled_dot_product_attention against a float64 reference: masks, causal variants, GQA, scale,
// softcap, fully masked rows, every float dtype; errors; compile bit for bit; gradients.
#include <cmath>
#include <limits>

#include "smelt/attention.h"
#include "smelt/compile.h"
#include "smelt/transforms.h"
#include "src/core/node.h"
#include "src/core/thread_pool.h"
#include "src/primitives/shape_rules.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::as_doubles;
using test::random_array;

const double kInf = std::numeric_limits<double>::infinity();

struct Dims {
  int64_t b, hq, hkv, s, t, d, dv;
};

/// Float64 attention over row-major q, k, v; `bias` is [B, Hq, S, T] (additive, -inf masks) or empty.
std::vector<double> reference(const Dims& n, const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v, const std::vector<double>& bias, CausalMask causal,
                              double scale, double softcap) {
  std::vector<double> out(static_cast<size_t>(n.b * n.hq * n.s * n.dv), 0.0);
  const int64_t group = n.hq / n.hkv;
  std::vector<double> sc(static_cast<size_t>(n.t));
  for (int64_t b = 0; b < n.b; ++b)
    for (int64_t h = 0; h < n.hq; ++h)
      for (int64_t i = 0; i < n.s; ++i) {
        const int64_t hk = h / group;
        double mx = -kInf;
        for (int64_t j = 0; j < n.t; ++j) {
          double x = 0;
          for (int64_t c = 0; c < n.d; ++c)
            x += q[((b * n.hq + h) * n.s + i) * n.d + c] * k[((b * n.hkv + hk) * n.t + j) * n.d + c];
          x *= scale;
          if (softcap > 0) x = softcap * std::tanh(x / softcap);
          if (!bias.empty()) x += bias[((b * n.hq + h) * n.s + i) * n.t + j];
          const int64_t offset = causal == CausalMask::LowerRight ? n.t - n.s : 0;
          if (causal != CausalMask::None && j > i + offset) x = -kInf;
          sc[j] = x;
          mx = std::max(mx, x);
        }
        if (mx == -kInf) continue;  // every key masked: zeros
        double l = 0;
        for (auto& x : sc) l += (x = std::exp(x - mx));
        for (int64_t c = 0; c < n.dv; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < n.t; ++j) acc += sc[j] * v[((b * n.hkv + hk) * n.t + j) * n.dv + c];
          out[((b * n.hq + h) * n.s + i) * n.dv + c] = acc / l;
        }
      }
  return out;
}

/// Error bound of the float32 (float64) accumulation for inputs in [-1, 1]: each score is a
/// dot product of d terms (relative error <= d·u, |score| <= d·scale), which perturbs each
/// probability by about that much, then T probabilities are summed and a weighted sum of T values
/// of magnitude <= 1 is formed (<= 2T·u). The output is finally rounded to its dtype (half an ulp,
/// relative). Four times the first-order sum covers the second-order terms.
double atol_for(Dtype dt, const Dims& n) {
  const double u = dt == float64 ? 0x1p-53 : 0x1p-24;
  return 4 * (static_cast<double>(n.d * n.d) + 2.0 * static_cast<double>(n.t) + 8) * u;
}
double rtol_for(Dtype dt) {
  switch (dt) {
    case Dtype::Float16: return 0x1p-11;
    case Dtype::BFloat16: return 0x1p-8;
    default: return 0.0;
  }
}

::testing::AssertionResult near_reference(const Array& got, const std::vector<double>& want, double atol, double rtol) {
  auto g = as_doubles(got);
  if (g.size() != want.size()) return ::testing::AssertionFailure() << "size " << g.size() << " != " << want.size();
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::abs(g[i] - want[i]);
    if (!(err <= atol + rtol * std::abs(want[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " vs " << want[i] << " (atol " << atol
                                           << ", rtol " << rtol << ")";
  }
  return ::testing::AssertionSuccess();
}

/// The bias the reference adds for `options.mask` broadcast to [B, Hq, S, T].
std::vector<double> bias_of(const Array& mask, const Dims& n) {
  if (!mask.valid()) return {};
  Array full = broadcast_to(mask, {n.b, n.hq, n.s, n.t});
  if (mask.dtype() == bool_) return as_doubles(where(full, Array(0.0), Array(-kInf)));
  return as_doubles(astype(full, float64));
}

void check(const Dims& n, Dtype dt, const AttentionOptions& o, uint32_t seed) {
  Array q = random_array({n.b, n.hq, n.s, n.d}, dt, -1, 1, seed);
  Array k = random_array({n.b, n.hkv, n.t, n.d}, dt, -1, 1, seed + 1);
  Array v = random_array({n.b, n.hkv, n.t, n.dv}, dt, -1, 1, seed + 2);
  Array y = scaled_dot_product_attention(q, k, v, o);
  ASSERT_EQ(y.shape(), (Shape{n.b, n.hq, n.s, n.dv}));
  ASSERT_EQ(y.dtype(), dt);
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(n.d));
  auto want = reference(n, as_doubles(q), as_doubles(k), as_doubles(v), bias_of(o.mask, n), o.causal, scale, o.softcap);
  EXPECT_TRUE(near_reference(y, want, atol_for(dt, n), rtol_for(dt)));
}

TEST(Attention, MatchesFloat64ReferenceForEveryDtype) {
  const Dims n{2, 4, 2, 5, 7, 8, 6};  // GQA: two query heads per key/value head; Dv != D
  uint32_t seed = 10;
  for (Dtype dt : {float32, float64, float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    check(n, dt, {}, seed += 3);
    check(n, dt, {.causal = CausalMask::UpperLeft}, seed += 3);
    check(n, dt, {.causal = CausalMask::LowerRight, .scale = 0.3}, seed += 3);
    check(n, dt, {.scale = 1.7, .softcap = 2.0}, seed += 3);
  }
}

TEST(Attention, MasksBroadcastAndCombineWithCausal) {
  const Dims n{2, 2, 1, 4, 6, 4, 4};
  // Additive masks of several broadcast shapes, in float32 and float16.
  check(n, float32, {.mask = random_array({4, 6}, float32, -2, 2, 3)}, 40);
  check(n, float32, {.mask = random_array({2, 1, 1, 6}, float16, -2, 2, 4), .causal = CausalMask::UpperLeft}, 41);
  check(n, float64, {.mask = random_array({2, 2, 4, 6}, float64, -2, 2, 5), .num_kv_heads = 1}, 42);
  // A boolean mask: true attends.
  Array keep = greater(random_array({2, 1, 4, 6}, float32, -1, 1, 6), Array(-0.5f));
  check(n, float32, {.mask = keep}, 43);
  check(n, bfloat16, {.mask = keep, .causal = CausalMask::LowerRight}, 44);
}

TEST(Attention, LongSequencesSpanSeveralKeyAndQueryBlocks) {
  // The CPU kernel cuts queries into blocks of 128 rows and keys into blocks of 256 with an online
  // softmax: 300 keys and 130 queries cross both cuts, and the causal mask leaves the first query
  // rows with fully masked key blocks (upper left: every block past the first is masked).
  const Dims n{1, 2, 1, 130, 300, 16, 8};
  check(n, float32, {}, 60);
  check(n, float32, {.causal = CausalMask::UpperLeft}, 61);
  check(n, float64, {.causal = CausalMask::LowerRight}, 62);
  check(n, bfloat16, {.mask = random_array({130, 300}, float32, -2, 2, 63)}, 64);
  // A boolean mask that drops every key of the first block for some rows.
  Array keep = greater(random_array({1, 1, 130, 300}, float32, -1, 1, 65), Array(0.0f));
  keep = logical_and(keep, greater_equal(reshape(arange(0, 300, 1, int64), {1, 1, 1, 300}),
                                          reshape(arange(0, 130, 1, int64), {1, 1, 130, 1}) * 3));
  check(n, float32, {.mask = keep}, 66);
}

TEST(Attention, StridedInputsAndThreadCountsGiveTheSameBits) {
  // q, k and v as transposed views (the [B, S, H, D] layout an ONNX model reshapes into): the
  // kernel reads them in place; the bits must equal those of contiguous copies, and not change
  // with the thread count (the tasks are fixed by the shapes).
  Array q = swapaxes(random_array({2, 150, 3, 16}, float32, -1, 1, 70), 1, 2);
  Array k = swapaxes(random_array({2, 280, 3, 16}, float32, -1, 1, 71), 1, 2);
  Array v = swapaxes(random_array({2, 280, 3, 16}, float32, -1, 1, 72), 1, 2);
  Array m = random_array({150, 280}, float32, -1, 1, 73);
  const int saved = num_threads();
  std::vector<Array> runs;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    Array y = scaled_dot_product_attention(q, k, v, {.mask = m, .causal = CausalMask::LowerRight});
    y.eval();
    runs.push_back(y);
  }
  Array c = scaled_dot_product_attention(copy(q), copy(k), copy(v),
                                         {.mask = m, .causal = CausalMask::LowerRight});
  set_num_threads(saved);
  EXPECT_TRUE(test::bit_equal(runs[0], runs[1]));
  EXPECT_TRUE(test::bit_equal(runs[0], runs[2]));
  EXPECT_TRUE(test::bit_equal(runs[0], c));
}

TEST(Attention, FullyMaskedRowsGiveZeros) {
  Array q = random_array({1, 2, 3, 4}, float32, -1, 1, 1), k = random_array({1, 2, 4, 4}, float32, -1, 1, 2);
  Array v = random_array({1, 2, 4, 4}, float32, -1, 1, 3);
  // Row 1 masks every key (boolean), row 2 through -inf biases.
  Array keep = reshape(Array({true, false, true, true, false, false, false, false, true, true, true, true}), {3, 4});
  auto y = as_doubles(scaled_dot_product_attention(q, k, v, {.mask = keep}));
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(y[(h * 3 + 1) * 4 + c], 0.0);
  std::vector<double> bias(12, 0.0);
  for (int j = 0; j < 4; ++j) bias[8 + j] = -kInf;
  auto z = as_doubles(scaled_dot_product_attention(q, k, v, {.mask = Array(bias, {3, 4})}));
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 4; ++c) {
      EXPECT_EQ(z[(h * 3 + 2) * 4 + c], 0.0);
      EXPECT_FALSE(std::isnan(z[(h * 3 + 0) * 4 + c]));
    }
  // Lower-right causal with more queries than keys: the first S - T queries see no key.
  check({1, 1, 1, 6, 3, 4, 4}, float32, {.causal = CausalMask::LowerRight}, 50);
  Array w = scaled_dot_product_attention(random_array({1, 2, 6, 4}, float32, -1, 1, 7), k, v,
                                         {.causal = CausalMask::LowerRight});
  auto wv = as_doubles(w);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 6; ++i)
      for (int c = 0; c < 4; ++c) {
        const double x = wv[static_cast<size_t>((h * 6 + i) * 4 + c)];
        if (i < 2) EXPECT_EQ(x, 0.0);
        else EXPECT_NE(x, 0.0);
      }
}

TEST(Attention, EmptySizes) {
  Array q = zeros({1, 2, 0, 4}, float32), k = zeros({1, 1, 3, 4}, float32), v = zeros({1, 1, 3, 5}, float32);
  EXPECT_EQ(scaled_dot_product_attention(q, k, v).shape(), (Shape{1, 2, 0, 5}));
  Array q2 = random_array({1, 2, 3, 4}, float32, -1, 1, 1), k0 = zeros({1, 1, 0, 4}, float32), v0 = zeros({1, 1, 0, 5}, float32);
  auto y = as_doubles(scaled_dot_product_attention(q2, k0, v0));
  EXPECT_EQ(y.size(), 30u);
  for (double x : y) EXPECT_EQ(x, 0.0);
  // head_dim 0: q is empty but the output is not; zeros, as the composed path gives.
  auto z = as_doubles(scaled_dot_product_attention(zeros({1, 2, 3, 0}, float32), zeros({1, 1, 4, 0}, float32),
                                                   random_array({1, 1, 4, 5}, float32, -1, 1, 2)));
  EXPECT_EQ(z.size(), 30u);
  for (double x : z) EXPECT_EQ(x, 0.0);
}

TEST(Attention, IsOnePrimitive) {
  Array q = random_array({1, 2, 3, 4}, float32, -1, 1, 1), k = random_array({1, 1, 5, 4}, float32, -1, 1, 2);
  Array y = scaled_dot_product_attention(q, k, k, {.causal = CausalMask::UpperLeft, .scale = 0.5});
  EXPECT_EQ(y.node().prim.kind, PrimKind::Attention);
  EXPECT_EQ(y.node().prim.str(), "Attention(scale=0.5, causal=upper_left, mask=none)");
  // Equal parameters hash and compare equal (CSE and cache keys rely on it); others differ.
  Array z = scaled_dot_product_attention(q, k, k, {.causal = CausalMask::UpperLeft, .scale = 0.5});
  EXPECT_EQ(y.node().prim, z.node().prim);
  EXPECT_EQ(y.node().prim.hash(), z.node().prim.hash());
  Array w = scaled_dot_product_attention(q, k, k, {.causal = CausalMask::LowerRight, .scale = 0.5});
  EXPECT_FALSE(y.node().prim == w.node().prim);
  EXPECT_NE(y.node().prim.hash(), w.node().prim.hash());
}

TEST(Attention, ErrorsNameTheOpAndShapes) {
  Array q = zeros({1, 4, 3, 8}, float32), k = zeros({1, 2, 5, 8}, float32), v = zeros({1, 2, 5, 6}, float32);
  const char* op = "scaled_dot_product_attention: ";
  EXPECT_THROW_MSG(scaled_dot_product_attention(Array(), k, v), InvalidArgument, "scaled_dot_product_attention");
  EXPECT_THROW_MSG(scaled_dot_product_attention(zeros({4, 3, 8}, float32), k, v), ShapeError,
                   std::string(op) + "q, k and v must be [batch, heads, seq, head_dim] (rank 4), got q float32[4,3,8]");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, astype(k, float16), v), DtypeError,
                   std::string(op) + "q, k and v must share one floating-point dtype, got q float32[1,4,3,8], k float16[1,2,5,8]");
  EXPECT_THROW_MSG(scaled_dot_product_attention(zeros({1, 4, 3, 8}, int32), zeros({1, 2, 5, 8}, int32), zeros({1, 2, 5, 6}, int32)),
                   DtypeError, "one floating-point dtype");
  EXPECT_THROW_MSG(scaled_dot_product_attention(zeros({2, 4, 3, 8}, float32), k, v), ShapeError,
                   std::string(op) + "q, k and v must have one batch size, got q float32[2,4,3,8]");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, zeros({1, 2, 5, 7}, float32), v), ShapeError,
                   std::string(op) + "q and k must have one head_dim");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, zeros({1, 2, 4, 6}, float32)), ShapeError,
                   std::string(op) + "k and v must have the same heads and sequence length, got q float32[1,4,3,8], "
                                     "k float32[1,2,5,8], v float32[1,2,4,6]");
  EXPECT_THROW_MSG(scaled_dot_product_attention(zeros({1, 3, 3, 8}, float32), k, v), ShapeError,
                   std::string(op) + "the 3 query heads are not a multiple of the 2 key/value heads");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.num_kv_heads = 4}), ShapeError,
                   std::string(op) + "num_kv_heads is 4 but k has 2 heads");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.mask = zeros({3, 5}, int32)}), DtypeError,
                   std::string(op) + "the mask must be bool (true = attend) or floating point (added to the scores), got int32[3,5]");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.mask = zeros({3, 4}, float32)}), ShapeError,
                   std::string(op) + "the mask float32[3,4] does not broadcast to the scores [batch, q_heads, S, T] = [1,4,3,5]");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.mask = zeros({2, 4, 3, 5}, float32)}), ShapeError,
                   "does not broadcast to the scores");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.softcap = -1.0}), InvalidArgument,
                   std::string(op) + "softcap must be a finite number >= 0");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.scale = std::nan("")}), InvalidArgument,
                   std::string(op) + "scale must be finite");
}

TEST(Attention, CompiledEqualsUncompiledBitForBit) {
  Array q = random_array({2, 4, 5, 8}, float32, -1, 1, 1), k = random_array({2, 2, 7, 8}, float32, -1, 1, 2);
  Array v = random_array({2, 2, 7, 8}, float32, -1, 1, 3), m = random_array({5, 7}, float32, -1, 1, 4);
  auto f = [](const Array& q, const Array& k, const Array& v, const Array& m) {
    return scaled_dot_product_attention(q * 2.0f, k, v, {.mask = m, .causal = CausalMask::LowerRight, .softcap = 3.0}) + 1.0f;
  };
  auto cf = compile(f);
  EXPECT_TRUE(test::bit_equal(cf(q, k, v, m), f(q, k, v, m)));
  EXPECT_TRUE(test::bit_equal(cf(q, k, v, m), f(q, k, v, m)));  // a replay from the cache
}

// The CPU kernel lays its [B, H, S, D] output out as [B, S, H, D] (a strided view), so the
// transpose and reshape back to [B, S, H·D] that follow attention in a transformer block are views
// of its buffer, not a copy; the steps after it (an element-wise kernel on the strided output, a
// product of the reshaped rows) give the same bits compiled and eagerly.
TEST(Attention, CpuOutputIsLaidOutForTheTransposeBack) {
  const Device cpu = Device::cpu();
  DefaultDeviceScope scope(cpu);
  Array q = random_array({2, 3, 5, 8}, float32, -1, 1, 11), k = random_array({2, 3, 7, 8}, float32, -1, 1, 12);
  Array v = random_array({2, 3, 7, 8}, float32, -1, 1, 13), w = random_array({24, 6}, float32, -1, 1, 14);
  Array o = scaled_dot_product_attention(q, k, v);
  o.eval();
  EXPECT_EQ(o.node().strides, (Strides{5 * 3 * 8, 8, 3 * 8, 1}));
  Array rows = reshape(transpose(o, {0, 2, 1, 3}), {2, 5, 24});
  rows.eval();
  EXPECT_EQ(rows.node().data_ptr(), o.node().data_ptr()) << "the reshape of the transpose is a view";
  // The values are those of the [B, H, S, D] result, read through the view.
  const auto ov = as_doubles(o), rv = as_doubles(rows);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t s = 0; s < 5; ++s)
        for (int64_t d = 0; d < 8; ++d)
          ASSERT_EQ(ov[static_cast<size_t>(((b * 3 + h) * 5 + s) * 8 + d)],
                    rv[static_cast<size_t>((b * 5 + s) * 24 + h * 8 + d)]);
  auto f = [](const Array& q, const Array& k, const Array& v, const Array& w) {
    Array a = scaled_dot_product_attention(q, k, v);
    return std::vector<Array>{exp(a) * 2.0f, matmul(reshape(transpose(a, {0, 2, 1, 3}), {2, 5, 24}), w)};
  };
  auto cf = compile(f);
  const auto want = f(q, k, v, w);
  for (int call = 0; call < 2; ++call) {  // the trace, then a replay
    const auto got = cf(q, k, v, w);
    EXPECT_TRUE(test::bit_equal(got[0], want[0])) << call;
    EXPECT_TRUE(test::bit_equal(got[1], want[1])) << call;
  }
}

TEST(Attention, ConstantCausalBoolMaskBecomesTheCausalFlagWhenTraced) {
  // A boolean mask known at trace time that equals the lower-right causal mask (as GPT-2's
  // exports slice their tril buffer) is traced as the causal flag, with the same bits as the
  // eager mask; any other constant mask stays a mask.
  for (auto [s, t] : {std::pair<int64_t, int64_t>{5, 5}, {3, 7}, {1, 6}}) {
    Array q = random_array({2, 4, s, 8}, float32, -1, 1, 1), k = random_array({2, 2, t, 8}, float32, -1, 1, 2);
    Array v = random_array({2, 2, t, 8}, float32, -1, 1, 3);
    std::vector<uint8_t> bits(static_cast<size_t>(s * t));
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < t; ++j) bits[static_cast<size_t>(i * t + j)] = j <= i + t - s;
    Array causal = astype(Array(bits, {1, 1, s, t}), bool_);
    std::vector<uint8_t> flipped = bits;
    flipped[static_cast<size_t>(s * t - 1)] ^= 1;  // the last query may no longer see the last key
    Array other = astype(Array(flipped, {s, t}), bool_);
    for (const bool is_causal : {true, false}) {
      const Array mask = is_causal ? causal : other;
      auto f = [mask](const Array& q, const Array& k, const Array& v) {
        return scaled_dot_product_attention(q, k, v, {.mask = mask});
      };
      std::string tapes;
      auto cf = compile(f, {.dump = [&](const std::string& pass, const std::string& text) { tapes += pass + "\n" + text; }});
      EXPECT_TRUE(test::bit_equal(cf(q, k, v), f(q, k, v))) << s << "x" << t;
      EXPECT_EQ(tapes.find("causal=lower_right, mask=none") != std::string::npos, is_causal) << tapes;
      EXPECT_EQ(tapes.find("mask=boolean") != std::string::npos, !is_causal) << tapes;
    }
  }
}

TEST(Attention, ShapeRuleAndShapelessReplay) {
  Array q = random_array({1, 4, 3, 8}, float32, -1, 1, 1), k = random_array({1, 2, 5, 8}, float32, -1, 1, 2);
  Array v = random_array({1, 2, 5, 6}, float32, -1, 1, 3);
  Array y = scaled_dot_product_attention(q, k, v, {.mask = zeros({3, 5}, float32)});
  std::vector<Shape> in;
  for (const auto& a : y.node().inputs) in.push_back(a.shape());
  EXPECT_EQ(infer_output_shapes(y.node().prim, in, {}), (std::vector<Shape>{{1, 4, 3, 6}}));
  EXPECT_THROW_MSG(infer_output_shapes(make_prim(PrimKind::Attention, AttentionParams{}), {{1, 3, 3, 8}, {1, 2, 5, 8}, {1, 2, 5, 8}}, {}),
                   ShapeError, "the query heads are not a multiple of the key heads");
  EXPECT_THROW_MSG(infer_output_shapes(make_prim(PrimKind::Attention, AttentionParams{}), {{1, 2, 3, 8}, {1, 2, 5, 8}}, {}),
                   ShapeError, "Attention(");
  // A shapeless replay with new sequence lengths and head_dim: the default scale follows head_dim.
  auto f = [](const Array& q, const Array& k) { return scaled_dot_product_attention(q, k, k, {.causal = CausalMask::LowerRight}); };
  auto cf = compile(f, {.shapeless = true});
  EXPECT_TRUE(test::bit_equal(cf(q, k), f(q, k)));
  Array q2 = random_array({2, 4, 7, 16}, float32, -1, 1, 4), k2 = random_array({2, 2, 9, 16}, float32, -1, 1, 5);
  EXPECT_TRUE(test::bit_equal(cf(q2, k2), f(q2, k2)));
}

TEST(Attention, GradMatchesTheComposedOps) {
  // The gradient through the primitive against the gradient of the same math written with
  // matmul/softmax (float64, so both are exact to ~1e-15 relative; 1e-10 leaves room).
  Array q = random_array({1, 2, 3, 4}, float64, -1, 1, 1), k = random_array({1, 1, 5, 4}, float64, -1, 1, 2);
  Array v = random_array({1, 1, 5, 3}, float64, -1, 1, 3), m = random_array({3, 5}, float64, -1, 1, 4);
  Array w = random_array({1, 2, 3, 3}, float64, -1, 1, 5);
  auto fused = [&](const Array& q, const Array& k, const Array& v, const Array& m) {
    return sum(scaled_dot_product_attention(q, k, v, {.mask = m, .scale = 0.4}) * w);
  };
  auto composed = [&](const Array& q, const Array& k, const Array& v, const Array& m) {
    Array kr = repeat(k, 2, 1), vr = repeat(v, 2, 1);
    Array s = matmul(q, swapaxes(kr, 2, 3)) * 0.4 + m;
    return sum(matmul(softmax(s, {-1}), vr) * w);
  };
  auto g1 = grad(fused, argnums<0, 1, 2, 3>)(q, k, v, m);
  auto g2 = grad(composed, argnums<0, 1, 2, 3>)(q, k, v, m);
  EXPECT_TRUE(test::all_close(std::get<0>(g1), as_doubles(std::get<0>(g2)), 1e-10, 1e-12));
  EXPECT_TRUE(test::all_close(std::get<1>(g1), as_doubles(std::get<1>(g2)), 1e-10, 1e-12));
  EXPECT_TRUE(test::all_close(std::get<2>(g1), as_doubles(std::get<2>(g2)), 1e-10, 1e-12));
  EXPECT_TRUE(test::all_close(std::get<3>(g1), as_doubles(std::get<3>(g2)), 1e-10, 1e-12));
}

}  // namespace
}  // namespace smelt
