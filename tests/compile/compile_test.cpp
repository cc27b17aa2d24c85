// Behaviour tests of smelt::compile: caching, re-tracing, captured constants, structure, errors.
#include <atomic>
#include <thread>

#include "smelt/compile.h"
#include "smelt/telemetry.h"
#include "test_utils.h"

namespace smelt {
namespace {

Array f32(std::vector<float> v, Shape s) { return Array(v, std::move(s)); }

struct EventLog {
  std::vector<telemetry::Event> events;
  telemetry::Subscription sub{"*", [this](const telemetry::Event& e) { events.push_back(e); }};
  int count(const std::string& name) const {
    int n = 0;
    for (auto& e : events) n += e.name == name;
    return n;
  }
  std::vector<std::string> reasons(const std::string& name) const {
    std::vector<std::string> r;
    for (auto& e : events)
      if (e.name == name) r.push_back(e.field("reason"));
    return r;
  }
};

TEST(Compile, TracesOncePerSignature) {
  int calls = 0;
  auto f = compile([&](const Array& x) {
    ++calls;
    return transpose(reshape(x, {2, 3}));
  });
  Array a = f32({1, 2, 3, 4, 5, 6}, {6});
  EXPECT_EQ(f(a).to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(f(a).to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(f.stats().traces, 1u);
  EXPECT_EQ(f.stats().hits, 1u);
  EXPECT_EQ(f.stats().misses, 1u);
}

TEST(Compile, RetracesOnShapeDtypeAndStaticChanges) {
  int calls = 0;
  auto f = compile([&](const Array& x, int k) {
    ++calls;
    return x * static_cast<float>(k);
  });
  f(zeros({4}), 2);
  f(zeros({4}), 2);
  EXPECT_EQ(calls, 1);
  f(zeros({5}), 2);  // shape
  EXPECT_EQ(calls, 2);
  f(zeros({4}, float64), 2);  // dtype
  EXPECT_EQ(calls, 3);
  f(zeros({4}), 3);  // static value
  EXPECT_EQ(calls, 4);
  f(zeros({4}), 2);  // back to the first: cached
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(f(ones({4}), 3).to_vector<float>(), (std::vector<float>{3, 3, 3, 3}));
}

TEST(Compile, MissReasonNamesTheDifferingComponent) {
  EventLog log;
  auto f = compile([](const Array& x, const std::string& mode) { return mode == "a" ? x + 1.0f : x - 1.0f; });
  f(zeros({8, 512}), "a");
  f(zeros({8, 640}), "a");
  f(zeros({8, 640}, float16), "a");
  f(zeros({8, 640}), "b");
  auto r = log.reasons("compile.cache.miss");
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], "first call");
  EXPECT_EQ(r[1], "input 0: shape [8,512] -> [8,640]");
  EXPECT_EQ(r[2], "input 0: dtype float32 -> float16");
  EXPECT_EQ(r[3], "static arguments or tree structure changed");
}

TEST(Compile, CapturedArraysAreFrozenAtTheFirstTrace) {
  Array c = f32({1, 2}, {2});
  auto f = compile([&](const Array& x) { return x + c; });
  EXPECT_EQ(f(zeros({2})).to_vector<float>(), (std::vector<float>{1, 2}));
  c = f32({10, 20}, {2});
  EXPECT_EQ(f(zeros({2})).to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST(Compile, EvaluatingATracedArrayRaisesUnknownValueError) {
  auto f = compile([](const Array& x) { return x * Array(x).item<float>(); }, {.fallback = CompileFallback::Raise});
  EXPECT_THROW_MSG(f(ones({})), UnknownValueError, "only known when the compiled function runs");
}

TEST(Compile, FallbackRunsEagerlyAndSaysWhy) {
  EventLog log;
  auto f = compile([](const Array& x) { return nonzero(x); });
  Array x = f32({0, 1, 0, 2}, {4});
  EXPECT_EQ(f(x).to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(log.count("compile.fallback"), 1);
  EXPECT_EQ(f.stats().fallbacks, 1u);
  auto strict = compile([](const Array& x) { return nonzero(x); }, {.fallback = CompileFallback::Raise});
  EXPECT_THROW(strict(x), UnknownValueError);
}

TEST(Compile, AFailedTraceIsNotCached) {
  bool fail = true;
  int calls = 0;
  auto f = compile([&](const Array& x) {
    ++calls;
    if (fail) throw InvalidArgument("boom");
    return x + 1.0f;
  });
  EXPECT_THROW(f(zeros({2})), InvalidArgument);
  fail = false;
  EXPECT_EQ(f(zeros({2})).to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(f.stats().traces, 1u);
}

TEST(Compile, EachEntryKeepsItsOwnOutputStructure) {
  auto f = compile([](const Array& x, int n) {
    std::vector<Array> out;
    for (int i = 0; i < n; ++i) out.push_back(x + static_cast<float>(i));
    return out;
  });
  EXPECT_EQ(f(zeros({1}), 2).size(), 2u);
  EXPECT_EQ(f(zeros({1}), 3).size(), 3u);
  EXPECT_EQ(f(zeros({1}), 2).size(), 2u);
  EXPECT_EQ(f(zeros({1}), 3)[2].item<float>(), 2.0f);
}

TEST(Compile, NestedCompileRunsInnerFunctionDirectly) {
  int inner_calls = 0;
  auto inner = compile([&](const Array& x) {
    ++inner_calls;
    return exp(x);
  });
  auto outer = compile([&](const Array& x) { return inner(x) + 1.0f; });
  Array x = f32({0, 1}, {2});
  EXPECT_TRUE(test::all_close(outer(x), {2.0, std::exp(1.0) + 1.0}));
  outer(x);
  EXPECT_EQ(inner_calls, 1);
  EXPECT_EQ(inner.stats().traces, 0u);  // ran on tracers: merged into the outer trace
}

TEST(Compile, LruEvictsTheLeastRecentlyUsedEntry) {
  EventLog log;
  int calls = 0;
  auto f = compile(
      [&](const Array& x) {
        ++calls;
        return x + 1.0f;
      },
      {.cache_capacity = 2});
  f(zeros({1}));
  f(zeros({2}));
  f(zeros({1}));  // 1 is now most recent
  f(zeros({3}));  // evicts 2
  EXPECT_EQ(calls, 3);
  f(zeros({1}));
  EXPECT_EQ(calls, 3);
  f(zeros({2}));  // was evicted: traced again
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(f.stats().evictions, 2u);
  EXPECT_EQ(log.count("compile.cache.evict"), 2);
}

TEST(Compile, WarnsOnceAfterTooManyRetraces) {
  EventLog log;
  auto f = compile([](const Array& x) { return x + 1.0f; }, {.retrace_warning = 3});
  for (int i = 1; i <= 6; ++i) f(zeros({i}));
  EXPECT_EQ(log.count("compile.retrace_warning"), 1);
}

TEST(Compile, DisableCompileCallsTheFunctionEveryTime) {
  int calls = 0;
  auto f = compile([&](const Array& x) {
    ++calls;
    return x + 1.0f;
  });
  disable_compile();
  f(zeros({2}));
  f(zeros({2}));
  enable_compile();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(f.stats().traces, 0u);
}

TEST(Compile, CalledFromManyThreads) {
  auto f = compile([](const Array& x, const Array& y) { return exp(x) * y + 1.0f; });
  Array x = test::random_array({64, 33}, float32, -1, 1, 1);
  Array y = test::random_array({64, 33}, float32, -1, 1, 2);
  Array expected = exp(x) * y + 1.0f;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i)
        if (!test::bit_equal(f(x, y), expected)) mismatches++;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(f.stats().traces, 1u);
}

struct Layer {
  Array w;
  Array b;
  float scale = 1.0f;
};

}  // namespace
}  // namespace smelt

SMELT_TREE(smelt::Layer, w, b, scale)

namespace smelt {
namespace {

TEST(Compile, TreesOfStructsMapsTuplesAndVectors) {
  auto f = compile([](const Layer& l, const std::map<std::string, Array>& in) {
    Array y = matmul(in.at("x"), l.w) + l.b;
    return std::make_tuple(y * l.scale, std::vector<Array>{y, -y});
  });
  Layer l{f32({1, 0, 0, 1}, {2, 2}), f32({1, 1}, {2}), 2.0f};
  auto [scaled, both] = f(l, {{"x", f32({1, 2}, {1, 2})}});
  EXPECT_EQ(scaled.to_vector<float>(), (std::vector<float>{4, 6}));
  EXPECT_EQ(both[1].to_vector<float>(), (std::vector<float>{-2, -3}));
  l.scale = 3.0f;  // a static leaf: a new trace
  f(l, {{"x", f32({1, 2}, {1, 2})}});
  EXPECT_EQ(f.stats().traces, 2u);
}

TEST(Compile, CompileFlatOverVectors) {
  auto f = compile_flat([](const std::vector<Array>& xs) { return std::vector<Array>{xs[0] + xs[1], xs[0] * xs[1]}; });
  auto out = f({f32({2}, {1}), f32({3}, {1})});
  EXPECT_EQ(out[0].item<float>(), 5.0f);
  EXPECT_EQ(out[1].item<float>(), 6.0f);
}

TEST(Compile, IdentityAndPassThroughOutputs) {
  auto f = compile([](const Array& x, const Array& y) { return std::make_pair(x, y + 0.0f); });
  Array x = f32({1, 2}, {2});
  auto [a, b] = f(x, x);
  EXPECT_TRUE(test::bit_equal(a, x));
  EXPECT_TRUE(test::bit_equal(b, x));
}

TEST(Compile, TraceEventsCarryDurations) {
  EventLog log;
  auto f = compile([](const Array& x) { return x * 2.0f; }, {}, "doubler");
  f(ones({3}));
  ASSERT_EQ(log.count("compile.trace"), 1);
  for (auto& e : log.events)
    if (e.name == "compile.trace") {
      EXPECT_GE(e.duration_ms, 0.0);
      EXPECT_EQ(e.field("function"), "doubler");
    }
}

TEST(Compile, EmptyHandleInputIsAnError) {
  auto f = compile([](const Array& x) { return x; }, {}, "ident");
  EXPECT_THROW_MSG(f(Array()), InvalidArgument, "ident: an input array is an empty handle");
}

}  // namespace
}  // namespace smelt
