#include "schedules/amx_tile.h"

namespace tbex::sched {

using namespace Halide;

std::string amx_offsets_why_not(double bytes) {
  if (bytes < 2147483648.0) return "";
  return "a buffer of " + std::to_string(int64_t(bytes)) +
         " bytes: Halide lowers AMX tiles with 32-bit offsets only (2 GiB)";
}

void amx_tile(Func acc, Func owner, const Var& at, const Var& j, const Var& i, const RVar& k,
              int kk, const std::vector<VarOrRVar>& outer) {
  Func back = acc.in();
  back.compute_at(owner, at).bound_extent(i, 16).align_storage(j, 32).vectorize(j).vectorize(i);
  acc.compute_at(owner, at).bound_extent(i, 16).store_in(MemoryType::AMXTile).vectorize(j).vectorize(i);
  RVar ko("ko"), ki("ki");
  std::vector<VarOrRVar> order{ki, j, i, ko};
  order.insert(order.end(), outer.begin(), outer.end());
  acc.update().split(k, ko, ki, kk).reorder(order).atomic().vectorize(ki).vectorize(j).vectorize(i);
}

}  // namespace tbex::sched
