#!/usr/bin/env bash
# Builds Chaining-Box's own stages (mscastanho/chaining-box, src/kernel/sfc_stages_kern.c and
# sfc_classifier_kern.c) so `fusebox bench --scenario stages --chaining-box DIR` can measure
# them beside FuseBox's. Run it outside CI, on a snapshot of that repository; nothing of it
# enters FuseBox's tree.
#
#   scripts/build-chaining-box.sh SRC OUT
#     SRC  a checkout (or `git archive`) of mscastanho/chaining-box
#     OUT  where the objects go (sfc_stages_kern.o, sfc_classifier_kern.o)
#
# Two edits are made to a copy of the sources, so the objects load with libbpf 1.x:
#  - the MAP() macro's iproute2 `struct bpf_elf_map` definitions become BTF-style map
#    definitions (libbpf 1.x dropped both the legacy "maps" section and iproute2's layout);
#  - the section names "action/encap" and "action/forward" (tc actions, which libbpf 1.x
#    no longer guesses a program type for) become "tc", "classify" becomes "tc" and
#    "xdp/decap" becomes "xdp".
# The programs' code is unchanged.
set -euo pipefail
src=${1:?usage: $0 SRC OUT}
out=${2:?usage: $0 SRC OUT}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/src/headers" "$src/src/kernel" "$work/"
python3 - "$work/headers/cb_common.h" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
btf = ('#define MAP(NAME,TYPE,KEYSZ,VALSZ,MAXE,PIN) \\\n'
       '    struct { __uint(type, TYPE); __uint(key_size, KEYSZ); \\\n'
       '             __uint(value_size, VALSZ); __uint(max_entries, MAXE); } NAME SEC(".maps");\n')
s, n = re.subn(r'#define MAP\(NAME,TYPE,KEYSZ,VALSZ,MAXE,PIN\) \\\n(?:.*\\\n)*.*\n', btf, s)
if n == 0:
    sys.exit("cb_common.h: no MAP() macro found; the snapshot changed")
open(p, 'w').write(s)
PY
sed -i 's/SEC("action\/encap")/SEC("tc")/; s/SEC("action\/forward")/SEC("tc")/; s/SEC("xdp\/decap")/SEC("xdp")/' "$work/kernel/sfc_stages_kern.c"
sed -i 's/SEC("classify")/SEC("tc")/' "$work/kernel/sfc_classifier_kern.c"
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
mkdir -p "$out"
for f in sfc_stages_kern sfc_classifier_kern; do
    clang -O2 -g -target bpf -I "$work/headers" -I "/usr/include/$multiarch" \
        -c "$work/kernel/$f.c" -o "$out/$f.o"
done
echo "built $out/sfc_stages_kern.o $out/sfc_classifier_kern.o"
