// One name table per enum: the names the config, the command line, JSON files and error
// messages use for its values, written once. A table gives parse (with an error that lists the
// valid names and suggests the closest one), name, and the list of valid names.
//
// Spelling rule (docs/architecture.md, "Names"): lower case; words joined by '_' (as in SGLang's
// option values, e.g. `write_through_selective`); where a name was published with '-' it is kept
// ("per-layer", "slot-modulo"), because plans and golden files carry it.
//
//   inline constexpr NameTable<EvictionOrder, 4> kEvictionOrderNames{{{
//       {EvictionOrder::kLru, "lru"}, {EvictionOrder::kLfu, "lfu"}, ...}}, "eviction order"};
//   kEvictionOrderNames.Parse("lfu", "cache.eviction")   -> EvictionOrder::kLfu
//   kEvictionOrderNames.Name(EvictionOrder::kLru)        -> "lru"
//   kEvictionOrderNames.List()                           -> "lru, lfu, fifo, slru"
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/input_error.h"

namespace kvlanes {

// Edit distance (insertions, deletions, substitutions) between two short names.
inline size_t NameDistance(std::string_view a, std::string_view b) {
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

// The closest of `names` to `given` when it is a plausible typo (distance at most a third of
// the name's length, at least 1), else empty.
template <typename Names>
std::string ClosestName(std::string_view given, const Names& names) {
  std::string best;
  size_t best_d = static_cast<size_t>(-1);
  for (std::string_view n : names) {
    const size_t d = NameDistance(given, n);
    if (d < best_d) best_d = d, best = std::string(n);
  }
  const size_t limit = std::max<size_t>(1, given.size() / 3);
  return best_d <= limit ? best : std::string();
}

// "a, b, c".
template <typename Names>
std::string JoinNames(const Names& names) {
  std::string list;
  for (std::string_view n : names) {
    if (!list.empty()) list += ", ";
    list += n;
  }
  return list;
}

// "(valid: a, b, c)", with "; did you mean 'b'?" when one of `names` is close to `given`: the tail
// of every "unknown ..." message (names of values, config keys, JSON and YAML keys).
template <typename Names>
std::string ValidNamesNote(std::string_view given, const Names& names) {
  std::string note = "(valid: " + JoinNames(names) + ")";
  const std::string close = ClosestName(given, names);
  if (!close.empty()) note += "; did you mean '" + close + "'?";
  return note;
}

// "unknown <what> 'x' (valid: a, b, c)" with the suggestion of ValidNamesNote. `where` is the
// field or option at fault; `file`/`line` where the value came from ("" / 0 for a command line).
template <typename Names>
[[noreturn]] void ThrowUnknownName(std::string_view what, std::string_view given,
                                   const Names& names, const std::string& where,
                                   const std::string& file = "", int64_t line = 0) {
  throw InputError(file, line, where,
                   "unknown " + std::string(what) + " '" + std::string(given) + "' " +
                       ValidNamesNote(given, names));
}

template <typename E, size_t N>
struct NameTable {
  std::array<std::pair<E, std::string_view>, N> entries;
  std::string_view what;  // what the values are called in messages: "eviction order"

  // The name of `value`. A value missing from the table is a bug (aborts).
  constexpr std::string_view Name(E value) const {
    for (const auto& [v, n] : entries)
      if (v == value) return n;
    std::abort();
  }
  // C string of Name(), for printf-style and JSON callers (the names are literals).
  const char* CName(E value) const { return Name(value).data(); }

  std::optional<E> Find(std::string_view name) const {
    for (const auto& [v, n] : entries)
      if (n == name) return v;
    return std::nullopt;
  }
  // Throws InputError naming `where` (and file/line when given), the valid names and the closest.
  E Parse(std::string_view name, const std::string& where, const std::string& file = "",
          int64_t line = 0) const {
    if (auto v = Find(name)) return *v;
    ThrowUnknownName(what, name, Names(), where, file, line);
  }
  std::vector<std::string_view> Names() const {
    std::vector<std::string_view> out;
    for (const auto& e : entries) out.push_back(e.second);
    return out;
  }
  // "a, b, c": for help texts and messages.
  std::string List() const { return JoinNames(Names()); }
};

}  // namespace kvlanes
