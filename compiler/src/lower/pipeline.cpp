#include "lower/pipeline.h"

#include <chrono>

#include "tbex/log.h"
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

/** A model tie (within kTieMargin) keeps the earlier entry: the registry's order, and each
 * schedule's own choice before its variants, decide what the model cannot tell apart. */
constexpr double kTieMargin = 0.02;

/** Every applicable schedule "auto" may pick, with each of its tile variants, ranked by the
 * analytic cost model (best first); no compilation. */
template <class S>
std::vector<RankedChoice> rank_list(const std::vector<const S*>& reg, const Problem& p,
                                    const sched::Context& ctx) {
  std::vector<RankedChoice> out;
  const sched::Machine m = sched::Machine::of(ctx.target);
  for (const S* s : reg) {
    if (s->by_name_only() || !s->why_not(p).empty()) continue;
    std::vector<std::string> vars = s->candidates(p, ctx);
    if (vars.empty()) vars = {""};
    for (const std::string& v : vars) {
      sched::Context c = ctx;
      c.variant = v;
      const sched::Estimate e = s->estimate(p, c);
      out.push_back(RankedChoice{s->name(), v, e.ms(m), e.str(m)});
    }
  }
  // Insertion by predicted time; an entry passes an earlier one only when clearly faster. The
  // reference (a second opinion, serial and scalar) stays last: picked only when nothing else
  // applies, whatever its estimate.
  std::vector<RankedChoice> ranked, fallback;
  for (RankedChoice& r : out) {
    if (r.schedule == "reference") {
      fallback.push_back(std::move(r));
      continue;
    }
    auto it = ranked.begin();
    while (it != ranked.end() && !(r.ms < it->ms * (1 - kTieMargin))) ++it;
    ranked.insert(it, std::move(r));
  }
  ranked.insert(ranked.end(), fallback.begin(), fallback.end());
  return ranked;
}

template <class S>
const S* by_name(const std::vector<const S*>& reg, const std::string& name) {
  for (const S* s : reg)
    if (s->name() == name) return s;
  throw InternalError("no schedule named " + name);
}

/** ctx.variant checked against the schedule: only schedules with candidates take one. */
template <class S>
void check_variant(const S* s, const Problem& p, const sched::Context& ctx) {
  if (ctx.variant.empty()) return;
  user_check(!s->candidates(p, ctx).empty(), "", "variant",
             "schedule '" + s->name() + "' has no tile variants (got '" + ctx.variant + "')");
}

/** The stages after define: choose the schedule (logged), apply it (timed), make the pipeline. */
template <class Alg, class S>
void schedule_into(Lowered& out, Alg& a, const std::vector<const S*>& reg, const Problem& p,
                   const std::string& schedule, const sched::Context& ctx, const char* op,
                   std::vector<Halide::Argument> args) {
  const S* s = choose(reg, p, schedule);
  sched::Context use = ctx;
  if (schedule == "auto") {
    // The cost model ranks every applicable schedule and tile variant; the best is applied.
    const auto t_rank = Clock::now();
    const std::vector<RankedChoice> ranked = rank_list(reg, p, ctx);
    if (!ranked.empty()) {
      s = by_name(reg, ranked[0].schedule);
      use.variant = ranked[0].variant;
    }
    if (log::enabled("dispatch")) {
      log::print("dispatch", "  cost model (" + std::to_string(ranked.size()) + " candidates in " +
                                 std::to_string(ms_since(t_rank)) + " ms), best first:");
      for (size_t i = 0; i < ranked.size() && i < 8; ++i)
        log::print("dispatch", "    " + ranked[i].schedule +
                                   (ranked[i].variant.empty() ? "" : " [" + ranked[i].variant + "]") +
                                   ": " + ranked[i].detail);
    }
  }
  check_variant(s, p, use);
  const auto t0 = Clock::now();
  s->apply(a, p, use);
  out.schedule = s->name();
  out.variant = use.variant;
  out.schedule_detail = s->describe(p, use);
  out.pipeline = Halide::Pipeline(a.out);
  out.args = std::move(args);
  if (log::enabled("lower"))
    log::print("lower", std::string(op) + " schedule " + out.schedule + ": " +
                            std::to_string(ms_since(t0)) + " ms");
}

}  // namespace

Halide::Target host_target() {
  Halide::Target t = Halide::get_host_target();
  // Tensors may exceed 2 GiB; kernels never assert on their own (validation happened earlier).
  return t.with_feature(Halide::Target::LargeBuffers);
}

Lowered lower(const Problem& p, const std::string& schedule, int threads,
              const Halide::Target& target, const std::string& variant) {
  user_check(variant.empty() || schedule != "auto", "", "variant",
             "variant '" + variant + "' needs a named schedule, not auto");
  sched::Context ctx{target, threads, variant};
  Lowered out;
  out.variant = variant;
  if (p.op == OpKind::kBackpropFilter) {
    ops::DwAlgorithm a = ops::define_backprop_filter(p);
    schedule_into(out, a, sched::dw_registry(), p, schedule, ctx, "dW", {a.x, a.dy});
  } else if (p.op == OpKind::kForward) {
    ops::FwdAlgorithm a = ops::define_forward(p);
    schedule_into(out, a, sched::fwd_registry(), p, schedule, ctx, "forward", {a.x, a.filter});
  } else {
    ops::DxAlgorithm a = ops::define_backprop_input(p);
    std::vector<Halide::Argument> args{a.filter, a.dy};
    if (p.has_bias) args.push_back(a.bias);
    schedule_into(out, a, sched::dx_registry(), p, schedule, ctx, "dX", std::move(args));
  }
  if (log::enabled("dispatch"))
    log::print("dispatch", "  chose " + out.schedule +
                               (out.variant.empty() ? "" : " variant " + out.variant) + ": " +
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

std::vector<RankedChoice> rank(const Problem& p, int threads, const Halide::Target& target) {
  const sched::Context ctx{target, threads, ""};
  switch (p.op) {
    case OpKind::kBackpropFilter: return rank_list(sched::dw_registry(), p, ctx);
    case OpKind::kBackpropInput: return rank_list(sched::dx_registry(), p, ctx);
    case OpKind::kForward: return rank_list(sched::fwd_registry(), p, ctx);
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
