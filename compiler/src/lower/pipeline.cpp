#include "lower/pipeline.h"

#include <chrono>

#include "lower/dot_operands.h"
#include "lower/prefetch_lines.h"
#include "ops/ops.h"
#include "schedules/cost_model.h"
#include "schedules/registry.h"
#include "tbex/errors.h"
#include "tbex/log.h"

namespace tbex::lower {
namespace {

/** Applies the decided schedule to the defined algorithm and makes the pipeline. */
template <class Alg, class S>
void apply_into(Lowered& out, Alg& a, const std::vector<const S*>& reg, const Problem& p,
                const Decision& d, const sched::Context& ctx, std::vector<Halide::Argument> args) {
  const S* s = sched::find_schedule(reg, d.schedule);
  internal_check(s != nullptr, "select() decided on an unknown schedule " + d.schedule);
  const auto t0 = std::chrono::steady_clock::now();
  s->apply(a, p, ctx);
  out.schedule = s->name();
  out.variant = d.variant;
  out.schedule_detail = s->describe(p, ctx);
  out.amx_tiles = s->uses_amx_tiles();
  out.target = out.amx_tiles ? ctx.target.without_feature(Halide::Target::LargeBuffers) : ctx.target;
  out.pipeline = Halide::Pipeline(a.out);
  if (p.in_dtype == DType::kBFloat16 && sched::has_bf16_dot(out.target))
    put_dot_broadcasts_last(out.pipeline);
  mend_prefetches(out.pipeline, out.target, s->spread_prefetches_over());
  out.args = std::move(args);
  if (log::enabled("lower"))
    log::print("lower", std::string(op_name(p.op)) + " schedule " + out.schedule + ": " +
                            std::to_string(std::chrono::duration<double, std::milli>(
                                               std::chrono::steady_clock::now() - t0)
                                               .count()) +
                            " ms");
}

}  // namespace

Lowered lower(const Problem& p, const Decision& d, int threads, const Halide::Target& target) {
  const sched::Context ctx{target, threads, d.variant};
  Lowered out;
  if (p.op == OpKind::kBackpropFilter) {
    ops::DwAlgorithm a = ops::define_backprop_filter(p);
    apply_into(out, a, sched::dw_registry(), p, d, ctx, {a.x, a.dy});
  } else if (p.op == OpKind::kForward) {
    ops::FwdAlgorithm a = ops::define_forward(p);
    apply_into(out, a, sched::fwd_registry(), p, d, ctx, {a.x, a.filter});
  } else {
    ops::DxAlgorithm a = ops::define_backprop_input(p);
    std::vector<Halide::Argument> args{a.filter, a.dy};
    if (p.has_bias) args.push_back(a.bias);
    apply_into(out, a, sched::dx_registry(), p, d, ctx, std::move(args));
  }
  if (log::enabled("dispatch"))
    log::print("dispatch", "  " + out.schedule + (out.variant.empty() ? "" : " [" + out.variant + "]") +
                               ": " + out.schedule_detail);
  return out;
}

}  // namespace tbex::lower
