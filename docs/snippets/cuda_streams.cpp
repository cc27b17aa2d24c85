// docs/cuda.md, "Streams": a worker thread that sends its GPU work to its own stream.
// snippet-requires: cuda
// snippet-begin
#include <smelt/stream.h>
// snippet-end
#include <smelt/compile.h>
#include <smelt/smelt.h>

#include <iostream>
#include <thread>
using smelt::Array;

int main() {
  if (!smelt::cuda_available()) {
    std::cout << "skipped: needs a CUDA GPU\n";
    return 77;
  }
  auto model = smelt::compile([](const Array& x) { return smelt::tanh(x) * 2.0f; });
  Array x = smelt::to_device(smelt::arange(0.0, 8.0), smelt::Device::cuda(0));
  // snippet-begin
  smelt::Stream s = smelt::Stream::create(smelt::Device::cuda(0));  // one per worker thread
  std::thread worker([&] {
    smelt::StreamScope scope(s);   // this thread's GPU work now goes to s
    Array y = model(x);            // a shared compiled function or eager graph
    y.eval();
    smelt::synchronize(s);         // waits for s only; synchronize(Device) waits for every stream
  });
  // snippet-end
  worker.join();
}
