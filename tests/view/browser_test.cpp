// The graph view in a real headless Chromium: its self-test (no errors, groups open on click, search), timings, a screenshot.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "smelt/onnx.h"
#include "smelt/view.h"
#include "tests/test_utils.h"
#include "tests/view/scoped_model.h"

namespace smelt::test {
namespace {

namespace fs = std::filesystem;

fs::path repo_root() { return fs::path(__FILE__).parent_path().parent_path().parent_path(); }

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// $SMELT_CHROMIUM, else the first of Debian's chromium names on the PATH; "" when none.
std::string find_chromium() {
  if (const char* env = std::getenv("SMELT_CHROMIUM")) return env;
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string cmd = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return name;
  }
  return "";
}

/// The text of <pre id="ID" ...>...</pre> in a dumped DOM, entities decoded; "" when absent.
std::string pre_text(const std::string& dom, const std::string& id) {
  const size_t at = dom.find("<pre id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t begin = dom.find('>', at) + 1;
  const size_t end = dom.find("</pre>", begin);
  std::string s = dom.substr(begin, end - begin), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    const std::string ent = s.substr(i, semi - i + 1);
    out += ent == "&lt;" ? "<" : ent == "&gt;" ? ">" : ent == "&amp;" ? "&" : ent == "&quot;" ? "\"" : ent;
    i = semi;
  }
  return out;
}

class ViewInBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = find_chromium();
    if (chromium_.empty())
      GTEST_SKIP() << "Chromium is not installed (Debian: apt-get install chromium, or set SMELT_CHROMIUM): the view's "
                      "browser tests need a headless browser";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("smelt_view_browser_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  /// Runs headless Chromium on `page` with `query` and `flags`; returns its stdout.
  std::string chromium(const fs::path& page, const std::string& query, const std::string& flags) {
    const std::string cmd = "timeout 180 " + quote(chromium_) +
                            " --headless=new --disable-gpu --no-sandbox --no-first-run --disable-extensions"
                            " --user-data-dir=" +
                            quote((dir_ / "profile").string()) + " " + flags + " " +
                            quote("file://" + page.string() + query) + " >" + quote((dir_ / "out").string()) + " 2>" +
                            quote((dir_ / "err").string());
    const int raw = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << cmd << "\n" << read_text(dir_ / "err");
    return read_text(dir_ / "out");
  }

  /// Loads `html` with ?selftest and expects every check to pass; prints its report and timings.
  void expect_selftest_passes(const std::string& html, const std::string& what) {
    const fs::path page = dir_ / "page.html";
    std::ofstream(page, std::ios::binary) << html;
    const std::string dom = chromium(page, "?selftest", "--window-size=1400,900 --dump-dom");
    const std::string result = pre_text(dom, "selftest"), errors = pre_text(dom, "errors");
    EXPECT_EQ(errors, "") << what;
    EXPECT_EQ(result.rfind("SELFTEST PASS", 0), 0u) << what << "\n" << result << "\n" << read_text(dir_ / "err");
    EXPECT_EQ(result.find("FAIL "), std::string::npos) << result;
    // Uncaught errors also reach Chromium's log.
    EXPECT_EQ(read_text(dir_ / "err").find("Uncaught"), std::string::npos) << read_text(dir_ / "err");
    std::istringstream lines(result);
    for (std::string line; std::getline(lines, line);)
      std::cout << (line.rfind("TIME", 0) == 0 ? "[ timing   ] " : "[ page     ] ") << what << ": " << line << "\n";
  }

  std::string chromium_;
  fs::path dir_;
};

TEST_F(ViewInBrowser, TenThousandNodeScopedModelWithOverlay) {
  onnx::Model m = scoped_transformer(105);
  ASSERT_GE(m.graph->nodes.size(), 10000u);
  const onnx::Overlay ov = scoped_overlay(m);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string html = view::graph_html(m, &ov, "scoped transformer");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ timing   ] graph_html: " << m.graph->nodes.size() << " nodes, " << ov.segments.size()
            << " segments, " << html.size() / 1024 << " KiB in " << ms << " ms\n";
  expect_selftest_passes(html, std::to_string(m.graph->nodes.size()) + " scoped nodes");
}

TEST_F(ViewInBrowser, TenThousandNodesWithoutScopes) {
  GraphBuilder b;
  std::string prev = b.input("x", onnx::ElemType::Float, 1);
  for (int i = 0; i < 3334; ++i) prev = b.node("Add", {b.node("Relu", {prev}), b.node("Neg", {prev})});
  b.output(prev);
  onnx::Model m = make_model(b.graph());
  expect_selftest_passes(view::graph_html(m), std::to_string(m.graph->nodes.size()) + " unscoped nodes");
}

TEST_F(ViewInBrowser, TinyCnnWithItsCompiledOverlay) {
  onnx::Model m = onnx::load((repo_root() / "models" / "tiny_cnn.onnx").string());
  const onnx::Overlay ov = onnx::overlay(m, {onnx::Value::tensor(random_array({1, 3, 32, 32}, float32, -1.0, 1.0, 7))});
  expect_selftest_passes(view::graph_html(m, &ov), "tiny_cnn");
}

/// The state docs/images/view.png shows ($SMELT_VIEW_QUERY replaces it).
constexpr const char* kScreenshotQuery = "?find=/model/layers.3/self_attn/mask/NonZero&zoom=0.6";

TEST_F(ViewInBrowser, ScreenshotForTheDocs) {
  // $SMELT_VIEW_SCREENSHOT names where to keep it (docs/images/view.png is one).
  const char* env = std::getenv("SMELT_VIEW_SCREENSHOT");
  const fs::path shot = env ? fs::absolute(env) : dir_ / "view.png";
  onnx::Model m = scoped_transformer(12, 4);
  const onnx::Overlay ov = scoped_overlay(m);
  // With $SMELT_VIEW_SCREENSHOT the page stays next to the screenshot, to be opened by hand.
  const fs::path page = env ? fs::path(shot.string() + ".html") : dir_ / "page.html";
  std::ofstream(page, std::ios::binary) << view::graph_html(m, &ov, "scoped transformer (12 layers)");
  fs::remove(shot);
  chromium(page, std::getenv("SMELT_VIEW_QUERY") ? std::getenv("SMELT_VIEW_QUERY") : kScreenshotQuery,
           "--window-size=1280,800 --hide-scrollbars --screenshot=" + quote(shot.string()));
  const std::string png = read_text(shot);
  ASSERT_GT(png.size(), 1000u) << read_text(dir_ / "err");
  EXPECT_EQ(png.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace smelt::test
