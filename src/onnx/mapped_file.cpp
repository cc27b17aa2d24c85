// Model files mapped into memory, and CPU buffers that alias a mapping or own a string's bytes.
#include "src/onnx/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "smelt/errors.h"

namespace smelt::onnx::detail {

std::shared_ptr<const MappedFile> MappedFile::map(int fd, size_t size, Use use) {
  if (size == 0) return nullptr;
  void* p = use == Use::Parse ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0)
                              : ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  return std::shared_ptr<const MappedFile>(new MappedFile(p, size));
}

void MappedFile::populate() const {
#ifdef MADV_POPULATE_READ
  ::madvise(base_, size_, MADV_POPULATE_READ);
#else
  ::madvise(base_, size_, MADV_WILLNEED);
#endif
}

MappedFile::~MappedFile() { ::munmap(base_, size_); }

FileBytes read_model_file(const std::string& path, const char* what, MappedFile::Use use) {
  FileBytes out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw OnnxError(std::string(what) + ": cannot open '" + path + "'");
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) out.mapped = MappedFile::map(fd, static_cast<size_t>(st.st_size), use);
  ::close(fd);
  if (out.mapped) return out;
  // Not mappable (empty, a pipe, a file system without mmap): read it.
  std::ifstream f(path, std::ios::binary);
  if (!f) throw OnnxError(std::string(what) + ": cannot open '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  out.read = std::move(ss).str();
  return out;
}

BufferPtr mapped_buffer(std::shared_ptr<const MappedFile> file, size_t offset, size_t bytes) {
  // No allocator: the buffer does not own the memory; the deleter's capture keeps the map.
  auto* b = new Buffer(const_cast<char*>(file->data()) + offset, bytes, Device::cpu(), nullptr);
  return BufferPtr(b, [keep = std::move(file)](Buffer* p) { delete p; });
}

BufferPtr string_buffer(std::string&& s) {
  auto owned = std::make_shared<std::string>(std::move(s));
  // The Buffer is made before the string moves into the deleter (argument order is unspecified).
  auto* b = new Buffer(owned->data(), owned->size(), Device::cpu(), nullptr);
  return BufferPtr(b, [keep = std::move(owned)](Buffer* p) { delete p; });
}

}  // namespace smelt::onnx::detail
