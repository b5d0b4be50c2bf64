#pragma once
/** Tile variants as strings ("nt=4,kwt=3,ch=8"): the form CompileOptions::variant, the tuning
 * database and TBEX_LOG=tune use. Keys are fixed per schedule; values are positive integers. */
#include <map>
#include <string>
#include <vector>

namespace tbex::sched {

using VariantFields = std::map<std::string, int>;

/** The fields of `variant` ("" gives none). UserError (param "variant") on an unknown key, a
 * repeated key or a value that is not a positive integer; `keys` lists the known ones. */
VariantFields parse_variant(const std::string& variant, const std::vector<std::string>& keys,
                            const std::string& schedule);

/** "k1=v1,k2=v2" in the order of `keys` (keys missing from `f` are left out). */
std::string format_variant(const VariantFields& f, const std::vector<std::string>& keys);

/** `list` without repeats, first occurrence kept, at most `cap` entries. */
std::vector<std::string> unique_upto(const std::vector<std::string>& list, size_t cap);

}  // namespace tbex::sched
