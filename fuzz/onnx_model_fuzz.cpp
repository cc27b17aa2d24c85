// Structure-aware libFuzzer target: mutates valid models (attributes, shapes, initializers, edges, opsets) and loads+runs them bounded.
//
// The custom mutator parses the input as a ModelProto, applies one to three mutations chosen by
// the fuzzer's seed, and serializes it again, so that most inputs stay well-formed models that
// get past the loader into the runner and the operators (byte-level mutation, which the
// onnx_loader_fuzz target does, rarely does). One time in eight it falls back to libFuzzer's own
// byte mutation, which keeps the loader's error paths covered. Each input is then loaded and run
// once with a deadline and a memory budget (fuzz/model_run.h): a smelt::Error is fine, anything
// else is a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fuzz/model_run.h"
#include "src/onnx/proto/onnx.pb.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

namespace pb = ::onnx;
using Rng = std::mt19937_64;

size_t pick(Rng& rng, size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); }
bool chance(Rng& rng, unsigned one_in) { return rng() % one_in == 0; }

int64_t interesting_int(Rng& rng) {
  static const int64_t values[] = {0,
                                   1,
                                   -1,
                                   2,
                                   3,
                                   -2,
                                   4,
                                   7,
                                   64,
                                   255,
                                   256,
                                   65536,
                                   std::numeric_limits<int32_t>::max(),
                                   std::numeric_limits<int32_t>::min(),
                                   int64_t{1} << 31,
                                   int64_t{1} << 32,
                                   int64_t{1} << 40,
                                   int64_t{1} << 62,
                                   -(int64_t{1} << 62),
                                   std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min()};
  if (chance(rng, 4)) return static_cast<int64_t>(pick(rng, 9)) - 4;
  return values[pick(rng, std::size(values))];
}

float interesting_float(Rng& rng) {
  static const float values[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 1e-30f, 1e30f, 3.4e38f,
                                 std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()};
  return values[pick(rng, std::size(values))];
}

std::string interesting_string(Rng& rng) {
  static const char* const values[] = {"",         "NOTSET",    "SAME_UPPER", "SAME_LOWER",  "VALID",
                                       "constant", "reflect",   "edge",       "wrap",        "linear",
                                       "nearest",  "cubic",     "half_pixel", "asymmetric",  "tf_crop_and_resize",
                                       "DCR",      "CRD",       "(a|b)*",     "(a+)+$",      "[",
                                       "a{1000}{1000}", "\\",   "LOWER",      "UPPER",       "TF",
                                       "IDF",      "TFIDF",     "ij,jk->ik",  "...ii->...i", "i,i",
                                       "Relu",     "Tanh",      "Sigmoid",    "mean",        "sum",
                                       "none",     "round_prefer_floor", "floor", "ceil",    "max"};
  return values[pick(rng, std::size(values))];
}

const char* random_op(Rng& rng) {
  static const char* const ops[] = {
      "Add",         "Mul",          "MatMul",        "Gemm",        "Reshape",      "Transpose",   "Concat",
      "Slice",       "Gather",       "GatherElements", "GatherND",   "Expand",       "Tile",        "Pad",
      "Resize",      "Conv",         "ConvTranspose", "MaxPool",     "AveragePool",  "Split",       "Squeeze",
      "Unsqueeze",   "ReduceSum",    "ReduceMean",    "Softmax",     "TopK",         "NonZero",     "Range",
      "ConstantOfShape", "Cast",     "Where",         "Einsum",      "OneHot",       "ScatterND",   "ScatterElements",
      "CumSum",      "DepthToSpace", "SpaceToDepth",  "Shape",       "Size",         "Flatten",     "Identity",
      "ArgMax",      "Trilu",        "Compress",      "Unique",      "NonMaxSuppression", "RoiAlign", "GridSample",
      "LayerNormalization", "BatchNormalization", "InstanceNormalization", "Loop", "If", "Scan",
      "SequenceConstruct", "SplitToSequence", "ConcatFromSequence", "SequenceAt", "SequenceInsert",
      "RegexFullMatch", "StringSplit", "StringConcat", "Mod", "Pow", "Clip", "Max", "Min", "Sum", "Mean"};
  return ops[pick(rng, std::size(ops))];
}

const char* random_attribute_name(Rng& rng) {
  static const char* const names[] = {"axis", "axes", "perm", "keepdims", "to", "mode", "pads", "kernel_shape",
                                      "strides", "dilations", "group", "epsilon", "blocksize", "k", "largest",
                                      "sorted", "split", "num_outputs", "start", "end", "alpha", "beta", "transA",
                                      "transB", "exclusive", "reverse", "upper", "batch_dims", "reduction",
                                      "output_padding", "output_shape", "auto_pad", "ceil_mode", "value",
                                      "pattern", "equation", "delimiter", "maxsplit", "num_scan_inputs",
                                      "scan_input_axes", "scan_output_axes", "new_axis", "coordinate_transformation_mode"};
  return names[pick(rng, std::size(names))];
}

/// Every graph of the model (main, nested subgraphs, function bodies as node lists).
struct Places {
  std::vector<pb::GraphProto*> graphs;
  std::vector<pb::NodeProto*> nodes;
  std::vector<pb::TensorProto*> tensors;   // initializers and tensor attributes
  std::vector<pb::ValueInfoProto*> infos;  // inputs, outputs, value_info
};

void collect(pb::ModelProto& m, Places& p) {
  std::vector<pb::GraphProto*> work{m.mutable_graph()};
  auto add_nodes = [&](google::protobuf::RepeatedPtrField<pb::NodeProto>* nodes) {
    for (auto& n : *nodes) {
      p.nodes.push_back(&n);
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) work.push_back(a.mutable_g());
        for (auto& g : *a.mutable_graphs()) work.push_back(&g);
        if (a.has_t()) p.tensors.push_back(a.mutable_t());
      }
    }
  };
  for (auto& f : *m.mutable_functions()) add_nodes(f.mutable_node());
  while (!work.empty()) {
    pb::GraphProto* g = work.back();
    work.pop_back();
    p.graphs.push_back(g);
    for (auto& t : *g->mutable_initializer()) p.tensors.push_back(&t);
    for (auto& v : *g->mutable_input()) p.infos.push_back(&v);
    for (auto& v : *g->mutable_output()) p.infos.push_back(&v);
    for (auto& v : *g->mutable_value_info()) p.infos.push_back(&v);
    add_nodes(g->mutable_node());
  }
}

void mutate_ints(google::protobuf::RepeatedField<int64_t>* v, Rng& rng) {
  switch (pick(rng, 4)) {
    case 0:
      if (!v->empty()) v->Set(static_cast<int>(pick(rng, static_cast<size_t>(v->size()))), interesting_int(rng));
      break;
    case 1: v->Add(interesting_int(rng)); break;
    case 2:
      if (!v->empty()) v->RemoveLast();
      break;
    default:
      if (v->size() >= 2) v->SwapElements(0, v->size() - 1);
      break;
  }
}

void mutate_tensor(pb::TensorProto& t, Rng& rng) {
  switch (pick(rng, 7)) {
    case 0:  // a dim
      if (t.dims_size() > 0) t.set_dims(static_cast<int>(pick(rng, static_cast<size_t>(t.dims_size()))), interesting_int(rng));
      else t.add_dims(interesting_int(rng));
      break;
    case 1: mutate_ints(t.mutable_dims(), rng); break;
    case 2: t.set_data_type(static_cast<int32_t>(pick(rng, 28))); break;
    case 3:  // a byte of the data
      if (!t.raw_data().empty()) {
        std::string* raw = t.mutable_raw_data();
        (*raw)[pick(rng, raw->size())] ^= static_cast<char>(1u << pick(rng, 8));
      }
      break;
    case 4:  // the data's length
      if (t.has_raw_data()) t.mutable_raw_data()->resize(pick(rng, t.raw_data().size() * 2 + 2), '\x01');
      else t.add_int64_data(interesting_int(rng));
      break;
    case 5:  // typed values
      if (t.int64_data_size() > 0) t.set_int64_data(0, interesting_int(rng));
      else if (t.float_data_size() > 0) t.set_float_data(0, interesting_float(rng));
      else if (t.int32_data_size() > 0) t.set_int32_data(0, static_cast<int32_t>(interesting_int(rng)));
      else if (t.has_raw_data() && t.raw_data().size() >= 8) {
        int64_t v = interesting_int(rng);
        std::memcpy(t.mutable_raw_data()->data(), &v, 8);
      }
      break;
    default: {  // external data (the folder does not exist: only the checks run)
      t.set_data_location(pb::TensorProto::EXTERNAL);
      auto* kv = t.add_external_data();
      static const char* const keys[] = {"location", "offset", "length"};
      static const char* const values[] = {"w.bin", "../w.bin", "/etc/passwd", ".", "", "8", "-1",
                                           "99999999999999999999", "9223372036854775807"};
      kv->set_key(keys[pick(rng, 3)]);
      kv->set_value(values[pick(rng, std::size(values))]);
      break;
    }
  }
}

void mutate_attribute(pb::NodeProto& n, Rng& rng) {
  if (n.attribute_size() == 0 || chance(rng, 5)) {  // a new attribute
    auto* a = n.add_attribute();
    a->set_name(random_attribute_name(rng));
    switch (pick(rng, 4)) {
      case 0: a->set_type(pb::AttributeProto::INT); a->set_i(interesting_int(rng)); break;
      case 1:
        a->set_type(pb::AttributeProto::INTS);
        for (size_t k = pick(rng, 5); k > 0; --k) a->add_ints(interesting_int(rng));
        break;
      case 2: a->set_type(pb::AttributeProto::FLOAT); a->set_f(interesting_float(rng)); break;
      default: a->set_type(pb::AttributeProto::STRING); a->set_s(interesting_string(rng)); break;
    }
    return;
  }
  const int index = static_cast<int>(pick(rng, static_cast<size_t>(n.attribute_size())));
  if (chance(rng, 10)) {
    n.mutable_attribute()->DeleteSubrange(index, 1);
    return;
  }
  auto& a = *n.mutable_attribute(index);
  if (chance(rng, 12)) {  // the wrong type for its name
    a.set_type(static_cast<pb::AttributeProto::AttributeType>(pick(rng, 15)));
    return;
  }
  switch (a.type()) {
    case pb::AttributeProto::INT: a.set_i(interesting_int(rng)); break;
    case pb::AttributeProto::FLOAT: a.set_f(interesting_float(rng)); break;
    case pb::AttributeProto::STRING: a.set_s(interesting_string(rng)); break;
    case pb::AttributeProto::INTS: mutate_ints(a.mutable_ints(), rng); break;
    case pb::AttributeProto::FLOATS:
      if (a.floats_size() > 0 && chance(rng, 2)) a.set_floats(0, interesting_float(rng));
      else a.add_floats(interesting_float(rng));
      break;
    case pb::AttributeProto::STRINGS: a.add_strings(interesting_string(rng)); break;
    case pb::AttributeProto::TENSOR: mutate_tensor(*a.mutable_t(), rng); break;
    default: a.set_i(interesting_int(rng)); break;
  }
}

void mutate_shape(pb::ValueInfoProto& v, Rng& rng) {
  auto* t = v.mutable_type()->mutable_tensor_type();
  switch (pick(rng, 4)) {
    case 0: t->set_elem_type(static_cast<int32_t>(pick(rng, 28))); break;
    case 1: t->mutable_shape()->add_dim()->set_dim_value(pick(rng, 5)); break;
    case 2:
      if (t->shape().dim_size() > 0) t->mutable_shape()->mutable_dim()->RemoveLast();
      break;
    default:
      if (t->shape().dim_size() > 0)
        t->mutable_shape()->mutable_dim(static_cast<int>(pick(rng, static_cast<size_t>(t->shape().dim_size()))))
            ->set_dim_value(static_cast<int64_t>(pick(rng, 6)));
      break;
  }
}

/// A value name visible in `g` (graph inputs, initializers, node outputs), or "".
std::string some_name(const pb::GraphProto& g, Rng& rng) {
  std::vector<const std::string*> names;
  for (const auto& v : g.input()) names.push_back(&v.name());
  for (const auto& t : g.initializer()) names.push_back(&t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.push_back(&o);
  if (names.empty() || chance(rng, 10)) return "";
  return *names[pick(rng, names.size())];
}

void mutate_edges(pb::GraphProto& g, Rng& rng) {
  if (g.node_size() == 0) return;
  const int k = static_cast<int>(pick(rng, static_cast<size_t>(g.node_size())));
  pb::NodeProto& n = *g.mutable_node(k);
  switch (pick(rng, 6)) {
    case 0:  // rewire an input
      if (n.input_size() > 0) n.set_input(static_cast<int>(pick(rng, static_cast<size_t>(n.input_size()))), some_name(g, rng));
      else n.add_input(some_name(g, rng));
      break;
    case 1: n.add_input(some_name(g, rng)); break;
    case 2:  // an output renamed onto an existing value (duplicate producers, cycles)
      if (n.output_size() > 0) n.set_output(static_cast<int>(pick(rng, static_cast<size_t>(n.output_size()))), some_name(g, rng));
      break;
    case 3: g.mutable_node()->DeleteSubrange(k, 1); break;
    case 4: *g.add_node() = n; break;
    default: {  // a new node of some operator on existing values
      pb::NodeProto m;
      m.set_op_type(random_op(rng));
      m.set_name("fuzz_" + std::to_string(g.node_size()));
      for (size_t i = 1 + pick(rng, 3); i > 0; --i) m.add_input(some_name(g, rng));
      m.add_output("fuzz_out_" + std::to_string(g.node_size()));
      if (chance(rng, 2) && g.output_size() > 0) g.mutable_output(0)->set_name(m.output(0));
      *g.add_node() = m;
      break;
    }
  }
}

void mutate_opset(pb::ModelProto& m, Places& p, Rng& rng) {
  switch (pick(rng, 4)) {
    case 0:
      if (m.opset_import_size() > 0) m.mutable_opset_import(0)->set_version(static_cast<int64_t>(pick(rng, 26)));
      break;
    case 1: m.set_ir_version(static_cast<int64_t>(pick(rng, 14))); break;
    case 2:
      if (!p.nodes.empty()) p.nodes[pick(rng, p.nodes.size())]->set_op_type(random_op(rng));
      break;
    default:  // a function that calls itself or another one
      if (m.functions_size() > 0) {
        auto& f = *m.mutable_functions(static_cast<int>(pick(rng, static_cast<size_t>(m.functions_size()))));
        const auto& callee = m.functions(static_cast<int>(pick(rng, static_cast<size_t>(m.functions_size()))));
        pb::NodeProto call;
        call.set_op_type(callee.name());
        call.set_domain(callee.domain());
        if (f.input_size() > 0) call.add_input(f.input(0));
        call.add_output("fuzz_call");
        *f.add_node() = call;
      } else if (!p.nodes.empty()) {
        p.nodes[pick(rng, p.nodes.size())]->set_domain(chance(rng, 2) ? "com.microsoft" : "ai.onnx.ml");
      }
      break;
  }
}

void mutate_once(pb::ModelProto& m, Rng& rng) {
  Places p;
  collect(m, p);
  switch (pick(rng, 5)) {
    case 0:
      if (!p.nodes.empty()) mutate_attribute(*p.nodes[pick(rng, p.nodes.size())], rng);
      break;
    case 1:
      if (!p.infos.empty()) mutate_shape(*p.infos[pick(rng, p.infos.size())], rng);
      break;
    case 2:
      if (!p.tensors.empty()) mutate_tensor(*p.tensors[pick(rng, p.tensors.size())], rng);
      break;
    case 3:
      if (!p.graphs.empty()) mutate_edges(*p.graphs[pick(rng, p.graphs.size())], rng);
      break;
    default: mutate_opset(m, p, rng); break;
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Rng rng(seed);
  pb::ModelProto m;
  if (chance(rng, 8) || !m.ParseFromArray(data, static_cast<int>(size))) return LLVMFuzzerMutate(data, size, max_size);
  for (size_t k = 1 + pick(rng, 3); k > 0; --k) mutate_once(m, rng);
  std::string out;
  if (!m.SerializeToString(&out) || out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)smelt::fuzz::load_and_run(data, size);
  return 0;
}
