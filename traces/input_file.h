// Whole-file reads for every input that is not a trace (plans read by line, JSON measured,
// predicted and measurement files, YAML configs, profiles and suites): bounded, so a path that
// never ends (/dev/zero, a FIFO) stops at the limit instead of filling memory, and binary data
// stops at its first chunk. Traces have their own, overridable limits (trace_reader.h).
#pragma once

#include <cstdint>
#include <string>

namespace kvlanes {

// The largest input file ReadInputFile reads by default (1 GiB, as for a trace file).
inline constexpr int64_t kMaxInputFileBytes = int64_t{1} << 30;

// The whole text of `path`; `what` names the kind of file in errors ("measured file"). Throws
// InputError naming the file: cannot open (or a directory), more than `max_bytes` bytes, a read
// error, or a control byte (below 0x20 other than tab, LF, CR: never valid in JSON or YAML text)
// with its line.
std::string ReadInputFile(const std::string& path, const std::string& what,
                          int64_t max_bytes = kMaxInputFileBytes);

}  // namespace kvlanes
