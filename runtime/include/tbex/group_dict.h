#pragma once
/** TBE's group_dict: how grouped convolutions are packed into 16-channel fractal blocks. */
#include <cstdint>
#include <string>

namespace tbex {

constexpr int64_t kC0 = 16;  ///< channels per 6HD / fractal block (cin0 = cout0 = C0)

struct GroupDict {
  int64_t real_g = 1;      ///< groups after packing mag_factor original groups together
  int64_t mag_factor = 1;  ///< original groups per real group
  int64_t cin1_g = 1;      ///< input-channel blocks of 16 per real group
  int64_t cout_g = 16;     ///< output channels per real group (multiple of 16)
  int64_t cin_ori = 0;     ///< Cin, all groups
  int64_t cout_ori = 0;    ///< Cout, all groups

  bool operator==(const GroupDict& o) const;
  std::string to_string() const;
};

/** Derives group_dict from channel counts (docs/group_dict.md); throws UserError E60038 on bad
 * groups. */
GroupDict derive_group_dict(int64_t cin, int64_t cout, int64_t groups);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace tbex
