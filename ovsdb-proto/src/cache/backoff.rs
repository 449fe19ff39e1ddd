//! When and where the cache tries next: the wait after failures (exponential, with
//! jitter) and the choice of server.

use std::time::Duration;

use uuid::Uuid;

use crate::remote::Remote;

/// The wait before attempt `failures + 1` after `failures` failures in a row: the
/// minimum after none, then up to twice as long each time (capped at `max`), jittered.
pub(super) fn backoff(min: Duration, max: Duration, failures: u32) -> Duration {
    let exp = min.saturating_mul(1u32 << failures.min(16)).min(max);
    let fraction = (random_u64() % 1000) as u32;
    min + (exp.saturating_sub(min)) * fraction / 1000
}

/// The wait after a server could not be used: the minimum while the round has
/// servers left to try; after a round in which none could be used, [`backoff`] by the
/// number of such rounds in a row (`failed_rounds`, counted here). A cluster electing a
/// leader answers "not the leader" from every member for a while: counted per server,
/// the wait would soon outgrow the election itself.
pub(super) fn after_failure(
    min: Duration,
    max: Duration,
    round_over: bool,
    failed_rounds: &mut u32,
) -> Duration {
    if !round_over {
        return min;
    }
    *failed_rounds = failed_rounds.saturating_add(1);
    backoff(min, max, *failed_rounds)
}

fn random_u64() -> u64 {
    let b = Uuid::new_v4().into_bytes();
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[9], b[10]])
}

pub(super) fn shuffled(remotes: &[Remote]) -> Vec<Remote> {
    let mut v = remotes.to_vec();
    for i in (1..v.len()).rev() {
        let j = (random_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// Which of `order` to try next: going round from `from`, the first server not
/// `tried` since the last session that synced; a server among `suspects` (it sent data
/// that does not fit the schema) only when no other is left. `tried` must leave one
/// out.
pub(super) fn pick(order: &[Remote], from: usize, tried: &[Remote], suspects: &[Remote]) -> usize {
    let round = (0..order.len()).map(|k| (from + k) % order.len());
    let untried = |&i: &usize| !tried.contains(&order[i]);
    round
        .clone()
        .filter(untried)
        .find(|&i| !suspects.contains(&order[i]))
        .or_else(|| round.clone().find(untried))
        .unwrap_or(from % order.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remotes(names: &[&str]) -> Vec<Remote> {
        names
            .iter()
            .map(|n| Remote::Unix(format!("/{n}").into()))
            .collect()
    }

    #[test]
    fn waits_grow_from_the_minimum_to_the_maximum() {
        let (min, max) = (Duration::from_millis(50), Duration::from_secs(8));
        for _ in 0..100 {
            assert_eq!(backoff(min, max, 0), min, "no failure: the minimum");
            let w = backoff(min, max, 3);
            assert!(w >= min && w <= min * 8, "{w:?}");
            assert!(backoff(min, max, 40) <= max, "capped");
        }
    }

    #[test]
    fn a_round_of_failures_waits_the_minimum_between_servers_and_longer_after_it() {
        let (min, max) = (Duration::from_millis(50), Duration::from_secs(8));
        for _ in 0..100 {
            let mut rounds = 0;
            // Three members answering "not the leader", four rounds in a row.
            let mut total = Duration::ZERO;
            for round in 1..=4u32 {
                for server in 1..=3 {
                    let w = after_failure(min, max, server == 3, &mut rounds);
                    if server < 3 {
                        assert_eq!(w, min, "round {round}, server {server}");
                    } else {
                        assert!(w >= min && w <= min * (1 << round), "{round}: {w:?}");
                    }
                    total += w;
                }
            }
            assert_eq!(rounds, 4);
            // Twelve servers tried within 1.3 s at most; counted per server, the
            // twelfth wait alone could be 8 s.
            assert!(total <= min * (8 + 2 + 4 + 8 + 16), "{total:?}");
        }
    }

    #[test]
    fn the_next_server_is_the_next_untried_one_and_a_suspect_comes_last() {
        let order = remotes(&["a", "b", "c"]);
        let some = |names: &str| -> Vec<Remote> {
            names
                .chars()
                .map(|n| order[(n as u8 - b'a') as usize].clone())
                .collect()
        };
        // Round robin while nothing is suspect.
        assert_eq!(pick(&order, 0, &[], &[]), 0);
        assert_eq!(pick(&order, 1, &some("a"), &[]), 1);
        assert_eq!(pick(&order, 3, &[], &[]), 0, "wraps around");
        // After a synced session on a (nothing tried since), b is next.
        assert_eq!(pick(&order, 1, &[], &[]), 1);
        // b sent malformed rows: c and a come first, b only when they failed too.
        assert_eq!(pick(&order, 1, &[], &some("b")), 2);
        assert_eq!(pick(&order, 3, &some("c"), &some("b")), 0);
        assert_eq!(pick(&order, 1, &some("ca"), &some("b")), 1);
        // Everything tried but one: that one.
        assert_eq!(pick(&order, 0, &some("ac"), &[]), 1);
    }
}
