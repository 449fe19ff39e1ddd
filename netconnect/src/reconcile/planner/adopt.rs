//! Adoption ([`Desired::adopt`], netconnectd's `--adopt ovn-kubernetes`): a row the key
//! wants that OVN-Kubernetes wrote is taken over where it is instead of being a
//! conflict. OVN-Kubernetes' rows carry none of netconnect's owner keys; such a row is
//! recognised by what OVN-Kubernetes identifies it with: its name, where the table
//! has one; a route by its router, policy, prefix and next hop; a policy by its router,
//! priority and match; a NAT rule by its router, type and addresses (the identities of
//! [`crate::topology::rows`], computed from the row as the NB holds it, under the
//! router that holds it). An adopted row then counts as one of the key's: the plan
//! updates it (its owner keys, and any column that differs) in the key's one
//! transaction, keeping its uuid. A row another owner stamped is never adopted.
//!
//! What OVN-Kubernetes wrote that the key would not write (a policy, a route, a port
//! of a kind the key writes, held by a row the key holds, that no wanted row took) is
//! listed in [`Plan::theirs`] and left as it is. Pods' ports (`external_ids:pod=true`,
//! OVN-Kubernetes' `base_network_controller_pods.go`) are neither netconnect's to write
//! nor listed.

use nb_model::{LogicalRouter, LogicalRouterPolicy, LogicalRouterStaticRoute, Nat};
use ovsdb_proto::model::Table;

use super::schema::atoms;
use super::*;
use crate::topology::rows::{nat_identity, policy_identity, route_identity};

/// The unowned children of one router, by table and identity.
type Children = HashMap<(&'static str, String), (Uuid, Arc<CachedRow>)>;

/// The router column holding each table of rows known by their router.
const CHILDREN: [(&str, &str); 3] = [
    ("Logical_Router_Static_Route", "static_routes"),
    ("Logical_Router_Policy", "policies"),
    ("NAT", "nat"),
];

impl<'a> Planning<'a> {
    /// Phase 1b: the wanted rows the key does not hold that OVN-Kubernetes wrote,
    /// adopted. Named rows first, so that the routers the others hang from are known.
    /// An error when there is a row to adopt and the key must not
    /// ([`Desired::adopt_refused`]).
    pub(super) fn adopt(&mut self, plan: &mut Plan) -> Result<(), PlanError> {
        let desired = self.desired;
        let missing = |p: &Self, r: &DesiredRow| {
            !r.kept && !r.shared && r.stamped && p.find(r.table, &r.identity).is_none()
        };
        for r in desired.rows() {
            let Some(name) = r.name().filter(|_| missing(self, r)) else {
                continue;
            };
            let found: Vec<(Uuid, Arc<CachedRow>)> = self
                .nb
                .named(self.snap, r.table, name)
                .into_iter()
                .filter(|(u, row)| !self.owns(u) && unowned(row))
                .collect();
            if let [(uuid, row)] = found.as_slice() {
                self.take(plan, r, *uuid, row.clone());
            }
        }
        let mut by_router: HashMap<String, Children> = HashMap::new();
        for r in desired.rows() {
            if !CHILDREN.iter().any(|(t, _)| *t == r.table) || !missing(self, r) {
                continue;
            }
            let Some((router, _)) = r.identity.split_once('|') else {
                continue;
            };
            let children = by_router
                .entry(router.to_owned())
                .or_insert_with(|| self.unowned_children(router));
            if let Some((uuid, row)) = children.remove(&(r.table, r.identity.clone())) {
                self.take(plan, r, uuid, row);
            }
        }
        match (&desired.adopt_refused, plan.adopted.first()) {
            (Some(why), Some(first)) => Err(PlanError::AdoptRefused {
                rows: plan.adopted.len(),
                first: first.clone(),
                why: why.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Phase 7 (adopting): the unowned rows held by the key's rows, of the tables the
    /// key writes, that the key does not want: listed in [`Plan::theirs`], not written.
    pub(super) fn list_theirs(&self, plan: &mut Plan) {
        let writes: HashSet<&str> = self.desired.rows().map(|r| r.table).collect();
        let mut listed = HashSet::new();
        let mut parents: Vec<(&str, &Existing)> = self
            .existing
            .iter()
            .flat_map(|(t, rows)| rows.values().map(move |e| (*t, e)))
            .collect();
        parents.sort_by_key(|(t, e)| (*t, e.uuid));
        for (table, parent) in parents {
            let info = &self.info[table];
            let router = (table == LogicalRouter::NAME)
                .then(|| parent.row.get("name")?.as_scalar()?.as_str())
                .flatten();
            for column in &info.refs {
                let Some(child_table) = info.schema.columns.get(column).and_then(|c| {
                    let t = &c.column_type;
                    t.key
                        .ref_table
                        .as_deref()
                        .or(t.value.as_ref().and_then(|v| v.ref_table.as_deref()))
                }) else {
                    continue;
                };
                if !writes.contains(child_table) {
                    continue;
                }
                let children = parent.row.get(column).into_iter().flat_map(atoms);
                for uuid in children.filter_map(Atom::as_uuid) {
                    let Some(row) = self.snap.get(child_table, &uuid) else {
                        continue;
                    };
                    if self.owns(&uuid) || !unowned(&row) || a_pods_port(child_table, &row) {
                        continue;
                    }
                    if !listed.insert(uuid) {
                        continue;
                    }
                    let name = row.get("name").and_then(|d| d.as_scalar()?.as_str());
                    let identity = match (name, router) {
                        (Some(n), _) => n.to_owned(),
                        (None, Some(router)) => identity(child_table, router, uuid, &row)
                            .unwrap_or_else(|| uuid.to_string()),
                        (None, None) => uuid.to_string(),
                    };
                    plan.theirs.push(RowName {
                        table: child_table.to_owned(),
                        identity,
                    });
                }
            }
        }
        plan.theirs
            .sort_by(|a, b| (&a.table, &a.identity).cmp(&(&b.table, &b.identity)));
    }

    /// Takes row `uuid` as the key's row `r`.
    fn take(&mut self, plan: &mut Plan, r: &DesiredRow, uuid: Uuid, row: Arc<CachedRow>) {
        self.adopted.insert(uuid);
        self.existing
            .entry(r.table)
            .or_default()
            .insert(r.identity.clone(), Existing { uuid, row });
        plan.adopted.push(RowName {
            table: r.table.into(),
            identity: r.identity.clone(),
        });
    }

    /// The routes, policies and NAT rules of router `router` (as the NB holds it) that
    /// no owner stamped, by table and identity.
    fn unowned_children(&self, router: &str) -> Children {
        let mut out = HashMap::new();
        for (_, r) in self.nb.named(self.snap, LogicalRouter::NAME, router) {
            for (table, column) in CHILDREN {
                for child in r.set(column).into_iter().flat_map(|s| s.iter()) {
                    let Some(uuid) = child.as_uuid() else {
                        continue;
                    };
                    let Some(row) = self.snap.get(table, &uuid).filter(|row| unowned(row)) else {
                        continue;
                    };
                    if self.owns(&uuid) {
                        continue;
                    }
                    if let Some(identity) = identity(table, router, uuid, &row) {
                        out.insert((table, identity), (uuid, row));
                    }
                }
            }
        }
        out
    }
}

/// True when `row` of `table` is a pod's port as OVN-Kubernetes writes one.
fn a_pods_port(table: &str, row: &CachedRow) -> bool {
    table == "Logical_Switch_Port"
        && row
            .get("external_ids")
            .and_then(|d| d.get_str("pod"))
            .and_then(Atom::as_str)
            == Some("true")
}

/// True when no owner stamped `row` (OVN-Kubernetes writes its network rows so).
fn unowned(row: &CachedRow) -> bool {
    row.get("external_ids").and_then(Owner::of).is_none()
}

/// The identity of child row `row` of `table` under router `router`.
fn identity(table: &str, router: &str, uuid: Uuid, row: &CachedRow) -> Option<String> {
    match table {
        "Logical_Router_Static_Route" => LogicalRouterStaticRoute::from_row(uuid, row)
            .ok()
            .map(|r| route_identity(router, &r)),
        "Logical_Router_Policy" => LogicalRouterPolicy::from_row(uuid, row)
            .ok()
            .map(|p| policy_identity(router, &p)),
        "NAT" => Nat::from_row(uuid, row)
            .ok()
            .map(|n| nat_identity(router, &n)),
        _ => None,
    }
}
