// YAML inputs (config files, --set values, hardware profiles) read so that every problem is an
// InputError naming file, line and key: syntax errors, keys given twice in one map (yaml-cpp
// keeps both and lookups take the first), and documents whose alias expansion is huge.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

namespace kvlanes {

// Most nodes one YAML input may expand to (aliases included), so `&a [*a, *a, ...]` chains
// cannot make a check or a reader walk without bound.
inline constexpr int64_t kMaxYamlNodes = 1'000'000;

// Loads a YAML file; `what` names it in errors ("config file"). Throws InputError.
YAML::Node LoadYamlFile(const std::string& path, const std::string& what);

// Parses one YAML value given on a command line; errors name `field` (e.g. "--set cache.x").
YAML::Node LoadYamlText(const std::string& text, const std::string& field);

// Throws InputError(file, line, key path) for the second occurrence of a key in one map, or
// when the document expands to more than kMaxYamlNodes nodes. Iterative, so nesting depth does
// not grow the stack.
void CheckYamlKeys(const YAML::Node& root, const std::string& file, const std::string& field);

// 1-based line of a node, 0 when yaml-cpp does not know it.
inline int64_t YamlLine(const YAML::Node& n) { return n.Mark().line >= 0 ? n.Mark().line + 1 : 0; }

}  // namespace kvlanes
