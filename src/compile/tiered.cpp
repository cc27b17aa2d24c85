// Tiered execution: the interpreter tier while kernels build, and the switch to the fused tier.
#include "src/compile/tiered.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "smelt/errors.h"
#include "smelt/telemetry.h"
#include "src/codegen/fused_program.h"
#include "src/codegen/kernel_builder.h"
#include "src/compile/fuse.h"
#include "src/compile/kernel_prebuild.h"

namespace smelt::compiler {

const char* tier_name(Tier tier) {
  switch (tier) {
    case Tier::Interpreter: return "interpreter";
    case Tier::Fused: return "fused";
  }
  return "?";
}

int threads_beside_compilers() {
  const size_t busy = codegen::background_compilers_running();
  if (busy == 0) return 0;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores - static_cast<int>(busy));
}

bool tiered_enabled(bool option) {
  // Read per trace (a trace costs far more), so that a test can switch it for a scope.
  const char* v = std::getenv("SMELT_TIERED");
  if (!v || !*v) return option;
  return std::string(v) != "0";
}

TieredProgram::TieredProgram(Tape tape, PassOptions options, bool tiered, Plan plan)
    : function_(options.function), plan_(std::move(plan)), start_(std::chrono::steady_clock::now()) {
  std::vector<codegen::FusedProgram> unbuilt;
  if (tiered) {
    options.unbuilt = &unbuilt;
    options.unfused = &unfused_;
  }
  run_passes(tape, options);
  auto program = std::make_shared<Program>();
  program->tape = std::move(tape);
  program->tier = unbuilt.empty() ? Tier::Fused : Tier::Interpreter;
  prebuild_kernels(program->tape);
  plan_(*program);
  current_.store(std::move(program));
  if (unbuilt.empty()) {
    unfused_ = Tape{};
    return;
  }
  const size_t kernels = unbuilt.size();
  batch_ = codegen::build_cpu_kernels_in_background(std::move(unbuilt));
  if (telemetry::enabled())
    telemetry::emit({"compile.tier.interpreter", 0.0, {{"function", function_}, {"kernels", std::to_string(kernels)}}});
}

// Out of line: KernelBatch is complete here.
TieredProgram::~TieredProgram() = default;

size_t TieredProgram::pending_kernels() const {
  return batch_ && current()->tier == Tier::Interpreter ? batch_->size() : 0;
}

std::shared_ptr<const Program> TieredProgram::acquire() {
  std::shared_ptr<const Program> p = current_.load();
  if (p->tier == Tier::Fused || !batch_->done()) return p;
  std::unique_lock lock(switch_mutex_, std::try_to_lock);
  if (!lock.owns_lock() || switch_failed_) return p;  // another call is switching: no waiting
  if (current_.load()->tier == Tier::Interpreter) switch_to_fused();
  return current_.load();
}

void TieredProgram::switch_to_fused() {
  const std::vector<std::string> errors = batch_->errors();
  auto program = std::make_shared<Program>();
  program->tape = unfused_;
  std::vector<codegen::FusedProgram> still_unbuilt;  // the kernels that failed: they stay unfused
  try {
    fuse_elementwise(program->tape, function_, &still_unbuilt);
    verify_tape(program->tape, "fuse");
    prebuild_kernels(program->tape);
    plan_(*program);
  } catch (const Error& e) {
    switch_failed_ = true;
    if (telemetry::enabled())
      telemetry::emit({"compile.fallback", 0.0, {{"function", function_}, {"op", "fuse"}, {"reason", e.what()}}});
    return;
  }
  program->tier = Tier::Fused;
  const size_t kernels = batch_->size();
  const double build_ms = batch_->build_ms();
  const double since_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  current_.store(std::move(program));
  unfused_ = Tape{};
  if (!telemetry::enabled()) return;
  // A kernel that failed to build leaves its group unfused for good, as the synchronous pass does.
  for (const auto& why : errors)
    telemetry::emit({"compile.fallback", 0.0, {{"function", function_}, {"op", "fuse"}, {"reason", why}}});
  telemetry::emit({"compile.tier.switch",
                   build_ms,
                   {{"function", function_},
                    {"kernels", std::to_string(kernels)},
                    {"failed", std::to_string(still_unbuilt.size())},
                    {"since_trace_ms", std::to_string(since_ms)}}});
}

}  // namespace smelt::compiler
