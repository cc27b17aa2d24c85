// Model files mapped into memory: the protobuf parses from the map, external data is used in place.
//
// Why: a GPT-2-sized model (~500 MB of weights) used to be copied five times on load (the file
// into a string stream, the stream into a string, the protobuf's fields, a staging vector, the
// array), and on a VM each fresh copy costs its page faults: 10 s for 475 MiB inline, 4.6 s as
// external data (docs/onnx.md, "Loading large models"). Now the file is mapped, the parsed
// protobuf's raw bytes become the arrays' buffers, and external data files are mapped and read
// in place (their pages load when first used).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "src/core/buffer.h"

namespace smelt::onnx::detail {

/// A mapping of a whole file. Unmapped when the last owner (a buffer aliasing it) is gone.
class MappedFile {
 public:
  enum class Use {
    Parse,  // read once, whole: read-only, every page faulted in at once (MAP_POPULATE)
    Alias,  // arrays' buffers: private read-write (a write would copy its page, the file never
            // changes), pages loaded when first touched. Populating a private writable map
            // would copy every page, so it is not done.
  };
  /// Maps `size` bytes of the open file `fd`; null when mmap fails (the caller reads instead).
  static std::shared_ptr<const MappedFile> map(int fd, size_t size, Use use);
  /// Loads every page now (a parse of the whole file is about to read them; one call instead of a
  /// fault per few pages). Best effort: nothing happens where the kernel cannot.
  void populate() const;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return static_cast<const char*>(base_); }
  size_t size() const { return size_; }

 private:
  MappedFile(void* base, size_t size) : base_(base), size_(size) {}
  void* base_;
  size_t size_;
};

/// The bytes of a model file: mapped for `use`, or read into memory when it cannot be mapped (an empty
/// file, a file system without mmap). Throws OnnxError "`what`: cannot open 'path'".
struct FileBytes {
  std::shared_ptr<const MappedFile> mapped;
  std::string read;
  const char* data() const { return mapped ? mapped->data() : read.data(); }
  size_t size() const { return mapped ? mapped->size() : read.size(); }
};
FileBytes read_model_file(const std::string& path, const char* what, MappedFile::Use use);

/// A CPU buffer over `bytes` bytes at `offset` in `file`, which it keeps mapped.
BufferPtr mapped_buffer(std::shared_ptr<const MappedFile> file, size_t offset, size_t bytes);

/// A CPU buffer that owns `s`'s bytes (the string moves into it; its data pointer stays).
BufferPtr string_buffer(std::string&& s);

}  // namespace smelt::onnx::detail
