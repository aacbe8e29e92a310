// YAML inputs (config files, --set values, hardware profiles, a plan's stored profile, regress
// suites) read so that every problem is an InputError naming file, line and key: syntax errors,
// a second document after `---`, keys given twice in one map (yaml-cpp keeps both and lookups
// take the first), alias cycles (`x: &a [1, *a]`), nesting past kMaxYamlDepth and documents
// whose alias expansion is huge.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

namespace kvlanes {

// Most nodes one YAML input may expand to (aliases included), so `&a [*a, *a, ...]` chains
// cannot make a check or a reader walk without bound.
inline constexpr int64_t kMaxYamlNodes = 1'000'000;

// Deepest nesting of maps and sequences one YAML input may have (as for JSON inputs); every
// walk over a checked document may therefore recurse.
inline constexpr int kMaxYamlDepth = 256;

// Loads a YAML file; `what` names it in errors ("config file"). Throws InputError.
YAML::Node LoadYamlFile(const std::string& path, const std::string& what);

// Parses one YAML value given on a command line; errors name `field` (e.g. "--set cache.x").
YAML::Node LoadYamlText(const std::string& text, const std::string& field);

// Parses YAML text read from `file` (already read and UTF-8 checked) and checks it with
// CheckYamlKeys: the one parser every YAML input goes through. Throws InputError.
YAML::Node ParseYamlDocument(const std::string& text, const std::string& file);

// Throws InputError(file, line, key path) for the second occurrence of a key in one map, a node
// that contains itself through an alias, nesting deeper than kMaxYamlDepth, or a document that
// expands to more than kMaxYamlNodes nodes. Recursion is bounded by kMaxYamlDepth.
void CheckYamlKeys(const YAML::Node& root, const std::string& file, const std::string& field);

// 1-based line of a node, 0 when yaml-cpp does not know it.
inline int64_t YamlLine(const YAML::Node& n) { return n.Mark().line >= 0 ? n.Mark().line + 1 : 0; }

// "a map", "a list", "a scalar", "null": what a node is, for wrong-type messages.
const char* YamlKind(const YAML::Node& n);

}  // namespace kvlanes
