//! Raft-clustered databases, a server per member.

use super::*;

/// Creates member `i`'s database file `db`: member 0 creates the cluster, the others
/// join the members before them.
pub(crate) fn create_member(
    install: &Installation,
    db: &Path,
    schema: &Path,
    database: &str,
    raft: &[String],
    i: usize,
) -> Result<()> {
    if i == 0 {
        install.output(
            "ovsdb-tool",
            &["create-cluster", path_str(db)?, path_str(schema)?, &raft[0]],
        )?;
    } else {
        let mut args = vec!["join-cluster", path_str(db)?, database, raft[i].as_str()];
        args.extend(raft[..i].iter().map(String::as_str));
        install.output("ovsdb-tool", &args)?;
    }
    Ok(())
}

/// A raft-clustered database of `n` members, each its own ovsdb-server process on
/// 127.0.0.1, whatever the installation's backend: its tests crash a member's process
/// on a host that stays up, so that clients are refused at once. (Members made
/// containers were tried: a killed container takes its address with it, and a
/// client's connect to it waits for ARP to give up, 3 s; the monitor test that kills
/// and restarts members took 22 s instead of 3.6 s.) Members that are containers,
/// for the faults of a host (cut off, paused, gone), are [`ContainerCluster`]'s.
#[derive(Debug)]
pub struct Cluster {
    /// The members; member 0 created the cluster.
    pub members: Vec<OvsdbServer>,
    /// The database name.
    pub database: String,
    /// The members' raft addresses, in member order.
    pub(crate) raft: Vec<String>,
    /// The schema file inside the installation.
    pub(crate) schema: PathBuf,
}

impl Cluster {
    /// Starts a cluster of `n` members serving the schema at `schema` (inside the
    /// installation), by default OVN_Northbound's.
    pub fn start(install: &Installation, n: usize, schema: Option<&Path>) -> Result<Cluster> {
        if n == 0 {
            return fail("a cluster needs at least one member");
        }
        let schema = schema
            .map(Path::to_path_buf)
            .unwrap_or_else(|| install.schema("ovn-nb"));
        let schema_text = fs::read(install.host_path(&schema))
            .map_err(|e| SandboxError(format!("cannot read {}: {e}", schema.display())))?;
        let database = serde_json::from_slice::<serde_json::Value>(&schema_text)
            .ok()
            .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_owned))
            .ok_or_else(|| SandboxError(format!("{} has no database name", schema.display())))?;
        // The raft ports are free when picked but taken only when the members start:
        // a client of another test may be given one of them as its own port in
        // between, and that member then never joins. Such a start is tried again on
        // other ports.
        const ATTEMPTS: usize = 3;
        let mut attempt = 1;
        loop {
            let raft: Vec<String> = free_ports(n)?
                .into_iter()
                .map(|p| format!("tcp:127.0.0.1:{p}"))
                .collect();
            let mut members = Vec::new();
            for i in 0..raft.len() {
                let dir = install.workdir()?;
                let db = dir.inner("db.db");
                create_member(install, &db, &schema, &database, &raft, i)?;
                members.push(OvsdbServer::launch(
                    install,
                    &format!("ovsdb-server (raft member {i})"),
                    dir,
                    "",
                    vec![db],
                    vec![],
                    None,
                )?);
            }
            let cluster = Cluster {
                members,
                database: database.clone(),
                raft,
                schema: schema.clone(),
            };
            match cluster.wait_connected() {
                Ok(()) => return Ok(cluster),
                Err(e) if attempt == ATTEMPTS => return Err(e),
                // Dropping the cluster stops its members.
                Err(_) => {
                    drop(cluster);
                    attempt += 1;
                }
            }
        }
    }

    /// Stops every member, replaces the cluster with a new, empty one (a new cluster
    /// id, the raft log started over) on the same raft addresses, and starts the
    /// members again on the same client ports: a cluster rebuilt from scratch.
    pub fn recreate(&mut self) -> Result<()> {
        for m in &mut self.members {
            m.daemon.kill();
        }
        for (i, m) in self.members.iter().enumerate() {
            let host_db = m.install.host_path(&m.db_inner);
            fs::remove_file(&host_db)
                .map_err(|e| SandboxError(format!("cannot remove {}: {e}", host_db.display())))?;
            create_member(
                &m.install,
                &m.db_inner,
                &self.schema,
                &self.database,
                &self.raft,
                i,
            )?;
        }
        for m in &mut self.members {
            m.run()?;
        }
        self.wait_connected()
    }

    /// Waits until every running member reports itself connected to the cluster.
    pub fn wait_connected(&self) -> Result<()> {
        for m in &self.members {
            if m.pid().is_none() {
                continue;
            }
            wait_until("raft members to connect", || {
                let s = m
                    .appctl(&["cluster/status", &self.database])
                    .unwrap_or_default();
                Ok(s.lines()
                    .any(|l| l.trim() == "Status: cluster member")
                    .then_some(()))
            })?;
        }
        Ok(())
    }

    /// Index of the member that is leader now, if any.
    pub fn leader(&self) -> Option<usize> {
        let all: Vec<usize> = (0..self.members.len()).collect();
        self.leader_among(&all)
    }

    /// Index of the member among `among` that says it leads now, if any (a member
    /// that just left the cluster may still say so: leave it out).
    pub fn leader_among(&self, among: &[usize]) -> Option<usize> {
        among.iter().copied().find(|&i| {
            let m = &self.members[i];
            m.pid().is_some()
                && m.appctl(&["cluster/status", &self.database])
                    .is_ok_and(|s| s.lines().any(|l| l.trim() == "Role: leader"))
        })
    }

    /// Every member's TCP remote, comma-separated, as `--db` takes them.
    pub fn remotes(&self) -> String {
        self.members
            .iter()
            .map(OvsdbServer::tcp_remote)
            .collect::<Vec<_>>()
            .join(",")
    }
}
