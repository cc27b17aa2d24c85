// CUDA kernels for the element-wise primitives (Unary, Binary, Select, Cast), Copy, Full, Arange.
//
// Each kernel is generated as source for its exact op, dtypes and layout and built by NVRTC
// (compiler.cpp). Two layouts: *flat*, where every input is contiguous or one broadcast value
// (4 elements per thread, loads issued before the stores so in-place outputs stay correct),
// *rows*, where the collapsed layout has two axes (a broadcast row or column, a transpose): a
// block takes 1024 elements of one row, so a thread finds its row and column with one division
// instead of a 64-bit division and modulo per axis and element; and *strided*, where collapsed
// shape and strides are passed and each thread decomposes its index. Outputs are always
// row-major.
#include <cstring>
#include <string>

#include "smelt/errors.h"
#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/elementwise_sources.h"
#include "src/backend/cuda/kernels.h"
#include "src/codegen/cuda_emitter.h"
#include "src/codegen/fused_program.h"
#include "src/codegen/kernel_params.h"
#include "src/backend/cpu/kernel_utils.h"

namespace smelt::cuda {

namespace {

/// Mirrors the device struct EwArgs of element-wise kernels.
struct EwArgs {
  uint64_t in[3] = {};
  uint64_t out = 0;
  int64_t n = 0;
  Layout layout;
};

const char* kEwArgsSource = "struct EwArgs { u64 in[3]; u64 out; i64 n; Layout L; };\n";

bool all_zero(const Strides& s) {
  for (auto v : s)
    if (v != 0) return false;
  return true;
}

/// 1: contiguous; 0: one value broadcast; -1: needs the strided path.
int flat_kind(const detail::Node& n) {
  if (is_row_contiguous(n.shape, n.strides)) return 1;
  if (all_zero(n.strides)) return 0;
  return -1;
}

constexpr unsigned kBlock = 256;
constexpr int kPerThread = 4;

/// `expr` with each input name v<i> indexed as v<i>[j] (names are v0..v2, never prefixes of one
/// another).
std::string indexed_expr(const std::string& expr, size_t inputs) {
  std::string e = expr;
  for (size_t i = 0; i < inputs; ++i) {
    const std::string from = "v" + std::to_string(i);
    for (size_t pos = e.find(from); pos != std::string::npos; pos = e.find(from, pos + from.size() + 3))
      e.replace(pos, from.size(), from + "[j]");
  }
  return e;
}

}  // namespace

std::string elementwise_rows_source(const std::vector<std::string>& types, const std::string& out_type,
                                    const std::string& expr) {
  std::string b = kEwArgsSource;
  b += "extern \"C\" __global__ void k(EwArgs a) {\n"
       "  const i64 cols = a.L.shape[1], tiles = (cols + 1023) / 1024;\n"
       "  const i64 blk = bid(), row = blk / tiles;\n"
       "  if (row >= a.L.shape[0]) return;\n"
       "  const i64 c0 = (blk - row * tiles) * 1024 + threadIdx.x;\n";
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string id = std::to_string(i);
    b += "  const " + types[i] + "* x" + id + " = (const " + types[i] + "*)a.in[" + id + "] + row * a.L.st[" + id +
         "][0];\n  const i64 s" + id + " = a.L.st[" + id + "][1];\n  " + types[i] + " v" + id + "[4];\n";
  }
  b += "  " + out_type + "* y = (" + out_type + "*)a.out + row * cols;\n";
  b += "  #pragma unroll\n  for (int j = 0; j < 4; ++j) {\n    const i64 c = c0 + j * 256;\n    if (c < cols) {\n";
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string id = std::to_string(i);
    b += "      v" + id + "[j] = x" + id + "[c * s" + id + "];\n";
  }
  b += "    }\n  }\n  #pragma unroll\n  for (int j = 0; j < 4; ++j) {\n    const i64 c = c0 + j * 256;\n"
       "    if (c < cols) y[c] = " + indexed_expr(expr, types.size()) + ";\n  }\n}\n";
  return b;
}

const char* device_type(Dtype dtype) { return codegen::cuda_type_name(dtype); }

const char* bits_type(Dtype dtype) {
  switch (size_of(dtype)) {
    case 1: return "u8";
    case 2: return "u16";
    case 4: return "u32";
    default: return "u64";
  }
}

DeviceState& state_of(const Array& a) { return device_state(a.device().index); }

void alloc_output(Array& out) {
  auto& n = out.node();
  n.buffer = allocator(n.device).allocate(static_cast<size_t>(n.size()) * n.itemsize());
  n.strides = row_major_strides(n.shape);
  n.offset = 0;
}

Layout collapse_layout(const Shape& shape, const std::vector<const Strides*>& strides, const std::string& what) {
  Layout l;
  const size_t k = strides.size();
  int64_t nd = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    bool merge = nd > 0;
    for (size_t o = 0; o < k && merge; ++o) merge = l.st[o][nd - 1] == (*strides[o])[i] * shape[i];
    if (merge) {
      l.shape[nd - 1] *= shape[i];
      for (size_t o = 0; o < k; ++o) l.st[o][nd - 1] = (*strides[o])[i];
      continue;
    }
    if (nd == kMaxDims)
      throw UnsupportedError(what + ": CUDA kernels take at most " + std::to_string(kMaxDims) +
                             " non-mergeable axes, shape " + shape_to_string(shape) + " has more");
    l.shape[nd] = shape[i];
    for (size_t o = 0; o < k; ++o) l.st[o][nd] = (*strides[o])[i];
    ++nd;
  }
  l.nd = nd;
  return l;
}

size_t EwKernelParams::hash() const {
  size_t h = std::hash<std::string>()(expr);
  for (const auto& t : in_types) h = codegen::hash_mix(h, std::hash<std::string>()(t));
  h = codegen::hash_mix(h, std::hash<std::string>()(out_type));
  h = codegen::hash_mix(h, std::hash<std::string>()(mode));
  return codegen::hash_mix(h, std::hash<std::string>()(label));
}

std::string EwKernelParams::name() const {
  std::string n = "ew|" + label + "|";
  for (const auto& t : in_types) n += t + ",";
  return n + out_type + "|" + mode;
}

std::string EwKernelParams::source() const {
  if (mode == "rows") return elementwise_rows_source(in_types, out_type, expr);
  const bool flat = mode != "strided";
  std::string b = kEwArgsSource;
  b += "extern \"C\" __global__ void k(EwArgs a) {\n";
  for (size_t i = 0; i < in_types.size(); ++i)
    b += "  const " + in_types[i] + "* x" + std::to_string(i) + " = (const " + in_types[i] + "*)a.in[" +
         std::to_string(i) + "];\n";
  b += "  " + out_type + "* y = (" + out_type + "*)a.out;\n";
  if (flat) {
    b += "  const i64 base = bid() * (i64)(blockDim.x * " + std::to_string(kPerThread) + ") + threadIdx.x;\n";
    for (size_t i = 0; i < in_types.size(); ++i) b += "  " + in_types[i] + " v" + std::to_string(i) + "[" + std::to_string(kPerThread) + "];\n";
    b += "  #pragma unroll\n  for (int j = 0; j < " + std::to_string(kPerThread) +
         "; ++j) {\n    const i64 i = base + (i64)j * blockDim.x;\n    if (i < a.n) {\n";
    for (size_t i = 0; i < in_types.size(); ++i) {
      const std::string id = std::to_string(i);
      b += "      v" + id + "[j] = x" + id + (mode[i] == 'c' ? "[i];\n" : "[0];\n");
    }
    b += "    }\n  }\n  #pragma unroll\n  for (int j = 0; j < " + std::to_string(kPerThread) +
         "; ++j) {\n    const i64 i = base + (i64)j * blockDim.x;\n    if (i < a.n) {\n";
    b += "      y[i] = " + indexed_expr(expr, in_types.size()) + ";\n    }\n  }\n}\n";
  } else {
    b += "  const i64 i = gid();\n  if (i >= a.n) return;\n  i64 r = i";
    for (size_t i = 0; i < in_types.size(); ++i) b += ", o" + std::to_string(i) + " = 0";
    b += ";\n  for (int d = (int)a.L.nd - 1; d >= 0; --d) {\n    const i64 c = r % a.L.shape[d];\n    r /= a.L.shape[d];\n";
    for (size_t i = 0; i < in_types.size(); ++i)
      b += "    o" + std::to_string(i) + " += c * a.L.st[" + std::to_string(i) + "][d];\n";
    b += "  }\n";
    for (size_t i = 0; i < in_types.size(); ++i) {
      const std::string id = std::to_string(i);
      b += "  const " + in_types[i] + " v" + id + " = x" + id + "[o" + id + "];\n";
    }
    b += "  y[i] = " + expr + ";\n}\n";
  }
  return b;
}

void run_elementwise(const std::string& key, const std::vector<Array>& inputs, Array& out, const std::string& expr,
                     const std::string& what) {
  if (!out.node().buffer) alloc_output(out);
  const int64_t n = out.size();
  if (n == 0) return;
  DeviceState& s = state_of(out);
  EwArgs args;
  args.out = dptr(out);
  args.n = n;
  std::string mode;
  bool flat = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.in[i] = dptr(inputs[i]);
    const int f = flat_kind(inputs[i].node());
    if (f < 0) flat = false;
    mode += f == 1 ? 'c' : (f == 0 ? 's' : 'x');
  }
  std::vector<std::string> types;
  for (auto& in : inputs) types.push_back(device_type(in.dtype()));
  const std::string out_type = device_type(out.dtype());
  if (!flat) {
    // Walk the inputs' shape (a reshaping copy has another output shape, the same size): the
    // row-major output is written in the same linear order.
    std::vector<const Strides*> st;
    for (auto& in : inputs) st.push_back(&in.node().strides);
    args.layout = collapse_layout(inputs[0].shape(), st, what);
    mode = args.layout.nd == 2 && kBlock == 256 ? "rows" : "strided";
  }
  const EwKernelParams params{key, expr, std::move(types), out_type, mode};
  const Kernel fn = get_kernel(s.index, params, what);
  const uint64_t grid = flat              ? blocks_for(n, kBlock * kPerThread)
                        : mode == "rows" ? static_cast<uint64_t>(args.layout.shape[0]) *
                                               blocks_for(args.layout.shape[1], kBlock * kPerThread)
                                         : blocks_for(n, kBlock);
  launch(s, fn, grid, kBlock, &args, what);
}

void copy_to_contiguous(const Array& in, Array& out) {
  if (!out.node().buffer) alloc_output(out);
  const auto& n = in.node();
  const size_t bytes = static_cast<size_t>(n.size()) * n.itemsize();
  if (bytes == 0) return;
  if (is_row_contiguous(n.shape, n.strides)) {
    DeviceState& s = state_of(out);
    check(driver()->cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(dptr(out)), static_cast<CUdeviceptr>(dptr(in)), bytes,
                                      current_stream(s)),
          "cuMemcpyDtoDAsync", "Copy");
    return;
  }
  run_elementwise("copy", {in}, out, "v0", "Copy");
}

// ---- Full, Arange ------------------------------------------------------------------------------

void eval_full(const FullParams& p, Array& out) {
  alloc_output(out);
  uint64_t bits = 0;
  p.value.cast(out.dtype()).store(&bits);
  fill_bits(out, bits);
}

void fill_bits(Array& out, uint64_t bits) {
  const int64_t n = out.size();
  if (n == 0) return;
  DeviceState& s = state_of(out);
  const CUdeviceptr d = static_cast<CUdeviceptr>(dptr(out));
  const DriverApi& api = *driver();
  switch (size_of(out.dtype())) {
    case 1: check(api.cuMemsetD8Async(d, static_cast<unsigned char>(bits), static_cast<size_t>(n), current_stream(s)), "cuMemsetD8Async", "Full"); return;
    case 2: check(api.cuMemsetD16Async(d, static_cast<unsigned short>(bits), static_cast<size_t>(n), current_stream(s)), "cuMemsetD16Async", "Full"); return;
    case 4: check(api.cuMemsetD32Async(d, static_cast<unsigned>(bits), static_cast<size_t>(n), current_stream(s)), "cuMemsetD32Async", "Full"); return;
    default: break;
  }
  struct FillArgs {
    uint64_t out;
    int64_t n;
    uint64_t value;
  } args{dptr(out), n, bits};
  const Kernel fn = get_kernel(s.index, "fill64", [] {
    return std::string(
        "struct FillArgs { u64 out; i64 n; u64 value; };\n"
        "extern \"C\" __global__ void k(FillArgs a) { const i64 i = gid(); if (i < a.n) ((u64*)a.out)[i] = a.value; }\n");
  }, "Full");
  launch(s, fn, blocks_for(n, 256), 256, &args, "Full");
}

void eval_arange(const ArangeParams& p, Array& out) {
  alloc_output(out);
  const int64_t n = out.size();
  if (n == 0) return;
  DeviceState& s = state_of(out);
  const Dtype dt = out.dtype();
  const std::string t = device_type(dt);
  // Integers count exactly when start and step are integers (as the CPU kernel does).
  const int64_t istart = static_cast<int64_t>(p.start), istep = static_cast<int64_t>(p.step);
  const bool exact = is_integral(dt) && static_cast<double>(istart) == p.start && static_cast<double>(istep) == p.step;
  struct ArangeArgs {
    uint64_t out;
    int64_t n;
    double start, step;
    int64_t istart, istep;
  } args{dptr(out), n, p.start, p.step, istart, istep};
  const Kernel fn = get_kernel(s.index, std::string("arange|") + t + (exact ? "|exact" : "|float"), [&] {
    std::string b =
        "struct ArangeArgs { u64 out; i64 n; double start, step; i64 istart, istep; };\n"
        "extern \"C\" __global__ void k(ArangeArgs a) {\n  const i64 i = gid();\n  if (i >= a.n) return;\n";
    if (exact)
      b += "  ((" + t + "*)a.out)[i] = (" + t + ")(u64)((u64)a.istart + (u64)i * (u64)a.istep);\n}\n";
    else
      b += "  ((" + t + "*)a.out)[i] = cvt<" + t + ", double>(a.start + (double)i * a.step);\n}\n";
    return b;
  }, "Arange");
  launch(s, fn, blocks_for(n, 256), 256, &args, "Arange");
}

// ---- Unary, Binary, Select, Cast, Copy ---------------------------------------------------------

namespace {

[[noreturn]] void no_kernel(const std::string& what, Dtype dtype) {
  throw DtypeError(what + ": no CUDA kernel for dtype " + dtype_name(dtype));
}

/// Reuses the input's buffer for the output when nothing else sees it (as the CPU kernels do).
void maybe_donate(Array& out, const Array& in) {
  if (in.device() == out.device()) cpu::try_donate(out, in);
}

/// An instruction of `kind` giving `dtype` (operands and fields filled by the caller).
codegen::Instr instr(codegen::InstrKind kind, Dtype dtype) {
  codegen::Instr i{};
  i.kind = kind;
  i.dtype = dtype;
  return i;
}

/// One element-wise instruction `op` over `inputs` as a fused program (its operands filled in
/// here), run in a flat layout by run_flat_instruction: 16-byte vectors, broadcast rows and
/// columns read in place. False when an input needs the rows or strided layouts below.
bool run_as_program(codegen::Instr op, const std::vector<Array>& inputs, Array& out, const std::string& what) {
  codegen::FusedProgram p;
  op.operands.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    p.input_dtypes.push_back(inputs[i].dtype());
    codegen::Instr in = instr(codegen::InstrKind::Input, inputs[i].dtype());
    in.index = static_cast<int>(i);
    p.instrs.push_back(in);
    op.operands.push_back(static_cast<int>(i));
  }
  op.dtype = out.dtype();
  p.instrs.push_back(op);
  p.outputs = {static_cast<int>(inputs.size())};
  return run_flat_instruction(std::move(p), inputs, out, what);
}

}  // namespace

bool unary_has_kernel(UnaryOp op, Dtype dt) {
  const bool f = is_floating(dt), i = is_integral(dt), b = dt == Dtype::Bool;
  bool ok = false;
  switch (op) {
#define SMELT_CASE(name, accepted) \
  case UnaryOp::name:                \
    ok = accepted;                 \
    break;
    SMELT_CASE(Abs, f || i)
    SMELT_CASE(Negative, f || i)
    SMELT_CASE(Sign, f || i)
    SMELT_CASE(Square, f || i)
    SMELT_CASE(Reciprocal, f)
    SMELT_CASE(Sqrt, f)
    SMELT_CASE(Rsqrt, f)
    SMELT_CASE(Exp, f)
    SMELT_CASE(Exp2, f)
    SMELT_CASE(Expm1, f)
    SMELT_CASE(Log, f)
    SMELT_CASE(Log2, f)
    SMELT_CASE(Log10, f)
    SMELT_CASE(Log1p, f)
    SMELT_CASE(Sin, f)
    SMELT_CASE(Cos, f)
    SMELT_CASE(Tan, f)
    SMELT_CASE(Asin, f)
    SMELT_CASE(Acos, f)
    SMELT_CASE(Atan, f)
    SMELT_CASE(Sinh, f)
    SMELT_CASE(Cosh, f)
    SMELT_CASE(Tanh, f)
    SMELT_CASE(Asinh, f)
    SMELT_CASE(Acosh, f)
    SMELT_CASE(Atanh, f)
    SMELT_CASE(Erf, f)
    SMELT_CASE(ErfInv, f)
    SMELT_CASE(Sigmoid, f)
    SMELT_CASE(Relu, f || i)
    SMELT_CASE(Floor, f)
    SMELT_CASE(Ceil, f)
    SMELT_CASE(Round, f)
    SMELT_CASE(IsNan, true)
    SMELT_CASE(IsInf, true)
    SMELT_CASE(IsFinite, true)
    SMELT_CASE(LogicalNot, true)
    SMELT_CASE(BitwiseNot, i || b)
#undef SMELT_CASE
  }
  return ok;
}

void eval_unary(const UnaryParams& p, const std::vector<Array>& inputs, Array& out) {
  const Dtype dt = inputs[0].dtype();
  const bool ok = unary_has_kernel(p.op, dt);
  const std::string what = std::string("Unary(") + unary_op_name(p.op) + ")";
  if (!ok) no_kernel(what, dt);
  codegen::Instr op = instr(codegen::InstrKind::Unary, out.dtype());
  op.unary = p.op;
  if (run_as_program(op, inputs, out, what)) return;
  const char* fn = scalar_fn_name(p.op);
  if (out.dtype() == dt) maybe_donate(out, inputs[0]);
  run_elementwise(std::string("unary_") + fn, inputs, out,
                  std::string("smelt::scalar::") + fn + "<" + device_type(dt) + ">(v0)", what);
}

bool binary_has_kernel(BinaryOp op, Dtype dt) {
  const bool f = is_floating(dt), i = is_integral(dt), b = dt == Dtype::Bool;
  bool ok = false;
  switch (op) {
#define SMELT_CASE(name, accepted) \
  case BinaryOp::name:                \
    ok = accepted;                 \
    break;
    SMELT_CASE(Add, true)
    SMELT_CASE(Subtract, f || i)
    SMELT_CASE(Multiply, true)
    SMELT_CASE(Divide, f)
    SMELT_CASE(FloorDivide, f || i)
    SMELT_CASE(Remainder, f || i)
    SMELT_CASE(Fmod, f || i)
    SMELT_CASE(Power, f || i)
    SMELT_CASE(Maximum, true)
    SMELT_CASE(Minimum, true)
    SMELT_CASE(Atan2, f)
    SMELT_CASE(Equal, true)
    SMELT_CASE(NotEqual, true)
    SMELT_CASE(Less, true)
    SMELT_CASE(LessEqual, true)
    SMELT_CASE(Greater, true)
    SMELT_CASE(GreaterEqual, true)
    SMELT_CASE(LogicalAnd, true)
    SMELT_CASE(LogicalOr, true)
    SMELT_CASE(LogicalXor, true)
    SMELT_CASE(BitwiseAnd, i || b)
    SMELT_CASE(BitwiseOr, i || b)
    SMELT_CASE(BitwiseXor, i || b)
    SMELT_CASE(LeftShift, i)
    SMELT_CASE(RightShift, i)
#undef SMELT_CASE
  }
  return ok;
}

void eval_binary(const BinaryParams& p, const std::vector<Array>& inputs, Array& out) {
  const Dtype dt = inputs[0].dtype();
  const bool ok = binary_has_kernel(p.op, dt);
  const std::string what = std::string("Binary(") + binary_op_name(p.op) + ")";
  if (!ok) no_kernel(what, dt);
  codegen::Instr op = instr(codegen::InstrKind::Binary, out.dtype());
  op.binary = p.op;
  if (run_as_program(op, inputs, out, what)) return;
  const char* fn = scalar_fn_name(p.op);
  if (out.dtype() == dt) {
    maybe_donate(out, inputs[0]);
    if (!out.node().buffer) maybe_donate(out, inputs[1]);
  }
  run_elementwise(std::string("binary_") + fn, inputs, out,
                  std::string("smelt::scalar::") + fn + "<" + device_type(dt) + ">(v0, v1)", what);
}

void eval_select(const std::vector<Array>& inputs, Array& out) {
  if (run_as_program(instr(codegen::InstrKind::Select, out.dtype()), inputs, out, "Select")) return;
  // The chosen value's bits move unchanged (no arithmetic on them).
  if (inputs[1].dtype() == out.dtype()) maybe_donate(out, inputs[1]);
  run_elementwise("select", {inputs[0], inputs[1], inputs[2]}, out, "(v0 ? v1 : v2)", "Select");
}

void eval_cast(const CastParams& p, const std::vector<Array>& inputs, Array& out) {
  if (run_as_program(instr(codegen::InstrKind::Cast, p.to), inputs, out, "Cast")) return;
  const std::string from = device_type(inputs[0].dtype()), to = device_type(p.to);
  if (size_of(inputs[0].dtype()) == size_of(p.to)) maybe_donate(out, inputs[0]);
  run_elementwise("cast", inputs, out, "cvt<" + to + ", " + from + ">(v0)", "Cast");
}

void eval_copy(const std::vector<Array>& inputs, Array& out) {
  alloc_output(out);
  copy_to_contiguous(inputs[0], out);
}

}  // namespace smelt::cuda
