#pragma once
/** TBEX_LOG: comma-separated topics printed to stderr ("help" lists them). */
#include <string>
#include <utility>
#include <vector>

namespace tbex::log {

/** (topic, what it prints), the topics TBEX_LOG knows. */
const std::vector<std::pair<std::string, std::string>>& topics();

/** True when TBEX_LOG names `topic` or "all". An unknown topic in TBEX_LOG is reported once on
 * stderr; "help" prints the topics once. */
bool enabled(const char* topic);

void print(const char* topic, const std::string& line);

/** Reports an unknown topic or prints the topic list for "help" now (else the first enabled()
 * call does): entry points call it once so a bad TBEX_LOG is never silent. */
void check();

/** What a warning is about: the cache could not be used, or a call takes a slower path. */
enum class WarningKind { kCache, kPerformance };

/** A warning the user must see (a slow fallback, ...): printed on stderr as "tbex: warning:
 * ...", or handed to the sink a binding installed (Python turns it into a `warnings` entry of
 * the kind's category). `once_key`: only the first warning with this key in the process is
 * given. */
void warn_once(const std::string& once_key, const std::string& message,
               WarningKind kind = WarningKind::kCache);
void set_warning_sink(void (*sink)(WarningKind kind, const std::string& message));

/** Progress lines ("tbex: compiling ...") are printed when stderr is a terminal or TBEX_LOG
 * names "progress". */
bool progress_enabled();

/** Prints `line` on stderr if the scope is still alive TBEX_PROGRESS_MS (default 1000) from
 * now: a compile that turns out to be slow says so while it runs. Nothing when progress is off. */
class SlowNotice {
 public:
  explicit SlowNotice(std::string line);
  ~SlowNotice();
  SlowNotice(const SlowNotice&) = delete;
  SlowNotice& operator=(const SlowNotice&) = delete;

 private:
  struct State;
  State* state_ = nullptr;
};

}  // namespace tbex::log
