#include "traces/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "traces/input_error.h"
#include "traces/json_location.h"

namespace kvlanes {

std::string ReadInputFile(const std::string& path, const std::string& what, int64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw InputError(path, 0, "", "cannot open " + what);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw InputError(path, 0, "", "cannot open " + what);
  std::string text;
  constexpr size_t kChunk = size_t{1} << 20;
  for (;;) {
    const size_t old = text.size();
    text.resize(old + kChunk);
    const size_t n = std::fread(text.data() + old, 1, kChunk, f);
    text.resize(old + n);
    for (size_t i = old; i < text.size(); ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
        std::fclose(f);
        char byte[8];
        std::snprintf(byte, sizeof byte, "0x%02X", c);
        throw InputError(path, LineOfByte(text, i + 1), "",
                         std::string("control byte ") + byte + " is not allowed in a " + what +
                             " (is this a binary file?)");
      }
    }
    if (static_cast<int64_t>(text.size()) > max_bytes) {
      std::fclose(f);
      throw InputError(path, 0, "",
                       what + " is more than " + std::to_string(max_bytes) + " bytes, the limit");
    }
    if (n < kChunk) break;
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw InputError(path, 0, "", "cannot read " + what + ": " + std::strerror(err));
  return text;
}

}  // namespace kvlanes
