// Placeholders for kernels not written yet: weak definitions that the real kernels override.
// Each family deletes its lines here when it lands; the file goes once it is empty.
#include "smelt/errors.h"
#include "src/backend/cpu/kernels.h"

namespace smelt::cpu {

__attribute__((weak)) void eval_Unary(const UnaryParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Unary: no CPU kernel yet");
}
__attribute__((weak)) void eval_Binary(const BinaryParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Binary: no CPU kernel yet");
}
__attribute__((weak)) void eval_Select(const NoParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Select: no CPU kernel yet");
}
__attribute__((weak)) void eval_SliceUpdate(const SliceParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("SliceUpdate: no CPU kernel yet");
}
__attribute__((weak)) void eval_Concatenate(const AxisParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Concatenate: no CPU kernel yet");
}
__attribute__((weak)) void eval_Pad(const PadParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Pad: no CPU kernel yet");
}
__attribute__((weak)) void eval_Reduce(const ReduceParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Reduce: no CPU kernel yet");
}
__attribute__((weak)) void eval_ArgReduce(const ArgReduceParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("ArgReduce: no CPU kernel yet");
}
__attribute__((weak)) void eval_Scan(const ScanParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Scan: no CPU kernel yet");
}
__attribute__((weak)) void eval_Matmul(const NoParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Matmul: no CPU kernel yet");
}
__attribute__((weak)) void eval_Gather(const AxisParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Gather: no CPU kernel yet");
}
__attribute__((weak)) void eval_GatherElements(const AxisParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("GatherElements: no CPU kernel yet");
}
__attribute__((weak)) void eval_GatherND(const GatherNDParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("GatherND: no CPU kernel yet");
}
__attribute__((weak)) void eval_Scatter(const ScatterParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Scatter: no CPU kernel yet");
}
__attribute__((weak)) void eval_ScatterND(const ScatterParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("ScatterND: no CPU kernel yet");
}
__attribute__((weak)) void eval_Sort(const SortParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Sort: no CPU kernel yet");
}
__attribute__((weak)) void eval_ArgSort(const SortParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("ArgSort: no CPU kernel yet");
}
__attribute__((weak)) void eval_TopK(const TopKParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("TopK: no CPU kernel yet");
}
__attribute__((weak)) void eval_Conv(const ConvParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Conv: no CPU kernel yet");
}
__attribute__((weak)) void eval_ConvTranspose(const ConvTransposeParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("ConvTranspose: no CPU kernel yet");
}
__attribute__((weak)) void eval_Pool(const PoolParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("Pool: no CPU kernel yet");
}
__attribute__((weak)) void eval_RandomBits(const NoParams&, const std::vector<Array>&, std::vector<Array>&) {
  throw UnsupportedError("RandomBits: no CPU kernel yet");
}
__attribute__((weak)) Array nonzero(const Array&) { throw UnsupportedError("nonzero: no CPU kernel yet"); }

}  // namespace smelt::cpu
