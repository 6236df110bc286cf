#!/bin/bash
# For each run: steal and involuntary switches vs the fan-out's late drops.
cd /work/main
for r in ${RUNS:-1 2 3 4 5 6}; do
  s0=$(awk '/^cpu /{print $9}' /proc/stat)
  perf stat -x, -e context-switches,cpu-migrations -o /tmp/ps.$r target/release/espgw bench --suite aes128gcm16 --sizes 64,1420 --direction decrypt --workers 2 --tunnels 1 --spread-decrypt --seconds 0.7 --json /tmp/late.$r.json > /tmp/late.$r.txt 2>&1
  s1=$(awk '/^cpu /{print $9}' /proc/stat)
  cs=$(grep context-switches /tmp/ps.$r | cut -d, -f1); mig=$(grep cpu-migrations /tmp/ps.$r | cut -d, -f1)
  late=$(python3 -c "
import json;d=json.load(open('/tmp/late.$r.json'))
print(' '.join(f\"{x['size']}:{x['layer'][0]}:{x.get('drops',{}).get('reorder_late',0)}/eff{(x['efficiency'] or 0):.2f}\" for x in d['results'] if x['workers']==2 and x['layer']=='worker'))")
  echo "run $r steal_ticks $((s1-s0)) ctx_switches $cs migrations $mig late $late"
done
