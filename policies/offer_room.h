// What the admission rules (TinyLFU, the bypass rule, the oracle) read of a device offer before
// any page of it has to displace another.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/cache/policy.h"

namespace kvlanes {

// Free device pages per lane for an offer's new pages without evicting: each lane's free pages
// less the pages the request needs anyway (offer.committed), less the page the engine reserves
// on a receiving lane, less the offer's unkeyed pages from `keyed_new` on (allocated too); one
// pooled room when the allocator places (offer.owners empty). What TinyLFU and the bypass rule
// admit without displacing anything.
inline std::vector<int64_t> OfferRoom(const CacheView& view, const DeviceOffer& offer,
                                      int64_t keyed_new) {
  const int lanes = view.ledger.lanes();
  const bool pooled = offer.owners.empty();
  std::vector<int64_t> room(static_cast<size_t>(pooled ? 1 : lanes), 0);
  for (int r = 0; r < lanes; ++r)
    room[pooled ? 0 : static_cast<size_t>(r)] +=
        view.ledger.at(Tier::kDevice, r).free() - offer.committed->target[static_cast<size_t>(r)];
  for (int64_t& x : room) --x;
  for (int64_t j = keyed_new; j < offer.pages; ++j)
    --room[pooled ? 0 : offer.owners[static_cast<size_t>(j)]];
  return room;
}

// The offer's new pages that have keys (the unkeyed tail page, if any, comes after them).
inline int64_t KeyedNewPages(const DeviceOffer& offer) {
  return std::clamp<int64_t>(static_cast<int64_t>(offer.keys.size()) - offer.first_page, 0,
                             offer.pages);
}

}  // namespace kvlanes
