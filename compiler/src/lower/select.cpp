#include "lower/select.h"

#include <chrono>

#include "schedules/registry.h"
#include "tbex/errors.h"
#include "tbex/log.h"
#include "tbex/thread_pool.h"
#include "lower/tuning_db.h"

namespace tbex::lower {
namespace {

/** Calls f with the registry of p's op (the three registries hold different schedule types). */
template <class F>
decltype(auto) on_registry(OpKind op, F&& f) {
  switch (op) {
    case OpKind::kBackpropFilter: return f(sched::dw_registry());
    case OpKind::kBackpropInput: return f(sched::dx_registry());
    case OpKind::kForward: return f(sched::fwd_registry());
  }
  throw InternalError("unknown OpKind");
}

/** The entry named `name`; UserError naming the known ones when there is none. */
template <class S>
const S* named(const std::vector<const S*>& reg, const Problem& p, const std::string& name) {
  if (const S* s = sched::find_schedule(reg, name)) return s;
  std::string names;
  for (const S* s : reg) names += (names.empty() ? "" : ", ") + s->name();
  throw UserError(code::kValue, "schedule", "unknown schedule '" + name + "' for " + op_name(p.op) +
                                      " (known: auto, " + names + ")");
}

/** "" when `s` applies to p on `target`, else why not. */
template <class S>
std::string why_not(const S* s, const Problem& p, const Halide::Target& target) {
  std::string why = s->why_not(p);
  return why.empty() ? s->why_not_on(target) : why;
}

/** The entry named `name`, which must apply to p on `target`. */
template <class S>
const S* applicable(const std::vector<const S*>& reg, const Problem& p, const std::string& name,
                    const Halide::Target& target) {
  const S* s = named(reg, p, name);
  const std::string why = why_not(s, p, target);
  user_check(why.empty(), code::kValue, "schedule",
             "'" + name + "' does not apply to " + p.canonical() + ": " + why);
  return s;
}

/** "" when `variant` is one `s` offers for p (or ""), else why not: a tuning entry's variant
 * came from the candidates of the build that wrote it, so one outside them is stale. */
template <class S>
std::string variant_why_not(const S* s, const Problem& p, const sched::Context& ctx,
                            const std::string& variant) {
  if (variant.empty()) return "";
  const std::vector<std::string> vars = s->candidates(p, ctx);
  if (vars.empty()) return "schedule '" + s->name() + "' has no tile variants (got '" + variant + "')";
  for (const std::string& v : vars)
    if (v == variant) return "";
  std::string list;
  for (const std::string& v : vars) list += (list.empty() ? "" : " | ") + (v.empty() ? "\"\"" : v);
  return "'" + variant + "' is not a tile variant of " + s->name() + " for this problem (" + list + ")";
}

/** A model tie (within kTieMargin) keeps the earlier entry: the registry's order, and each
 * schedule's own choice before its variants, decide what the model cannot tell apart. */
constexpr double kTieMargin = 0.02;

template <class S>
std::vector<RankedChoice> rank_list(const std::vector<const S*>& reg, const Problem& p,
                                    const sched::Context& ctx) {
  const sched::Machine m = sched::Machine::of(ctx.target);
  std::vector<RankedChoice> ranked, fallback;
  for (const S* s : reg) {
    if (s->by_name_only() || !why_not(s, p, ctx.target).empty()) continue;
    std::vector<std::string> vars = s->candidates(p, ctx);
    if (vars.empty()) vars = {""};
    for (const std::string& v : vars) {
      sched::Context c = ctx;
      c.variant = v;
      const sched::Estimate e = s->estimate(p, c);
      RankedChoice r{s->name(), v, e.ms(m), e.str(m)};
      // The reference (serial, scalar: a second opinion) stays last whatever its estimate:
      // picked only when nothing else applies.
      if (s->name() == "reference") {
        fallback.push_back(std::move(r));
        continue;
      }
      // Insertion by predicted time; an entry passes an earlier one only when clearly faster.
      auto it = ranked.begin();
      while (it != ranked.end() && !(r.ms < it->ms * (1 - kTieMargin))) ++it;
      ranked.insert(it, std::move(r));
    }
  }
  ranked.insert(ranked.end(), fallback.begin(), fallback.end());
  return ranked;
}

std::string choice_str(const std::string& schedule, const std::string& variant) {
  return schedule + (variant.empty() ? "" : " [" + variant + "]");
}

/** The tuning database's entry for p, if it names a schedule and variant that apply; a stale
 * entry (another build's schedules or variants) is logged and ignored. */
template <class S>
bool tuned(const std::vector<const S*>& reg, const Problem& p, const sched::Context& ctx,
           Decision& d) {
  TuningEntry e;
  const tuning::Key key = tuning::key_of(p, ctx.threads, ctx.target.to_string());
  const std::string path = tuning_db_path();
  if (!tuning::lookup(path, key, e)) {
    if (log::enabled("dispatch")) log::print("dispatch", "  no tuning database entry in " + path);
    return false;
  }
  std::string why;
  const S* s = sched::find_schedule(reg, e.schedule);
  if (!s || s->by_name_only())
    why = "no schedule '" + e.schedule + "' \"auto\" may pick";
  else if (!(why = why_not(s, p, ctx.target)).empty())
    why = e.schedule + " does not apply: " + why;
  else
    why = variant_why_not(s, p, ctx, e.variant);
  if (log::enabled("dispatch"))
    log::print("dispatch", "  tuning database hit (" + path + "): " + choice_str(e.schedule, e.variant) +
                               ", " + std::to_string(e.ms) + " ms on " + e.date +
                               (why.empty() ? "" : "; ignored: " + why));
  if (!why.empty()) return false;
  d = Decision{e.schedule, e.variant, "tuning database"};
  return true;
}

template <class S>
Decision select_in(const std::vector<const S*>& reg, const Problem& p,
                   const CompileOptions& request, const sched::Context& ctx) {
  const bool log_dispatch = log::enabled("dispatch");
  if (log_dispatch) {
    log::print("dispatch", p.canonical() + " at " + std::to_string(ctx.threads) + " threads, " +
                               choice_str(request.schedule, request.variant) + " requested");
    for (const S* s : reg) {
      const std::string why = why_not(s, p, ctx.target);
      log::print("dispatch", "  " + s->name() + ": " +
                                 (!why.empty()            ? "skipped: " + why
                                  : s->by_name_only()     ? "applies, comparison only (by name)"
                                                          : "applies"));
    }
  }
  Decision d;
  if (request.schedule != "auto") {
    const S* s = applicable(reg, p, request.schedule, ctx.target);
    // A requested variant need not be one of the candidates (tiling experiments); its fields are
    // checked when the schedule parses it.
    user_check(request.variant.empty() || !s->candidates(p, ctx).empty(), code::kValue, "variant",
               "schedule '" + s->name() + "' has no tile variants (got '" + request.variant + "')");
    d = Decision{s->name(), request.variant, "requested"};
  } else if (!tuned(reg, p, ctx, d)) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<RankedChoice> ranked = rank_list(reg, p, ctx);
    internal_check(!ranked.empty(), "no schedule applies to " + p.canonical());
    if (log_dispatch) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      log::print("dispatch", "  cost model (" + std::to_string(ranked.size()) + " candidates in " +
                                 std::to_string(ms) + " ms), best first:");
      for (size_t i = 0; i < ranked.size() && i < 8; ++i)
        log::print("dispatch", "    " + choice_str(ranked[i].schedule, ranked[i].variant) + ": " +
                                   ranked[i].detail);
    }
    d = Decision{ranked[0].schedule, ranked[0].variant, "cost model"};
  }
  if (log_dispatch)
    log::print("dispatch", "  chose " + choice_str(d.schedule, d.variant) + " (" + d.source + ")");
  return d;
}

}  // namespace

Halide::Target host_target() {
  Halide::Target t = Halide::get_host_target();
  // Tensors may exceed 2 GiB; kernels never assert on their own (validation happened earlier).
  return t.with_feature(Halide::Target::LargeBuffers);
}

Decision select(const Problem& p, const CompileOptions& request, int threads,
                const Halide::Target& target) {
  user_check(request.variant.empty() || request.schedule != "auto", code::kValue, "variant",
             "variant '" + request.variant + "' needs a named schedule, not auto");
  const sched::Context ctx{target, threads, ""};
  return on_registry(p.op, [&](const auto& reg) { return select_in(reg, p, request, ctx); });
}

std::vector<std::string> candidates(const Problem& p, const std::string& name, int threads,
                                    const Halide::Target& target) {
  user_check(name != "auto", code::kValue, "schedule", "candidates need a named schedule, not auto");
  const sched::Context ctx{target, threads, ""};
  return on_registry(p.op, [&](const auto& reg) {
    return applicable(reg, p, name, target)->candidates(p, ctx);
  });
}

std::vector<RankedChoice> rank(const Problem& p, int threads, const Halide::Target& target) {
  const sched::Context ctx{target, threads, ""};
  return on_registry(p.op, [&](const auto& reg) { return rank_list(reg, p, ctx); });
}

std::vector<std::pair<std::string, std::string>> explain(const Problem& p) {
  return on_registry(p.op, [&](const auto& reg) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto* s : reg) out.emplace_back(s->name(), why_not(s, p, host_target()));
    return out;
  });
}

}  // namespace tbex::lower

namespace tbex {

std::vector<std::string> schedule_names(OpKind op) { return sched::registry_names(op); }

std::vector<std::string> own_schedule_names(OpKind op) { return sched::registry_names(op, true); }

std::vector<std::string> schedule_candidates(const Problem& problem, const std::string& name) {
  validate(problem);
  return lower::candidates(problem, name, num_threads(), lower::host_target());
}

std::vector<std::pair<std::string, std::string>> explain_schedules(const Problem& problem) {
  return lower::explain(problem);
}

std::vector<RankedChoice> rank_schedules(const Problem& problem) {
  validate(problem);
  return lower::rank(problem, num_threads(), lower::host_target());
}

Selection select_schedule(const Problem& problem, const CompileOptions& request) {
  validate(problem);
  return lower::select(problem, request, num_threads(), lower::host_target());
}

}  // namespace tbex
