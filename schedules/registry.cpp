#include "schedules/registry.h"

namespace tbex::sched {

const std::vector<const DwSchedule*>& dw_registry() {
  static const std::vector<const DwSchedule*> r{
      dw_diag_schedule(), dw_direct_schedule(), dw_cout_lanes_schedule(), dw_tiled_schedule(),
      dw_halide_auto_schedule(HalideAutoscheduler::kMullapudi2016),
      dw_halide_auto_schedule(HalideAutoscheduler::kAdams2019),
      dw_halide_auto_schedule(HalideAutoscheduler::kLi2018), dw_reference_schedule()};
  return r;
}

const std::vector<const DxSchedule*>& dx_registry() {
  static const std::vector<const DxSchedule*> r{
      dx_diag_schedule(), dx_cout_lanes_schedule(), dx_tiled_schedule(),
      dx_halide_auto_schedule(HalideAutoscheduler::kMullapudi2016),
      dx_halide_auto_schedule(HalideAutoscheduler::kAdams2019),
      dx_halide_auto_schedule(HalideAutoscheduler::kLi2018), dx_reference_schedule()};
  return r;
}

const std::vector<const FwdSchedule*>& fwd_registry() {
  static const std::vector<const FwdSchedule*> r{
      fwd_tiled_schedule(), fwd_halide_auto_schedule(HalideAutoscheduler::kMullapudi2016),
      fwd_halide_auto_schedule(HalideAutoscheduler::kAdams2019),
      fwd_halide_auto_schedule(HalideAutoscheduler::kLi2018), fwd_reference_schedule()};
  return r;
}

template <class S>
static std::vector<std::string> names_of(const std::vector<const S*>& reg, bool own_only) {
  std::vector<std::string> out;
  for (const S* s : reg)
    if (!own_only || !s->by_name_only()) out.push_back(s->name());
  return out;
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
