//! The reflector: applies what the watcher reports to the store, and publishes it:
//! the events (to the [`CacheEvents`](super::CacheEvents) stream and the typed
//! streams), readiness, the connection and schema to transact with, the counters.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::receiver::BatchSender;
use super::store::{Snapshot, Writer};
use super::watcher::{self, Command, Contents, WatchEvent};
use super::{CacheConfig, CacheEvent, Published};

/// Runs the cache: the watcher on its own task, the reflector on this one. Ends (and
/// ends the watcher) when the task is aborted.
pub(super) async fn run(
    config: CacheConfig,
    writer: Writer,
    published: Published,
    events: BatchSender<CacheEvent>,
    commands: mpsc::Receiver<Command>,
) {
    let (watch_tx, watch_rx) = mpsc::channel(1);
    let handled = published.handled.clone();
    let watcher = tokio::spawn(watcher::run(config.clone(), watch_tx, commands, handled));
    // Aborted with this task, whichever way it ends.
    struct AbortOnDrop(tokio::task::JoinHandle<()>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _watcher = AbortOnDrop(watcher);
    Reflector {
        config,
        writer,
        published,
        events,
        announced: false,
    }
    .run(watch_rx)
    .await
}

struct Reflector {
    config: CacheConfig,
    writer: Writer,
    published: Published,
    events: BatchSender<CacheEvent>,
    /// Whether the initial contents were announced.
    announced: bool,
}

impl Reflector {
    async fn run(mut self, mut watched: mpsc::Receiver<WatchEvent>) {
        while let Some(event) = watched.recv().await {
            match event {
                WatchEvent::Synced { contents, ack } => {
                    let Contents {
                        updates,
                        resync,
                        layouts,
                        skew,
                        schema,
                        client,
                        remote,
                    } = *contents;
                    if let Some(skew) = &skew {
                        self.published
                            .skew
                            .send_replace(Some(Arc::new(skew.clone())));
                    }
                    let before = self.writer.shared().load();
                    let applied = match resync {
                        true => self.writer.resync(&layouts, updates),
                        false => self.writer.apply(updates),
                    };
                    let changes = match applied {
                        Ok(changes) => changes,
                        Err(e) => {
                            let _ = ack.send(Err(e));
                            continue;
                        }
                    };
                    let _ = ack.send(Ok(()));
                    // Counted once the contents are in: a caller that sees the count
                    // grow reads this connection's state.
                    self.published.stats.count(!resync);
                    let mut batch: Vec<CacheEvent> =
                        changes.into_iter().map(CacheEvent::Change).collect();
                    batch.extend(skew.filter(|s| !s.is_empty()).map(CacheEvent::Skew));
                    if !self.announced {
                        batch.push(CacheEvent::Ready);
                        self.announced = true;
                    }
                    self.publish(batch, &before).await;
                    // The connection and schema first: a caller woken by `ready` may
                    // transact at once.
                    self.published.schema.send_replace(Some(schema));
                    self.published.client.send_replace(Some(client));
                    self.published.remote.send_replace(Some(remote));
                    self.published.ready.send_replace(true);
                }
                WatchEvent::Changed { changes, ack } => {
                    let before = self.writer.shared().load();
                    match self.writer.apply(changes) {
                        Ok(changes) => {
                            let _ = ack.send(Ok(()));
                            let batch = changes.into_iter().map(CacheEvent::Change).collect();
                            self.publish(batch, &before).await;
                        }
                        Err(e) => {
                            let _ = ack.send(Err(e));
                        }
                    }
                }
                WatchEvent::Unusable {
                    remote,
                    error,
                    reason,
                } => {
                    self.published.unusable.record(&remote, &error);
                    let now = self.writer.shared().load();
                    let event = CacheEvent::Unusable {
                        remote,
                        error,
                        reason,
                    };
                    self.publish(vec![event], &now).await;
                }
                WatchEvent::Disconnected => {
                    self.published.client.send_replace(None);
                    self.published.remote.send_replace(None);
                }
            }
        }
    }

    /// Sends `batch`, which took the contents from `before` to what they are now.
    async fn publish(&self, batch: Vec<CacheEvent>, before: &Snapshot) {
        self.published.version.send_modify(|v| *v += 1);
        let after = self.writer.shared().load();
        if !batch.is_empty() {
            for s in &self.config.subscribers {
                let table = s.table();
                s.deliver(
                    &batch,
                    before.typed_any(table),
                    after.typed_any(table),
                    &self.published.held,
                )
                .await;
            }
            self.events.send(batch, &self.published.held).await;
        }
        // Only the reflector stores snapshots: `after` is still the current one.
        self.published.delivered.send_replace(after.seq());
    }
}
