// Regression tests for what the structure-aware fuzzer (fuzz/onnx_model_fuzz.cpp) found in operators: crashes and hangs.
#include "onnx/model_builder.h"
#include "onnx/onnx_test_helpers.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

using onnx::Value;

onnx::Attribute attr_string(const std::string& name, const std::string& v) {
  onnx::Attribute a;
  a.name = name;
  a.type = onnx::Attribute::Type::String;
  a.s = v;
  return a;
}

/// TfIdfVectorizer over int64 input [rows, cols] with the given attributes (pool 1, 2, 3, (4, 5)).
onnx::Model tfidf(int64_t min_n, int64_t max_n, int64_t max_skip, std::vector<int64_t> counts = {0, 3},
                  std::vector<int64_t> indexes = {0, 1, 2, 3}) {
  GraphBuilder b;
  std::string x = b.input("x", onnx::ElemType::Int64, 2);
  b.output(b.node("TfIdfVectorizer", {x},
                  {attr_int("min_gram_length", min_n), attr_int("max_gram_length", max_n),
                   attr_int("max_skip_count", max_skip), attr_string("mode", "TF"), attr_ints("ngram_counts", counts),
                   attr_ints("ngram_indexes", indexes), attr_ints("pool_int64s", {1, 2, 3, 4, 5})}));
  return make_model(b.graph(), 9);
}

Value rows() { return Value::tensor(Array(std::vector<int64_t>{1, 2, 3, 4, 5, 4, 5, 1}, Shape{2, 4})); }

TEST(OnnxModelFuzz, TfIdfHugeMaxGramLengthDoesNotLoopForEver) {
  // max_gram_length 2^62 (and 2^31) looped over every length up to it, per row.
  auto out = onnx::run(tfidf(1, int64_t{1} << 62, 0), {rows()});
  auto same = onnx::run(tfidf(1, 2, 0), {rows()});
  EXPECT_TRUE(bit_equal(out[0].array(), same[0].array()));
  // Counts: unigrams 1, 2, 3 and the bigram (4, 5): row 0 has 1, 2, 3 and (4, 5)... of length 4 only
  // [1, 2, 3, 4], so (4, 5) is not in it; row 1 [5, 4, 5, 1] has 1 once and (4, 5) once.
  EXPECT_TRUE(all_close(out[0].array(), {1, 1, 1, 0, 1, 0, 0, 1}, 0, 0));
  // A huge skip count is bounded by the row too.
  auto skipped = onnx::run(tfidf(2, 2, int64_t{1} << 62), {rows()});
  auto skip_row = onnx::run(tfidf(2, 2, 4), {rows()});
  EXPECT_TRUE(bit_equal(skipped[0].array(), skip_row[0].array()));
}

TEST(OnnxModelFuzz, TfIdfAttributesOutOfRange) {
  EXPECT_THROW_MSG(onnx::run(tfidf(0, 2, 0), {rows()}), OnnxError,
                   "TfIdfVectorizer 'TfIdfVectorizer_0' (inputs tensor(int64)[2,4]): needs 1 <= min_gram_length <= max_gram_length and "
                   "max_skip_count >= 0, got 0, 2, 0");
  EXPECT_THROW_MSG(onnx::run(tfidf(1, 2, -1), {rows()}), OnnxError, "got 1, 2, -1");
  EXPECT_THROW_MSG(onnx::run(tfidf(1, 2, 0, {0, 9}), {rows()}), OnnxError,
                   "ngram_counts must be non-decreasing positions in the pool (5 items), got 9 at 1");
  EXPECT_THROW_MSG(onnx::run(tfidf(1, 2, 0, {3, 0}), {rows()}), OnnxError, "got 0 at 1");
  EXPECT_THROW_MSG(onnx::run(tfidf(1, 2, 0, {0, 3}, {0, -1, 2, 3}), {rows()}), OnnxError,
                   "ngram_indexes must be in [0, 2^24), got -1");
}

TEST(OnnxModelFuzz, Scan8StatesWithoutABatchAxis) {
  // Opset 8 Scan read a 0-d state's shape()[0] (a null read).
  GraphBuilder body("body");
  std::string s = body.input("s", onnx::ElemType::Float, 0);
  std::string x = body.input("x", onnx::ElemType::Float, 0);
  body.output(body.node("Add", {s, x}));
  GraphBuilder g;
  std::string state = g.input("state", onnx::ElemType::Float, 0);
  std::string seq = g.input("seq", onnx::ElemType::Float, 2);
  g.output(g.node("Scan", {"", state, seq}, {attr_graph("body", body.graph()), attr_int("num_scan_inputs", 1)}));
  onnx::Model m = make_model(g.graph(), 8);
  Value scalar = Value::tensor(Array(1.0f));
  Value xs = Value::tensor(ones({2, 3}, float32));
  EXPECT_THROW_MSG(onnx::run(m, {scalar, xs}), OnnxError,
                   "Scan 'Scan_0' (inputs none, tensor(float)[], tensor(float)[2,3]): input 1 (tensor(float)[]) must have a batch axis");
  // A scan input without the scanned axis, and batch sizes that differ.
  g = GraphBuilder();
  state = g.input("state", onnx::ElemType::Float, 1);
  seq = g.input("seq", onnx::ElemType::Float, 1);
  g.output(g.node("Scan", {"", state, seq}, {attr_graph("body", body.graph()), attr_int("num_scan_inputs", 1)}));
  onnx::Model m2 = make_model(g.graph(), 8);
  EXPECT_THROW_MSG(onnx::run(m2, {Value::tensor(ones({2}, float32)), Value::tensor(ones({2}, float32))}), OnnxError,
                   "input 2 (tensor(float)[2]) must have a batch axis and a scanned axis");
  g = GraphBuilder();
  state = g.input("state", onnx::ElemType::Float, 1);
  seq = g.input("seq", onnx::ElemType::Float, 2);
  g.output(g.node("Scan", {"", state, seq}, {attr_graph("body", body.graph()), attr_int("num_scan_inputs", 1)}));
  onnx::Model m3 = make_model(g.graph(), 8);
  EXPECT_THROW_MSG(onnx::run(m3, {Value::tensor(ones({2}, float32)), Value::tensor(ones({3, 4}, float32))}), OnnxError,
                   "inputs 1 and 2 have different batch sizes (tensor(float)[2], tensor(float)[3,4])");
  // Well-formed: each batch row scanned on its own (state 1 + 1 + 1 + 1 = 4 per row).
  auto out = onnx::run(m3, {Value::tensor(ones({2}, float32)), Value::tensor(ones({2, 3}, float32))});
  EXPECT_TRUE(all_close(out[0].array(), {4, 4}, 0, 0));
}

TEST(OnnxModelFuzz, ScanAxesShorterThanTheScanInputs) {
  GraphBuilder body("body");
  std::string s = body.input("s", onnx::ElemType::Float, 0);
  std::string x = body.input("x", onnx::ElemType::Float, 0);
  body.output(body.node("Add", {s, x}));
  GraphBuilder g;
  std::string state = g.input("state", onnx::ElemType::Float, 0);
  std::string seq = g.input("seq", onnx::ElemType::Float, 1);
  g.output(g.node("Scan", {state, seq},
                  {attr_graph("body", body.graph()), attr_int("num_scan_inputs", 1), attr_ints("scan_input_axes", {})}));
  onnx::Model m = make_model(g.graph(), 16);
  EXPECT_THROW_MSG(onnx::run(m, {Value::tensor(Array(1.0f)), Value::tensor(ones({3}, float32))}), OnnxError,
                   "Scan 'Scan_0' (inputs tensor(float)[], tensor(float)[3]): scan_input_axes and scan_input_directions (or directions) need one entry per scan "
                   "input (1), got 0 and 1");
}

TEST(OnnxModelFuzz, RoiAlignOutputSizeAndBatchIndices) {
  // output_height 2^32 sized a 480 GB host buffer; fewer batch indices than rois were read past
  // their end.
  auto model = [](int64_t out_h) {
    GraphBuilder g;
    std::string x = g.input("x", onnx::ElemType::Float, 4);
    std::string rois = g.input("rois", onnx::ElemType::Float, 2);
    std::string idx = g.input("idx", onnx::ElemType::Int64, 1);
    g.output(g.node("RoiAlign", {x, rois, idx}, {attr_int("output_height", out_h), attr_int("output_width", 5)}));
    return make_model(g.graph(), 16);
  };
  Value x = Value::tensor(ones({1, 2, 4, 4}, float32));
  Value rois = Value::tensor(Array(std::vector<float>{0, 0, 3, 3}, Shape{1, 4}));
  Value idx = Value::tensor(Array(std::vector<int64_t>{0}, Shape{1}));
  EXPECT_THROW_MSG(onnx::run(model(int64_t{1} << 32), {x, rois, idx}), OnnxError,
                   "RoiAlign 'RoiAlign_0' (inputs tensor(float)[1,2,4,4], tensor(float)[1,4], tensor(int64)[1]): the output [1, 2, 4294967296, 5] would hold more than 2^28 values");
  EXPECT_THROW_MSG(onnx::run(model(0), {x, rois, idx}), OnnxError,
                   "output_height and output_width must be >= 1 and sampling_ratio >= 0, got 0, 5, 0");
  Value no_idx = Value::tensor(Array(std::vector<int64_t>{}, Shape{0}));
  EXPECT_THROW_MSG(onnx::run(model(2), {x, rois, no_idx}), OnnxError, "0 batch indices for 1 rois");
  // A constant image gives its constant in every bin.
  auto out = onnx::run(model(2), {x, rois, idx});
  EXPECT_TRUE(all_close(out[0].array(), std::vector<double>(20, 1.0), 0, 0));
}

TEST(OnnxModelFuzz, QuantizedConvRanksAndAttributeLengths) {
  // A 1-d X made the spatial rank -1 (a vector of 2^64 - 1 elements: std::length_error).
  auto model = [](std::vector<onnx::Attribute> attrs) {
    GraphBuilder g;
    std::string x = g.input("x", onnx::ElemType::UInt8, 0);
    std::string w = g.input("w", onnx::ElemType::UInt8, 0);
    g.output(g.node("ConvInteger", {x, w}, std::move(attrs)));
    onnx::Model m = make_model(g.graph(), 10);
    auto& inputs = const_cast<onnx::Graph&>(*m.graph).inputs;
    for (auto& in : inputs) in.type.shape.reset();  // any rank
    return m;
  };
  auto u8 = [](Shape s) { return Value::tensor(astype(ones(s, float32), uint8)); };
  EXPECT_THROW_MSG(onnx::run(model({}), {u8({4}), u8({4})}), OnnxError,
                   "ConvInteger 'ConvInteger_0' (inputs tensor(uint8)[4], tensor(uint8)[4]): X and W must have the same rank, at least 3, got tensor(uint8)[4] and "
                   "tensor(uint8)[4]");
  EXPECT_THROW_MSG(onnx::run(model({attr_ints("pads", {1})}), {u8({1, 1, 4, 4}), u8({1, 1, 2, 2})}), OnnxError,
                   "kernel_shape, strides and dilations need 2 values and pads 4, got 2, 2, 2 and 1");
  EXPECT_THROW_MSG(onnx::run(model({attr_ints("strides", {0, 1})}), {u8({1, 1, 4, 4}), u8({1, 1, 2, 2})}), OnnxError,
                   "strides and dilations must be >= 1, got 0 and 1 at axis 0");
  // Ones through a 2x2 kernel of ones: 4 everywhere on the 3x3 output.
  auto out = onnx::run(model({}), {u8({1, 1, 4, 4}), u8({1, 1, 2, 2})});
  EXPECT_TRUE(all_close(out[0].array(), std::vector<double>(9, 4.0), 0, 0));
}

TEST(OnnxModelFuzz, AttentionWithoutKeyHeads) {
  // K with 0 heads: q_heads % kv_heads divided by zero (SIGFPE).
  GraphBuilder g;
  std::string q = g.input("q", onnx::ElemType::Float, 4);
  std::string k = g.input("k", onnx::ElemType::Float, 4);
  std::string v = g.input("v", onnx::ElemType::Float, 4);
  g.output(g.node("Attention", {q, k, v}));
  onnx::Model m = make_model(g.graph(), 23);
  Value qv = Value::tensor(ones({1, 2, 3, 4}, float32));
  Value empty = Value::tensor(ones({1, 0, 3, 4}, float32));
  EXPECT_THROW_MSG(onnx::run(m, {qv, empty, empty}), OnnxError,
                   "Attention 'Attention_0' (inputs tensor(float)[1,2,3,4], tensor(float)[1,0,3,4], tensor(float)[1,0,3,4]): K must have at least one head, got tensor(float)[1,0,3,4]");
  // 3-d Q with 4-d K and V: refused, not read past K's shape.
  GraphBuilder g3;
  q = g3.input("q", onnx::ElemType::Float, 3);
  k = g3.input("k", onnx::ElemType::Float, 4);
  v = g3.input("v", onnx::ElemType::Float, 4);
  g3.output(g3.node("Attention", {q, k, v}, {attr_int("q_num_heads", 2), attr_int("kv_num_heads", 2)}));
  onnx::Model m3 = make_model(g3.graph(), 23);
  EXPECT_THROW_MSG(onnx::run(m3, {Value::tensor(ones({1, 3, 8}, float32)), qv, qv}), OnnxError,
                   "Q, K and V must all be 3-d or 4-d");
}

TEST(OnnxModelFuzz, RnnWeightRanksAndSequenceLengths) {
  // A 0-d R was read at shape().back() (a read before its data).
  auto model = [](bool with_lens) {
    GraphBuilder g;
    std::string x = g.input("x", onnx::ElemType::Float, 3);
    std::string w = g.input("w", onnx::ElemType::Float, 3);
    std::string r = g.input("r", onnx::ElemType::Float, 3);
    std::vector<std::string> in{x, w, r};
    if (with_lens) {
      in.push_back("");
      in.push_back(g.input("lens", onnx::ElemType::Int32, 1));
    }
    g.output(g.node_n("RNN", in, 2, {attr_int("hidden_size", 4)})[1]);
    onnx::Model m = make_model(g.graph(), 14);
    for (auto& i : const_cast<onnx::Graph&>(*m.graph).inputs) i.type.shape.reset();  // any rank
    return m;
  };
  Value x = Value::tensor(ones({2, 3, 2}, float32));
  Value w = Value::tensor(ones({1, 4, 2}, float32));
  Value r = Value::tensor(ones({1, 4, 4}, float32));
  EXPECT_THROW_MSG(onnx::run(model(false), {x, w, Value::tensor(Array(1.0f))}), OnnxError,
                   "RNN 'RNN_0' (inputs tensor(float)[2,3,2], tensor(float)[1,4,2], tensor(float)[]): R must be [directions, gates * hidden, hidden], got tensor(float)[]");
  EXPECT_THROW_MSG(onnx::run(model(true), {x, w, r, Value::tensor(Array(std::vector<int32_t>{2}, Shape{1}))}),
                   OnnxError, "sequence_lens has 1 values for a batch of 3");
  // Zero weights: the hidden state stays tanh(0) = 0.
  Value zw = Value::tensor(zeros({1, 4, 2}, float32)), zr = Value::tensor(zeros({1, 4, 4}, float32));
  auto out = onnx::run(model(false), {x, zw, zr});
  EXPECT_TRUE(all_close(out[0].array(), std::vector<double>(12, 0.0), 0, 0));
}

TEST(OnnxModelFuzz, GraphInputDeclaredTwice) {
  // The runner moved the given value into the scope, so the second declaration of the name read a
  // moved-from value (a null array). Both declarations now read the value given for the name.
  GraphBuilder g;
  g.input("x", onnx::ElemType::Float, 1);
  g.input("x", onnx::ElemType::Float, 1);
  g.output(g.node("Relu", {"x"}));
  onnx::Model m = make_model(g.graph());
  Value a = Value::tensor(Array(std::vector<float>{-1, 2}, Shape{2}));
  Value b = Value::tensor(Array(std::vector<float>{3, -4}, Shape{2}));
  auto out = onnx::run(m, {a, b});  // by position: the later one wins the name
  EXPECT_TRUE(all_close(out[0].array(), {3, 0}, 0, 0));
  auto named = onnx::run_named(m, {{"x", a}});
  EXPECT_TRUE(all_close(named.at(m.graph->outputs[0].name).array(), {0, 2}, 0, 0));
  auto compiled = onnx::compile(m);
  EXPECT_TRUE(all_close(compiled.run_named({{"x", a}}).at(m.graph->outputs[0].name).array(), {0, 2}, 0, 0));
}

}  // namespace
}  // namespace smelt::test
