#!/usr/bin/env bash
# Outputs that depend on CostModel::Evaluate (replay reports, plans, timelines; check JSONs), written into
# the folder given, for comparing two binaries: K=OLD THIS /tmp/a; K=NEW THIS /tmp/b; diff -r /tmp/a /tmp/b
# Outputs that depend on CostModel::Evaluate, into $1.
set -e
K=${K:-/work/main/build/kvlanes}; O=$1; mkdir -p $O; cd /work/main
P=config/profiles/h200_measured_model_l4.yaml
i=0
for tr in docs/measurements/heldout_h21/conversation_80122.jsonl docs/measurements/heldout_h22/conversation_5947.jsonl traces/mooncake_excerpt.jsonl; do
  for cp in 1 8; do for m in packed dense p2p owner_major zigzag-gated cost; do for bs in tail per-layer cost; do for pf in 0 1; do
    i=$((i+1))
    $K replay -q --trace $tr --config config/default.yaml --set serving.mode=sequential --set cache.cp_size=$cp --set model.preset=deepseek-v3.2 \
      --set gather.method=$m --set backup.schedule=$bs --set gather.prefetch_layers=$pf --set model.layers=4 --set cache.device_pages_per_lane=3000 \
      --profile $( [ $cp = 1 ] && echo $P || echo config/profiles/8xh200_nccl_model.yaml ) --plan $O/plan_$i.jsonl --json $O/report_$i.json --timeline $O/tl_$i.json > /dev/null 2>&1 || echo "fail $i $tr $cp $m $bs $pf" >> $O/fails.txt
  done; done; done; done
done
for f in docs/measurements/logs_h200_2026-12-03d/h21/measured_h21_80122_tail_model.json docs/measurements/logs_h200_2026-12-03d/h21/measured_h21_87928_tail_synth.json; do
  c=$(basename $f .json); p=docs/measurements/heldout_h21/plan_h21_$(echo $c | cut -d_ -f3)_tail.jsonl
  sc=(); [[ $c == *synth ]] && sc=(--compute-scale 0.01)
  $K check --plan $p --measured $f "${sc[@]}" --json $O/check_$c.json > /dev/null || true
done
ls $O | wc -l
