#include "exec/gather.h"

#include "methods/gather_method.h"

namespace kvlanes::exec {

void GatherLayer(RankBackend& b, const GatherIndex& g, Stream s, int64_t layer,
                 GatherPhases* phases) {
  GatherMethodOf(g.method).Layer(b, g, s, layer, phases);
}

}  // namespace kvlanes::exec
