// A libFuzzer-compatible driver for compilers without libFuzzer (GCC): random structure-aware and byte mutations of a corpus, no coverage feedback.
//
// The fuzz targets define LLVMFuzzerTestOneInput (and onnx_model_fuzz LLVMFuzzerCustomMutator);
// linked with this file instead of -fsanitize=fuzzer they become black-box fuzzers that run under
// GCC's AddressSanitizer and UndefinedBehaviorSanitizer against the instrumented library (the
// `asan` preset configured with -DSMELT_FUZZ_STANDALONE=ON: build/asan/fuzz/*_standalone). Mutations are what
// the target's custom mutator does, else (and one time in eight) byte-level: bit flips, interesting
// bytes, chunk copies, inserts and erases.
//
//   TARGET [-seconds N] [-seed S] [-timeout N] [-crash_dir DIR] CORPUS_DIR_OR_FILE...
//   TARGET FILE...   (with no -seconds: runs each file once, to replay a crash)
//
// Before each input runs it is written to CRASH_DIR/current-<pid>: when the process dies (a
// sanitizer report, a signal, the per-input alarm) that file is the input that did it. A clean
// end removes it and prints the number of inputs run.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed)
    __attribute__((weak));

namespace {

namespace fs = std::filesystem;
std::mt19937_64 rng;

size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); }

}  // namespace

/// libFuzzer's byte mutator, which the structure-aware target falls back to.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size) {
  static const uint8_t interesting[] = {0, 1, 0x7f, 0x80, 0xff, 0x10, 0x20, 0x40, 0xfe};
  const size_t steps = 1 + below(4);
  for (size_t s = 0; s < steps; ++s) {
    switch (below(6)) {
      case 0:
        if (size) data[below(size)] ^= static_cast<uint8_t>(1u << below(8));
        break;
      case 1:
        if (size) data[below(size)] = interesting[below(sizeof interesting)];
        break;
      case 2:
        if (size) data[below(size)] = static_cast<uint8_t>(rng());
        break;
      case 3:  // copy a chunk over another place
        if (size > 1) {
          size_t from = below(size), to = below(size), n = 1 + below(std::min<size_t>(16, size - std::max(from, to)));
          std::memmove(data + to, data + from, n);
        }
        break;
      case 4:  // insert random bytes
        if (size < max_size) {
          size_t at = below(size + 1), n = 1 + below(std::min<size_t>(8, max_size - size));
          std::memmove(data + at + n, data + at, size - at);
          for (size_t i = 0; i < n; ++i) data[at + i] = static_cast<uint8_t>(rng());
          size += n;
        }
        break;
      case 5:  // erase a chunk
        if (size > 1) {
          size_t at = below(size), n = 1 + below(std::min<size_t>(16, size - at));
          std::memmove(data + at, data + at + n, size - at - n);
          size -= n;
        }
        break;
    }
  }
  return size;
}

namespace {

std::vector<uint8_t> read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& p, const uint8_t* data, size_t size) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = -1;
  uint64_t seed = static_cast<uint64_t>(getpid());
  unsigned timeout = 20;
  fs::path crash_dir = ".";
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-seconds") seconds = std::atof(value().c_str());
    else if (a == "-seed") seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "-timeout") timeout = static_cast<unsigned>(std::atoi(value().c_str()));
    else if (a == "-crash_dir") crash_dir = value();
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "usage: %s [-seconds N] [-seed S] [-timeout N] [-crash_dir DIR] CORPUS...\n", argv[0]);
      return 2;
    } else inputs.emplace_back(a);
  }
  std::vector<std::vector<uint8_t>> corpus;
  for (const auto& p : inputs) {
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && e.file_size() <= (1u << 20)) corpus.push_back(read_file(e.path()));
    } else if (fs::is_regular_file(p)) {
      corpus.push_back(read_file(p));
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "no inputs\n");
    return 2;
  }
  if (seconds < 0) {  // replay
    for (const auto& c : corpus) LLVMFuzzerTestOneInput(c.data(), c.size());
    std::printf("ran %zu inputs\n", corpus.size());
    return 0;
  }
  rng.seed(seed);
  fs::create_directories(crash_dir);
  const fs::path current = crash_dir / ("current-" + std::to_string(getpid()));
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  const size_t max_size = 1u << 20;
  std::vector<uint8_t> buf(max_size);
  uint64_t runs = 0;
  while (std::chrono::steady_clock::now() < end) {
    const auto& base = corpus[below(corpus.size())];
    size_t size = std::min(base.size(), max_size);
    std::memcpy(buf.data(), base.data(), size);
    const size_t rounds = 1 + below(3);
    for (size_t r = 0; r < rounds; ++r)
      size = (LLVMFuzzerCustomMutator && below(8) != 0)
                 ? LLVMFuzzerCustomMutator(buf.data(), size, max_size, static_cast<unsigned>(rng()))
                 : LLVMFuzzerMutate(buf.data(), size, max_size);
    write_file(current, buf.data(), size);
    alarm(timeout);  // a hang dies by SIGALRM and leaves `current` behind
    LLVMFuzzerTestOneInput(buf.data(), size);
    alarm(0);
    ++runs;
  }
  fs::remove(current);
  std::printf("standalone fuzz: %llu inputs in %.0f s, seed %llu, no crash\n", static_cast<unsigned long long>(runs),
              seconds, static_cast<unsigned long long>(seed));
  return 0;
}
