// Loading and saving arrays as NumPy .npy files.
#pragma once

#include <string>

#include "smelt/array.h"

namespace smelt {

/// Writes `a` as a .npy file (version 1.0, little endian). bfloat16 has no NumPy dtype: it is
/// written with the descr '<V2' plus the header key 'smelt_dtype': 'bfloat16', which load reads
/// back (ml_dtypes users can view the data as bfloat16).
void save(const std::string& path, Array a);
/// Reads a .npy file of any smelt dtype, C or Fortran order, either endianness.
Array load(const std::string& path);

}  // namespace smelt
