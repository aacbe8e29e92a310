// A shared library opened with dlopen when first needed, and its entry points bound by name: the
// loaders of cuBLAS (cublas_loader.cpp) and NCCL (nccl_loader.cpp), which keep those libraries
// out of every process that does not use them. The library stays open for the process.
#pragma once

#include <dlfcn.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "exec/exec_error.h"

namespace kvlanes::exec {

class SharedLibrary {
 public:
  // Opens the first of `names` that dlopen can; otherwise throws ExecError
  // "WHO: cannot load LIB (each name's dlerror): HINT". `family` names the library in a missing
  // symbol's error ("another FAMILY major version?").
  SharedLibrary(std::initializer_list<const char*> names, std::string who, const std::string& lib,
                const std::string& hint, std::string family)
      : who_(std::move(who)), family_(std::move(family)) {
    std::string tried;
    for (const char* n : names) {
      handle_ = ::dlopen(n, RTLD_NOW | RTLD_LOCAL);
      if (handle_ != nullptr) {
        name_ = n;
        return;
      }
      const char* err = ::dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (err ? err : n);
    }
    throw ExecError(who_ + ": cannot load " + lib + " (" + tried + "): " + hint);
  }

  // Binds `symbol` to `out`; a missing one is an ExecError naming the library opened.
  template <typename F>
  void Bind(const char* symbol, F* out) const {
    void* p = ::dlsym(handle_, symbol);
    if (p == nullptr)
      throw ExecError(who_ + ": " + name_ + " has no symbol " + symbol + " (another " + family_ +
                      " major version?)");
    *out = reinterpret_cast<F>(p);
  }

 private:
  void* handle_ = nullptr;
  std::string name_, who_, family_;
};

}  // namespace kvlanes::exec
