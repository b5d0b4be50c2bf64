#include "schedules/registry.h"
#include "tbex/kernel.h"

namespace tbex::sched {

const std::vector<const DwSchedule*>& dw_registry() {
  static const std::vector<const DwSchedule*> r{dw_direct_schedule(), dw_cout_lanes_schedule(),
                                                   dw_tiled_schedule(), dw_reference_schedule()};
  return r;
}

const std::vector<const DxSchedule*>& dx_registry() {
  static const std::vector<const DxSchedule*> r{dx_tiled_schedule(), dx_reference_schedule()};
  return r;
}

const std::vector<const FwdSchedule*>& fwd_registry() {
  static const std::vector<const FwdSchedule*> r{fwd_tiled_schedule(), fwd_reference_schedule()};
  return r;
}

template <class S>
static std::vector<std::string> names_of(const std::vector<const S*>& reg) {
  std::vector<std::string> out;
  for (const S* s : reg) out.push_back(s->name());
  return out;
}

std::vector<std::string> registry_names(OpKind op) {
  switch (op) {
    case OpKind::kBackpropFilter: return names_of(dw_registry());
    case OpKind::kBackpropInput: return names_of(dx_registry());
    case OpKind::kForward: return names_of(fwd_registry());
  }
  return {};
}

}  // namespace tbex::sched

namespace tbex {
std::vector<std::string> schedule_names(OpKind op) { return sched::registry_names(op); }
}  // namespace tbex
