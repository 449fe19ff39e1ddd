//! What netconnect reports, as the API server would show it: the status directory
//! (`--status-dir`, [`dir`], with its [`journal`]), the objects written there with their allocations as
//! annotations ([`annotate`]), a ClusterNetworkConnect's conditions ([`connect`]) and
//! events ([`events`]), and a network's conditions ([`network`]).

pub mod annotate;
pub mod connect;
pub mod dir;
pub mod events;
pub mod journal;
pub mod network;

use std::io;
use std::path::Path;

pub use connect::*;

/// The fewest items a thread of [`in_shares`] takes.
pub(crate) const PER_THREAD: usize = 32;

/// `f` of each share of `items`, in order, the shares taken by as many threads as the
/// host has cores (at most 4), each of [`PER_THREAD`] items or more.
pub(crate) fn in_shares<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let threads = (items.len() / PER_THREAD).clamp(1, cores);
    if threads == 1 {
        return f(items);
    }
    let per = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|share| scope.spawn(move || f(share)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// Writes `bytes` to `path` by writing a file beside it and renaming it into place, so
/// a reader sees the old file or the new one, never half of one.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    io::Write::write_all(&mut tmp, bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
