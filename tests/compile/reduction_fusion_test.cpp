// Fused reductions (row programs): softmax, norms, var/std, logsumexp compile to one row kernel
// (or a few) and equal the uncompiled functions bit for bit, NaN and ±inf included, on every
// float dtype, for rows short and long, split into groups (few long rows) and strided.
#include <cmath>
#include <cstring>

#include "compile_helpers.h"
#include "src/compile/fuse.h"
#include "src/core/thread_pool.h"

namespace smelt {
namespace {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

/// Random values of `dtype` in [-3, 3) with NaN, +inf and -inf planted in rows 1, 2 and 3 (when
/// they exist), and -0.0 at the start of row 0: the specials each meet a reduction of their own.
Array row_data(const Shape& shape, Dtype dtype, uint32_t seed) {
  const int64_t n = shape.back(), total = shape_size(shape);
  std::vector<double> v = test::random_values(static_cast<size_t>(total), -3.0, 3.0, seed);
  auto plant = [&](int64_t row, int64_t col, double x) {
    if (col >= 0 && n > col && (row + 1) * n <= total) v[static_cast<size_t>(row * n + col)] = x;
  };
  plant(0, 0, -0.0);
  plant(1, n / 2, std::nan(""));
  plant(2, n - 1, INFINITY);
  plant(3, 0, -INFINITY);
  plant(3, n / 3, INFINITY);
  return astype(Array(v, shape), dtype);
}

/// Compiles fn, checks every output against the uncompiled call bit for bit, and returns the
/// number of Fused steps and the number of Reduce steps left on the final tape.
std::pair<int, int> expect_bit_exact(const Fn& fn, const std::vector<Array>& inputs, const std::string& what) {
  test::Dumps dumps;
  auto compiled = compile_flat(fn, dumps.options());
  auto got = compiled(inputs);
  auto want = fn(inputs);
  EXPECT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    EXPECT_EQ(got[i].shape(), want[i].shape()) << what << " output " << i;
    EXPECT_TRUE(test::bit_equal(got[i], want[i])) << what << " output " << i << "\n" << dumps.final_tape();
  }
  const std::string tape = dumps.final_tape();
  return {test::Dumps::count(tape, "Fused"), test::Dumps::count(tape, "Reduce")};
}

struct Workload {
  const char* name;
  Fn fn;
  int inputs;  // x, then (for norms) weight [n], bias [n], residual (x's shape)
};

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> w = {
      {"softmax", [](const std::vector<Array>& in) { return std::vector<Array>{softmax(in[0], {-1})}; }, 1},
      {"log_softmax", [](const std::vector<Array>& in) { return std::vector<Array>{log_softmax(in[0], {-1})}; }, 1},
      {"logsumexp_keepdims", [](const std::vector<Array>& in) { return std::vector<Array>{logsumexp(in[0], {-1}, true)}; }, 1},
      {"rms_norm", [](const std::vector<Array>& in) { return std::vector<Array>{rms_norm(in[0], in[1], 1e-6)}; }, 2},
      {"layer_norm", [](const std::vector<Array>& in) { return std::vector<Array>{layer_norm(in[0], in[1], in[2], 1e-5)}; }, 3},
      {"layer_norm_residual",
       [](const std::vector<Array>& in) {
         Array h = add(in[0], in[3]);
         return std::vector<Array>{layer_norm(h, in[1], in[2], 1e-5), h};
       },
       4},
      {"var", [](const std::vector<Array>& in) { return std::vector<Array>{var(in[0], {-1}, true)}; }, 1},
      {"std_ddof1", [](const std::vector<Array>& in) { return std::vector<Array>{std(in[0], {-1}, true, 1)}; }, 1},
      {"sum_of_squares", [](const std::vector<Array>& in) { return std::vector<Array>{sum(multiply(in[0], in[0]), {-1}, true)}; }, 1},
      {"max_minus", [](const std::vector<Array>& in) { return std::vector<Array>{subtract(in[0], max(in[0], {-1}, true))}; }, 1},
  };
  return w;
}

std::vector<Array> inputs_for(const Workload& w, const Shape& shape, Dtype dtype, uint32_t seed) {
  std::vector<Array> in{row_data(shape, dtype, seed)};
  const Shape param{shape.back()};
  if (w.inputs > 1) in.push_back(astype(Array(test::random_values(shape.back(), 0.5, 1.5, seed + 1), param), dtype));
  if (w.inputs > 2) in.push_back(astype(Array(test::random_values(shape.back(), -1.0, 1.0, seed + 2), param), dtype));
  if (w.inputs > 3) in.push_back(row_data(shape, dtype, seed + 3));
  return in;
}

// Shapes: short rows (the inline loop), rows past the pairwise block (128), and few long rows
// that the CPU splits into groups (4 rows of 40000: rows < 16, work past 4 * kGrain).
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {{9, 7}, {5, 300}, {4, 40000}};
  return s;
}

TEST(ReductionFusion, WorkloadsAreBitExactOnEveryFloatDtype) {
  for (const auto& w : workloads())
    for (Dtype dt : {float32, bfloat16, float16, float64})
      for (const Shape& shape : shapes()) {
        const std::string what = std::string(w.name) + " " + dtype_name(dt) + shape_to_string(shape);
        auto [fused, reduces] = expect_bit_exact(w.fn, inputs_for(w, shape, dt, 7), what);
        // Every reduction joined a row kernel.
        EXPECT_EQ(reduces, 0) << what;
        EXPECT_GE(fused, 1) << what;
      }
}

TEST(ReductionFusion, NormsAndSoftmaxAreOneKernel) {
  for (const auto& w : workloads()) {
    const std::string what = w.name;
    auto [fused, reduces] = expect_bit_exact(w.fn, inputs_for(w, {6, 50}, bfloat16, 3), what);
    EXPECT_EQ(fused, 1) << what;
    EXPECT_EQ(reduces, 0) << what;
  }
}

// A single row with leading axes of size 1 (a decode step's [1, 1, 256]): its per-row values
// ([1, 1, 1]) are the rows of one reduced axis, not of three, and every workload is still one
// kernel (a LayerNorm was three).
TEST(ReductionFusion, ASingleRowBehindAxesOfOneIsOneKernel) {
  for (const auto& w : workloads()) {
    for (const Shape& shape : {Shape{1, 1, 256}, Shape{1, 1, 1, 40}}) {
      const std::string what = std::string(w.name) + shape_to_string(shape);
      auto [fused, reduces] = expect_bit_exact(w.fn, inputs_for(w, shape, float32, 13), what);
      EXPECT_EQ(fused, 1) << what;
      EXPECT_EQ(reduces, 0) << what;
    }
  }
}

// A norm's 16-bit weight and bias are cast to float32 inside the row kernel (the casts are
// recomputed per element, not a kernel of their own on every call); a cast whose value is also
// an output of the function stays a step of its own, and both are bit-exact.
TEST(ReductionFusion, ANormsWeightCastJoinsItsKernel) {
  const std::vector<Array> in = inputs_for(workloads()[4], {6, 50}, bfloat16, 5);  // layer_norm: x, weight, bias
  for (bool cast_is_output : {false, true}) {
    const Fn fn = [cast_is_output](const std::vector<Array>& a) {
      std::vector<Array> out{rms_norm(a[0], a[1], 1e-6), layer_norm(a[0], a[1], a[2], 1e-5)};
      if (cast_is_output) out.push_back(astype(a[2], float32));
      return out;
    };
    test::Dumps dumps;
    auto compiled = compile_flat(fn, dumps.options());
    auto got = compiled(in);
    auto want = fn(in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::bit_equal(got[i], want[i])) << "output " << i;
    const std::string tape = dumps.final_tape();
    EXPECT_EQ(test::Dumps::count(tape, "Cast"), cast_is_output ? 1 : 0) << tape;
    EXPECT_EQ(test::Dumps::count(tape, "Reduce"), 0) << tape;
  }
}

TEST(ReductionFusion, TheProgramHasReductionsAndPerRowValues) {
  auto tape = test::optimized_tape([](const std::vector<Array>& in) { return std::vector<Array>{rms_norm(in[0], in[1], 1e-6)}; },
                                   {zeros({8, 64}, bfloat16), zeros({64}, bfloat16)});
  auto programs = test::fused_programs(tape);
  ASSERT_EQ(programs.size(), 1u);
  const codegen::FusedProgram& p = *programs[0];
  EXPECT_EQ(p.reduced_axes, 1);
  int reduces = 0, per_row = 0;
  for (const auto& in : p.instrs) {
    reduces += in.kind == codegen::InstrKind::Reduce;
    per_row += in.per_row && in.kind != codegen::InstrKind::Constant;
  }
  EXPECT_EQ(reduces, 1);
  EXPECT_GE(per_row, 3);  // the mean, + eps, rsqrt
  EXPECT_EQ(p.outputs.size(), 1u);
  EXPECT_FALSE(p.instrs[p.outputs[0]].per_row);
}

// Many rows, so that the row kernel and the eager kernels split them over the pool: 1, 2 and 3
// threads give the same bits, compiled and uncompiled, with specials in rows of every chunk.
TEST(ReductionFusion, RowsSplitAcrossThreadsGiveTheSameBits) {
  const int saved = num_threads();
  for (const char* name : {"softmax", "rms_norm", "layer_norm_residual"}) {
    const Workload& w = *std::find_if(workloads().begin(), workloads().end(),
                                      [&](const Workload& x) { return std::string(x.name) == name; });
    auto compiled = compile_flat(w.fn);
    for (Dtype dt : {float32, bfloat16})
      for (const Shape& shape : {Shape{333, 300}, Shape{100, 1024}}) {
        std::vector<Array> in = inputs_for(w, shape, dt, 21);
        // Specials in rows past the first chunk too (row_data plants them in rows 0-3).
        std::vector<double> v = test::as_doubles(in[0]);
        const int64_t n = shape.back();
        for (int64_t r = 40; r < shape[0]; r += 37) v[static_cast<size_t>(r * n + r % n)] = r % 2 ? std::nan("") : -INFINITY;
        in[0] = astype(Array(v, shape), dt);
        const std::string what = std::string(name) + " " + dtype_name(dt) + shape_to_string(shape);
        set_num_threads(1);
        const std::vector<Array> want = w.fn(in);
        eval(want);
        for (int threads : {1, 2, 3}) {
          set_num_threads(threads);
          std::vector<Array> eager = w.fn(in), got = compiled(in);
          for (size_t i = 0; i < want.size(); ++i) {
            EXPECT_TRUE(test::bit_equal(eager[i], want[i])) << what << " eager, " << threads << " threads, output " << i;
            EXPECT_TRUE(test::bit_equal(got[i], want[i])) << what << " compiled, " << threads << " threads, output " << i;
          }
        }
      }
  }
  set_num_threads(saved);
}

TEST(ReductionFusion, StridedAndBroadcastInputsFollowTheRowOrder) {
  // A transposed input (its rows are columns in memory), and a reduction over two trailing axes
  // of a sliced view: the eager kernel reads both through a row-major copy, the fused kernel
  // gathers its rows; both follow the row order.
  Fn soft = [](const std::vector<Array>& in) { return std::vector<Array>{softmax(transpose(in[0]), {-1})}; };
  auto [f1, r1] = expect_bit_exact(soft, {row_data({300, 6}, float32, 5)}, "softmax of a transpose");
  EXPECT_EQ(r1, 0);
  Fn two = [](const std::vector<Array>& in) {
    Array x = slice(in[0], {0, 0, 1}, {4, 20, 40});
    return std::vector<Array>{subtract(x, mean(x, {1, 2}, true)), var(x, {1, 2}, true)};
  };
  expect_bit_exact(two, {row_data({4, 20, 41}, float32, 6)}, "two trailing axes of a slice");
  // A row that is a broadcast (every element equal) and a per-row bias.
  Fn bias = [](const std::vector<Array>& in) {
    Array x = add(in[0], in[1]);  // [5, 1] + [5, 33]
    return std::vector<Array>{softmax(x, {-1})};
  };
  expect_bit_exact(bias, {row_data({5, 1}, float32, 8), row_data({5, 33}, float32, 9)}, "per-row bias");
}

// Rows found through several kept axes: the CPU merges kept axes whose strides chain in every
// input (a product per row instead of a division per axis) and keeps the others apart: an input
// broadcast along a middle axis, one whose kept axes are transposed, size-1 axes among them. One
// kernel, the uncompiled bits, at 1 to 3 threads.
TEST(ReductionFusion, KeptAxesOfEveryLayoutFindTheirRows) {
  Fn norm = [](const std::vector<Array>& in) {
    Array h = add(add(in[0], transpose(in[1], {1, 0, 2, 3})), in[2]);  // [2,3,4,64] + [3,2,4,64]^T + [1,3,1,64]
    return std::vector<Array>{layer_norm(h, in[3], in[4], 1e-5), softmax(add(in[0], in[5]), {-1})};
  };
  const std::vector<Array> in{row_data({2, 3, 4, 64}, float32, 31),
                              row_data({3, 2, 4, 64}, float32, 32),
                              row_data({1, 3, 1, 64}, float32, 33),
                              Array(test::random_values(64, 0.5, 1.5, 34), {64}),
                              Array(test::random_values(64, -1.0, 1.0, 35), {64}),
                              row_data({2, 1, 1, 64}, float32, 36)};
  auto [fused, reduces] = expect_bit_exact(norm, in, "kept axes");
  EXPECT_EQ(reduces, 0);
  EXPECT_GE(fused, 1);
  const int saved = num_threads();
  set_num_threads(1);
  const std::vector<Array> want = norm(in);
  eval(want);
  auto compiled = compile_flat(norm);
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const std::vector<Array> got = compiled(in);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(test::bit_equal(got[i], want[i])) << threads << " threads, output " << i;
  }
  set_num_threads(saved);
}

TEST(ReductionFusion, IntegerAndBoolReductionsFuse) {
  Fn isum = [](const std::vector<Array>& in) {
    return std::vector<Array>{sum(multiply(in[0], in[0]), {-1}, true), any(greater(in[0], in[0] * 2), {-1}, true)};
  };
  Array x = astype(Array(test::random_values(7 * 300, -1000, 1000, 4), Shape{7, 300}), int32);
  auto [fused, reduces] = expect_bit_exact(isum, {x}, "int32 sum of squares, any");
  EXPECT_EQ(reduces, 0);
  EXPECT_GE(fused, 1);
}

TEST(ReductionFusion, EmptyRowsAndOneElementRows) {
  Fn f = [](const std::vector<Array>& in) { return std::vector<Array>{sum(exp(in[0]), {-1}, true), mean(in[0] * 2.0f, {-1}, true)}; };
  expect_bit_exact(f, {row_data({3, 0}, float32, 1)}, "empty rows");
  expect_bit_exact(f, {row_data({10, 1}, float32, 2)}, "one-element rows");
  expect_bit_exact(f, {row_data({1, 100000}, float32, 3)}, "one long row");
}

TEST(ReductionFusion, AReductionUsedOutsideStaysUnfusedAndCorrect) {
  // The max is also returned through a reshape (a consumer outside the group): the design's
  // rule keeps it out of the kernel; the rest still fuses and the bits still match.
  Fn f = [](const std::vector<Array>& in) {
    Array m = max(in[0], {-1}, true);
    return std::vector<Array>{exp(subtract(in[0], m)) * 2.0f, reshape(m, {in[0].shape()[0]})};
  };
  auto [fused, reduces] = expect_bit_exact(f, {row_data({6, 40}, float32, 4)}, "max used outside");
  EXPECT_EQ(reduces, 1);
}

TEST(ReductionFusion, ColumnReductionsStayEager) {
  Fn f = [](const std::vector<Array>& in) { return std::vector<Array>{sum(exp(in[0]), {0}, true)}; };
  auto [fused, reduces] = expect_bit_exact(f, {row_data({30, 20}, float32, 4)}, "axis 0");
  EXPECT_EQ(reduces, 1);
}

TEST(ReductionFusion, ShapelessReplaysNewRowLengths) {
  Fn f = [](const std::vector<Array>& in) { return std::vector<Array>{softmax(in[0], {-1}), var(in[0], {-1}, true)}; };
  CompileOptions options;
  options.shapeless = true;
  auto compiled = compile_flat(f, options);
  for (const Shape& s : std::vector<Shape>{{4, 30}, {7, 130}, {2, 5}}) {
    auto in = std::vector<Array>{row_data(s, float32, 11)};
    auto got = compiled(in);
    auto want = f(in);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].shape(), want[i].shape()) << shape_to_string(s);
      EXPECT_TRUE(test::bit_equal(got[i], want[i])) << shape_to_string(s) << " output " << i;
    }
  }
}

}  // namespace
}  // namespace smelt
