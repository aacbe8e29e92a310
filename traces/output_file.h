// Output files are written to "<path>.tmp" and renamed into place only when complete, so a
// failed or interrupted run never leaves a partial file that looks finished.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>
#include <system_error>

#include "traces/input_error.h"

namespace kvlanes {

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

// A file written as a stream (e.g. a plan) that becomes visible under its name only on
// Commit(); destroyed without Commit() it is removed.
class StreamingFile {
 public:
  explicit StreamingFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
    out_.open(tmp_, std::ios::binary | std::ios::trunc);
    if (!out_) throw InputError(path_, 0, "", "cannot open for writing");
  }
  ~StreamingFile() {
    if (!committed_) {
      out_.close();
      std::remove(tmp_.c_str());
    }
  }
  std::ostream& stream() { return out_; }
  void Commit() {
    out_.flush();
    if (!out_) throw InputError(path_, 0, "", "write failed (disk full?)");
    out_.close();
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) throw InputError(path_, 0, "", "cannot rename into place");
    committed_ = true;
  }

 private:
  std::string path_, tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

}  // namespace kvlanes
