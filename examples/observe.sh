#!/usr/bin/env bash
# See a lab: draw it, capture its packets, stream its events (docs/observe.md).
# Run as root from the checkout: bash examples/observe.sh   (NESTLAB=... to use another CLI)
set -euo pipefail
nestlab=${NESTLAB:-.venv/bin/nestlab}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
trap '$nestlab destroy --lab twohosts >/dev/null' EXIT

$nestlab deploy -t examples/twohosts.yml
$nestlab graph --lab twohosts --format mermaid > "$out/twohosts.mmd"          # the picture, as Mermaid
$nestlab graph --lab twohosts --format drawio -o "$out/twohosts.drawio"       # and for draw.io

# Events, in the background, while a link flaps.
$nestlab events --lab twohosts --format json > "$out/events.jsonl" &
events=$!
sleep 1
$nestlab link set --lab twohosts s2:eth1 c2:eth1 --down
$nestlab link set --lab twohosts s2:eth1 c2:eth1 --up

# Packets: both ends of the VXLAN link, while c2 pings s2 across the two hosts.
$nestlab capture --lab twohosts s2:eth1 --link -f icmp -c 4 -w "$out/vxlan.pcapng" &
capture=$!
sleep 1
$nestlab exec --lab twohosts c2 -- ping -c 1 -W 2 10.9.0.1
wait $capture
kill $events; wait $events || true

echo "picture: $out/twohosts.mmd, $out/twohosts.drawio"
echo "packets: $out/vxlan.pcapng ($(command -v tshark >/dev/null && tshark -r "$out/vxlan.pcapng" 2>/dev/null | wc -l || echo '?') packets)"
echo "events:  $(grep -c '"event": "down"' "$out/events.jsonl") down, $(grep -c '"event": "up"' "$out/events.jsonl") up in $out/events.jsonl"
