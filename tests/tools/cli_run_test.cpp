// `smelt run`: runs the CLI binary on the bundled models and a fixture model; checks output, files and errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "smelt/io.h"
#include "smelt/smelt.h"
#include "test_utils.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;

#ifdef SMELT_ONNX

/// The repository root: this file lives in tests/tools/ (CMake compiles it by absolute path).
fs::path repo_root() { return fs::path(__FILE__).parent_path().parent_path().parent_path(); }
std::string model(const std::string& name) { return (repo_root() / "models" / (name + ".onnx")).string(); }
std::string fixture(const std::string& name) { return (repo_root() / "tests" / "onnx" / "fixtures" / name).string(); }

/// The smelt binary: $SMELT_CLI, else tools/smelt/smelt in the build folder holding this test.
std::string cli_path() {
  if (const char* env = std::getenv("SMELT_CLI")) return env;
  return (fs::canonical("/proc/self/exe").parent_path().parent_path() / "tools" / "smelt" / "smelt").string();
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

class CliRun : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("smelt_cli_run_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Runs `smelt run ARGS...` with one thread, capturing stdout, stderr and the exit status.
  CliResult run(const std::vector<std::string>& args) {
    std::string cmd = "SMELT_NUM_THREADS=1 " + quote(cli_path()) + " run";
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " >" + quote((dir_ / "stdout").string()) + " 2>" + quote((dir_ / "stderr").string());
    int raw = std::system(cmd.c_str());
    CliResult r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = read_text(dir_ / "stdout");
    r.err = read_text(dir_ / "stderr");
    return r;
  }

  /// Expects exit status `status`, nothing on stdout, and `message` on stderr.
  void expect_error(const std::vector<std::string>& args, int status, const std::string& message) {
    CliResult r = run(args);
    EXPECT_EQ(r.status, status) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(message), std::string::npos) << "stderr: " << r.err << "\nexpected: " << message;
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(CliRun, BinaryExists) { ASSERT_TRUE(fs::exists(cli_path())) << cli_path() << " (set SMELT_CLI)"; }

TEST_F(CliRun, TransformerWithDefaultInputs) {
  CliResult r = run({model("tiny_transformer"), "--repeat", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(has(r.out, "threads  1\n")) << r.out;
  EXPECT_TRUE(has(r.out, "int64[1,32]")) << r.out;
  EXPECT_TRUE(has(r.out, "random integers [0, 100) (ids/indices); batch=1 (default), seq=32 (default)")) << r.out;
  EXPECT_TRUE(has(r.out, "logits               float32[1,32,1000]     [")) << r.out;
  EXPECT_TRUE(has(r.out, "last_hidden_state    float32[1,32,128]")) << r.out;
  EXPECT_TRUE(has(r.out, "time     first run ")) << r.out;
  EXPECT_TRUE(has(r.out, "; 3 more runs: median ")) << r.out;
  EXPECT_TRUE(has(r.out, ", min ")) << r.out;
}

TEST_F(CliRun, SameSeedSameValuesOtherSeedOtherValues) {
  auto values = [&](const std::string& seed) {
    CliResult r = run({model("tiny_cnn"), "--seed", seed});
    EXPECT_EQ(r.status, 0) << r.err;
    auto at = r.out.find("probs");
    return r.out.substr(at, r.out.find('\n', at) - at);
  };
  std::string a = values("7");
  EXPECT_EQ(a, values("7"));
  EXPECT_NE(a, values("8"));
}

// The printed leading values and the saved files are the model's outputs on the given input.
TEST_F(CliRun, FileInputAndOutputDir) {
  std::string out_dir = path("out");
  CliResult r = run({model("tiny_transformer"), "--input",
                     "input_ids=" + fixture("tiny_transformer.input.input_ids.npy"), "--output-dir", out_dir});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "int64[2,16]            file ")) << r.out;
  EXPECT_TRUE(has(r.out, "float32[2,16,1000]     [10.45, 22.21, 23.58, -15.02, -16.06, ")) << r.out;
  EXPECT_TRUE(has(r.out, "wrote    " + out_dir + "/logits.npy\n")) << r.out;
  for (const std::string name : {"logits", "last_hidden_state"}) {
    Array got = load(out_dir + "/" + name + ".npy");
    Array expected = load(fixture("tiny_transformer.output." + name + ".npy"));
    ASSERT_EQ(got.shape(), expected.shape());
    EXPECT_TRUE(all_close(got, as_doubles(expected), 1e-4, 1e-5)) << name;
  }
}

TEST_F(CliRun, RandomShapeAndDims) {
  CliResult r = run({model("tiny_transformer"), "--input", "input_ids=random:3x5"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "int64[3,5]")) << r.out;
  EXPECT_TRUE(has(r.out, "float32[3,5,1000]")) << r.out;
  EXPECT_FALSE(has(r.out, "(default)")) << r.out;

  r = run({model("tiny_transformer"), "--dim", "batch=2", "--dim", "seq=7"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "float32[2,7,128]")) << r.out;

  r = run({model("tiny_transformer"), "--dim", "seq=4"});  // batch still defaults
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "batch=1 (default)\n")) << r.out;
  EXPECT_TRUE(has(r.out, "float32[1,4,128]")) << r.out;

  r = run({model("tiny_cnn"), "--input", "input=random:0x3x32x32"});  // an empty batch
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "probs                float32[0,10]          []")) << r.out;
}

// A size read from a file binds the symbol for the random inputs too.
TEST_F(CliRun, FileSizesBindSymbols) {
  save(path("x.npy"), random_array({2, 4}, float32));
  CliResult r = run({fixture("cli_fixture.onnx"), "--input", "x:0=" + path("x.npy"), "--output-dir", path("o")});
  ASSERT_EQ(r.status, 0) << r.err;
  // y/out:0 is sanitized to y_out_0, and the message says so.
  EXPECT_TRUE(has(r.out, "wrote    " + path("o") + "/y_out_0.npy (output 'y/out:0', name sanitized")) << r.out;
  Array y = load(path("o") + "/y_out_0.npy");
  std::vector<double> expected;
  for (double v : as_doubles(load(path("x.npy")))) expected.push_back(2 * v);
  EXPECT_TRUE(all_close(y, expected, 0, 0));
  // The random mask shares batch = 2 with x:0; seq_len takes its default.
  EXPECT_EQ(load(path("o") + "/attention_mask_out.npy").shape(), (Shape{2, 32}));
  EXPECT_TRUE(has(r.out, "int64[2,32]            ones (a mask); seq_len=32 (default)\n")) << r.out;
}

/// min and max of an array's values.
std::pair<double, double> value_range(const Array& a) {
  auto v = as_doubles(a);
  return {*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}

// Each element type gets its documented random rule, chosen by the words of the input's name.
TEST_F(CliRun, RandomRulesPerTypeAndName) {
  CliResult r = run({fixture("cli_fixture.onnx"), "--dim", "height=3", "--output-dir", path("o")});
  ASSERT_EQ(r.status, 0) << r.err;
  auto out = [&](const std::string& name) { return load(path("o") + "/" + name + ".npy"); };

  Array n1 = out("n_plus_one");  // n: int32, no special word: [0, 10)
  EXPECT_EQ(n1.dtype(), int32);
  EXPECT_GE(value_range(n1).first, 1);
  EXPECT_LE(value_range(n1).second, 10);
  EXPECT_TRUE(has(r.out, "int32[3]               random integers [0, 10)\n")) << r.out;

  Array mask = out("attention_mask_out");
  EXPECT_EQ(mask.dtype(), int64);
  EXPECT_EQ(value_range(mask), std::make_pair(1.0, 1.0));

  Array ids = out("token_ids_out");  // the word "ids": [0, 100)
  EXPECT_EQ(ids.shape(), (Shape{1, 32}));
  EXPECT_GE(value_range(ids).first, 0);
  EXPECT_LT(value_range(ids).second, 100);
  EXPECT_GE(value_range(ids).second, 10);  // 32 draws from [0, 100) reach past 10
  EXPECT_TRUE(has(r.out, "random integers [0, 100) (ids/indices)")) << r.out;

  Array width = out("width_out");  // contains "id" but not as a word: [0, 10)
  EXPECT_GE(value_range(width).first, 0);
  EXPECT_LT(value_range(width).second, 10);

  Array flag = out("flag_out");
  EXPECT_EQ(flag.dtype(), bool_);
  EXPECT_EQ(value_range(flag), std::make_pair(0.0, 1.0));  // 64 coin flips show both

  for (const std::string name : {"half_out", "brain_out"}) {
    Array h = out(name);
    EXPECT_TRUE(h.dtype() == float16 || h.dtype() == bfloat16) << name;
    EXPECT_GE(value_range(h).first, -1.0) << name;
    EXPECT_LE(value_range(h).second, 1.0) << name;  // halves may round up to 1
    EXPECT_LT(value_range(h).first, 0.0) << name;
  }
  EXPECT_EQ(out("bytes_out").dtype(), uint8);
  EXPECT_LT(value_range(out("bytes_out")).second, 10);
}

TEST_F(CliRun, JsonReport) {
  CliResult r = run({model("tiny_cnn"), "--repeat", "2", "--json", path("r.json"), "--threads", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "threads  2\n")) << r.out;
  std::string json = read_text(path("r.json"));
  EXPECT_TRUE(has(json, "\"threads\": 2")) << json;
  EXPECT_TRUE(has(json, "\"input\": \"float32[1,3,32,32]\"")) << json;
  EXPECT_TRUE(has(json, "\"probs\": \"float32[1,10]\"")) << json;
  EXPECT_TRUE(has(json, "\"median_ms\": ")) << json;
  EXPECT_TRUE(has(json, "\"runs_ms\": [")) << json;
}

TEST_F(CliRun, Help) {
  CliResult r = run({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(has(r.out, "usage: smelt run MODEL")) << r.out;
  EXPECT_TRUE(has(r.out, "seq_len, length, T = 32")) << r.out;
}

TEST_F(CliRun, UsageErrorsExitWithTwo) {
  std::string m = model("tiny_cnn");
  expect_error({}, 2, "no model given");
  expect_error({m, "--input", "input"}, 2, "--input 'input' is not NAME=FILE.npy or NAME=random:D0xD1...");
  expect_error({m, "--input", "=x.npy"}, 2, "--input '=x.npy' is not NAME=FILE.npy");
  expect_error({m, "--input", "input=random:2xqx3"}, 2, "'q' is not a size");
  expect_error({m, "--input", "input=random:2x-1"}, 2, "'-1' is not a size");
  expect_error({m, "--input", "input=random", "--input", "input=random"}, 2, "input 'input' given twice");
  expect_error({m, "--dim", "N"}, 2, "--dim 'N' is not SYMBOL=N");
  expect_error({m, "--dim", "N=two"}, 2, "--dim 'N=two' is not SYMBOL=N");
  expect_error({m, "--repeat", "0"}, 2, "--repeat needs a positive integer, got '0'");
  expect_error({m, "--threads", "x"}, 2, "--threads needs a positive integer, got 'x'");
  expect_error({m, "--seed", "-3"}, 2, "--seed needs a non-negative integer, got '-3'");
  expect_error({m, "--repeat"}, 2, "--repeat needs a value");
  expect_error({m, "--frobnicate"}, 2, "unknown option '--frobnicate'");
  expect_error({m, m}, 2, "more than one model given");
  expect_error({m, "--bogus"}, 2, "usage: smelt run MODEL");
}

TEST_F(CliRun, UnknownInputListsTheModelsInputs) {
  expect_error({model("tiny_transformer"), "--input", "ids=random:1x4"}, 1,
               "smelt run: unknown input 'ids' (the model's inputs are: input_ids)");
  expect_error({fixture("cli_fixture.onnx"), "--input", "y=random"}, 1, "(the model's inputs are: x:0, n, attention_mask,");
}

TEST_F(CliRun, NpyMustMatchTheDeclaration) {
  Array ids = load(fixture("tiny_transformer.input.input_ids.npy"));
  save(path("ids32.npy"), astype(ids, int32));
  expect_error({model("tiny_transformer"), "--input", "input_ids=" + path("ids32.npy")}, 1,
               "input 'input_ids' from '" + path("ids32.npy") +
                   "': expected tensor(int64)[batch,seq], got int32[2,16] (the element type differs)");
  save(path("flat.npy"), reshape(ids, {32}));
  expect_error({model("tiny_transformer"), "--input", "input_ids=" + path("flat.npy")}, 1,
               "expected tensor(int64)[batch,seq], got int64[32] (the rank differs)");
  save(path("img.npy"), random_array({1, 4, 32, 32}, float32));
  expect_error({model("tiny_cnn"), "--input", "input=" + path("img.npy")}, 1,
               "input 'input' from '" + path("img.npy") +
                   "': expected tensor(float)[N,3,32,32], got float32[1,4,32,32] (dim 1 differs)");
  save(path("img64.npy"), random_array({1, 3, 32, 32}, float64));
  expect_error({model("tiny_cnn"), "--input", "input=" + path("img64.npy")}, 1,
               "got float64[1,3,32,32] (the element type differs)");
  expect_error({model("tiny_cnn"), "--input", "input=random:1x3x32"}, 1,
               "input 'input': expected tensor(float)[N,3,32,32], got random:[1,3,32] (the rank differs)");
}

TEST_F(CliRun, UnreadableInputFiles) {
  expect_error({model("tiny_cnn"), "--input", "input=" + path("missing.npy")}, 1,
               "input 'input': cannot open '" + path("missing.npy") + "'");
  std::ofstream(path("junk.npy")) << "not a numpy file";
  expect_error({model("tiny_cnn"), "--input", "input=" + path("junk.npy")}, 1,
               "input 'input': cannot read '" + path("junk.npy") + "': ");
}

TEST_F(CliRun, DimErrors) {
  // height has no default: the message names the input, the axis and the flag to pass.
  expect_error({fixture("cli_fixture.onnx")}, 1,
               "input 'x:0' dim 1 is the symbol 'height', which has no size: pass --dim height=N");
  CliResult r = run({fixture("cli_fixture.onnx"), "--dim", "height=3"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "float32[1,3]")) << r.out;
  expect_error({model("tiny_cnn"), "--dim", "batch=2"}, 1,
               "--dim batch: no input of the model has a dim named 'batch'");
  save(path("x.npy"), random_array({2, 4}, float32));
  expect_error({fixture("cli_fixture.onnx"), "--dim", "batch=3", "--input", "x:0=" + path("x.npy")}, 1,
               "--dim batch=3 but input 'x:0' has batch = 2");
}

TEST_F(CliRun, UnreadableModels) {
  expect_error({path("nonexistent.onnx")}, 1, "cannot open '" + path("nonexistent.onnx") + "'");
  std::ofstream(path("garbage.onnx")) << "this is not a protobuf";
  CliResult r = run({path("garbage.onnx")});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "smelt run: ")) << r.err;
  EXPECT_TRUE(has(r.err, "garbage.onnx")) << r.err;
  // A truncated copy of a real model.
  std::ifstream src(model("tiny_cnn"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  std::ofstream(path("cut.onnx"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  r = run({path("cut.onnx")});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "cut.onnx")) << r.err;
  EXPECT_EQ(r.out, "");
}

#else

TEST(CliRun, NeedsOnnx) { GTEST_SKIP() << "smelt was built without ONNX support"; }

#endif

}  // namespace
}  // namespace smelt::test
