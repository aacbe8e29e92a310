// Errors from outside the program (trace files, YAML configs, command lines) carry where they
// came from, so the user can fix the input: "traces/x.jsonl:1204: hash_ids: must be non-empty".
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace kvlanes {

class InputError : public std::runtime_error {
 public:
  // file: path as the user gave it ("" when not from a file, e.g. a --set option).
  // line: 1-based, 0 when unknown or not line-oriented.
  // field: the JSON/YAML key or option at fault ("" when the whole record is at fault).
  InputError(std::string file, int64_t line, std::string field, std::string message)
      : std::runtime_error(Format(file, line, field, message)),
        file_(std::move(file)),
        line_(line),
        field_(std::move(field)),
        message_(std::move(message)) {}

  const std::string& file() const { return file_; }
  int64_t line() const { return line_; }
  const std::string& field() const { return field_; }
  // The message without the location prefix.
  const std::string& message() const { return message_; }

 private:
  static std::string Format(const std::string& file, int64_t line, const std::string& field,
                            const std::string& message) {
    std::ostringstream out;  // (string concatenation here trips a GCC 12 -Wrestrict false positive)
    if (!file.empty()) {
      out << file;
      if (line > 0) out << ':' << line;
      out << ": ";
    }
    if (!field.empty()) out << field << ": ";
    out << message;
    return out.str();
  }

  std::string file_;
  int64_t line_;
  std::string field_;
  std::string message_;
};

}  // namespace kvlanes
