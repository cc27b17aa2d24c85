// Reads ONNX protobuf files (models and test-data values) into smelt's own structures.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "smelt/errors.h"
#include "smelt/onnx.h"
#include "src/core/allocator.h"
#include "src/core/node.h"
#include "src/core/thread_pool.h"
#include "src/onnx/device_constants.h"
#include "src/onnx/fusions.h"
#include "src/onnx/mapped_file.h"
#include "src/onnx/proto/onnx.pb.h"
#include "src/onnx/registry.h"
#include "src/onnx/wire_split.h"

namespace smelt::onnx {

namespace pb = ::onnx;

namespace {

// The IR versions smelt reads: 3 introduced opset imports; 13 is the newest the node suite uses.
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 13;
// The largest dense tensor a sparse one may expand to (1 GiB).
constexpr int64_t kMaxSparseDenseBytes = int64_t{1} << 30;

std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

/// Bits per element of a numeric element type.
int bits_of(ElemType t) {
  switch (t) {
    case ElemType::UInt4:
    case ElemType::Int4:
    case ElemType::Float4E2M1: return 4;
    case ElemType::UInt2:
    case ElemType::Int2: return 2;
    default: return static_cast<int>(size_of(*storage_dtype(t)) * 8);
  }
}

bool known_elem_type(int32_t code) { return code >= 1 && code <= 26; }

/// Parses a whole message; protobuf's default 64 MiB cap is lifted to its 2 GiB maximum.
template <class Message>
bool parse_message(Message& m, const void* data, size_t size) {
  if (size > static_cast<size_t>(INT_MAX)) return false;
  google::protobuf::io::ArrayInputStream raw(data, static_cast<int>(size));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(INT_MAX);
  return m.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

/// Raw bytes of a tensor and, when the bytes can become the array's buffer as they are, that
/// buffer (mapped external data, or the parsed protobuf's string moved out).
struct RawBytes {
  const char* data = nullptr;
  size_t size = 0;
  BufferPtr in_place;
};

/// Tensors smaller than this are copied: a buffer of their own is cheaper than keeping a string
/// or a whole mapping alive for them.
constexpr size_t kInPlaceMinBytes = 4096;

class Loader {
 public:
  /// `map_weights`: external data used in place where it suits (LoadOptions::map_weights).
  explicit Loader(std::string base_dir, bool map_weights = true)
      : base_dir_(std::move(base_dir)), map_weights_(map_weights) {}

  Value tensor(const pb::TensorProto& t, const std::string& what) const;
  Value sparse_tensor(const pb::SparseTensorProto& t, const std::string& what) const;
  TypeInfo type(const pb::TypeProto& t) const;
  Attribute attribute(const pb::AttributeProto& a, const std::string& where) const;
  std::shared_ptr<const Graph> graph(const pb::GraphProto& g) const;
  /// g's initializers into out.initializers, in order.
  void initializers(const pb::GraphProto& g, Graph& out) const;
  Node node(const pb::NodeProto& n) const;
  Value sequence(const pb::SequenceProto& s, const TypeInfo& type, const std::string& what) const;
  Value optional(const pb::OptionalProto& o, const TypeInfo& type, const std::string& what) const;
  Value map(const pb::MapProto& m, const TypeInfo& type, const std::string& what) const;
  /// The raw bytes of `g`'s initializers that split_initializer_bytes lifted out of the parse, in
  /// `file` (the model file, mapped). False when an index does not name an initializer.
  bool lift(const pb::GraphProto& g, const std::shared_ptr<const detail::MappedFile>& file,
            const std::vector<detail::LiftedBytes>& lifted);

 private:
  RawBytes external_bytes(const pb::TensorProto& t, const std::string& what) const;
  std::string base_dir_;
  bool map_weights_ = true;
  std::unordered_map<const pb::TensorProto*, RawBytes> lifted_;
  /// External data files mapped so far (by resolved path): one map per file, shared by its tensors.
  mutable std::map<std::string, std::shared_ptr<const detail::MappedFile>> maps_;
  mutable std::mutex maps_mutex_;
};

bool Loader::lift(const pb::GraphProto& g, const std::shared_ptr<const detail::MappedFile>& file,
                  const std::vector<detail::LiftedBytes>& lifted) {
  for (const auto& l : lifted) {
    if (l.initializer >= static_cast<size_t>(g.initializer_size()) || l.offset > file->size() ||
        l.size > file->size() - l.offset)
      return false;
    lifted_[&g.initializer(static_cast<int>(l.initializer))] =
        RawBytes{file->data() + l.offset, l.size, detail::mapped_buffer(file, l.offset, l.size)};
  }
  return true;
}

/// Closes a file descriptor when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

/// Whether `path` is `folder` or inside it (both already resolved, so the comparison is by parts).
bool is_inside(const std::filesystem::path& path, const std::filesystem::path& folder) {
  auto [f, p] = std::mismatch(folder.begin(), folder.end(), path.begin(), path.end());
  // A trailing separator shows as an empty last part of `folder`.
  return f == folder.end() || (std::next(f) == folder.end() && f->empty());
}

RawBytes Loader::external_bytes(const pb::TensorProto& t, const std::string& what) const {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    auto number = [&](const std::string& s) -> int64_t {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end != '\0' || v < 0 || errno == ERANGE)
        throw OnnxError(what + ": external data " + kv.key() + " '" + s + "' is not a non-negative integer");
      return v;
    };
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = number(kv.value());
    else if (kv.key() == "length") length = number(kv.value());
  }
  if (location.empty()) throw OnnxError(what + ": external data has no location");
  std::filesystem::path rel(location);
  bool escapes = rel.is_absolute() || location.find('\0') != std::string::npos;
  for (const auto& part : rel)
    if (part == "..") escapes = true;
  if (escapes)
    throw OnnxError(what + ": external data location '" + location +
                    "' must be a relative path inside the model's folder");
  // The text is not enough: `w.bin` may be a symlink to /etc/passwd, or sit in a symlinked
  // folder. Resolve both the folder and the file (every symlink followed) and compare those.
  std::error_code ec;
  const std::filesystem::path folder = std::filesystem::canonical(base_dir_, ec);
  if (ec) throw OnnxError(what + ": external data file '" + location + "' not found in '" + base_dir_ + "'");
  const std::filesystem::path real = std::filesystem::canonical(folder / rel, ec);
  if (ec) throw OnnxError(what + ": external data file '" + location + "' not found in '" + base_dir_ + "'");
  if (!is_inside(real, folder))
    throw OnnxError(what + ": external data location '" + location + "' resolves to '" + real.string() +
                    "', outside the model's folder '" + folder.string() + "'");
  // Open what was checked. O_NOFOLLOW refuses a symlink put in its place since; O_NONBLOCK keeps
  // a FIFO from blocking the open (it is then refused as not a regular file, as are folders and
  // devices).
  const int fd = ::open(real.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw OnnxError(what + ": cannot open external data file '" + location + "': " + std::strerror(errno));
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw OnnxError(what + ": external data location '" + location + "' is not a regular file");
  // A folder above it may have been swapped for a symlink between the check and the open: the
  // descriptor's own path (where /proc shows it) must be inside the folder too.
  std::filesystem::path opened = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), ec);
  if (!ec && !is_inside(opened, folder))
    throw OnnxError(what + ": external data location '" + location + "' resolves to '" + opened.string() +
                    "', outside the model's folder '" + folder.string() + "'");
  const int64_t file_size = static_cast<int64_t>(st.st_size);
  if (length < 0) length = std::max<int64_t>(file_size - offset, 0);
  // Compared without forming offset + length, which could overflow.
  if (offset > file_size || length > file_size - offset)
    throw OnnxError(what + ": external data file '" + location + "' has " + std::to_string(file_size) +
                    " bytes; offset " + std::to_string(offset) + " + length " + std::to_string(length) +
                    " is past its end");
  // Mapped: the tensors use the file's pages in place (loaded when first touched), with no copy.
  std::shared_ptr<const detail::MappedFile> mapped;
  if (map_weights_) {
    std::lock_guard lock(maps_mutex_);  // initializers may load in parallel (Loader::initializers)
    auto& entry = maps_[real.string()];
    if (!entry || entry->size() != static_cast<size_t>(file_size))
      entry = detail::MappedFile::map(fd, static_cast<size_t>(file_size), detail::MappedFile::Use::Alias);
    mapped = entry;
  }
  if (mapped) {
    RawBytes r{mapped->data() + offset, static_cast<size_t>(length), nullptr};
    if (r.size >= kInPlaceMinBytes) r.in_place = detail::mapped_buffer(mapped, static_cast<size_t>(offset), r.size);
    return r;
  }
  std::string bytes(static_cast<size_t>(length), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t got = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset) + static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw OnnxError(what + ": cannot read external data file '" + location + "'" +
                      (got < 0 ? std::string(": ") + std::strerror(errno) : std::string(" (it got shorter)")));
    done += static_cast<size_t>(got);
  }
  BufferPtr owned = detail::string_buffer(std::move(bytes));
  return RawBytes{static_cast<const char*>(owned->ptr), owned->bytes, owned};
}

Value Loader::tensor(const pb::TensorProto& t, const std::string& what_in) const {
  std::string what = t.name().empty() ? what_in : what_in + " '" + t.name() + "'";
  if (!known_elem_type(t.data_type()))
    throw OnnxError(what + ": unknown element type code " + std::to_string(t.data_type()));
  auto et = static_cast<ElemType>(t.data_type());
  Shape shape(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  int64_t nonzero = 1;  // bounded too: a zero dim must not hide others whose strides overflow
  for (auto d : shape) {
    if (d < 0) throw OnnxError(what + ": negative dimension in shape " + shape_text(shape));
    if (d != 0 && nonzero > (int64_t{1} << 48) / d)
      throw OnnxError(what + ": shape " + shape_text(shape) + " is too large");
    if (d != 0) nonzero *= d;
    n *= d;
  }
  std::string type_desc = "tensor(" + elem_type_name(et) + ")" + shape_text(shape);
  if (t.has_segment()) throw OnnxError(what + ": segmented tensors are not supported");

  RawBytes raw_bytes;
  const RawBytes* raw = nullptr;
  if (t.data_location() == pb::TensorProto::EXTERNAL || t.external_data_size() > 0) {
    raw_bytes = external_bytes(t, what);
    raw = &raw_bytes;
  } else if (auto it = lifted_.find(&t); it != lifted_.end()) {
    raw_bytes = it->second;
    raw = &raw_bytes;
  } else if (t.has_raw_data()) {
    raw_bytes = RawBytes{t.raw_data().data(), t.raw_data().size(), nullptr};
    raw = &raw_bytes;
  }

  if (et == ElemType::String) {
    if (raw) throw OnnxError(what + ": a string tensor cannot store its data as raw bytes");
    if (t.string_data_size() != n)
      throw OnnxError(what + ": " + std::to_string(t.string_data_size()) + " strings for " + type_desc);
    return Value::strings(StringTensor{shape, {t.string_data().begin(), t.string_data().end()}});
  }
  if (et == ElemType::Complex64 || et == ElemType::Complex128)
    throw OnnxError(what + ": " + elem_type_name(et) + " tensors are not supported");

  Dtype sd = *storage_dtype(et);
  const int bits = bits_of(et);
  const size_t item = size_of(sd);
  const int64_t packed_count = bits >= 8 ? n : (n * bits + 7) / 8;
  // The sizes are checked before anything is allocated: the buffer is then bounded by the
  // input's size, whatever the dims claim.
  if (raw) {
    int64_t need = bits >= 8 ? n * static_cast<int64_t>(item) : packed_count;
    if (static_cast<int64_t>(raw->size) != need)
      throw OnnxError(what + ": raw data has " + std::to_string(raw->size) + " bytes; " + type_desc +
                      " needs " + std::to_string(need));
    // Whole-byte elements other than bool (whose bytes are normalized to 0/1) are used as stored
    // when their address suits the element type: mapped external data as is, inline raw data by
    // moving the parsed protobuf's string out (every proto a Loader reads is parsed by the load
    // call and dropped after it, so the const_cast changes nothing anyone sees).
    if (bits >= 8 && sd != Dtype::Bool && raw->size >= kInPlaceMinBytes &&
        reinterpret_cast<uintptr_t>(raw->data) % item == 0) {
      BufferPtr in_place = raw->in_place;
      if (!in_place && t.has_raw_data()) {
        in_place = detail::string_buffer(std::move(*const_cast<pb::TensorProto&>(t).mutable_raw_data()));
        if (reinterpret_cast<uintptr_t>(in_place->ptr) % item != 0) in_place = nullptr;  // cannot happen after a move of a long string
      }
      if (in_place) {
        Array a = smelt::detail::make_leaf(shape, sd, Device::cpu(), std::move(in_place), row_major_strides(shape));
        return is_storage_type(et) ? Value::tensor(a, et) : Value::tensor(a);
      }
    }
  } else {
    int count = 0;
    const char* field = "int32_data";
    switch (et) {
      case ElemType::Float: count = t.float_data_size(); field = "float_data"; break;
      case ElemType::Double: count = t.double_data_size(); field = "double_data"; break;
      case ElemType::Int64: count = t.int64_data_size(); field = "int64_data"; break;
      case ElemType::UInt32:
      case ElemType::UInt64: count = t.uint64_data_size(); field = "uint64_data"; break;
      default: count = t.int32_data_size(); break;
    }
    if (count != packed_count)
      throw OnnxError(what + ": " + std::to_string(count) + " values in " + field + "; " + type_desc +
                      " needs " + std::to_string(packed_count));
  }
  // One copy, straight into the array's buffer.
  const size_t nbytes = static_cast<size_t>(n) * item;
  BufferPtr buffer = cpu_allocator().allocate(nbytes);
  uint8_t* const buf = static_cast<uint8_t*>(buffer->ptr);
  // Sub-byte types come packed, lowest bits first; smelt holds one (sign-extended) element a byte.
  auto unpack = [&](auto byte_at) {
    const int per = 8 / bits;
    const unsigned mask = (1u << bits) - 1;
    const bool is_signed = et == ElemType::Int4 || et == ElemType::Int2;
    for (int64_t i = 0; i < n; ++i) {
      unsigned v = (static_cast<unsigned>(byte_at(i / per)) >> ((i % per) * bits)) & mask;
      if (is_signed && (v >> (bits - 1))) v |= ~mask;  // sign extension
      buf[static_cast<size_t>(i)] = static_cast<uint8_t>(v);
    }
  };
  if (raw) {
    if (bits >= 8) {
      if (nbytes) std::memcpy(buf, raw->data, nbytes);
    } else {
      unpack([&](int64_t i) { return static_cast<uint8_t>(raw->data[static_cast<size_t>(i)]); });
    }
  } else {
    auto store = [&](auto value, int64_t i) { std::memcpy(buf + i * item, &value, item); };
    switch (et) {
      case ElemType::Float:
        for (int64_t i = 0; i < n; ++i) store(t.float_data(static_cast<int>(i)), i);
        break;
      case ElemType::Double:
        for (int64_t i = 0; i < n; ++i) store(t.double_data(static_cast<int>(i)), i);
        break;
      case ElemType::Int64:
        for (int64_t i = 0; i < n; ++i) store(static_cast<int64_t>(t.int64_data(static_cast<int>(i))), i);
        break;
      case ElemType::UInt32:
        for (int64_t i = 0; i < n; ++i) store(static_cast<uint32_t>(t.uint64_data(static_cast<int>(i))), i);
        break;
      case ElemType::UInt64:
        for (int64_t i = 0; i < n; ++i) store(static_cast<uint64_t>(t.uint64_data(static_cast<int>(i))), i);
        break;
      default: {
        // Everything else travels in int32_data: one element per entry (16-bit floats and
        // float8 as their bits), or one packed byte per entry for the sub-byte types.
        if (bits < 8) {
          unpack([&](int64_t i) { return static_cast<uint8_t>(t.int32_data(static_cast<int>(i))); });
          break;
        }
        for (int64_t i = 0; i < n; ++i) {
          int32_t v = t.int32_data(static_cast<int>(i));
          switch (item) {
            case 1: store(static_cast<uint8_t>(v), i); break;
            case 2: store(static_cast<uint16_t>(v), i); break;
            default: store(v, i); break;
          }
        }
        break;
      }
    }
  }
  if (sd == Dtype::Bool)  // bool bytes are 0 or 1 (as Array's constructor from data makes them)
    for (size_t i = 0; i < nbytes; ++i) buf[i] = buf[i] != 0;
  Array a = smelt::detail::make_leaf(shape, sd, Device::cpu(), std::move(buffer), row_major_strides(shape));
  return is_storage_type(et) ? Value::tensor(a, et) : Value::tensor(a);
}

Value Loader::sparse_tensor(const pb::SparseTensorProto& s, const std::string& what) const {
  Value values = tensor(s.values(), what + " values");
  Value indices = tensor(s.indices(), what + " indices");
  Shape dims(s.dims().begin(), s.dims().end());
  if (!values.is_tensor() || values.shape().size() != 1)
    throw OnnxError(what + ": sparse values must be a 1-d numeric tensor, got " + values.describe());
  if (!indices.is_tensor() || indices.elem_type() != ElemType::Int64)
    throw OnnxError(what + ": sparse indices must be int64, got " + indices.describe());
  int64_t nnz = values.shape()[0];
  // The dense form is limited to kMaxSparseDenseBytes: unlike a dense tensor's, its size is not
  // bounded by the file's, so a few bytes of dims could otherwise ask for any amount of memory.
  int64_t total = 1;
  for (auto d : dims)
    if (d < 0) throw OnnxError(what + ": negative dimension in sparse shape " + shape_text(dims));
  for (auto d : dims) {
    if (d == 0) {
      total = 0;
      break;
    }
    if (total > kMaxSparseDenseBytes / d) {
      total = -1;
      break;
    }
    total *= d;
  }
  if (total < 0 || total * static_cast<int64_t>(values.array().itemsize()) > kMaxSparseDenseBytes)
    throw OnnxError(what + ": the dense form of sparse shape " + shape_text(dims) + " is larger than " +
                    std::to_string(kMaxSparseDenseBytes >> 20) + " MiB");
  auto idx = indices.array().to_vector<int64_t>();
  const Shape& ishape = indices.shape();
  bool linear = ishape.size() == 1;
  if (!(linear && ishape[0] == nnz) &&
      !(ishape.size() == 2 && ishape[0] == nnz && ishape[1] == static_cast<int64_t>(dims.size())))
    throw OnnxError(what + ": sparse indices of shape " + shape_text(ishape) + " do not fit " +
                    std::to_string(nnz) + " values of a rank-" + std::to_string(dims.size()) + " tensor");
  Dtype sd = values.array().dtype();
  size_t item = size_of(sd);
  std::vector<uint8_t> dense(static_cast<size_t>(total) * item, 0);
  const auto* src = static_cast<const uint8_t*>(values.array().data());
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t flat = 0;
    if (linear) {
      flat = idx[static_cast<size_t>(k)];
    } else {
      for (size_t d = 0; d < dims.size(); ++d) {
        int64_t i = idx[static_cast<size_t>(k) * dims.size() + d];
        if (i < 0 || i >= dims[d]) throw OnnxError(what + ": sparse index out of range");
        flat = flat * dims[d] + i;
      }
    }
    if (flat < 0 || flat >= total) throw OnnxError(what + ": sparse index out of range");
    std::memcpy(dense.data() + flat * item, src + k * item, item);
  }
  Array a(dense.empty() ? nullptr : dense.data(), dims, sd);
  return is_storage_type(values.elem_type()) ? Value::tensor(a, values.elem_type()) : Value::tensor(a);
}

TypeInfo Loader::type(const pb::TypeProto& t) const {
  TypeInfo out;
  auto shape_of = [](const pb::TensorShapeProto& s) {
    std::vector<Dim> dims;
    for (const auto& d : s.dim()) {
      Dim dim;
      if (d.has_dim_value()) dim.value = d.dim_value();
      else if (d.has_dim_param()) dim.param = d.dim_param();
      dims.push_back(dim);
    }
    return dims;
  };
  switch (t.value_case()) {
    case pb::TypeProto::kTensorType:
      out.kind = TypeInfo::Kind::Tensor;
      out.elem_type = static_cast<ElemType>(t.tensor_type().elem_type());
      if (t.tensor_type().has_shape()) out.shape = shape_of(t.tensor_type().shape());
      break;
    case pb::TypeProto::kSparseTensorType:
      out.kind = TypeInfo::Kind::SparseTensor;
      out.elem_type = static_cast<ElemType>(t.sparse_tensor_type().elem_type());
      if (t.sparse_tensor_type().has_shape()) out.shape = shape_of(t.sparse_tensor_type().shape());
      break;
    case pb::TypeProto::kSequenceType:
      out.kind = TypeInfo::Kind::Sequence;
      out.element = std::make_shared<const TypeInfo>(type(t.sequence_type().elem_type()));
      break;
    case pb::TypeProto::kMapType:
      out.kind = TypeInfo::Kind::Map;
      out.elem_type = static_cast<ElemType>(t.map_type().key_type());
      out.element = std::make_shared<const TypeInfo>(type(t.map_type().value_type()));
      break;
    case pb::TypeProto::kOptionalType:
      out.kind = TypeInfo::Kind::Optional;
      out.element = std::make_shared<const TypeInfo>(type(t.optional_type().elem_type()));
      break;
    case pb::TypeProto::kOpaqueType: out.kind = TypeInfo::Kind::Opaque; break;
    case pb::TypeProto::VALUE_NOT_SET: break;
  }
  return out;
}

Attribute Loader::attribute(const pb::AttributeProto& a, const std::string& where) const {
  Attribute out;
  out.name = a.name();
  out.ref_attr_name = a.ref_attr_name();
  std::string what = where + " attribute '" + a.name() + "'";
  using T = Attribute::Type;
  int atype = a.type();
  if (atype == pb::AttributeProto::UNDEFINED && out.ref_attr_name.empty()) {
    // IR 1 had no type field: the set field says which it is.
    if (a.has_f()) atype = pb::AttributeProto::FLOAT;
    else if (a.has_i()) atype = pb::AttributeProto::INT;
    else if (a.has_s()) atype = pb::AttributeProto::STRING;
    else if (a.has_t()) atype = pb::AttributeProto::TENSOR;
    else if (a.has_g()) atype = pb::AttributeProto::GRAPH;
    else if (a.floats_size()) atype = pb::AttributeProto::FLOATS;
    else if (a.ints_size()) atype = pb::AttributeProto::INTS;
    else if (a.strings_size()) atype = pb::AttributeProto::STRINGS;
    else if (a.tensors_size()) atype = pb::AttributeProto::TENSORS;
    else if (a.graphs_size()) atype = pb::AttributeProto::GRAPHS;
  }
  switch (atype) {
    case pb::AttributeProto::UNDEFINED: out.type = T::Undefined; break;
    case pb::AttributeProto::FLOAT: out.type = T::Float; out.f = a.f(); break;
    case pb::AttributeProto::INT: out.type = T::Int; out.i = a.i(); break;
    case pb::AttributeProto::STRING: out.type = T::String; out.s = a.s(); break;
    case pb::AttributeProto::TENSOR: out.type = T::Tensor; out.t = tensor(a.t(), what); break;
    case pb::AttributeProto::GRAPH: out.type = T::Graph; out.g = graph(a.g()); break;
    case pb::AttributeProto::SPARSE_TENSOR:
      out.type = T::SparseTensor;
      out.t = sparse_tensor(a.sparse_tensor(), what);
      break;
    case pb::AttributeProto::TYPE_PROTO: out.type = T::TypeProto; out.tp = type(a.tp()); break;
    case pb::AttributeProto::FLOATS: out.type = T::Floats; out.floats.assign(a.floats().begin(), a.floats().end()); break;
    case pb::AttributeProto::INTS: out.type = T::Ints; out.ints.assign(a.ints().begin(), a.ints().end()); break;
    case pb::AttributeProto::STRINGS: out.type = T::Strings; out.strings.assign(a.strings().begin(), a.strings().end()); break;
    case pb::AttributeProto::TENSORS:
      out.type = T::Tensors;
      for (const auto& t : a.tensors()) out.tensors.push_back(tensor(t, what));
      break;
    case pb::AttributeProto::GRAPHS:
      out.type = T::Graphs;
      for (const auto& g : a.graphs()) out.graphs.push_back(graph(g));
      break;
    case pb::AttributeProto::SPARSE_TENSORS:
      out.type = T::SparseTensors;
      for (const auto& t : a.sparse_tensors()) out.tensors.push_back(sparse_tensor(t, what));
      break;
    case pb::AttributeProto::TYPE_PROTOS:
      out.type = T::TypeProtos;
      for (const auto& t : a.type_protos()) out.type_protos.push_back(type(t));
      break;
    default: throw OnnxError(what + ": unknown attribute type " + std::to_string(atype));
  }
  return out;
}

Node Loader::node(const pb::NodeProto& n) const {
  Node out;
  out.name = n.name();
  out.op_type = n.op_type();
  out.domain = normalize_domain(n.domain());
  out.overload = n.overload();
  out.inputs.assign(n.input().begin(), n.input().end());
  out.outputs.assign(n.output().begin(), n.output().end());
  if (out.op_type.empty()) throw OnnxError("node '" + n.name() + "' has no op_type");
  for (const auto& a : n.attribute()) out.attributes.push_back(attribute(a, out.label()));
  return out;
}

/// ONNX graphs are in SSA form: every name is assigned once. Two initializers of one name or two
/// producers of one tensor (nodes, or a node and a graph input or initializer) would otherwise
/// resolve silently to whichever comes last.
void check_single_assignment(const Graph& g, const std::string& where) {
  std::unordered_map<std::string, std::string> assigned;  // name -> what assigns it
  for (const auto& [name, value] : g.initializers)
    if (!assigned.emplace(name, "an initializer").second)
      throw OnnxError("load: " + where + ": initializer '" + name + "' is given twice");
  for (const auto& in : g.inputs)
    assigned.emplace(in.name, "a graph input");  // an input may share an initializer's name (its default)
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) {
      if (o.empty()) continue;
      auto [it, fresh] = assigned.emplace(o, "node " + n.label());
      if (!fresh)
        throw OnnxError("load: " + where + ": node " + n.label() + " writes '" + o + "', which " + it->second +
                        " already produces");
    }
}

/// Opset imports of domains smelt implements must be within 1 .. the newest it implements: a
/// newer opset may change operators in ways smelt does not know, so it is refused, not guessed.
void check_opsets(const std::vector<OpsetImport>& opsets, const std::string& where) {
  const OpRegistry& registry = OpRegistry::global();
  for (const auto& o : opsets) {
    int newest = registry.newest_opset(o.domain);
    if (newest == 0) continue;  // a domain smelt has no operators in: its nodes are reported as unsupported
    if (o.version < 1 || o.version > newest)
      throw OnnxError("load: " + where + " imports opset " + std::to_string(o.version) + " of " +
                      (o.domain.empty() ? std::string("ai.onnx") : o.domain) + "; smelt supports opsets 1 to " +
                      std::to_string(newest) + " of that domain");
  }
}

void Loader::initializers(const pb::GraphProto& g, Graph& out) const {
  const int n = g.initializer_size();
  std::vector<Value> values(static_cast<size_t>(n));
  // Bytes the tensors copy: inline raw data that is not used in place, lifted bytes that are
  // misaligned, typed fields. Counted as every raw byte not mapped: an upper bound is enough here.
  size_t copied = 0;
  for (const auto& t : g.initializer()) {
    auto it = lifted_.find(&t);
    copied += it != lifted_.end() ? it->second.size : t.raw_data().size();
  }
  // Copying into fresh memory costs a page fault per 4 KiB (~2 us each on a VM: 190 ms for 360 MB
  // on one thread); faults on different pages proceed in parallel, so large models load their
  // initializers on every CPU thread. Small ones stay on the calling thread (a pool wake-up would
  // cost more than the copies).
  constexpr size_t kParallelMinBytes = size_t{16} << 20;
  if (copied >= kParallelMinBytes && n > 1 && !in_parallel_for()) {
    std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
    parallel_for(n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        try {
          values[static_cast<size_t>(i)] = tensor(g.initializer(static_cast<int>(i)), "initializer");
        } catch (...) {
          errors[static_cast<size_t>(i)] = std::current_exception();
        }
      }
    });
    // The first failing initializer's error, as a sequential load would report it.
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
  } else {
    for (int i = 0; i < n; ++i) values[static_cast<size_t>(i)] = tensor(g.initializer(i), "initializer");
  }
  for (int i = 0; i < n; ++i) out.initializers.emplace_back(g.initializer(i).name(), std::move(values[static_cast<size_t>(i)]));
}

std::shared_ptr<const Graph> Loader::graph(const pb::GraphProto& g) const {
  auto out = std::make_shared<Graph>();
  out->device_constants = detail::make_device_constants();
  out->name = g.name();
  auto info = [&](const pb::ValueInfoProto& v) { return ValueInfo{v.name(), type(v.type())}; };
  for (const auto& v : g.input()) out->inputs.push_back(info(v));
  for (const auto& v : g.output()) out->outputs.push_back(info(v));
  for (const auto& v : g.value_info()) out->value_info.push_back(info(v));
  initializers(g, *out);
  for (const auto& s : g.sparse_initializer())
    out->initializers.emplace_back(s.values().name(), sparse_tensor(s, "sparse initializer '" + s.values().name() + "'"));
  for (const auto& n : g.node()) out->nodes.push_back(node(n));
  check_single_assignment(*out, g.name().empty() ? std::string("the graph") : "graph '" + g.name() + "'");
  return out;
}

TypeInfo element_from_code(int32_t code, const TypeInfo& declared) {
  if (declared.kind != TypeInfo::Kind::Unknown) return declared;
  TypeInfo t;
  switch (code) {
    case pb::SequenceProto::TENSOR: t.kind = TypeInfo::Kind::Tensor; break;
    case pb::SequenceProto::SPARSE_TENSOR: t.kind = TypeInfo::Kind::SparseTensor; break;
    case pb::SequenceProto::SEQUENCE: t.kind = TypeInfo::Kind::Sequence; break;
    case pb::SequenceProto::MAP: t.kind = TypeInfo::Kind::Map; break;
    case pb::SequenceProto::OPTIONAL: t.kind = TypeInfo::Kind::Optional; break;
    default: break;
  }
  return t;
}

Value Loader::sequence(const pb::SequenceProto& s, const TypeInfo& type, const std::string& what) const {
  TypeInfo elem = element_from_code(s.elem_type(), type.element ? *type.element : TypeInfo{});
  std::vector<Value> items;
  for (const auto& t : s.tensor_values()) items.push_back(tensor(t, what));
  for (const auto& t : s.sparse_tensor_values()) items.push_back(sparse_tensor(t, what));
  for (const auto& t : s.sequence_values()) items.push_back(sequence(t, elem, what));
  for (const auto& t : s.map_values()) items.push_back(map(t, elem, what));
  for (const auto& t : s.optional_values()) items.push_back(optional(t, elem, what));
  if (elem.kind == TypeInfo::Kind::Tensor && elem.elem_type == ElemType::Undefined && !items.empty()) {
    elem.elem_type = items[0].elem_type();
  }
  return Value::sequence(std::move(items), std::move(elem));
}

Value Loader::optional(const pb::OptionalProto& o, const TypeInfo& type, const std::string& what) const {
  TypeInfo elem = element_from_code(o.elem_type(), type.element ? *type.element : TypeInfo{});
  std::optional<Value> content;
  if (o.has_tensor_value()) content = tensor(o.tensor_value(), what);
  else if (o.has_sparse_tensor_value()) content = sparse_tensor(o.sparse_tensor_value(), what);
  else if (o.has_sequence_value()) content = sequence(o.sequence_value(), elem, what);
  else if (o.has_map_value()) content = map(o.map_value(), elem, what);
  else if (o.has_optional_value()) content = optional(o.optional_value(), elem, what);
  return Value::optional(std::move(content), std::move(elem));
}

Value Loader::map(const pb::MapProto& m, const TypeInfo& type, const std::string& what) const {
  auto key = static_cast<ElemType>(m.key_type());
  TypeInfo seq_type;
  seq_type.kind = TypeInfo::Kind::Sequence;
  seq_type.element = type.element;
  Value values = sequence(m.values(), seq_type, what);
  return Value::map(key, {m.keys().begin(), m.keys().end()}, {m.string_keys().begin(), m.string_keys().end()},
                    std::move(values));
}

std::vector<OpsetImport> opsets_of(const google::protobuf::RepeatedPtrField<pb::OperatorSetIdProto>& list) {
  std::vector<OpsetImport> out;
  for (const auto& o : list) out.push_back(OpsetImport{normalize_domain(o.domain()), o.version()});
  return out;
}

std::string function_name(const Function& f) {
  std::string n = f.domain.empty() ? f.name : f.domain + "." + f.name;
  return f.overload.empty() ? n : n + ":" + f.overload;
}

/// Refuses model-local functions that call themselves, directly or through others (subgraphs of
/// their bodies included): running one would recurse until the stack overflows.
void check_function_cycles(const Model& m) {
  const size_t count = m.functions.size();
  if (count == 0) return;
  std::map<std::tuple<std::string, std::string, std::string>, size_t> index;
  for (size_t i = 0; i < count; ++i) {
    const Function& f = m.functions[i];
    index.emplace(std::make_tuple(f.domain, f.name, f.overload), i);  // the first one is the one that runs
  }
  std::vector<std::vector<size_t>> callees(count);
  for (size_t i = 0; i < count; ++i) {
    std::vector<const std::vector<Node>*> work{&m.functions[i].nodes};
    while (!work.empty()) {
      const std::vector<Node>* nodes = work.back();
      work.pop_back();
      for (const auto& n : *nodes) {
        auto it = index.find(std::make_tuple(n.domain, n.op_type, n.overload));
        if (it != index.end()) callees[i].push_back(it->second);
        for (const auto& a : n.attributes) {
          if (a.g) work.push_back(&a.g->nodes);
          for (const auto& g : a.graphs) work.push_back(&g->nodes);
        }
      }
    }
  }
  // Depth-first search without recursion; an edge back to a function on the path is a cycle.
  enum : uint8_t { kNew, kOnPath, kDone };
  std::vector<uint8_t> state(count, kNew);
  for (size_t root = 0; root < count; ++root) {
    if (state[root] != kNew) continue;
    std::vector<std::pair<size_t, size_t>> path{{root, 0}};  // (function, next callee to visit)
    state[root] = kOnPath;
    while (!path.empty()) {
      auto& [f, next] = path.back();
      if (next == callees[f].size()) {
        state[f] = kDone;
        path.pop_back();
        continue;
      }
      size_t g = callees[f][next++];
      if (state[g] == kDone) continue;
      if (state[g] == kOnPath) {
        std::string cycle;
        size_t k = 0;
        while (path[k].first != g) ++k;
        for (; k < path.size(); ++k) cycle += function_name(m.functions[path[k].first]) + " -> ";
        cycle += function_name(m.functions[g]);
        throw OnnxError(path.back().first == g
                            ? "load: function " + function_name(m.functions[g]) + " calls itself (" + cycle +
                                  "): recursive functions are not allowed"
                            : "load: functions call each other in a cycle (" + cycle +
                                  "): recursive functions are not allowed");
      }
      state[g] = kOnPath;
      path.emplace_back(g, 0);
    }
  }
}

}  // namespace

namespace {

/// The model `mp` holds, its tensors read by `loader`.
Model model_of(const pb::ModelProto& mp, const Loader& loader, const std::string& base_dir,
               const LoadOptions& options) {
  if (!mp.has_ir_version())
    throw OnnxError("load: the model has no IR version (an empty file or not an ONNX model)");
  if (mp.ir_version() < kMinIrVersion || mp.ir_version() > kMaxIrVersion)
    throw OnnxError("load: IR version " + std::to_string(mp.ir_version()) + " is not supported (smelt reads " +
                    std::to_string(kMinIrVersion) + " to " + std::to_string(kMaxIrVersion) + ")");
  if (!mp.has_graph()) throw OnnxError("load: the model has no graph");
  if (mp.opset_import_size() == 0) throw OnnxError("load: the model imports no operator set");

  Model m;
  m.ir_version = mp.ir_version();
  m.producer_name = mp.producer_name();
  m.producer_version = mp.producer_version();
  m.domain = mp.domain();
  m.model_version = mp.model_version();
  m.doc_string = mp.doc_string();
  m.base_dir = base_dir;
  m.opsets = opsets_of(mp.opset_import());
  check_opsets(m.opsets, "the model");
  for (const auto& kv : mp.metadata_props()) m.metadata.emplace_back(kv.key(), kv.value());
  m.graph = loader.graph(mp.graph());
  for (const auto& f : mp.functions()) {
    Function fn;
    fn.domain = normalize_domain(f.domain());
    fn.name = f.name();
    fn.overload = f.overload();
    fn.inputs.assign(f.input().begin(), f.input().end());
    fn.outputs.assign(f.output().begin(), f.output().end());
    fn.attributes.assign(f.attribute().begin(), f.attribute().end());
    for (const auto& a : f.attribute_proto()) fn.attribute_defaults.push_back(loader.attribute(a, "function " + f.name()));
    for (const auto& n : f.node()) fn.nodes.push_back(loader.node(n));
    fn.opsets = opsets_of(f.opset_import());
    check_opsets(fn.opsets, "function " + f.name());
    {
      std::unordered_set<std::string> written;
      for (const auto& n : fn.nodes)
        for (const auto& o : n.outputs)
          if (!o.empty() && !written.insert(o).second)
            throw OnnxError("load: function " + f.name() + ": node " + n.label() + " writes '" + o +
                            "', which another node of the function already produces");
    }
    m.functions.push_back(std::move(fn));
  }
  check_function_cycles(m);
  if (options.check_operators) {
    auto missing = unsupported_operators(m);
    if (!missing.empty()) {
      std::string msg = "load: the model uses " + std::to_string(missing.size()) +
                        " operator" + (missing.size() > 1 ? "s" : "") + " smelt cannot run: ";
      for (size_t i = 0; i < missing.size(); ++i) {
        const auto& u = missing[i];
        msg += (i ? ", " : "") + (u.domain.empty() ? std::string("ai.onnx") : u.domain) + "::" + u.op_type +
               " (opset " + std::to_string(u.version) + (u.node.empty() ? "" : ", node '" + u.node + "'") + ")";
      }
      throw OnnxError(msg);
    }
  }
  // After the check: it reports the operators the file uses, and the rewrites only introduce
  // operators smelt runs.
  if (options.fuse) apply_fusions(m);
  return m;
}

}  // namespace

Model load_from_memory(const void* data, size_t size, const std::string& base_dir, const LoadOptions& options) {
  pb::ModelProto mp;
  if (!parse_message(mp, data, size))
    throw OnnxError("load: not a valid ONNX model (the protobuf data is malformed or truncated, " +
                    std::to_string(size) + " bytes)");
  return model_of(mp, Loader(base_dir, options.map_weights), base_dir, options);
}

Model load(const std::string& path, const LoadOptions& options) {
  const detail::FileBytes bytes = detail::read_model_file(path, "load", detail::MappedFile::Use::Alias);
  std::string base = std::filesystem::path(path).parent_path().string();
  if (base.empty()) base = ".";
  try {
    // Weights inline: their bytes stay in the mapped file, the parse copies the rest (wire_split.h).
    if (bytes.mapped && options.map_weights)
      if (auto split = detail::split_initializer_bytes(bytes.data(), bytes.size(), kInPlaceMinBytes)) {
        pb::ModelProto mp;
        Loader loader(base);
        if (parse_message(mp, split->rest.data(), split->rest.size()) &&
            loader.lift(mp.graph(), bytes.mapped, split->lifted))
          return model_of(mp, loader, base, options);
      }
    // Everything else (and anything the split declined) parses whole, as load_from_memory does.
    if (bytes.mapped) bytes.mapped->populate();
    return load_from_memory(bytes.data(), bytes.size(), base, options);
  } catch (const OnnxError& e) {
    std::string msg = e.what();
    if (msg.rfind("load: ", 0) == 0) msg = msg.substr(6);
    throw OnnxError("load '" + path + "': " + msg);
  }
}

std::vector<UnsupportedOp> unsupported_operators(const Model& model) {
  const OpRegistry& registry = OpRegistry::global();
  std::vector<UnsupportedOp> out;
  std::set<std::tuple<std::string, std::string, int64_t>> seen;
  // Worklist of (nodes, opsets of their scope); subgraphs and used functions are pushed onto it.
  struct Item {
    const std::vector<Node>* nodes;
    const std::vector<OpsetImport>* opsets;
  };
  std::vector<Item> work{{&model.graph->nodes, &model.opsets}};
  std::set<const Function*> visited_functions;
  auto version_in = [&](const std::vector<OpsetImport>& opsets, const std::string& domain) -> int64_t {
    for (const auto& o : opsets)
      if (o.domain == domain) return o.version;
    return model.opset(domain);
  };
  while (!work.empty()) {
    Item item = work.back();
    work.pop_back();
    for (const auto& n : *item.nodes) {
      for (const auto& a : n.attributes) {
        if (a.g) work.push_back({&a.g->nodes, item.opsets});
        for (const auto& g : a.graphs) work.push_back({&g->nodes, item.opsets});
      }
      const Function* fn = nullptr;
      for (const auto& f : model.functions)
        if (f.domain == n.domain && f.name == n.op_type && f.overload == n.overload) fn = &f;
      if (fn) {
        if (visited_functions.insert(fn).second) work.push_back({&fn->nodes, &fn->opsets});
        continue;
      }
      int64_t version = version_in(*item.opsets, n.domain);
      if (version > 0 && registry.find(n.domain, n.op_type, version)) continue;
      if (seen.insert({n.domain, n.op_type, version}).second)
        out.push_back(UnsupportedOp{n.domain, n.op_type, version, n.name});
    }
  }
  return out;
}

Value parse_value(const void* data, size_t size, const TypeInfo& type, const std::string& what) {
  Loader loader(".");
  auto fail = [&](const char* message_type) {
    return OnnxError(what + ": not a valid " + message_type + " (the protobuf data is malformed or truncated)");
  };
  switch (type.kind) {
    case TypeInfo::Kind::Sequence: {
      pb::SequenceProto s;
      if (!parse_message(s, data, size)) throw fail("SequenceProto");
      return loader.sequence(s, type, what);
    }
    case TypeInfo::Kind::Optional: {
      pb::OptionalProto o;
      if (!parse_message(o, data, size)) throw fail("OptionalProto");
      return loader.optional(o, type, what);
    }
    case TypeInfo::Kind::Map: {
      pb::MapProto m;
      if (!parse_message(m, data, size)) throw fail("MapProto");
      return loader.map(m, type, what);
    }
    case TypeInfo::Kind::SparseTensor:
    case TypeInfo::Kind::Tensor:
    case TypeInfo::Kind::Unknown:
    case TypeInfo::Kind::Opaque: {
      pb::TensorProto t;
      if (!parse_message(t, data, size)) throw fail("TensorProto");
      return loader.tensor(t, what);
    }
  }
  throw fail("value");
}

Value load_value(const std::string& path, const TypeInfo& type) {
  const detail::FileBytes bytes = detail::read_model_file(path, "load_value", detail::MappedFile::Use::Parse);
  Loader loader(std::filesystem::path(path).parent_path().string());
  return parse_value(bytes.data(), bytes.size(), type, "'" + path + "'");
}

}  // namespace smelt::onnx
