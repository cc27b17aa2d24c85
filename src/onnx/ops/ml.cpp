// ai.onnx.ml tree models: TreeEnsemble (opset 5), evaluated on the host row by row.
#include <algorithm>
#include <cmath>
#include <limits>

#include "src/core/thread_pool.h"
#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

// Node modes as TreeEnsemble numbers them (nodes_modes).
enum class Mode : uint8_t { Leq = 0, Lt = 1, Gte = 2, Gt = 3, Eq = 4, Neq = 5, Member = 6 };
enum class Aggregate : uint8_t { Average = 0, Sum = 1, Min = 2, Max = 3 };
enum class PostTransform : uint8_t { None = 0, Softmax = 1, Logistic = 2, SoftmaxZero = 3, Probit = 4 };

/// The ensemble in flat arrays: interior nodes by index, leaves by index, trees by root node.
struct Ensemble {
  std::vector<double> splits;
  std::vector<int64_t> features;
  std::vector<Mode> modes;
  std::vector<int64_t> true_ids, false_ids;
  std::vector<uint8_t> true_leaf, false_leaf, missing_true;
  std::vector<std::vector<double>> members;  // per node; filled for Member nodes
  std::vector<double> leaf_weights;
  std::vector<int64_t> leaf_targets;
  std::vector<int64_t> roots;
  int64_t n_targets = 0;
};

/// A float tensor attribute as doubles (float, double or float16 values).
std::vector<double> float_tensor_attr(const OpContext& c, const char* name) {
  const Value& v = c.attr_tensor(name);
  if (!v.is_tensor() || !is_floating(v.array().dtype()) || is_storage_type(v.elem_type()))
    c.fail(std::string("attribute '") + name + "' must be a float, double or float16 tensor, got " + v.describe());
  return v.array().to_vector<double>();
}

bool compare(Mode mode, double x, double split, const std::vector<double>& members) {
  switch (mode) {
    case Mode::Leq: return x <= split;
    case Mode::Lt: return x < split;
    case Mode::Gte: return x >= split;
    case Mode::Gt: return x > split;
    case Mode::Eq: return x == split;
    case Mode::Neq: return x != split;
    case Mode::Member: return std::find(members.begin(), members.end(), x) != members.end();
  }
  return false;
}

Ensemble read_ensemble(const OpContext& c, int64_t n_features) {
  Ensemble e;
  e.n_targets = c.attr_int("n_targets", -1);
  if (!c.has_attr("n_targets")) c.fail("attribute 'n_targets' is required");
  if (e.n_targets < 1) c.fail("n_targets must be at least 1, got " + std::to_string(e.n_targets));
  e.features = c.attr_ints("nodes_featureids");
  e.true_ids = c.attr_ints("nodes_truenodeids");
  e.false_ids = c.attr_ints("nodes_falsenodeids");
  auto true_leaf = c.attr_ints("nodes_trueleafs");
  auto false_leaf = c.attr_ints("nodes_falseleafs");
  e.roots = c.attr_ints("tree_roots");
  e.leaf_targets = c.attr_ints("leaf_targetids");
  e.leaf_weights = float_tensor_attr(c, "leaf_weights");
  e.splits = float_tensor_attr(c, "nodes_splits");
  const Value& modes_v = c.attr_tensor("nodes_modes");
  if (!modes_v.is_tensor() || modes_v.elem_type() != ElemType::UInt8)
    c.fail("attribute 'nodes_modes' must be a uint8 tensor, got " + modes_v.describe());
  auto modes = modes_v.array().to_vector<int64_t>();
  std::vector<int64_t> missing = c.attr_ints("nodes_missing_value_tracks_true");

  const size_t n = e.features.size();
  auto same_length = [&](size_t len, const char* name) {
    if (len != n)
      c.fail(std::string("attribute '") + name + "' has " + std::to_string(len) +
             " entries; nodes_featureids has " + std::to_string(n));
  };
  same_length(e.true_ids.size(), "nodes_truenodeids");
  same_length(e.false_ids.size(), "nodes_falsenodeids");
  same_length(true_leaf.size(), "nodes_trueleafs");
  same_length(false_leaf.size(), "nodes_falseleafs");
  same_length(e.splits.size(), "nodes_splits");
  same_length(modes.size(), "nodes_modes");
  if (!missing.empty()) same_length(missing.size(), "nodes_missing_value_tracks_true");
  if (e.leaf_targets.size() != e.leaf_weights.size())
    c.fail("attribute 'leaf_targetids' has " + std::to_string(e.leaf_targets.size()) +
           " entries; leaf_weights has " + std::to_string(e.leaf_weights.size()));
  if (e.roots.empty()) c.fail("attribute 'tree_roots' lists no tree");

  const int64_t n_nodes = static_cast<int64_t>(n);
  const int64_t n_leaves = static_cast<int64_t>(e.leaf_weights.size());
  e.members.resize(n);
  std::vector<double> membership;
  if (c.has_attr("membership_values")) membership = float_tensor_attr(c, "membership_values");
  size_t next_member = 0;  // sets are listed in node order, each ended by a NaN
  for (size_t i = 0; i < n; ++i) {
    if (modes[i] < 0 || modes[i] > 6)
      c.fail("nodes_modes[" + std::to_string(i) + "] is " + std::to_string(modes[i]) +
             "; modes are 0 (BRANCH_LEQ) to 6 (BRANCH_MEMBER)");
    e.modes.push_back(static_cast<Mode>(modes[i]));
    e.true_leaf.push_back(true_leaf[i] != 0);
    e.false_leaf.push_back(false_leaf[i] != 0);
    e.missing_true.push_back(!missing.empty() && missing[i] != 0);
    auto check_child = [&](int64_t id, bool leaf, const char* side) {
      int64_t limit = leaf ? n_leaves : n_nodes;
      if (id < 0 || id >= limit)
        c.fail("node " + std::to_string(i) + "'s " + side + " child is " + (leaf ? "leaf " : "node ") +
               std::to_string(id) + ", out of range for " + std::to_string(limit) + (leaf ? " leaves" : " nodes"));
    };
    check_child(e.true_ids[i], e.true_leaf[i], "true");
    check_child(e.false_ids[i], e.false_leaf[i], "false");
    const bool degenerate = e.true_leaf[i] && e.false_leaf[i] && e.true_ids[i] == e.false_ids[i];
    if (!degenerate && (e.features[i] < 0 || e.features[i] >= n_features))
      c.fail("node " + std::to_string(i) + " splits on feature " + std::to_string(e.features[i]) +
             ", but X has " + std::to_string(n_features) + " features");
    if (e.modes[i] == Mode::Member) {
      if (next_member >= membership.size())
        c.fail("node " + std::to_string(i) +
               " is BRANCH_MEMBER but membership_values has no set left for it (sets end with NaN)");
      while (next_member < membership.size() && !std::isnan(membership[next_member]))
        e.members[i].push_back(membership[next_member++]);
      if (next_member == membership.size())
        c.fail("membership_values: the set of node " + std::to_string(i) + " is not ended by NaN");
      ++next_member;
    }
  }
  if (next_member != membership.size())
    c.fail("membership_values holds more sets than there are BRANCH_MEMBER nodes");
  for (size_t i = 0; i < e.leaf_targets.size(); ++i)
    if (e.leaf_targets[i] < 0 || e.leaf_targets[i] >= e.n_targets)
      c.fail("leaf_targetids[" + std::to_string(i) + "] is " + std::to_string(e.leaf_targets[i]) +
             ", out of range for n_targets " + std::to_string(e.n_targets));
  for (size_t t = 0; t < e.roots.size(); ++t)
    if (e.roots[t] < 0 || e.roots[t] >= n_nodes)
      c.fail("tree_roots[" + std::to_string(t) + "] is " + std::to_string(e.roots[t]) + ", out of range for " +
             std::to_string(n_nodes) + " nodes");
  return e;
}

/// The leaf a row reaches from `root`, or -1 when the walk is longer than the node count (a cycle).
int64_t find_leaf(const Ensemble& e, int64_t root, const double* row) {
  int64_t node = root;
  for (size_t steps = 0; steps <= e.features.size(); ++steps) {
    const size_t i = static_cast<size_t>(node);
    bool go_true;
    if (e.true_leaf[i] && e.false_leaf[i] && e.true_ids[i] == e.false_ids[i]) {
      go_true = true;  // a one-leaf tree: no feature is read
    } else {
      double x = row[e.features[i]];
      go_true = (std::isnan(x) && e.missing_true[i]) || compare(e.modes[i], x, e.splits[i], e.members[i]);
    }
    int64_t next = go_true ? e.true_ids[i] : e.false_ids[i];
    if (go_true ? e.true_leaf[i] : e.false_leaf[i]) return next;
    node = next;
  }
  return -1;
}

/// The inverse of the standard normal CDF's erf form: erfinv(y) for y in (-1, 1).
double erfinv(double y) {
  if (y <= -1) return -std::numeric_limits<double>::infinity();
  if (y >= 1) return std::numeric_limits<double>::infinity();
  // Giles' single-precision approximation, then Newton steps on erf to double accuracy.
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    double p = 2.81022636e-08;
    for (double k : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941})
      p = k + p * w;
    x = p * y;
  } else {
    w = std::sqrt(w) - 3.0;
    double p = -0.000200214257;
    for (double k : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                     0.00943887047, 1.00167406, 2.83297682})
      p = k + p * w;
    x = p * y;
  }
  const double two_over_sqrt_pi = 1.1283791670955126;
  for (int it = 0; it < 2; ++it) x -= (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
  return x;
}

void post_transform(PostTransform pt, double* v, int64_t n) {
  switch (pt) {
    case PostTransform::None: return;
    case PostTransform::Logistic:
      for (int64_t k = 0; k < n; ++k) v[k] = 1.0 / (1.0 + std::exp(-v[k]));
      return;
    case PostTransform::Probit:
      for (int64_t k = 0; k < n; ++k) v[k] = std::sqrt(2.0) * erfinv(2.0 * v[k] - 1.0);
      return;
    case PostTransform::Softmax:
    case PostTransform::SoftmaxZero: {
      // SOFTMAX_ZERO keeps zero scores at zero and leaves them out of the normalization.
      const bool keep_zero = pt == PostTransform::SoftmaxZero;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < n; ++k) mx = std::max(mx, v[k]);
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        v[k] = keep_zero && v[k] == 0 ? 0.0 : std::exp(v[k] - mx);
        sum += v[k];
      }
      for (int64_t k = 0; k < n; ++k) v[k] = sum > 0 ? v[k] / sum : v[k];
      return;
    }
  }
}

std::vector<Value> op_tree_ensemble(OpContext& c) {
  c.require_types(0, {ElemType::Float, ElemType::Double, ElemType::Float16});
  const Array& x = c.tensor(0);
  if (x.ndim() != 2) c.fail("X must be [N, F], got " + c.input(0).describe());
  const int64_t rows = x.shape()[0], n_features = x.shape()[1];
  const int64_t agg_code = c.attr_int("aggregate_function", 1);
  const int64_t pt_code = c.attr_int("post_transform", 0);
  if (agg_code < 0 || agg_code > 3)
    c.fail("aggregate_function must be 0 (AVERAGE), 1 (SUM), 2 (MIN) or 3 (MAX), got " + std::to_string(agg_code));
  if (pt_code < 0 || pt_code > 4)
    c.fail("post_transform must be 0 (NONE), 1 (SOFTMAX), 2 (LOGISTIC), 3 (SOFTMAX_ZERO) or 4 (PROBIT), got " +
           std::to_string(pt_code));
  const auto agg = static_cast<Aggregate>(agg_code);
  const auto pt = static_cast<PostTransform>(pt_code);
  const Ensemble e = read_ensemble(c, n_features);
  const int64_t nt = e.n_targets;
  if (rows > 0 && nt > (int64_t{1} << 32) / rows)
    c.fail("the output [" + std::to_string(rows) + ", " + std::to_string(nt) + "] is too large");

  // MIN and MAX start from the output type's extremes, as the ONNX reference does.
  double start = 0;
  const Dtype dt = x.dtype();
  const double big = dt == float64 ? std::numeric_limits<double>::max()
                     : dt == float32 ? static_cast<double>(std::numeric_limits<float>::max())
                                     : 65504.0;
  if (agg == Aggregate::Min) start = big;
  if (agg == Aggregate::Max) start = -big;

  const std::vector<double> xs = x.to_vector<double>();
  std::vector<double> out(static_cast<size_t>(rows * nt), start);
  std::vector<uint8_t> cyclic(static_cast<size_t>(rows), 0);
  const double n_trees = static_cast<double>(e.roots.size());
  // Rows are independent, so the result does not depend on how they are split among threads.
  parallel_for(rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const double* row = xs.data() + r * n_features;
      double* y = out.data() + r * nt;
      for (int64_t root : e.roots) {
        int64_t leaf = find_leaf(e, root, row);
        if (leaf < 0) {
          cyclic[static_cast<size_t>(r)] = 1;
          break;
        }
        const double w = e.leaf_weights[static_cast<size_t>(leaf)];
        double& slot = y[e.leaf_targets[static_cast<size_t>(leaf)]];
        switch (agg) {
          case Aggregate::Sum: slot += w; break;
          case Aggregate::Average: slot += w / n_trees; break;
          case Aggregate::Min: slot = std::min(slot, w); break;
          case Aggregate::Max: slot = std::max(slot, w); break;
        }
      }
      post_transform(pt, y, nt);
    }
  });
  if (std::find(cyclic.begin(), cyclic.end(), 1) != cyclic.end())
    c.fail("the trees contain a cycle (a walk from a root is longer than the " +
           std::to_string(e.features.size()) + " nodes)");
  return {tv(astype(Array(out, Shape{rows, nt}), dt))};
}

}  // namespace

void register_ml_ops(OpRegistry& r) { r.add("ai.onnx.ml", "TreeEnsemble", 5, op_tree_ensemble); }

}  // namespace smelt::onnx
