// A run that failed on the machine (a byte that does not match, a CUDA or NCCL error, a rank that
// died or timed out): exit code 1. Bad input (plan file, options, environment) is InputError
// (io/input_error.h): exit code 2. Messages name the rank and, where one is at fault, the
// plan operation id and page.
#pragma once

#include <stdexcept>
#include <string>

namespace kvlanes::exec {

class ExecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvlanes::exec
