// Names, hashing and printing of primitives and their parameters.
#include "src/primitives/primitive.h"

#include <functional>
#include <sstream>

#include "smelt/errors.h"

namespace smelt {

const char* unary_op_name(UnaryOp op) {
  switch (op) {
#define X(name) \
  case UnaryOp::name: return #name;
    SMELT_UNARY_OPS(X)
#undef X
  }
  return "?";
}

const char* binary_op_name(BinaryOp op) {
  switch (op) {
#define X(name) \
  case BinaryOp::name: return #name;
    SMELT_BINARY_OPS(X)
#undef X
  }
  return "?";
}

const char* scalar_fn_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Negative: return "negative";
    case UnaryOp::Sign: return "sign";
    case UnaryOp::Square: return "square";
    case UnaryOp::Reciprocal: return "reciprocal";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Rsqrt: return "rsqrt";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Exp2: return "exp2";
    case UnaryOp::Expm1: return "expm1";
    case UnaryOp::Log: return "log";
    case UnaryOp::Log2: return "log2";
    case UnaryOp::Log10: return "log10";
    case UnaryOp::Log1p: return "log1p";
    case UnaryOp::Sin: return "sin";
    case UnaryOp::Cos: return "cos";
    case UnaryOp::Tan: return "tan";
    case UnaryOp::Asin: return "asin";
    case UnaryOp::Acos: return "acos";
    case UnaryOp::Atan: return "atan";
    case UnaryOp::Sinh: return "sinh";
    case UnaryOp::Cosh: return "cosh";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Asinh: return "asinh";
    case UnaryOp::Acosh: return "acosh";
    case UnaryOp::Atanh: return "atanh";
    case UnaryOp::Erf: return "erf";
    case UnaryOp::ErfInv: return "erfinv";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Floor: return "floor";
    case UnaryOp::Ceil: return "ceil";
    case UnaryOp::Round: return "round";
    case UnaryOp::IsNan: return "isnan";
    case UnaryOp::IsInf: return "isinf";
    case UnaryOp::IsFinite: return "isfinite";
    case UnaryOp::LogicalNot: return "logical_not";
    case UnaryOp::BitwiseNot: return "bitwise_not";
  }
  return "?";
}

const char* scalar_fn_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Subtract: return "subtract";
    case BinaryOp::Multiply: return "multiply";
    case BinaryOp::Divide: return "divide";
    case BinaryOp::FloorDivide: return "floor_divide";
    case BinaryOp::Remainder: return "remainder";
    case BinaryOp::Fmod: return "fmod";
    case BinaryOp::Power: return "power";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::Minimum: return "minimum";
    case BinaryOp::Atan2: return "atan2";
    case BinaryOp::Equal: return "equal";
    case BinaryOp::NotEqual: return "not_equal";
    case BinaryOp::Less: return "less";
    case BinaryOp::LessEqual: return "less_equal";
    case BinaryOp::Greater: return "greater";
    case BinaryOp::GreaterEqual: return "greater_equal";
    case BinaryOp::LogicalAnd: return "logical_and";
    case BinaryOp::LogicalOr: return "logical_or";
    case BinaryOp::LogicalXor: return "logical_xor";
    case BinaryOp::BitwiseAnd: return "bitwise_and";
    case BinaryOp::BitwiseOr: return "bitwise_or";
    case BinaryOp::BitwiseXor: return "bitwise_xor";
    case BinaryOp::LeftShift: return "left_shift";
    case BinaryOp::RightShift: return "right_shift";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::All: return "all";
    case ReduceOp::Any: return "any";
    case ReduceOp::Mean: return "mean";
  }
  return "?";
}

bool binary_op_returns_bool(BinaryOp op) {
  switch (op) {
    case BinaryOp::Equal:
    case BinaryOp::NotEqual:
    case BinaryOp::Less:
    case BinaryOp::LessEqual:
    case BinaryOp::Greater:
    case BinaryOp::GreaterEqual:
    case BinaryOp::LogicalAnd:
    case BinaryOp::LogicalOr:
    case BinaryOp::LogicalXor:
      return true;
    case BinaryOp::Add:
    case BinaryOp::Subtract:
    case BinaryOp::Multiply:
    case BinaryOp::Divide:
    case BinaryOp::FloorDivide:
    case BinaryOp::Remainder:
    case BinaryOp::Fmod:
    case BinaryOp::Power:
    case BinaryOp::Maximum:
    case BinaryOp::Minimum:
    case BinaryOp::Atan2:
    case BinaryOp::BitwiseAnd:
    case BinaryOp::BitwiseOr:
    case BinaryOp::BitwiseXor:
    case BinaryOp::LeftShift:
    case BinaryOp::RightShift:
      return false;
  }
  return false;
}

bool unary_op_returns_bool(UnaryOp op) {
  return op == UnaryOp::IsNan || op == UnaryOp::IsInf || op == UnaryOp::IsFinite ||
         op == UnaryOp::LogicalNot;
}

const char* prim_name(PrimKind kind) {
  switch (kind) {
    case PrimKind::None: return "Leaf";
#define X(name, params, outputs, fuse, fixes_shape, view) \
  case PrimKind::name: return #name;
    SMELT_PRIMITIVES(X)
#undef X
  }
  return "?";
}

int prim_num_outputs(PrimKind kind) {
  switch (kind) {
    case PrimKind::None: return 1;
#define X(name, params, outputs, fuse, fixes_shape, view) \
  case PrimKind::name: return outputs;
    SMELT_PRIMITIVES(X)
#undef X
  }
  return 1;
}

bool prim_is_view(PrimKind kind) {
  switch (kind) {
    case PrimKind::None: return false;
#define X(name, params, outputs, fuse, fixes_shape, view) \
  case PrimKind::name: return view;
    SMELT_PRIMITIVES(X)
#undef X
  }
  return false;
}

FuseRole prim_fuse_role(PrimKind kind) {
  switch (kind) {
    case PrimKind::None: return FuseRole::None;
#define X(name, params, outputs, fuse, fixes_shape, view) \
  case PrimKind::name: return FuseRole::fuse;
    SMELT_PRIMITIVES(X)
#undef X
  }
  return FuseRole::None;
}

bool prim_fixes_shape(PrimKind kind) {
  switch (kind) {
    case PrimKind::None: return false;
#define X(name, params, outputs, fuse, fixes_shape, view) \
  case PrimKind::name: return fixes_shape;
    SMELT_PRIMITIVES(X)
#undef X
  }
  return false;
}

namespace {

struct Hasher {
  size_t h = 0xcbf29ce484222325ull;
  void add(size_t v) { h = (h ^ v) * 0x100000001b3ull; }
  void add_vec(const std::vector<int64_t>& v) {
    add(v.size());
    for (auto x : v) add(static_cast<size_t>(x));
  }
  void add_vec(const std::vector<int>& v) {
    add(v.size());
    for (auto x : v) add(static_cast<size_t>(x));
  }
  void operator()(const NoParams&) {}
  void operator()(const MatmulParams& p) {
    add(static_cast<size_t>(p.bias));
    add_vec(p.packed_b);
    add(static_cast<size_t>(p.packed_threads));
    add(static_cast<size_t>(p.panel_n));
  }
  void operator()(const UnaryParams& p) { add(static_cast<size_t>(p.op)); }
  void operator()(const BinaryParams& p) { add(static_cast<size_t>(p.op)); }
  void operator()(const CastParams& p) { add(static_cast<size_t>(p.to)); }
  void operator()(const FullParams& p) { add(p.value.hash()); }
  void operator()(const ArangeParams& p) {
    add(std::hash<double>()(p.start));
    add(std::hash<double>()(p.step));
  }
  void operator()(const ShapeParams& p) { add_vec(p.shape); }
  void operator()(const PermParams& p) { add_vec(p.perm); }
  void operator()(const SliceParams& p) {
    add_vec(p.start);
    add_vec(p.step);
  }
  void operator()(const AxisParams& p) { add(static_cast<size_t>(p.axis)); }
  void operator()(const PadParams& p) {
    add_vec(p.low);
    add_vec(p.high);
    add(static_cast<size_t>(p.mode));
    add(p.value.hash());
  }
  void operator()(const ReduceParams& p) {
    add(static_cast<size_t>(p.op));
    add_vec(p.axes);
    add(static_cast<size_t>(p.ddof));
  }
  void operator()(const ArgReduceParams& p) {
    add(static_cast<size_t>(p.op));
    add(static_cast<size_t>(p.axis));
    add(p.last);
  }
  void operator()(const ScanParams& p) {
    add(static_cast<size_t>(p.op));
    add(static_cast<size_t>(p.axis));
    add(p.reverse);
    add(p.exclusive);
  }
  void operator()(const GatherNDParams& p) { add(static_cast<size_t>(p.batch_dims)); }
  void operator()(const ScatterParams& p) {
    add(static_cast<size_t>(p.axis));
    add(static_cast<size_t>(p.reduce));
  }
  void operator()(const SortParams& p) {
    add(static_cast<size_t>(p.axis));
    add(p.descending);
  }
  void operator()(const TopKParams& p) {
    add(static_cast<size_t>(p.k));
    add(static_cast<size_t>(p.axis));
    add(p.largest);
  }
  void operator()(const ConvParams& p) {
    add_vec(p.strides);
    add_vec(p.padding_lo);
    add_vec(p.padding_hi);
    add_vec(p.dilations);
    add(static_cast<size_t>(p.groups));
    for (ConvAdd a : p.adds) add(static_cast<size_t>(a) + 1);
    add_vec(p.packed_weight);
    add(static_cast<size_t>(p.packed_threads));
    add(static_cast<size_t>(p.src_block));
    add(static_cast<size_t>(p.dst_block));
  }
  void operator()(const ConvTransposeParams& p) {
    add_vec(p.strides);
    add_vec(p.padding_lo);
    add_vec(p.padding_hi);
    add_vec(p.dilations);
    add_vec(p.output_padding);
    add(static_cast<size_t>(p.groups));
  }
  void operator()(const PoolParams& p) {
    add(static_cast<size_t>(p.kind));
    add_vec(p.kernel);
    add_vec(p.strides);
    add_vec(p.padding_lo);
    add_vec(p.padding_hi);
    add_vec(p.dilations);
    add(p.count_include_pad);
    add(static_cast<size_t>(p.block));
    add(p.ceil_mode);
    add(static_cast<size_t>(p.epilogue_add));
    add(p.epilogue_relu);
  }
  void operator()(const AttentionParams& p) {
    add(p.scale.has_value());
    add(std::hash<double>{}(p.scale.value_or(0.0)));
    add(std::hash<double>{}(p.softcap));
    add(static_cast<size_t>(p.causal));
    add(static_cast<size_t>(p.mask));
  }
  void operator()(const FusedParams& p) { add(p.hash()); }
};

template <class V>
std::string list(const std::vector<V>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "]";
  return os.str();
}

struct Printer {
  std::ostringstream& os;
  void operator()(const NoParams&) {}
  void operator()(const MatmulParams& p) {
    switch (p.bias) {
      case MatmulBias::None: break;
      case MatmulBias::After: os << "+bias"; break;
      case MatmulBias::Before: os << "bias+"; break;
    }
    if (!p.packed_b.empty()) os << (p.bias == MatmulBias::None ? "" : ", ") << "packed b " << list(p.packed_b);
    if (p.panel_n > 0) os << " in panels of " << p.panel_n;
  }
  void operator()(const UnaryParams& p) { os << unary_op_name(p.op); }
  void operator()(const BinaryParams& p) { os << binary_op_name(p.op); }
  void operator()(const CastParams& p) { os << dtype_name(p.to); }
  void operator()(const FullParams& p) { os << p.value.str(); }
  void operator()(const ArangeParams& p) { os << "start=" << p.start << ", step=" << p.step; }
  void operator()(const ShapeParams& p) { os << list(p.shape); }
  void operator()(const PermParams& p) { os << list(p.perm); }
  void operator()(const SliceParams& p) { os << "start=" << list(p.start) << ", step=" << list(p.step); }
  void operator()(const AxisParams& p) { os << "axis=" << p.axis; }
  void operator()(const PadParams& p) {
    os << "low=" << list(p.low) << ", high=" << list(p.high) << ", mode=" << static_cast<int>(p.mode)
       << ", value=" << p.value.str();
  }
  void operator()(const ReduceParams& p) {
    os << reduce_op_name(p.op) << ", axes=" << list(p.axes);
    if (p.ddof != 0) os << ", ddof=" << p.ddof;
  }
  void operator()(const ArgReduceParams& p) {
    os << (p.op == ArgReduceOp::ArgMax ? "argmax" : "argmin") << ", axis=" << p.axis
       << (p.last ? ", last" : "");
  }
  void operator()(const ScanParams& p) {
    os << "op=" << static_cast<int>(p.op) << ", axis=" << p.axis << (p.reverse ? ", reverse" : "")
       << (p.exclusive ? ", exclusive" : "");
  }
  void operator()(const GatherNDParams& p) { os << "batch_dims=" << p.batch_dims; }
  void operator()(const ScatterParams& p) {
    os << "axis=" << p.axis << ", reduce=" << static_cast<int>(p.reduce);
  }
  void operator()(const SortParams& p) { os << "axis=" << p.axis << (p.descending ? ", descending" : ""); }
  void operator()(const TopKParams& p) {
    os << "k=" << p.k << ", axis=" << p.axis << (p.largest ? ", largest" : ", smallest");
  }
  void operator()(const ConvParams& p) {
    os << "strides=" << list(p.strides) << ", pads=" << list(p.padding_lo) << list(p.padding_hi)
       << ", dilations=" << list(p.dilations) << ", groups=" << p.groups;
    for (ConvAdd a : p.adds) os << (a == ConvAdd::Channel ? ", +bias" : ", +residual");
    if (!p.packed_weight.empty()) os << ", packed weight " << list(p.packed_weight);
    if (p.src_block || p.dst_block) os << ", blocks " << p.src_block << "->" << p.dst_block;
  }
  void operator()(const ConvTransposeParams& p) {
    os << "strides=" << list(p.strides) << ", pads=" << list(p.padding_lo) << list(p.padding_hi)
       << ", dilations=" << list(p.dilations) << ", output_padding=" << list(p.output_padding)
       << ", groups=" << p.groups;
  }
  void operator()(const PoolParams& p) {
    os << (p.kind == PoolKind::Max ? "max" : "avg") << ", kernel=" << list(p.kernel)
       << ", strides=" << list(p.strides) << ", pads=" << list(p.padding_lo) << list(p.padding_hi)
       << ", dilations=" << list(p.dilations) << (p.ceil_mode ? ", ceil" : "");
    if (p.block) os << ", block " << p.block;
    if (p.epilogue_add != PoolEpilogueAdd::None) os << ", then + channel";
    if (p.epilogue_relu) os << ", then relu";
  }
  void operator()(const AttentionParams& p) {
    static const char* causal[] = {"none", "upper_left", "lower_right"};
    static const char* mask[] = {"none", "additive", "boolean"};
    os << "scale=";
    if (p.scale) os << *p.scale;
    else os << "1/sqrt(d)";
    os << ", causal="
       << causal[static_cast<int>(p.causal)] << ", mask=" << mask[static_cast<int>(p.mask)];
    if (p.softcap > 0) os << ", softcap=" << p.softcap;
  }
  void operator()(const FusedParams& p) { os << p.str(); }
};

}  // namespace

size_t Primitive::hash() const {
  Hasher h;
  h.add(static_cast<size_t>(kind));
  std::visit(h, params);
  return h.h;
}

std::string Primitive::str() const {
  std::ostringstream os;
  os << prim_name(kind) << "(";
  std::visit(Printer{os}, params);
  os << ")";
  return os.str();
}

Shape blocked_shape(const Shape& plain, int64_t b) {
  if (b == 0) return plain;
  SMELT_ASSERT(plain.size() >= 3 && b > 0 && plain[1] % b == 0, "blocked_shape: channels not a multiple of the block");
  Shape s{plain[0], plain[1] / b};
  s.insert(s.end(), plain.begin() + 2, plain.end());
  s.push_back(b);
  return s;
}

Shape unblocked_shape(const Shape& blocked, int64_t b) {
  if (b == 0) return blocked;
  SMELT_ASSERT(blocked.size() >= 4 && blocked.back() == b, "unblocked_shape: not a blocked shape");
  Shape s{blocked[0], blocked[1] * b};
  s.insert(s.end(), blocked.begin() + 2, blocked.end() - 1);
  return s;
}

}  // namespace smelt
