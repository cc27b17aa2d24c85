// Emits C++ for a fused program: the same scalar functions as the CPU kernels, so results match bit for bit.
#include "src/codegen/cpp_emitter.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <algorithm>
#include <sstream>

#include "smelt/errors.h"
#include "src/codegen/embedded_sources.h"
#include "src/codegen/row_plan.h"

namespace smelt::codegen {

const char* cpp_type(Dtype d) {
  switch (d) {
    case Dtype::Bool: return "bool";
    case Dtype::Int8: return "int8_t";
    case Dtype::Int16: return "int16_t";
    case Dtype::Int32: return "int32_t";
    case Dtype::Int64: return "int64_t";
    case Dtype::UInt8: return "uint8_t";
    case Dtype::UInt16: return "uint16_t";
    case Dtype::UInt32: return "uint32_t";
    case Dtype::UInt64: return "uint64_t";
    case Dtype::Float16: return "smelt::float16_t";
    case Dtype::BFloat16: return "smelt::bfloat16_t";
    case Dtype::Float32: return "float";
    case Dtype::Float64: return "double";
  }
  return "?";
}

std::string cpp_literal(const Scalar& s) {
  char buf[96];
  switch (s.dtype) {
    case Dtype::Bool: return s.u ? "true" : "false";
    case Dtype::Int8:
    case Dtype::Int16:
    case Dtype::Int32:
    case Dtype::Int64:
      // Through the unsigned bits: the minimum has no literal of its own.
      std::snprintf(buf, sizeof buf, "static_cast<%s>(static_cast<int64_t>(0x%llxull))", cpp_type(s.dtype),
                    static_cast<unsigned long long>(s.i));
      return buf;
    case Dtype::UInt8:
    case Dtype::UInt16:
    case Dtype::UInt32:
    case Dtype::UInt64:
      std::snprintf(buf, sizeof buf, "static_cast<%s>(0x%llxull)", cpp_type(s.dtype),
                    static_cast<unsigned long long>(s.u));
      return buf;
    case Dtype::Float16:
      std::snprintf(buf, sizeof buf, "smelt::float16_t::from_bits(0x%04x)", double_to_half(s.f));
      return buf;
    case Dtype::BFloat16:
      std::snprintf(buf, sizeof buf, "smelt::bfloat16_t::from_bits(0x%04x)", double_to_bfloat16(s.f));
      return buf;
    case Dtype::Float32: {
      float f = static_cast<float>(s.f);
      if (std::isfinite(f)) {
        std::snprintf(buf, sizeof buf, "%af", static_cast<double>(f));
      } else {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        std::snprintf(buf, sizeof buf, "std::bit_cast<float>(0x%08xu)", bits);
      }
      return buf;
    }
    case Dtype::Float64: {
      if (std::isfinite(s.f)) {
        std::snprintf(buf, sizeof buf, "%a", s.f);
      } else {
        std::snprintf(buf, sizeof buf, "std::bit_cast<double>(0x%016llxull)", static_cast<unsigned long long>(s.u));
      }
      return buf;
    }
  }
  return "?";
}

namespace {

// `lhs = v;`, through the bits for the 16-bit floats: GCC does not vectorize a loop that stores
// a struct (a copy of bfloat16_t is an aggregate copy); a store of its one member vectorizes.
std::string store(Dtype d, const std::string& lhs, const std::string& v) {
  if (d == Dtype::Float16 || d == Dtype::BFloat16) return lhs + ".bits = " + v + ".bits;";
  return lhs + " = " + v + ";";
}

// Constants, once per call before the loops. Float constants are read through a volatile so
// the compiler cannot fold them into the math: it would rewrite pow(x, 2) as x * x and
// pow(x, -1) as 1 / x, which round differently from the C library's pow that the unfused
// kernel calls with the same value read from memory.
void emit_constants(std::ostringstream& os, const FusedProgram& p) {
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr& in = p.instrs[i];
    if (in.kind != InstrKind::Constant) continue;
    switch (in.dtype) {
      case Dtype::Float32:
      case Dtype::Float64:
        os << "  volatile " << cpp_type(in.dtype) << " k" << i << " = " << cpp_literal(in.value) << ";\n";
        os << "  const " << cpp_type(in.dtype) << " v" << i << " = k" << i << ";\n";
        break;
      case Dtype::Float16:
      case Dtype::BFloat16: {
        const uint16_t bits = in.dtype == Dtype::Float16 ? double_to_half(in.value.f) : double_to_bfloat16(in.value.f);
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%04x", bits);
        os << "  volatile uint16_t k" << i << " = " << hex << ";\n";
        os << "  const " << cpp_type(in.dtype) << " v" << i << " = " << cpp_type(in.dtype) << "::from_bits(k" << i
           << ");\n";
        break;
      }
      case Dtype::Bool:
      case Dtype::Int8:
      case Dtype::Int16:
      case Dtype::Int32:
      case Dtype::Int64:
      case Dtype::UInt8:
      case Dtype::UInt16:
      case Dtype::UInt32:
      case Dtype::UInt64:
        // Integer math is exact: folding cannot change a result, and division by a known
        // constant becomes a multiply.
        os << "  const " << cpp_type(in.dtype) << " v" << i << " = " << cpp_literal(in.value) << ";\n";
        break;
    }
  }
}

// The scalar function of a binary instruction: maximum and minimum with a float operand that is
// a constant other than NaN take the one-instruction forms (scalar_math.h, the same bits).
std::string binary_fn(const FusedProgram& p, const Instr& in) {
  auto not_nan_constant = [&](int k) {
    const Instr& o = p.instrs[static_cast<size_t>(in.operands[static_cast<size_t>(k)])];
    return o.kind == InstrKind::Constant && is_floating(o.dtype) && !std::isnan(o.value.as_double());
  };
  std::string name = scalar_fn_name(in.binary);
  if (in.binary == BinaryOp::Maximum || in.binary == BinaryOp::Minimum) {
    if (not_nan_constant(1)) name += "_b_not_nan";
    else if (not_nan_constant(0)) name += "_a_not_nan";
  }
  return name;
}

// The body computing every instruction for one element; `load(k)` reads input k.
template <class Load>
void emit_body(std::ostringstream& os, const FusedProgram& p, const char* indent, Load load) {
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr& in = p.instrs[i];
    if (in.kind == InstrKind::Constant) continue;  // defined before the loops
    os << indent << "const " << cpp_type(in.dtype) << " v" << i << " = ";
    auto operand_type = [&](size_t k) { return cpp_type(p.instrs[in.operands[k]].dtype); };
    switch (in.kind) {
      case InstrKind::Input: os << load(in.index); break;
      case InstrKind::Constant: break;
      case InstrKind::Unary:
        os << "smelt::scalar::" << scalar_fn_name(in.unary) << "<" << operand_type(0) << ">(v" << in.operands[0] << ")";
        break;
      case InstrKind::Binary:
        os << "smelt::scalar::" << binary_fn(p, in) << "<" << operand_type(0) << ">(v" << in.operands[0] << ", v"
           << in.operands[1] << ")";
        break;
      case InstrKind::Select:
        os << "smelt::scalar::select(v" << in.operands[0] << ", v" << in.operands[1] << ", v" << in.operands[2] << ")";
        break;
      case InstrKind::Cast:
        os << "smelt::convert<" << cpp_type(in.dtype) << ", " << operand_type(0) << ">(v" << in.operands[0] << ")";
        break;
      case InstrKind::Reduce: throw UnsupportedError("fuse: a reduction in an element-wise program");
    }
    os << ";\n";
  }
}

// One instruction's right-hand side for a row program (inputs and reductions excluded).
std::string row_expr(const FusedProgram& p, int i) {
  const Instr& in = p.instrs[i];
  std::ostringstream os;
  auto operand_type = [&](size_t k) { return cpp_type(p.instrs[in.operands[k]].dtype); };
  switch (in.kind) {
    case InstrKind::Input:
    case InstrKind::Constant:
    case InstrKind::Reduce: break;
    case InstrKind::Unary:
      os << "smelt::scalar::" << scalar_fn_name(in.unary) << "<" << operand_type(0) << ">(v" << in.operands[0] << ")";
      break;
    case InstrKind::Binary:
      os << "smelt::scalar::" << binary_fn(p, in) << "<" << operand_type(0) << ">(v" << in.operands[0] << ", v"
         << in.operands[1] << ")";
      break;
    case InstrKind::Select:
      os << "smelt::scalar::select(v" << in.operands[0] << ", v" << in.operands[1] << ", v" << in.operands[2] << ")";
      break;
    case InstrKind::Cast:
      os << "smelt::convert<" << cpp_type(in.dtype) << ", " << operand_type(0) << ">(v" << in.operands[0] << ")";
      break;
  }
  return os.str();
}

// A row program: per row, one pass per reduction (its prologue into a row buffer, then the
// shared row order of reduce_order.h), per-row values once, then the epilogue pass writing the
// per-element outputs. Values a later pass needs again are kept in row buffers.
std::string emit_cpu_row_kernel(const FusedProgram& p) {
  std::ostringstream os;
  os << "// smelt fused CPU row kernel (generated; shapes are arguments, not part of the source)\n";
  os << "// " << describe_program(p) << "\n";
  os << embedded_kernel_preamble();
  const size_t nin = p.input_dtypes.size(), nout = p.outputs.size();
  const RowPlan plan = plan_row_program(p, true);
  os << "\nextern \"C\" void " << kCpuKernelSymbol
     << "(int64_t row_begin, int64_t row_end, const smelt::reduce_order::RowArgs* a) {\n";
  os << "  const int64_t n = a->n;\n";
  emit_constants(os, p);
  // Which inputs are read per element (a row pointer) and which once per row.
  std::vector<char> element_input(nin, 0);
  for (const Instr& in : p.instrs)
    if (in.kind == InstrKind::Input && !in.per_row) element_input[in.index] = 1;
  for (size_t k = 0; k < nin; ++k)
    if (element_input[k])
      os << "  auto g" << k << " = smelt::reduce_order::row_buffer<" << cpp_type(p.input_dtypes[k]) << ">(n);\n";
  for (size_t i = 0; i < p.instrs.size(); ++i)
    if (plan.keep[i]) os << "  auto c" << i << " = smelt::reduce_order::row_buffer<" << cpp_type(p.instrs[i].dtype) << ">(n);\n";
  for (size_t o = 0; o < nout; ++o)
    os << "  " << cpp_type(p.output_dtype(o)) << "* out" << o << " = reinterpret_cast<" << cpp_type(p.output_dtype(o))
       << "*>(a->ptr[" << nin + o << "]);\n";
  os << "  for (int64_t r = row_begin; r < row_end; ++r) {\n";
  for (size_t k = 0; k < nin; ++k)
    if (element_input[k]) {
      os << "    const " << cpp_type(p.input_dtypes[k]) << "* in" << k << " = smelt::reduce_order::row_of<"
         << cpp_type(p.input_dtypes[k]) << ">(*a, " << k << ", r, g" << k << ".get());\n";
      os << "    const char* nx" << k << " = smelt::reduce_order::next_row<" << cpp_type(p.input_dtypes[k]) << ">(*a, " << k
         << ", r, row_end, in" << k << ");\n";
    }
  // A pointer to the row of a per-element value: an input's row, or its kept buffer.
  auto row_pointer = [&](int i) {
    const Instr& in = p.instrs[i];
    if (in.kind == InstrKind::Input) return "in" + std::to_string(in.index);
    return "c" + std::to_string(i) + ".get()";
  };
  // A pass whose reduction reads a kept buffer or an input's row directly has no loop.
  auto has_loop = [&](const RowLoop& loop) {
    return !(loop.reduce >= 0 &&
             (loop.compute.empty() || p.instrs[p.instrs[loop.reduce].operands[0]].kind == InstrKind::Input));
  };
  // Prefetching (no effect on any value): the first loop of a row fetches the next row of each
  // per-element input, and the last loop before the epilogue fetches the row's output lines for
  // writing, a chunk at a time, so that memory streams while the passes compute on the row in
  // cache (the reductions' own reads and the epilogue's stores then hit).
  int first_loop = -1, last_before_epilogue = -1;
  for (size_t l = 0; l < plan.loops.size(); ++l)
    if (has_loop(plan.loops[l])) {
      if (first_loop < 0) first_loop = static_cast<int>(l);
      if (plan.loops[l].reduce >= 0) last_before_epilogue = static_cast<int>(l);
    }
  int loop_index = 0;
  auto emit_loop = [&](const RowLoop& loop, const std::function<void(const std::string&)>& tail) {
    const int index = loop_index++;
    if (!has_loop(loop)) return;
    std::ostringstream fetch;
    if (index == first_loop)
      for (size_t k = 0; k < nin; ++k)
        if (element_input[k])
          fetch << "      smelt::reduce_order::prefetch_span(nx" << k << ", jb * " << size_of(p.input_dtypes[k])
                << ", je * " << size_of(p.input_dtypes[k]) << ", false);\n";
    if (index == last_before_epilogue)
      for (size_t o = 0; o < nout; ++o)
        if (!p.instrs[p.outputs[o]].per_row)
          fetch << "      smelt::reduce_order::prefetch_span(reinterpret_cast<const char*>(out" << o << " + r * n), jb * "
                << size_of(p.output_dtype(o)) << ", je * " << size_of(p.output_dtype(o)) << ", true);\n";
    const bool chunked = !fetch.str().empty();
    if (chunked) {
      os << "    for (int64_t jb = 0; jb < n; jb += smelt::reduce_order::kPrefetchChunk) {\n";
      os << "      const int64_t je = n - jb < smelt::reduce_order::kPrefetchChunk ? n : jb + smelt::reduce_order::kPrefetchChunk;\n";
      os << fetch.str();
      os << "#pragma GCC ivdep\n    for (int64_t j = jb; j < je; ++j) {\n";
    } else {
      os << "#pragma GCC ivdep\n    for (int64_t j = 0; j < n; ++j) {\n";
    }
    // Kept values of earlier passes that this pass reads.
    std::vector<char> read(p.instrs.size(), 0);
    for (int i : loop.compute)
      for (int o : p.instrs[i].operands)
        if (!p.instrs[o].per_row && plan.keep[o] && std::find(loop.compute.begin(), loop.compute.end(), o) == loop.compute.end())
          read[o] = 1;
    if (loop.reduce < 0)
      for (int o : p.outputs)
        if (!p.instrs[o].per_row && plan.keep[o] && std::find(loop.compute.begin(), loop.compute.end(), o) == loop.compute.end())
          read[o] = 1;
    for (size_t i = 0; i < p.instrs.size(); ++i)
      if (read[i]) os << "      const " << cpp_type(p.instrs[i].dtype) << " v" << i << " = c" << i << "[j];\n";
    for (int i : loop.compute) {
      const Instr& in = p.instrs[i];
      os << "      const " << cpp_type(in.dtype) << " v" << i << " = ";
      if (in.kind == InstrKind::Input) os << "in" << in.index << "[j]";
      else os << row_expr(p, i);
      os << ";\n";
      if (plan.keep[i]) os << "      " << store(in.dtype, "c" + std::to_string(i) + "[j]", "v" + std::to_string(i)) << "\n";
    }
    tail("      ");
    os << "    }\n";
    if (chunked) os << "    }\n";
  };
  size_t next_loop = 0;
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr& in = p.instrs[i];
    if (!in.per_row || in.kind == InstrKind::Constant) continue;
    if (in.kind == InstrKind::Input) {
      os << "    const " << cpp_type(in.dtype) << " v" << i << " = smelt::reduce_order::row_value<" << cpp_type(in.dtype)
         << ">(*a, " << in.index << ", r);\n";
      continue;
    }
    if (in.kind != InstrKind::Reduce) {
      os << "    const " << cpp_type(in.dtype) << " v" << i << " = " << row_expr(p, static_cast<int>(i)) << ";\n";
      continue;
    }
    const RowLoop& loop = plan.loops[next_loop++];
    SMELT_ASSERT(loop.reduce == static_cast<int>(i), "row kernel: passes out of order");
    emit_loop(loop, [](const std::string&) {});
    const Instr& operand = p.instrs[in.operands[0]];
    const char* t = cpp_type(operand.dtype);
    const ReduceOp op = in.reduce == ReduceOp::Mean ? ReduceOp::Sum : in.reduce;
    os << "    const " << cpp_type(in.dtype) << " v" << i << " = ";
    std::string call = std::string("smelt::reduce_order::reduce_row<smelt::ReduceOp::") + reduce_op_enumerator(op) + ", " +
                       t + ">(" + row_pointer(in.operands[0]) + ", n, a->rows)";
    if (in.reduce == ReduceOp::Mean)
      os << "smelt::scalar::divide<" << cpp_type(in.dtype) << ">(" << call << ", smelt::reduce_order::mean_divisor<"
         << cpp_type(in.dtype) << ">(n, " << in.ddof << "))";
    else os << call;
    os << ";\n";
  }
  SMELT_ASSERT(next_loop + 1 == plan.loops.size(), "row kernel: a pass was not emitted");
  emit_loop(plan.loops.back(), [&](const std::string& indent) {
    for (size_t o = 0; o < nout; ++o)
      if (!p.instrs[p.outputs[o]].per_row)
        os << indent << store(p.output_dtype(o), "out" + std::to_string(o) + "[r * n + j]", "v" + std::to_string(p.outputs[o]))
           << "\n";
  });
  for (size_t o = 0; o < nout; ++o)
    if (p.instrs[p.outputs[o]].per_row)
      os << "    " << store(p.output_dtype(o), "out" + std::to_string(o) + "[r]", "v" + std::to_string(p.outputs[o])) << "\n";
  os << "  }\n}\n";
  return os.str();
}

}  // namespace

std::string emit_cpu_kernel(const FusedProgram& p) {
  if (p.is_row_program()) return emit_cpu_row_kernel(p);
  std::ostringstream os;
  os << "// smelt fused CPU kernel (generated; shapes are arguments, not part of the source)\n";
  os << "// " << describe_program(p) << "\n";
  os << embedded_kernel_preamble();
  const size_t nin = p.input_dtypes.size(), nout = p.outputs.size();
  os << "\nextern \"C\" void " << kCpuKernelSymbol
     << "(int64_t begin, int64_t end, int ndim, const int64_t* shape, char* const* args, const int64_t* strides, "
        "int contiguous) {\n";
  for (size_t k = 0; k < nin; ++k)
    os << "  const " << cpp_type(p.input_dtypes[k]) << "* in" << k << " = reinterpret_cast<const "
       << cpp_type(p.input_dtypes[k]) << "*>(args[" << k << "]);\n";
  for (size_t k = 0; k < nout; ++k)
    os << "  " << cpp_type(p.output_dtype(k)) << "* out" << k << " = reinterpret_cast<"
       << cpp_type(p.output_dtype(k)) << "*>(args[" << nin + k << "]);\n";
  emit_constants(os, p);
  // Contiguous: flat indices, a loop the compiler can vectorize.
  // An output may share its buffer with an input read at the same index (the CPU kernel donates
  // input buffers), so the pointers are not __restrict; ivdep still lets the loops vectorize
  // without alias checks: no iteration reads what another one writes.
  os << "  if (contiguous) {\n#pragma GCC ivdep\n    for (int64_t i = begin; i < end; ++i) {\n";
  emit_body(os, p, "      ", [](int k) { return "in" + std::to_string(k) + "[i]"; });
  for (size_t k = 0; k < nout; ++k)
    os << "      " << store(p.output_dtype(k), "out" + std::to_string(k) + "[i]", "v" + std::to_string(p.outputs[k])) << "\n";
  os << "    }\n    return;\n  }\n";
  // Strided: walk the output's index space; runs along the last axis use each argument's stride.
  const size_t nargs = nin + nout;
  os << "  int64_t idx[16] = {0};\n  int64_t off[" << nargs << "] = {0};\n";
  os << "  int64_t rem = begin;\n";
  os << "  for (int d = ndim - 1; d >= 0; --d) {\n    idx[d] = rem % shape[d];\n    rem /= shape[d];\n";
  os << "    for (int a = 0; a < " << nargs << "; ++a) off[a] += idx[d] * strides[a * ndim + d];\n  }\n";
  os << "  const int last = ndim - 1;\n  int64_t pos = begin;\n";
  os << "  while (pos < end) {\n";
  // Short rows (a per-channel operand over the channel-blocked layout: rows of 8) would pay the
  // index update for every few elements: from the start of a row, the whole rows left along the
  // axis before the last (at least two, within [pos, end)) go as a loop over rows around the loop
  // along the row. Every element is computed as in the runs below, so the bits do not change.
  os << "    if (ndim >= 2 && idx[last] == 0) {\n"
        "      int64_t rows = shape[last - 1] - idx[last - 1];\n"
        "      if (rows > (end - pos) / shape[last]) rows = (end - pos) / shape[last];\n"
        "      if (rows >= 2) {\n";
  for (size_t a = 0; a < nargs; ++a)
    os << "        const int64_t s" << a << " = strides[" << a << " * ndim + last], t" << a << " = strides[" << a
       << " * ndim + last - 1];\n";
  os << "        for (int64_t r = 0; r < rows; ++r) {\n#pragma GCC ivdep\n          for (int64_t j = 0; j < shape[last]; ++j) {\n";
  emit_body(os, p, "            ", [](int k) {
    const std::string a = std::to_string(k);
    return "in" + a + "[off[" + a + "] + r * t" + a + " + j * s" + a + "]";
  });
  for (size_t k = 0; k < nout; ++k) {
    const std::string a = std::to_string(nin + k);
    os << "            "
       << store(p.output_dtype(k), "out" + std::to_string(k) + "[off[" + a + "] + r * t" + a + " + j * s" + a + "]",
                "v" + std::to_string(p.outputs[k]))
       << "\n";
  }
  os << "          }\n        }\n"
        "        pos += rows * shape[last];\n"
        "        idx[last - 1] += rows;\n"
        "        for (int a = 0; a < " << nargs << "; ++a) off[a] += rows * strides[a * ndim + last - 1];\n"
        "        for (int d = last - 1; d > 0 && idx[d] == shape[d]; --d) {\n          idx[d] = 0;\n          ++idx[d - 1];\n"
        "          for (int a = 0; a < " << nargs << "; ++a) off[a] += strides[a * ndim + d - 1] - shape[d] * strides[a * ndim + d];\n"
        "        }\n        continue;\n      }\n    }\n";
  os << "    int64_t run = shape[last] - idx[last];\n    if (run > end - pos) run = end - pos;\n";
  for (size_t a = 0; a < nargs; ++a)
    os << "    const int64_t s" << a << " = strides[" << a << " * ndim + last];\n";
  os << "#pragma GCC ivdep\n    for (int64_t j = 0; j < run; ++j) {\n";
  emit_body(os, p, "      ", [](int k) {
    return "in" + std::to_string(k) + "[off[" + std::to_string(k) + "] + j * s" + std::to_string(k) + "]";
  });
  for (size_t k = 0; k < nout; ++k)
    os << "      "
       << store(p.output_dtype(k), "out" + std::to_string(k) + "[off[" + std::to_string(nin + k) + "] + j * s" + std::to_string(nin + k) + "]",
                "v" + std::to_string(p.outputs[k]))
       << "\n";
  os << "    }\n    pos += run;\n    idx[last] += run;\n";
  os << "    for (int a = 0; a < " << nargs << "; ++a) off[a] += run * strides[a * ndim + last];\n";
  os << "    for (int d = last; d > 0 && idx[d] == shape[d]; --d) {\n      idx[d] = 0;\n      ++idx[d - 1];\n";
  os << "      for (int a = 0; a < " << nargs << "; ++a) off[a] += strides[a * ndim + d - 1] - shape[d] * strides[a * ndim + d];\n";
  os << "    }\n  }\n}\n";
  return os.str();
}

std::string describe_program(const FusedProgram& p) {
  std::vector<std::string> expr(p.instrs.size());
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr& in = p.instrs[i];
    auto op = [&](size_t k) { return expr[in.operands[k]]; };
    switch (in.kind) {
      case InstrKind::Input: expr[i] = "in" + std::to_string(in.index); break;
      case InstrKind::Constant: expr[i] = in.value.str(); break;
      case InstrKind::Unary: expr[i] = std::string(scalar_fn_name(in.unary)) + "(" + op(0) + ")"; break;
      case InstrKind::Binary: expr[i] = std::string(scalar_fn_name(in.binary)) + "(" + op(0) + ", " + op(1) + ")"; break;
      case InstrKind::Select: expr[i] = "where(" + op(0) + ", " + op(1) + ", " + op(2) + ")"; break;
      case InstrKind::Cast: expr[i] = std::string(dtype_name(in.dtype)) + "(" + op(0) + ")"; break;
      case InstrKind::Reduce: expr[i] = std::string(reduce_op_name(in.reduce)) + "_row(" + op(0) + ")"; break;
    }
    if (expr[i].size() > 200) expr[i] = "v" + std::to_string(i);
  }
  std::string s;
  for (size_t k = 0; k < p.outputs.size(); ++k) s += (k ? "; " : "") + expr[p.outputs[k]];
  return s;
}

}  // namespace smelt::codegen
