/** The disk cache's settings and this process's counters (tbex/cache.h). */
#include <atomic>

#include "codegen/disk_cache_entry.h"
#include "tbex/cache.h"
#include "tbex/knobs.h"
#include "tbex/log.h"

namespace tbex {
namespace {

std::atomic<int64_t> counters[5];

int64_t get(disk::Event e) { return counters[(int)e].load(); }

}  // namespace

namespace disk {

void count(Event e) { ++counters[(int)e]; }

void log_cache(const std::string& line) {
  if (log::enabled("cache")) log::print("cache", line);
}

}  // namespace disk

CacheStats cache_stats() {
  using disk::Event;
  return CacheStats{get(Event::kHit), get(Event::kCompile), get(Event::kRebuild),
                    get(Event::kFallback), get(Event::kEviction)};
}

std::string cache_dir() { return knobs::cache_dir(); }

bool cache_enabled() { return knobs::get_bool("TBEX_CACHE"); }

}  // namespace tbex
