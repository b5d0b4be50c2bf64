#include "schedules/registry.h"

namespace tbex::sched {
namespace {

/** An op's registry: its own entries (in tie-break order), Halide's autoschedulers (by name
 * only), then the reference. */
template <class S>
std::vector<const S*> entries(std::vector<const S*> own,
                              const S* (*halide_auto)(HalideAutoscheduler), const S* reference) {
  for (HalideAutoscheduler which : {HalideAutoscheduler::kMullapudi2016,
                                    HalideAutoscheduler::kAdams2019, HalideAutoscheduler::kLi2018})
    own.push_back(halide_auto(which));
  own.push_back(reference);
  return own;
}

template <class S>
std::vector<std::string> names_of(const std::vector<const S*>& reg, bool own_only) {
  std::vector<std::string> out;
  for (const S* s : reg)
    if (!own_only || !s->by_name_only()) out.push_back(s->name());
  return out;
}

}  // namespace

const std::vector<const DwSchedule*>& dw_registry() {
  static const std::vector<const DwSchedule*> r = entries<DwSchedule>(
      {dw_diag_schedule(), dw_direct_schedule(), dw_cout_lanes_schedule(), dw_pointwise_schedule(),
       dw_amx_blocked_schedule(), dw_amx_schedule(), dw_tiled_schedule()},
      dw_halide_auto_schedule, dw_reference_schedule());
  return r;
}

const std::vector<const DxSchedule*>& dx_registry() {
  static const std::vector<const DxSchedule*> r = entries<DxSchedule>(
      {dx_diag_schedule(), dx_cout_lanes_schedule(), dx_w_lanes_schedule(), dx_pointwise_schedule(),
       dx_amx_cols_schedule(), dx_amx_blocked_schedule(), dx_amx_schedule(),
       dx_tiled_schedule()},
      dx_halide_auto_schedule, dx_reference_schedule());
  return r;
}

const std::vector<const FwdSchedule*>& fwd_registry() {
  static const std::vector<const FwdSchedule*> r = entries<FwdSchedule>(
      {fwd_tiled_schedule()}, fwd_halide_auto_schedule, fwd_reference_schedule());
  return r;
}

std::vector<std::string> registry_names(OpKind op, bool own_only) {
  switch (op) {
    case OpKind::kBackpropFilter: return names_of(dw_registry(), own_only);
    case OpKind::kBackpropInput: return names_of(dx_registry(), own_only);
    case OpKind::kForward: return names_of(fwd_registry(), own_only);
  }
  return {};
}

}  // namespace tbex::sched
