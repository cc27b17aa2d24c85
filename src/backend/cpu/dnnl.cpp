// oneDNN convolutions and products (primitives planned once per shape, thread-count independent) and GEMM tiles (dnnl.h).
#include "src/backend/cpu/dnnl.h"

#if SMELT_HAS_DNNL
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "smelt/errors.h"
#include "src/core/thread_pool.h"

namespace smelt::cpu {

#if !SMELT_HAS_DNNL

bool dnnl_enabled() { return false; }
bool dnnl_conv_f32(const DnnlConv&, const float*, const float*, float*, const std::vector<DnnlAdd>&, int) {
  return false;
}
bool dnnl_pack_conv_weights(const DnnlConv&, const float*, const std::function<float*(size_t)>&, int*) {
  return false;
}
bool dnnl_sgemm_1thread(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*,
                        int64_t) {
  return false;
}
bool dnnl_product_taken(int64_t, int64_t, int64_t) { return false; }
bool dnnl_product_f32(const DnnlProduct&, const float*, const float*, float*, const float*) { return false; }
bool dnnl_pack_product_weights(const DnnlProduct&, const float*, const std::function<float*(size_t)>&, int*) {
  return false;
}
std::string dnnl_product_impl(const DnnlProduct&) { return ""; }
int64_t dnnl_conv_primitives_created() { return 0; }
bool dnnl_conv_bias_free(const DnnlConv&) { return false; }
bool dnnl_conv_blocks(const DnnlConv&, const std::vector<DnnlAddKind>&, int64_t* src_block, int64_t* dst_block) {
  *src_block = *dst_block = 0;
  return false;
}
int64_t dnnl_activation_reorders() { return 0; }
std::string dnnl_conv_impl(const DnnlConv&, const std::vector<DnnlAdd>&) { return ""; }

#else

namespace {

using dnnl::memory;

/// The hash of the plan and bound-call caches' keys: sequences of 64-bit words.
struct WordsHash {
  template <class Words>
  size_t operator()(const Words& words) const {
    size_t h = 0;
    for (int64_t x : words) h = h * 1000003u ^ static_cast<size_t>(x);
    return h;
  }
};

/// Debian's libdnnl is built with the OpenMP runtime: a primitive runs on omp_get_max_threads()
/// of the calling thread (a per-thread setting), read when the primitive is created and when it
/// runs. This sets it to smelt's count for one call and puts the caller's value back.
class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) {
    if (saved_ != n) omp_set_num_threads(n);
  }
  ~OmpThreads() {
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
  }
  void set(int n) {
    if (omp_get_max_threads() != n) omp_set_num_threads(n);
  }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

dnnl::engine& engine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);  // never destroyed: exit-safe
  return *e;
}

/// CPU streams run primitives synchronously on the calling thread's OpenMP team; one per thread
/// keeps concurrent callers apart.
dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

/// A growing 64-byte-aligned buffer kept by each thread (blocked copies of activations and
/// weights, the primitive's scratchpad): large convolutions would otherwise map and fault fresh
/// pages on every call.
class Scratch {
 public:
  ~Scratch() { std::free(p_); }
  void* get(size_t bytes) {
    if (bytes <= size_) return p_;
    std::free(p_);
    size_ = (bytes + 63) / 64 * 64;
    p_ = std::aligned_alloc(64, size_);
    if (!p_) {
      size_ = 0;
      throw OutOfMemory("conv: cannot allocate " + std::to_string(bytes) + " bytes for oneDNN's blocked layout");
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t size_ = 0;
};

enum Buf { kSrc, kWei, kDst, kScratchpad, kBufs };
Scratch& scratch(Buf b) {
  thread_local Scratch s[kBufs];
  return s[b];
}

bool same_bytes(const memory::desc& a, const memory::desc& b);

/// A reorder between two layouts, made when first executed: creating one generates code. None
/// between layouts that place every element at the same offset.
class LazyReorder {
 public:
  void set(const memory::desc& from, const memory::desc& to) {
    from_ = from;
    to_ = to;
    needed_ = !same_bytes(from, to);
  }
  explicit operator bool() const { return needed_; }
  const dnnl::reorder* operator->() const {
    std::call_once(made_, [&] { r_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), from_, engine(), to_)); });
    return &r_;
  }

 private:
  memory::desc from_, to_;
  bool needed_ = false;
  mutable std::once_flag made_;
  mutable dnnl::reorder r_;
};

/// Everything a convolution of one geometry, add list and thread count needs: the primitive
/// (its layouts chosen by oneDNN: `any`), and reorders between smelt's row-major layout and
/// the primitive's where they differ. The primitive and the reorders are created when first
/// executed (oneDNN generates their code then, about a millisecond each): a plan made only to be
/// compared (the 1-thread plan beside a 2-thread one, the plain plan beside one with post-ops)
/// or to pack weights costs its primitive descriptor alone. ResNet-18's compile spent 78 ms
/// creating primitives, most of them never run.
struct ConvPlan {
  dnnl::convolution_forward::primitive_desc pd;
  const dnnl::convolution_forward& conv() const {
    std::call_once(conv_made_, [&] { conv_ = dnnl::convolution_forward(pd); });
    return conv_;
  }
  memory::desc src_user, wei_user, dst_user, src, wei, dst, scratchpad;
  memory::desc bias;         // a Channel add's operand as a binary post-op's source: [1, C, 1, ...]
  memory::desc native_bias;  // as the primitive's own bias ([C]); zero when the plan has none
  LazyReorder src_in, wei_in, dst_in, dst_out;
  size_t scratch_bytes = 0;
  std::string impl;  // oneDNN's name of the implementation, for tests
  // A plan made for more than one thread that could give other bits than the geometry's 1-thread
  // plan (plan_for decides once): calls run `one_thread` on one thread instead (null: no oneDNN
  // plan at one thread, so smelt's kernel runs, as it does at one thread).
  bool serial = false;
  std::shared_ptr<const ConvPlan> one_thread;

 private:
  mutable std::once_flag conv_made_;
  mutable dnnl::convolution_forward conv_;
};

/// The argument through which Channel add i of a plan reaches its primitive: the bias, or the
/// source of its binary post-op (post-ops count from the first add the bias does not take).
int channel_add_arg(const ConvPlan& plan, size_t i) {
  const bool native = !plan.native_bias.is_zero();
  if (native && i == 0) return DNNL_ARG_BIAS;
  return DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i) - (native ? 1 : 0)) | DNNL_ARG_SRC_1;
}

/// The layout of Channel add i's operand (as channel_add_arg).
const memory::desc& channel_add_desc(const ConvPlan& plan, size_t i) {
  return i == 0 && !plan.native_bias.is_zero() ? plan.native_bias : plan.bias;
}

memory::dims dims_of(const DnnlConv& c, int64_t n, int64_t ch, const int64_t* sp) {
  memory::dims d{n, ch};
  for (int i = 3 - c.spatial; i < 3; ++i) d.push_back(sp[i]);
  return d;
}

memory::dims spatial_of(const DnnlConv& c, const int64_t* v, int64_t minus) {
  memory::dims d;
  for (int i = 3 - c.spatial; i < 3; ++i) d.push_back(v[i] - minus);
  return d;
}

memory::format_tag plain_tag(size_t rank) {
  switch (rank) {
    case 3: return memory::format_tag::abc;
    case 4: return memory::format_tag::abcd;
    case 5: return memory::format_tag::abcde;
    case 6: return memory::format_tag::abcdef;
  }
  SMELT_ASSERT(false, "conv: oneDNN tensor of unexpected rank");
  return memory::format_tag::undef;
}

/// oneDNN's tag for the channel-blocked layout nC(d)(h)w{b}c of a tensor of `rank` axes.
memory::format_tag blocked_tag(size_t rank, int64_t b) {
  using t = memory::format_tag;
  switch (b) {
    case 4: return rank == 3 ? t::nCw4c : rank == 4 ? t::nChw4c : t::nCdhw4c;
    case 8: return rank == 3 ? t::nCw8c : rank == 4 ? t::nChw8c : t::nCdhw8c;
    case 16: return rank == 3 ? t::nCw16c : rank == 4 ? t::nChw16c : t::nCdhw16c;
  }
  SMELT_ASSERT(false, "conv: unsupported channel block " + std::to_string(b));
  return t::undef;
}

/// oneDNN's tag for channels-last (n(d)(h)wc) data of `rank` axes.
memory::format_tag channels_last_tag(size_t rank) {
  using t = memory::format_tag;
  return rank == 3 ? t::acb : rank == 4 ? t::acdb : t::acdeb;
}

/// The layout smelt holds an activation in: row-major (b = 0), channels-last (b = C: the array
/// [N, 1, spatial..., C] is n(d)(h)wc), or blocked by b in {4, 8, 16} channels.
memory::desc user_desc(const memory::dims& d, int64_t b) {
  const memory::format_tag tag =
      b == 0 ? plain_tag(d.size()) : b == d[1] ? channels_last_tag(d.size()) : blocked_tag(d.size(), b);
  return memory::desc(d, memory::data_type::f32, tag);
}

/// The block of `md` as smelt holds it: C for channels-last (what oneDNN's brgemm convolutions
/// use), b for nC..{b}c with b in {4, 8, 16} dividing the channels (no padded lanes), else 0.
/// A block of all C channels (nChw16c with C = 16: oneDNN's first-layer kernel writes it) is
/// channels-last too.
int64_t block_of(const memory::desc& md) {
  const memory::dims d = md.dims();
  if (d.size() < 3 || d.size() > 5) return 0;
  if (md == user_desc(d, d[1])) return d[1];
  for (int64_t b : {4, 8, 16}) {
    if (d[1] % b != 0) continue;
    if (b == d[1] ? md == memory::desc(d, memory::data_type::f32, blocked_tag(d.size(), b)) : md == user_desc(d, b))
      return b;
  }
  return 0;
}

/// Whether `a` and `b` place every element at the same offset (equal, or both channels-last).
bool same_bytes(const memory::desc& a, const memory::desc& b) {
  if (a == b) return true;
  if (a.dims() != b.dims()) return false;
  const int64_t block = block_of(a);
  return block != 0 && block == block_of(b);
}

/// Whether `c` is a first layer that oneDNN's direct kernel runs from a row-major source: a few
/// input channels (an image's 3), which its channel-blocked kernels pad to a block and the brgemm
/// ones read from channels-last data through an extra reorder of the input.
bool first_layer(const DnnlConv& c) { return c.groups == 1 && c.in_ch < 16; }

std::atomic<int64_t> g_reorders{0};

/// Whether a plan's implementation adds its own bias after the whole reduction, as one float32
/// addition `conv + bias` (the separate add's bits, NaN payloads included): oneDNN's brgemm
/// convolutions (brgconv, brgconv_1x1, brdgmm_dw) do, checked bit for bit over MobileNet and
/// ResNet geometries at 1-3 threads (tests/backend/cpu/dnnl_test.cpp). Its older JIT kernels
/// (jit:avx512_core, jit_1x1, jit_dw, jit:avx2) start the sum from the bias and gave other bits
/// on half the elements; gemm:jit another NaN payload.
bool bias_after_reduction(const std::string& impl) {
  return impl.rfind("brgconv", 0) == 0 || impl.rfind("brdgmm", 0) == 0;
}

/// Plans a convolution; nullptr when oneDNN has no implementation for it. `native_bias`: the
/// first add, a Channel add, is the primitive's bias argument instead of a binary post-op.
std::shared_ptr<ConvPlan> make_plan(const DnnlConv& c, const std::vector<DnnlAddKind>& adds, bool native_bias) {
  using dt = memory::data_type;
  const memory::dims src_d = dims_of(c, c.batch, c.in_ch, c.in);
  const memory::dims dst_d = dims_of(c, c.batch, c.out_ch, c.out);
  memory::dims wei_d;
  if (c.groups > 1) wei_d.push_back(c.groups);
  wei_d.push_back(c.out_ch / c.groups);
  wei_d.push_back(c.in_ch / c.groups);
  for (int i = 3 - c.spatial; i < 3; ++i) wei_d.push_back(c.k[i]);

  auto plan = std::make_shared<ConvPlan>();
  plan->src_user = user_desc(src_d, c.src_block);
  plan->dst_user = user_desc(dst_d, c.dst_block);
  plan->wei_user = memory::desc(wei_d, dt::f32, plain_tag(wei_d.size()));
  memory::dims bias_d(dst_d.size(), 1);
  bias_d[1] = c.out_ch;
  plan->bias = memory::desc(bias_d, dt::f32, plain_tag(bias_d.size()));
  if (native_bias) plan->native_bias = memory::desc({c.out_ch}, dt::f32, memory::format_tag::a);

  dnnl::post_ops po;
  for (size_t i = native_bias ? 1 : 0; i < adds.size(); ++i) {
    switch (adds[i]) {
      case DnnlAddKind::Channel: po.append_binary(dnnl::algorithm::binary_add, plan->bias); break;
      case DnnlAddKind::Tensor: po.append_sum(1.0f); break;
    }
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per-call scratch: concurrent callers

  auto any = [](const memory::dims& d) { return memory::desc(d, dt::f32, memory::format_tag::any); };
  auto make_pd = [&](const memory::desc& src, const memory::desc& dst) {
    const auto kind = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::convolution_direct;
    const memory::dims st = spatial_of(c, c.stride, 0), dil = spatial_of(c, c.dil, 1),
                       lo = spatial_of(c, c.pad_lo, 0), hi = spatial_of(c, c.pad_hi, 0);
    if (native_bias)
      return dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(kind, alg, src, any(wei_d), plan->native_bias, dst, st, dil, lo, hi), attr,
          engine());
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(kind, alg, src, any(wei_d), dst, st, dil, lo, hi), attr, engine());
  };
  try {
    plan->pd = make_pd(any(src_d), any(dst_d));
    // A first layer reads the row-major source directly where oneDNN's direct ("jit:") kernel
    // takes it and writes channels-last data (a block of all the output channels: nChw16c with 16
    // channels, nChw8c with 8, is n(h)wc), asked for as `any` and then as that block: on an AMD
    // EPYC (AVX-512, 2 threads) MobileNetV3's 3-to-16 stem at 224 x 224 took 29 us against 39 us
    // of brgemm convolution and 25 us of input reorder, its 3-to-8 stem at 128 x 128 21 us against
    // 20 + 12. The choice depends on the geometry alone, never on the caller's layouts, so eager
    // and compiled calls run the same kernel.
    if (first_layer(c)) {
      std::vector<memory::desc> dsts{any(dst_d)};
      if (c.out_ch == 4 || c.out_ch == 8 || c.out_ch == 16)
        dsts.push_back(memory::desc(dst_d, dt::f32, blocked_tag(dst_d.size(), c.out_ch)));
      for (const memory::desc& dst : dsts) {
        try {
          auto plain = make_pd(memory::desc(src_d, dt::f32, plain_tag(src_d.size())), dst);
          if (std::string(plain.impl_info_str()).rfind("jit:", 0) == 0 && block_of(plain.dst_desc()) == c.out_ch) {
            plan->pd = plain;
            break;
          }
        } catch (const dnnl::error&) {
          // no direct kernel for these layouts: the next, or the first plan
        }
      }
    }
    const auto& pd = plan->pd;
    plan->src = pd.src_desc();
    plan->wei = pd.weights_desc();
    plan->dst = pd.dst_desc();
    plan->impl = pd.impl_info_str();
    plan->scratchpad = pd.scratchpad_desc();
    plan->scratch_bytes = plan->scratchpad.get_size();
    plan->src_in.set(plan->src_user, plan->src);
    plan->wei_in.set(plan->wei_user, plan->wei);
    plan->dst_in.set(plan->dst_user, plan->dst);
    plan->dst_out.set(plan->dst, plan->dst_user);
  } catch (const dnnl::error&) {
    return nullptr;  // no implementation (or a geometry oneDNN rejects): smelt's kernel runs
  }
  return plan;
}

std::atomic<int64_t> g_created{0};

/// oneDNN's direct and brgemm convolutions split the work over outputs and never inside one
/// output's reduction; its GEMM-based ones ("gemm:jit", an im2col and a threaded sgemm) and the
/// reference kernels may split the reduction by the thread count (found on AVX2 with a grouped
/// convolution: other bits at 3 threads). Those run on one thread.
bool splits_outputs_only(const std::string& impl) {
  return impl.find("gemm:") == std::string::npos && impl.rfind("ref", 0) != 0 && impl.find(":ref") == std::string::npos;
}

/// Whether two plans run the same implementation on the same layouts. oneDNN's brgemm
/// convolutions choose their blocking for the thread count they are planned under, and another
/// blocking may sum in another order: on an AMD EPYC (AVX-512), a 7 x 7, 512-to-64 channel 3 x 3
/// convolution took output-channel blocks of 64 at 1 and 4 threads and of 32 at 2 and 3, with
/// other bits. Its layouts show the blocking (over 20 ResNet and MobileNet geometries at 2-8
/// threads, plans with the 1-thread plan's layouts always gave its bits).
bool same_blocking(const ConvPlan& a, const ConvPlan& b) {
  return a.impl == b.impl && a.src == b.src && a.wei == b.wei && a.dst == b.dst;
}

/// Plans by (geometry, add kinds, threads): a primitive's blocking is chosen for the thread
/// count it is created under, and creating one (JIT code generation) costs far more than a call.
/// A plan for more than one thread is checked once against the 1-thread plan (ConvPlan::serial).
std::shared_ptr<const ConvPlan> plan_for(const DnnlConv& c, const std::vector<DnnlAddKind>& adds, int threads) {
  std::vector<int64_t> key{c.spatial, c.batch, c.in_ch, c.out_ch, c.groups, threads, c.src_block, c.dst_block};
  for (const int64_t* a : {c.in, c.out, c.k, c.stride, c.pad_lo, c.pad_hi, c.dil}) key.insert(key.end(), a, a + 3);
  for (const DnnlAddKind a : adds) key.push_back(100 + static_cast<int64_t>(a));
  static std::mutex mu;
  static auto* cache = new std::unordered_map<std::vector<int64_t>, std::shared_ptr<const ConvPlan>, WordsHash>();
  {
    std::lock_guard lock(mu);
    if (auto it = cache->find(key); it != cache->end()) return it->second;
  }
  // Planned outside the lock (JIT compilation takes milliseconds); two threads planning the same
  // key build equal primitives and the first one stays. A first Channel add is the primitive's
  // own bias where the plain plan's implementation adds it after the reduction (free there: a
  // per-channel binary post-op made MobileNetV3's convolutions 1.5x slower, 127 -> 192 us on one
  // thread, AMD EPYC); otherwise every add is a post-op.
  std::shared_ptr<const ConvPlan> plain;
  if (!adds.empty()) plain = plan_for(c, {}, threads);
  const bool native_bias = plain && adds[0] == DnnlAddKind::Channel && bias_after_reduction(plain->impl);
  std::shared_ptr<ConvPlan> plan = adds.empty() || plain ? make_plan(c, adds, native_bias) : nullptr;
  g_created.fetch_add(1, std::memory_order_relaxed);
  // Post-ops can make oneDNN pick another implementation (a grouped convolution with a bias and a
  // residual falls to its reference kernel): then the adds would not be the separate float32
  // additions of the plain convolution's result. Such a plan is declined, and the caller runs the
  // plain convolution and the adds.
  if (plan && !adds.empty()) {
    if (plain->impl != plan->impl) plan = nullptr;
    // The sum post-op (a residual) matches a separate add, bit for bit, with the brgemm-based
    // convolutions; the older JIT kernel gave other bits on a grouped convolution
    // (tests/backend/cpu/dnnl_test.cpp), so it does not apply the sum after the whole reduction.
    const bool residual = std::count(adds.begin(), adds.end(), DnnlAddKind::Tensor) > 0;
    if (plan && residual && plan->impl.rfind("brgconv", 0) != 0) plan = nullptr;
  }
  if (plan && threads > 1) {
    OmpThreads single(1);  // planned under one thread, as a 1-thread call plans it
    plan->one_thread = plan_for(c, adds, 1);
    plan->serial = !splits_outputs_only(plan->impl) || !plan->one_thread || !same_blocking(*plan, *plan->one_thread);
  }
  std::lock_guard lock(mu);
  constexpr size_t kMaxPlans = 1024;  // a model has tens of geometries; shapeless callers more
  if (cache->size() >= kMaxPlans) cache->clear();
  return cache->emplace(std::move(key), std::move(plan)).first->second;
}

bool supported(const DnnlConv& c, const std::vector<DnnlAddKind>& adds) {
  if (c.spatial < 1 || c.spatial > 3 || c.batch <= 0 || c.in_ch <= 0 || c.out_ch <= 0 || c.groups <= 0) return false;
  if (is_matrix_vector(c)) return false;
  for (const auto& [b, ch] : {std::pair{c.src_block, c.in_ch}, std::pair{c.dst_block, c.out_ch}})
    if (b != 0 && b != ch && ((b != 4 && b != 8 && b != 16) || ch % b != 0)) return false;
  for (int i = 0; i < 3; ++i)
    if (c.pad_lo[i] < 0 || c.pad_hi[i] < 0 || c.dil[i] < 1 || c.stride[i] < 1) return false;
  return std::count(adds.begin(), adds.end(), DnnlAddKind::Tensor) <= 1;
}

std::vector<DnnlAddKind> kinds_of(const std::vector<DnnlAdd>& adds) {
  std::vector<DnnlAddKind> k;
  for (const auto& a : adds) k.push_back(a.kind);
  return k;
}

/// Nested in a parallel_for, the pool's threads are taken: one thread, like smelt's kernels.
int call_threads() { return in_parallel_for() ? 1 : num_threads(); }

/// Multiply-adds below which a convolution runs on one thread. oneDNN splits a small batch-1
/// convolution's few output blocks over the threads for no gain: on an AMD EPYC VM (2 threads,
/// AVX-512) MobileNetV3-small's convolutions of 4K-221K multiply-adds took the same time on one
/// thread as on two inside the compiled model (0.5-5 us each), those of 328K and 885K 1.6x less
/// on two. Each OpenMP region waits for both virtual CPUs, and when the host held one back the
/// model's compiled call went from 225 to 320-330 us on two threads and stayed at 250 us with
/// its small convolutions on one. A plan's bits never depend on its thread count (choose_serial_or).
constexpr int64_t kConvSerialWork = int64_t{1} << 18;

/// The thread count a convolution runs on: the caller's, or one for a small one.
int conv_threads(const DnnlConv& c) {
  const int threads = call_threads();
  if (threads == 1) return 1;
  int64_t work = c.batch * c.out_ch * (c.in_ch / std::max<int64_t>(c.groups, 1));
  for (int i = 0; i < 3; ++i) work *= c.out[i] * c.k[i];
  return work < kConvSerialWork ? 1 : threads;
}

/// The plan a call runs and its thread count (set on `omp`): `threads`, or one thread
/// (and the 1-thread plan) where the plan for that count could change bits with it: an
/// implementation that may split a reduction, or a blocking other than the 1-thread plan's.
template <class Plan, class PlanAt>
std::pair<std::shared_ptr<const Plan>, int> choose_serial_or(int threads, PlanAt plan_at, OmpThreads& omp) {
  omp.set(threads);
  std::shared_ptr<const Plan> plan = plan_at(threads);
  if (plan && plan->serial) {
    threads = 1;
    omp.set(1);
    plan = plan->one_thread;
  }
  return {plan, threads};
}

std::pair<std::shared_ptr<const ConvPlan>, int> choose_plan(const DnnlConv& c, const std::vector<DnnlAddKind>& kinds,
                                                            OmpThreads& omp) {
  return choose_serial_or<ConvPlan>(conv_threads(c), [&](int threads) { return plan_for(c, kinds, threads); }, omp);
}

/// A call's plan with its memory objects and argument map, made once per thread: a later call of
/// the same geometry, adds, thread count and packing only points the memory objects at its
/// buffers (set_data_handle: what constructing them does) instead of looking the plan up (a key
/// vector, a hash, a lock), creating six to nine oneDNN memory objects and building the map.
struct BoundCall {
  std::shared_ptr<const ConvPlan> plan;  // keeps the plan alive if the shared cache is cleared
  int threads = 1;
  memory src, wei, dst;                  // the caller's buffers, in smelt's layouts
  memory src_blocked, wei_blocked, out;  // the primitive's layouts (out: dst when no reorder)
  memory scratchpad;
  /// The adds' operands, by add index: a channel add's [C] vector (a post-op argument), a Tensor
  /// add's residual in smelt's layout (reordered or copied into the destination before the run).
  std::vector<memory> add_operands;
  std::unordered_map<int, memory> args;
};

/// A residual (Tensor add) for the sum post-op, which adds the accumulator to what the
/// destination holds: the residual `operand` (`residual`, in smelt's layout) goes into `out` (the
/// primitive's destination) through the plan's reorder, or is copied into `y` when the primitive
/// writes `y` itself (nothing to do when the residual's buffer was donated to `y`).
void put_residual(const ConvPlan& plan, memory& residual, memory& out, const float* operand, float* y) {
  if (plan.dst_in) {
    g_reorders.fetch_add(1, std::memory_order_relaxed);
    plan.dst_in->execute(thread_stream(), residual, out);
  } else if (operand != y) {
    std::memcpy(y, operand, plan.dst_user.get_size());
  }
}

/// The key of a bound call: everything plan_for keys on, the caller's thread count, the packing
/// and the add kinds (at most kMaxBoundAdds of them; more are rare and take the unbound path).
constexpr size_t kMaxBoundAdds = 4;
using BoundKey = std::array<int64_t, 10 + 7 * 3 + kMaxBoundAdds>;

BoundKey bound_key(const DnnlConv& c, const std::vector<DnnlAdd>& adds, int threads, int packed_threads) {
  BoundKey k{};
  size_t i = 0;
  for (int64_t v : {int64_t{c.spatial}, c.batch, c.in_ch, c.out_ch, c.groups, c.src_block, c.dst_block,
                    int64_t{threads}, int64_t{packed_threads}, static_cast<int64_t>(adds.size())})
    k[i++] = v;
  for (const int64_t* a : {c.in, c.out, c.k, c.stride, c.pad_lo, c.pad_hi, c.dil})
    for (int d = 0; d < 3; ++d) k[i++] = a[d];
  for (const DnnlAdd& a : adds) k[i++] = 1 + static_cast<int64_t>(a.kind);
  return k;
}

/// This thread's bound calls (a model has tens of convolutions; bounded like the plan cache).
std::unordered_map<BoundKey, std::unique_ptr<BoundCall>, WordsHash>& bound_calls() {
  thread_local std::unordered_map<BoundKey, std::unique_ptr<BoundCall>, WordsHash> calls;
  return calls;
}

}  // namespace

bool dnnl_enabled() { return true; }

bool dnnl_conv_bias_free(const DnnlConv& c) {
  if (!supported(c, {DnnlAddKind::Channel})) return false;
  OmpThreads omp(conv_threads(c));
  const auto [plan, threads] = choose_plan(c, {DnnlAddKind::Channel}, omp);
  return plan && !plan->native_bias.is_zero();
}

bool dnnl_conv_f32(const DnnlConv& c, const float* x, const float* w, float* y, const std::vector<DnnlAdd>& adds,
                   int packed_threads) {
  const int caller_threads = conv_threads(c);
  // A call bound earlier on this thread: only the buffers change. Weights packed for another
  // layout than this plan's take the general path below.
  const bool bindable = adds.size() <= kMaxBoundAdds;
  BoundKey key{};
  if (bindable) {
    key = bound_key(c, adds, caller_threads, packed_threads);
    auto& calls = bound_calls();
    if (auto it = calls.find(key); it != calls.end()) {
      BoundCall& b = *it->second;
      OmpThreads omp(b.threads);
      auto& st = thread_stream();
      b.src.set_data_handle(const_cast<float*>(x));
      b.wei.set_data_handle(const_cast<float*>(w));
      b.dst.set_data_handle(y);
      for (size_t i = 0; i < adds.size(); ++i) b.add_operands[i].set_data_handle(const_cast<float*>(adds[i].operand));
      const ConvPlan& plan = *b.plan;
      if (plan.src_in) {
        b.src_blocked.set_data_handle(scratch(kSrc).get(plan.src.get_size()));
        g_reorders.fetch_add(1, std::memory_order_relaxed);
        plan.src_in->execute(st, b.src, b.src_blocked);
      }
      if (plan.wei_in && packed_threads == 0) {
        b.wei_blocked.set_data_handle(scratch(kWei).get(plan.wei.get_size()));
        plan.wei_in->execute(st, b.wei, b.wei_blocked);
      }
      b.out.set_data_handle(plan.dst_out ? scratch(kDst).get(plan.dst.get_size()) : y);
      if (plan.scratch_bytes > 0) b.scratchpad.set_data_handle(scratch(kScratchpad).get(plan.scratchpad.get_size()));
      for (size_t i = 0; i < adds.size(); ++i)
        if (adds[i].kind == DnnlAddKind::Tensor) put_residual(plan, b.add_operands[i], b.out, adds[i].operand, y);
      plan.conv().execute(st, b.args);
      if (plan.dst_out) {
        g_reorders.fetch_add(1, std::memory_order_relaxed);
        plan.dst_out->execute(st, b.out, b.dst);
      }
      st.wait();
      return true;
    }
  }
  const std::vector<DnnlAddKind> kinds = kinds_of(adds);
  if (!supported(c, kinds)) return false;
  OmpThreads omp(caller_threads);
  const auto [plan, threads] = choose_plan(c, kinds, omp);
  if (!plan) return false;
  // Packed weights are in the layout of the plain plan (no adds) made for `packed_threads`.
  memory::desc wei_given = plan->wei_user;
  if (packed_threads > 0) {
    const auto packed = plan_for(c, {}, packed_threads);
    SMELT_ASSERT(packed, "conv: packed weights without a oneDNN plan");
    wei_given = packed->wei;
  }
  auto& eng = engine();
  auto& st = thread_stream();
  auto user = [&](const memory::desc& md, const float* p) { return memory(md, eng, const_cast<float*>(p)); };
  auto mine = [&](const memory::desc& md, Buf b) { return memory(md, eng, scratch(b).get(md.get_size())); };

  // Without a reorder the source is read through the primitive's own desc (the caller's layout
  // places every element alike: same_bytes).
  memory src = user(plan->src_in ? plan->src_user : plan->src, x), wei = user(wei_given, w),
         dst = user(plan->dst_user, y);
  if (plan->src_in) {
    memory blocked = mine(plan->src, kSrc);
    g_reorders.fetch_add(1, std::memory_order_relaxed);
    plan->src_in->execute(st, src, blocked);
    src = blocked;
  }
  if (wei_given != plan->wei) {
    memory blocked = mine(plan->wei, kWei);
    if (packed_threads > 0)  // packed for another thread count whose plan chose another layout
      dnnl::reorder(dnnl::reorder::primitive_desc(eng, wei_given, eng, plan->wei)).execute(st, wei, blocked);
    else
      plan->wei_in->execute(st, wei, blocked);
    wei = blocked;
  }
  memory out = plan->dst_out ? mine(plan->dst, kDst) : user(plan->dst, y);  // the primitive's desc, y's bytes
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, out}};
  if (plan->scratch_bytes > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD, mine(plan->scratchpad, kScratchpad));
  for (size_t i = 0; i < adds.size(); ++i) {
    switch (adds[i].kind) {
      case DnnlAddKind::Channel:
        args.emplace(channel_add_arg(*plan, i), user(channel_add_desc(*plan, i), adds[i].operand));
        break;
      case DnnlAddKind::Tensor: {
        memory residual = user(plan->dst_user, adds[i].operand);
        put_residual(*plan, residual, out, adds[i].operand, y);
        break;
      }
    }
  }
  plan->conv().execute(st, args);
  if (plan->dst_out) {
    g_reorders.fetch_add(1, std::memory_order_relaxed);
    plan->dst_out->execute(st, out, dst);
  }
  st.wait();
  // Bind this call for the next ones on this thread: the same memory objects (their buffers are
  // reset per call) and argument map, where the weights need no reorder per call beyond the plan's.
  if (bindable && (packed_threads == 0 || wei_given == plan->wei)) {
    auto b = std::make_unique<BoundCall>();
    b->plan = plan;
    b->threads = threads;
    b->src = user(plan->src_in ? plan->src_user : plan->src, x);
    b->wei = user(wei_given, w);
    b->dst = user(plan->dst_user, y);
    b->args[DNNL_ARG_SRC] = b->src;
    b->args[DNNL_ARG_WEIGHTS] = b->wei;
    if (plan->src_in) {
      b->src_blocked = mine(plan->src, kSrc);
      b->args[DNNL_ARG_SRC] = b->src_blocked;
    }
    if (plan->wei_in && packed_threads == 0) {
      b->wei_blocked = mine(plan->wei, kWei);
      b->args[DNNL_ARG_WEIGHTS] = b->wei_blocked;
    }
    b->out = plan->dst_out ? mine(plan->dst, kDst) : user(plan->dst, y);
    b->args[DNNL_ARG_DST] = b->out;
    if (plan->scratch_bytes > 0) {
      b->scratchpad = mine(plan->scratchpad, kScratchpad);
      b->args[DNNL_ARG_SCRATCHPAD] = b->scratchpad;
    }
    for (size_t i = 0; i < adds.size(); ++i) {
      switch (adds[i].kind) {
        case DnnlAddKind::Channel:
          b->add_operands.push_back(user(channel_add_desc(*plan, i), adds[i].operand));
          b->args[channel_add_arg(*plan, i)] = b->add_operands.back();
          break;
        case DnnlAddKind::Tensor: b->add_operands.push_back(user(plan->dst_user, adds[i].operand)); break;
      }
    }
    auto& calls = bound_calls();
    if (calls.size() >= 1024) calls.clear();
    calls[key] = std::move(b);
  }
  return true;
}

// ---- Products through oneDNN's matmul primitive ----------------------------------------------

namespace {

/// Everything a float32 product of one shape, bias flag and thread count needs: the matmul
/// primitive (weights in the layout oneDNN chooses: `any`), created when first executed, and the
/// reorders of B from smelt's storage (row-major [K, N] or its transpose) into that layout.
struct ProductPlan {
  dnnl::matmul::primitive_desc pd;
  const dnnl::matmul& prim() const {
    std::call_once(made_, [&] { prim_ = dnnl::matmul(pd); });
    return prim_;
  }
  memory::desc src, wei, dst, bias, scratchpad;
  size_t scratch_bytes = 0;
  std::string impl;
  // As ConvPlan's: a plan for more than one thread whose weights layout differs from the 1-thread
  // plan's runs `one_thread` on one thread.
  bool serial = false;
  std::shared_ptr<const ProductPlan> one_thread;

 private:
  mutable std::once_flag made_;
  mutable dnnl::matmul prim_;
};

memory::desc b_user_desc(const DnnlProduct& p) {
  // B [K, N]: row-major with row stride ldb, or the transpose of a row-major [N, K] (column
  // stride ldb).
  const memory::dims strides = p.b_transposed ? memory::dims{1, p.ldb} : memory::dims{p.ldb, 1};
  return memory::desc({p.k, p.n}, memory::data_type::f32, strides);
}

std::shared_ptr<ProductPlan> make_product_plan(const DnnlProduct& p) {
  using dt = memory::data_type;
  auto plan = std::make_shared<ProductPlan>();
  plan->src = memory::desc({p.m, p.k}, dt::f32, memory::format_tag::ab);
  plan->dst = memory::desc({p.m, p.n}, dt::f32, memory::format_tag::ab);
  plan->bias = memory::desc({1, p.n}, dt::f32, memory::format_tag::ab);
  dnnl::post_ops po;
  if (p.bias) po.append_binary(dnnl::algorithm::binary_add, plan->bias);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  try {
    const memory::desc any({p.k, p.n}, dt::f32, memory::format_tag::any);
    plan->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(plan->src, any, plan->dst), attr, engine());
  } catch (const dnnl::error&) {
    return nullptr;
  }
  plan->wei = plan->pd.weights_desc();
  plan->impl = plan->pd.impl_info_str();
  plan->scratchpad = plan->pd.scratchpad_desc();
  plan->scratch_bytes = plan->scratchpad.get_size();
  return plan;
}

/// Plans by (shape, bias, threads), as plan_for does convolutions; B's storage is not part of the
/// key (the plan's weights layout is oneDNN's whatever B's is).
std::shared_ptr<const ProductPlan> product_plan(const DnnlProduct& p, int threads) {
  const std::array<int64_t, 5> key{p.m, p.n, p.k, p.bias ? 1 : 0, threads};
  static std::mutex mu;
  static auto* cache = new std::unordered_map<std::array<int64_t, 5>, std::shared_ptr<const ProductPlan>, WordsHash>();
  {
    std::lock_guard lock(mu);
    if (auto it = cache->find(key); it != cache->end()) return it->second;
  }
  std::shared_ptr<ProductPlan> plan = make_product_plan(p);
  // Only the brgemm implementation: it splits the outputs over threads and sums each one's
  // reduction in one order (over 384 shapes at 1-4 threads, the same bits); "gemm:jit" (below
  // AVX-512) is the threaded sgemm, which smelt's own tiles (gemm.cpp) already run.
  if (plan && plan->impl.rfind("brg", 0) != 0) plan = nullptr;
  // A bias post-op must leave the implementation and layouts alone (it is then one float32
  // addition after the whole reduction, as the separate add).
  if (plan && p.bias) {
    DnnlProduct plain = p;
    plain.bias = false;
    const auto without = product_plan(plain, threads);
    if (!without || without->impl != plan->impl || without->wei != plan->wei) plan = nullptr;
  }
  if (plan && threads > 1) {
    OmpThreads single(1);
    plan->one_thread = product_plan(p, 1);
    plan->serial = !plan->one_thread || plan->one_thread->impl != plan->impl || plan->one_thread->wei != plan->wei;
  }
  std::lock_guard lock(mu);
  constexpr size_t kMaxPlans = 1024;
  if (cache->size() >= kMaxPlans) cache->clear();
  return cache->emplace(key, std::move(plan)).first->second;
}

/// choose_plan's rule for products.
std::pair<std::shared_ptr<const ProductPlan>, int> choose_product_plan(const DnnlProduct& p, OmpThreads& omp) {
  return choose_serial_or<ProductPlan>(call_threads(), [&](int threads) { return product_plan(p, threads); }, omp);
}

/// A product's memory objects and argument map, made once per thread and key (BoundCall's role
/// for products): a decode step's tens of small products each saved building them.
struct BoundProduct {
  std::shared_ptr<const ProductPlan> plan;
  int threads = 1;
  memory src, wei_user, wei, dst, bias, scratchpad;
  std::optional<dnnl::reorder> wei_in;  // B's storage -> the plan's layout (none: packed as it wants)
  std::unordered_map<int, memory> args;
};

/// The fewest rows a product needs to run through oneDNN's matmul (dnnl_product_taken).
constexpr int64_t kMinProductRows = 16;
/// The fewest multiply-adds (64 x 16 x 16 x 16 products: 14 us as sgemm tiles, 24 us as oneDNN
/// calls; 48 x 128 x 64 x 128: 266 -> 240 us).
constexpr double kMinProductWork = 65536;
/// The most elements of B (64 MiB of float32): GPT-2's tied 768 x 50257 embedding ran at the same
/// speed packed or as sgemm tiles (128 x 50257 x 768: 22.2-22.4 ms either way, 2 threads, AMD
/// EPYC), and packing it cost the first compiled call 154 MB of fresh pages, each eager call a
/// reorder of it.
constexpr double kMaxProductWeights = double{1 << 24};

using ProductKey = std::array<int64_t, 9>;

}  // namespace

bool dnnl_product_taken(int64_t m, int64_t n, int64_t k) {
  // Fewer rows (a decode step's vector-matrix products) stream B once: the sgemm tiles read it
  // at least as fast, without the per-call reorder in eager calls (the small GPT-2 export's
  // decode step, 2 threads, AMD EPYC: its products 334 us as tiles, 409 us through the packed
  // matmul).
  // Tiny products (a batch of 16 x 16 x 16) cost more in a oneDNN call's set-up than in sgemm.
  if (m < kMinProductRows || n <= 0 || k <= 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX) return false;
  if (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) < kMinProductWork) return false;
  if (static_cast<double>(n) * static_cast<double>(k) > kMaxProductWeights) return false;
  // Decided by the 1-thread plan, so by the shape and the CPU alone: every thread count takes the
  // same path (and gets the same bits).
  thread_local std::unordered_map<std::array<int64_t, 3>, bool, WordsHash> taken;
  const std::array<int64_t, 3> key{m, n, k};
  if (auto it = taken.find(key); it != taken.end()) return it->second;
  OmpThreads single(1);
  DnnlProduct p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.ldb = n;
  const bool yes = product_plan(p, 1) != nullptr;
  if (taken.size() >= 4096) taken.clear();
  taken.emplace(key, yes);
  return yes;
}

bool dnnl_product_f32(const DnnlProduct& p, const float* a, const float* b, float* c, const float* bias) {
  const int caller = call_threads();
  const ProductKey key{p.m, p.n, p.k, p.bias ? 1 : 0, caller, p.packed_threads, p.b_transposed ? 1 : 0, p.ldb, 0};
  thread_local std::unordered_map<ProductKey, std::unique_ptr<BoundProduct>, WordsHash> bound;
  auto it = bound.find(key);
  if (it == bound.end()) {
    OmpThreads omp(caller);
    const auto [plan, threads] = choose_product_plan(p, omp);
    if (!plan) return false;
    auto bp = std::make_unique<BoundProduct>();
    bp->plan = plan;
    bp->threads = threads;
    auto& eng = engine();
    memory::desc given = b_user_desc(p);
    if (p.packed_threads > 0) {
      DnnlProduct packed = p;
      packed.bias = false;  // packed for the plain plan (a bias plan has its layout)
      OmpThreads at(p.packed_threads);
      const auto was = product_plan(packed, p.packed_threads);
      SMELT_ASSERT(was, "matmul: packed weights without a oneDNN plan");
      given = was->wei;
    }
    bp->src = memory(plan->src, eng, nullptr);
    bp->wei_user = memory(given, eng, nullptr);
    bp->dst = memory(plan->dst, eng, nullptr);
    if (given != plan->wei) {
      bp->wei_in = dnnl::reorder(dnnl::reorder::primitive_desc(eng, given, eng, plan->wei));
      bp->wei = memory(plan->wei, eng, nullptr);
    } else {
      bp->wei = bp->wei_user;
    }
    bp->args[DNNL_ARG_SRC] = bp->src;
    bp->args[DNNL_ARG_WEIGHTS] = bp->wei;
    bp->args[DNNL_ARG_DST] = bp->dst;
    if (p.bias) {
      bp->bias = memory(plan->bias, eng, nullptr);
      bp->args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = bp->bias;
    }
    if (plan->scratch_bytes > 0) {
      bp->scratchpad = memory(plan->scratchpad, eng, nullptr);
      bp->args[DNNL_ARG_SCRATCHPAD] = bp->scratchpad;
    }
    if (bound.size() >= 1024) bound.clear();
    it = bound.emplace(key, std::move(bp)).first;
  }
  BoundProduct& bp = *it->second;
  OmpThreads omp(bp.threads);
  auto& st = thread_stream();
  bp.src.set_data_handle(const_cast<float*>(a));
  bp.wei_user.set_data_handle(const_cast<float*>(b));
  bp.dst.set_data_handle(c);
  if (p.bias) bp.bias.set_data_handle(const_cast<float*>(bias));
  if (bp.wei_in) {
    bp.wei.set_data_handle(scratch(kWei).get(bp.plan->wei.get_size()));
    bp.wei_in->execute(st, bp.wei_user, bp.wei);
  }
  if (bp.plan->scratch_bytes > 0) bp.scratchpad.set_data_handle(scratch(kScratchpad).get(bp.plan->scratch_bytes));
  bp.plan->prim().execute(st, bp.args);
  st.wait();
  return true;
}

bool dnnl_pack_product_weights(const DnnlProduct& p, const float* b, const std::function<float*(size_t)>& alloc,
                               int* threads) {
  if (!dnnl_product_taken(p.m, p.n, p.k)) return false;
  OmpThreads omp(call_threads());
  DnnlProduct at = p;
  at.packed_threads = 0;
  at.bias = false;
  const auto [plan, plan_threads] = choose_product_plan(at, omp);
  if (!plan) return false;
  *threads = plan_threads;
  float* packed = alloc((plan->wei.get_size() + sizeof(float) - 1) / sizeof(float));
  const memory::desc given = b_user_desc(p);
  memory from(given, engine(), const_cast<float*>(b)), to(plan->wei, engine(), packed);
  // On the calling thread alone, and one reorder per pair of layouts (a model's layers repeat a
  // few shapes): the pass runs while the first calls' kernels build in the background, and a
  // second OpenMP thread waited a time slice behind the compiler at every weight (the GPT-2 base
  // export's first compiled call: 0.7 s without packing, 7 s with a 2-thread reorder per weight
  // while the cores were busy).
  omp.set(1);
  static std::mutex mu;
  static auto* reorders = new std::vector<std::tuple<memory::desc, memory::desc, dnnl::reorder>>();
  dnnl::reorder r;
  {
    std::lock_guard lock(mu);
    for (const auto& [f, t, made] : *reorders)
      if (f == given && t == plan->wei) r = made;
  }
  if (!r) {
    r = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), given, engine(), plan->wei));
    std::lock_guard lock(mu);
    if (reorders->size() >= 256) reorders->clear();
    reorders->emplace_back(given, plan->wei, r);
  }
  r.execute(thread_stream(), from, to);
  thread_stream().wait();
  return true;
}

std::string dnnl_product_impl(const DnnlProduct& p) {
  OmpThreads omp(call_threads());
  const auto plan = choose_product_plan(p, omp).first;
  return plan ? plan->impl : "";
}

bool dnnl_sgemm_1thread(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                        const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return true;
  if (k <= 0) {  // an empty sum: oneDNN's argument checks want lda >= k >= 1
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return true;
  }
  OmpThreads omp(1);
  const dnnl_status_t s =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  SMELT_ASSERT(s == dnnl_success, "matmul: oneDNN's sgemm rejected a tile");
  return true;
}

int64_t dnnl_conv_primitives_created() { return g_created.load(std::memory_order_relaxed); }

int64_t dnnl_activation_reorders() { return g_reorders.load(std::memory_order_relaxed); }

bool dnnl_conv_blocks(const DnnlConv& c, const std::vector<DnnlAddKind>& kinds, int64_t* src_block,
                      int64_t* dst_block) {
  *src_block = *dst_block = 0;
  if (!supported(c, kinds)) return false;
  OmpThreads omp(conv_threads(c));
  auto plan = choose_plan(c, kinds, omp).first;
  // Adds declined as post-ops (dnnl_conv_f32 returns false): the Conv step runs the plain
  // primitive and then the adds, element by element in the output's layout.
  if (!plan && !kinds.empty()) plan = choose_plan(c, {}, omp).first;
  if (!plan) return false;
  *src_block = block_of(plan->src);
  *dst_block = block_of(plan->dst);
  return true;
}

std::string dnnl_conv_impl(const DnnlConv& c, const std::vector<DnnlAdd>& adds) {
  const std::vector<DnnlAddKind> kinds = kinds_of(adds);
  if (!supported(c, kinds)) return "";
  OmpThreads omp(conv_threads(c));
  const auto plan = choose_plan(c, kinds, omp).first;
  return plan ? plan->impl : "";
}

bool dnnl_pack_conv_weights(const DnnlConv& c, const float* w, const std::function<float*(size_t)>& alloc, int* threads) {
  if (!supported(c, {})) return false;
  OmpThreads omp(conv_threads(c));
  const auto [plan, plan_threads] = choose_plan(c, {}, omp);
  if (!plan) return false;
  *threads = plan_threads;
  float* packed = alloc((plan->wei.get_size() + sizeof(float) - 1) / sizeof(float));
  memory from(plan->wei_user, engine(), const_cast<float*>(w)), to(plan->wei, engine(), packed);
  omp.set(1);  // on the calling thread, as dnnl_pack_product_weights (an exact copy either way)
  if (plan->wei_in)
    plan->wei_in->execute(thread_stream(), from, to);
  else
    std::memcpy(packed, w, plan->wei_user.get_size());
  thread_stream().wait();
  return true;
}

#endif

}  // namespace smelt::cpu
