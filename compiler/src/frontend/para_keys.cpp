/** Which para_dict / group_dict keys a TBE call may carry, and the did-you-mean for the others.
 * A misspelled key would otherwise be ignored and its default used ("stride" runs stride 1). */
#include <algorithm>

#include "tbe_args.h"
#include "tbex/errors.h"

namespace tbex {
namespace frontend {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = 3;  // farther than 2 edits is no suggestion, unless one name starts the other
  for (const std::string& k : known) {
    const size_t stem = std::min<size_t>(4, std::min(k.size(), key.size()));
    const bool shared = stem >= 3 && k.compare(0, stem, key, 0, stem) == 0;
    const size_t d = std::min(edit_distance(key, k), shared ? size_t(2) : size_t(99));
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

void check_key(const std::string& key, const std::vector<std::string>& known, const std::string& param) {
  if (std::find(known.begin(), known.end(), key) != known.end()) return;
  std::string list;
  for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
  const std::string near = closest(key, known);
  throw UserError(code::kValue, param,
                  "unknown key '" + key + "'" + (near.empty() ? "" : ": did you mean '" + near + "'?") +
                      " (keys: " + list + ")");
}

}  // namespace frontend

const std::vector<std::string>& para_dict_keys(OpKind op) {
  // Read by tbex, then attributes TBE's own op code passes through para_dict (no effect here).
  static const std::vector<std::string> filter = {
      "strides", "pads", "dilations", "res_dtype", "kernel_name", "group_dict", "groups",
      "ori_tensors", "op_type", "fusion_para"};
  static const std::vector<std::string> input = {
      "strides", "pads", "dilations", "res_dtype", "kernel_name", "group_dict", "groups",
      "tensor_bias", "ori_tensors", "op_type", "fusion_para"};
  return op == OpKind::kBackpropInput ? input : filter;
}

void check_para_dict_key(const std::string& key, OpKind op) {
  frontend::check_key(key, para_dict_keys(op), "para_dict");
}

}  // namespace tbex
