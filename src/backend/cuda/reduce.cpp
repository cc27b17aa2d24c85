// CUDA kernels for Reduce (sum/prod/max/min/all/any/mean over any axes) and ArgReduce.
//
// Every output is computed by a fixed sequence of operations that depends only on the shapes and
// strides (never on timing), so results are deterministic. Two layouts:
//  - row: the reduced axes include the input's innermost axis (or there is one output). A block
//    of 256 threads reduces one output (or one of G groups of it, G fixed by the sizes), each
//    thread striding over the reduced positions, then a shared-memory tree; with G > 1 a second
//    kernel combines the G partials of each output in order.
//  - column: the innermost axis is kept. One thread per output walks the reduced positions in
//    order; neighbouring threads read neighbouring addresses (coalesced).
#include <algorithm>
#include <string>

#include "smelt/errors.h"
#include "src/backend/cuda/allocator.h"
#include "src/backend/cuda/cuda.h"
#include "src/backend/cuda/kernels.h"

namespace smelt::cuda {

namespace {

/// Mirrors the device struct RedArgs.
struct RedArgs {
  uint64_t in = 0, out = 0, partial = 0;
  int64_t n_out = 0, count = 0, groups = 1, chunk = 0, divisor = 0;
  Layout kept;  // st[0]: input strides of the kept axes
  Layout red;   // st[0]: input strides of the reduced axes
};

const char* kRedArgsSource =
    "struct RedArgs { u64 in, out, partial; i64 n_out, count, groups, chunk, divisor; Layout kept; Layout red; };\n"
    // Input offset of reduced position r (row-major over the reduced layout).
    "__device__ inline i64 red_offset(const Layout& L, i64 r) {\n"
    "  if (L.nd == 1) return r * L.st[0][0];\n"
    "  i64 o = 0;\n"
    "  for (int d = (int)L.nd - 1; d >= 0; --d) { o += (r % L.shape[d]) * L.st[0][d]; r /= L.shape[d]; }\n"
    "  return o;\n}\n";

int red_code(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return 0;
    case ReduceOp::Prod: return 1;
    case ReduceOp::Max: return 2;
    case ReduceOp::Min: return 3;
    case ReduceOp::All: return 4;
    case ReduceOp::Any: return 5;
    case ReduceOp::Mean: return 0;
  }
  return 0;
}

constexpr unsigned kBlock = 256;

/// Source of the final store: R::finish(acc), then Mean's division by the count.
std::string store_expr(bool mean, const std::string& out_t) {
  if (!mean) return "R::finish(acc)";
  return "op_divide<" + out_t + ">(R::finish(acc), cvt<" + out_t + ", double>((double)a.divisor))";
}

}  // namespace

void eval_reduce(const ReduceParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& in = inputs[0];
  const auto& n = in.node();
  const Dtype dt = in.dtype();
  const bool mean = p.op == ReduceOp::Mean;
  const std::string what = std::string("Reduce(") + reduce_op_name(p.op) + ")";
  if (mean && !is_floating(dt)) throw DtypeError(what + ": needs a float input, got " + dtype_name(dt));
  alloc_output(out);
  const int64_t n_out = out.size();
  if (n_out == 0) return;
  DeviceState& s = state_of(out);

  RedArgs args;
  args.in = n.size() > 0 ? dptr(in) : 0;
  args.out = dptr(out);
  args.n_out = n_out;
  Shape red_shape(n.shape.size(), 1);
  int64_t count = 1;
  for (int ax : p.axes) {
    red_shape[ax] = n.shape[ax];
    count *= n.shape[ax];
  }
  args.count = count;
  args.divisor = std::max<int64_t>(count - p.ddof, 0);
  args.kept = collapse_layout(out.shape(), {&n.strides}, what);
  args.red = collapse_layout(red_shape, {&n.strides}, what);
  if (args.red.nd == 0) {  // nothing reduced (or one element): a 1-long reduction
    args.red.nd = 1;
    args.red.shape[0] = count;
    args.red.st[0][0] = 0;
  }
  // Row layout when the innermost input axis is reduced, or there are few outputs.
  int64_t inner_stride = -1;
  bool inner_reduced = false;
  for (size_t i = 0; i < n.shape.size(); ++i) {
    if (n.shape[i] <= 1) continue;
    const int64_t a = n.strides[i] < 0 ? -n.strides[i] : n.strides[i];
    if (inner_stride < 0 || a < inner_stride || (a == inner_stride && red_shape[i] > 1)) {
      inner_stride = a;
      inner_reduced = red_shape[i] > 1;
    }
  }
  const bool row = inner_reduced || n_out < 1024 || count == 0;
  // Groups from the sizes alone (never from the device): long reductions of few outputs split.
  int64_t groups = 1;
  if (row && n_out < 512 && count >= 65536) groups = std::min<int64_t>((count + 32767) / 32768, 1024);
  args.groups = groups;
  args.chunk = (count + groups - 1) / groups;

  const std::string in_t = device_type(dt), out_t = device_type(out.dtype());
  const std::string red_t = "Red<" + std::to_string(red_code(p.op)) + ", " + in_t + ">";
  const std::string key = "reduce|" + std::string(reduce_op_name(p.op)) + "|" + in_t + "|" + out_t + "|" +
                          (row ? "row" : "col") + (groups > 1 ? "|g" : "");
  const std::string head = std::string(kRedArgsSource) + "typedef " + red_t + " R;\ntypedef R::Acc Acc;\n";

  BufferPtr partial;
  if (groups > 1) {
    // Partials in the accumulator type (at most 8 bytes each).
    partial = allocator(out.device()).allocate(static_cast<size_t>(n_out * groups) * 8);
    args.partial = reinterpret_cast<uint64_t>(partial->ptr);
  }
  if (row) {
    CUfunction fn = get_kernel(s.index, key, [&] {
      std::string b = head;
      b += "extern \"C\" __global__ void k(RedArgs a) {\n"
           "  __shared__ Acc sh[256];\n"
           "  const i64 blk = bid();\n"
           "  const i64 o = blk / a.groups, g = blk % a.groups;\n"
           "  if (o >= a.n_out) return;\n"
           "  i64 base = 0, r = o;\n"
           "  for (int d = (int)a.kept.nd - 1; d >= 0; --d) { base += (r % a.kept.shape[d]) * a.kept.st[0][d]; r /= a.kept.shape[d]; }\n"
           "  const " + in_t + "* x = (const " + in_t + "*)a.in + base;\n"
           "  const i64 lo = g * a.chunk, hi = min(a.count, lo + a.chunk);\n"
           "  Acc acc = R::init();\n"
           "  for (i64 q = lo + threadIdx.x; q < hi; q += blockDim.x) acc = R::step(acc, R::load(x[red_offset(a.red, q)]));\n"
           "  sh[threadIdx.x] = acc;\n"
           "  __syncthreads();\n"
           "  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {\n"
           "    if (threadIdx.x < w) sh[threadIdx.x] = R::step(sh[threadIdx.x], sh[threadIdx.x + w]);\n"
           "    __syncthreads();\n"
           "  }\n"
           "  if (threadIdx.x != 0) return;\n"
           "  acc = sh[0];\n";
      if (groups > 1) b += "  ((Acc*)a.partial)[o * a.groups + g] = acc;\n}\n";
      else b += "  ((" + out_t + "*)a.out)[o] = " + store_expr(mean, out_t) + ";\n}\n";
      return b;
    }, what);
    launch(s, fn, static_cast<uint64_t>(n_out * groups), kBlock, &args, what);
    if (groups > 1) {
      CUfunction fin = get_kernel(s.index, key + "|combine", [&] {
        return head +
               "extern \"C\" __global__ void k(RedArgs a) {\n"
               "  const i64 o = gid();\n  if (o >= a.n_out) return;\n"
               "  const Acc* pp = (const Acc*)a.partial + o * a.groups;\n"
               "  Acc acc = pp[0];\n"
               "  for (i64 g = 1; g < a.groups; ++g) acc = R::step(acc, pp[g]);\n"
               "  ((" + out_t + "*)a.out)[o] = " + store_expr(mean, out_t) + ";\n}\n";
      }, what);
      launch(s, fin, blocks_for(n_out, kBlock), kBlock, &args, what);
    }
    return;
  }
  CUfunction fn = get_kernel(s.index, key, [&] {
    return head +
           "extern \"C\" __global__ void k(RedArgs a) {\n"
           "  const i64 o = gid();\n  if (o >= a.n_out) return;\n"
           "  i64 base = 0, r = o;\n"
           "  for (int d = (int)a.kept.nd - 1; d >= 0; --d) { base += (r % a.kept.shape[d]) * a.kept.st[0][d]; r /= a.kept.shape[d]; }\n"
           "  const " + in_t + "* x = (const " + in_t + "*)a.in + base;\n"
           "  Acc acc = R::init();\n"
           "  for (i64 q = 0; q < a.count; ++q) acc = R::step(acc, R::load(x[red_offset(a.red, q)]));\n"
           "  ((" + out_t + "*)a.out)[o] = " + store_expr(mean, out_t) + ";\n}\n";
  }, what);
  launch(s, fn, blocks_for(n_out, kBlock), kBlock, &args, what);
}

// ---- ArgReduce -------------------------------------------------------------------------------

void eval_argreduce(const ArgReduceParams& p, const std::vector<Array>& inputs, Array& out) {
  const Array& in = inputs[0];
  const auto& n = in.node();
  const Dtype dt = in.dtype();
  const std::string what = p.op == ArgReduceOp::ArgMax ? "ArgReduce(argmax)" : "ArgReduce(argmin)";
  alloc_output(out);
  const int64_t n_out = out.size();
  if (n_out == 0) return;
  DeviceState& s = state_of(out);
  struct ArgArgs {
    uint64_t in, out;
    int64_t n_out, len, stride;
    Layout kept;
  } args{n.size() > 0 ? dptr(in) : 0, dptr(out), n_out, n.shape[p.axis], n.strides[p.axis], {}};
  args.kept = collapse_layout(out.shape(), {&n.strides}, what);
  const std::string t = device_type(dt);
  const bool max = p.op == ArgReduceOp::ArgMax;
  const std::string key = std::string("argreduce|") + (max ? "max" : "min") + (p.last ? "|last|" : "|first|") + t;
  CUfunction fn = get_kernel(s.index, key, [&] {
    // The best changes only for a strictly better value or the first NaN (NumPy's rule);
    // `last` walks backwards with the same rule.
    const std::string better = max ? "x > b" : "x < b";
    return std::string(
               "struct ArgArgs { u64 in, out; i64 n_out, len, stride; Layout kept; };\n"
               "extern \"C\" __global__ void k(ArgArgs a) {\n"
               "  const i64 o = gid();\n  if (o >= a.n_out) return;\n"
               "  i64 base = 0, r = o;\n"
               "  for (int d = (int)a.kept.nd - 1; d >= 0; --d) { base += (r % a.kept.shape[d]) * a.kept.st[0][d]; r /= a.kept.shape[d]; }\n"
               "  const ") + t + "* p = (const " + t + "*)a.in + base;\n"
           "  if (a.len == 0) { ((i64*)a.out)[o] = 0; return; }\n"
           "  const i64 first = " + (p.last ? "a.len - 1" : "0") + ";\n"
           "  calc<" + t + "> b = up(p[first * a.stride]);\n"
           "  i64 best = first;\n"
           "  for (i64 kk = 1; kk < a.len; ++kk) {\n"
           "    const i64 i = " + (p.last ? "a.len - 1 - kk" : "kk") + ";\n"
           "    const calc<" + t + "> x = up(p[i * a.stride]);\n"
           "    if (!(b != b) && ((x != x) || (" + better + "))) { b = x; best = i; }\n"
           "  }\n"
           "  ((i64*)a.out)[o] = best;\n}\n";
  }, what);
  launch(s, fn, blocks_for(n_out, kBlock), kBlock, &args, what);
}

}  // namespace smelt::cuda
