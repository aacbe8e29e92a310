// Strict JSON parsing for every JSON input of the project: a syntax error, a number no double
// can hold (1e400) and a key given twice in one object are input errors naming file, line and
// field, never a library exception or a silent "last key wins".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kvlanes {

// Parses `text`, read from `file`, whose first line is line `first_line` of that file (1 for a
// whole file, n for line n of a JSON Lines file). Throws InputError(file, line, field).
nlohmann::json ParseJsonStrict(std::string_view text, const std::string& file,
                               int64_t first_line = 1);

}  // namespace kvlanes
