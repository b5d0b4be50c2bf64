#include "tbex/group_dict.h"

#include <algorithm>
#include <numeric>

#include "tbex/errors.h"

namespace tbex {

bool GroupDict::operator==(const GroupDict& o) const {
  return real_g == o.real_g && mag_factor == o.mag_factor && cin1_g == o.cin1_g &&
         cout_g == o.cout_g && cin_ori == o.cin_ori && cout_ori == o.cout_ori;
}

std::string GroupDict::to_string() const {
  return "{real_g: " + std::to_string(real_g) + ", mag_factor: " + std::to_string(mag_factor) +
         ", cin1_g: " + std::to_string(cin1_g) + ", cout_g: " + std::to_string(cout_g) +
         ", cin_ori: " + std::to_string(cin_ori) + ", cout_ori: " + std::to_string(cout_ori) + "}";
}

GroupDict derive_group_dict(int64_t cin, int64_t cout, int64_t groups) {
  const std::string vals = "groups=" + std::to_string(groups) + ", Cin=" + std::to_string(cin) +
                           ", Cout=" + std::to_string(cout);
  check_range(cin, 1, kMaxDim, "Cin", "input channels");
  check_range(cout, 1, kMaxDim, "Cout", "output channels");
  user_check(groups > 0, "E60038", "groups", "groups must be > 0 (" + vals + ")");
  user_check(groups <= cin, "E60038", "groups", "groups must be <= Cin (" + vals + ")");
  user_check(groups <= cout, "E60038", "groups", "groups must be <= Cout (" + vals + ")");
  user_check(cin % groups == 0, "E60038", "groups", "Cin must be divisible by groups (" + vals + ")");
  user_check(cout % groups == 0, "E60038", "groups",
             "Cout must be divisible by groups (" + vals + ")");
  const int64_t cin_pg = cin / groups, cout_pg = cout / groups;
  // lcm(c, 16) / c written as 16 / gcd(c, 16): the same value without the product that overflows.
  const int64_t mag0 = kC0 / std::gcd(cin_pg, kC0);
  const int64_t mag1 = kC0 / std::gcd(cout_pg, kC0);
  GroupDict g;
  g.mag_factor = std::min(std::lcm(mag0, mag1), groups);
  g.cin1_g = ceil_div(g.mag_factor * cin_pg, kC0);
  g.cout_g = ceil_div(g.mag_factor * cout_pg, kC0) * kC0;
  g.real_g = ceil_div(groups, g.mag_factor);
  g.cin_ori = cin;
  g.cout_ori = cout;
  return g;
}

}  // namespace tbex
