//! Locks on top of `lock`, `steal` and `unlock`: wait until a lock is held, learn when
//! it is lost.
//!
//! A [`Lock`] has its own connection, so the `locked` and `stolen` notifications that
//! drive it are not mixed with the caller's. A lock is held by a connection: when the
//! connection ends, the server gives the lock to the next in line, and the `Lock`
//! reports it lost. A stolen lock stays requested, as ovsdb-server keeps the former
//! holder in line: when the thief lets go it comes back, and the state is `Held`
//! again. [`Lock::release`] leaves the line for good.

use tokio::sync::watch;

use crate::client::Client;
use crate::config::ConnectOptions;
use crate::connect::connect_with;
use crate::error::Error;
use crate::monitor::Notification;
use crate::remote::Remote;

/// Where a lock stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockState {
    /// Asked for, held by another client.
    Waiting,
    /// Held by this client.
    Held,
    /// Stolen by another client (and waiting to get it back), or the connection
    /// ended.
    Lost,
}

/// A named OVSDB lock held (or waited for) over its own connection.
pub struct Lock {
    client: Client,
    name: String,
    state: watch::Receiver<LockState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Lock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Lock {
    /// Asks for `name` and waits until it is held.
    pub async fn acquire(
        remote: &Remote,
        options: &ConnectOptions,
        name: &str,
    ) -> Result<Lock, Error> {
        let lock = Lock::start(remote, options, name, false).await?;
        lock.wait_held().await?;
        Ok(lock)
    }

    /// Asks for `name` and returns at once, held or waiting.
    pub async fn request(
        remote: &Remote,
        options: &ConnectOptions,
        name: &str,
    ) -> Result<Lock, Error> {
        Lock::start(remote, options, name, false).await
    }

    /// Takes `name` from whoever holds it.
    pub async fn steal(
        remote: &Remote,
        options: &ConnectOptions,
        name: &str,
    ) -> Result<Lock, Error> {
        Lock::start(remote, options, name, true).await
    }

    async fn start(
        remote: &Remote,
        options: &ConnectOptions,
        name: &str,
        steal: bool,
    ) -> Result<Lock, Error> {
        let (client, mut notes) = connect_with(remote, options).await?;
        let held = if steal {
            client.steal(name).await?
        } else {
            client.lock(name).await?
        };
        let (tx, state) = watch::channel(if held {
            LockState::Held
        } else {
            LockState::Waiting
        });
        let (watched, closer) = (name.to_owned(), client.clone());
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    note = notes.recv() => match note {
                        Some(Notification::Locked(n)) if n == watched => {
                            tx.send_replace(LockState::Held);
                        }
                        Some(Notification::Stolen(n)) if n == watched => {
                            tx.send_replace(LockState::Lost);
                        }
                        Some(_) => {}
                        None => break,
                    },
                    _ = closer.closed() => break,
                }
            }
            tx.send_replace(LockState::Lost);
        });
        Ok(Lock {
            client,
            name: name.to_owned(),
            state,
            task,
        })
    }

    /// Where the lock stands now.
    pub fn state(&self) -> LockState {
        *self.state.borrow()
    }

    /// Waits until the lock is held; an error if it is lost first.
    pub async fn wait_held(&self) -> Result<(), Error> {
        let mut s = self.state.clone();
        let state = *s
            .wait_for(|s| *s != LockState::Waiting)
            .await
            .map_err(|_| Error::closed(Some("the lock's connection ended".into())))?;
        match state {
            LockState::Held => Ok(()),
            _ => Err(Error::closed(Some(
                format!("lock {} was lost before it was held", self.name).into(),
            ))),
        }
    }

    /// Waits until the lock is lost (stolen, or its connection ended).
    pub async fn lost(&self) {
        let mut s = self.state.clone();
        let _ = s.wait_for(|s| *s == LockState::Lost).await;
    }

    /// The lock's connection, for transactions that `assert` the lock.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Gives the lock up (or leaves its queue).
    pub async fn release(self) -> Result<(), Error> {
        self.client.unlock(&self.name).await
    }
}
