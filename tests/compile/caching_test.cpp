// Behaviour of compiled functions around their cache: keys, re-tracing, eviction, miss reasons,
// captured constants, nesting, threads, and the errors users meet.
#include <atomic>
#include <cmath>
#include <optional>
#include <thread>

#include "compile_helpers.h"

namespace smelt {
namespace {

Array rand(const Shape& shape, uint32_t seed, Dtype dtype = float32) {
  return test::random_array(shape, dtype, -2.0, 2.0, seed);
}

enum class Mode { Add, Multiply };

TEST(Caching, StaticArgumentsOfEveryKindAreKeys) {
  int traces = 0;
  // (Unfused: every static value would otherwise be a kernel of its own, with its literals.)
  auto f = compile(
      [&](const Array& x, int i, double d, bool b, Mode m, const std::string& s) {
        ++traces;
        Array y = m == Mode::Add ? x + static_cast<float>(i) : x * static_cast<float>(i);
        return b ? y + static_cast<float>(d) : y - static_cast<float>(s.size());
      },
      {.fuse = false});
  Array x = ones({3});
  f(x, 1, 0.5, true, Mode::Add, "a");
  f(x, 1, 0.5, true, Mode::Add, "a");
  EXPECT_EQ(traces, 1);
  f(x, 2, 0.5, true, Mode::Add, "a");
  f(x, 1, std::nextafter(0.5, 1.0), true, Mode::Add, "a");  // one ulp apart is another value
  f(x, 1, 0.5, false, Mode::Add, "a");
  f(x, 1, 0.5, true, Mode::Multiply, "a");
  f(x, 1, 0.5, true, Mode::Add, "ab");
  EXPECT_EQ(traces, 6);
  EXPECT_EQ(f(x, 2, 0.5, true, Mode::Multiply, "a").to_vector<float>(), (std::vector<float>{2.5f, 2.5f, 2.5f}));
  EXPECT_EQ(f(x, 1, 0.5, false, Mode::Add, "abc").to_vector<float>(), (std::vector<float>{-1, -1, -1}));
}

// Static floats are compared by their bytes: NaN finds its entry (NaN != NaN would re-trace on
// every call) and -0.0 is not 0.0.
TEST(Caching, StaticFloatsCompareByBits) {
  int traces = 0;
  auto f = compile([&](const Array& x, float k) {
    ++traces;
    return x * k;
  });
  Array x = ones({2});
  f(x, NAN);
  f(x, NAN);
  EXPECT_EQ(traces, 1);
  f(x, 0.0f);
  f(x, -0.0f);
  EXPECT_EQ(traces, 3);
  EXPECT_TRUE(std::signbit(f(x, -0.0f).to_vector<float>()[0]));
  EXPECT_FALSE(std::signbit(f(x, 0.0f).to_vector<float>()[0]));
}

TEST(Caching, TreeStructureChangesRetrace) {
  int traces = 0;
  auto f = compile(
      [&](const std::vector<Array>& xs, const std::map<std::string, Array>& named, const std::optional<Array>& bias) {
        ++traces;
        Array acc = zeros({2});
        for (auto& x : xs) acc = acc + x;
        for (auto& [k, v] : named) acc = acc + v;
        return bias ? acc + *bias : acc;
      },
      {.fuse = false});
  Array one = ones({2});
  EXPECT_EQ(f({one}, {{"a", one}}, std::nullopt).to_vector<float>(), (std::vector<float>{2, 2}));
  EXPECT_EQ(f({one, one}, {{"a", one}}, std::nullopt).to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(f({one}, {{"b", one}}, std::nullopt).to_vector<float>(), (std::vector<float>{2, 2}));
  EXPECT_EQ(f({one}, {{"a", one}}, one).to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(traces, 4);
  f({one, one}, {{"a", one}}, std::nullopt);
  EXPECT_EQ(traces, 4);
}

TEST(Caching, MissReasonsNameEachKindOfChange) {
  test::EventLog log;
  auto f = compile_flat([](const std::vector<Array>& xs) { return std::vector<Array>{xs[0] + 1.0f}; }, {}, "flat");
  f({zeros({8, 512})});
  f({zeros({8, 512}, int32)});
  f({zeros({8, 512}), zeros({1})});
  f({zeros({8, 512, 1})});
  auto r = log.field("compile.cache.miss", "reason");
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], "first call");
  EXPECT_EQ(r[1], "input 0: dtype float32 -> int32");
  EXPECT_EQ(r[2], "static arguments or tree structure changed; number of inputs 1 -> 2");
  EXPECT_EQ(r[3], "input 0: shape [8,512] -> [8,512,1]");
  for (auto& fn : log.field("compile.cache.miss", "function")) EXPECT_EQ(fn, "flat");
}

// The least recently *used* entry goes first, and a key that was evicted says so when it
// comes back.
TEST(Caching, EvictionFollowsRecencyAndIsTheMissReason) {
  test::EventLog log;
  std::vector<int64_t> traced;
  auto f = compile(
      [&](const Array& x) {
        traced.push_back(x.shape(0));
        return x * 2.0f;
      },
      {.cache_capacity = 3});
  for (int64_t n : {1, 2, 3}) f(zeros({n}));
  f(zeros({1}));  // order by use: 1, 3, 2
  f(zeros({4}));  // evicts 2
  f(zeros({3}));  // order: 3, 4, 1
  f(zeros({5}));  // evicts 1
  EXPECT_EQ(traced, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  f(zeros({3}));
  f(zeros({4}));
  f(zeros({5}));
  EXPECT_EQ(traced.size(), 5u);
  f(zeros({2}));
  EXPECT_EQ(traced.back(), 2);
  EXPECT_EQ(f.stats().evictions, 3u);
  EXPECT_EQ(log.count("compile.cache.evict"), 3);
  auto r = log.field("compile.cache.miss", "reason");
  EXPECT_EQ(r.back(), "evicted earlier (cache capacity 3)");
  EXPECT_EQ(f.stats().hits + f.stats().misses, 11u);
}

TEST(Caching, CapacityOfOneAlternates) {
  int traces = 0;
  auto f = compile(
      [&](const Array& x) {
        ++traces;
        return x + 1.0f;
      },
      {.cache_capacity = 1});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(f(zeros({1 + i % 2})).to_vector<float>()[0], 1.0f);
  EXPECT_EQ(traces, 6);
  f(zeros({2}));
  EXPECT_EQ(traces, 6);
}

TEST(Caching, StatsAndGlobalTraceCount) {
  const uint64_t before = global_trace_count();
  auto f = compile([](const Array& x) { return -x; });
  for (int i = 0; i < 5; ++i) f(zeros({1 + i % 2}));
  CompileStats s = f.stats();
  EXPECT_EQ(s.traces, 2u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.fallbacks, 0u);
  EXPECT_GE(global_trace_count(), before + 2);
}

// Copies of a compiled function share one cache.
TEST(Caching, CopiesShareTheCache) {
  int traces = 0;
  auto f = compile([&](const Array& x) {
    ++traces;
    return x * x;
  });
  auto g = f;
  f(ones({3}));
  g(ones({3}));
  EXPECT_EQ(traces, 1);
  EXPECT_EQ(g.stats().hits, 1u);
}

// Captured arrays are frozen at the first trace and kept alive by the entry.
TEST(Caching, CapturedConstantsOutliveTheirHandles) {
  auto make = [] {
    Array c = arange(4.0);  // only the lambda holds it after this scope
    return compile([c](const Array& x) { return x + c; });
  };
  auto f = make();
  EXPECT_EQ(f(zeros({4})).to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(f(ones({4})).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

// A lazily built captured array is computed once, at the trace, not on every call.
TEST(Caching, CapturedLazyArraysAreComputedAtTheTrace) {
  test::Dumps dumps;
  Array base = rand({6}, 1);
  Array lazy = exp(base) * 3.0f;  // not evaluated yet
  auto f = compile_flat([&](const std::vector<Array>& in) { return std::vector<Array>{in[0] - lazy}; },
                        dumps.options({.fuse = false}));
  auto got = f({zeros({6})})[0];
  EXPECT_TRUE(test::bit_equal(got, zeros({6}) - lazy));
  EXPECT_TRUE(lazy.is_evaluated());
  EXPECT_EQ(test::Dumps::count(dumps.of("trace"), "Unary(Exp)"), 0);
}

TEST(Caching, OutputsMayBeInputsOrConstants) {
  Array c = rand({2}, 2);
  auto f = compile([&](const Array& x, const Array& y) { return std::make_tuple(x, c, y * 1.0f, x); });
  Array x = rand({2}, 3), y = rand({2}, 4);
  auto [a, b, d, e] = f(x, y);
  EXPECT_EQ(a.id(), x.id());  // the input itself, not a copy
  EXPECT_EQ(e.id(), x.id());
  EXPECT_TRUE(test::bit_equal(b, c));
  EXPECT_TRUE(test::bit_equal(d, y));
}

TEST(Caching, ManyInputsAndOutputsKeepTheirOrder) {
  const int n = 100;
  auto f = compile_flat(
      [](const std::vector<Array>& xs) {
        std::vector<Array> out;
        for (size_t i = 0; i < xs.size(); ++i) out.push_back(xs[xs.size() - 1 - i] * static_cast<float>(i));
        return out;
      },
      {.fuse = false});
  std::vector<Array> in;
  for (int i = 0; i < n; ++i) in.push_back(full({2}, Array(static_cast<float>(i))));
  auto out = f(in);
  ASSERT_EQ(out.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) EXPECT_EQ(out[i].to_vector<float>()[1], static_cast<float>((n - 1 - i) * i)) << i;
}

TEST(Caching, NoInputsScalarsAndEmptyArrays) {
  auto constant = compile_flat([](const std::vector<Array>&) { return std::vector<Array>{arange(3.0)}; });
  EXPECT_EQ(constant({})[0].to_vector<float>(), (std::vector<float>{0, 1, 2}));
  auto f = compile([](const Array& x) { return sum(x * 2.0f); });
  EXPECT_EQ(f(Array(3.0f)).item<float>(), 6.0f);
  EXPECT_EQ(f(zeros({0, 4})).item<float>(), 0.0f);
  EXPECT_EQ(f.stats().traces, 2u);
}

// The inner function's operations join the outer trace: one kernel spans both.
TEST(Caching, NestedCompileFusesAcrossTheBoundary) {
  auto inner = compile([](const Array& x) { return exp(x) * 2.0f; });
  test::Dumps dumps;
  auto outer = compile_flat([&](const std::vector<Array>& in) { return std::vector<Array>{sqrt(inner(in[0]))}; },
                            dumps.options());
  Array x = rand({9}, 5);
  EXPECT_TRUE(test::bit_equal(outer({x})[0], sqrt(exp(x) * 2.0f)));
  EXPECT_EQ(inner.stats().traces, 0u);
  auto fused = test::Dumps::lines(dumps.final_tape(), "Fused");
  ASSERT_EQ(fused.size(), 1u) << dumps.final_tape();
  EXPECT_NE(fused[0].find("sqrt(multiply(exp(in0), 2))"), std::string::npos) << fused[0];
  // Called on its own, the inner function traces and caches by itself.
  EXPECT_TRUE(test::bit_equal(inner(x), exp(x) * 2.0f));
  EXPECT_EQ(inner.stats().traces, 1u);
}

// Threads that miss on the same key at once trace it once; different keys trace once each.
TEST(Caching, ConcurrentCallsTraceEachKeyOnce) {
  std::atomic<int> traces{0};
  auto f = compile(
      [&](const Array& x) {
        traces++;
        return x * 3.0f - 1.0f;
      },
      {.fuse = false});
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        Array x = full({1 + (t + i) % 3}, Array(static_cast<float>(t)));
        auto v = f(x).to_vector<float>();
        for (float e : v) wrong += e != static_cast<float>(t) * 3.0f - 1.0f;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(traces.load(), 3);
  EXPECT_EQ(f.stats().traces, 3u);
  EXPECT_EQ(f.stats().hits + f.stats().misses, 60u);
}

// Errors in the function reach the caller with their own message, leave nothing in the
// cache, and the next call traces again.
TEST(Caching, ErrorsInTheFunctionPropagateUnchanged) {
  auto f = compile([](const Array& x, const Array& y) { return x + y; });
  EXPECT_THROW_MSG(f(zeros({2, 3}), zeros({4})), ShapeError,
                   "add: shapes cannot be broadcast together (float32[2,3], float32[4])");
  EXPECT_EQ(f.stats().traces, 0u);
  EXPECT_THROW(f(zeros({2, 3}), zeros({4})), ShapeError);
  EXPECT_EQ(f(ones({2, 3}), ones({3})).to_vector<float>()[0], 2.0f);
}

// Reading a traced value names the operation that made it and says what to do instead.
TEST(Caching, ReadingATracedValueExplainsWhatToDo) {
  auto f = compile([](const Array& x) { return x * exp(x).item<float>(); }, {.fallback = CompileFallback::Raise});
  try {
    f(ones({}));
    ADD_FAILURE() << "expected UnknownValueError";
  } catch (const UnknownValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Unary(Exp)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("only known when the compiled function runs"), std::string::npos) << msg;
    EXPECT_NE(msg.find("return the array instead"), std::string::npos) << msg;
    EXPECT_NE(msg.find("static (non-array) argument"), std::string::npos) << msg;
  }
  EXPECT_EQ(f.stats().traces, 0u);
  auto g = compile([](const Array& x) { return x * x.to_vector<float>()[0]; }, {.fallback = CompileFallback::Raise});
  EXPECT_THROW_MSG(g(ones({3})), UnknownValueError, "eval: an argument of the compiled function (shape [3], float32)");
}

// A function that cannot be traced runs eagerly, says why once per signature (the fallback is
// remembered like a cache entry, so later calls neither re-trace nor repeat the event), and
// gives the eager results.
TEST(Caching, FallbackRunsEagerlyWithTheReason) {
  test::EventLog log;
  auto f = compile([](const Array& x) { return nonzero(x > 0.0f); }, {}, "positives");
  Array x = Array(std::vector<float>{-1, 2, 0, 3}, {4});
  EXPECT_EQ(f(x).to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
  Array x2 = Array(std::vector<float>{5, -2, 0, 3}, {4});
  EXPECT_EQ(f(x2).to_vector<int64_t>(), (std::vector<int64_t>{0, 3}));
  auto events = log.named("compile.fallback");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].field("function"), "positives");
  EXPECT_FALSE(events[0].field("reason").empty());
  EXPECT_EQ(f.stats().fallbacks, 1u);
  EXPECT_EQ(f.stats().traces, 0u);
  EXPECT_EQ(f.stats().misses, 1u);
  EXPECT_EQ(f.stats().hits, 1u);
  // A new signature is a new attempt, with its own event.
  EXPECT_EQ(f(Array(std::vector<float>{1, 2}, {2})).to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(log.named("compile.fallback").size(), 2u);
}

// Different signatures trace in parallel on different threads (the engine does not hold its
// lock while tracing), and each gets its own entry.
TEST(Caching, ConcurrentCallsOfDifferentSignatures) {
  auto f = compile([](const Array& x) { return exp(x) * 2.0f; }, {}, "signatures");
  std::vector<std::thread> threads;
  std::vector<int> ok(6, 0);
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      Array x = rand({t + 1, 3}, 11 + t);
      ok[t] = test::bit_equal(f(x), exp(x) * 2.0f) ? 1 : 0;
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < 6; ++t) EXPECT_EQ(ok[t], 1) << "thread " << t;
  EXPECT_EQ(f.stats().traces, 6u);
  EXPECT_EQ(f.stats().misses, 6u);
}

}  // namespace
}  // namespace smelt
