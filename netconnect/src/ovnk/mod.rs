//! The ground floor: what every layer above uses and that uses nothing of the crate
//! (imports go down only): address arithmetic ([`addr`]), OVN-Kubernetes' MACs
//! ([`mac`]), its NB names ([`names`]), who owns a row and how it is stamped
//! ([`ownership`]), fingerprints of inputs, and walks in step through maps in name
//! order.

pub mod addr;
pub mod mac;
pub mod names;
pub mod ownership;

/// A fingerprint of a fragment's inputs (stable within one process, which is where
/// reconcilers remember them).
pub(crate) fn fingerprint(inputs: impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(inputs)
}

/// The value of `name` in `map`, a map walked in name order beside a walk through
/// names in the same order: the entries before `name` are passed over. Each entry's
/// name is compared once (a network's build walks every node's entry).
pub(crate) fn in_step<'a, K: std::borrow::Borrow<str> + 'a, V: 'a>(
    map: &mut std::iter::Peekable<impl Iterator<Item = (&'a K, &'a V)>>,
    name: &str,
) -> Option<&'a V> {
    use std::cmp::Ordering;
    loop {
        match (*map.peek()?.0).borrow().cmp(name) {
            Ordering::Less => {
                map.next();
            }
            Ordering::Equal => return map.next().map(|(_, v)| v),
            Ordering::Greater => return None,
        }
    }
}
