// Loading and saving arrays as NumPy .npy files.
#pragma once

#include <map>
#include <string>

#include "smelt/array.h"

namespace smelt {

/// Writes `a` as a .npy file (version 1.0, little endian). bfloat16 has no NumPy dtype: it is
/// written with the descr '<V2' plus the header key 'smelt_dtype': 'bfloat16', which load reads
/// back (ml_dtypes users can view the data as bfloat16).
void save(const std::string& path, Array a);
/// Reads a .npy file of any smelt dtype, C or Fortran order, either endianness.
Array load(const std::string& path);

/// Writes named arrays as a .safetensors file (the Hugging Face format: an 8-byte little-endian
/// header length, a JSON header of {name: {dtype, shape, data_offsets}} plus an optional
/// "__metadata__" map of strings, then the raw little-endian data, names in sorted order).
/// Every smelt dtype has a safetensors name (BOOL, U8..U64, I8..I64, F16, BF16, F32, F64).
void save_safetensors(const std::string& path, const std::map<std::string, Array>& arrays,
                      const std::map<std::string, std::string>& metadata = {});
/// Reads a .safetensors file onto the CPU. The file is untrusted: the header length, the JSON,
/// the dtypes, the shapes and every tensor's offsets are checked against the file (offsets must
/// tile the data without gaps or overlaps, as the format requires), and any violation raises
/// InvalidArgument naming the file and the tensor.
std::map<std::string, Array> load_safetensors(const std::string& path);
/// The "__metadata__" map of a .safetensors file (empty when it has none).
std::map<std::string, std::string> safetensors_metadata(const std::string& path);

}  // namespace smelt
