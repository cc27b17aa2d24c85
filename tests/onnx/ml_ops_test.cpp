// Tests of ai.onnx.ml TreeEnsemble and MelWeightMatrix beyond the node suite: references, dtypes, errors.
#include <cmath>
#include <functional>
#include <limits>

#include "onnx/onnx_test_helpers.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

using onnx::ElemType;

// ---------------------------------------------------------------------------------------------
// TreeEnsemble
// ---------------------------------------------------------------------------------------------

/// A TreeEnsemble description; `to_model` writes it as a one-node model.
struct Trees {
  std::vector<int64_t> features, modes, true_ids, false_ids, true_leaf, false_leaf, missing;
  std::vector<double> splits, membership, leaf_weights;
  std::vector<int64_t> leaf_targets, roots;
  int64_t n_targets = 1;
  int64_t aggregate = 1, post = 0;
  int weight_type = pb::TensorProto::DOUBLE;
  bool with_n_targets = true;
};

pb::TensorProto float_tensor(const std::string& name, int type, const std::vector<double>& v) {
  pb::TensorProto t;
  t.set_name(name);
  t.set_data_type(type);
  t.add_dims(static_cast<int64_t>(v.size()));
  for (double x : v) {
    if (type == pb::TensorProto::DOUBLE) t.add_double_data(x);
    else t.add_float_data(static_cast<float>(x));
  }
  return t;
}

void add_tensor_attr(pb::NodeProto& n, const std::string& name, const pb::TensorProto& t) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::TENSOR);
  *a->mutable_t() = t;
}

/// `features` < 0 declares X without a shape (to reach the op's own rank check).
pb::ModelProto to_model(const Trees& e, int x_type, int64_t rows, int64_t features) {
  pb::NodeProto n = make_node("TreeEnsemble", {"X"}, {"Y"}, "trees");
  n.set_domain("ai.onnx.ml");
  add_ints_attr(n, "nodes_featureids", e.features);
  add_ints_attr(n, "nodes_truenodeids", e.true_ids);
  add_ints_attr(n, "nodes_falsenodeids", e.false_ids);
  add_ints_attr(n, "nodes_trueleafs", e.true_leaf);
  add_ints_attr(n, "nodes_falseleafs", e.false_leaf);
  if (!e.missing.empty()) add_ints_attr(n, "nodes_missing_value_tracks_true", e.missing);
  add_ints_attr(n, "leaf_targetids", e.leaf_targets);
  add_ints_attr(n, "tree_roots", e.roots);
  if (e.with_n_targets) add_int_attr(n, "n_targets", e.n_targets);
  add_int_attr(n, "aggregate_function", e.aggregate);
  add_int_attr(n, "post_transform", e.post);
  add_tensor_attr(n, "nodes_splits", float_tensor("nodes_splits", e.weight_type, e.splits));
  add_tensor_attr(n, "leaf_weights", float_tensor("leaf_weights", e.weight_type, e.leaf_weights));
  if (!e.membership.empty())
    add_tensor_attr(n, "membership_values", float_tensor("membership_values", pb::TensorProto::FLOAT, e.membership));
  pb::TensorProto modes;
  modes.set_name("nodes_modes");
  modes.set_data_type(pb::TensorProto::UINT8);
  modes.add_dims(static_cast<int64_t>(e.modes.size()));
  for (auto m : e.modes) modes.add_int32_data(static_cast<int32_t>(m));
  add_tensor_attr(n, "nodes_modes", modes);

  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = n;
  *g.add_input() = tensor_info("X", x_type, {rows, features});
  if (features < 0) g.mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  *g.add_output() = tensor_info("Y", x_type, {rows, e.n_targets});
  pb::ModelProto m = make_model(g, 18, 10);
  auto* ml = m.add_opset_import();
  ml->set_domain("ai.onnx.ml");
  ml->set_version(5);
  return m;
}

Array run_trees(const Trees& e, const Array& x) {
  int code = x.dtype() == float64 ? pb::TensorProto::DOUBLE
             : x.dtype() == float16 ? pb::TensorProto::FLOAT16
             : x.dtype() == float32 ? pb::TensorProto::FLOAT
                                    : pb::TensorProto::INT32;
  onnx::Model m = load_proto(to_model(e, code, x.ndim() == 2 ? x.shape()[0] : 1, x.ndim() == 2 ? x.shape()[1] : -1));
  return onnx::run(m, {onnx::Value::tensor(x)})[0].array();
}

/// The reference: walks each tree by recursion over the same attribute arrays.
std::vector<double> reference(const Trees& e, const std::vector<double>& x, int64_t rows, int64_t f) {
  std::vector<std::vector<double>> sets(e.features.size());
  size_t next = 0;
  for (size_t i = 0; i < e.modes.size(); ++i)
    if (e.modes[i] == 6)
      for (; !std::isnan(e.membership[next++]);) sets[i].push_back(e.membership[next - 1]);
  std::function<int64_t(int64_t, const double*)> leaf_of = [&](int64_t node, const double* row) -> int64_t {
    size_t i = static_cast<size_t>(node);
    double v = row[e.features[i]], s = e.splits[i];
    bool t = false;
    switch (e.modes[i]) {
      case 0: t = v <= s; break;
      case 1: t = v < s; break;
      case 2: t = v >= s; break;
      case 3: t = v > s; break;
      case 4: t = v == s; break;
      case 5: t = v != s; break;
      case 6: t = std::count(sets[i].begin(), sets[i].end(), v) > 0; break;
    }
    if (std::isnan(v) && !e.missing.empty() && e.missing[i]) t = true;
    if (t) return e.true_leaf[i] ? e.true_ids[i] : leaf_of(e.true_ids[i], row);
    return e.false_leaf[i] ? e.false_ids[i] : leaf_of(e.false_ids[i], row);
  };
  double start = e.aggregate == 2 ? std::numeric_limits<double>::max()
                 : e.aggregate == 3 ? -std::numeric_limits<double>::max()
                                    : 0.0;
  std::vector<double> out(static_cast<size_t>(rows * e.n_targets), start);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t root : e.roots) {
      int64_t leaf = leaf_of(root, x.data() + r * f);
      double w = e.leaf_weights[static_cast<size_t>(leaf)];
      double& y = out[static_cast<size_t>(r * e.n_targets + e.leaf_targets[static_cast<size_t>(leaf)])];
      if (e.aggregate == 1) y += w;
      if (e.aggregate == 0) y += w / static_cast<double>(e.roots.size());
      if (e.aggregate == 2) y = std::min(y, w);
      if (e.aggregate == 3) y = std::max(y, w);
    }
  }
  return out;
}

/// Two trees over 3 features and 2 targets: tree 0 (nodes 0-2) and tree 1 (nodes 3-4).
Trees two_trees() {
  Trees e;
  e.features = {0, 1, 2, 1, 0};
  e.modes = {0, 1, 3, 2, 5};
  e.splits = {0.125, -0.25, 0.5, 0.25, 0.0};  // exact in float16, so every dtype splits alike
  e.true_ids = {1, 0, 2, 4, 4};
  e.true_leaf = {0, 1, 1, 0, 1};
  e.false_ids = {2, 1, 3, 5, 6};
  e.false_leaf = {0, 1, 1, 1, 1};
  e.leaf_weights = {1.5, -2.25, 3.0, 0.75, 10.0, -4.0, 0.125};
  e.leaf_targets = {0, 1, 0, 1, 0, 1, 1};
  e.roots = {0, 3};
  e.n_targets = 2;
  return e;
}

TEST(OnnxTreeEnsemble, SingleTreeHandChecked) {
  // The node suite's tree: x0 <= 3.14 ? (x0 <= 1.2 ? leaf0 : leaf1) : (x0 <= 4.2 ? leaf2 : leaf3).
  Trees e;
  e.features = {0, 0, 0};
  e.modes = {0, 0, 0};
  e.splits = {3.14, 1.2, 4.2};
  e.true_ids = {1, 0, 2};
  e.true_leaf = {0, 1, 1};
  e.false_ids = {2, 1, 3};
  e.false_leaf = {0, 1, 1};
  e.false_ids = {2, 1, 3};
  e.leaf_weights = {5.23, 12.12, -12.23, 7.21};
  e.leaf_targets = {0, 1, 0, 1};
  e.roots = {0};
  e.n_targets = 2;
  Array x(std::vector<double>{1.2, 0, 3.14, 0, 4.5, 0}, {3, 2});
  Array y = run_trees(e, x);
  EXPECT_EQ(y.dtype(), float64);
  EXPECT_TRUE(all_close(y, std::vector<double>{5.23, 0, 0, 12.12, 0, 7.21}, 0, 0));
}

TEST(OnnxTreeEnsemble, RandomInputsEveryAggregate) {
  Trees e = two_trees();
  const int64_t rows = 300, f = 3;
  Array x = random_array({rows, f}, float64, -1, 1, 11);
  auto xs = x.to_vector<double>();
  xs[5] = 0.5;  // exactly on a split: x2 > 0.5 is false
  xs[9] = 0.125;  // x0 <= 0.125 is true
  x = Array(xs, Shape{rows, f});
  for (int64_t agg : {0, 1, 2, 3}) {
    e.aggregate = agg;
    EXPECT_TRUE(all_close(run_trees(e, x), reference(e, xs, rows, f), 0, 0)) << "aggregate " << agg;
  }
}

TEST(OnnxTreeEnsemble, Float32AndFloat16Inputs) {
  Trees e = two_trees();
  e.weight_type = pb::TensorProto::FLOAT;
  const int64_t rows = 50, f = 3;
  for (Dtype dt : {float32, float16}) {
    Array x = random_array({rows, f}, dt, -1, 1, 5);
    auto xs = x.to_vector<double>();  // the values the op sees
    auto want = reference(e, xs, rows, f);
    // leaf weights are float32 in this model
    for (auto& w : want) w = static_cast<double>(static_cast<float>(w));
    Array y = run_trees(e, x);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TRUE(all_close(y, want, dt == float16 ? 1e-3 : 1e-6, 0)) << dtype_name(dt);
  }
}

TEST(OnnxTreeEnsemble, NaNFollowsMissingValueTracksTrue) {
  Trees e;
  e.features = {0};
  e.modes = {0};
  e.splits = {0.0};
  e.true_ids = {0};
  e.true_leaf = {1};
  e.false_ids = {1};
  e.false_leaf = {1};
  e.leaf_weights = {1.0, 2.0};
  e.leaf_targets = {0, 0};
  e.roots = {0};
  const double nan = std::nan("");
  Array x(std::vector<double>{nan, -1, 1, -INFINITY, INFINITY}, {5, 1});
  EXPECT_TRUE(all_close(run_trees(e, x), std::vector<double>{2, 1, 2, 1, 2}, 0, 0));  // NaN <= 0 is false
  e.missing = {1};
  EXPECT_TRUE(all_close(run_trees(e, x), std::vector<double>{1, 1, 2, 1, 2}, 0, 0));
}

TEST(OnnxTreeEnsemble, SetMembership) {
  // The node suite's model: x <= 11 ? (x in {1.2, 3.7, 8, 9} ? leaf0 : (x in {12, 7} ? leaf1 : leaf3)) : leaf2.
  Trees e;
  e.features = {0, 0, 0};
  e.modes = {0, 6, 6};
  e.splits = {11, 232344, std::nan("")};
  e.true_ids = {1, 0, 1};
  e.true_leaf = {0, 1, 1};
  e.false_ids = {2, 2, 3};
  e.false_leaf = {1, 0, 1};
  e.membership = {1.2, 3.7, 8, 9, std::nan(""), 12, 7, std::nan("")};
  e.leaf_weights = {1, 10, 1000, 100};
  e.leaf_targets = {0, 1, 2, 3};
  e.roots = {0};
  e.n_targets = 4;
  e.weight_type = pb::TensorProto::FLOAT;
  Array x(std::vector<float>{1.2f, 3.4f, -0.12f, std::nanf(""), 12.0f, 7.0f}, {6, 1});
  // NaN <= 11 and 12 <= 11 are false: leaf 2.
  std::vector<double> want = {1, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 100, 0, 0, 1000, 0, 0, 0, 1000, 0, 0, 10, 0, 0};
  EXPECT_TRUE(all_close(run_trees(e, x), want, 0, 0));
}

TEST(OnnxTreeEnsemble, PostTransforms) {
  Trees e;
  e.features = {0};
  e.modes = {0};
  e.splits = {0.0};
  e.true_ids = {0};
  e.true_leaf = {1};
  e.false_ids = {1};
  e.false_leaf = {1};
  e.leaf_weights = {0.5, 2.0, 0.975};
  e.leaf_targets = {0, 1, 2};
  e.roots = {0, 0};  // the same tree twice: SUM doubles the leaf
  e.n_targets = 3;
  Array x(std::vector<double>{-1, 1}, {2, 1});
  e.post = 2;  // LOGISTIC
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  EXPECT_TRUE(all_close(run_trees(e, x), std::vector<double>{sig(1), sig(0), sig(0), sig(0), sig(4), sig(0)}, 1e-12, 0));
  e.post = 1;  // SOFTMAX over the targets of a row
  double s0 = std::exp(1) + 2, s1 = std::exp(4) + 2;
  EXPECT_TRUE(all_close(run_trees(e, x),
                        std::vector<double>{std::exp(1) / s0, 1 / s0, 1 / s0, 1 / s1, std::exp(4) / s1, 1 / s1}, 1e-12, 0));
  e.post = 3;  // SOFTMAX_ZERO: zero scores stay zero
  EXPECT_TRUE(all_close(run_trees(e, x), std::vector<double>{1, 0, 0, 0, 1, 0}, 1e-12, 0));
  e.post = 4;  // PROBIT: sqrt(2) * erfinv(2p - 1)
  e.roots = {0};
  e.leaf_weights = {0.5, 0.975, 0.025};
  Array p = run_trees(e, x);
  EXPECT_TRUE(all_close(p, std::vector<double>{0, -INFINITY, -INFINITY, -INFINITY, 1.959963984540054, -INFINITY}, 1e-9, 0))
      << ::testing::PrintToString(as_doubles(p));
}

TEST(OnnxTreeEnsemble, OneLeafTreeAndEmptyBatch) {
  Trees e;
  e.features = {99};  // never read: both branches reach leaf 0
  e.modes = {0};
  e.splits = {0.0};
  e.true_ids = {0};
  e.true_leaf = {1};
  e.false_ids = {0};
  e.false_leaf = {1};
  e.leaf_weights = {4.5};
  e.leaf_targets = {0};
  e.roots = {0};
  EXPECT_TRUE(all_close(run_trees(e, Array(std::vector<double>{1, 2}, {2, 1})), std::vector<double>{4.5, 4.5}, 0, 0));
  Array y = run_trees(e, zeros({0, 1}, float64));
  EXPECT_EQ(y.shape(), (Shape{0, 1}));
}

TEST(OnnxTreeEnsemble, Errors) {
  const Array x = random_array({4, 3}, float64, -1, 1, 3);
  auto expect_error = [&](Trees e, const std::string& msg, Array input) {
    EXPECT_THROW_MSG(run_trees(e, input), OnnxError, msg);
  };
  Trees e = two_trees();
  auto with = [&](auto edit) {
    Trees t = two_trees();
    edit(t);
    return t;
  };
  expect_error(with([](Trees& t) { t.with_n_targets = false; }), "attribute 'n_targets' is required", x);
  expect_error(with([](Trees& t) { t.n_targets = 0; }), "n_targets must be at least 1, got 0", x);
  expect_error(with([](Trees& t) { t.true_ids.pop_back(); }),
               "attribute 'nodes_truenodeids' has 4 entries; nodes_featureids has 5", x);
  expect_error(with([](Trees& t) { t.splits.pop_back(); }), "attribute 'nodes_splits' has 4 entries", x);
  expect_error(with([](Trees& t) { t.leaf_targets.pop_back(); }),
               "attribute 'leaf_targetids' has 6 entries; leaf_weights has 7", x);
  expect_error(with([](Trees& t) { t.modes[2] = 7; }), "nodes_modes[2] is 7", x);
  expect_error(with([](Trees& t) { t.true_ids[0] = 5; }), "node 0's true child is node 5, out of range for 5 nodes", x);
  expect_error(with([](Trees& t) { t.false_ids[2] = 7; }), "node 2's false child is leaf 7, out of range for 7 leaves", x);
  expect_error(with([](Trees& t) { t.features[1] = 3; }), "node 1 splits on feature 3, but X has 3 features", x);
  expect_error(with([](Trees& t) { t.leaf_targets[4] = 2; }), "leaf_targetids[4] is 2, out of range for n_targets 2", x);
  expect_error(with([](Trees& t) { t.roots = {0, 5}; }), "tree_roots[1] is 5, out of range for 5 nodes", x);
  expect_error(with([](Trees& t) { t.roots.clear(); }), "attribute 'tree_roots' lists no tree", x);
  expect_error(with([](Trees& t) { t.aggregate = 4; }), "aggregate_function must be 0 (AVERAGE)", x);
  expect_error(with([](Trees& t) { t.post = 5; }), "post_transform must be 0 (NONE)", x);
  expect_error(with([](Trees& t) { t.modes[0] = 6; }), "node 0 is BRANCH_MEMBER but membership_values has no set left", x);
  expect_error(with([](Trees& t) { t.membership = {1.0, std::nan("")}; }),
               "membership_values holds more sets than there are BRANCH_MEMBER nodes", x);
  expect_error(with([](Trees& t) {
                 t.modes[0] = 6;
                 t.membership = {1.0, 2.0};
               }),
               "the set of node 0 is not ended by NaN", x);
  // Node 3 (LEQ x1 <= 0.2 true) loops back to itself.
  expect_error(with([](Trees& t) {
                 t.modes[3] = 0;
                 t.true_ids[3] = 3;
               }),
               "the trees contain a cycle", Array(std::vector<double>{0, 0, 0}, {1, 3}));
  expect_error(with([](Trees& t) { t.n_targets = int64_t{1} << 40; }), "the output [4, 1099511627776] is too large", x);
  expect_error(e, "X must be [N, F], got tensor(double)[3]", Array(std::vector<double>{1, 2, 3}, {3}));
  expect_error(e, "input 0 has type int32; allowed: float, double, float16", zeros({2, 3}, int32));
}

// ---------------------------------------------------------------------------------------------
// MelWeightMatrix
// ---------------------------------------------------------------------------------------------

pb::ModelProto mel_model(int edge_type, int64_t output_datatype = -1) {
  pb::NodeProto n = make_node("MelWeightMatrix", {"bins", "len", "rate", "lo", "hi"}, {"w"}, "mel");
  if (output_datatype >= 0) add_int_attr(n, "output_datatype", output_datatype);
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = n;
  for (const char* name : {"bins", "len", "rate"}) *g.add_input() = tensor_info(name, pb::TensorProto::INT64, {});
  for (const char* name : {"lo", "hi"}) *g.add_input() = tensor_info(name, edge_type, {});
  pb::ValueInfoProto out;
  out.set_name("w");
  out.mutable_type()->mutable_tensor_type()->set_elem_type(output_datatype >= 0 ? static_cast<int>(output_datatype) : 1);
  *g.add_output() = out;
  return make_model(g, 17);
}

Array run_mel(int64_t bins, int64_t len, int64_t rate, double lo, double hi, int edge_type = pb::TensorProto::FLOAT,
              int64_t output_datatype = -1) {
  onnx::Model m = load_proto(mel_model(edge_type, output_datatype));
  Dtype et = edge_type == pb::TensorProto::DOUBLE ? float64 : float32;
  std::vector<onnx::Value> in = {onnx::Value::tensor(Array(bins)), onnx::Value::tensor(Array(len)),
                                 onnx::Value::tensor(Array(rate)), onnx::Value::tensor(astype(Array(lo), et)),
                                 onnx::Value::tensor(astype(Array(hi), et))};
  return onnx::run(m, in)[0].array();
}

TEST(OnnxMelWeightMatrix, HandChecked) {
  // 2 bands over dft_length 8 at 8000 Hz, edges 0..4000 Hz in float64. As in the reference, the
  // mel step is mel(4000) / (bands + 2), so the points are 0, 536.5, 1073, 1609.5 mel = 0, 426.4,
  // 1114.1, 2220.1 Hz, in bins floor(9 * hz / 8000) = 0, 0, 1, 2: band 0 peaks at bin 0 and falls
  // to zero at bin 1, band 1 rises from bin 0 to a peak at bin 1 and falls to zero at bin 2.
  Array w = run_mel(2, 8, 8000, 0, 4000, pb::TensorProto::DOUBLE);
  EXPECT_EQ(w.shape(), (Shape{5, 2}));
  EXPECT_EQ(w.dtype(), float32);
  std::vector<double> want = {1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
  EXPECT_TRUE(all_close(w, want, 0, 0));
}

TEST(OnnxMelWeightMatrix, TrianglesSumAndShape) {
  // Many bands over a long DFT: each band is a triangle of weights in [0, 1] peaking at 1.
  Array w = run_mel(20, 512, 16000, 20, 8000);
  EXPECT_EQ(w.shape(), (Shape{257, 20}));
  auto v = w.to_vector<double>();
  for (int64_t i = 0; i < 20; ++i) {
    double mx = 0;
    for (int64_t j = 0; j < 257; ++j) {
      double x = v[static_cast<size_t>(j * 20 + i)];
      EXPECT_GE(x, 0);
      EXPECT_LE(x, 1);
      mx = std::max(mx, x);
    }
    EXPECT_EQ(mx, 1.0) << "band " << i;
  }
}

TEST(OnnxMelWeightMatrix, OutputDatatype) {
  Array w = run_mel(4, 64, 16000, 100, 7000, pb::TensorProto::FLOAT, pb::TensorProto::DOUBLE);
  EXPECT_EQ(w.dtype(), float64);
  Array h = run_mel(4, 64, 16000, 100, 7000, pb::TensorProto::FLOAT, pb::TensorProto::FLOAT16);
  EXPECT_EQ(h.dtype(), float16);
  EXPECT_TRUE(all_close(h, w.to_vector<double>(), 1e-3, 0));
  EXPECT_EQ(run_mel(0, 64, 16000, 100, 7000).shape(), (Shape{33, 0}));
}

TEST(OnnxMelWeightMatrix, Errors) {
  EXPECT_THROW_MSG(run_mel(4, 0, 16000, 0, 100), OnnxError, "MelWeightMatrix 'mel' (inputs tensor(int64)[], tensor(int64)[], tensor(int64)[], tensor(float)[], "
                   "tensor(float)[]): dft_length must be positive, got 0");
  EXPECT_THROW_MSG(run_mel(-1, 64, 16000, 0, 100), OnnxError, "num_mel_bins must be non-negative, got -1");
  EXPECT_THROW_MSG(run_mel(4, 64, 0, 0, 100), OnnxError, "sample_rate must be positive, got 0");
  EXPECT_THROW_MSG(run_mel(4, 64, 16000, 200, 100), OnnxError, "0 <= lower_edge_hertz <= upper_edge_hertz");
  EXPECT_THROW_MSG(run_mel(4, 64, 16000, -5, 100), OnnxError, "0 <= lower_edge_hertz <= upper_edge_hertz");
  // The last band ends below upper_edge_hertz (the reference's mel step divides by bands + 2), so
  // the edge has to be far above the Nyquist frequency to fall outside the bins.
  EXPECT_THROW_MSG(run_mel(4, 64, 16000, 0, 100000), OnnxError,
                   "upper_edge_hertz 100000.000000 is above what 33 spectrogram bins of dft_length 64 at sample_rate 16000 cover");
  EXPECT_THROW_MSG(run_mel(4, 64, 16000, 0, INFINITY), OnnxError, "is above what 33 spectrogram bins");
  EXPECT_THROW_MSG(run_mel(4, 64, 16000, 0, 100, pb::TensorProto::FLOAT, pb::TensorProto::STRING), OnnxError,
                   "output_datatype 8 (string) is not a numeric type");
  EXPECT_THROW_MSG(run_mel(int64_t{1} << 40, 64, 16000, 0, 100), OnnxError, "is too large");
}

}  // namespace
}  // namespace smelt::test
