#!/usr/bin/env bash
# compare_outputs.sh BEFORE AFTER DIR POLICY...: replays every POLICY with both binaries on the
# bench's configurations and compares the plans and the JSON reports (without their commit line)
# byte for byte. Prints one line per pair that differs and a total.
set -u
before=$1 after=$2 dir=$3
shift 3
mkdir -p "$dir"
S="--trace traces/mooncake/synthetic_trace.jsonl --set serving.mode=sequential"
configs=(
  "syn_cp1_15625|$S --set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=15625"
  "syn_cp1_46875|$S --set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=46875"
  "syn_cp1_156250|$S --set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=156250"
  "syn_cp4_host|$S --set cache.cp_size=4 --set cache.host_pages_per_lane=7812 --set cache.device_pages_per_lane=3906"
  "conv_cp1_15625|--trace traces/mooncake/conversation_trace.jsonl --set serving.mode=sequential --set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=15625"
  "conv_cp4_host|--trace traces/mooncake/conversation_trace.jsonl --set serving.mode=sequential --set cache.cp_size=4 --set cache.host_pages_per_lane=7812 --set cache.device_pages_per_lane=3906"
  "excerpt_default|--trace traces/mooncake_excerpt.jsonl"
  "kvtester34_default|--trace traces/kvtester_trace_0034.json"
)
pairs=0 differ=0
for p in "$@"; do
  for c in "${configs[@]}"; do
    name=${c%%|*} args=${c#*|}
    for side in before after; do
      bin=$before; [ $side = after ] && bin=$after
      out="$dir/$name.$p.$side"
      # shellcheck disable=SC2086
      "$bin" replay -q $args --policy "$p" --json "$out.json" --plan "$out.plan" \
        >"$out.stdout" 2>"$out.stderr"
      echo $? >"$out.rc"
      grep -v '"commit"' "$out.json" >"$out.report" 2>/dev/null
    done
    pairs=$((pairs + 1))
    same=1
    for ext in rc stdout report plan; do
      cmp -s "$dir/$name.$p.before.$ext" "$dir/$name.$p.after.$ext" || same=0
    done
    if [ $same = 0 ]; then
      differ=$((differ + 1))
      echo "DIFFER $name $p"
    fi
    [ "$(cat "$dir/$name.$p.before.rc")" = 0 ] || echo "note: $name $p exit $(cat "$dir/$name.$p.before.rc")"
    rm -f "$dir/$name.$p.before.plan" "$dir/$name.$p.after.plan"
  done
done
echo "compared $pairs pairs: $((pairs - differ)) identical, $differ differ"
