// The fused-kernel IR: a small SSA program of element-wise instructions over broadcast inputs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "smelt/dtype.h"
#include "src/primitives/primitive.h"
#include "src/primitives/scalar.h"

namespace smelt::codegen {

enum class InstrKind : uint8_t {
  Input,     // reads kernel input `index` at the element's (broadcast) position
  Constant,  // a scalar literal
  Unary,
  Binary,
  Select,    // operands: condition, x, y
  Cast,
};

/// One instruction; operands are indices of earlier instructions.
struct Instr {
  InstrKind kind;
  Dtype dtype;                // the instruction's result type
  std::vector<int> operands;
  int index = 0;              // Input: which kernel input
  UnaryOp unary{};            // Unary
  BinaryOp binary{};          // Binary
  Scalar value;               // Constant (already of `dtype`)

  bool operator==(const Instr&) const = default;
};

/// A fused element-wise program: every value is computed at the output's index; inputs are
/// read through broadcast strides. Shapes are not part of it: one kernel serves every shape.
struct FusedProgram {
  std::vector<Dtype> input_dtypes;
  std::vector<Instr> instrs;
  std::vector<int> outputs;  // instruction indices, one per kernel output

  bool operator==(const FusedProgram&) const = default;
  Dtype output_dtype(size_t i) const { return instrs[outputs[i]].dtype; }
};

/// A readable one-line summary, "exp(add(in0, in1))"-style, for dumps and telemetry.
std::string describe_program(const FusedProgram& program);

}  // namespace smelt::codegen
