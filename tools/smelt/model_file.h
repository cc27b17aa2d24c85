// Loading the model file a command names, with the messages a user needs (a folder, a file that is not ONNX).
#pragma once

#include <string>

#ifdef SMELT_ONNX
#include "smelt/onnx.h"

namespace smelt::cli {

/// onnx::load(path, options), but a folder raises "'DIR' is a folder, not an .onnx file" (naming
/// DIR/model.onnx when there is one) and a file that fails to load and does not start like an ONNX
/// ModelProto raises "'FILE' is not an ONNX model file"; other load errors pass through.
onnx::Model load_model_file(const std::string& path, const onnx::LoadOptions& options = {});

}  // namespace smelt::cli
#endif
