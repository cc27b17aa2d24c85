// The model-file checks of the smelt commands (model_file.h).
#include "tools/smelt/model_file.h"

#ifdef SMELT_ONNX
#include <filesystem>
#include <fstream>

#include "smelt/errors.h"

namespace fs = std::filesystem;

namespace smelt::cli {
namespace {

/// Whether the file's first byte is the key of a ModelProto field (onnx.proto: 1 ir_version,
/// 2-4 and 6 strings, 5 model_version, 7 graph, 8 opset_import, 14 metadata_props; 20 and 25 take
/// two bytes and start with their low bits). Serializers write fields in number order, so an ONNX
/// file starts with one of these; a text file, an image or a .npy file does not.
bool starts_like_a_model(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char c = 0;
  if (!f.get(c)) return false;
  const unsigned char key = static_cast<unsigned char>(c);
  for (unsigned char k : {0x08, 0x12, 0x1a, 0x22, 0x28, 0x32, 0x3a, 0x42, 0x72, 0xa2, 0xca, 0xd2})
    if (key == k) return true;
  return false;
}

}  // namespace

onnx::Model load_model_file(const std::string& path, const onnx::LoadOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path inside = fs::path(path) / "model.onnx";
    throw InvalidArgument("'" + path + "' is a folder, not an .onnx file" +
                          (fs::exists(inside, ec) ? " (did you mean '" + inside.string() + "'?)" : ""));
  }
  try {
    return onnx::load(path, options);
  } catch (const OnnxError& e) {
    // Only a file that exists and was read: "cannot open" keeps the loader's words.
    if (!fs::is_regular_file(path, ec) || starts_like_a_model(path)) throw;
    throw OnnxError("'" + path + "' is not an ONNX model file (it does not start like a protobuf ModelProto; " +
                    std::string(e.what()) + ")");
  }
}

}  // namespace smelt::cli
#endif
