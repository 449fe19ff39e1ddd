#!/bin/sh
# The whole test suite: installs the OVN sandbox on first use, checks formatting and
# lints, runs every test (unit tests and the integration tests against real
# ovsdb-server and ovn-northd, some in containers on the machine's Docker Engine), then
# checks that no daemon, namespace, veth, container or Docker network was left behind.
set -eu
cd "$(dirname "$0")/.."

scripts/setup-ovn.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo doc (warnings denied: a broken link or a bad doc comment fails)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet
echo "== cargo package (the crates meant for crates.io, built from their packaged sources)"
# netconnect and ovn-sandbox are this repository's daemon and test bench (publish =
# false); the six libraries must build from what a registry would hold.
cargo package --quiet --allow-dirty -p ovsdb-derive -p ovsdb-proto -p ovsdb-codegen \
    -p nb-model -p sb-model -p ovs-model
echo "== cargo test"
# The programs tests run (ovn-sandbox's command among them): cargo test builds a
# package's binaries only for that package's own integration tests.
cargo build --workspace --bins --quiet
cargo test --workspace
# The suite's sandboxes run their daemons in containers (the engine answers here);
# the same daemons as processes, for machines without an engine, stay tested: the
# sandbox itself, TLS, and the chassis datapath tests.
echo "== the sandbox as processes (OVN_SANDBOX_BACKEND=processes)"
OVN_SANDBOX_BACKEND=processes cargo test -p integration-tests \
    --test sandbox --test tls --test two_chassis --test egress

# Every sandbox directory's name carries this marker; a daemon whose command line
# still names one was left behind by a test.
left=$(pgrep -af 'ovsdb-rs-sbx-' | grep -v pgrep || true)
if [ -n "$left" ]; then
    echo "daemons left running after the suite:" >&2
    echo "$left" >&2
    exit 1
fi
echo "== no sandbox daemon left running"

# Chassis pods are network namespaces and veths whose names start with this prefix.
left=$( (ip netns list; ip -o link) 2>/dev/null | grep ovsrs || true)
if [ -n "$left" ]; then
    echo "network namespaces or veths left after the suite:" >&2
    echo "$left" >&2
    exit 1
fi
echo "== no network namespace or veth left behind"

# Containers and Docker networks the tests made carry this label (ovn-sandbox removes
# them when their handles are dropped, panics included).
left=$( (docker ps -a --filter label=org.ovsdb-rs.test --format 'container {{.Names}}'
    docker network ls --filter label=org.ovsdb-rs.test --format 'network {{.Name}}') 2>&1)
if [ -n "$left" ]; then
    echo "containers or Docker networks left after the suite:" >&2
    echo "$left" >&2
    exit 1
fi
echo "== no container or Docker network left behind"
