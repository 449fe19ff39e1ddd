#!/bin/sh
# Installs what the OVN sandbox needs, once per machine (later runs do nothing):
#  - a Debian sid root filesystem with OVN 26.03 and Open vSwitch 4.0, built with
#    debootstrap at $OVN_SANDBOX_ROOT (default /var/cache/ovsdb-rs/sid-root); the
#    sandbox runs its daemons there under chroot;
#  - the host's own ovn-central (OVN 23.03 on Debian bookworm, schema 7.0.0) for the
#    compatibility tests, installed without starting its services.
# Needs root.
set -eu

ROOT=${OVN_SANDBOX_ROOT:-/var/cache/ovsdb-rs/sid-root}

if [ "$(id -u)" != 0 ]; then
    echo "setup-ovn.sh: run as root (it uses apt-get and debootstrap)" >&2
    exit 1
fi

updated=no
apt_install() {
    if [ "$updated" = no ]; then
        apt-get update -qq
        updated=yes
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! command -v debootstrap >/dev/null 2>&1; then
    echo "setup-ovn.sh: installing debootstrap"
    apt_install debootstrap
fi

# The chassis tests make network namespaces and veths (ip), ping across them, and
# start the datapath daemons in private mount namespaces (unshare); python3 serves
# and requests TCP in pods, whose checksum offload ethtool turns off (the userspace
# datapath does not complete checksums).
for tool in ip:iproute2 ping:iputils-ping unshare:util-linux python3:python3 ethtool:ethtool; do
    if ! command -v "${tool%%:*}" >/dev/null 2>&1; then
        echo "setup-ovn.sh: installing ${tool#*:}"
        apt_install "${tool#*:}"
    fi
done

if [ ! -x "$ROOT/usr/bin/ovn-northd" ]; then
    echo "setup-ovn.sh: building the OVN root filesystem at $ROOT (about a minute)"
    mkdir -p "$(dirname "$ROOT")"
    rm -rf "$ROOT.tmp"
    debootstrap --variant=minbase --include=ovn-central,ovn-host sid "$ROOT.tmp" >"$ROOT.log" 2>&1 || {
        echo "setup-ovn.sh: debootstrap failed; the last lines of $ROOT.log:" >&2
        tail -20 "$ROOT.log" >&2
        exit 1
    }
    mv "$ROOT.tmp" "$ROOT"
fi
# apt in the root filesystem, and in the images built on it (ovn-sandbox imports it as
# their base), must accept the mirror's Release files even once their Valid-Until date
# has passed: the mirror this machine reaches may serve a snapshot.
conf="$ROOT/etc/apt/apt.conf.d/99ovsdb-rs-valid-until"
if [ ! -e "$conf" ]; then
    printf 'Acquire::Check-Valid-Until "false";\n' >"$conf"
fi
echo "setup-ovn.sh: sandbox OVN $(chroot "$ROOT" ovn-northd --version | head -1 | awk '{print $2}')," \
    "ovsdb-server $(chroot "$ROOT" ovsdb-server --version | head -1 | awk '{print $NF}')"

if [ ! -x /usr/bin/ovn-northd ]; then
    echo "setup-ovn.sh: installing the host's ovn-central for compatibility tests"
    # Keep the packages from starting their daemons: the tests start their own.
    policy=/usr/sbin/policy-rc.d
    saved=""
    if [ -e "$policy" ]; then
        saved=$(mktemp)
        cp -p "$policy" "$saved"
    fi
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    status=0
    apt_install ovn-central || status=$?
    if [ -n "$saved" ]; then mv "$saved" "$policy"; else rm -f "$policy"; fi
    [ "$status" = 0 ] || exit "$status"
fi
echo "setup-ovn.sh: host OVN $(ovn-northd --version | head -1 | awk '{print $2}')"
