//! The networking-plugin seed's CreateVL / QueryVL / UpdateVL / DeleteVL on a real NB:
//!
//! ```text
//! virtual_networks REMOTE create NAME SUBNET GATEWAY
//! virtual_networks REMOTE query NAME
//! virtual_networks REMOTE update NAME SUBNET GATEWAY
//! virtual_networks REMOTE delete NAME
//! virtual_networks REMOTE list
//! ```
//!
//! with `--router` (default `k8smaster`), and for north-south traffic
//! `--gateway-router`, `--join-next-hop` and `--external-ip`.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use netconnect::virtual_networks::{self as vl, Plugin, VirtualNetwork};
use ovsdb_proto::cache::{Cache, CacheConfig};
use ovsdb_proto::Remote;

#[derive(Parser)]
struct Args {
    /// The Northbound database.
    remote: String,
    /// The distributed router the networks connect to.
    #[arg(long, default_value = "k8smaster")]
    router: String,
    /// The gateway router for north-south traffic.
    #[arg(long)]
    gateway_router: Option<String>,
    /// The gateway router's next hop toward the distributed router.
    #[arg(long)]
    join_next_hop: Option<std::net::IpAddr>,
    /// The address the networks' traffic is SNATed to.
    #[arg(long)]
    external_ip: Option<std::net::IpAddr>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// CreateVL.
    Create {
        name: String,
        subnet: String,
        gateway: String,
    },
    /// QueryVL.
    Query { name: String },
    /// UpdateVL.
    Update {
        name: String,
        subnet: String,
        gateway: String,
    },
    /// DeleteVL.
    Delete { name: String },
    /// Every virtual network.
    List,
}

fn show(v: &VirtualNetwork) {
    println!(
        "{} subnet={} gateway={} mac={} switch={} router-port={}",
        v.name, v.subnet, v.gateway, v.router_port.mac, v.switch.uuid, v.router_port.uuid
    );
    if let Some(r) = &v.route {
        println!("  route {} via {}", r.ip_prefix, r.nexthop);
    }
    if let Some(n) = &v.snat {
        println!("  snat {} to {}", n.logical_ip, n.external_ip);
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let remotes = match Remote::parse_list(&args.remote) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vl: {}: {e}", args.remote);
            return ExitCode::FAILURE;
        }
    };
    let config = CacheConfig::new(
        remotes,
        "OVN_Northbound",
        &[
            "Logical_Switch",
            "Logical_Switch_Port",
            "Logical_Router",
            "Logical_Router_Port",
            "Logical_Router_Static_Route",
            "NAT",
        ],
    );
    let (cache, _) = Cache::start(config);
    if tokio::time::timeout(Duration::from_secs(10), cache.wait_until_ready())
        .await
        .is_err()
    {
        eprintln!("vl: no usable Northbound server at {}", args.remote);
        return ExitCode::FAILURE;
    }
    let plugin = Plugin {
        router: args.router,
        gateway_router: args.gateway_router,
        join_next_hop: args.join_next_hop,
        external_ip: args.external_ip,
        wait: Duration::from_secs(10),
    };
    let result = match args.command {
        Cmd::Create {
            name,
            subnet,
            gateway,
        } => vl::create(&cache, &plugin, &name, &subnet, &gateway)
            .await
            .map(|v| show(&v)),
        Cmd::Query { name } => vl::query(&cache.snapshot(), &plugin, &name).and_then(|v| match v {
            Some(v) => {
                show(&v);
                Ok(())
            }
            None => Err(vl::VlError::NotFound(name)),
        }),
        Cmd::Update {
            name,
            subnet,
            gateway,
        } => vl::update(&cache, &plugin, &name, &subnet, &gateway)
            .await
            .map(|v| show(&v)),
        Cmd::Delete { name } => vl::delete(&cache, &plugin, &name).await,
        Cmd::List => vl::list(&cache.snapshot(), &plugin).map(|all| all.iter().for_each(show)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vl: {e}");
            ExitCode::FAILURE
        }
    }
}
