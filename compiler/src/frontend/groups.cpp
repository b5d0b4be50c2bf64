/** groups and group_dict of a TBE call (docs/group_dict.md): resolved from para_dict and the
 * shapes, and a caller's group_dict checked key by key against the one derived. */
#include <set>

#include "tbe_args.h"
#include "tbex/errors.h"

namespace tbex::frontend {
namespace {

const std::vector<std::string> kGroupDictKeys = {"real_g", "mag_factor", "cin1_g", "cout_g",
                                                 "cin_ori", "cout_ori", "groups"};

std::string gd_param(const std::string& key) { return "group_dict['" + key + "']"; }

bool group_rules_hold(int64_t cin, int64_t cout, int64_t groups) {
  return groups > 0 && cin > 0 && cin <= kMaxDim && groups <= cin && groups <= cout &&
         cin % groups == 0 && cout % groups == 0;
}

/** The caller's claims about one grouped conv: group_dict's keys, and the channel facts the
 * call itself gives (dX's input_size C, dW's x C1). */
struct Claims {
  const std::map<std::string, int64_t>& gd;
  std::optional<int64_t> cin_known, x_c1;
  int64_t cin_pg, cout;

  /** (key, derived value) pairs of `d` that disagree with a claim, in group_dict order. */
  std::vector<std::pair<std::string, int64_t>> disagreements(const GroupDict& d) const {
    const std::pair<const char*, int64_t> fields[] = {
        {"real_g", d.real_g},   {"mag_factor", d.mag_factor}, {"cin1_g", d.cin1_g},
        {"cout_g", d.cout_g},   {"cin_ori", d.cin_ori},       {"cout_ori", d.cout_ori}};
    std::vector<std::pair<std::string, int64_t>> out;
    for (const auto& [key, want] : fields) {
      auto it = gd.find(key);
      if (it != gd.end() && it->second != want) out.emplace_back(key, want);
    }
    return out;
  }

  /** How many claims the conv with `groups` contradicts (-1: no such conv). */
  int misfit(int64_t groups) const {
    if (groups <= 0 || groups > kMaxDim) return -1;
    const int64_t cin = cin_pg * groups;
    if (!group_rules_hold(cin, cout, groups)) return -1;
    int n = (int)disagreements(derive_group_dict(cin, cout, groups)).size();
    if (cin_known && *cin_known != cin) ++n;
    if (x_c1 && *x_c1 != ceil_div(cin, kC0)) ++n;
    return n;
  }

  /** Group counts the claims point at: Cin over the filter's C, and each count real_g and
   * mag_factor allow ((real_g - 1) * mag_factor < groups <= real_g * mag_factor). */
  std::set<int64_t> candidates(int64_t resolved) const {
    std::set<int64_t> c = {resolved};
    auto rg = gd.find("real_g"), mf = gd.find("mag_factor");
    if (rg != gd.end() && mf != gd.end() && rg->second > 0 && mf->second > 0 && mf->second <= kC0 &&
        rg->second <= kMaxDim)
      for (int64_t g = (rg->second - 1) * mf->second + 1; g <= rg->second * mf->second; ++g)
        c.insert(g);
    return c;
  }
};

}  // namespace

void resolve_groups(ConvGeometry& g, int64_t cin_pg, const ParaDict& para,
                    std::optional<int64_t> cin_known, std::optional<int64_t> x_c1) {
  std::optional<int64_t> cin = cin_known;
  std::string cin_from = "filter_size";  // named when Cin and the filter disagree
  const auto& gd = para.group_dict;
  if (gd) {
    for (const auto& kv : *gd) check_key(kv.first, kGroupDictKeys, "group_dict");
    if (!cin && gd->count("cin_ori")) {
      cin = gd->at("cin_ori");
      cin_from = gd_param("cin_ori");
    }
  }
  int64_t groups = 0;
  const bool explicit_groups = para.groups || (gd && gd->count("groups"));
  if (para.groups) groups = *para.groups;
  else if (explicit_groups) groups = gd->at("groups");
  if (explicit_groups) {
    user_check(groups > 0, "E60038", "groups", "groups must be > 0, got " + std::to_string(groups));
    check_range(groups, 1, kMaxDim, "groups");
  }
  if (!cin) cin = (groups > 0 ? groups : 1) * cin_pg;
  user_check(*cin > 0, code::kNotPositive, cin_from.c_str(),
             "input channels must be a positive int, got " + std::to_string(*cin));
  check_range(*cin, 1, kMaxDim, cin_from, "input channels");
  // TBE's DSL carries groups only in group_dict (Cin over the filter's C, then checked against
  // every key); without either, groups is 1 as in TBE's operators, so a filter C that disagrees
  // with Cin is an error.
  if (groups == 0 && !gd) groups = 1;
  if (groups == 0) {
    user_check(*cin % cin_pg == 0, "E60010", cin_from.c_str(),
               "Cin " + std::to_string(*cin) + " is not a multiple of the filter's channels " +
                   std::to_string(cin_pg) + " (Cin must equal filter C * groups)");
    groups = *cin / cin_pg;
  }
  user_check(*cin == cin_pg * groups, "E60010", cin_from.c_str(),
             "Cin " + std::to_string(*cin) + " != filter C " + std::to_string(cin_pg) +
                 " * groups " + std::to_string(groups));
  g.cin = *cin;
  g.groups = groups;
  const GroupDict derived = derive_group_dict(g.cin, g.cout, groups);
  if (!gd) return;
  const Claims claims{*gd, cin_known, x_c1, cin_pg, g.cout};
  auto wrong = claims.disagreements(derived);
  if (wrong.empty()) return;
  // Groups inferred from one key (cin_ori): when another group count contradicts fewer claims,
  // the odd one out is that key, not the first of the keys the inferred count contradicts.
  int64_t best = groups;
  int best_misfit = claims.misfit(groups);
  if (!explicit_groups)
    for (int64_t cand : claims.candidates(groups)) {
      const int m = claims.misfit(cand);
      if (m >= 0 && m < best_misfit) best = cand, best_misfit = m;
    }
  if (best != groups) {
    const GroupDict fit = derive_group_dict(cin_pg * best, g.cout, best);
    const auto odd = claims.disagreements(fit);
    if (!odd.empty()) {
      const auto& [key, want] = odd.front();
      throw UserError("E60038", gd_param(key),
                      "is " + std::to_string(gd->at(key)) + " but the other keys and the shapes " +
                          "fit Cin=" + std::to_string(fit.cin_ori) + ", Cout=" +
                          std::to_string(g.cout) + ", groups=" + std::to_string(best) +
                          ", which give " + std::to_string(want) + "; derived group_dict " +
                          fit.to_string());
    }
  }
  const auto& [key, want] = wrong.front();
  throw UserError("E60038", gd_param(key),
                  "is " + std::to_string(gd->at(key)) + " but the shapes (Cin=" +
                      std::to_string(g.cin) + ", Cout=" + std::to_string(g.cout) + ", groups=" +
                      std::to_string(groups) + ") give " + std::to_string(want) +
                      "; derived group_dict " + derived.to_string());
}

}  // namespace tbex::frontend
