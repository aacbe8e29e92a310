#include "io/json_strict.h"

#include <algorithm>
#include <cstddef>
#include <set>
#include <variant>
#include <vector>

#include "io/input_error.h"
#include "io/json_location.h"
#include "io/json_scan.h"

namespace kvlanes {
namespace {

using Json = nlohmann::json;

// Thrown out of the parser callback at the second occurrence of a key.
struct DuplicateKey {
  std::vector<JsonStep> path;  // to the key
};

// Thrown out of the parser callback when arrays and objects nest deeper than kMaxJsonDepth: the
// parser itself is iterative, but copying, comparing and printing a value recurse, so a deep
// document would exhaust the stack wherever a reader touched it.
struct TooDeep {
  std::vector<JsonStep> path;  // to the container that went past the limit
};

// Tracks the path of the value being parsed, so a duplicate key is named with its full path.
class KeyTracker {
 public:
  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (frames_.size() >= static_cast<size_t>(reader::kMaxJsonDepth)) throw TooDeep{Path()};
        frames_.push_back(Frame{event == Json::parse_event_t::object_start, {}, {}, 0});
        break;
      case Json::parse_event_t::key: {
        Frame& f = frames_.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) throw DuplicateKey{Path()};
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        frames_.pop_back();
        Completed();
        break;
      case Json::parse_event_t::value:
        Completed();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    size_t index;
  };
  void Completed() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  std::vector<JsonStep> Path() const {
    std::vector<JsonStep> p;
    for (const Frame& f : frames_) {
      if (f.object)
        p.emplace_back(f.key);
      else
        p.emplace_back(f.index);
    }
    return p;
  }
  std::vector<Frame> frames_;
};

// nlohmann names the offending token ("number overflow parsing '1e400'"); its first occurrence
// in the text gives the line.
int64_t LineOfQuotedToken(std::string_view text, const std::string& what) {
  const size_t open = what.rfind("parsing '");
  if (open == std::string::npos) return 1;
  const size_t start = open + 9;
  const size_t close = what.find('\'', start);
  if (close == std::string::npos) return 1;
  const size_t at = text.find(what.substr(start, close - start));
  return at == std::string_view::npos ? 1 : LineOfByte(text, at + 1);
}

// 1-based line of the first bracket that opens nesting level `depth + 1` (strings skipped).
int64_t LineOfDepth(std::string_view text, int depth) {
  int level = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++level > depth) return LineOfByte(text, i + 1);
    } else if (c == ']' || c == '}') {
      --level;
    }
  }
  return 1;
}

}  // namespace

Json ParseJsonStrict(std::string_view text, const std::string& file, int64_t first_line) {
  const int64_t base = first_line - 1;
  try {
    return Json::parse(text.begin(), text.end(), KeyTracker{});
  } catch (const DuplicateKey& d) {
    const int64_t line = Json::accept(text.begin(), text.end()) ? JsonLineOf(text, d.path) : 1;
    const std::string key = std::get<std::string>(d.path.back());
    throw InputError(file, base + line, JsonPathName(d.path),
                     "key '" + key + "' given twice in one object");
  } catch (const TooDeep& d) {
    // The path to the container past the limit, its first steps only (it has 256).
    constexpr size_t kShown = 8;
    const std::vector<JsonStep> head(
        d.path.begin(),
        d.path.begin() + static_cast<std::ptrdiff_t>(std::min(d.path.size(), kShown)));
    const std::string field = JsonPathName(head) + (d.path.size() > kShown ? "..." : "");
    throw InputError(
        file, base + LineOfDepth(text, reader::kMaxJsonDepth), field,
        "arrays and objects nest deeper than " + std::to_string(reader::kMaxJsonDepth) + " levels");
  } catch (const Json::parse_error& e) {
    throw InputError(file, base + LineOfByte(text, e.byte), "",
                     std::string("malformed JSON: ") + e.what());
  } catch (const Json::out_of_range& e) {
    // 406: a number beyond the range of a double.
    throw InputError(file, base + LineOfQuotedToken(text, e.what()), "",
                     std::string("number out of range: ") + e.what());
  } catch (const Json::exception& e) {
    throw InputError(file, base + 1, "", std::string("malformed JSON: ") + e.what());
  }
}

}  // namespace kvlanes
