//! netconnectd's inputs as the API server prints them: every dump of
//! `tests/data/kubectl/` (`kubectl get … -o yaml` of a real cluster's kinds, in a
//! `kind: List`, with managedFields, status, finalizers, ownerReferences and the nil
//! lists Go writes as `null`) is read with no problem, and what it holds is programmed
//! as OVN-Kubernetes would: a headless service is known and gets no load balancer, an
//! ExternalName service nothing, and a service whose slices print `endpoints: null`
//! has its VIPs with no backend (OVN rejects there).

use std::path::{Path, PathBuf};

use nb_model::LoadBalancer;
use netconnect::api::load::{parse_file, Object};
use netconnect::keys::Key;
use netconnect::status::dir::State;
use netconnect::world::{Settings, World};

fn dumps() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kubectl");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no dump in {}", dir.display());
    files
}

fn world_of(path: &Path) -> (World, Vec<&'static str>) {
    let text = std::fs::read_to_string(path).unwrap();
    let file = parse_file(Path::new(path.file_name().unwrap()), &text);
    // Every field the API server prints is one netconnectd knows: no warning.
    assert!(
        file.warnings.is_empty(),
        "{}: {:#?}",
        path.display(),
        file.warnings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    let kinds = file.objects.iter().map(|(_, o)| o.kind()).collect();
    let world = World::build(&[file], &State::default(), Settings::default());
    (world, kinds)
}

#[test]
fn every_kubectl_dump_is_read_with_no_problem() {
    let mut kinds = std::collections::BTreeSet::new();
    for path in dumps() {
        let (world, read) = world_of(&path);
        assert!(
            world.problems.is_empty(),
            "{}: {:#?}",
            path.display(),
            world.problems
        );
        kinds.extend(read);
        for key in world.keys() {
            if let Err(e) = world.desired(&key) {
                panic!("{}: {key}: {e}", path.display());
            }
        }
    }
    let every = [
        "Node",
        "Namespace",
        "UserDefinedNetwork",
        "ClusterUserDefinedNetwork",
        "ClusterNetworkConnect",
        "Service",
        "EndpointSlice",
        "NetworkAttachmentDefinition",
    ];
    assert_eq!(
        kinds,
        every.into_iter().collect(),
        "the dumps hold every kind"
    );
}

#[test]
fn a_dumps_services_are_programmed_as_ovn_kubernetes_would() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kubectl/kind-cluster.yaml");
    let (world, _) = world_of(&path);
    let inv = &world.inventory;
    // The headless service without ports is known, with no address and no port.
    let db = &inv.services["red/db"];
    assert!(db.cluster_ips.is_empty() && db.ports.is_empty(), "{db:?}");
    // An ExternalName service is not programmed.
    assert!(!inv.services.contains_key("red/upstream"));
    let lb = |svc: &str, name: &str| -> Option<LoadBalancer> {
        world
            .desired(&Key::Service(svc.into()))
            .unwrap()
            .get::<LoadBalancer>(name)
    };
    assert_eq!(lb("red/db", "red_net_Service_red/db_TCP_cluster"), None);
    // Its pod on red_net, at the slice's port.
    let web = lb("red/web", "red_net_Service_red/web_TCP_cluster").unwrap();
    assert_eq!(
        web.vips.get("10.96.45.12:80").map(String::as_str),
        Some("10.100.1.5:8080")
    );
    // Its slices print `endpoints: null` and `ports: null`: each VIP with no backend.
    for (proto, vip) in [("TCP", "10.96.45.13:80"), ("UDP", "10.96.45.13:53")] {
        let np = lb(
            "red/web-np",
            &format!("red_net_Service_red/web-np_{proto}_cluster"),
        )
        .unwrap();
        assert_eq!(np.vips.get(vip).map(String::as_str), Some(""), "{np:?}");
    }
    // The networks keep the ids OVN-Kubernetes gave them, as their
    // NetworkAttachmentDefinitions carry them (the UDN and CUDN carry none), and the
    // Layer2 network its tunnel keys; another plugin's attachment is left alone.
    assert_eq!(world.allocations.network_ids["red_net"], 2);
    assert_eq!(world.allocations.network_ids["cluster_udn_blue"], 3);
    assert_eq!(
        world.allocations.tunnel_keys["cluster_udn_blue"],
        [16711686, 16715779]
    );
    assert_eq!(inv.nads.len(), 2, "{:?}", inv.nads.keys());
    // The default network's service is validated and left to OVN-Kubernetes.
    assert!(inv.services.contains_key("default/kubernetes"));
    assert!(!world
        .keys()
        .contains(&Key::Service("default/kubernetes".into())));
    // Nothing of `kubectl`'s List or of the objects' bookkeeping is lost on the way:
    // the first node as read keeps its managedFields and status.
    let text = std::fs::read_to_string(&path).unwrap();
    let file = parse_file(Path::new("kind-cluster.yaml"), &text);
    let Object::Node(node) = &file.objects[0].1 else {
        panic!("the dump starts with a node")
    };
    assert_eq!(node.metadata.managed_fields.as_ref().map(Vec::len), Some(3));
    let status = node.status.as_ref().unwrap();
    assert_eq!(status.conditions.as_ref().map(Vec::len), Some(2));
}
