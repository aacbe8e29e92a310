// `kvlanes bench kernels`: bandwidth of the materialization and tier-copy kernels (kernels/)
// against the ceilings measured in the same run, as a table and optionally JSON. The measuring
// lives in kernels/bench/bench_kernels.cu; this file parses options and reports. Formulas:
// docs/kernels.md.
#include <boost/program_options.hpp>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "io/input_error.h"
#include "io/output_file.h"
#include "kernels/bench/bench_kernels.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace kvlanes::cli {
namespace {

using kernels::KernelBenchOptions;
using kernels::KernelBenchReport;

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// "64M", "1G", "4096", "4K": binary units.
int64_t ParseBytes(const std::string& text, const std::string& field) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    throw InputError("", 0, field, "not a byte count: '" + text + "'");
  }
  const std::string suffix = text.substr(used);
  int shift = 0;
  if (suffix == "K" || suffix == "KiB")
    shift = 10;
  else if (suffix == "M" || suffix == "MiB")
    shift = 20;
  else if (suffix == "G" || suffix == "GiB")
    shift = 30;
  else if (!suffix.empty())
    throw InputError("", 0, field, "unknown unit in '" + text + "'");
  if (value <= 0) throw InputError("", 0, field, "must be positive: '" + text + "'");
  return static_cast<int64_t>(value) << shift;
}

std::vector<std::pair<int64_t, int64_t>> ParseShapes(const std::string& text) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (const std::string& item : SplitCommas(text)) {
    const auto x = item.find('x');
    if (x == std::string::npos) {
      throw InputError("", 0, "tier-shapes", "expected ELEMxTOKENS, got '" + item + "'");
    }
    shapes.push_back({ParseBytes(item.substr(0, x), "tier-shapes"),
                      ParseBytes(item.substr(x + 1), "tier-shapes")});
  }
  if (shapes.empty()) throw InputError("", 0, "tier-shapes", "no shape given");
  return shapes;
}

#if defined(KVLANES_WITH_CUDA)
std::string Mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  return buf;
}

void PrintReport(const KernelBenchReport& r, std::ostream& out) {
  const auto& c = r.context;
  char line[256];
  out << "device: " << c.device_name << " (" << c.pci_bus_id << "), " << c.sm_count << " SMs, L2 "
      << c.l2_bytes / 1000000.0 << " MB, memory " << c.memory_bytes / 1073741824.0
      << " GiB; driver " << c.driver_version << ", runtime " << c.runtime_version << "; date "
      << c.date_utc << "\n";
  out << "config: layers " << r.options.num_layers << ", page_tokens " << r.options.page_tokens
      << ", pools (elem bytes)";
  for (int64_t e : r.options.pool_elem_bytes) out << " " << e;
  out << ", ranks " << r.options.num_ranks << ", warm-up " << r.options.warmup << ", repeats "
      << r.options.repeats << " (median), tier repeats " << r.options.tier_repeats
      << ", tier run pages " << r.options.tier_run_pages << ", seed " << r.options.seed << "\n\n";

  out << "Materialization kernels vs cudaMemcpyAsync D2D of the same payload (GB/s count bytes "
         "read + written)\n";
  std::snprintf(line, sizeof line, "%-30s %12s %6s %10s %10s %11s %11s %8s %8s %6s\n", "kernel",
                "payload", "pages", "kernel_ms", "memcpy_ms", "kernel_GB/s", "memcpy_GB/s",
                "fraction", "vs_alt", "copy");
  out << line;
  for (const auto& k : r.kernels) {
    char alt[32] = "";
    if (k.alt_ceiling_ms > 0) std::snprintf(alt, sizeof alt, "%.1f%%", 100 * k.alt_fraction);
    std::snprintf(line, sizeof line,
                  "%-30s %12s %6lld %10.4f %10.4f %11.1f %11.1f %7.1f%% %8s %6s\n",
                  k.kernel.c_str(), Mib(k.payload_bytes).c_str(), static_cast<long long>(k.pages),
                  k.kernel_ms, k.memcpy_ms, k.kernel_gbps, k.memcpy_gbps, 100 * k.fraction, alt,
                  k.copy.c_str());
    out << line;
  }
  out << "(cudaMemsetAsync of the same payload, write-only:";
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    if (i > 0 && r.kernels[i].payload_bytes == r.kernels[i - 1].payload_bytes) continue;
    std::snprintf(line, sizeof line, " %s %.4f ms = %.1f GB/s;",
                  Mib(r.kernels[i].payload_bytes).c_str(), r.kernels[i].memset_ms,
                  r.kernels[i].payload_bytes / (r.kernels[i].memset_ms * 1e6));
    out << line;
  }
  out << ")\ncopy: bulk (bulk copies, the TMA unit) or warps (the warp kernel); bulk copies "
      << r.bulk_copies << "\n";
  out << "vs_alt (scatter_dense): time of copying its owned share at memcpy speed and zeroing "
         "the rest at memset speed, over its time\n";
  if (!r.options.scatter_variants.empty()) {
    out << "scatter_dense[NAME]: the scatter_dense variant NAME (tiles, warp_spans, "
           "warp_spans_streaming: one pass; split: zeros by warp_spans_streaming, then the owned "
           "pages by the copy kernel; fused, the executor's kernel: the owned pages' copy and the "
           "zeros in one launch; split and fused get the owned-page list), default launch shape; "
           "the plain scatter_dense rows are the pieces variant; docs/kernels.md\n";
  }

  out << "\nTier copies vs one contiguous pinned cudaMemcpyAsync of the same bytes, same "
         "direction (GB/s = payload / time)\n";
  std::snprintf(line, sizeof line, "%-18s %4s %8s %9s %9s %8s %9s %8s %11s %8s\n", "layout", "dir",
                "shape", "chunk_B", "variant", "copies", "ms", "GB/s", "contig_GB/s", "fraction");
  out << line;
  for (const auto& t : r.tiers) {
    const std::string shape = std::to_string(t.elem_bytes) + "x" + std::to_string(t.page_tokens);
    std::snprintf(line, sizeof line, "%-18s %4s %8s %9lld %9s %8lld %9.3f %8.2f %11.2f %7.1f%%\n",
                  t.layout.c_str(), t.direction.c_str(), shape.c_str(),
                  static_cast<long long>(t.chunk_bytes), t.variant.c_str(),
                  static_cast<long long>(t.copies), t.ms, t.gbps, t.contiguous_gbps,
                  100 * t.fraction);
    out << line;
  }

  out << "\nCrossover (smallest measured chunk at which the memcpy strategy is at least as fast "
         "as the kernel)\n";
  for (const auto& x : r.crossovers) {
    std::snprintf(line, sizeof line, "%-18s %4s %9s  %s\n", x.layout.c_str(), x.direction.c_str(),
                  x.memcpy_variant.c_str(), x.note.c_str());
    out << line;
  }

  if (!r.tune.empty()) {
    out << "\nLaunch tuning sweep\n";
    std::snprintf(line, sizeof line, "%-40s %7s %7s %5s %6s %5s %9s %9s\n", "copy", "threads",
                  "piece", "ctas", "unroll", "order", "ms", "GB/s");
    out << line;
    for (const auto& t : r.tune) {
      std::snprintf(line, sizeof line, "%-40s %7d %7d %5d %6d %5s %9.4f %9.1f\n", t.what.c_str(),
                    t.threads_per_block, t.piece_bytes, t.ctas_per_sm, t.unroll,
                    t.layer_major ? "layer" : "page", t.ms, t.gbps);
      out << line;
    }
  }
}

nlohmann::json ReportToJson(const KernelBenchReport& r) {
  using nlohmann::json;
  const auto& o = r.options;
  json j;
  j["context"] = {{"device_name", r.context.device_name},
                  {"pci_bus_id", r.context.pci_bus_id},
                  {"sm_count", r.context.sm_count},
                  {"l2_bytes", r.context.l2_bytes},
                  {"memory_bytes", r.context.memory_bytes},
                  {"driver_version", r.context.driver_version},
                  {"runtime_version", r.context.runtime_version},
                  {"date_utc", r.context.date_utc}};
  json shapes = json::array();
  for (const auto& [e, pt] : o.tier_shapes)
    shapes.push_back({{"elem_bytes", e}, {"page_tokens", pt}});
  json variants = json::array();
  for (kernels::ScatterVariant v : o.scatter_variants)
    variants.push_back(std::string(kernels::kScatterVariantNames.Name(v)));
  j["options"] = {{"sizes_bytes", o.sizes_bytes},
                  {"pool_elem_bytes", o.pool_elem_bytes},
                  {"page_tokens", o.page_tokens},
                  {"num_layers", o.num_layers},
                  {"num_ranks", o.num_ranks},
                  {"warmup", o.warmup},
                  {"repeats", o.repeats},
                  {"tier_bytes", o.tier_bytes},
                  {"host_pool_bytes", o.host_pool_bytes},
                  {"tier_shapes", shapes},
                  {"tier_run_pages", o.tier_run_pages},
                  {"tier_repeats", o.tier_repeats},
                  {"scatter_variants", variants},
                  {"tune", o.tune},
                  {"seed", o.seed},
                  {"run_materialize", o.run_materialize},
                  {"run_tier", o.run_tier},
                  {"device", o.device},
                  {"rotate_min_bytes", o.rotate_min_bytes}};
  j["bulk_copies"] = r.bulk_copies;
  j["kernels"] = json::array();
  for (const auto& k : r.kernels) {
    j["kernels"].push_back({{"kernel", k.kernel},
                            {"pages", k.pages},
                            {"payload_bytes", k.payload_bytes},
                            {"moved_bytes", k.moved_bytes},
                            {"kernel_ms", k.kernel_ms},
                            {"memcpy_ms", k.memcpy_ms},
                            {"kernel_gbps", k.kernel_gbps},
                            {"memcpy_gbps", k.memcpy_gbps},
                            {"fraction", k.fraction},
                            {"memset_ms", k.memset_ms},
                            {"alt_ceiling_ms", k.alt_ceiling_ms},
                            {"alt_fraction", k.alt_fraction}});
    if (!k.copy.empty()) j["kernels"].back()["copy"] = k.copy;
  }
  j["tiers"] = json::array();
  for (const auto& t : r.tiers) {
    j["tiers"].push_back({{"layout", t.layout},
                          {"direction", t.direction},
                          {"variant", t.variant},
                          {"elem_bytes", t.elem_bytes},
                          {"page_tokens", t.page_tokens},
                          {"chunk_bytes", t.chunk_bytes},
                          {"pages", t.pages},
                          {"payload_bytes", t.payload_bytes},
                          {"copies", t.copies},
                          {"ms", t.ms},
                          {"gbps", t.gbps},
                          {"contiguous_gbps", t.contiguous_gbps},
                          {"fraction", t.fraction}});
  }
  j["crossovers"] = json::array();
  for (const auto& x : r.crossovers) {
    j["crossovers"].push_back({{"layout", x.layout},
                               {"direction", x.direction},
                               {"memcpy_variant", x.memcpy_variant},
                               {"first_chunk_bytes_memcpy_wins", x.first_chunk_bytes_memcpy_wins},
                               {"note", x.note}});
  }
  j["tune"] = json::array();
  for (const auto& t : r.tune) {
    j["tune"].push_back({{"what", t.what},
                         {"threads_per_block", t.threads_per_block},
                         {"piece_bytes", t.piece_bytes},
                         {"ctas_per_sm", t.ctas_per_sm},
                         {"unroll", t.unroll},
                         {"layer_major", t.layer_major},
                         {"ms", t.ms},
                         {"gbps", t.gbps}});
  }
  return j;
}
#endif  // KVLANES_WITH_CUDA

// The options of bench kernels, as given (sizes and shapes as text, parsed after).
struct KernelsArgs {
  KernelBenchOptions opt;
  std::string sizes = "16M,64M,256M,1G";
  std::string pools = "656,132";
  std::string tier_bytes = "256M";
  std::string host_pool = "4G";
  std::string tier_shapes = "132x32,656x8,656x16,656x64,656x256,656x1600";
  std::string json_path;
  std::string parts = "materialize,tier";
  std::string scatter_variants;
};

// bench kernels' options, bound to `a` (defaults from its initial values).
boost::program_options::options_description KernelsOptions(KernelsArgs& a) {
  namespace po = boost::program_options;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "sizes", po::value(&a.sizes)->default_value(a.sizes),
      "materialization payloads (logical-dense bytes, rounded down to whole pages), comma list "
      "with K/M/G suffixes")("pools", po::value(&a.pools)->default_value(a.pools),
                             "bytes per token-layer of each pool copied together (1 to 4 a.pools)")(
      "page-tokens", po::value(&a.opt.page_tokens)->default_value(a.opt.page_tokens),
      "tokens per page for the materialization kernels")(
      "layers", po::value(&a.opt.num_layers)->default_value(a.opt.num_layers), "layers per pool")(
      "ranks", po::value(&a.opt.num_ranks)->default_value(a.opt.num_ranks),
      "ranks N of the all-gather / zigzag / peer layouts (peer_gather uses at most 16)")(
      "warmup", po::value(&a.opt.warmup)->default_value(a.opt.warmup), "untimed passes first")(
      "repeats", po::value(&a.opt.repeats)->default_value(a.opt.repeats),
      "timed passes per materialization measurement (the median is reported)")(
      "tier-bytes", po::value(&a.tier_bytes)->default_value(a.tier_bytes),
      "payload of each tier copy")("host-pool-bytes",
                                   po::value(&a.host_pool)->default_value(a.host_pool),
                                   "pinned host pool the tier pages are scattered over")(
      "tier-shapes", po::value(&a.tier_shapes)->default_value(a.tier_shapes),
      "tier page shapes ELEMxTOKENS (chunk = their product), comma list")(
      "tier-run-pages", po::value(&a.opt.tier_run_pages)->default_value(a.opt.tier_run_pages),
      "adjacent pages per run in the scattered tier page list (1 = fully scattered)")(
      "tier-repeats", po::value(&a.opt.tier_repeats)->default_value(a.opt.tier_repeats),
      "timed passes per tier measurement")("tune", po::bool_switch(&a.opt.tune),
                                           "also sweep kernel launch shapes")(
      "seed", po::value(&a.opt.seed)->default_value(a.opt.seed), "seed of the random page lists")(
      "device", po::value(&a.opt.device)->default_value(a.opt.device), "CUDA device ordinal")(
      "parts", po::value(&a.parts)->default_value(a.parts),
      "which parts to run: materialize, tier, or both (comma list)")(
      "scatter-variants", po::value(&a.scatter_variants),
      "also time these scatter_dense kernel variants (comma list of tiles, warp_spans, "
      "warp_spans_streaming, split, fused, or their numbers 1..5; docs/kernels.md): rows "
      "scatter_dense[NAME] and scatter_dense[NAME](0% owned)")(
      "json", po::value(&a.json_path), "also write the full report as JSON to this file");
  return visible;
}

void KernelsUsage(std::ostream& out, const std::string& name,
                  const boost::program_options::options_description& visible) {
  PrintHelp(
      out, name + " [options]",
      "GPU benchmark of kernels/: pack, unpack, zigzag_reorder, scatter_dense and\n"
      "peer_gather against a device-to-device cudaMemcpyAsync of the same bytes (NAME(bulk):\n"
      "the same copy by bulk copies, the TMA unit, sm_90+; column copy says which ran),\n"
      "and the tier copies (kernel and cudaMemcpyAsync-runs strategies, every host layout, both\n"
      "directions) against a contiguous pinned copy. Medians of CUDA-event timings;\n"
      "formulas in docs/kernels.md.",
      visible,
      {"kvlanes bench kernels", "kvlanes bench kernels --sizes 16M,64M,256M,1G --pools 656,132"});
}

}  // namespace

int CmdBenchKernels(int argc, const char* const* argv) {
  namespace po = boost::program_options;
  const std::string name = argc > 0 ? argv[0] : "kvlanes bench kernels";
  KernelsArgs args;
  const po::options_description visible = KernelsOptions(args);
  KernelBenchOptions& opt = args.opt;

  const auto usage = [&](std::ostream& out) { KernelsUsage(out, name, visible); };

  po::variables_map vm;
  try {
    const po::parsed_options parsed = po::command_line_parser(argc, argv).options(visible).run();
    RefuseStrayArguments(parsed);
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << UsageErrorLine(name, e, visible) << "\n";
    usage(std::cerr);
    return 2;
  }
  if (vm.count("help")) {
    usage(std::cout);
    return 0;
  }
  try {
    opt.sizes_bytes.clear();
    for (const std::string& s : SplitCommas(args.sizes))
      opt.sizes_bytes.push_back(ParseBytes(s, "sizes"));
    if (opt.sizes_bytes.empty()) throw InputError("", 0, "sizes", "no size given");
    opt.pool_elem_bytes.clear();
    for (const std::string& s : SplitCommas(args.pools))
      opt.pool_elem_bytes.push_back(ParseBytes(s, "pools"));
    if (opt.pool_elem_bytes.empty() || opt.pool_elem_bytes.size() > 4) {
      throw InputError("", 0, "pools", "need 1 to 4 pools");
    }
    opt.tier_bytes = ParseBytes(args.tier_bytes, "tier-bytes");
    opt.host_pool_bytes = ParseBytes(args.host_pool, "host-pool-bytes");
    opt.tier_shapes = ParseShapes(args.tier_shapes);
    for (const std::string& v : SplitCommas(args.scatter_variants)) {
      // A name, or the variant's number as the measurement log's commands give it (1..5, "vN").
      const std::string digits = v.size() > 1 && v[0] == 'v' ? v.substr(1) : v;
      std::optional<kernels::ScatterVariant> variant = kernels::kScatterVariantNames.Find(v);
      if (digits.size() == 1 && digits[0] >= '0' && digits[0] <= '9')
        for (const auto& [value, variant_name] : kernels::kScatterVariantNames.entries)
          if (static_cast<int>(value) == digits[0] - '0') variant = value;
      if (!variant) variant = kernels::kScatterVariantNames.Parse(v, "scatter-variants");
      if (*variant == kernels::ScatterVariant::kPieces)
        throw InputError("", 0, "scatter-variants",
                         "pieces is the kernel of the plain scatter_dense rows, which always run");
      opt.scatter_variants.push_back(*variant);
    }
    opt.run_materialize = opt.run_tier = false;
    for (const std::string& part : SplitCommas(args.parts)) {
      if (part == "materialize") {
        opt.run_materialize = true;
      } else if (part == "tier") {
        opt.run_tier = true;
      } else {
        throw InputError("", 0, "parts", "unknown part '" + part + "'; valid: materialize, tier");
      }
    }
    if (opt.page_tokens < 1 || opt.num_layers < 1 || opt.num_ranks < 1 || opt.repeats < 1 ||
        opt.tier_repeats < 1 || opt.warmup < 0 || opt.tier_run_pages < 1) {
      throw InputError("", 0, "",
                       "page-tokens, layers, ranks, repeats, tier-repeats and "
                       "tier-run-pages must be >= 1, warmup >= 0");
    }
  } catch (const InputError& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 2;
  }

#if defined(KVLANES_WITH_CUDA)
  KernelBenchReport report;
  const std::string error = kernels::RunKernelBenchmarks(opt, &report);
  if (!error.empty()) {
    std::cerr << name << ": " << error << "\n";
    return 1;
  }
  PrintReport(report, std::cout);
  if (!args.json_path.empty()) {
    try {
      WriteFileAtomically(args.json_path, ReportToJson(report).dump(2) + "\n");
    } catch (const InputError& e) {
      std::cerr << name << ": " << e.what() << "\n";
      return 2;
    }
  }
  return 0;
#else
  (void)args.json_path;
  std::cerr << name
            << ": this build has no CUDA support (kvlanes_kernels was built without "
               "nvcc); reconfigure with CUDA available (-DKVLANES_CUDA=ON) to run the "
               "kernels benchmark\n";
  return 2;
#endif
}

}  // namespace kvlanes::cli
