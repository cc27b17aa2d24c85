// The smelt CLI's one convention (help, --opt=value, exit codes, -o, suggestions), its messages, fitting random indices and progress.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tools/cli_test_utils.h"
#ifdef SMELT_ONNX
#include "onnx/onnx_test_helpers.h"
#include "smelt/io.h"
#include "smelt/smelt.h"
#endif

namespace smelt::test {
namespace {

namespace fs = std::filesystem;

#ifdef SMELT_ONNX

class CliConvention : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("smelt_cli_conv_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliResult run(const std::vector<std::string>& args) { return run_cli(args, dir_); }

  /// Expects exit status `status`, nothing on stdout, and `message` on stderr.
  void expect_error(const std::vector<std::string>& args, int status, const std::string& message) {
    CliResult r = run(args);
    std::string line;
    for (const auto& a : args) line += " " + a;
    EXPECT_EQ(r.status, status) << "smelt" << line << "\n" << r.err;
    EXPECT_EQ(r.out, "") << "smelt" << line;
    EXPECT_TRUE(has(r.err, message)) << "smelt" << line << "\nstderr: " << r.err << "\nexpected: " << message;
  }

  /// Runs `smelt ARGS...` with stderr on a pseudo-terminal (isatty(2) is true there) and stdout in
  /// a file; returns what the terminal received.
  CliResult run_on_terminal(const std::vector<std::string>& args) {
    CliResult r;
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
      ADD_FAILURE() << "no pseudo-terminal";
      return r;
    }
    const std::string slave_name = ptsname(master);
    std::string cmd = "SMELT_NUM_THREADS=1 " + quote(cli_path());
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " >" + quote((dir_ / "stdout").string()) + " 2>" + quote(slave_name);
    pid_t pid = fork();
    if (pid == 0) {
      close(master);
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Read until the child exits and the terminal has nothing more (EIO once no one holds the slave).
    char buf[4096];
    for (;;) {
      pollfd p{master, POLLIN, 0};
      int ready = poll(&p, 1, 200);
      if (ready > 0) {
        ssize_t n = read(master, buf, sizeof buf);
        if (n <= 0) break;
        r.err.append(buf, static_cast<size_t>(n));
        continue;
      }
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        pid = -1;
        break;
      }
    }
    if (pid > 0) {
      int status = 0;
      waitpid(pid, &status, 0);
      r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    close(master);
    r.out = read_text(dir_ / "stdout");
    return r;
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

/// A folder of one backend-format case (y = x + x) named `name`.
void write_case(const fs::path& root, const std::string& name) {
  fs::create_directories(root / name / "test_data_set_0");
  pb::GraphProto g;
  g.set_name("g");
  *g.add_node() = make_node("Add", {"x", "x"}, {"y"}, "add");
  *g.add_input() = tensor_info("x", pb::TensorProto::FLOAT, {2});
  *g.add_output() = tensor_info("y", pb::TensorProto::FLOAT, {2});
  std::ofstream(root / name / "model.onnx", std::ios::binary) << serialize(make_model(g));
  std::ofstream(root / name / "test_data_set_0" / "input_0.pb", std::ios::binary)
      << serialize(raw_tensor<float>(pb::TensorProto::FLOAT, {2}, {1.0f, 2.0f}, "x"));
  std::ofstream(root / name / "test_data_set_0" / "output_0.pb", std::ios::binary)
      << serialize(raw_tensor<float>(pb::TensorProto::FLOAT, {2}, {2.0f, 4.0f}, "y"));
}

const std::vector<std::string> kCommands = {"demo", "run", "check", "info", "view", "version"};

TEST_F(CliConvention, EveryCommandHasHelp) {
  for (const auto& c : kCommands) {
    CliResult longer = run({c, "--help"});
    EXPECT_EQ(longer.status, 0) << c << ": " << longer.err;
    EXPECT_EQ(longer.out.rfind("usage: smelt " + c, 0), 0u) << c << ": " << longer.out;
    EXPECT_EQ(longer.err, "") << c;
    CliResult shorter = run({c, "-h"});
    EXPECT_EQ(shorter.status, 0) << c;
    EXPECT_EQ(shorter.out, longer.out) << c;
    CliResult via_help = run({"help", c});
    EXPECT_EQ(via_help.status, 0) << c;
    EXPECT_EQ(via_help.out, longer.out) << c;
  }
  // Help wins over the rest of the line, even a wrong option.
  CliResult r = run({"run", "--repat", "2", "--help"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "usage: smelt run MODEL")) << r.out;
}

TEST_F(CliConvention, EveryOptionIsInItsHelp) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> options = {
      {"run",
       {"--input", "-i,", "--dim", "--output-dir", "-O,", "--json", "--repeat", "--threads", "--compile", "--no-fuse",
        "--timeout", "--device", "--static", "--eager-below", "--seed", "-h, --help"}},
      {"check", {"--skip-list", "--filter", "--device", "--compile", "--timeout", "-v, --verbose", "--no-fork",
                 "--run-skipped", "-h, --help"}},
      {"view", {"-o, --output", "--title", "--compile", "-i, --input", "--dim", "--static", "--eager-below", "--seed",
                "-h, --help"}},
      {"demo", {"--threads", "-h, --help"}},
      {"info", {"-h, --help"}},
  };
  for (const auto& [command, names] : options) {
    CliResult r = run({"help", command});
    for (const auto& name : names) EXPECT_TRUE(has(r.out, name)) << command << " help lacks " << name << ":\n" << r.out;
  }
}

TEST_F(CliConvention, GeneralHelpDocumentsTheConvention) {
  CliResult r = run({"help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(has(r.out, "exit status: 0 success; 1 the command failed")) << r.out;
  EXPECT_TRUE(has(r.out, "2 a usage error")) << r.out;
  EXPECT_TRUE(has(r.out, "--opt value or --opt=value")) << r.out;
  EXPECT_TRUE(has(r.out, "smelt help CMD")) << r.out;
  expect_error({"help", "frobnicate"}, 2, "smelt help: unknown command 'frobnicate'");
  expect_error({"rnu"}, 2, "smelt: unknown command 'rnu'; did you mean 'run'?");
}

TEST_F(CliConvention, OptionValueWithEquals) {
  auto probs = [](const std::string& out) {
    const size_t at = out.find("probs");
    return at == std::string::npos ? out : out.substr(at, out.find('\n', at) - at);
  };
  CliResult spaced = run({"run", model("tiny_cnn"), "--seed", "7"});
  CliResult joined = run({"run", model("tiny_cnn"), "--seed=7"});
  ASSERT_EQ(spaced.status, 0) << spaced.err;
  ASSERT_EQ(joined.status, 0) << joined.err;
  EXPECT_EQ(probs(joined.out), probs(spaced.out));
  EXPECT_NE(probs(run({"run", model("tiny_cnn"), "--seed=8"}).out), probs(spaced.out));
  CliResult view = run({"view", model("tiny_cnn"), "--output=" + path("v.html"), "--title=T"});
  EXPECT_EQ(view.status, 0) << view.err;
  EXPECT_TRUE(fs::exists(path("v.html")));
  write_case(path("suite"), "test_double_a");
  write_case(path("suite"), "test_double_b");
  CliResult check = run({"check", path("suite"), "--filter=_a", "--timeout=30"});
  EXPECT_EQ(check.status, 0) << check.err;
  EXPECT_EQ(check.out, "1 passed, 0 failed, 0 skipped\n");
  expect_error({"run", model("tiny_cnn"), "--compile=yes"}, 2, "--compile takes no value (got '--compile=yes')");
  expect_error({"run", model("tiny_cnn"), "--repeat="}, 2, "--repeat needs a positive integer, got ''");
}

TEST_F(CliConvention, UnknownOptionsAreNamedWithASuggestion) {
  expect_error({"run", model("tiny_cnn"), "--repat", "3"}, 2, "unknown option '--repat'; did you mean '--repeat'?");
  expect_error({"check", ".", "--filtr", "x"}, 2, "unknown option '--filtr'; did you mean '--filter'?");
  expect_error({"view", model("tiny_cnn"), "--titel", "x"}, 2, "unknown option '--titel'; did you mean '--title'?");
  expect_error({"demo", "--thread", "2"}, 2, "unknown option '--thread'; did you mean '--threads'?");
  expect_error({"run", model("tiny_cnn"), "--seed=1", "--outptu-dir=x"}, 2,
               "unknown option '--outptu-dir'; did you mean '--output-dir'?");
  // Nothing close: named without a guess.
  CliResult r = run({"info", model("tiny_cnn"), "--verbose"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.err, "smelt info: unknown option '--verbose'\nusage: smelt info MODEL.onnx")) << r.err;
}

TEST_F(CliConvention, UsageErrorsExitWithTwoFailuresWithOne) {
  expect_error({"info"}, 2, "smelt info: no model given");
  expect_error({"info", "a.onnx", "b.onnx"}, 2, "more than one model given ('a.onnx' and 'b.onnx')");
  expect_error({"demo", "extra"}, 2, "smelt demo: unexpected argument 'extra'");
  expect_error({"demo", "--threads", "0"}, 2, "--threads needs a positive integer, got '0'");
  expect_error({"check"}, 2, "no folder given");
  expect_error({"check", ".", "--timeout", "soon"}, 2, "--timeout needs a whole number of seconds from 1 to 86400");
  expect_error({"version", "x"}, 2, "unexpected argument 'x'");
  expect_error({"view"}, 2, "no model given");
  // Failures: the line was right, the work failed.
  expect_error({"info", path("missing.onnx")}, 1, "cannot open '" + path("missing.onnx") + "'");
  expect_error({"check", path("missing")}, 1, "cannot open '" + path("missing") + "': no such folder");
}

// -o is an output file wherever it exists (view); run writes a folder and says so.
TEST_F(CliConvention, DashOMeansOneOutputFile) {
  const std::string json = path("out.json");
  expect_error({"run", model("tiny_cnn"), "-o", json}, 2,
               "smelt run: -o/--output is not an option of smelt run (it names one output file, as in smelt view): "
               "write the outputs as .npy files into a folder with --output-dir/-O DIR, or the report as JSON with "
               "--json FILE");
  EXPECT_FALSE(fs::exists(json)) << "no folder (nor file) may be made";
  CliResult r = run({"run", model("tiny_cnn"), "-O", path("outs")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(path("outs") + "/probs.npy"));
  std::ofstream(path("afile")) << "x";
  expect_error({"run", model("tiny_cnn"), "--output-dir", path("afile")}, 1,
               "--output-dir '" + path("afile") + "' is a file, not a folder");
  r = run({"view", model("tiny_cnn"), "-o", path("g.html")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, path("g.html") + "\n");
  EXPECT_TRUE(fs::is_regular_file(path("g.html")));
}

TEST_F(CliConvention, AFolderGivenAsTheModel) {
  for (const std::string command : {"run", "info", "view"})
    expect_error({command, dir_.string()}, 1,
                 "smelt " + command + ": '" + dir_.string() + "' is a folder, not an .onnx file\n");
  fs::copy_file(model("tiny_cnn"), dir_ / "model.onnx");
  expect_error({"info", dir_.string()}, 1,
               "'" + dir_.string() + "' is a folder, not an .onnx file (did you mean '" + (dir_ / "model.onnx").string() +
                   "'?)");
}

TEST_F(CliConvention, AFileThatIsNotOnnx) {
  std::ofstream(path("notes.txt")) << "these are notes, not a model\n";
  for (const std::string command : {"run", "info", "view"})
    expect_error({command, path("notes.txt")}, 1,
                 "smelt " + command + ": '" + path("notes.txt") +
                     "' is not an ONNX model file (it does not start like a protobuf ModelProto; ");
  save(path("x.npy"), zeros({2}, float32));
  expect_error({"info", path("x.npy")}, 1, "'" + path("x.npy") + "' is not an ONNX model file");
  // A real model cut short starts like one: the loader's own words stay.
  std::ifstream src(model("tiny_cnn"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  std::ofstream(path("cut.onnx"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CliResult r = run({"info", path("cut.onnx")});
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(has(r.err, "is not an ONNX model file")) << r.err;
  EXPECT_TRUE(has(r.err, "cut.onnx")) << r.err;
}

TEST_F(CliConvention, CheckFindingNothingFails) {
  fs::create_directories(path("empty"));
  expect_error({"check", path("empty")}, 1,
               "smelt check: no test case in '" + path("empty") +
                   "' (a case is a folder with model.onnx and test_data_set_N/)");
  write_case(path("suite"), "test_double_a");
  write_case(path("suite"), "test_double_b");
  expect_error({"check", path("suite"), "--filter", "zzz"}, 1,
               "smelt check: no case name in '" + path("suite") + "' contains 'zzz' (--filter; 2 cases there)");
  CliResult r = run({"check", path("suite"), "--filter", "_b"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "1 passed, 0 failed, 0 skipped\n");
  expect_error({"check", model("tiny_cnn")}, 1, "is not a folder (check takes a folder of ONNX backend-test cases)");
}

// --compile also runs each case's compiled model and counts those bit-equal to the eager run.
TEST_F(CliConvention, CheckCompileComparesWithEager) {
  write_case(path("suite"), "test_double_a");
  write_case(path("suite"), "test_double_b");
  CliResult r = run({"check", path("suite"), "--compile", "--device", "cpu"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "2 passed, 0 failed, 0 skipped; 2 compiled bit-equal to eager\n");
  r = run({"check", path("suite"), "--compile", "--device", "cpu", "--no-fork"});
  EXPECT_EQ(r.out, "2 passed, 0 failed, 0 skipped; 2 compiled bit-equal to eager\n");
}

/// A case `y = op(x)` with the given input and expected output (raw little-endian values).
template <class T>
void write_unary_case(const fs::path& dir, const std::string& op, int elem_type, std::vector<int64_t> in_dims,
                      const std::vector<T>& x, std::vector<int64_t> out_dims, const std::vector<T>& y) {
  fs::create_directories(dir / "test_data_set_0");
  pb::GraphProto g;
  g.set_name("g");
  pb::NodeProto n = make_node(op, {"x"}, {"y"}, "n");
  if (op == "ReduceSum") add_int_attr(n, "keepdims", 0);
  *g.add_node() = n;
  *g.add_input() = tensor_info("x", elem_type, in_dims);
  *g.add_output() = tensor_info("y", elem_type, out_dims);
  std::ofstream(dir / "model.onnx", std::ios::binary) << serialize(make_model(g));
  std::ofstream(dir / "test_data_set_0" / "input_0.pb", std::ios::binary)
      << serialize(raw_tensor<T>(elem_type, in_dims, x, "x"));
  std::ofstream(dir / "test_data_set_0" / "output_0.pb", std::ios::binary)
      << serialize(raw_tensor<T>(elem_type, out_dims, y, "y"));
}

// The tolerance rule of docs/onnx.md: 1e-7 + rtol*|want| (rtol 1e-3; bfloat16 2^-7), plus
// K*u*max|want| for cases with a reducing operator (K: the largest input's elements, u = 2^-24).
TEST_F(CliConvention, CheckToleranceRule) {
  auto outcome = [&](const std::string& name) {
    CliResult r = run({"check", path(name), "--device", "cpu"});
    return r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1);
  };
  // float32 Identity: 1000 * (1 + 1e-3) - 1e-6 is inside, 1000 * (1 + 1.1e-3) is not.
  write_unary_case<float>(path("f32_in"), "Identity", pb::TensorProto::FLOAT, {1}, {1000.0f}, {1}, {1000.999f});
  write_unary_case<float>(path("f32_out"), "Identity", pb::TensorProto::FLOAT, {1}, {1000.0f}, {1}, {1001.1f});
  EXPECT_EQ(outcome("f32_in"), "1 passed, 0 failed, 0 skipped\n");
  EXPECT_EQ(outcome("f32_out"), "0 passed, 1 failed, 0 skipped\n");
  // bfloat16 (bits): 1.0 against 1.0078125 (one ulp, inside 2^-7) and 1.015625 (two ulps, outside).
  write_unary_case<uint16_t>(path("bf16_in"), "Identity", pb::TensorProto::BFLOAT16, {1}, {0x3f80}, {1}, {0x3f81});
  write_unary_case<uint16_t>(path("bf16_out"), "Identity", pb::TensorProto::BFLOAT16, {1}, {0x3f80}, {1}, {0x3f82});
  EXPECT_EQ(outcome("bf16_in"), "1 passed, 0 failed, 0 skipped\n");
  EXPECT_EQ(outcome("bf16_out"), "0 passed, 1 failed, 0 skipped\n");
  // ReduceSum of 1000 ones: the bound is 1e-7 + 1e-3 * 1000 + 1000 * 2^-24 * 1000 = 1.0596...
  const std::vector<float> ones(1000, 1.0f);
  write_unary_case<float>(path("sum_in"), "ReduceSum", pb::TensorProto::FLOAT, {1000}, ones, {}, {1001.05f});
  write_unary_case<float>(path("sum_out"), "ReduceSum", pb::TensorProto::FLOAT, {1000}, ones, {}, {1001.07f});
  EXPECT_EQ(outcome("sum_in"), "1 passed, 0 failed, 0 skipped\n");
  EXPECT_EQ(outcome("sum_out"), "0 passed, 1 failed, 0 skipped\n");
}

// A skip-list line with a device tag skips the case on that device type only: an expected
// failure there (`unsupported on cuda`), run and counted everywhere else.
TEST_F(CliConvention, CheckSkipListDeviceTags) {
  write_case(path("suite"), "test_double_a");
  write_case(path("suite"), "test_double_b");
  std::ofstream(path("skips.txt")) << "test_double_a [cuda]  # unsupported on cuda: no GPU kernel\n"
                                   << "test_double_b [cpu]   # a CPU-only expected failure\n";
  CliResult r = run({"check", path("suite"), "--skip-list", path("skips.txt"), "--device", "cpu", "-v"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "PASS test_double_a\n"
            "SKIP test_double_b (on this device): a CPU-only expected failure\n"
            "1 passed, 0 failed, 1 skipped (1 of them on this device only)\n");
  r = run({"check", path("suite"), "--skip-list", path("skips.txt"), "--device", "cpu", "--run-skipped"});
  EXPECT_TRUE(has(r.out, "SKIPPED BUT PASSES test_double_b on this device: delete its device line from the skip list\n"))
      << r.out;
  std::ofstream(path("bad.txt")) << "  test_double_a [tpu]  # no such device\n";
  expect_error({"check", path("suite"), "--skip-list", path("bad.txt")}, 1,
               path("bad.txt") + ":1: skipped case 'test_double_a' has the device tag '[tpu]'; accepted tags are [cpu] "
                                 "and [cuda]");
}

// Integer inputs that index a table are drawn inside it, whatever their name says.
TEST_F(CliConvention, RandomIndicesFitTheGatheredAxis) {
  pb::GraphProto g;
  g.set_name("embeddings");
  // token_type_ids -> Cast -> Gather(type_table[2,4]) : BERT's segment embedding.
  *g.add_input() = tensor_info("token_type_ids", pb::TensorProto::INT64, {1, 64});
  *g.add_node() = make_node("Cast", {"token_type_ids"}, {"types32"}, "cast");
  add_int_attr(*g.mutable_node(0), "to", pb::TensorProto::INT32);
  std::vector<float> table(8);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {2, 4}, table, "type_table");
  *g.add_node() = make_node("Gather", {"type_table", "types32"}, {"type_embedding"}, "type_gather");
  // pos -> Identity -> Gather along the last axis of a [3,5] table: indices in [0, 5).
  *g.add_input() = tensor_info("pos", pb::TensorProto::INT64, {64});
  *g.add_node() = make_node("Identity", {"pos"}, {"pos2"}, "ident");
  *g.add_initializer() = raw_tensor<float>(pb::TensorProto::FLOAT, {3, 5}, std::vector<float>(15, 1.0f), "wide");
  pb::NodeProto last = make_node("Gather", {"wide", "pos2"}, {"columns"}, "column_gather");
  add_int_attr(last, "axis", -1);
  *g.add_node() = last;
  // An integer that indexes nothing keeps the name rules.
  *g.add_input() = tensor_info("count", pb::TensorProto::INT64, {64});
  *g.add_node() = make_node("Identity", {"count"}, {"count_out"}, "count_id");
  *g.add_output() = tensor_info("type_embedding", pb::TensorProto::FLOAT, {1, 64, 4});
  *g.add_output() = tensor_info("columns", pb::TensorProto::FLOAT, {3, 64});
  *g.add_output() = tensor_info("count_out", pb::TensorProto::INT64, {64});
  std::ofstream(path("bert_like.onnx"), std::ios::binary) << serialize(make_model(g));

  CliResult r = run({"run", path("bert_like.onnx"), "-O", path("o")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "random integers [0, 2) (indices of Gather 'type_gather' dim 0 of 'type_table')")) << r.out;
  EXPECT_TRUE(has(r.out, "random integers [0, 5) (indices of Gather 'column_gather' dim 1 of 'wide')")) << r.out;
  EXPECT_TRUE(has(r.out, "int64[64]              random integers [0, 10)\n")) << r.out;
  // The rows gathered are rows of the table: each embedding row is [0..3] or [4..7], and 64 draws show both.
  std::vector<float> rows = load(path("o") + "/type_embedding.npy").to_vector<float>();
  bool first = false, second = false;
  for (size_t i = 0; i < rows.size(); i += 4) {
    first |= rows[i] == 0.0f;
    second |= rows[i] == 4.0f;
    EXPECT_TRUE(rows[i] == 0.0f || rows[i] == 4.0f) << i;
  }
  EXPECT_TRUE(first && second);
  CliResult help = run({"run", "--help"});
  EXPECT_TRUE(has(help.out, "integers that are the indices of\na Gather or GatherElements")) << help.out;
}

TEST_F(CliConvention, ProgressOnATerminalOnly) {
  CliResult piped = run({"run", model("tiny_cnn"), "--compile"});
  ASSERT_EQ(piped.status, 0) << piped.err;
  EXPECT_EQ(piped.err, "");  // not a terminal: nothing extra
  CliResult tty = run_on_terminal({"run", model("tiny_cnn"), "--compile"});
  EXPECT_EQ(tty.status, 0) << tty.err;
  EXPECT_TRUE(has(tty.err, "smelt run: compiling")) << tty.err;
  EXPECT_TRUE(has(tty.err, "\r\033[K")) << "the line is rewritten in place and erased";
  EXPECT_TRUE(has(tty.out, "check    compiled outputs equal eager outputs bit for bit")) << tty.out;

  CliResult view = run_on_terminal({"view", model("tiny_cnn"), "--compile", "-o", path("v.html")});
  EXPECT_EQ(view.status, 0) << view.err;
  EXPECT_TRUE(has(view.err, "smelt view: compiling")) << view.err;

  write_case(path("suite"), "test_double_a");
  write_case(path("suite"), "test_double_b");
  CliResult check = run_on_terminal({"check", path("suite")});
  EXPECT_EQ(check.status, 0) << check.err;
  EXPECT_TRUE(has(check.err, "smelt check: 0/2 cases, 0 failed: test_double_a")) << check.err;
  EXPECT_TRUE(has(check.err, "smelt check: 1/2 cases, 0 failed: test_double_b")) << check.err;
  EXPECT_EQ(check.out, "2 passed, 0 failed, 0 skipped\n");
  CliResult check_piped = run({"check", path("suite")});
  EXPECT_EQ(check_piped.err, "");
}

#else
TEST(CliConvention, NeedsOnnx) { GTEST_SKIP() << "smelt was built without ONNX support"; }
#endif

}  // namespace
}  // namespace smelt::test
