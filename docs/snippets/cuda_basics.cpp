// docs/cuda.md: moving arrays to the GPU and back (does nothing without a GPU).
// snippet-begin
#include <smelt/smelt.h>
using namespace smelt;
// snippet-end

int main() {
  // snippet-begin
  if (cuda_available()) {
    Array x = to_device(Array({1.0f, 2.0f, 3.0f}), Device::cuda(0));  // host -> GPU
    Array y = exp(x) * 2.0f;            // runs on the GPU; the scalar moves by itself
    std::vector<float> v = y.to_vector<float>();   // reads copy back to the host
    Array h = to_device(y, Device::cpu());          // or move explicitly
    synchronize(Device::cuda(0));                   // wait for queued kernels (timing)
  }
  // snippet-end
}
