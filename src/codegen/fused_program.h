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
  Reduce,    // operand: a value of the row; gives one value per row (`reduce`, `ddof`)
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
  ReduceOp reduce{};          // Reduce
  int64_t ddof = 0;           // Reduce with ReduceOp::Mean: the divisor is the row length less ddof
  bool per_row = false;       // row programs: one value per row (reductions, what only they and
                              // row-constant inputs feed), else one per element of the row

  bool operator==(const Instr&) const = default;
};

/// A fused element-wise program: every value is computed at the output's index; inputs are
/// read through broadcast strides. Shapes are not part of it: one kernel serves every shape.
///
/// A *row program* (reduced_axes > 0) has Reduce instructions: its index space is the group's
/// full shape, whose trailing `reduced_axes` axes form rows. Element-wise producers of a
/// reduction are its prologue; what uses the reduced value (broadcast back along the row) is its
/// epilogue. Outputs are either per element (the full shape) or per row (the full shape with the
/// reduced axes set to 1).
struct FusedProgram {
  std::vector<Dtype> input_dtypes;
  std::vector<Instr> instrs;
  std::vector<int> outputs;  // instruction indices, one per kernel output
  int reduced_axes = 0;

  bool operator==(const FusedProgram&) const = default;
  Dtype output_dtype(size_t i) const { return instrs[outputs[i]].dtype; }
  bool is_row_program() const { return reduced_axes > 0; }
};

/// A readable one-line summary, "exp(add(in0, in1))"-style, for dumps and telemetry.
std::string describe_program(const FusedProgram& program);

}  // namespace smelt::codegen
