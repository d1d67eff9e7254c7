# Sourced by the experiments that run the bandwidth experiment's cluster on
# network-namespace hosts (scripts/experiments/bandwidth.sh, overlap.sh):
# 2 ps and 3 workers, each on a host of its own (scripts/run/netns_hosts.sh),
# sync, the tutorial network on CIFAR-10.
#
#   write_sync_config FILE PREFIX DATA_DIR BATCH STEPS [EXTRA]
#       the cluster config; EXTRA (e.g. "wire { overlap: true }") is added
#   run_on_hosts NAME RATE CFG OUT PREFIX [HOSTS]
#       HOSTS hosts (default 5) up with link cap RATE (empty: none), every
#       task of CFG on its host (launch.sh --netns) into OUT/NAME, a line
#       "NAME RATE LOADAVG" in OUT/runs.txt, hosts down again
#
# The caller removes the hosts on exit:
#   trap 'bash scripts/run/netns_hosts.sh down --prefix=$prefix ...' EXIT

source scripts/lib/cluster.sh

write_sync_config() {
  local file=$1 prefix=$2 data_dir=$3 batch=$4 steps=$5 extra=${6:-}
  write_cluster_config "$file" bandwidth ps_hosts="${prefix}0,${prefix}1" \
    worker_hosts="${prefix}2,${prefix}3,${prefix}4" batch="$batch" steps="$steps" \
    training="optimizer { kind: ADAM learning_rate: 0.001 } seed: 1" model=cifar10_tutorial \
    data="source: CIFAR10 dir: \"$data_dir\" augment: true sharding: SHARD" ${extra:+extra="$extra"}
}

run_on_hosts() {
  local name=$1 rate=$2 cfg=$3 out=$4 prefix=$5 hosts=${6:-5}
  bash scripts/run/netns_hosts.sh up "$hosts" --prefix="$prefix" ${rate:+--rate=$rate}
  echo "$(basename "$0"): $name (link cap ${rate:-none}), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  bash scripts/run/launch.sh --no-build --netns --run_dir="$out/$name" "$cfg" > "$out/$name.log" 2>&1 ||
    { tail -30 "$out/$name.log"; echo "$(basename "$0"): $name failed" >&2; exit 1; }
  echo "$name ${rate:-none} $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/runs.txt"
  bash scripts/run/netns_hosts.sh down --prefix="$prefix"
}
