// The CUDA source emitter for fused GPU kernels: one SSA line per instruction of the program.
#include "src/codegen/cuda_emitter.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>

#include "smelt/errors.h"
#include "src/codegen/gpu_row_order.h"
#include "src/codegen/row_plan.h"

namespace smelt::codegen {

const char* cuda_type_name(Dtype d) {
  switch (d) {
    case Dtype::Bool: return "bool";
    case Dtype::Int8: return "i8";
    case Dtype::Int16: return "i16";
    case Dtype::Int32: return "i32";
    case Dtype::Int64: return "i64";
    case Dtype::UInt8: return "u8";
    case Dtype::UInt16: return "u16";
    case Dtype::UInt32: return "u32";
    case Dtype::UInt64: return "u64";
    case Dtype::Float16: return "f16";
    case Dtype::BFloat16: return "bf16";
    case Dtype::Float32: return "float";
    case Dtype::Float64: return "double";
  }
  return "void";
}

namespace {


std::string hex(uint64_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

std::string literal(const Instr& in, bool fast = false) {
  uint64_t bits = 0;
  in.value.cast(in.dtype).store(&bits);
  switch (in.dtype) {
    case Dtype::Bool: return bits & 1 ? "true" : "false";
    case Dtype::Float16: return std::string(fast ? "f16q" : "f16") + "{(u16)" + hex(bits & 0xffff, 4) + "}";
    case Dtype::BFloat16: return std::string(fast ? "bf16q" : "bf16") + "{(u16)" + hex(bits & 0xffff, 4) + "}";
    case Dtype::Float32: return "__uint_as_float(opaque32(" + hex(bits & 0xffffffffu, 8) + "u))";
    case Dtype::Float64: return "__longlong_as_double((long long)opaque64(" + hex(bits, 16) + "ull))";
    case Dtype::Int8:
    case Dtype::Int16:
    case Dtype::Int32:
    case Dtype::Int64:
    case Dtype::UInt8:
    case Dtype::UInt16:
    case Dtype::UInt32:
    case Dtype::UInt64: {
      const uint64_t mask = size_of(in.dtype) == 8 ? ~0ull : ((1ull << (8 * size_of(in.dtype))) - 1);
      return std::string("(") + cuda_type_name(in.dtype) + ")" + hex(bits & mask, 1) + "ull";
    }
  }
  return "0";
}

}  // namespace

// Packed and unpacked with shifts at constant positions, so everything stays in registers (an
// element array written through a uint4 pointer would go to local memory for 1- and 2-byte
// types).
const char* cuda_word_helpers_source() {
  return "template <class T> __device__ inline u64 to_bits(T v) {\n"
         "  if constexpr (tr<T>::is_half) return v.b;\n"
         "  else if constexpr (same_t<T, float>::v) return __float_as_uint(v);\n"
         "  else if constexpr (same_t<T, double>::v) return (u64)__double_as_longlong(v);\n"
         "  else if constexpr (same_t<T, bool>::v) return v ? 1u : 0u;\n"
         "  else return (u64)(typename tr<T>::unsig)v;\n}\n"
         "template <class T> __device__ inline T from_bits(u64 b) {\n"
         "  if constexpr (tr<T>::is_half) return T{(u16)b};\n"
         "  else if constexpr (same_t<T, float>::v) return __uint_as_float((u32)b);\n"
         "  else if constexpr (same_t<T, double>::v) return __longlong_as_double((long long)b);\n"
         "  else if constexpr (same_t<T, bool>::v) return (b & 0xffu) != 0;\n"
         "  else return (T)(typename tr<T>::unsig)b;\n}\n"
         "template <class T> __device__ inline T unpack(const u32* w, int j) {\n"
         "  if constexpr (sizeof(T) == 8) return from_bits<T>((u64)w[2 * j] | ((u64)w[2 * j + 1] << 32));\n"
         "  else if constexpr (sizeof(T) == 4) return from_bits<T>(w[j]);\n"
         "  else if constexpr (sizeof(T) == 2) return from_bits<T>((w[j >> 1] >> ((j & 1) * 16)) & 0xffffu);\n"
         "  else return from_bits<T>((w[j >> 2] >> ((j & 3) * 8)) & 0xffu);\n}\n"
         "template <class T> __device__ inline void pack(u32* w, int j, T v) {\n"
         "  const u64 b = to_bits(v);\n"
         "  if constexpr (sizeof(T) == 8) { w[2 * j] = (u32)b; w[2 * j + 1] = (u32)(b >> 32); }\n"
         "  else if constexpr (sizeof(T) == 4) w[j] = (u32)b;\n"
         "  else if constexpr (sizeof(T) == 2) w[j >> 1] |= (u32)b << ((j & 1) * 16);\n"
         "  else w[j >> 2] |= (u32)(b & 0xffu) << ((j & 3) * 8);\n}\n";
}

int cuda_vector_width(const FusedProgram& p, const std::string& layout) {
  if (layout == "strided") return 1;
  size_t smallest = 16;
  for (size_t i = 0; i < p.input_dtypes.size(); ++i)
    if (layout[i] == 'c' || layout[i] == 'r') smallest = std::min(smallest, size_of(p.input_dtypes[i]));
  for (size_t o = 0; o < p.outputs.size(); ++o) smallest = std::min(smallest, size_of(p.output_dtype(o)));
  return static_cast<int>(16 / smallest);
}

namespace {

/// The device type of a value: with `fast`, the 16-bit floats are the preamble's f16q/bf16q
/// (hardware conversions, NaN bits not the CPU's; see emit_cuda_kernel's NaN-optimistic pass).
const char* cuda_value_type(Dtype d, bool fast) {
  if (fast && d == Dtype::Float16) return "f16q";
  if (fast && d == Dtype::BFloat16) return "bf16q";
  return cuda_type_name(d);
}

// One instruction's right-hand side (inputs, constants and reductions are emitted elsewhere);
// values are named <prefix><index>.
std::string cuda_expr(const FusedProgram& p, int i, bool fast = false, const char* v = "v") {
  const Instr& in = p.instrs[i];
  auto opt = [&](size_t k) { return cuda_value_type(p.instrs[in.operands[k]].dtype, fast); };
  std::ostringstream b;
  switch (in.kind) {
    case InstrKind::Input:
    case InstrKind::Constant:
    case InstrKind::Reduce: break;
    case InstrKind::Unary: b << "smelt::scalar::" << scalar_fn_name(in.unary) << "<" << opt(0) << ">(" << v << in.operands[0] << ")"; break;
    case InstrKind::Binary:
      b << "smelt::scalar::" << scalar_fn_name(in.binary) << "<" << opt(0) << ">(" << v << in.operands[0] << ", " << v
        << in.operands[1] << ")";
      break;
    case InstrKind::Select:
      b << "(" << v << in.operands[0] << " ? " << v << in.operands[1] << " : " << v << in.operands[2] << ")";
      break;
    case InstrKind::Cast:
      b << "cvt<" << cuda_value_type(in.dtype, fast) << ", " << opt(0) << ">(" << v << in.operands[0] << ")";
      break;
  }
  return b.str();
}

// Vectorized outputs that cast float32 to bfloat16 or float16 are converted two elements at a
// time (the preamble's f2bf2/f2h2, the same bits as one at a time): the loop over a vector's
// elements keeps the float32 values (h<o>[e]) and the words are filled after it. The per-element
// cast then has no reader left and the compiler drops it.

/// The float32 instruction output o casts to a 16-bit float, or -1.
int paired_cast_operand(const FusedProgram& p, size_t o) {
  const Instr& in = p.instrs[p.outputs[o]];
  if (in.kind != InstrKind::Cast || in.per_row || (in.dtype != bfloat16 && in.dtype != float16)) return -1;
  return p.instrs[in.operands[0]].dtype == float32 ? in.operands[0] : -1;
}

/// Before the loop over a vector of `width` elements: the float32 values of a paired output.
std::string paired_cast_decl(const FusedProgram& p, size_t o, int width, const std::string& indent) {
  if (width % 2 != 0 || paired_cast_operand(p, o) < 0) return "";
  return indent + "float h" + std::to_string(o) + "[" + std::to_string(width) + "] = {};\n";
}

/// In the loop, element `e`: output o's value into its words `words` (or its float32 value).
std::string paired_cast_pack(const FusedProgram& p, size_t o, int width, const std::string& words, const std::string& e,
                             const std::string& indent) {
  const int src = width % 2 == 0 ? paired_cast_operand(p, o) : -1;
  if (src < 0) return indent + "pack(" + words + ", " + e + ", v" + std::to_string(p.outputs[o]) + ");\n";
  return indent + "h" + std::to_string(o) + "[" + e + "] = v" + std::to_string(src) + ";\n";
}

/// After the loop: a paired output's words from its float32 values.
std::string paired_cast_finish(const FusedProgram& p, size_t o, int width, const std::string& words, const std::string& indent) {
  if (width % 2 != 0 || paired_cast_operand(p, o) < 0) return "";
  const std::string h = "h" + std::to_string(o);
  return indent + "#pragma unroll\n" + indent + "for (int q = 0; q < " + std::to_string(width / 2) + "; ++q) " + words +
         "[q] = " + (p.output_dtype(o) == bfloat16 ? "f2bf2(" : "f2h2(") + h + "[2 * q], " + h + "[2 * q + 1]);\n";
}

}  // namespace

const char* cuda_vector_moves_source() {
  return "template <class T, int V> __device__ inline void vload(u32* w, const T* p) {\n"
         "  constexpr int B = V * (int)sizeof(T);\n"
         "  if constexpr (B >= 16) {\n"
         "    #pragma unroll\n"
         "    for (int q = 0; q < B / 16; ++q) {\n"
         "      const uint4 v = ((const uint4*)p)[q];\n"
         "      w[4 * q] = v.x; w[4 * q + 1] = v.y; w[4 * q + 2] = v.z; w[4 * q + 3] = v.w;\n"
         "    }\n"
         "  } else if constexpr (B == 8) { const uint2 v = *(const uint2*)p; w[0] = v.x; w[1] = v.y; }\n"
         "  else if constexpr (B == 4) w[0] = *(const u32*)p;\n"
         "  else if constexpr (B == 2) w[0] = *(const u16*)p;\n"
         "  else w[0] = *(const u8*)p;\n}\n"
         "template <class T, int V> __device__ inline void vstore(T* p, const u32* w) {\n"
         "  constexpr int B = V * (int)sizeof(T);\n"
         "  if constexpr (B >= 16) {\n"
         "    #pragma unroll\n"
         "    for (int q = 0; q < B / 16; ++q) ((uint4*)p)[q] = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);\n"
         "  } else if constexpr (B == 8) *(uint2*)p = make_uint2(w[0], w[1]);\n"
         "  else if constexpr (B == 4) *(u32*)p = w[0];\n"
         "  else if constexpr (B == 2) *(u16*)p = (u16)w[0];\n"
         "  else *(u8*)p = (u8)w[0];\n}\n";
}

namespace {

/// 32-bit words holding `v` elements of `d`.
int words_for(Dtype d, int v) { return static_cast<int>((static_cast<size_t>(v) * size_of(d) + 3) / 4); }

/// Device code both row kernels start with: the order, word and vector helpers, the opaque
/// constant moves, the argument struct RowArgs (mirrored in backend/cuda/fused.cpp) and
/// roff(a, k, j), the offset of element j of a row in input k.
std::string row_kernel_helpers() {
  std::ostringstream os;
  os << gpu_row_order_source() << cuda_word_helpers_source() << cuda_vector_moves_source();
  os << "__device__ inline u32 opaque32(u32 x) { u32 r; asm volatile(\"mov.b32 %0, %1;\" : \"=r\"(r) : \"r\"(x)); return r; }\n"
        "__device__ inline u64 opaque64(u64 x) { u64 r; asm volatile(\"mov.b64 %0, %1;\" : \"=l\"(r) : \"l\"(x)); return r; }\n";
  os << "struct RowArgs { u64 p[" << kCudaFusedMaxArgs << "]; i64 rows, n, groups, chunk, threads, knd, rnd, cache, cbytes; i64 kshape[MAXD]; i64 kst["
     << kCudaFusedMaxArgs << "][MAXD]; i64 rshape[MAXD]; i64 rst[" << kCudaFusedMaxArgs << "][MAXD]; };\n";
  // One stride for the common single row axis.
  os << "__device__ inline i64 roff(const RowArgs& a, int k, i64 j) {\n"
        "  if (a.rnd == 1) return j * a.rst[k][0];\n"
        "  i64 o = 0;\n"
        "  for (int d = (int)a.rnd - 1; d >= 0; --d) { o += (j % a.rshape[d]) * a.rst[k][d]; j /= a.rshape[d]; }\n"
        "  return o;\n}\n";
  return os.str();
}

/// The start of a row kernel's body after its signature: the row r of this thread (returning
/// when past the last), n (unless the kernel declares it: `declare_n` false), and x<k>, input
/// k's row in global memory.
std::string row_kernel_prologue(const FusedProgram& p, bool declare_n = true) {
  std::ostringstream os;
  os << "  const i64 r = T == 32 ? bid() * (blockDim.x / 32) + threadIdx.x / 32 : bid();\n"
        "  if (r >= a.rows) return;\n";
  if (declare_n) os << "  const i64 n = a.n;\n";
  for (size_t k = 0; k < p.input_dtypes.size(); ++k) {
    const char* t = cuda_type_name(p.input_dtypes[k]);
    os << "  const " << t << "* x" << k << ";\n  { i64 o = 0, q = r;\n"
       << "    if (a.knd == 1) o = q * a.kst[" << k << "][0];\n"
       << "    else for (int d = (int)a.knd - 1; d >= 0; --d) { o += (q % a.kshape[d]) * a.kst[" << k << "][d]; q /= a.kshape[d]; }\n"
       << "    x" << k << " = (const " << t << "*)a.p[" << k << "] + o; }\n";
  }
  return os.str();
}

}  // namespace

std::string emit_cuda_row_kernel(const FusedProgram& p) {
  const size_t nin = p.input_dtypes.size(), nout = p.outputs.size();
  // Each pass recomputes its values from the inputs (no row buffers of intermediates); inputs
  // that several passes read come from the row cache in shared memory when the host gives it
  // room (a.cache), so global memory is read once per row.
  const RowPlan plan = plan_row_program(p, false);
  const std::vector<int> cached = gpu_row_cached_inputs(p);
  // The inputs a pass reads per element, each once.
  auto pass_inputs = [&](const RowLoop& loop) {
    std::vector<int> ks;
    for (int i : loop.compute) {
      const Instr& in = p.instrs[i];
      if (in.kind == InstrKind::Input && std::find(ks.begin(), ks.end(), in.index) == ks.end()) ks.push_back(in.index);
    }
    return ks;
  };
  std::vector<char> per_element(nin, 0);
  for (const RowLoop& loop : plan.loops)
    for (int k : pass_inputs(loop)) per_element[k] = 1;
  std::vector<int> element_outputs;
  for (size_t o = 0; o < nout; ++o)
    if (!p.instrs[p.outputs[o]].per_row) element_outputs.push_back(static_cast<int>(o));

  std::ostringstream os;
  os << row_kernel_helpers();
  // Blocks of 256 threads, of 1024 for the long rows whose order takes 1024 threads, or up to
  // 1024 for a block row of 256 whose cache is large (one or two blocks an SM): the first T
  // threads reduce in the order of gpu_row_order.h, and every thread of the block copies the row
  // and runs the epilogue, where the assignment of elements changes no bits. At most 64
  // registers a thread, so that four blocks of 256 fit an SM when their row caches do.
  os << "extern \"C\" __global__ void __launch_bounds__(1024, 1) k(RowArgs a) {\n"
        "  __shared__ u64 shraw[33];\n";
  if (!cached.empty()) os << "  extern __shared__ __align__(16) unsigned char rowc[];\n";
  // lane: the thread's place in the reduction order (reducer: it has one); el of ET: its place
  // among the threads sharing the row for copies and the epilogue.
  os << "  const int T = (int)a.threads, lane = threadIdx.x % T;\n"
        "  const bool reducer = T == 32 || (int)threadIdx.x < T;\n"
        "  const int el = T == 32 ? lane : (int)threadIdx.x, ET = T == 32 ? 32 : (int)blockDim.x;\n";
  os << row_kernel_prologue(p);
  // Per input read per element: q<k> is the row as consecutive elements when cv<k> (the row in
  // global memory when contiguous and 16-byte aligned, or its copy in the row cache); else
  // element j is x<k>[roff(a, k, j)].
  for (size_t k = 0; k < nin; ++k) {
    if (!per_element[k]) continue;
    os << "  const bool f" << k << " = a.rnd == 1 && a.rst[" << k << "][0] == 1 && ((u64)x" << k << " & 15) == 0;\n";
  }
  if (!cached.empty()) {
    // The row cache: each row's slot is a.cbytes (warp rows share a block: one slot per warp);
    // input k's copy follows the earlier cached ones, each rounded up to 16 bytes. Threads copy
    // side by side (coalesced), contiguous aligned rows as 16-byte asynchronous copies
    // (cp.async on sm_80 and later: every copy of the thread in flight at once, no registers;
    // plain 16-byte copies before), the rest element by element; the passes then read in their own order, so values and reduction order are those
    // of the global-memory path.
    os << "  unsigned char* slot = rowc + (T == 32 ? (i64)(threadIdx.x / 32) : (i64)0) * a.cbytes;\n";
    for (int k : cached) {
      const char* t = cuda_type_name(p.input_dtypes[k]);
      os << "  " << t << "* c" << k << " = (" << t << "*)slot;\n"
         << "  slot += (n * (i64)sizeof(" << t << ") + 15) / 16 * 16;\n";
    }
    os << "  if (a.cache) {\n";
    for (int k : cached) {
      const std::string c = "c" + std::to_string(k), x = "x" + std::to_string(k), kk = std::to_string(k);
      const std::string sz = "(i64)sizeof(" + std::string(cuda_type_name(p.input_dtypes[k])) + ")";
      os << "    if (f" << kk << ") {\n"
         << "      const i64 nb = n * " << sz << " / 16;\n"
         << "      const uint4* s = (const uint4*)" << x << ";\n"
         << "#if __CUDA_ARCH__ >= 800\n"
         << "      const u32 d = (u32)__cvta_generic_to_shared(" << c << ");\n"
         << "      for (i64 q = el; q < nb; q += ET)\n"
         << "        asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"(d + (u32)(q * 16)), \"l\"(s + q) : \"memory\");\n"
         << "#else\n"
         << "      for (i64 q = el; q < nb; q += ET) ((uint4*)" << c << ")[q] = s[q];\n"
         << "#endif\n"
         << "      for (i64 j = nb * 16 / " << sz << " + el; j < n; j += ET) " << c << "[j] = " << x << "[j];\n"
         << "    } else {\n"
         << "      for (i64 j = el; j < n; j += ET) " << c << "[j] = " << x << "[roff(a, " << kk << ", j)];\n"
         << "    }\n";
    }
    // Each thread waits for its own asynchronous copies, then the barrier makes every thread's
    // part visible to the row's other threads.
    os << "#if __CUDA_ARCH__ >= 800\n"
          "    asm volatile(\"cp.async.wait_all;\" ::: \"memory\");\n"
          "#endif\n"
          "    if (T == 32) __syncwarp(); else __syncthreads();\n  }\n";
  }
  for (size_t k = 0; k < nin; ++k) {
    if (!per_element[k]) continue;
    const char* t = cuda_type_name(p.input_dtypes[k]);
    if (std::find(cached.begin(), cached.end(), static_cast<int>(k)) != cached.end())
      os << "  const " << t << "* q" << k << " = a.cache ? (const " << t << "*)c" << k << " : x" << k << ";\n"
         << "  const bool cv" << k << " = a.cache || f" << k << ";\n";
    else
      os << "  const " << t << "* q" << k << " = x" << k << ";\n  const bool cv" << k << " = f" << k << ";\n";
  }
  for (size_t o = 0; o < nout; ++o)
    os << "  " << cuda_type_name(p.output_dtype(o)) << "* y" << o << " = (" << cuda_type_name(p.output_dtype(o)) << "*)a.p["
       << nin + o << "];\n";
  for (size_t i = 0; i < p.instrs.size(); ++i)
    if (p.instrs[i].kind == InstrKind::Constant)
      os << "  const " << cuda_type_name(p.instrs[i].dtype) << " v" << i << " = " << literal(p.instrs[i]) << ";\n";
  // The per-element lines of a pass; `vector`: inputs unpacked from their words w<k> at element
  // e of the vector, else read at element j.
  auto pass_body = [&](const RowLoop& loop, const std::string& indent, bool vector, const std::string& word = "") {
    std::ostringstream b;
    for (int i : loop.compute) {
      const Instr& in = p.instrs[i];
      if (in.kind == InstrKind::Constant) continue;  // defined once above
      const char* t = cuda_type_name(in.dtype);
      b << indent << "const " << t << " v" << i << " = ";
      if (in.kind == InstrKind::Input && vector) b << "unpack<" << t << ">(w" << in.index << word << ", e)";
      else if (in.kind == InstrKind::Input)
        b << "(cv" << in.index << " ? q" << in.index << "[j] : x" << in.index << "[roff(a, " << in.index << ", j)])";
      else b << cuda_expr(p, i);
      b << ";\n";
    }
    return b.str();
  };
  // Whether a pass may move whole vectors: every input it reads is consecutive and aligned.
  auto all_vectors = [&](const std::vector<int>& ks) {
    std::string c;
    for (int k : ks) c += (c.empty() ? "" : " && ") + std::string("cv") + std::to_string(k);
    return c.empty() ? std::string("true") : c;
  };
  auto vector_loads = [&](const std::vector<int>& ks, int vec, const std::string& at, const std::string& indent) {
    std::ostringstream b;
    for (int k : ks) {
      const char* t = cuda_type_name(p.input_dtypes[k]);
      b << indent << "u32 w" << k << "[" << words_for(p.input_dtypes[k], vec) << "];\n"
        << indent << "vload<" << t << ", " << vec << ">(w" << k << ", q" << k << " + " << at << ");\n";
    }
    return b.str();
  };
  size_t next_loop = 0;
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr& in = p.instrs[i];
    if (!in.per_row || in.kind == InstrKind::Constant) continue;
    const char* t = cuda_type_name(in.dtype);
    if (in.kind == InstrKind::Input) {
      os << "  const " << t << " v" << i << " = x" << in.index << "[0];\n";
      continue;
    }
    if (in.kind != InstrKind::Reduce) {
      os << "  const " << t << " v" << i << " = " << cuda_expr(p, static_cast<int>(i)) << ";\n";
      continue;
    }
    // A reduction's pass in the order of gpu_row_order.h: the thread's vectors of `vec`
    // elements (ROW_VECS_FOR, kPassVectors at a time: the whole ones of a contiguous aligned
    // row, or of its cached copy, are loaded first), each combined element by element in order;
    // a partial vector or a strided row is read element by element. One at a time: more would
    // put the 64 registers of LayerNorm's kernel past the limit (spills), for little gain when
    // the passes read the row cache.
    constexpr int kPassVectors = 1;
    const std::string per = std::to_string(kPassVectors);
    const RowLoop& loop = plan.loops[next_loop++];
    const std::vector<int> ks = pass_inputs(loop);
    const Dtype rt = p.instrs[in.operands[0]].dtype;
    const int vec = gpu_row_vector(rt);
    const std::string R = "R" + std::to_string(i), op = "v" + std::to_string(in.operands[0]), V = std::to_string(vec);
    os << "  typedef " << gpu_red_type(in.reduce, rt) << " " << R << ";\n";
    os << "  " << R << "::Acc t" << i << " = " << R << "::init();\n";
    os << "  {\n    const bool whole = " << all_vectors(ks) << ";\n";
    os << "    for (i64 g = 0; g < a.groups; ++g) {\n"
          "      const i64 lo = g * a.chunk, hi = min(n, lo + a.chunk);\n"
          "      " << R << "::Acc acc = " << R << "::init();\n"
          "      if (reducer) ROW_VECS_FOR(b0, lo, hi, lane, T, " << V << ", " << per << ") {\n";
    for (int k : ks) os << "        u32 w" << k << "[" << per << "][" << words_for(p.input_dtypes[k], vec) << "];\n";
    os << "        #pragma unroll\n"
          "        for (int u = 0; u < " << per << "; ++u)\n"
          "          if (whole && ROW_VECS_AT(b0, u, T, " << V << ") + " << V << " <= hi) {\n";
    for (int k : ks)
      os << "            vload<" << cuda_type_name(p.input_dtypes[k]) << ", " << V << ">(w" << k << "[u], q" << k
         << " + ROW_VECS_AT(b0, u, T, " << V << "));\n";
    os << "          }\n"
          "        #pragma unroll\n"
          "        for (int u = 0; u < " << per << "; ++u) {\n"
          "          const i64 b = ROW_VECS_AT(b0, u, T, " << V << ");\n"
          "          if (b >= hi) break;\n"
          "          if (whole && b + " << V << " <= hi) {\n"
          "            #pragma unroll\n"
          "            for (int e = 0; e < " << V << "; ++e) {\n"
       << pass_body(loop, "              ", true, "[u]") << "              acc = " << R << "::step(acc, " << R << "::load(" << op << "));\n"
       << "            }\n"
          "          } else {\n"
          "            for (i64 j = b, je = min(b + " << V << ", hi); j < je; ++j) {\n"
       << pass_body(loop, "              ", false) << "              acc = " << R << "::step(acc, " << R << "::load(" << op << "));\n"
       << "            }\n"
          "          }\n"
          "        }\n"
          "      }\n"
          "      acc = row_tree<" << R << ">(acc, T, (" << R << "::Acc*)shraw);\n"
          "      t" << i << " = g == 0 ? acc : " << R << "::step(t" << i << ", acc);\n    }\n  }\n";
    os << "  const " << t << " v" << i << " = ";
    if (in.reduce == ReduceOp::Mean)
      os << "smelt::scalar::divide<" << t << ">(" << R << "::finish(t" << i << "), cvt<" << t << ", double>((double)(n - " << in.ddof
         << " > 0 ? n - " << in.ddof << " : 0)));\n";
    else os << R << "::finish(t" << i << ");\n";
  }
  if (!element_outputs.empty()) {
    // The epilogue: each thread takes vectors of `ve` elements (16 bytes of the narrowest
    // output), side by side; outputs are row-major, stored as 16-byte vectors when the row is
    // aligned. Every element is independent, so this assignment changes no bits.
    const RowLoop& loop = plan.loops.back();
    const std::vector<int> ks = pass_inputs(loop);
    size_t narrowest = 16;
    for (int o : element_outputs) narrowest = std::min(narrowest, size_of(p.output_dtype(o)));
    const int ve = static_cast<int>(16 / narrowest);
    std::string whole = all_vectors(ks);
    for (int o : element_outputs) whole += " && ((u64)(y" + std::to_string(o) + " + r * n) & 15) == 0";
    os << "  {\n    const bool whole = " << whole << ";\n"
       << "    for (i64 b = (i64)el * " << ve << "; b < n; b += (i64)ET * " << ve << ") {\n"
       << "      if (whole && b + " << ve << " <= n) {\n"
       << vector_loads(ks, ve, "b", "        ");
    for (int o : element_outputs) os << "        u32 o" << o << "[" << words_for(p.output_dtype(o), ve) << "] = {};\n";
    for (int o : element_outputs) os << paired_cast_decl(p, o, ve, "        ");
    os << "        #pragma unroll\n"
          "        for (int e = 0; e < " << ve << "; ++e) {\n"
       << pass_body(loop, "          ", true);
    for (int o : element_outputs) os << paired_cast_pack(p, o, ve, "o" + std::to_string(o), "e", "          ");
    os << "        }\n";
    for (int o : element_outputs) os << paired_cast_finish(p, o, ve, "o" + std::to_string(o), "        ");
    for (int o : element_outputs)
      os << "        vstore<" << cuda_type_name(p.output_dtype(o)) << ", " << ve << ">(y" << o << " + r * n + b, o" << o << ");\n";
    os << "      } else {\n"
          "        for (i64 j = b, je = min(b + " << ve << ", n); j < je; ++j) {\n"
       << pass_body(loop, "          ", false);
    for (int o : element_outputs) os << "          y" << o << "[r * n + j] = v" << p.outputs[o] << ";\n";
    os << "        }\n      }\n    }\n  }\n";
  }
  for (size_t o = 0; o < nout; ++o)
    if (p.instrs[p.outputs[o]].per_row) os << "  if (reducer && lane == 0) y" << o << "[r] = v" << p.outputs[o] << ";\n";
  os << "}\n";
  return os.str();
}

namespace {

/// `regs` without kept values when the row alone takes more than kGpuRowKeepWords words a
/// thread: kept values need registers beside it. (W5's 64 words with exp(x - max) kept: ptxas
/// held them in 128 registers and spilled, and the kernel took 441 us on the H200 against 336
/// us recomputing exp. Keeping exp(x - max) in x's own registers, which no later pass reads,
/// took 443 us.)
GpuRowRegisters kept_within(GpuRowRegisters regs, int vectors) {
  if (vectors * regs.words > kGpuRowKeepWords) std::fill(regs.keep.begin(), regs.keep.end(), 0);
  return regs;
}

/// What both register row kernels know about a program (emit_cuda_row_register_kernel,
/// emit_cuda_row_pipelined_kernel).
struct RegisterRows {
  const FusedProgram& p;
  GpuRowRegisters regs;
  RowPlan plan;  // with regs.keep: later passes read the kept values c<i>[u][e]
  std::vector<char> in_registers, per_element;
  std::vector<int> element_outputs, epilogue_loads;
  // The pipelined kernel keeps the epilogue loads' words across its rows, loading an input again
  // only when its rows differ (emit_cuda_row_pipelined_kernel): all of them or none.
  bool hoisted = false;
  int reductions = 0, vectors = 0, threads = 0, block = 0;
  bool exact = false;

  /// Checks what both kernels require of `vectors` and `threads` (GpuRowOrder's sizes).
  RegisterRows(const FusedProgram& program, int vector_count, int row_threads, bool exact_rows)
      : p(program),
        regs(kept_within(gpu_row_registers(program), vector_count)),
        plan(plan_row_program_keeping(program, regs.keep)),
        vectors(vector_count),
        threads(row_threads),
        block(gpu_row_register_block(GpuRowOrder{row_threads})),
        exact(exact_rows) {
    SMELT_ASSERT(vectors > 0, "row register kernel: no vectors");
    SMELT_ASSERT(threads == 32 || threads == 256 || threads == 512, "row register kernel: rows of 32, 256 or 512 threads");
    const size_t nin = p.input_dtypes.size();
    SMELT_ASSERT(regs.vec > 0, "row register kernel: the program's rows do not go in registers");
    in_registers.assign(nin, 0);
    per_element.assign(nin, 0);
    for (int k : regs.inputs) in_registers[k] = 1;
    for (const RowLoop& loop : plan.loops)
      for (int i : loop.compute)
        if (p.instrs[i].kind == InstrKind::Input) per_element[p.instrs[i].index] = 1;
    for (size_t o = 0; o < p.outputs.size(); ++o)
      if (!p.instrs[p.outputs[o]].per_row) element_outputs.push_back(static_cast<int>(o));
    for (size_t k = 0; k < nin; ++k)
      if (per_element[k] && !in_registers[k]) epilogue_loads.push_back(static_cast<int>(k));
    for (const Instr& in : p.instrs) reductions += in.kind == InstrKind::Reduce ? 1 : 0;
  }

  /// The threads of a row T and this thread's lane, compile-time constants so that the address
  /// arithmetic and the trees' loops fold (a runtime T kept about 110 of the 700 instructions a
  /// warp spent on a row of W6).
  std::string thread_lines() const {
    return "  constexpr int T = " + std::to_string(threads) + ";\n  const int lane = threadIdx.x % T;\n";
  }

  /// The row's length n and m (n as int): compile-time when exact, so that every guard against
  /// the row's end folds away.
  std::string size_lines() const {
    if (!exact) return "  const i64 n = a.n;\n  const int m = (int)n;\n";
    const std::string n = std::to_string(gpu_row_register_exact_n(threads, regs.vec, vectors));
    return "  constexpr i64 n = " + n + ";\n  constexpr int m = " + n + ";\n";
  }

  /// A pass's per-element lines at element e of vector u: the kept values it reads from
  /// c<i>[u][e], then what it computes (inputs unpacked from registers w<k>[u], or from the
  /// epilogue's words e<k>), keeping in c<i> the kept values it computes.
  std::string pass_body(const RowLoop& loop, const std::string& indent) const {
    std::ostringstream b;
    std::vector<char> computed(p.instrs.size(), 0), read(p.instrs.size(), 0);
    for (int i : loop.compute) computed[i] = 1;
    auto reads = [&](int i) {
      if (!computed[i] && plan.keep[i] && !read[i]) {
        read[i] = 1;
        b << indent << "const " << cuda_type_name(p.instrs[i].dtype) << " v" << i << " = c" << i << "[u][e];\n";
      }
    };
    for (int i : loop.compute)
      for (int o : p.instrs[i].operands) reads(o);
    if (loop.reduce >= 0) reads(p.instrs[loop.reduce].operands[0]);
    else
      for (int o : element_outputs) reads(p.outputs[o]);
    for (int i : loop.compute) {
      const Instr& in = p.instrs[i];
      if (in.kind == InstrKind::Constant) continue;
      const char* t = cuda_type_name(in.dtype);
      b << indent << "const " << t << " v" << i << " = ";
      if (in.kind == InstrKind::Input)
        b << "unpack<" << t << ">(" << (in_registers[in.index] ? "w" : "e") << in.index << "[u], e)";
      else b << cuda_expr(p, i);
      b << ";\n";
      if (plan.keep[i]) b << indent << "c" << i << "[u][e] = v" << i << ";\n";
    }
    return b.str();
  }

  /// Whether the epilogue loads its other inputs (a norm's weight and bias) for all the thread's
  /// vectors before computing any (epilogue_inputs), rather than each vector's as it goes: when
  /// they take at most 16 words. W4's 16 (a float32 weight, 4 vectors of 4) on the H200, with
  /// the weight in L1 (prefer_shared_memory): 87.3 -> 77.0-78.4 us. W6's 32 (weight and bias)
  /// took its kernel from 76 to 98 registers, two blocks an SM instead of three: 163.3 us,
  /// against 133.0 loading them as it goes (and 173.2 loaded before the last tree).
  bool epilogue_loads_first() const { return epilogue_words() <= 16; }

  /// The words a thread's epilogue loads hold (all its vectors).
  int epilogue_words() const {
    int words = 0;
    for (int k : epilogue_loads) words += words_for(p.input_dtypes[k], regs.vec);
    return words * vectors;
  }

  /// The epilogue's inputs that are not in registers, e<k>[u] for each of the thread's vectors:
  /// declared (unless `hoisted`: the pipelined kernel declares those before its row loop), and
  /// when epilogue_loads_first loaded (before the row's end) by `epilogue_load(k, words, indent)`,
  /// a hoisted input only when its rows differ (i<k> false); else the epilogue loads each vector's.
  std::string epilogue_inputs(const std::string& I,
                              const std::function<std::string(int, const std::string&, const std::string&)>& epilogue_load) const {
    if (epilogue_loads.empty()) return "";
    std::ostringstream os;
    for (int k : epilogue_loads)
      if (!hoisted) os << I << "u32 e" << k << "[P][" << words_for(p.input_dtypes[k], regs.vec) << "];\n";
    if (!epilogue_loads_first()) return os.str();
    os << I << "#pragma unroll\n"
       << I << "for (int u = 0; u < P; ++u) {\n"
       << I << "  const int b = lane * V + u * T * V;\n"
       << I << "  if (b >= m) break;\n";
    for (int k : epilogue_loads) {
      const std::string e = "e" + std::to_string(k) + "[u]";
      if (!hoisted) os << epilogue_load(k, e, I + "  ");
      else os << I << "  if (!i" << k << ") {\n" << epilogue_load(k, e, I + "    ") << I << "  }\n";
    }
    os << I << "}\n";
    return os.str();
  }

  /// The row's computation once w<k>[u] hold it, at `indent` (m: n as int, b: a vector's start):
  /// output pointers, constants, per-row values, each reduction's pass and tree (at
  /// tree_slot(j), the j-th tree's accumulators), the epilogue and the per-row outputs. With
  /// `whole` (clean rows) every vector before the row's end is whole and aligned; else partial
  /// vectors go element by element and `epilogue_load(k, words, indent)` loads input k's vector.
  std::string body(const std::string& I, bool whole, const std::function<std::string(int)>& tree_slot,
                   const std::function<std::string(int, const std::string&, const std::string&)>& epilogue_load) const {
    const size_t nin = p.input_dtypes.size(), nout = p.outputs.size();
    std::ostringstream os;
    for (size_t o = 0; o < nout; ++o)
      os << I << cuda_type_name(p.output_dtype(o)) << "* y" << o << " = (" << cuda_type_name(p.output_dtype(o)) << "*)a.p["
         << nin + o << "] + " << (p.instrs[p.outputs[o]].per_row ? "r" : "r * n") << ";\n";
    for (size_t i = 0; i < p.instrs.size(); ++i)
      if (p.instrs[i].kind == InstrKind::Constant)
        os << I << "const " << cuda_type_name(p.instrs[i].dtype) << " v" << i << " = " << literal(p.instrs[i]) << ";\n";
    // The kept values (plan.keep), element e of vector u at c<i>[u][e]: registers once unrolled.
    for (size_t i = 0; i < p.instrs.size(); ++i)
      if (plan.keep[i]) os << I << cuda_type_name(p.instrs[i].dtype) << " c" << i << "[P][V];\n";
    // Vectors past the row's end (b >= n) and elements past it in a partial vector are skipped:
    // the elements a thread combines, and their order, are those of ROW_VECS_FOR.
    const bool kept = std::find(plan.keep.begin(), plan.keep.end(), 1) != plan.keep.end();
    size_t next_loop = 0;
    int tree = 0;
    for (size_t i = 0; i < p.instrs.size(); ++i) {
      const Instr& in = p.instrs[i];
      if (!in.per_row || in.kind == InstrKind::Constant) continue;
      const char* t = cuda_type_name(in.dtype);
      if (in.kind == InstrKind::Input) {
        os << I << "const " << t << " v" << i << " = x" << in.index << "[0];\n";
        continue;
      }
      if (in.kind != InstrKind::Reduce) {
        os << I << "const " << t << " v" << i << " = " << cuda_expr(p, static_cast<int>(i)) << ";\n";
        continue;
      }
      const RowLoop& loop = plan.loops[next_loop++];
      const std::string R = "R" + std::to_string(i), op = "v" + std::to_string(in.operands[0]);
      os << I << "typedef " << gpu_red_type(in.reduce, p.instrs[in.operands[0]].dtype) << " " << R << ";\n"
         << I << R << "::Acc t" << i << " = " << R << "::init();\n"
         << I << "#pragma unroll\n"
         << I << "for (int u = 0; u < P; ++u) {\n";
      // With kept values every vector is computed (past the row's end from zeros) and only the
      // step is skipped: the exits around the stores of c<i> made ptxas spill them (W5's
      // kernel: 1,152 bytes, 32 registers instead of 128).
      const std::string past = whole ? "b >= m" : "b + e >= m";
      if (kept) os << I << "  const int b = lane * V + u * T * V;\n";
      else if (whole) os << I << "  if (lane * V + u * T * V >= m) break;\n";
      else os << I << "  const int b = lane * V + u * T * V;\n";
      os << I << "  #pragma unroll\n"
         << I << "  for (int e = 0; e < V; ++e) {\n";
      if (!kept && !whole) os << I << "    if (b + e >= m) break;\n";
      os << pass_body(loop, I + "    ") << I << "    " << (kept ? "if (!(" + past + ")) " : "") << "t" << i << " = " << R
         << "::step(t" << i << ", " << R << "::load(" << op << "));\n"
         << I << "  }\n" << I << "}\n"
         << I << "t" << i << " = row_tree_once<" << R << ">(t" << i << ", T, (" << R << "::Acc*)(" << tree_slot(tree++) << "));\n"
         << I << "const " << t << " v" << i << " = ";
      if (in.reduce == ReduceOp::Mean)
        os << "smelt::scalar::divide<" << t << ">(" << R << "::finish(t" << i << "), cvt<" << t << ", double>((double)(n - " << in.ddof
           << " > 0 ? n - " << in.ddof << " : 0)));\n";
      else os << R << "::finish(t" << i << ");\n";
    }
    if (!element_outputs.empty()) {
      // The epilogue over the thread's own vectors; outputs leave as vectors (when aligned).
      os << epilogue_inputs(I, epilogue_load);
      const RowLoop& loop = plan.loops.back();
      os << I << "#pragma unroll\n"
         << I << "for (int u = 0; u < P; ++u) {\n"
         << I << "  const int b = lane * V + u * T * V;\n"
         << I << "  if (b >= m) " << (kept ? "continue" : "break") << ";\n";
      if (!epilogue_loads_first())
        for (int k : epilogue_loads) os << epilogue_load(k, "e" + std::to_string(k) + "[u]", I + "  ");
      for (int o : element_outputs) {
        os << I << "  u32 o" << o << "[" << words_for(p.output_dtype(o), regs.vec) << "] = {};\n";
        os << paired_cast_decl(p, o, regs.vec, I + "  ");
      }
      os << I << "  #pragma unroll\n"
         << I << "  for (int e = 0; e < V; ++e) {\n";
      if (!whole) os << I << "    if (b + e >= m) " << (kept ? "continue" : "break") << ";\n";
      os << pass_body(loop, I + "    ");
      for (int o : element_outputs) os << paired_cast_pack(p, o, regs.vec, "o" + std::to_string(o), "e", I + "    ");
      os << I << "  }\n";
      for (int o : element_outputs) os << paired_cast_finish(p, o, regs.vec, "o" + std::to_string(o), I + "  ");
      for (int o : element_outputs) {
        const char* t = cuda_type_name(p.output_dtype(o));
        const std::string y = "y" + std::to_string(o), w = "o" + std::to_string(o);
        if (whole) {
          os << I << "  vstore<" << t << ", V>(" << y << " + b, " << w << ");\n";
          continue;
        }
        os << I << "  if (b + V <= m && ((u64)(" << y << " + b) % (V * sizeof(" << t << "))) == 0) vstore<" << t << ", V>(" << y
           << " + b, " << w << ");\n"
           << I << "  else {\n"
           << I << "    #pragma unroll\n"
           << I << "    for (int e = 0; e < V; ++e)\n"
           << I << "      if (b + e < m) " << y << "[b + e] = unpack<" << t << ">(" << w << ", e);\n"
           << I << "  }\n";
      }
      os << I << "}\n";
    }
    for (size_t o = 0; o < nout; ++o)
      if (p.instrs[p.outputs[o]].per_row) os << I << "if (lane == 0) *y" << o << " = v" << p.outputs[o] << ";\n";
    return os.str();
  }
};

}  // namespace

std::string emit_cuda_row_register_kernel(const FusedProgram& p, int vectors, int threads, bool exact) {
  const RegisterRows rows(p, vectors, threads, exact);
  const int block = rows.block;
  const GpuRowRegisters& regs = rows.regs;
  const std::vector<char>& per_element = rows.per_element;
  const size_t nin = p.input_dtypes.size();
  const std::string V = std::to_string(regs.vec), P = std::to_string(vectors);

  std::ostringstream os;
  os << row_kernel_helpers();
  // `block` threads (gpu_row_register_block): one row, or 8 warp rows. Thread `lane` holds its
  // vectors u = 0 .. P - 1 of the row (vec elements from vec * lane + u * T * vec: the order of
  // gpu_row_order.h), loaded once and all in flight together; every pass reads them from
  // registers, and the epilogue writes the same elements, so each input row crosses the memory
  // bus once. Each reduction's tree has its own accumulators, one per warp of the block
  // (row_tree_once: one barrier a tree).
  const int warps = block / 32;
  os << "extern \"C\" __global__ void __launch_bounds__(" << block << ") k(RowArgs a) {\n"
        "  __shared__ u64 shraw[" << warps * std::max(rows.reductions, 1) << "];\n"
     << rows.thread_lines() << row_kernel_prologue(p, false);
  // Row positions are 32-bit (a row in registers is at most 512 * 64 * 16 elements).
  os << "  constexpr int V = " << V << ", P = " << P << ";\n" << rows.size_lines();
  // f<k>: input k's row is consecutive and 16-byte aligned, so whole vectors load as vectors.
  for (size_t k = 0; k < nin; ++k)
    if (per_element[k])
      os << "  const bool f" << k << " = a.rnd == 1 && a.rst[" << k << "][0] == 1 && ((u64)x" << k << " & 15) == 0;\n";
  // Loads vector u of input k into words `w` (zero past the row's end): whole vectors as
  // vectors, the rest element by element.
  auto load = [&](int k, const std::string& w, const std::string& indent) {
    const char* t = cuda_type_name(p.input_dtypes[k]);
    const std::string kk = std::to_string(k);
    std::ostringstream b;
    b << indent << "if (f" << kk << " && b + V <= m) vload<" << t << ", V>(" << w << ", x" << kk << " + b);\n"
      << indent << "else {\n"
      << indent << "  #pragma unroll\n"
      << indent << "  for (int q = 0; q < " << words_for(p.input_dtypes[k], regs.vec) << "; ++q) " << w << "[q] = 0;\n"
      << indent << "  #pragma unroll\n"
      << indent << "  for (int e = 0; e < V; ++e)\n"
      << indent << "    if (b + e < m) pack(" << w << ", e, x" << kk << "[f" << kk << " ? b + e : roff(a, " << kk << ", b + e)]);\n"
      << indent << "}\n";
    return b.str();
  };
  for (int k : regs.inputs) os << "  u32 w" << k << "[P][" << words_for(p.input_dtypes[k], regs.vec) << "];\n";
  os << "  #pragma unroll\n"
        "  for (int u = 0; u < P; ++u) {\n"
        "    const int b = lane * V + u * T * V;\n";
  for (int k : regs.inputs) os << load(k, "w" + std::to_string(k) + "[u]", "    ");
  os << "  }\n";
  os << rows.body("  ", false, [&](int tree) { return "shraw + " + std::to_string(warps * tree); },
                  [&](int k, const std::string& w, const std::string& indent) { return load(k, w, indent); });
  os << "}\n";
  return os.str();
}

std::string emit_cuda_row_pipelined_kernel(const FusedProgram& p, int vectors, int threads, bool exact) {
  RegisterRows rows(p, vectors, threads, exact);
  // At most 8 words: W6's weight and bias (16 words) kept across rows took its kernel from 64 to
  // 80 registers, three blocks an SM instead of four.
  rows.hoisted = rows.epilogue_loads_first() && rows.epilogue_words() <= 8;
  const int block = rows.block;
  const GpuRowRegisters& regs = rows.regs;
  const size_t nin = p.input_dtypes.size();
  const std::string V = std::to_string(regs.vec), P = std::to_string(vectors);

  std::ostringstream os;
  os << row_kernel_helpers();
  // Only for rows the host found clean (eval_fused_rows: every per-element input's rows
  // consecutive and 16-byte aligned, n a multiple of vec, outputs aligned): every vector is
  // whole, so there is no element-by-element path (which would cost registers).
  // Blocks of `block` threads (one row at a time, or 8 warp rows), persistent: the block's unit (the
  // block, or each warp) takes rows unit, unit + units, ... Thread `lane` holds its vectors
  // u = 0 .. P - 1 of the row (vec elements from vec * lane + u * T * vec: the order of
  // gpu_row_order.h) in registers; every pass reads them there and the epilogue writes the same
  // elements, so each input row crosses the memory bus once. While a row is computed, the
  // thread's whole vectors of the unit's next row are already on their way into shared memory
  // (cp.async; `stage`, laid out [input][vector][thread] so that a warp's reads are
  // consecutive): each thread copies and later reads only its own words, so no barrier
  // orders them. Each reduction's tree has two sets of accumulators (one per warp), used by
  // alternate rows (row_tree_once has one barrier, which a warp two rows ahead would otherwise
  // pass while a slow warp still reads the set).
  const int warps = block / 32;
  os << "extern \"C\" __global__ void __launch_bounds__(" << block << ") k(RowArgs a) {\n"
        "  __shared__ u64 shraw[" << 2 * warps * std::max(rows.reductions, 1) << "];\n"
        "  extern __shared__ __align__(16) unsigned char stage[];\n"
     << rows.thread_lines() << "  constexpr int V = " << V << ", P = " << P << ";\n"
     // Row positions are 32-bit (a row in registers is at most 512 * 64 * 16 elements).
     << rows.size_lines() << "  const i64 units = T == 32 ? (i64)gridDim.x * gridDim.y * (blockDim.x / 32) : (i64)gridDim.x * gridDim.y;\n"
        "  i64 r = T == 32 ? bid() * (blockDim.x / 32) + threadIdx.x / 32 : bid();\n"
        "  if (r >= a.rows) return;\n";
  // Input k's row r in global memory, and whether it is consecutive and 16-byte aligned (whole
  // vectors then move as vectors).
  auto row_pointer = [&](size_t k, const std::string& row, const std::string& x, const std::string& f, const std::string& indent) {
    const char* t = cuda_type_name(p.input_dtypes[k]);
    const std::string kk = std::to_string(k);
    std::ostringstream b;
    b << indent << "{ i64 o = 0, q = " << row << ";\n"
      << indent << "  if (a.knd == 1) o = q * a.kst[" << kk << "][0];\n"
      << indent << "  else for (int d = (int)a.knd - 1; d >= 0; --d) { o += (q % a.kshape[d]) * a.kst[" << kk << "][d]; q /= a.kshape[d]; }\n"
      << indent << "  " << x << " = (const " << t << "*)a.p[" << kk << "] + o; }\n";
    if (!f.empty()) b << indent << f << " = a.rnd == 1 && a.rst[" << kk << "][0] == 1 && ((u64)" << x << " & 15) == 0;\n";
    return b.str();
  };
  // The stage: input k's words for vector u of this thread at stage + off<k> + (u * block + tid) * bytes<k>.
  size_t offset = 0;
  std::vector<size_t> stage_offset(nin, 0);
  for (int k : regs.inputs) {
    stage_offset[k] = offset;
    offset += static_cast<size_t>(vectors) * static_cast<size_t>(block) * 4 * words_for(p.input_dtypes[k], regs.vec);
    offset = (offset + 15) / 16 * 16;
  }
  auto stage_at = [&](int k, const std::string& u) {
    return "(stage + " + std::to_string(stage_offset[k]) + " + ((" + u + ") * " + std::to_string(block) + " + threadIdx.x) * " +
           std::to_string(4 * words_for(p.input_dtypes[k], regs.vec)) + ")";
  };
  // Starts the copies of the thread's whole vectors of row `row` into the stage.
  os << "  auto prefetch = [&](i64 row) {\n";
  for (int k : regs.inputs) {
    const char* t = cuda_type_name(p.input_dtypes[k]);
    const std::string kk = std::to_string(k);
    const int bytes = 4 * words_for(p.input_dtypes[k], regs.vec);
    os << "    const " << t << "* px" << kk << ";\n"
       << row_pointer(static_cast<size_t>(k), "row", "px" + kk, "", "    ");
    os << "    #pragma unroll\n"
          "    for (int u = 0; u < P; ++u) {\n"
          "      const int b = lane * V + u * T * V;\n"
          "      if (b >= m) continue;\n"
          "      const u32 d = (u32)__cvta_generic_to_shared(" << stage_at(k, "u") << ");\n"
          "      const char* g = (const char*)(px" << kk << " + b);\n";
    // Before sm_80 (no cp.async) the copy is a plain load and store: no overlap, same values.
    os << "#if __CUDA_ARCH__ >= 800\n";
    if (bytes >= 16) {
      os << "      #pragma unroll\n"
            "      for (int c = 0; c < " << bytes / 16 << "; ++c)\n"
            "        asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"(d + 16 * c), \"l\"(g + 16 * c) : \"memory\");\n";
    } else {
      os << "      asm volatile(\"cp.async.ca.shared.global [%0], [%1], " << bytes << ";\" :: \"r\"(d), \"l\"(g) : \"memory\");\n";
    }
    os << "#else\n"
          "      (void)d;\n"
          "      #pragma unroll\n"
          "      for (int c = 0; c < " << bytes / 4 << "; ++c) ((u32*)" << stage_at(k, "u") << ")[c] = ((const u32*)g)[c];\n"
          "#endif\n";
    os << "    }\n";
  }
  os << "#if __CUDA_ARCH__ >= 800\n"
        "    asm volatile(\"cp.async.commit_group;\" ::: \"memory\");\n"
        "#endif\n"
        "  };\n";
  // An epilogue input whose rows are all one row (a norm's weight or bias broadcast over the
  // kept axes, a.kst zero: i<k>) is loaded once, before the block's first row, and its words
  // stay in registers across the rows instead of coming again from L2 after each row's tree.
  // W4 on the H200 (the kernel alone, CUDA events, same bits): 79.8-80.2 -> 78.2-78.5 us a
  // call, 75.3-76.0 -> 74.3-74.6 back to back, with 52 registers instead of 48 (four blocks an
  // SM, not five); W4 compiled in gpu.sh then ran at 75.3 us, 0.85 of the copy floor.
  // Loads vector u of epilogue input k into words `w` (clean rows: whole, aligned vectors).
  auto epilogue_load = [&](int k, const std::string& w, const std::string& indent) {
    return indent + "vload<" + cuda_type_name(p.input_dtypes[k]) + ", V>(" + w + ", x" + std::to_string(k) + " + b);\n";
  };
  for (int k : rows.hoisted ? rows.epilogue_loads : std::vector<int>{}) {
    const std::string kk = std::to_string(k);
    const char* t = cuda_type_name(p.input_dtypes[k]);
    os << "  bool i" << kk << " = true;\n"
       << "  for (int d = 0; d < (int)a.knd; ++d) i" << kk << " = i" << kk << " && a.kst[" << kk << "][d] == 0;\n"
       << "  u32 e" << kk << "[P][" << words_for(p.input_dtypes[k], regs.vec) << "];\n"
       << "  if (i" << kk << ") {\n"
       << "    const " << t << "* x" << kk << " = (const " << t << "*)a.p[" << kk << "];\n"
       << "    #pragma unroll\n"
       << "    for (int u = 0; u < P; ++u) {\n"
       << "      const int b = lane * V + u * T * V;\n"
       << "      if (b >= m) break;\n"
       << epilogue_load(k, "e" + kk + "[u]", "      ")
       << "    }\n"
       << "  }\n";
  }
  os << "  prefetch(r);\n"
        "  int parity = 0;\n"
        "  for (; r < a.rows; r += units, parity ^= 1) {\n";
  for (size_t k = 0; k < nin; ++k) {
    os << "    const " << cuda_type_name(p.input_dtypes[k]) << "* x" << k << ";\n";
    os << row_pointer(k, "r", "x" + std::to_string(k), "", "    ");
  }
  // The row's registers: whole vectors from the stage (this thread's copies, waited for), the
  // rest element by element from global memory (zero past the row's end).
  os << "#if __CUDA_ARCH__ >= 800\n"
        "    asm volatile(\"cp.async.wait_all;\" ::: \"memory\");\n"
        "#endif\n";
  for (int k : regs.inputs) os << "    u32 w" << k << "[P][" << words_for(p.input_dtypes[k], regs.vec) << "];\n";
  os << "    #pragma unroll\n"
        "    for (int u = 0; u < P; ++u) {\n"
        "      const int b = lane * V + u * T * V;\n";
  for (int k : regs.inputs) {
    const std::string kk = std::to_string(k);
    const int words = words_for(p.input_dtypes[k], regs.vec);
    os << "      const u32* s" << kk << " = (const u32*)" << stage_at(k, "u") << ";\n"
       << "      #pragma unroll\n"
          "      for (int q = 0; q < " << words << "; ++q) w" << kk << "[u][q] = b < m ? s" << kk << "[q] : 0u;\n";
  }
  os << "    }\n"
        "    if (r + units < a.rows) prefetch(r + units);\n";
  os << rows.body("    ", true, [&](int tree) { return "shraw + " + std::to_string(2 * warps * tree) + " + " + std::to_string(warps) + " * parity"; },
                  epilogue_load);
  os << "  }\n}\n";
  return os.str();
}

namespace {

/// The element of flat-layout input `i` (letter `l`) that output element `e` reads: `e` itself
/// ('c'), within the suffix repeat ('r'), the row of the prefix ('q'), the middle block's entry
/// ('m'), or the one value ('s').
std::string flat_element(char l, size_t i, const std::string& e) {
  const std::string inner = "a.st[" + std::to_string(i) + "][0]", count = "a.st[" + std::to_string(i) + "][1]";
  if (l == 'r') return "umod(" + e + ", " + inner + ")";
  if (l == 'q') return "udiv(" + e + ", " + inner + ")";
  if (l == 'm') return "umod(udiv(" + e + ", " + inner + "), " + count + ")";
  if (l == 's') return "0";
  return "(" + e + ")";
}

/// Whether the NaN-optimistic pass applies: an element-wise program that touches a 16-bit float.
/// Its values then pass through f16q/bf16q, whose conversions are one instruction each (the
/// CPU's NaN rule costs a select and several integer operations at every conversion, which made
/// half-precision chains such as GELU compute-bound at several times their memory time).
bool nan_optimistic(const FusedProgram& p) {
  auto half = [](Dtype d) { return d == Dtype::Float16 || d == Dtype::BFloat16; };
  bool any = false;
  for (const Instr& in : p.instrs) {
    if (in.kind == InstrKind::Reduce) return false;
    any = any || half(in.dtype);
  }
  for (Dtype d : p.input_dtypes) any = any || half(d);
  return any;
}

/// A NaN test of value `v` of dtype `d` held as its fast type (false for integers and bool).
std::string is_nan_expr(Dtype d, const std::string& v) {
  if (d == Dtype::Float16) return "((" + v + ".b & 0x7fffu) > 0x7c00u)";
  if (d == Dtype::BFloat16) return "((" + v + ".b & 0x7fffu) > 0x7f80u)";
  return is_floating(d) ? "(" + v + " != " + v + ")" : "false";
}

/// `v` (a value of dtype `d`) from the exact type to the fast one or back: the same bits.
std::string retype(Dtype d, const std::string& v, bool to_fast) {
  if (d != Dtype::Float16 && d != Dtype::BFloat16) return v;
  return std::string(cuda_value_type(d, to_fast)) + "{(" + v + ").b}";
}

}  // namespace

// The NaN-optimistic pass (programs that touch float16/bfloat16): each thread first computes its
// elements with f16q/bf16q, whose conversions are the hardware's alone. They give the CPU's bits
// for every value but a NaN (the CPU keeps a NaN's sign and payload by its own rule), and the
// scalar functions are the same templates, so every value that is not NaN is the same. A NaN
// changes an element's other values only through NaN-blind operations (comparisons, isnan,
// select, casts to integers), which see any NaN alike. So when none of the thread's outputs is
// NaN its results are the exact ones; when one is, the thread computes its elements again with
// f16/bf16 (the exact pass, as before). The same bits either way, at one conversion instruction
// where the exact conversion takes about eight.
std::string emit_cuda_kernel(const FusedProgram& p, const std::string& layout, bool vectorized) {
  if (p.is_row_program()) return emit_cuda_row_kernel(p);
  const bool flat = layout != "strided";
  const int vector_width = flat && vectorized ? cuda_vector_width(p, layout) : 1;
  const size_t nin = p.input_dtypes.size(), nout = p.outputs.size();
  const bool optimistic = nan_optimistic(p);
  std::ostringstream os;
  // Elements of any dtype in and out of arrays of 32-bit words (the vectorized layout).
  os << cuda_word_helpers_source();
  os << "__device__ inline u32 opaque32(u32 x) { u32 r; asm volatile(\"mov.b32 %0, %1;\" : \"=r\"(r) : \"r\"(x)); return r; }\n"
        "__device__ inline u64 opaque64(u64 x) { u64 r; asm volatile(\"mov.b64 %0, %1;\" : \"=l\"(r) : \"l\"(x)); return r; }\n"
        "struct FusedArgs { u64 p[" << kCudaFusedMaxArgs << "]; i64 n; i64 nd; i64 shape[MAXD]; i64 st["
     << kCudaFusedMaxArgs << "][MAXD]; };\n"
        "extern \"C\" __global__ void k(FusedArgs a) {\n";
  for (size_t i = 0; i < nin; ++i)
    os << "  const " << cuda_type_name(p.input_dtypes[i]) << "* x" << i << " = (const " << cuda_type_name(p.input_dtypes[i])
       << "*)a.p[" << i << "];\n";
  for (size_t o = 0; o < nout; ++o)
    os << "  " << cuda_type_name(p.output_dtype(o)) << "* y" << o << " = (" << cuda_type_name(p.output_dtype(o)) << "*)a.p["
       << nin + o << "];\n";
  // Constants once, before the loops (v<i> exact, q<i> for the optimistic pass).
  for (size_t i = 0; i < p.instrs.size(); ++i)
    if (p.instrs[i].kind == InstrKind::Constant) {
      os << "  const " << cuda_type_name(p.instrs[i].dtype) << " v" << i << " = " << literal(p.instrs[i]) << ";\n";
      if (optimistic)
        os << "  const " << cuda_value_type(p.instrs[i].dtype, true) << " q" << i << " = " << literal(p.instrs[i], true)
           << ";\n";
    }
  // The program's lines for one element: inputs read as in<k> (fast: fin<k>), outputs assigned
  // through `store(o, value)`, which the layouts define (none without it).
  auto body = [&](const std::string& indent, const std::function<std::string(size_t, const std::string&)>& store,
                  bool fast = false) {
    const char* v = fast ? "q" : "v";
    std::ostringstream b;
    for (size_t i = 0; i < p.instrs.size(); ++i) {
      const Instr& in = p.instrs[i];
      if (in.kind == InstrKind::Constant) continue;
      // Reductions only occur in row programs (emit_cuda_row_kernel); cuda_expr gives nothing for them.
      b << indent << "const " << cuda_value_type(in.dtype, fast) << " " << v << i << " = "
        << (in.kind == InstrKind::Input ? std::string(fast ? "fin" : "in") + std::to_string(in.index)
                                        : cuda_expr(p, static_cast<int>(i), fast, v))
        << ";\n";
    }
    if (store)
      for (size_t o = 0; o < nout; ++o) b << indent << store(o, v + std::to_string(p.outputs[o])) << ";\n";
    return b.str();
  };
  // Fast values in<k> -> fin<k>, and whether any output of the optimistic pass is NaN.
  auto fast_inputs = [&](const std::string& indent) {
    std::string t;
    for (size_t i = 0; i < nin; ++i)
      t += indent + "const " + cuda_value_type(p.input_dtypes[i], true) + " fin" + std::to_string(i) + " = " +
           retype(p.input_dtypes[i], "in" + std::to_string(i), true) + ";\n";
    return t;
  };
  auto any_nan = [&]() {
    std::string t;
    for (size_t o = 0; o < nout; ++o)
      t += (o ? " || " : "") + is_nan_expr(p.output_dtype(o), "q" + std::to_string(p.outputs[o]));
    return t;
  };
  auto store_direct = [](size_t o, const std::string& v) { return "y" + std::to_string(o) + "[i] = " + v; };
  if (flat && vector_width > 1) {
    // Each thread owns `vector_width` consecutive elements, moved as 16-byte vectors (every
    // contiguous pointer is 16-byte aligned: the host checks). The vectors land in arrays of
    // 32-bit words and elements are packed and unpacked with shifts at constant positions, so
    // everything stays in registers (an element array written through a uint4 pointer would
    // go to local memory for 1- and 2-byte types). All loads come before any store, so an
    // output that reuses an input's buffer is safe. The tail of the last thread goes element
    // by element.
    const int w = vector_width;
    auto words = [&](Dtype d) { return w * static_cast<int>(size_of(d)) / 4; };
    // 'r' inputs: the vector at base % inner (inner is a multiple of w: whole and aligned);
    // 'q' and 'm' inputs: one value for the thread's w elements (they share a row or a channel).
    auto scalar = [&](size_t i) { return layout[i] == 's' || layout[i] == 'q' || layout[i] == 'm'; };
    auto at = [&](size_t i, const std::string& e) { return flat_element(layout[i], i, e); };
    os << "  const i64 base = gid() * " << w << ";\n  if (base >= a.n) return;\n";
    for (size_t i = 0; i < nin; ++i) {
      if (scalar(i)) {
        os << "  const " << cuda_type_name(p.input_dtypes[i]) << " s" << i << " = x" << i << "[" << at(i, "base")
           << "];\n";
        continue;
      }
      os << "  u32 w" << i << "[" << words(p.input_dtypes[i]) << "] = {};\n";
    }
    for (size_t o = 0; o < nout; ++o) os << "  u32 r" << o << "[" << words(p.output_dtype(o)) << "] = {};\n";
    os << "  const bool whole = base + " << w << " <= a.n;\n  if (whole) {\n";
    for (size_t i = 0; i < nin; ++i) {
      if (scalar(i)) continue;
      os << "    #pragma unroll\n    for (int q = 0; q < " << words(p.input_dtypes[i]) / 4 << "; ++q) {\n"
         << "      const uint4 v = ((const uint4*)(x" << i << " + " << at(i, "base") << "))[q];\n"
         << "      w" << i << "[4 * q] = v.x; w" << i << "[4 * q + 1] = v.y; w" << i << "[4 * q + 2] = v.z; w" << i
         << "[4 * q + 3] = v.w;\n    }\n";
    }
    // Constant trip counts everywhere: a runtime index into the word arrays would put them in
    // local memory.
    os << "  } else {\n    #pragma unroll\n    for (int j = 0; j < " << w << "; ++j) {\n      if (base + j >= a.n) break;\n";
    for (size_t i = 0; i < nin; ++i)
      if (!scalar(i)) os << "      pack(w" << i << ", j, x" << i << "[" << at(i, "base + j") << "]);\n";
    os << "    }\n  }\n";
    auto read_inputs = [&](const std::string& indent) {
      std::string t;
      for (size_t i = 0; i < nin; ++i) {
        const char* ty = cuda_type_name(p.input_dtypes[i]);
        t += indent + "const " + ty + " in" + std::to_string(i) + " = " +
             (scalar(i) ? "s" + std::to_string(i) : "unpack<" + std::string(ty) + ">(w" + std::to_string(i) + ", j)") + ";\n";
      }
      return t;
    };
    // The exact pass over the thread's elements (`indent` deep).
    auto exact_pass = [&](const std::string& I) {
      std::string t;
      for (size_t o = 0; o < nout; ++o) t += paired_cast_decl(p, o, w, I);
      t += I + "#pragma unroll\n" + I + "for (int j = 0; j < " + std::to_string(w) + "; ++j) {\n";
      t += read_inputs(I + "  ");
      t += body(I + "  ", nullptr);
      for (size_t o = 0; o < nout; ++o) t += paired_cast_pack(p, o, w, "r" + std::to_string(o), "j", I + "  ");
      t += I + "}\n";
      for (size_t o = 0; o < nout; ++o) t += paired_cast_finish(p, o, w, "r" + std::to_string(o), I);
      return t;
    };
    if (optimistic) {
      os << "  bool nan_out = false;\n  #pragma unroll\n  for (int j = 0; j < " << w << "; ++j) {\n"
         << read_inputs("    ") << fast_inputs("    ") << body("    ", nullptr, true);
      for (size_t o = 0; o < nout; ++o) os << "    pack(r" << o << ", j, q" << p.outputs[o] << ");\n";
      os << "    nan_out = nan_out || " << any_nan() << ";\n  }\n  if (nan_out) {\n";
      for (size_t o = 0; o < nout; ++o)
        os << "    #pragma unroll\n    for (int q = 0; q < " << words(p.output_dtype(o)) << "; ++q) r" << o << "[q] = 0u;\n";
      os << exact_pass("    ") << "  }\n";
    } else {
      os << exact_pass("  ");
    }
    os << "  if (whole) {\n";
    for (size_t o = 0; o < nout; ++o)
      os << "    #pragma unroll\n    for (int q = 0; q < " << words(p.output_dtype(o)) / 4 << "; ++q)\n"
         << "      ((uint4*)(y" << o << " + base))[q] = make_uint4(r" << o << "[4 * q], r" << o << "[4 * q + 1], r" << o
         << "[4 * q + 2], r" << o << "[4 * q + 3]);\n";
    os << "  } else {\n    #pragma unroll\n    for (int j = 0; j < " << w << "; ++j) {\n      if (base + j >= a.n) break;\n";
    for (size_t o = 0; o < nout; ++o)
      os << "      y" << o << "[base + j] = unpack<" << cuda_type_name(p.output_dtype(o)) << ">(r" << o << ", j);\n";
    os << "    }\n  }\n}\n";
    return os.str();
  }
  // One element: the optimistic pass stores its outputs unless one is NaN, then the exact pass.
  auto element = [&](const std::string& I) {
    if (!optimistic) return body(I, store_direct);
    std::string t = fast_inputs(I) + body(I, nullptr, true) + I + "if (!(" + any_nan() + ")) {\n";
    for (size_t o = 0; o < nout; ++o)
      t += I + "  y" + std::to_string(o) + "[i] = " + retype(p.output_dtype(o), "q" + std::to_string(p.outputs[o]), false) + ";\n";
    return t + I + "} else {\n" + body(I + "  ", store_direct) + I + "}\n";
  };
  if (flat) {
    // Four elements a thread, blockDim apart (coalesced); every load before any store, so an
    // output that reuses an input's buffer is safe and the loads are in flight together.
    os << "  const i64 base = bid() * (i64)(blockDim.x * 4) + threadIdx.x;\n";
    for (size_t i = 0; i < nin; ++i) os << "  " << cuda_type_name(p.input_dtypes[i]) << " l" << i << "[4];\n";
    os << "  #pragma unroll\n  for (int j = 0; j < 4; ++j) {\n    const i64 i = base + (i64)j * blockDim.x;\n"
          "    if (i < a.n) {\n";
    for (size_t i = 0; i < nin; ++i) os << "      l" << i << "[j] = x" << i << "[" << flat_element(layout[i], i, "i") << "];\n";
    os << "    }\n  }\n  #pragma unroll\n  for (int j = 0; j < 4; ++j) {\n    const i64 i = base + (i64)j * blockDim.x;\n"
          "    if (i >= a.n) break;\n";
    for (size_t i = 0; i < nin; ++i) os << "    const " << cuda_type_name(p.input_dtypes[i]) << " in" << i << " = l" << i << "[j];\n";
    os << element("    ") << "  }\n}\n";
  } else {
    os << "  const i64 i = gid();\n  if (i >= a.n) return;\n  i64 r = i";
    for (size_t k = 0; k < nin; ++k) os << ", o" << k << " = 0";
    os << ";\n  for (int d = (int)a.nd - 1; d >= 0; --d) {\n    const i64 c = umod(r, a.shape[d]);\n    r = udiv(r, a.shape[d]);\n";
    for (size_t k = 0; k < nin; ++k) os << "    o" << k << " += c * a.st[" << k << "][d];\n";
    os << "  }\n  {\n";
    for (size_t k = 0; k < nin; ++k)
      os << "    const " << cuda_type_name(p.input_dtypes[k]) << " in" << k << " = x" << k << "[o" << k << "];\n";
    os << element("    ") << "  }\n}\n";
  }
  return os.str();
}

char cuda_flat_layout(const std::vector<int64_t>& shape, const std::vector<int64_t>& st, int64_t& inner, int64_t* count) {
  const int nd = static_cast<int>(shape.size());
  // 'r': from the last axis, strides are row-major over the suffix, then 0 on every axis before.
  int64_t expected = 1;
  int d = nd - 1;
  for (; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (st[d] != expected) break;
    expected *= shape[d];
  }
  bool rest_zero = true;
  for (int e = d; e >= 0; --e) rest_zero = rest_zero && (shape[e] == 1 || st[e] == 0);
  if (rest_zero && expected > 1) {
    inner = expected;
    return 'r';
  }
  // 'q': from the last axis, strides are 0 (the repeat), then row-major over the prefix.
  int64_t repeat = 1;
  d = nd - 1;
  for (; d >= 0 && (shape[d] == 1 || st[d] == 0); --d) repeat *= shape[d];
  expected = 1;
  for (; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (st[d] != expected) break;
    expected *= shape[d];
  }
  if (repeat <= 1 || expected <= 1) return 0;
  inner = repeat;
  if (d < 0) return 'q';
  // 'm': the row-major block is in the middle, 0 strides (broadcast) on every axis before it.
  for (; d >= 0; --d)
    if (shape[d] != 1 && st[d] != 0) return 0;
  if (count == nullptr) return 0;
  *count = expected;
  return 'm';
}

std::string register_row_layout(bool pipelined, int vectors, int threads, bool exact) {
  return (pipelined ? "pipe" : "regs") + std::to_string(vectors) + (threads == 512 ? "x512" : threads == 32 ? "w" : "") +
         (exact ? "e" : "");
}

size_t CudaFusedKernelParams::hash() const {
  size_t h = hash_mix(hash_program(*program), std::hash<std::string>()(layout));
  return hash_mix(h, vectorized ? 1 : 0);
}

std::string CudaFusedKernelParams::name() const {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016zx", hash_program(*program));
  return std::string("fused|") + hex + "|" + layout + (vectorized ? "|v" : "");
}

std::string CudaFusedKernelParams::source() const {
  if (layout == "rows") return emit_cuda_row_kernel(*program);
  // register_row_layout's names.
  const bool regs = layout.rfind("regs", 0) == 0, pipe = layout.rfind("pipe", 0) == 0;
  if (regs || pipe) {
    size_t end = 0;
    const int vectors = std::stoi(layout.substr(4), &end);
    std::string rest = layout.substr(4 + end);
    const bool exact = !rest.empty() && rest.back() == 'e';
    if (exact) rest.pop_back();
    const int threads = rest == "x512" ? 512 : rest == "w" ? 32 : 256;
    SMELT_ASSERT(rest.empty() || rest == "x512" || rest == "w", "register row layout: " + layout);
    return regs ? emit_cuda_row_register_kernel(*program, vectors, threads, exact)
                : emit_cuda_row_pipelined_kernel(*program, vectors, threads, exact);
  }
  return emit_cuda_kernel(*program, layout, vectorized);
}

}  // namespace smelt::codegen
