#pragma once
/** The tuning database file (see tbex/tune.h): read with a cache on (mtime, size), written as a
 * whole under an flock on <path>.lock, published by temp file + rename. Selection reads it;
 * tune() writes it. */
#include <string>

#include "tbex/select.h"

namespace tbex::tuning {

/** What an entry is keyed by. */
struct Key {
  std::string problem, target, tbex;
  int threads = 0;
};

/** The key of `problem` at `threads` for `target` (a Halide target string) and this tbex version. */
Key key_of(const Problem& problem, int threads, const std::string& target);

bool lookup(const std::string& path, const Key& key, TuningEntry& entry);

/** Adds or replaces the entry of `key` (with its measured untuned time, -1 if unknown); "" or
 * why the file could not be written. A corrupt file is replaced. */
std::string store(const std::string& path, const Key& key, const TuningEntry& entry,
                  double default_ms);

}  // namespace tbex::tuning
