// Command-line parsing shared by the subcommands.
#pragma once

#include <cstdio>

#include <boost/program_options.hpp>

namespace kvlanes::cli {

// Parses argv[1..] into vm (positional arguments per `pos`, may be null). On a usage error
// prints it with a pointer to --help and returns false (the caller exits with 2).
inline bool ParseArgs(int argc, const char* const* argv, const boost::program_options::options_description& desc,
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

}  // namespace kvlanes::cli
