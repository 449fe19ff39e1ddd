#!/bin/sh
# The main job: a real OVN central and a chassis (from the sandbox: containers where the
# Docker Engine answers), the OKEP-5224 example objects written as manifests,
# netconnectd (a container of the repository's image, built here) programming the
# Northbound database from them, then packets: a blue pod reaches a yellow pod (connected), not a red one
# (not connected), and no longer the yellow one once the ClusterNetworkConnect is
# deleted. Everything it starts is stopped at the end. Needs root.
set -eu
cd "$(dirname "$0")/.."

scripts/setup-ovn.sh
cargo build --quiet -p netconnect --bins --examples
exec target/debug/examples/demo
