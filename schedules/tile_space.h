#pragma once
/** A schedule's tile space, declared once (like TVM's cfg.define_split): the keys of its tile
 * variants ("nt=4,kwt=3,ch=8": the form CompileOptions::variant, the tuning database and
 * TBEX_LOG=tune use), the TBEX_*_TILE knob that overrides them for experiments, and the
 * candidate list the tuner times. Every schedule with variants draws its tiles through one.
 * Values are positive integers; keys are fixed per schedule. */
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tbex::sched {

using VariantFields = std::map<std::string, int>;

class TileSpace {
 public:
  /** knob: the environment override of the first `knob_keys` keys ("v1,v2,...", positional),
   * read only where no variant is given; "" for none. */
  TileSpace(std::string schedule, std::vector<std::string> keys, std::string knob = "",
            size_t knob_keys = 0);

  const std::string& schedule() const { return schedule_; }

  /** The fields `variant` sets ("" gives none). UserError (param "variant") on an unknown key, a
   * repeated key or a value that is not an integer in [1, 4096]. */
  VariantFields parse(const std::string& variant) const;

  /** The knob's values by key when it is set and `variant` is empty, else none. UserError
   * (param = the knob) when it is not 1 to knob_keys positive integers separated by commas. */
  VariantFields override_fields(const std::string& variant) const;

  /** Writes the knob's override (without a variant) or the variant's fields into the bound tile
   * fields (keys not bound are left to the caller); returns the fields so set. */
  VariantFields resolve(const std::string& variant,
                        const std::vector<std::pair<const char*, int*>>& bound) const;

  /** Unless `ok`, a UserError naming what set the tiles: "<schedule> variant '<variant>': <rule>"
   * (param "variant"), or, without a variant, the knob (param = the knob's name). */
  void require(bool ok, const std::string& variant, const std::string& rule) const;

  /** "k1=v1,k2=v2" in key order (keys missing from `f` are left out). */
  std::string key(const VariantFields& f) const;

  /** The tuner's list: `keys` without repeats (first kept), at most `cap`, the first entry (the
   * schedule's own choice) given as "" (its tiles may not satisfy a variant's rules). */
  static std::vector<std::string> candidates(const std::vector<std::string>& keys, size_t cap);

 private:
  std::string schedule_;
  std::vector<std::string> keys_;
  std::string knob_;
  size_t knob_keys_;
};

}  // namespace tbex::sched
