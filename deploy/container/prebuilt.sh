#!/usr/bin/env bash
# Build the two binaries statically on this machine and stage them as the `prebuilt` context of
# deploy/container/Containerfile (for machines without registry access; the image is FROM scratch).
#
#   deploy/container/prebuilt.sh [PROFILE] [CONTEXT_DIR]     # PROFILE: dev (default) or release
#   podman build --format docker --build-arg BINARIES=prebuilt -f deploy/container/Containerfile CONTEXT_DIR
#
# crt-static is set here, for this build only (never in committed cargo configuration), and
# `--target` keeps it off build scripts and proc macros; the output lands in
# target/x86_64-unknown-linux-gnu/, apart from the normal builds. The dev profile keeps CI's cost
# low (the engine is optimised in it anyway); use release for images you ship.
set -euo pipefail
cd "$(dirname "$0")/../.."
profile=${1:-dev}
context=${2:-target/image-context}
target=x86_64-unknown-linux-gnu
RUSTFLAGS="-C target-feature=+crt-static -C debuginfo=0 -C strip=symbols" \
    cargo build --locked --profile "$profile" --target "$target" \
    -p bookfarm-coordinator -p bookfarm-worker --bins
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
rm -rf "$context"
mkdir -p "$context/rootfs/usr/local/bin" "$context/rootfs/var/lib/bookfarm"
cp "target/$target/$dir/bookfarm-coordinator" "target/$target/$dir/bookfarm-worker" \
    "$context/rootfs/usr/local/bin/"
echo "$context"
