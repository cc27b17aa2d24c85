// The conv_layout pass: activations stay in the layout their convolutions want (oneDNN's channel blocks on the CPU, channels-last on a GPU) across chains of convolutions.
//
// Each float32 CPU convolution that oneDNN runs reorders its input from [N, C, H, W] into the
// blocked layout its primitive wants (nChw16c, ...) and its output back. Between two such
// convolutions the element-wise ops and poolings do not care where a channel lives, so this pass
// keeps their values in the blocked layout, held as the row-major array [N, C/b, H, W, b]: a Conv
// reads and writes it directly (ConvParams::src_block, dst_block), a Pool runs its blocked kernel
// (PoolParams::block), element-wise steps run on the 5-D arrays as they are, and their per-channel,
// per-sample and scalar operands are broadcast in the same layout, and a global pooling (a
// reduction over the spatial axes) reads it through a transposed view. The reorders are left only
// where a chain begins (a convolution's row-major input) and ends (a convolution's row-major
// output). The same primitives run as eagerly, and the element-wise ops and poolings compute the
// same values from the same operands, so the results are bit-identical to the eager path.
//
// On a GPU the same rewrite keeps float16/bfloat16 activations channels-last (b = C, the array
// [N, 1, H, W, C]) between the convolutions the CUDA Conv runs in NHWC through cuDNN
// (src/backend/cuda/channels_last.h), through the element-wise steps of any dtype, the 2-D max
// poolings and the global poolings: cuDNN's transposes around each convolution go away.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "smelt/device.h"
#include "smelt/errors.h"
#include "smelt/ops.h"
#include "src/backend/cpu/dnnl.h"
#include "src/backend/cuda/channels_last.h"
#include "src/compile/passes.h"

namespace smelt::compiler {

namespace {

/// True when value `v` may be held in a layout of step `s`'s device: on the CPU float32 values
/// (the dtype oneDNN's layouts are chosen for), on a GPU any value on that GPU.
bool layout_value(const Tape& tape, const Step& s, int v) {
  const ValueInfo& info = tape.values[v];
  if (s.device.type == Device::Type::Cpu) return is_cpu_f32(info);
  return info.device == s.device;
}

/// Element-wise primitives: one value per element, whatever the layout.
bool elementwise_kind(PrimKind k) { return k == PrimKind::Unary || k == PrimKind::Binary || k == PrimKind::Cast; }

/// Element-wise steps that run on blocked data unchanged: one value per element (the operands
/// of a Binary have the output's shape: broadcasts are their own steps), on values layout_value
/// takes (a Cast, such as a float16 global mean's float32 sum, only on a GPU).
bool is_elementwise_step(const Tape& tape, const Step& s) {
  if (!elementwise_kind(s.prim.kind)) return false;
  if (!layout_value(tape, s, s.outputs[0])) return false;
  for (int in : s.inputs)
    if (!layout_value(tape, s, in) || tape.values[in].shape != tape.values[s.outputs[0]].shape) return false;
  return true;
}

/// The block a pooling step's output may keep when its input has block `b` (0: none): the CPU's
/// blocked kernels take any block of float32 data, the CUDA 2-D max pool channels-last (b = C).
int64_t pool_block(const Tape& tape, const Step& s, int64_t b) {
  if (b == 0 || s.prim.get<PoolParams>().block != 0 || !layout_value(tape, s, s.outputs[0]) ||
      !layout_value(tape, s, s.inputs[0]))
    return 0;
  if (s.device.type == Device::Type::Cpu) return b;
  const ValueInfo& x = tape.values[s.inputs[0]];
  return x.shape.size() == 4 && b == x.shape[1] && cuda::pool_runs_channels_last(x.dtype, x.shape, s.prim.get<PoolParams>())
             ? b
             : 0;
}

/// True when broadcasting `from` to `to` ([N, C, spatial...]) repeats one value per channel, one
/// per sample and channel (a squeeze-and-excitation scale, [N, C, 1, 1]), or one value everywhere
/// (a scalar).
bool per_channel_or_scalar(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] == 1 || (lead + i == 1 && from[i] == to[1])) continue;
    // Per sample: only with the channels given too (the C values of each sample in order).
    if (lead + i == 0 && from[i] == to[0] && from.size() > 1 && from[1] == to[1]) continue;
    return false;
  }
  return true;
}

/// True when the float32 CPU step `s` reduces its input of shape `plain` ([N, C, spatial...])
/// over exactly its spatial axes (a global pooling): it can read the blocked layout through a
/// transposed view (see the rewrite below).
bool reduces_spatial_axes(const Tape& tape, const Step& s, const Shape& plain) {
  if (s.prim.kind != PrimKind::Reduce || !layout_value(tape, s, s.outputs[0]) || !layout_value(tape, s, s.inputs[0]))
    return false;
  const auto& p = s.prim.get<ReduceParams>();
  switch (p.op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
    case ReduceOp::Max:
    case ReduceOp::Min: break;
    case ReduceOp::Prod:  // (these keep the row-major path, untested blocked)
    case ReduceOp::All:
    case ReduceOp::Any: return false;
  }
  if (plain.size() < 3 || p.axes.size() != plain.size() - 2) return false;
  for (size_t i = 0; i < p.axes.size(); ++i)
    if (p.axes[i] != static_cast<int>(i) + 2) return false;
  return true;
}

/// An operand of a blocked element-wise step that is not itself a blocked value but can be given
/// in the layout cheaply: the broadcast of a scalar or of per-channel values (re-broadcast in
/// the blocked layout), or a constant (copied into it once, now).
bool adaptable(const Tape& tape, const ValueGraph& g, int v) {
  const int p = g.producer[v];
  if (p >= 0 && tape.steps[p].prim.kind == PrimKind::Broadcast)
    return per_channel_or_scalar(tape.values[tape.steps[p].inputs[0]].shape, tape.values[v].shape);
  return g.is_constant[v] != 0;
}

}  // namespace

void keep_blocked_layouts(Tape& tape) {
  const ValueGraph g = value_graph(tape);
  const size_t n_values = tape.values.size(), n_steps = tape.steps.size();

  // 1. The blocks each convolution's primitive wants: on the CPU oneDNN's (at the thread count
  // compiling now; a call at another count whose primitive wants other layouts reorders inside
  // the Conv), on a GPU channels-last (b = C) where the CUDA Conv runs it so.
  std::vector<int64_t> want_src(n_steps, 0), want_dst(n_steps, 0);
  bool any_want = false;
  for (size_t i = 0; i < n_steps; ++i) {
    const Step& s = tape.steps[i];
    if (s.prim.kind != PrimKind::Conv) continue;
    const auto& p = s.prim.get<ConvParams>();
    const ValueInfo &x = tape.values[s.inputs[0]], &y = tape.values[s.outputs[0]];
    if (p.src_block != 0 || p.dst_block != 0) continue;
    if (s.device.type == Device::Type::Cuda) {
      const Shape w = p.packed_weight.empty() ? tape.values[s.inputs[1]].shape : Shape(p.packed_weight);
      if (x.device != s.device || y.device != s.device || x.dtype != y.dtype ||
          !cuda::conv_runs_channels_last(y.dtype, x.shape, w, p))
        continue;
      want_src[i] = x.shape[1];
      want_dst[i] = y.shape[1];
      any_want = true;
      continue;
    }
    if (!cpu::dnnl_enabled() || !is_cpu_f32(x) || !is_cpu_f32(y)) continue;
    if (!is_cpu_f32(tape.values[s.inputs[1]])) continue;
    const Shape w = p.packed_weight.empty() ? tape.values[s.inputs[1]].shape : Shape(p.packed_weight);
    std::vector<cpu::DnnlAddKind> kinds;
    for (ConvAdd a : p.adds)
      kinds.push_back(a == ConvAdd::Channel ? cpu::DnnlAddKind::Channel : cpu::DnnlAddKind::Tensor);
    cpu::dnnl_conv_blocks(cpu::dnnl_conv_geometry(x.shape, w, y.shape, p), kinds, &want_src[i], &want_dst[i]);
    any_want = any_want || want_src[i] > 0 || want_dst[i] > 0;
  }
  if (!any_want) return;

  // 2. The block each value would have, forward in step order: a convolution's output gets its
  // primitive's, a pooling's and an element-wise step's their blocked inputs' (all equal).
  std::vector<int64_t> block(n_values, 0);
  for (size_t i = 0; i < n_steps; ++i) {
    const Step& s = tape.steps[i];
    const int out = s.outputs[0];
    int64_t b = 0;  // every other step reads and writes row-major values
    if (s.prim.kind == PrimKind::Conv) {
      b = want_dst[i];
    } else if (s.prim.kind == PrimKind::Pool) {
      b = pool_block(tape, s, block[s.inputs[0]]);
    } else if (is_elementwise_step(tape, s)) {
      for (int in : s.inputs) {
        if (block[in] == 0 && adaptable(tape, g, in)) continue;
        b = (block[in] == 0 || (b != 0 && b != block[in])) ? -1 : block[in];
        if (b < 0) break;
      }
      b = std::max<int64_t>(b, 0);
    }
    const Shape& shape = tape.values[out].shape;
    if (b > 0 && shape.size() >= 3 && shape[1] % b == 0 && !g.is_output[out]) block[out] = b;
  }

  // 3. Drop values whose readers cannot take the layout, until every kept value's readers and
  // producer can (a worklist: dropping one value can drop its neighbours).
  std::vector<char> kept(n_values, 0);
  for (size_t v = 0; v < n_values; ++v) kept[v] = block[v] > 0;
  auto fits = [&](int v) {
    const int p = g.producer[v];
    const Step& ps = tape.steps[p];
    if (ps.prim.kind == PrimKind::Pool && !kept[ps.inputs[0]]) return false;
    if (ps.prim.kind == PrimKind::Conv) {  // a residual post-op reads its operand in the output's layout
      const auto& cp = ps.prim.get<ConvParams>();
      for (size_t k = 2; k < ps.inputs.size(); ++k)
        if (cp.adds[k - 2] == ConvAdd::Tensor && (!kept[ps.inputs[k]] || block[ps.inputs[k]] != block[v])) return false;
    }
    if (elementwise_kind(ps.prim.kind))
      for (int in : ps.inputs)
        if (!kept[in] && !(block[in] == 0 && adaptable(tape, g, in))) return false;
    for (int r : g.readers[v]) {
      const Step& rs = tape.steps[r];
      const int out = rs.outputs[0];
      if (rs.prim.kind == PrimKind::Conv) {
        const auto& cp = rs.prim.get<ConvParams>();
        for (size_t k = 0; k < rs.inputs.size(); ++k) {
          if (rs.inputs[k] != v) continue;
          const bool src = k == 0 && want_src[r] == block[v];
          const bool residual = k >= 2 && cp.adds[k - 2] == ConvAdd::Tensor && kept[out] && block[out] == block[v];
          if (!src && !residual) return false;
        }
      } else if (rs.prim.kind == PrimKind::Pool || elementwise_kind(rs.prim.kind)) {
        if (!kept[out]) return false;  // kept only where the step runs on blocked data
      } else if (reduces_spatial_axes(tape, rs, tape.values[v].shape)) {
        // A global pooling reads the blocked data; its output is reshaped back to row-major.
      } else if (ps.prim.kind != PrimKind::Pool) {
        return false;  // any other reader wants row-major data
      }
      // (A pooling's blocked output is given to any other reader row-major, through a copy of
      // the pooled data, smaller than the convolution's output it saves reordering.)
    }
    return true;
  };
  std::vector<int> work;
  for (size_t v = 0; v < n_values; ++v)
    if (kept[v]) work.push_back(static_cast<int>(v));
  while (!work.empty()) {
    const int v = work.back();
    work.pop_back();
    if (!kept[v] || fits(v)) continue;
    kept[v] = 0;
    auto touch = [&](int step) {
      for (int u : tape.steps[step].inputs)
        if (kept[u]) work.push_back(u);
      for (int u : tape.steps[step].outputs)
        if (kept[u]) work.push_back(u);
    };
    touch(g.producer[v]);
    for (int r : g.readers[v]) touch(r);
  }
  bool any = false;
  for (size_t v = 0; v < n_values; ++v) any = any || kept[v];
  if (!any) return;

  // 4. Rewrite: blocked shapes, the layouts on Conv and Pool, and operands in the layout.
  std::vector<Shape> plain(n_values);
  for (size_t v = 0; v < n_values; ++v) {
    plain[v] = tape.values[v].shape;
    if (kept[v]) tape.values[v].shape = blocked_shape(plain[v], block[v]);
  }
  std::map<std::pair<int, int64_t>, int> adapted;  // (operand, block) -> blocked operand
  std::vector<Step> steps;
  steps.reserve(n_steps);
  auto adapt = [&](int v, int64_t b, const Device& device) -> int {
    if (auto it = adapted.find({v, b}); it != adapted.end()) return it->second;
    const Shape to = blocked_shape(plain[v], b);
    const int p = g.producer[v];
    int id;
    int src = -1;  // the scalar or the C values a broadcast repeats
    if (p >= 0 && tape.steps[p].prim.kind == PrimKind::Broadcast)
      src = tape.steps[p].inputs[0];
    else if (p < 0)
      src = channel_constant(tape, v, plain[v]);  // (copied whole, it would take an activation's memory)
    if (src >= 0) {
      // A scalar or per-channel broadcast: channel c = cb * b + lane, so the C values in order,
      // reshaped to [1, C/b, 1..., b] ([N, C/b, 1..., b] for per-sample values), broadcast to
      // the blocked shape.
      const Shape from = tape.values[src].shape;
      int64_t elements = 1;
      for (int64_t d : from) elements *= d;
      if (elements > 1) {
        Shape compact(to.size(), 1);
        compact[1] = to[1];
        compact.back() = b;
        if (from.size() == plain[v].size() && from[0] != 1) compact[0] = from[0];
        const int r = tape.add_value(compact, tape.values[src].dtype, device);
        steps.push_back({make_prim(PrimKind::Reshape, ShapeParams{compact}), {src}, {r}, device});
        src = r;
      }
      id = tape.add_value(to, tape.values[v].dtype, device);
      steps.push_back({make_prim(PrimKind::Broadcast, ShapeParams{to}), {src}, {id}, device});
    } else {
      // Another constant: copied into the blocked layout once, now.
      const Array* c = find_constant(tape, v);
      SMELT_ASSERT(c != nullptr, "conv_layout: an operand to adapt is neither a broadcast nor a constant");
      Shape split{plain[v][0], plain[v][1] / b, b};
      split.insert(split.end(), plain[v].begin() + 2, plain[v].end());
      Axes perm{0, 1};
      for (int i = 3; i < static_cast<int>(split.size()); ++i) perm.push_back(i);
      perm.push_back(2);
      Array blocked = copy(transpose(reshape(*c, split), perm));
      blocked.eval();
      id = tape.add_value(to, c->dtype(), c->device());
      tape.constants.emplace_back(id, blocked);
    }
    adapted.emplace(std::make_pair(v, b), id);
    return id;
  };
  // A blocked value (a pooling's output) for a reader that wants it row-major: transposed to
  // [N, C/b, b, spatial...] (a view) and reshaped to [N, C, spatial...] (a copy), once.
  std::map<int, int> unblocked;
  auto row_major = [&](int v, const Device& device) -> int {
    if (auto it = unblocked.find(v); it != unblocked.end()) return it->second;
    const Shape& bs = tape.values[v].shape;
    const int rank = static_cast<int>(bs.size());
    std::vector<int> perm{0, 1, rank - 1};
    Shape ts{bs[0], bs[1], bs[rank - 1]};
    for (int d = 2; d < rank - 1; ++d) {
      perm.push_back(d);
      ts.push_back(bs[d]);
    }
    const int t = tape.add_value(ts, tape.values[v].dtype, device);
    steps.push_back({make_prim(PrimKind::Transpose, PermParams{perm}), {v}, {t}, device});
    const int r = tape.add_value(plain[v], tape.values[v].dtype, device);
    steps.push_back({make_prim(PrimKind::Reshape, ShapeParams{plain[v]}), {t}, {r}, device});
    unblocked.emplace(v, r);
    return r;
  };
  auto reads_blocked_data = [&](const Step& s) {
    return s.prim.kind == PrimKind::Conv ||
           ((s.prim.kind == PrimKind::Pool || elementwise_kind(s.prim.kind)) && kept[s.outputs[0]]);
  };
  // A global pooling reads the blocked value itself unless another reader gets it row-major
  // anyway (a pooling's output that is also flattened): then it reads that copy.
  auto reduces_blocked = [&](const Step& s) {
    if (s.inputs.size() != 1 || !kept[s.inputs[0]] || !reduces_spatial_axes(tape, s, plain[s.inputs[0]])) return false;
    for (int r : g.readers[s.inputs[0]]) {
      const Step& rs = tape.steps[r];
      if (!reads_blocked_data(rs) && !(rs.inputs.size() == 1 && reduces_spatial_axes(tape, rs, plain[s.inputs[0]])))
        return false;
    }
    return true;
  };
  for (size_t i = 0; i < n_steps; ++i) {
    Step s = tape.steps[i];  // a copy: adapt() reads the broadcasts of earlier steps
    const int out = s.outputs[0];
    const bool reads_blocked = reads_blocked_data(s);
    if (!reads_blocked && reduces_blocked(s)) {
      // The global pooling reads the blocked data through a transposed view [N, C/b, b,
      // spatial...]: each (n, c) is a row of the spatial values in their row-major order, so the
      // reduction takes them in the row-major tape's order (over the blocked axes directly it
      // summed in another order: other bits). Its [N, C/b, b, 1...] is then the [N, C, 1...] its
      // readers want, reshaped.
      const int in = s.inputs[0];
      const Shape& bs = tape.values[in].shape;
      const int rank = static_cast<int>(bs.size());
      std::vector<int> perm{0, 1, rank - 1};
      Shape ts{bs[0], bs[1], bs[rank - 1]}, rs{bs[0], bs[1], bs[rank - 1]};
      ReduceParams rp = s.prim.get<ReduceParams>();
      rp.axes.clear();
      for (int d = 2; d < rank - 1; ++d) {
        perm.push_back(d);
        ts.push_back(bs[d]);
        rs.push_back(1);
        rp.axes.push_back(d + 1);
      }
      const int view = tape.add_value(ts, tape.values[in].dtype, s.device);
      steps.push_back({make_prim(PrimKind::Transpose, PermParams{perm}), {in}, {view}, s.device});
      const int reduced = tape.add_value(rs, tape.values[out].dtype, s.device);
      steps.push_back({make_prim(PrimKind::Reduce, std::move(rp)), {view}, {reduced}, s.device});
      steps.push_back({make_prim(PrimKind::Reshape, ShapeParams{tape.values[out].shape}), {reduced}, {out}, s.device});
      continue;
    }
    if (!reads_blocked)
      for (int& in : s.inputs)
        if (kept[in]) in = row_major(in, s.device);
    if (s.prim.kind == PrimKind::Conv) {
      ConvParams p = s.prim.get<ConvParams>();
      p.src_block = kept[s.inputs[0]] ? block[s.inputs[0]] : 0;
      p.dst_block = kept[out] ? block[out] : 0;
      if (p.src_block != 0 || p.dst_block != 0) s.prim = make_prim(PrimKind::Conv, std::move(p));
    } else if (s.prim.kind == PrimKind::Pool && kept[out]) {
      PoolParams p = s.prim.get<PoolParams>();
      p.block = block[out];
      s.prim = make_prim(PrimKind::Pool, std::move(p));
    } else if (kept[out]) {  // an element-wise step
      for (int& in : s.inputs)
        if (!kept[in]) in = adapt(in, block[out], s.device);
    }
    steps.push_back(std::move(s));
  }
  tape.steps = std::move(steps);
  eliminate_dead_steps(tape);  // broadcasts and constants only the blocked steps read before
}

}  // namespace smelt::compiler
