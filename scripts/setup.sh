#!/usr/bin/env bash
# Installs what FuseBox needs on a fresh Debian machine (root or sudo; fonts-dejavu-core is
# the font of fusebox bench's charts; tshark the reassembly oracle's), builds it, and runs
# the SNF Fig. 5 example (NAPT -> firewall -> load balancer) on a generated trace, naive and
# synthesized.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt-install.sh
apt_install tcpdump iproute2 libpcap-dev pkg-config build-essential curl fonts-dejavu-core openvswitch-switch tshark \
  clang llvm libelf-dev zlib1g-dev libbpf-dev bpftool
# The chains' control plane: etcd (server and etcdctl) and protoc for the etcd client.
apt_install etcd-server etcd-client protobuf-compiler ethtool
# scapy's IPsec layer: the outside ESP implementation of crates/elements/tests/ipsec_interop.rs.
apt_install python3-scapy python3-cryptography
# A Linux kernel with ESP and AES-GCM as an ordinary process (User-Mode Linux; kmod's modprobe
# loads its modules): the xfrm peer of crates/fusebox/tests/ipsec_kernel.rs when the host's
# kernel lacks CONFIG_INET_ESP or CONFIG_CRYPTO_GCM.
apt_install user-mode-linux kmod
if ! command -v cargo >/dev/null; then
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  . "$HOME/.cargo/env"
fi
cargo build --release --bin fusebox
FB=target/release/fusebox
out=out/fig5; mkdir -p "$out"
$FB gen -o "$out/trace.pcap" --packets 2000 --flows 40 --mix tcp=1,udp=2,icmp=1 \
    --src 192.168.0.0/24 --dst 10.0.2.0/24 --dport 1234,53
$FB run examples/fig5/chain.toml --input napt.eth0="$out/trace.pcap" --out-dir "$out"
echo "--- UDP to port 1234 after NAPT -> FW -> LB (lb.eth1):"
tcpdump -nn -vv -e -r "$out/lb.eth1.pcap" 2>/dev/null | head -6 || true  # head closes the pipe early
echo "--- TCP after the NAPT (napt.eth2):"
tcpdump -nn -vv -e -r "$out/napt.eth2.pcap" 2>/dev/null | head -4 || true
echo "--- the same chain synthesized (SNF), compared with the naive run:"
$FB verify examples/fig5/chain.toml --input napt.eth0="$out/trace.pcap"
