#!/bin/sh
# The main job for now: installs and starts a real OVN central (OVN_Northbound and
# OVN_Southbound ovsdb-servers with ovn-northd between them), and runs the example
# client against it: list the databases, create a switch with two ports in one
# transaction, dump what was made. Every daemon is stopped at the end.
set -eu
cd "$(dirname "$0")/.."

scripts/setup-ovn.sh
cargo build --quiet -p ovn-sandbox -p ovsdb-proto -p nb-model --examples --bins
exec target/debug/ovn-sandbox -- sh -c '
    set -e
    client=target/debug/examples/ovsdb-client
    echo "OVN $OVN_VERSION with ovsdb-server $OVS_VERSION; northbound at $OVN_NB_DB"
    echo "\$ ovsdb-client list-dbs"
    $client list-dbs "$OVN_NB_DB"
    echo "\$ transact (a Logical_Switch with two ports, linked by named-uuids)"
    target/debug/examples/transact "$OVN_NB_DB"
    echo "\$ typed_transact (the same through the nb-model types)"
    target/debug/examples/typed_transact "$OVN_NB_DB"
    echo "\$ ovsdb-client dump OVN_Northbound Logical_Switch"
    $client dump "$OVN_NB_DB" OVN_Northbound Logical_Switch
'
