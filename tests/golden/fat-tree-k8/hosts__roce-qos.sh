#!/usr/bin/env bash
# Lossless RoCE on the servers of ft8: 1 GPUs and 1 NICs per node.
# Written by topo 0.1.0 for the "nvidia" QoS profile; it must match the switches:
#   RoCE data on DSCP 26 (priority 3), PFC on priority 3,
#   CNP on DSCP 48 (priority 6).
# Run as root on every node (NVIDIA ConnectX NICs with the MLNX_OFED or inbox mlx5 tools):
#   roce-qos.sh            apply
#   roce-qos.sh --dry-run  print the commands only
set -euo pipefail

if [ "${1:-}" = "--dry-run" ]; then DRY_RUN=1; fi

# every program this script runs, checked before it changes anything (a dry run only prints)
if [ "${DRY_RUN:-0}" != 1 ]; then
  missing=""
  for tool in ip mlnx_qos cma_roce_tos basename; do
    command -v "$tool" > /dev/null 2>&1 || missing="$missing $tool"
  done
  if [ -n "$missing" ]; then
    echo "roce-qos:$missing not found on PATH, nothing changed (mlnx_qos and cma_roce_tos come with NVIDIA's DOCA-OFED or MLNX_OFED, ip with iproute2)" >&2
    exit 1
  fi
fi

DEVICES=(mlx5_0)
ROCE_TOS=106
PFC=0,0,0,1,0,0,0,0
CNP_DSCP=48
CNP_PRIO=6
LOSSLESS=(3)
MTU=9100

run() {
  if [ "${DRY_RUN:-0}" = 1 ]; then echo "$*"; else "$@"; fi
}

write() {  # write VALUE to FILE (or print it in a dry run)
  if [ "${DRY_RUN:-0}" = 1 ]; then echo "echo $1 > $2"; else echo "$1" > "$2"; fi
}

for dev in "${DEVICES[@]}"; do
  netdir=(/sys/class/infiniband/"$dev"/device/net/*)
  if [ -e "${netdir[0]}" ]; then
    netdev=$(basename "${netdir[0]}")
  elif [ "${DRY_RUN:-0}" = 1 ]; then
    netdev="<netdev-of-$dev>"
  else
    echo "roce-qos: no network device for $dev" >&2
    exit 1
  fi
  run ip link set dev "$netdev" mtu "$MTU"
  # trust DSCP, and pause (PFC) only the lossless priorities
  run mlnx_qos -i "$netdev" --trust dscp --pfc "$PFC"
  # RDMA-CM connections default to the RoCE traffic class
  run cma_roce_tos -d "$dev" -t "$ROCE_TOS"
  write "$ROCE_TOS" "/sys/class/infiniband/$dev/tc/1/traffic_class"
  # congestion notification packets: DSCP and priority of the switches' CNP queue
  write "$CNP_DSCP" "/sys/class/net/$netdev/ecn/roce_np/cnp_dscp"
  write "$CNP_PRIO" "/sys/class/net/$netdev/ecn/roce_np/cnp_802p_prio"
  for prio in "${LOSSLESS[@]}"; do
    write 1 "/sys/class/net/$netdev/ecn/roce_np/enable/$prio"
    write 1 "/sys/class/net/$netdev/ecn/roce_rp/enable/$prio"
  done
done
