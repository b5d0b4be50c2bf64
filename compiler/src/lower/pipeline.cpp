#include "lower/pipeline.h"

#include <chrono>

#include "lower/log.h"
#include "ops/ops.h"
#include "schedules/registry.h"
#include "tbex/errors.h"

namespace tbex::lower {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/** Picks the schedule: the named one, or the first applicable one; logs the reasons. */
template <class S>
const S* choose(const std::vector<const S*>& reg, const Problem& p, const std::string& want) {
  const bool log_dispatch = log::enabled("dispatch");
  if (log_dispatch) log::print("dispatch", p.canonical());
  const S* chosen = nullptr;
  for (const S* s : reg) {
    std::string why = s->why_not(p);
    const bool comparison = want == "auto" && s->by_name_only();
    bool named = (want == "auto" && !comparison) || want == s->name();
    if (log_dispatch)
      log::print("dispatch", "  " + s->name() + ": " +
                                 (why.empty() ? (comparison ? "applies, comparison only (by name)"
                                                 : named    ? "applies"
                                                            : "applies, not requested")
                                              : "skipped: " + why));
    if (!chosen && named && why.empty()) chosen = s;
    if (!chosen && want == s->name() && !why.empty())
      throw UserError("", "schedule", "'" + want + "' does not apply to " + p.canonical() + ": " + why);
  }
  if (!chosen) {
    std::string names;
    for (const S* s : reg) names += (names.empty() ? "" : ", ") + s->name();
    throw UserError("", "schedule", "unknown schedule '" + want + "' for " + op_name(p.op) +
                                        " (known: auto, " + names + ")");
  }
  return chosen;
}

template <class S>
std::vector<std::pair<std::string, std::string>> explain_list(const std::vector<const S*>& reg,
                                                              const Problem& p) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const S* s : reg) out.emplace_back(s->name(), s->why_not(p));
  return out;
}

}  // namespace

Halide::Target host_target() {
  Halide::Target t = Halide::get_host_target();
  // Tensors may exceed 2 GiB; kernels never assert on their own (validation happened earlier).
  return t.with_feature(Halide::Target::LargeBuffers);
}

/** ctx.variant checked against the schedule: only schedules with candidates take one. */
template <class S>
void check_variant(const S* s, const Problem& p, const sched::Context& ctx) {
  if (ctx.variant.empty()) return;
  user_check(!s->candidates(p, ctx).empty(), "", "variant",
             "schedule '" + s->name() + "' has no tile variants (got '" + ctx.variant + "')");
}

Lowered lower(const Problem& p, const std::string& schedule, int threads,
              const Halide::Target& target, const std::string& variant) {
  const bool log_lower = log::enabled("lower");
  user_check(variant.empty() || schedule != "auto", "", "variant",
             "variant '" + variant + "' needs a named schedule, not auto");
  sched::Context ctx{target, threads, variant};
  Lowered out;
  out.variant = variant;
  auto t0 = Clock::now();
  if (p.op == OpKind::kBackpropFilter) {
    ops::DwAlgorithm a = ops::define_backprop_filter(p);
    if (log_lower) log::print("lower", "define dW: " + std::to_string(ms_since(t0)) + " ms");
    const sched::DwSchedule* s = choose(sched::dw_registry(), p, schedule);
    check_variant(s, p, ctx);
    t0 = Clock::now();
    s->apply(a, p, ctx);
    out.schedule = s->name();
    out.schedule_detail = s->describe(p, ctx);
    out.pipeline = Halide::Pipeline(a.out);
    out.args = {a.x, a.dy};
  } else if (p.op == OpKind::kForward) {
    ops::FwdAlgorithm a = ops::define_forward(p);
    if (log_lower) log::print("lower", "define forward: " + std::to_string(ms_since(t0)) + " ms");
    const sched::FwdSchedule* s = choose(sched::fwd_registry(), p, schedule);
    check_variant(s, p, ctx);
    t0 = Clock::now();
    s->apply(a, p, ctx);
    out.schedule = s->name();
    out.schedule_detail = s->describe(p, ctx);
    out.pipeline = Halide::Pipeline(a.out);
    out.args = {a.x, a.filter};
  } else {
    ops::DxAlgorithm a = ops::define_backprop_input(p);
    if (log_lower) log::print("lower", "define dX: " + std::to_string(ms_since(t0)) + " ms");
    const sched::DxSchedule* s = choose(sched::dx_registry(), p, schedule);
    check_variant(s, p, ctx);
    t0 = Clock::now();
    s->apply(a, p, ctx);
    out.schedule = s->name();
    out.schedule_detail = s->describe(p, ctx);
    out.pipeline = Halide::Pipeline(a.out);
    out.args = {a.filter, a.dy};
    if (p.has_bias) out.args.push_back(a.bias);
  }
  if (log_lower) log::print("lower", "schedule " + out.schedule + ": " + std::to_string(ms_since(t0)) + " ms");
  if (log::enabled("dispatch"))
    log::print("dispatch", "  chose " + out.schedule +
                               (variant.empty() ? "" : " variant " + variant) + ": " +
                               out.schedule_detail);
  return out;
}

std::vector<std::string> candidates(const Problem& p, const std::string& name, int threads,
                                    const Halide::Target& target) {
  user_check(name != "auto", "", "schedule", "candidates need a named schedule, not auto");
  const sched::Context ctx{target, threads, ""};
  switch (p.op) {
    case OpKind::kBackpropFilter: return choose(sched::dw_registry(), p, name)->candidates(p, ctx);
    case OpKind::kBackpropInput: return choose(sched::dx_registry(), p, name)->candidates(p, ctx);
    case OpKind::kForward: return choose(sched::fwd_registry(), p, name)->candidates(p, ctx);
  }
  throw InternalError("unknown OpKind");
}

std::vector<std::pair<std::string, std::string>> explain(const Problem& p) {
  switch (p.op) {
    case OpKind::kBackpropFilter: return explain_list(sched::dw_registry(), p);
    case OpKind::kBackpropInput: return explain_list(sched::dx_registry(), p);
    case OpKind::kForward: return explain_list(sched::fwd_registry(), p);
  }
  throw InternalError("unknown OpKind");
}

}  // namespace tbex::lower
