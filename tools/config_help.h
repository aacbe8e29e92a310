// The config keys' part of --help (replay, compare, sweep, explain): every key with its help and
// default, and for every key that takes a name, the names its parser accepts.
#pragma once

#include <string>

namespace kvlanes::cli {

// The names config key `key` accepts ("lru, lfu, fifo, slru"), taken from the parser itself: the
// list its "unknown ..." error gives for a value that no table holds. "" for keys that take no
// name (numbers, paths, the policy: PoliciesHelp lists those).
std::string ValidNamesOf(const std::string& key);

// ConfigKeysHelp() with "; one of: a, b, c" inside each named key's "(default ...)".
std::string ConfigHelp();

}  // namespace kvlanes::cli
