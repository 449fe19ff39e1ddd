//! A raft-clustered OVN_Northbound whose members are containers, each with its own
//! address on a network of its own, so that one can be cut off, paused or killed.

use super::container::{ovn_image, Container, ContainerSpec, DockerNetwork};
use super::*;

/// The port members serve clients on.
pub const CLIENT_PORT: u16 = 6641;
/// The port members speak raft on.
pub const RAFT_PORT: u16 = 6643;
/// Where each member's control socket is, inside its container.
const CTL: &str = "/run/ovn/db.ctl";

/// A raft cluster of OVN_Northbound, one ovsdb-server container per member.
///
/// The members speak raft on one network (port 6643) and serve clients on another
/// (`tcp:ADDR:6641`), member `i` at host `10 + i` of each, so that a member can be
/// isolated from its peers while clients still reach it ([`isolate`](Self::isolate)),
/// or cut off both ([`cut_off`](Self::cut_off)). Member 0 created the cluster, the
/// others joined it. The members are removed, then the networks, when this is
/// dropped.
#[derive(Debug)]
pub struct ContainerCluster {
    /// The members, in order (dropped before the networks).
    members: Vec<Container>,
    raft: DockerNetwork,
    clients: DockerNetwork,
    image: String,
    database: String,
    /// How many members were replaced: new containers get new names.
    replaced: usize,
}

impl ContainerCluster {
    /// Starts an `n`-member cluster of OVN_Northbound from the OVN image (built on
    /// first use from `install`'s root filesystem) and waits until every member is
    /// connected to the cluster.
    pub fn start(install: &Installation, n: usize) -> Result<ContainerCluster> {
        if n == 0 || n > 200 {
            return fail(format!("a cluster of {n} members: 1 to 200 are possible"));
        }
        let image = ovn_image(install)?;
        let raft = DockerNetwork::create()?;
        let clients = DockerNetwork::create()?;
        let mut cluster = ContainerCluster {
            members: Vec::new(),
            raft,
            clients,
            image,
            database: "OVN_Northbound".into(),
            replaced: 0,
        };
        for i in 0..n {
            let member = cluster.start_member(i, &(0..i).collect::<Vec<_>>())?;
            cluster.members.push(member);
        }
        cluster.wait_connected()?;
        Ok(cluster)
    }

    fn raft_address(&self, i: usize) -> String {
        format!("tcp:{}:{RAFT_PORT}", self.raft.address(10 + i as u8))
    }

    /// Member `i`'s container: the first time it runs it creates the cluster (no
    /// `peers`) or joins it through `peers`, then it serves it; started again, it
    /// serves the files it has.
    fn start_member(&self, i: usize, peers: &[usize]) -> Result<Container> {
        let db = "/var/lib/ovn/db.db";
        let create = if peers.is_empty() {
            format!(
                "ovsdb-tool create-cluster {db} /usr/share/ovn/ovn-nb.ovsschema {}",
                self.raft_address(0)
            )
        } else {
            let others: Vec<String> = peers.iter().map(|&j| self.raft_address(j)).collect();
            format!(
                "ovsdb-tool join-cluster {db} {} {} {}",
                self.database,
                self.raft_address(i),
                others.join(" ")
            )
        };
        let script = format!(
            "set -e; [ -e {db} ] || {create}; \
             exec ovsdb-server {db} --remote=ptcp:{CLIENT_PORT} --unixctl={CTL} \
             --pidfile=/run/ovn/db.pid -vconsole:info"
        );
        let host = 10 + i as u8;
        Container::start(
            &[(&self.raft, host), (&self.clients, host)],
            ContainerSpec {
                image: &self.image,
                name: &match self.replaced {
                    0 => format!("nb{i}"),
                    n => format!("nb{i}-{n}"),
                },
                cmd: vec!["sh".into(), "-c".into(), script],
                ..Default::default()
            },
        )
    }

    /// The members' containers, in member order.
    pub fn members(&self) -> &[Container] {
        &self.members
    }

    /// The network clients reach the members on.
    pub fn client_network(&self) -> &DockerNetwork {
        &self.clients
    }

    /// Member `i`'s client remote, `tcp:ADDR:6641`.
    pub fn tcp_remote(&self, i: usize) -> String {
        let ip = self.members[i]
            .ip_on(&self.clients)
            .expect("on the clients' network");
        format!("tcp:{ip}:{CLIENT_PORT}")
    }

    /// Kills member `i`'s container (`docker kill`); its files stay for
    /// [`restart`](Self::restart).
    pub fn kill(&self, i: usize) -> Result<()> {
        self.members[i].kill()
    }

    /// Starts member `i`'s killed container again: the same server with its files.
    pub fn restart(&self, i: usize) -> Result<()> {
        self.members[i].restart()
    }

    /// Replaces member `i` by a new, empty one at the same addresses: the old one is
    /// kicked out of the cluster (through the leader) and removed, the new one joins
    /// and catches up from the others. Should the new one fail to start, the cluster
    /// is left without member `i` (the error says why): drop it.
    pub fn replace(&mut self, i: usize) -> Result<()> {
        let others: Vec<usize> = (0..self.members.len()).filter(|&j| j != i).collect();
        let leader = self.wait_leader_among(&others)?;
        let address = self.raft_address(i);
        let ctl = |args: &[&str]| {
            let mut cmd = vec!["ovs-appctl", "-t", CTL];
            cmd.extend_from_slice(args);
            self.members[leader].exec(&cmd)
        };
        ctl(&["cluster/kick", &self.database, &address])?;
        wait_until("the kicked member to leave the cluster", || {
            let status = ctl(&["cluster/status", &self.database])?;
            Ok((!status.contains(&address)).then_some(()))
        })?;
        // The old container goes first: the new one takes its addresses.
        self.members.remove(i);
        self.replaced += 1;
        let new = self.start_member(i, &others)?;
        self.members.insert(i, new);
        self.wait_connected()
    }

    /// Cuts member `i` off its peers and its clients: nothing reaches it.
    pub fn cut_off(&self, i: usize) -> Result<()> {
        self.members[i].disconnect(None)
    }

    /// Cuts member `i` off its peers only: clients still reach it.
    pub fn isolate(&self, i: usize) -> Result<()> {
        self.members[i].disconnect(Some(&self.raft))
    }

    /// Cuts member `i` off its clients only: it goes on as a member of the cluster.
    pub fn hide(&self, i: usize) -> Result<()> {
        self.members[i].disconnect(Some(&self.clients))
    }

    /// Puts member `i` back on every network it was cut off.
    pub fn heal(&self, i: usize) -> Result<()> {
        self.members[i].reconnect(None)
    }

    /// Every member's client remote, comma-separated, as `--db` takes them.
    pub fn remotes(&self) -> String {
        (0..self.members.len())
            .map(|i| self.tcp_remote(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Member `i`'s `cluster/status` of the database.
    pub fn status(&self, i: usize) -> Result<String> {
        self.members[i].exec(&["ovs-appctl", "-t", CTL, "cluster/status", &self.database])
    }

    /// The member that says it leads now, among `among` (all when `None`).
    pub fn leader_among(&self, among: &[usize]) -> Option<usize> {
        among.iter().copied().find(|&i| {
            self.status(i)
                .is_ok_and(|s| s.lines().any(|l| l.trim() == "Role: leader"))
        })
    }

    /// The member that says it leads now.
    pub fn leader(&self) -> Option<usize> {
        let all: Vec<usize> = (0..self.members.len()).collect();
        self.leader_among(&all)
    }

    /// Waits until the members `among` agree on a leader among themselves (after a
    /// partition, the others' election); its index.
    pub fn wait_leader_among(&self, among: &[usize]) -> Result<usize> {
        wait_until(
            "a leader among the members",
            || Ok(self.leader_among(among)),
        )
    }

    /// Waits until every member says it is connected to the cluster.
    pub fn wait_connected(&self) -> Result<()> {
        for i in 0..self.members.len() {
            wait_until("raft members to connect", || {
                let s = self.status(i).unwrap_or_default();
                Ok(s.lines()
                    .any(|l| l.trim() == "Status: cluster member")
                    .then_some(()))
            })?;
        }
        Ok(())
    }
}
