// `smelt run`: runs the CLI binary on the bundled models and a fixture model; checks output, files and errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "smelt/device.h"
#include "smelt/io.h"
#include "smelt/smelt.h"
#include "onnx/ort_bounds.h"
#include "test_utils.h"
#include "tools/cli_test_utils.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;

#ifdef SMELT_ONNX

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
    std::vector<std::string> all{"run"};
    all.insert(all.end(), args.begin(), args.end());
    return run_cli(all, dir_);
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

TEST_F(CliRun, BinaryExists) { ASSERT_TRUE(fs::exists(cli_path())) << cli_path() << " (set SMELT_CLI)"; }

TEST_F(CliRun, TransformerWithDefaultInputs) {
  CliResult r = run({model("tiny_transformer"), "--repeat", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(has(r.out, "threads  1\n")) << r.out;
  EXPECT_TRUE(has(r.out, "int64[1,32]")) << r.out;
  EXPECT_TRUE(has(r.out, "random integers [0, 1000) (indices of Gather 'token_embedding' dim 0 of 'embed_tokens.weight'); batch=1 (default), seq=32 (default)")) << r.out;
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
  // Against ONNX Runtime's outputs within the error bounds of tests/onnx/ort_bounds.h.
  const Array hidden_ort = load(fixture("tiny_transformer.output.last_hidden_state.npy"));
  const TransformerBounds bounds = transformer_bounds(onnx::load(model("tiny_transformer")),
                                                     load(fixture("tiny_transformer.input.input_ids.npy")), hidden_ort);
  for (const std::string name : {"logits", "last_hidden_state"}) {
    Array got = load(out_dir + "/" + name + ".npy");
    Array expected = load(fixture("tiny_transformer.output." + name + ".npy"));
    ASSERT_EQ(got.shape(), expected.shape());
    EXPECT_TRUE(within_bound(got, expected, name == "logits" ? bounds.logits : bounds.last_hidden_state)) << name;
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

/// The number after `"key": ` in a JSON text; -1 when the key is missing.
static int64_t json_integer(const std::string& json, const std::string& key) {
  auto at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1;
  return std::stoll(json.substr(at + key.size() + 4));
}

// On a GPU the inputs are uploaded once, before the runs, and the output says so (every run then
// times the model, not a copy of its inputs); on the CPU there is nothing to upload.
TEST_F(CliRun, InputsAreUploadedOnceToTheRunsDevice) {
  CliResult cpu = run({model("tiny_cnn"), "--compile", "--repeat", "2", "--device", "cpu"});
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  EXPECT_FALSE(has(cpu.out, "upload")) << cpu.out;
  if (!cuda_available()) GTEST_SKIP() << "no GPU: the upload is checked on a GPU machine";
  CliResult gpu = run({model("tiny_cnn"), "--compile", "--repeat", "2", "--device", "cuda", "--dim", "N=2"});
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  // tiny_cnn's input: 2 x 3 x 32 x 32 float32 = 24,576 bytes.
  EXPECT_TRUE(has(gpu.out, "upload   inputs to cuda:0 once, before the runs: 24576 B in ")) << gpu.out;
  EXPECT_TRUE(has(gpu.out, "compiled outputs equal eager outputs bit for bit")) << gpu.out;
}

TEST_F(CliRun, JsonReportHasTheMemoryPeaks) {
  CliResult r = run({model("tiny_cnn"), "--compile", "--repeat", "2", "--json", path("r.json"), "--threads", "2",
                     "--device", "cpu"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string json = read_text(path("r.json"));
  EXPECT_TRUE(has(json, "\"memory\": {\"device\": \"cpu\", \"peak_bytes\": ")) << json;
  int64_t peak = json_integer(json, "peak_bytes"), eager = json_integer(json, "eager_first_peak_bytes");
  int64_t compiled = json_integer(json, "compiled_first_peak_bytes"), repeats = json_integer(json, "repeats_peak_bytes");
  // Each phase holds at least its input (3x32x32 floats) and output (10 floats) alive; the overall
  // peak is the highest of the three.
  const int64_t floor = (3 * 32 * 32 + 10) * 4;
  EXPECT_GE(eager, floor) << json;
  EXPECT_GE(compiled, floor) << json;
  EXPECT_GE(repeats, floor) << json;
  EXPECT_EQ(peak, std::max({eager, compiled, repeats})) << json;
  // Without --compile and --repeat only the eager run's window is reported.
  r = run({model("tiny_cnn"), "--json", path("e.json"), "--device", "cpu"});
  ASSERT_EQ(r.status, 0) << r.err;
  json = read_text(path("e.json"));
  EXPECT_EQ(json_integer(json, "peak_bytes"), json_integer(json, "eager_first_peak_bytes")) << json;
  EXPECT_EQ(json_integer(json, "compiled_first_peak_bytes"), -1) << json;
  EXPECT_EQ(json_integer(json, "repeats_peak_bytes"), -1) << json;
}

TEST_F(CliRun, Help) {
  CliResult r = run({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(has(r.out, "usage: smelt run MODEL")) << r.out;
  EXPECT_TRUE(has(r.out, "seq_len, length, T = 32")) << r.out;
}

TEST_F(CliRun, InfoListsTheLoadTimeRewrites) {
  // `smelt info` describes the file as stored, then the rewrites a load makes (LoadOptions::fuse):
  // the tiny transformer's two GELUs and two attentions, each fused node named after its nodes.
  const std::string cmd = quote(cli_path()) + " info " + quote(model("tiny_transformer")) + " >" +
                          quote(path("info.txt")) + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(dir_ / "info.txt");
  const std::string out = read_text(dir_ / "info.txt");
  EXPECT_TRUE(has(out, "rewrites at load (4;")) << out;
  EXPECT_TRUE(has(out, "  attention    2\n")) << out;
  EXPECT_TRUE(has(out, "  gelu         2\n")) << out;
  EXPECT_TRUE(has(out, "layers.0.attn.scores,layers.0.attn.probs")) << out;
  EXPECT_TRUE(has(out, "layers.1.attn.scores,layers.1.attn.probs")) << out;
  EXPECT_FALSE(has(out, "ScaledDotProductAttention")) << out;  // the operator list is the file's
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

// Without --device, run follows the default-device rule, SMELT_DEFAULT_DEVICE included (the
// other tests set it to cpu): cuda runs there on a GPU machine and says why not elsewhere.
TEST_F(CliRun, DefaultDeviceFollowsTheEnvironment) {
  const std::string cmd = "SMELT_NUM_THREADS=1 SMELT_DEFAULT_DEVICE=cuda " + quote(cli_path()) + " run " +
                          quote(fixture("cli_fixture.onnx")) + " --dim height=3 >" + quote(path("out")) + " 2>" +
                          quote(path("err"));
  const int raw = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  if (cuda_available()) {
    EXPECT_EQ(WEXITSTATUS(raw), 0) << read_text(path("err"));
    EXPECT_TRUE(has(read_text(path("out")), "device   cuda:0\n")) << read_text(path("out"));
  } else {
    EXPECT_EQ(WEXITSTATUS(raw), 1);
    EXPECT_TRUE(has(read_text(path("err")), "smelt run: SMELT_DEFAULT_DEVICE=cuda: cuda:0 is not available"))
        << read_text(path("err"));
  }
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

// ---------------------------------------------------------------------------------------------
// --compile and --static
// ---------------------------------------------------------------------------------------------

std::string breaks() { return fixture("breaks_fixture.onnx"); }

/// The text of the line of `text` that starts with `prefix` ("" when there is none).
std::string line_starting(const std::string& text, const std::string& prefix) {
  size_t at = text.rfind("\n" + prefix) != std::string::npos ? text.find("\n" + prefix) + 1
                                                             : (text.rfind(prefix, 0) == 0 ? 0 : std::string::npos);
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

// Without static inputs the fixture breaks at NonZero and at the If on use_double: the segments
// between them are listed with their positions, nodes and reasons, and the timing lines follow.
TEST_F(CliRun, CompileListsSegmentsAtBreaks) {
  CliResult r = run({breaks(), "--compile", "--repeat", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(has(r.out, "segments 5 (1 compiled, 2 eager, 2 breaks)\n")) << r.out;
  EXPECT_TRUE(has(r.out, "  0  eager     position 0  Greater 'above'\n     reason   break: NonZero 'positions' (fewer than"))
      << r.out;
  // A break's reason is phrased for its node, without the evaluation error behind it.
  EXPECT_TRUE(has(r.out, "  1  break     position 1  NonZero 'positions'\n"
                         "     reason   output shape depends on the values of its input\n"))
      << r.out;
  EXPECT_FALSE(has(r.out, "eval:")) << r.out;
  EXPECT_TRUE(has(r.out,
                  "  2  compiled  positions 2-24  Reshape 'flat_positions' .. ReduceSum 'sum' (23 nodes)\n"
                  "     reason   break: If 'maybe_double'\n"
                  "     fused    Fused[Mul 'chain_0_mul', Add 'chain_1_add', Tanh 'chain_2_tanh', ..., "
                  "ReduceSum 'sum'] (21 nodes)\n"))  // the sum joins the chain as a row kernel
      << r.out;
  EXPECT_TRUE(has(r.out, "  3  break     position 25  If 'maybe_double'\n"
                         "     reason   which branch runs depends on the value of input 'cond'\n"))
      << r.out;
  EXPECT_TRUE(has(r.out, "  4  eager     positions 26-27  Mul 'scale' .. Reshape 'to_grid' (2 nodes)\n"
                         "     reason   end of graph (fewer than"))
      << r.out;
  EXPECT_TRUE(has(r.out, "check    compiled outputs equal eager outputs bit for bit (3 outputs)\n")) << r.out;
  EXPECT_TRUE(has(line_starting(r.out, "compile  "), " ms (trace ")) << r.out;
  EXPECT_TRUE(has(line_starting(r.out, "compile  "), " ms; 3 traces)")) << r.out;
  EXPECT_TRUE(has(line_starting(r.out, "time     eager    first run "), "; 3 more: median ")) << r.out;
  std::string compiled = line_starting(r.out, "         compiled first call ");
  EXPECT_TRUE(has(compiled, " (compiling included); 3 more: median ")) << r.out;
  EXPECT_TRUE(has(compiled, ", min ")) << r.out;
  std::string payoff = line_starting(r.out, "payoff   ");
  EXPECT_TRUE(payoff.rfind("payoff   after ", 0) == 0 || payoff.rfind("payoff   never: compiled ", 0) == 0) << r.out;
  EXPECT_FALSE(has(r.out, "time     first run")) << r.out;  // the eager-only line is replaced
}

// Tiered execution: the first call runs unfused, the CLI waits for the background builds (with an
// empty kernel cache) or loads (with the cache the first process filled), checks the fused
// tier's outputs too and says which tier ran.
TEST_F(CliRun, CompileTiersWithAColdThenAWarmCache) {
  const std::string cache = path("kernels");
  const char* old_cache = std::getenv("SMELT_CACHE_DIR");
  const char* old_tiered = std::getenv("SMELT_TIERED");
  const std::string saved_cache = old_cache ? old_cache : "", saved_tiered = old_tiered ? old_tiered : "";
  ::setenv("SMELT_CACHE_DIR", cache.c_str(), 1);
  ::unsetenv("SMELT_TIERED");
  CliResult cold = run({breaks(), "--compile", "--repeat", "2", "--json", path("cold.json")});
  CliResult warm = run({breaks(), "--compile", "--repeat", "2"});
  if (old_cache) ::setenv("SMELT_CACHE_DIR", saved_cache.c_str(), 1);
  else ::unsetenv("SMELT_CACHE_DIR");
  if (old_tiered) ::setenv("SMELT_TIERED", saved_tiered.c_str(), 1);
  ASSERT_EQ(cold.status, 0) << cold.err;
  EXPECT_TRUE(has(cold.out, "check    compiled outputs equal eager outputs bit for bit (3 outputs)\n")) << cold.out;
  const std::string tiers = line_starting(cold.out, "tiers    ");
  EXPECT_TRUE(has(tiers, " on the interpreter tier, ")) << cold.out;
  EXPECT_TRUE(has(tiers, " (the first call ran unfused; its kernels were ready ")) << cold.out;
  const std::string json = read_text(path("cold.json"));
  EXPECT_TRUE(has(json, "\"first_call_tier\": \"interpreter\"")) << json;
  ASSERT_EQ(warm.status, 0) << warm.err;
  EXPECT_TRUE(has(warm.out, "check    compiled outputs equal eager outputs bit for bit (3 outputs)\n")) << warm.out;
  EXPECT_TRUE(has(line_starting(warm.out, "tiers    "), " fused (the first call ran unfused; ")) << warm.out;
}

// Without --repeat: the segments and the check, the compile cost, no medians and no payoff.
TEST_F(CliRun, CompileWithoutRepeat) {
  CliResult r = run({breaks(), "--compile", "--eager-below", "0"});
  ASSERT_EQ(r.status, 0) << r.err;
  // eager_below 0 compiles the short segments too: only the two breaks run eagerly.
  EXPECT_TRUE(has(r.out, "segments 5 (3 compiled, 0 eager, 2 breaks)\n")) << r.out;
  EXPECT_TRUE(has(r.out, "  0  compiled  position 0  Greater 'above'\n     reason   break: NonZero 'positions'\n"))
      << r.out;
  EXPECT_TRUE(has(r.out, "check    compiled outputs equal eager outputs bit for bit (3 outputs)\n")) << r.out;
  EXPECT_TRUE(has(r.out, "compile  ")) << r.out;
  EXPECT_TRUE(has(r.out, "         compiled first call ")) << r.out;
  EXPECT_FALSE(has(r.out, "more: median")) << r.out;
  EXPECT_FALSE(has(r.out, "payoff")) << r.out;
}

// Static inputs are constants of the trace: the If on use_double traces only its branch and the
// Reshape to grid_shape folds, so everything after NonZero is one compiled segment. The outputs
// are the model's: grid is 2 * scores in the static shape, total is 2 * sum(selected).
TEST_F(CliRun, CompileWithStaticInputs) {
  Array scores = random_array({32}, float32);
  save(path("scores.npy"), scores);
  save(path("threshold.npy"), Array(-0.25f));
  CliResult r = run({breaks(), "--compile", "--static", "use_double=true", "--static", "grid_shape=8,4", "--input",
                     "scores=" + path("scores.npy"), "--input", "threshold=" + path("threshold.npy"), "--output-dir",
                     path("o")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "  use_double           bool[]                 static [true]\n")) << r.out;
  EXPECT_TRUE(has(r.out, "  grid_shape           int64[2]               static [8, 4]\n")) << r.out;
  EXPECT_TRUE(has(r.out, "segments 3 (1 compiled, 1 eager, 1 break)\n")) << r.out;
  EXPECT_TRUE(has(r.out, "  2  compiled  positions 2-27  Reshape 'flat_positions' .. Reshape 'to_grid' (26 nodes)\n"
                         "     reason   end of graph\n"))
      << r.out;
  EXPECT_TRUE(has(r.out, "check    compiled outputs equal eager outputs bit for bit (3 outputs)\n")) << r.out;

  std::vector<double> x = as_doubles(scores);
  Array grid = load(path("o") + "/grid.npy");
  ASSERT_EQ(grid.shape(), (Shape{8, 4}));
  std::vector<double> doubled;
  for (double v : x) doubled.push_back(2 * v);
  EXPECT_TRUE(all_close(grid, doubled, 0, 0));
  size_t above = static_cast<size_t>(std::count_if(x.begin(), x.end(), [](double v) { return v > -0.25; }));
  Array selected = load(path("o") + "/selected.npy");
  ASSERT_EQ(selected.shape(), (Shape{static_cast<int64_t>(above)}));
  double sum = 0, magnitude = 0;
  for (double v : as_doubles(selected)) {
    sum += v;
    magnitude += std::fabs(v);
  }
  // A float32 sum of n terms in any order is within gamma_n * sum |x| of the exact sum (doubling
  // is exact); `sum` itself (float32 terms added in double) is exact to far below that.
  const double total_tol = 2 * gamma32(static_cast<double>(above)) * magnitude;
  EXPECT_TRUE(all_close(load(path("o") + "/total.npy"), std::vector<double>{2 * sum}, 0, total_tol));

  // use_double=false keeps the sum; grid_shape from a .npy file works as the values do.
  save(path("shape.npy"), Array({int64_t{2}, int64_t{16}}));
  r = run({breaks(), "--compile", "--static", "use_double=0", "--static", "grid_shape=" + path("shape.npy"), "--input",
           "scores=" + path("scores.npy"), "--input", "threshold=" + path("threshold.npy"), "--output-dir", path("p")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "  grid_shape           int64[2]               static, file " + path("shape.npy") + "\n")) << r.out;
  EXPECT_EQ(load(path("p") + "/grid.npy").shape(), (Shape{2, 16}));
  EXPECT_TRUE(all_close(load(path("p") + "/total.npy"), std::vector<double>{sum}, 0, total_tol / 2));
}

// grid_shape given as data (--input) makes the Reshape a break; its initializer default and a
// static value do not.
TEST_F(CliRun, CompileReshapeOnDataBreaks) {
  save(path("shape.npy"), Array({int64_t{4}, int64_t{8}}));
  CliResult r = run({breaks(), "--compile", "--static", "use_double=false", "--input", "grid_shape=" + path("shape.npy")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "segments 4 (1 compiled, 1 eager, 2 breaks)\n")) << r.out;
  EXPECT_TRUE(has(r.out, "     reason   break: Reshape 'to_grid'\n")) << r.out;
  EXPECT_TRUE(has(r.out, "  3  break     position 27  Reshape 'to_grid'\n"
                         "     reason   needs the values of input 'shape' on the host\n"))
      << r.out;
  EXPECT_TRUE(has(r.out, "bit for bit")) << r.out;
}

// A model without breaks compiles whole; static values of several element types reach the outputs.
TEST_F(CliRun, CompileWholeModelAndStaticTypes) {
  std::string flags, halves, bytes;
  for (int i = 0; i < 64; ++i) {
    flags += std::string(i ? "," : "") + (i % 3 ? "true" : "FALSE");
    halves += (i ? "," : "") + std::to_string(i) + ".5";
    bytes += (i ? "," : "") + std::to_string(250 + i % 6);
  }
  CliResult r = run({fixture("cli_fixture.onnx"), "--compile", "--dim", "batch=2", "--static", "x:0=1,2,3,-4.5,5e-1,6",
                     "--static", "n= 7, -2147483648 ,+2147483647", "--static", "flag=" + flags, "--static",
                     "half=" + halves, "--static", "brain=" + halves, "--static", "bytes=" + bytes, "--output-dir",
                     path("o")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "segments 1 (1 compiled, 0 eager, 0 breaks)\n")) << r.out;
  EXPECT_TRUE(has(r.out, "     reason   end of graph\n")) << r.out;
  EXPECT_TRUE(has(r.out, "check    compiled outputs equal eager outputs bit for bit (9 outputs)\n")) << r.out;
  // x:0 is [batch, height]: batch from --dim, height from the 6 values.
  EXPECT_TRUE(has(r.out, "  x:0                  float32[2,3]           static [1, 2, 3, -4.5, 0.5, 6]; height=3 (from the values)\n"))
      << r.out;
  EXPECT_TRUE(all_close(load(path("o") + "/y_out_0.npy"), std::vector<double>{2, 4, 6, -9, 1, 12}, 0, 0));
  // n + 1 wraps at the int32 maximum.
  Array n1 = load(path("o") + "/n_plus_one.npy");
  EXPECT_EQ(n1.dtype(), int32);
  EXPECT_EQ(n1.to_vector<int64_t>(), (std::vector<int64_t>{8, -2147483647, -2147483648LL}));
  Array flag = load(path("o") + "/flag_out.npy");
  EXPECT_EQ(flag.dtype(), bool_);
  auto f = flag.to_vector<bool>();
  for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(f[i], i % 3 != 0) << i;
  for (const std::string name : {"half_out", "brain_out"}) {
    auto h = as_doubles(load(path("o") + "/" + name + ".npy"));
    ASSERT_EQ(h.size(), 64u);
    // i + 0.5 is exact in float16 up to 1024; bfloat16 (8 significant bits) rounds to nearest even.
    for (size_t i = 0; i < h.size(); ++i) {
      double expected = static_cast<double>(i) + 0.5;
      if (name == "brain_out") expected = as_doubles(astype(Array(static_cast<float>(expected)), bfloat16))[0];
      EXPECT_EQ(h[i], expected) << name << " " << i;
    }
  }
  auto b = load(path("o") + "/bytes_out.npy").to_vector<int64_t>();
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], 250 + static_cast<int64_t>(i % 6));
}

// String tensors take the values as strings; storage types come from .npy files.
TEST_F(CliRun, CompileStaticStringsAndStorageTypes) {
  save(path("f8.npy"), Array({uint8_t{0x38}, uint8_t{0x40}, uint8_t{0x44}, uint8_t{0xb8}}));
  CliResult r = run({fixture("static_fixture.onnx"), "--compile", "--static", "label=hello, world", "--static",
                     "f8=" + path("f8.npy")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "  label                string[2]              static [\"hello\", \"world\"]\n")) << r.out;
  EXPECT_TRUE(has(r.out, "  label_out            string[2]              [\"hello\", \"world\"]\n")) << r.out;
  EXPECT_TRUE(has(r.out, "  f8_out               float8e4m3fn[4]        [56, 64, 68, 184]\n")) << r.out;
  EXPECT_TRUE(has(r.out, "bit for bit (3 outputs)")) << r.out;
  std::string sf = fixture("static_fixture.onnx");
  expect_error({sf, "--compile", "--static", "label=a,b", "--static", "f8=1,2,3,4"}, 1,
               "smelt run: --static f8: input 'f8' has element type float8e4m3fn: values on the command line are "
               "not read for it; give it as NAME=FILE.npy");
  expect_error({sf, "--compile", "--static", "label=a,b", "--static", "maybe=1"}, 1,
               "smelt run: --static maybe: input 'maybe' is optional(seq(tensor(float))): values on the command line "
               "are read for tensors of a declared element type only");
  expect_error({sf, "--compile", "--static", "label=a,b,c"}, 1,
               "smelt run: --static label: input 'label' is tensor(string)[2], which holds 2 values; got 3");
}

TEST_F(CliRun, CompileJsonReport) {
  CliResult r = run({breaks(), "--compile", "--static", "use_double=true", "--repeat", "2", "--json", path("r.json")});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string json = read_text(path("r.json"));
  // The eager figures stay where they were; the compiled ones are under "compile".
  EXPECT_TRUE(has(json, "\"median_ms\": ")) << json;
  for (const std::string key :
       {"\"compile\": {\n    \"static_inputs\": [\"use_double\"],\n    \"segments\": [\n      {\"start\": 0, \"stop\": 1, "
        "\"start_node\": \"Greater 'above'\", \"stop_node\": \"Greater 'above'\", \"kind\": \"eager\", \"compiled\": "
        "false, \"reason\": \"break: NonZero 'positions' (fewer than",
        "{\"start\": 1, \"stop\": 2, \"start_node\": \"NonZero 'positions'\", \"stop_node\": \"NonZero 'positions'\", "
        "\"kind\": \"break\", \"compiled\": false, \"reason\": \"NonZero 'positions': output shape depends on the "
        "values of its input\", \"host_values\": [], \"fused\": []}",
        "{\"start\": 2, \"stop\": 28, \"start_node\": \"Reshape 'flat_positions'\", \"stop_node\": \"Reshape "
        "'to_grid'\", \"kind\": \"compiled\", \"compiled\": true, \"reason\": \"end of graph\", \"host_values\": [], "
        "\"fused\": [{\"nodes\": [\"Mul 'chain_0_mul'\", \"Add 'chain_1_add'\", ",
        "\"host_folded\": [", "\"compile_ms\": ", "\"trace_ms\": ", "\"build_ms\": ", "\"traces\": 2,",
        "\"first_call_ms\": ", "\"runs_ms\": [", "\"pays_off_after\": ", "\"bit_equal\": true\n  }\n}\n"})
    EXPECT_TRUE(has(json, key)) << key << "\n" << json;
  // Two timed compiled calls.
  auto at = json.find("\"runs_ms\": [", json.find("\"compile\""));
  std::string runs = json.substr(at, json.find(']', at) - at);
  EXPECT_EQ(std::count(runs.begin(), runs.end(), ','), 1) << runs;
}

TEST_F(CliRun, StaticUsageErrors) {
  CliResult help = run({"--help"});
  EXPECT_TRUE(has(help.out, "[--compile [--static NAME=FILE.npy | NAME=V0,V1,...]... [--eager-below N]]")) << help.out;
  EXPECT_TRUE(has(help.out, "  --static NAME=V0,V1,...   ")) << help.out;
  std::string m = breaks();
  expect_error({m, "--static", "use_double=true"}, 2, "smelt run: --static needs --compile");
  expect_error({m, "--eager-below", "3"}, 2, "smelt run: --eager-below needs --compile");
  expect_error({m, "--compile", "--eager-below", "-1"}, 2, "--eager-below needs a non-negative integer, got '-1'");
  expect_error({m, "--compile", "--static", "use_double"}, 2,
               "--static 'use_double' is not NAME=FILE.npy or NAME=V0,V1,...");
  expect_error({m, "--compile", "--static", "use_double="}, 2, "--static 'use_double=' is not NAME=FILE.npy");
  expect_error({m, "--compile", "--static", "=1"}, 2, "--static '=1' is not NAME=FILE.npy");
  expect_error({m, "--compile", "--static", "use_double=1", "--static", "use_double=0"}, 2,
               "input 'use_double' given twice with --static");
  expect_error({m, "--compile", "--input", "scores=random", "--static", "scores=1,2"}, 2,
               "smelt run: input 'scores' given with both --input and --static");
  expect_error({m, "--compile", "--static", "scores=1,2", "--input", "scores=random"}, 2,
               "input 'scores' given with both --input and --static");
}

TEST_F(CliRun, StaticValueErrors) {
  std::string m = breaks();
  expect_error({m, "--compile", "--static", "flag=1"}, 1,
               "smelt run: --static flag: unknown input 'flag' (the model's inputs are: scores, threshold, use_double)");
  // The count must match the declared shape; one symbolic dim is inferred, with --dim it is fixed.
  expect_error({m, "--compile", "--static", "grid_shape=4,8,1"}, 1,
               "smelt run: --static grid_shape: input 'grid_shape' is tensor(int64)[2], which holds 2 values; got 3");
  expect_error({m, "--compile", "--static", "use_double=true,false"}, 1,
               "--static use_double: input 'use_double' is tensor(bool)[], which holds 1 value; got 2");
  expect_error({m, "--compile", "--dim", "length=4", "--static", "scores=1,2,3"}, 1,
               "--static scores: input 'scores' is tensor(float)[length] ([4] here), which holds 4 values; got 3");
  std::string cf = fixture("cli_fixture.onnx");
  expect_error({cf, "--compile", "--static", "x:0=1,2,3"}, 1,
               "--static x:0: input 'x:0' is tensor(float)[batch,height]: 2 dims have no size (batch, height): pass "
               "--dim SYMBOL=N for all but one, or give the values as a .npy file");
  expect_error({cf, "--compile", "--dim", "batch=2", "--static", "x:0=1,2,3"}, 1,
               "--static x:0: input 'x:0' is tensor(float)[batch,height]: 3 values do not fill it: the count must be a "
               "multiple of 2 (the size of its other dims)");
  // A size inferred from the values binds the symbol for the next input; one from a file, for both.
  save(path("x.npy"), random_array({2, 5}, float32));
  expect_error({cf, "--compile", "--input", "x:0=" + path("x.npy"), "--static", "attention_mask=1,1,1,1,1,1",
                "--static", "token_ids=1,2,3,4,5,6,7,8"},
               1, "--static token_ids: input 'token_ids' is tensor(int64)[batch,seq_len] ([2,3] here), which holds 6 "
                  "values; got 8");
  // Values must parse in the declared element type and fit it.
  expect_error({m, "--compile", "--static", "grid_shape=4,x"}, 1,
               "smelt run: --static grid_shape: 'x' (value 2 of 2) is not an int64 value");
  expect_error({m, "--compile", "--static", "grid_shape=4,8.0"}, 1, "'8.0' (value 2 of 2) is not an int64 value");
  expect_error({m, "--compile", "--static", "grid_shape=4,"}, 1, "'' (value 2 of 2) is not an int64 value");
  expect_error({m, "--compile", "--static", "grid_shape=99999999999999999999,1"}, 1,
               "'99999999999999999999' (value 1 of 2) is not an int64 value (int64 holds -9223372036854775808 to "
               "9223372036854775807)");
  expect_error({m, "--compile", "--static", "use_double=yes"}, 1,
               "--static use_double: 'yes' (value 1 of 1) is not a bool value (true, false, 1 or 0)");
  expect_error({m, "--compile", "--static", "threshold=0.5x"}, 1,
               "--static threshold: '0.5x' (value 1 of 1) is not a float32 value");
  expect_error({m, "--compile", "--static", "threshold=1e39"}, 1,
               "--static threshold: '1e39' (value 1 of 1) is not a float32 value (out of its range)");
  expect_error({cf, "--compile", "--dim", "height=1", "--static", "n=1,2147483648,3"}, 1,
               "--static n: '2147483648' (value 2 of 3) is not an int32 value (int32 holds -2147483648 to 2147483647)");
  std::string bytes;
  for (int i = 0; i < 63; ++i) bytes += "1,";
  expect_error({cf, "--compile", "--dim", "height=1", "--static", "bytes=" + bytes + "256"}, 1,
               "--static bytes: '256' (value 64 of 64) is not a uint8 value (uint8 holds 0 to 255)");
  expect_error({cf, "--compile", "--dim", "height=1", "--static", "bytes=" + bytes + "-1"}, 1,
               "'-1' (value 64 of 64) is not a uint8 value (uint8 holds 0 to 255)");
  std::string halves;
  for (int i = 0; i < 63; ++i) halves += "0.5,";
  expect_error({cf, "--compile", "--dim", "height=1", "--static", "half=" + halves + "70000"}, 1,
               "--static half: '70000' (value 64 of 64) is not a float16 value (out of its range)");
  // A .npy file is checked as --input checks it.
  save(path("shape32.npy"), Array({int32_t{4}, int32_t{8}}));
  expect_error({m, "--compile", "--static", "grid_shape=" + path("shape32.npy")}, 1,
               "input 'grid_shape' from '" + path("shape32.npy") +
                   "': expected tensor(int64)[2], got int32[2] (the element type differs)");
}

#else

TEST(CliRun, NeedsOnnx) { GTEST_SKIP() << "smelt was built without ONNX support"; }

#endif

}  // namespace
}  // namespace smelt::test
