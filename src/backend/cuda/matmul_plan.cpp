// Transpose flags and strided-batch plans of batched matmuls for cuBLASLt (matmul_plan.h).
#include "src/backend/cuda/matmul_plan.h"

#include <algorithm>
#include <optional>

#include "smelt/errors.h"

namespace smelt::cuda {

GemmOperand gemm_operand(int64_t rs, int64_t cs, int64_t rows, int64_t cols) {
  // An axis of size 1 is never stepped along: its stride does not matter (a broadcast row or
  // column has stride 0), and the leading dimension is then the smallest valid one.
  if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= std::max<int64_t>(1, cols)))
    return {true, false, rows <= 1 ? std::max<int64_t>(1, cols) : rs};
  if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= std::max<int64_t>(1, rows)))
    return {true, true, cols <= 1 ? std::max<int64_t>(1, rows) : cs};
  return {};
}

BatchPlan plan_batches(const Shape& batch, const Strides& a, const Strides& b, const Strides& out) {
  SMELT_ASSERT(a.size() == batch.size() && b.size() == batch.size() && out.size() == batch.size(),
               "matmul: batch strides do not match the batch shape");
  struct Axis {
    int64_t size;
    std::array<int64_t, 3> st;
  };
  // Axes from the outermost; size-1 axes dropped, an axis merged into the next inner one when
  // every operand steps over both as over one axis.
  std::vector<Axis> axes;
  for (size_t d = batch.size(); d-- > 0;) {
    if (batch[d] == 1) continue;
    const Axis ax{batch[d], {a[d], b[d], out[d]}};
    if (!axes.empty()) {
      Axis& in = axes.back();
      bool merges = true;
      for (int j = 0; j < 3; ++j) merges = merges && ax.st[j] == in.st[j] * in.size;
      if (merges) {
        in.size *= ax.size;
        continue;
      }
    }
    axes.push_back(ax);
  }
  std::reverse(axes.begin(), axes.end());
  BatchPlan plan;
  if (axes.empty()) return plan;
  // The longest axis is the strided batch (the innermost among equals): fewest calls. A batch
  // stride may not be negative (a flipped batch): such axes loop.
  std::optional<size_t> pick;
  for (size_t i = 0; i < axes.size(); ++i) {
    const bool forward = std::all_of(axes[i].st.begin(), axes[i].st.end(), [](int64_t s) { return s >= 0; });
    if (forward && (!pick || axes[i].size >= axes[*pick].size)) pick = i;
  }
  if (pick) {
    plan.count = axes[*pick].size;
    plan.stride = axes[*pick].st;
  }
  // The other axes, row-major: one call per index.
  int64_t calls = 1;
  for (size_t i = 0; i < axes.size(); ++i)
    if (i != pick) calls *= axes[i].size;
  plan.offsets.assign(static_cast<size_t>(calls), {0, 0, 0});
  for (int64_t c = 0; c < calls; ++c) {
    int64_t r = c;
    std::array<int64_t, 3>& off = plan.offsets[static_cast<size_t>(c)];
    for (size_t i = axes.size(); i-- > 0;) {
      if (i == pick) continue;
      const int64_t idx = r % axes[i].size;
      r /= axes[i].size;
      for (int j = 0; j < 3; ++j) off[j] += idx * axes[i].st[j];
    }
  }
  return plan;
}

uint32_t common_alignment(const std::vector<uint64_t>& values) {
  uint32_t align = 256;
  for (uint64_t v : values)
    while (align > 1 && v % align != 0) align /= 2;
  return align;
}

}  // namespace smelt::cuda
