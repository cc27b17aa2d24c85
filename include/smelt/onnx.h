// ONNX models: loading (.onnx files into plain C++ structures), values, and the eager runner.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "smelt/array.h"
#include "smelt/dtype.h"
#include "smelt/errors.h"

namespace smelt {

// Declared here rather than in errors.h to keep that header (included by most of the library)
// unchanged; they are plain smelt::Error subclasses and can move there as they are.
/// A run was stopped through its CancelToken; the message names the node that was running.
class Cancelled : public Error {
 public:
  using Error::Error;
};
/// A run passed its deadline (RunOptions::timeout or ::deadline); the message names the node.
class DeadlineExceeded : public Error {
 public:
  using Error::Error;
};

}  // namespace smelt

namespace smelt::onnx {

// ---------------------------------------------------------------------------------------------
// Element types and value types
// ---------------------------------------------------------------------------------------------

/// ONNX tensor element types, numbered as TensorProto.DataType.
enum class ElemType : int32_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
  Float8E4M3FN = 17,
  Float8E4M3FNUZ = 18,
  Float8E5M2 = 19,
  Float8E5M2FNUZ = 20,
  UInt4 = 21,
  Int4 = 22,
  Float4E2M1 = 23,
  Float8E8M0 = 24,
  UInt2 = 25,
  Int2 = 26,
};

/// ONNX's spelling: "float", "int64", "float8e4m3fn", ... ("unknown(N)" for other codes).
std::string elem_type_name(ElemType t);
/// The smelt dtype that holds this element type exactly, or nullopt for string and complex.
/// Types smelt has no arithmetic for are held in a *storage* dtype: float8 and float4 types as
/// their bits in uint8, int4/int2 as int8 and uint4/uint2 as uint8 (one element per byte,
/// unpacked). `is_storage_type` tells which.
std::optional<Dtype> storage_dtype(ElemType t);
bool is_storage_type(ElemType t);
/// The element type of a smelt dtype (float32 -> Float, ...).
ElemType elem_type_of(Dtype dtype);

/// One dimension of a declared shape: a number, a symbol, or unknown (value < 0, no symbol).
struct Dim {
  int64_t value = -1;
  std::string param;
};

/// The declared type of a value (TypeProto).
struct TypeInfo {
  enum class Kind : uint8_t { Unknown, Tensor, SparseTensor, Sequence, Map, Optional, Opaque };
  Kind kind = Kind::Unknown;
  ElemType elem_type = ElemType::Undefined;  // tensors and sparse tensors; a map's key type
  std::optional<std::vector<Dim>> shape;      // tensors: absent when even the rank is unknown
  std::shared_ptr<const TypeInfo> element;    // sequence / optional element, map value
  /// "tensor(float)[2,N]", "seq(tensor(int64))", "optional(seq(tensor(float)))", ...
  std::string to_string() const;
};

/// A tensor of strings (ONNX STRING), row-major.
struct StringTensor {
  Shape shape;
  std::vector<std::string> data;
};

class Value;
namespace detail {
struct HostCopy;
/// `device_value` (a tensor) whose host_array() is `host` (its values on the CPU), so that an
/// initializer uploaded to a GPU is read on the host from the file's copy, never read back.
Value with_host_copy(Value device_value, Array host);
}  // namespace detail

/// A runtime value. Tensors are smelt Arrays tagged with their ONNX element type; strings,
/// sequences, maps and optionals have their own kinds; `None` is an omitted optional input.
class Value {
 public:
  enum class Kind : uint8_t { None, Tensor, Strings, Sequence, Map, Optional };

  Value() = default;
  /// A tensor whose element type is the array's dtype.
  static Value tensor(Array a);
  /// A tensor of a storage element type (see storage_dtype); `a`'s dtype must be that storage.
  static Value tensor(Array a, ElemType type);
  static Value strings(StringTensor s);
  /// A sequence; `element` is its element type (needed to describe an empty sequence).
  static Value sequence(std::vector<Value> items, TypeInfo element);
  /// A map from int64 or string keys to a sequence of values.
  static Value map(ElemType key_type, std::vector<int64_t> int_keys, std::vector<std::string> string_keys,
                   Value values);
  /// An optional holding `content`, or empty (nullopt) of type `element`.
  static Value optional(std::optional<Value> content, TypeInfo element);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  bool is_strings() const { return kind_ == Kind::Strings; }
  bool is_sequence() const { return kind_ == Kind::Sequence; }
  bool is_map() const { return kind_ == Kind::Map; }
  bool is_optional() const { return kind_ == Kind::Optional; }

  /// Tensors: the array (holding the storage dtype for storage element types).
  const Array& array() const;
  /// Tensors: the array on the host. For a device array, the first call copies it to the CPU and
  /// keeps the copy with the value (copies of this Value share it), so operators that read a
  /// device value on the host (a shape, a condition, a count) transfer it once however many read it.
  const Array& host_array() const;
  /// Tensors and string tensors: the ONNX element type.
  ElemType elem_type() const;
  /// Tensors and string tensors: the shape.
  const Shape& shape() const;
  const StringTensor& string_tensor() const;
  const std::vector<Value>& items() const;        // sequences
  const std::optional<Value>& content() const;    // optionals (nullopt when empty)
  /// Maps.
  ElemType map_key_type() const;
  const std::vector<int64_t>& map_int_keys() const;
  const std::vector<std::string>& map_string_keys() const;
  const Value& map_values() const;
  /// The element type of a sequence or an optional.
  const TypeInfo& element_type() const;

  /// The value's type ("tensor(float)[2,3]", "seq(tensor(int64))", "optional(tensor(float))").
  TypeInfo type() const;
  /// A short description for messages: "tensor(float)[2,3]", "none", ...
  std::string describe() const;

 private:
  Kind kind_ = Kind::None;
  ElemType elem_ = ElemType::Undefined;
  Array array_;
  std::shared_ptr<const StringTensor> strings_;
  std::shared_ptr<const std::vector<Value>> items_;
  std::shared_ptr<const std::optional<Value>> content_;
  std::shared_ptr<const TypeInfo> element_;
  std::shared_ptr<const std::vector<int64_t>> int_keys_;
  std::shared_ptr<const std::vector<std::string>> string_keys_;
  /// Device tensors: the host copy made by host_array() (shared by copies of the value).
  std::shared_ptr<detail::HostCopy> host_;
  friend Value detail::with_host_copy(Value device_value, Array host);
};

// ---------------------------------------------------------------------------------------------
// The model (smelt's own structures, filled from the protobuf file)
// ---------------------------------------------------------------------------------------------

struct Graph;

struct ValueInfo {
  std::string name;
  TypeInfo type;
};

/// A node attribute; exactly the field that `type` names is set.
struct Attribute {
  enum class Type : uint8_t {
    Undefined, Float, Int, String, Tensor, Graph, SparseTensor, TypeProto,
    Floats, Ints, Strings, Tensors, Graphs, SparseTensors, TypeProtos,
  };
  std::string name;
  Type type = Type::Undefined;
  /// Inside a function body: take the caller's attribute of this name instead.
  std::string ref_attr_name;
  float f = 0.0f;
  int64_t i = 0;
  std::string s;
  Value t;  // Tensor and SparseTensor (densified)
  std::shared_ptr<const Graph> g;
  TypeInfo tp;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Value> tensors;
  std::vector<std::shared_ptr<const Graph>> graphs;
  std::vector<TypeInfo> type_protos;
};
/// "float", "ints", "graph", ...
const char* attribute_type_name(Attribute::Type t);

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" and "ai.onnx" both mean the default domain
  std::string overload;
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;  // "" marks an unused optional output
  std::vector<Attribute> attributes;
  /// The attribute called `name`, or null.
  const Attribute* attribute(const std::string& name) const;
  /// "Add" or "Add 'node_name'" for messages.
  std::string label() const;
};

namespace detail {
struct DeviceConstants;
}

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_info;
  /// Constants by name (dense and sparse initializers), in file order.
  std::vector<std::pair<std::string, Value>> initializers;
  /// Copies of the initializers on the devices runs asked for (RunOptions::device): made by the
  /// first run on a device, shared by later runs and threads, freed with the graph. Set by the
  /// loader; a graph built by hand has none and uploads its initializers on every such run.
  std::shared_ptr<detail::DeviceConstants> device_constants;
};

struct OpsetImport {
  std::string domain;
  int64_t version = 0;
};

/// A model-local function: nodes whose (domain, op_type, overload) name it run its body.
struct Function {
  std::string domain;
  std::string name;
  std::string overload;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> attributes;       // without defaults
  std::vector<Attribute> attribute_defaults; // with defaults
  std::vector<Node> nodes;
  std::vector<OpsetImport> opsets;
};

struct Model {
  int64_t ir_version = 0;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::vector<OpsetImport> opsets;
  std::shared_ptr<const Graph> graph;
  std::vector<Function> functions;
  std::vector<std::pair<std::string, std::string>> metadata;
  /// The folder external data paths are relative to (the model file's folder).
  std::string base_dir;

  /// The imported version of `domain` ("" and "ai.onnx" are the same), or 0 when not imported.
  int64_t opset(const std::string& domain) const;
};

/// An operator that the model uses and smelt cannot run.
struct UnsupportedOp {
  std::string domain;
  std::string op_type;
  int64_t version = 0;  // the model's opset for the domain
  std::string node;     // the first node that uses it
};

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------

struct LoadOptions {
  /// Fail with OnnxError listing every unsupported (domain, op, version, node) in the model.
  bool check_operators = true;
  /// Rewrite exporter subgraphs into fused ops after loading (docs/onnx.md, "Fusions at load"):
  /// GELU chains (erf and tanh forms), decomposed LayerNorms and attention (MatMul, scale, mask,
  /// Softmax, MatMul, with GQA repeats) into ai.smelt ops, BatchNormalization after a
  /// constant-weight Conv folded into the Conv, and a Gemm's constant B read with transB stored
  /// transposed once. False keeps the graph exactly as in the file.
  bool fuse = true;
  /// Initializers of 4 KiB or more keep their bytes where they lie in the mapped model file and
  /// external data files when aligned (no copy; docs/onnx.md, "Loading large models"). A mapped
  /// file rewritten or truncated while the model is loaded shows the process its new bytes or
  /// faults (SIGBUS) on the next read: replace files by renaming a new one over them. False
  /// copies every initializer into memory the process owns, and the files may then change freely.
  bool map_weights = true;
};

/// Reads an .onnx file. Malformed or truncated files, unsupported IR versions or element types
/// and missing external data raise OnnxError naming the file and what is wrong.
Model load(const std::string& path, const LoadOptions& options = {});
/// Parses a serialized ModelProto; external data is looked up under `base_dir`.
Model load_from_memory(const void* data, size_t size, const std::string& base_dir = ".",
                       const LoadOptions& options = {});
/// Every operator of the model (main graph, subgraphs, functions) that smelt cannot run.
std::vector<UnsupportedOp> unsupported_operators(const Model& model);

/// Reads a serialized TensorProto, SequenceProto, OptionalProto or MapProto (a test-data .pb
/// file); `type` says which one is expected (Unknown means a tensor).
Value load_value(const std::string& path, const TypeInfo& type = {});
Value parse_value(const void* data, size_t size, const TypeInfo& type = {}, const std::string& what = "value");

/// ONNX Cast: a tensor (or string tensor) converted to element type `to`. Casts to float8
/// types round to nearest even and, with `saturate`, clamp to the largest finite value.
Value cast(const Value& v, ElemType to, bool saturate = true);

// ---------------------------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------------------------

/// Stops runs from another thread: `cancel()` is seen at the run's next check (before each node,
/// in every Loop/Scan/SequenceMap iteration and inside long host loops such as string ops), which
/// raises smelt::Cancelled naming the node. One token may serve several runs; it stays cancelled.
class CancelToken {
 public:
  void cancel() noexcept { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

/// What one run did besides computing (RunOptions::stats).
struct RunStats {
  /// Copies from a GPU to the host during the run and their bytes: host values read at graph
  /// breaks (shape tensors, If/Loop conditions, counts, TopK's k), NonZero's count, and whole
  /// tensors of operators that compute on the host (see host_computed). Counted on the calling
  /// thread (smelt::thread_transfer_counts); 0 on the CPU.
  uint64_t device_to_host_copies = 0;
  uint64_t device_to_host_bytes = 0;
  /// Copies from the host to a GPU (inputs moved there, host-made values used on the GPU; the
  /// first run on a device also uploads the initializers).
  uint64_t host_to_device_copies = 0;
  uint64_t host_to_device_bytes = 0;
  /// Nodes that computed on the host on device inputs because the operator has no GPU kernel
  /// (NonMaxSuppression): "NonMaxSuppression 'nms': boxes and scores read to the host (N bytes)".
  std::vector<std::string> host_computed;
};

/// Bounds on one run (onnx::run, run_named, a compiled model's call). The defaults bound only the
/// nesting depth, so a run without options behaves as before.
struct RunOptions {
  /// Stop with smelt::DeadlineExceeded once this much time has passed since the run started
  /// (zero: no limit). Checked where cancellation is; a single operator's kernel is not interrupted.
  std::chrono::milliseconds timeout{0};
  /// An absolute deadline on the steady clock; with `timeout` too, the earlier one applies.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  /// Cancel from any thread (see CancelToken). Null: not cancellable.
  std::shared_ptr<CancelToken> cancel;
  /// The most bytes of tensors the run may hold at once (0: no limit): every value the run makes
  /// and keeps by name (graph values, Loop states and accumulated scan outputs, sequence items,
  /// string bytes), counted at its logical size after each node; inputs and initializers are not
  /// counted. Exceeding it raises smelt::OutOfMemory naming the node.
  int64_t memory_budget_bytes = 0;
  /// How deep subgraphs (If/Loop/Scan bodies) and model-local function calls may nest; deeper
  /// raises OnnxError naming the node. (Recursive functions are refused at load already.)
  int max_call_depth = 64;
  /// Where the run's tensor work happens. Unset: where the inputs are (the CPU for host arrays).
  /// Set: tensor inputs are moved there and the initializers are uploaded there once per model
  /// and device (Graph::device_constants; small integer ones, shapes and axes, stay on the host);
  /// outputs stay there. Shape and index arithmetic of the operators still runs on the host, and
  /// graph breaks read back only the values they need (RunStats counts them).
  /// A GPU this process cannot use raises DeviceError.
  std::optional<Device> device;
  /// Arrays that replace the main graph's initializers of those names for this run (fine-tuning,
  /// docs/onnx.md): each must name an initializer and have its dtype and shape, else OnnxError.
  /// onnx::run is traceable by the transforms, so `grad` of a loss of the outputs with respect to
  /// these arrays works (see `parameters`).
  std::map<std::string, Array> initializers;
  /// The key random operators draw from (Dropout in training mode): each draw splits it, so a run
  /// with the same key draws the same values. Absent: the thread's key sequence (docs/onnx.md).
  /// A node with a `seed` attribute draws from key(seed) instead.
  std::optional<Array> key;
  /// Filled at the end of the run when set (also when the run raises): its transfers and host
  /// computations (RunStats). Each run overwrites it; give each thread its own.
  RunStats* stats = nullptr;
};

/// Runs the model eagerly on the graph inputs given in order (graph inputs that are also
/// initializers may be left out at the end). Returns the graph outputs in order, evaluated (left
/// lazy when traced: under smelt::compile or a transform such as grad, docs/onnx.md "Fine-tuning").
/// Missing inputs and inputs of the wrong kind, element type or rank raise OnnxError naming
/// the input with the expected and the given type. `options` bounds the run's time, memory and
/// nesting (Cancelled, DeadlineExceeded, OutOfMemory, OnnxError).
std::vector<Value> run(const Model& model, const std::vector<Value>& inputs, const RunOptions& options = {});
/// The same with inputs by name (unknown names raise OnnxError listing the model's inputs);
/// returns the outputs by name.
std::map<std::string, Value> run_named(const Model& model, const std::map<std::string, Value>& inputs,
                                       const RunOptions& options = {});

/// The model's trainable parameters: its main graph's floating-point tensor initializers by name
/// (a tree: `std::map` of arrays). Pass them, or arrays derived from them, back through
/// RunOptions::initializers; `smelt::grad` of a scalar loss of the outputs with respect to this map
/// gives one gradient per initializer. Note that `LoadOptions::fuse` folds BatchNormalization into
/// constant-weight Convs: load with `fuse = false` to train the file's own initializers.
std::map<std::string, Array> parameters(const Model& model);

// ---------------------------------------------------------------------------------------------
// Compiled models (docs/onnx-compile.md)
// ---------------------------------------------------------------------------------------------

namespace detail {
struct CompiledModelImpl;
}

struct CompileModelOptions {
  /// Graph inputs given by value at compile time. Calls leave them out (or pass None or the same
  /// value); they are constants of every trace, so an If on one traces only its branch.
  std::map<std::string, Value> static_inputs;
  /// Entries kept per segment position; the least recently used is evicted past it.
  size_t cache_size = 8;
  /// A segment of fewer nodes than this next to a break runs eagerly (a model without breaks
  /// always compiles whole).
  int eager_below = 20;
  /// Where the compiled model runs. Unset: the default device when compile is called
  /// (smelt::default_device(): the first GPU when there is one, else the CPU; a DefaultDeviceScope
  /// applies). Tensor inputs given on another device are moved there, as onnx::run does with
  /// RunOptions::device; the initializers are uploaded there once per model and device
  /// (Graph::device_constants, shared with onnx::run); outputs stay there. A GPU this process
  /// cannot use raises DeviceError from compile.
  std::optional<Device> device;
  /// False: the model must compile as one segment; a break raises UnknownValueError naming the
  /// node and the graph inputs it depends on.
  bool allow_breaks = true;
  /// Fuse element-wise chains inside segments into generated kernels.
  bool fuse = true;
  /// Tiered execution (as CompileOptions::tiered): a segment whose kernels are not loaded yet
  /// runs unfused while they load or build in the background, then switches to them. SMELT_TIERED=0
  /// or 1 overrides it for the whole process.
  bool tiered = true;
};

/// Counters of one segment position (a place where a segment starts), cumulated over calls.
struct SegmentStats {
  size_t position = 0;       // index in the top-level graph's execution order
  std::string start_node;    // label of the node at `position`
  uint64_t traces = 0;       // traces made (a retrace that makes a host value static counts)
  uint64_t hits = 0;         // calls served by a cached entry
  uint64_t misses = 0;       // calls that traced a new entry
  uint64_t evictions = 0;    // entries dropped past cache_size
  uint64_t compiled_runs = 0;  // runs of a compiled segment here
  uint64_t interpreter_runs = 0;  // of those, runs unfused while its kernels were loading (tiered)
  uint64_t fused_runs = 0;        // of those, runs with every kernel it has
  uint64_t eager_runs = 0;     // runs of a segment here that stayed eager (eager_below, or a break at once)
  size_t cached = 0;         // entries held now
  double trace_ms = 0.0;     // total tracing time
  double build_ms = 0.0;     // total optimization and kernel build time
};

struct CompiledModelStats {
  uint64_t calls = 0;              // calls, the warm-up call on example inputs included
  uint64_t break_runs = 0;         // eager runs of break nodes
  double compile_ms = 0.0;         // total trace + build time of every segment
  Device device;                   // where the model runs (CompileModelOptions::device resolved)
  uint64_t device_to_host_copies = 0;  // GPU -> host copies of every call (RunStats), summed
  uint64_t device_to_host_bytes = 0;
  uint64_t interpreter_runs = 0;   // compiled segment runs on the interpreter tier (all segments)
  uint64_t fused_runs = 0;         // compiled segment runs on the fused tier (all segments)
  std::vector<SegmentStats> segments;  // by position
};

/// How an overlay segment ran.
enum class SegmentKind : uint8_t {
  Compiled,    // traced and replayed compiled
  EagerSmall,  // traced, but fewer than eager_below nodes next to a break: its nodes ran eagerly
  Break,       // one break node, run eagerly on real values
};

/// A fused kernel of a compiled segment and the ONNX nodes its element-wise steps came from.
struct FusedGroup {
  /// Labels of the nodes ("Mul 'm1'"), in execution order, each once.
  std::vector<std::string> nodes;
  /// The kernel's own description (its root expression), for debugging.
  std::string kernel;
  /// "Fused[Mul 'm1', Add 'a1', Erf 'e1']".
  std::string str() const;
};

/// One part of a call's path through the top-level graph, in execution order.
struct OverlaySegment {
  size_t start = 0;            // first position (execution order of the top-level graph)
  size_t stop = 0;             // one past the last position
  std::string start_node;      // labels of the first and last nodes
  std::string stop_node;
  SegmentKind kind = SegmentKind::Break;
  bool compiled = false;       // kind == SegmentKind::Compiled
  /// Compiled and small segments: why it ends ("break: NonZero 'nz'" or "end of graph"; small
  /// ones add "(fewer than eager_below = 20 nodes)"). A break node: why it could not be traced,
  /// from the node's point of view ("NonZero 'nz': output shape depends on the values of its
  /// input", "Reshape 'r': needs the values of input 'shape' on the host"); the evaluation error
  /// behind it is the `break_error` field of the segment.compile.stop event.
  std::string reason;
  std::vector<std::string> host_values;  // host values static in its key ("n=[3]")
  std::vector<FusedGroup> fused;         // fused kernels of its tape
};

struct Overlay {
  std::vector<OverlaySegment> segments;
  /// Nodes of compiled segments whose outputs were known at trace time (shape arithmetic on
  /// known shapes, constants): they cost nothing at run time.
  std::vector<std::string> host_folded;
  /// Every segment's fused kernels, "segment K: Fused[Mul 'm1', Add 'a1']".
  std::vector<std::string> fused;
};

/// A model compiled around its break operators: call it on inputs of any shape.
class CompiledModel {
 public:
  /// Runs on the graph inputs that are not static, in graph order (or on every graph input, the
  /// static ones None or equal to their compile-time value). Returns the graph outputs, evaluated.
  /// `options` bounds the call as for onnx::run (tracing included); its `device`, when set, must
/// be the model's (CompileModelOptions::device), else InvalidArgument.
  std::vector<Value> operator()(const std::vector<Value>& inputs, const RunOptions& options = {}) const;
  /// The same by name (static inputs may be left out); returns the outputs by name.
  std::map<std::string, Value> run_named(const std::map<std::string, Value>& inputs,
                                         const RunOptions& options = {}) const;
  CompiledModelStats stats() const;
  /// The path of the latest call (empty before the first).
  Overlay overlay() const;
  const Model& model() const;

 private:
  friend CompiledModel compile(const Model&, const std::vector<Value>&, CompileModelOptions);
  std::shared_ptr<detail::CompiledModelImpl> impl_;
};

/// Compiles `model` (which must outlive the result). When `example_inputs` are given (as for
/// operator()), runs them once so that the first real call of those shapes is warm.
CompiledModel compile(const Model& model, const std::vector<Value>& example_inputs = {},
                      CompileModelOptions options = {});

/// The segments of the compiled model's latest call, its host-folded nodes and fused groups.
Overlay overlay(const CompiledModel& compiled);
/// Compiles and runs `model` on `inputs` once and returns that call's overlay.
Overlay overlay(const Model& model, const std::vector<Value>& inputs, CompileModelOptions options = {});

}  // namespace smelt::onnx
