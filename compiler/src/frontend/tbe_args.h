#pragma once
/** Pieces of the TBE frontends shared by tbe_args.cpp (private to compiler/src/frontend). */
#include <optional>
#include <string>
#include <vector>

#include "tbex/problem.h"

namespace tbex::frontend {

/** Resolves Cin and groups from para_dict (groups, group_dict) and the call, and checks a
 * caller's group_dict against the derived one; a disagreement names the key that is out of line
 * with the others (docs/group_dict.md). cin_known: dX's input_size C; x_c1: dW's x C1. */
void resolve_groups(ConvGeometry& g, int64_t cin_pg, const ParaDict& para,
                    std::optional<int64_t> cin_known, std::optional<int64_t> x_c1);

/** The entry of `known` closest to `key` (edit distance <= 2 or a shared stem), else "". */
std::string closest(const std::string& key, const std::vector<std::string>& known);

/** UserError(code::kValue, param) for a key not in `known`, with a did-you-mean. */
void check_key(const std::string& key, const std::vector<std::string>& known, const std::string& param);

}  // namespace tbex::frontend
