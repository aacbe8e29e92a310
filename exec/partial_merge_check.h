// partial_merge in the executor (plans of KV interleaved by token, cache.interleave_tokens): the
// attention of a few query rows over the prefix, computed the way the method computes it, and
// the same attention over the whole prefix to check it against. Plain C++ on the host, over
// values derived from the bytes each page's pattern puts in the pool (exec/pattern.h), so a page
// in the wrong slot or on the wrong rank changes the result (docs/executor.md, "partial_merge").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/pattern.h"
#include "kernels/partial_merge.h"
#include "sim/predict/plan.h"

namespace kvlanes::exec {

// The largest relative difference allowed between the merged output (and lse) and the attention
// over the whole prefix: |merged - full| / max(1, |full|). fp32 outputs of double sums.
inline constexpr double kPartialMergeTolerance = 1e-5;

struct PartialMergeShape {
  // Query rows: the first half at the positions of new tokens (they see the whole prefix), the
  // second half at positions spread over the prefix, so the causal mask checks the position of
  // every key a rank holds (RowPosition).
  int64_t rows = 8;
  int64_t key_dim = 16;       // per query row and key
  int64_t value_dim = 8;      // per value
  int64_t prefix_tokens = 0;  // keys: every prefix token
  int64_t page_tokens = 0;
  int64_t interleave = 1;    // cache.interleave_tokens
  int64_t record_bytes = 0;  // bytes of one token in pool 0 (its page-layer chunk is token-major)
  int64_t token_bytes = 0;   // the first bytes of that record its key and value derive from

  static PartialMergeShape For(const ExecGeometry& geo, const RequestPlan& p);
  // Rank `rank`'s share of the query rows (rows rank, rank + ranks, ...), row-major.
  std::vector<float> QueryRows(int64_t request, int rank, int ranks) const;
  // All rows from the ranks' shares (an all-gather's output, rank order). Throws ExecError on a
  // share of the wrong size.
  std::vector<float> AssembleQueries(const std::vector<std::string>& shares, int ranks) const;
  // The attention of `queries` over the prefix tokens rank `rank` holds (its pages p, p mod
  // ranks == rank, each holding the unit's tokens of that rank), with tags[p] the page's content.
  kernels::PartialOutput RankPartial(const std::vector<float>& queries,
                                     const std::vector<PageTag>& tags, int rank, int ranks) const;
  // The attention over every prefix token, in token order (the reference).
  kernels::PartialOutput FullAttention(const std::vector<float>& queries,
                                       const std::vector<PageTag>& tags, int ranks) const;
  int64_t RowPosition(int64_t i) const;
  // Logical position of token j of page p (unit p / ranks, rank p mod ranks).
  int64_t TokenPosition(int64_t page, int64_t j, int ranks) const;
};

std::string SerializePartial(const kernels::PartialOutput& p);
// Throws ExecError when the bytes are not one partial of `shape`.
kernels::PartialOutput DeserializePartial(const std::string& bytes, const PartialMergeShape& shape);
int64_t PartialBytes(const PartialMergeShape& shape);

struct MergeError {
  double max_rel = 0;  // largest |merged - full| / max(1, |full|) over outputs and lse
  int64_t row = -1;    // its row
};
MergeError CompareMerged(const kernels::PartialOutput& merged, const kernels::PartialOutput& full);

}  // namespace kvlanes::exec
