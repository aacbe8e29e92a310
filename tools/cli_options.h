// Command-line parsing shared by the subcommands.
#pragma once

#include <boost/program_options.hpp>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "traces/input_error.h"

namespace kvlanes::cli {

// Parses argv[1..] into vm (positional arguments per `pos`, may be null). On a usage error
// prints it with a pointer to --help and returns false (the caller exits with 2).
inline bool ParseArgs(int argc, const char* const* argv,
                      const boost::program_options::options_description& desc,
                      const boost::program_options::positional_options_description* pos,
                      boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  try {
    po::command_line_parser parser(argc, argv);
    parser.options(desc);
    if (pos) parser.positional(*pos);
    po::store(parser.run(), vm);
    po::notify(vm);
    return true;
  } catch (const po::error& e) {
    std::fprintf(stderr, "%s: %s\n(see %s --help)\n", argv[0], e.what(), argv[0]);
    return false;
  }
}

// "0,1,3" -> {0, 1, 3} (option --devices). Throws InputError naming --devices otherwise.
inline std::vector<int> ParseDevices(const std::string& s) {
  std::vector<int> d;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos)
      throw InputError("", 0, "--devices",
                       "'" + s + "': expected a comma-separated list of GPU indices");
    d.push_back(std::stoi(item));
  }
  return d;
}

}  // namespace kvlanes::cli
