// Output files are written to "<path>.tmp" and renamed into place only when complete, so a
// failed or interrupted run never leaves a partial file that looks finished.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>
#include <system_error>

#include "traces/input_error.h"

namespace kvlanes::cli {

inline void WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, 0, "", "cannot open for writing");
    out << content;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(path, 0, "", "write failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(path, 0, "", "cannot rename " + tmp + " into place");
  }
}

}  // namespace kvlanes::cli
