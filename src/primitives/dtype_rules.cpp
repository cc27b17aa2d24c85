// Dtype rules of the primitives: output dtypes from parameters and input dtypes, with checks.
#include "src/primitives/dtype_rules.h"

#include <string>

#include "smelt/errors.h"
#include "src/codegen/fused_kernel.h"

namespace smelt {

namespace {

std::string dtypes_to_string(const std::vector<Dtype>& in) {
  std::string s = "(";
  for (size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + std::string(dtype_name(in[i]));
  return s + ")";
}

[[noreturn]] void fail(const Primitive& prim, const std::vector<Dtype>& in, const std::string& why) {
  throw DtypeError(prim.str() + ": " + why + "; input dtypes " + dtypes_to_string(in));
}

void need_inputs(const Primitive& prim, const std::vector<Dtype>& in, size_t n) {
  if (in.size() < n) fail(prim, in, "needs " + std::to_string(n) + " inputs, has " + std::to_string(in.size()));
}

/// Inputs [first, last) all of input `first`'s dtype (a binary op's operands, concatenated parts).
void need_same(const Primitive& prim, const std::vector<Dtype>& in, size_t first, size_t last) {
  for (size_t i = first + 1; i < last && i < in.size(); ++i)
    if (in[i] != in[first])
      fail(prim, in, "inputs " + std::to_string(first) + " and " + std::to_string(i) + " have different dtypes");
}

}  // namespace

Dtype sum_dtype(Dtype d) {
  switch (kind_of(d)) {
    case DtypeKind::Bool:
    case DtypeKind::SignedInt: return int64;
    case DtypeKind::UnsignedInt: return uint64;
    case DtypeKind::Float: return d;
  }
  return d;
}

Dtype float_compute_dtype(Dtype d) { return d == float64 ? float64 : float32; }

std::vector<Dtype> infer_output_dtypes(const Primitive& prim, const std::vector<Dtype>& in,
                                       const std::vector<Dtype>& fixed) {
  switch (prim.kind) {
    case PrimKind::None:
      fail(prim, in, "a leaf has no dtype rule");
    case PrimKind::Full:
      return {prim.get<FullParams>().value.dtype};
    case PrimKind::Arange:
      return fixed;
    case PrimKind::RandomBits:
      return {uint32};
    case PrimKind::Unary:
      need_inputs(prim, in, 1);
      return {unary_op_returns_bool(prim.get<UnaryParams>().op) ? bool_ : in[0]};
    case PrimKind::Binary:
      need_inputs(prim, in, 2);
      need_same(prim, in, 0, 2);
      return {binary_op_returns_bool(prim.get<BinaryParams>().op) ? bool_ : in[0]};
    case PrimKind::Select:
      need_inputs(prim, in, 3);
      if (in[0] != bool_) fail(prim, in, "the condition is not bool");
      need_same(prim, in, 1, 3);
      return {in[1]};
    case PrimKind::Cast:
      need_inputs(prim, in, 1);
      return {prim.get<CastParams>().to};
    case PrimKind::Concatenate:
      need_inputs(prim, in, 1);
      need_same(prim, in, 0, in.size());
      return {in[0]};
    case PrimKind::Matmul:
      need_inputs(prim, in, 2);
      need_same(prim, in, 0, 2);
      return {in[0]};
    case PrimKind::Copy:
    case PrimKind::Reshape:
    case PrimKind::Transpose:
    case PrimKind::Broadcast:
    case PrimKind::Slice:
    case PrimKind::SliceUpdate:
    case PrimKind::Pad:
    case PrimKind::Gather:
    case PrimKind::GatherElements:
    case PrimKind::GatherND:
    case PrimKind::Scatter:
    case PrimKind::ScatterND:
    case PrimKind::Sort:
    case PrimKind::Conv:
    case PrimKind::ConvTranspose:
    case PrimKind::Pool:
    case PrimKind::Attention:
      need_inputs(prim, in, 1);
      return {in[0]};
    case PrimKind::Reduce: {
      need_inputs(prim, in, 1);
      switch (prim.get<ReduceParams>().op) {
        case ReduceOp::Sum:
        case ReduceOp::Prod: return {sum_dtype(in[0])};
        case ReduceOp::Max:
        case ReduceOp::Min: return {in[0]};
        case ReduceOp::All:
        case ReduceOp::Any: return {bool_};
        case ReduceOp::Mean: return {float_compute_dtype(in[0])};
      }
      return {in[0]};
    }
    case PrimKind::Scan: {
      need_inputs(prim, in, 1);
      const ScanOp op = prim.get<ScanParams>().op;
      return {op == ScanOp::Sum || op == ScanOp::Prod ? sum_dtype(in[0]) : in[0]};
    }
    case PrimKind::ArgReduce:
    case PrimKind::ArgSort:
      need_inputs(prim, in, 1);
      return {int64};
    case PrimKind::TopK:
      need_inputs(prim, in, 1);
      return {in[0], int64};
    case PrimKind::Fused: {
      const codegen::FusedProgram& p = prim.get<FusedParams>().kernel->program;
      if (p.input_dtypes != in) fail(prim, in, "the kernel was built for inputs " + dtypes_to_string(p.input_dtypes));
      std::vector<Dtype> out;
      for (size_t o = 0; o < p.outputs.size(); ++o) out.push_back(p.output_dtype(o));
      return out;
    }
  }
  fail(prim, in, "unknown primitive");
}

}  // namespace smelt
