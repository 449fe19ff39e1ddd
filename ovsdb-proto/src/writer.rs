//! The write half of a connection.
//!
//! A caller encodes its message into a shared buffer and, when the socket is idle,
//! writes it at once without waiting; only what would block is left to the writer task.
//! One at a time, a request therefore costs no task switch on the way out; many at once,
//! they pile up in the buffer and leave in large writes.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{watch, Notify};
use tokio_util::codec::Encoder;

use crate::codec::{JsonRpcCodec, Outgoing};

type Io = Box<dyn AsyncWrite + Send + Unpin>;

struct State {
    buf: BytesMut,
    /// The stream, unless the writer task holds it while it waits on a write.
    io: Option<Io>,
    /// Bytes were written since the last successful flush.
    needs_flush: bool,
    codec: JsonRpcCodec,
    closed: bool,
    /// Bytes the writer task took out of `buf` and is writing now.
    in_flight: usize,
    /// The most bytes that may wait unsent.
    limit: usize,
}

/// The shared write side: [`Writer::send`] from any task, [`Writer::run`] as a task.
pub(crate) struct Writer {
    state: Mutex<State>,
    wakeup: Notify,
}

impl Writer {
    /// A writer on `io` that fails once more than `limit` bytes wait unsent.
    pub(crate) fn new(io: Io, limit: usize) -> Arc<Writer> {
        Arc::new(Writer {
            state: Mutex::new(State {
                buf: BytesMut::with_capacity(8192),
                io: Some(io),
                needs_flush: false,
                codec: JsonRpcCodec::default(),
                closed: false,
                in_flight: 0,
                limit,
            }),
            wakeup: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every critical section leaves the state whole, so a poisoned lock is usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `msg` and writes as much as the socket takes now. An error means the
    /// connection is broken; the message was not sent.
    pub(crate) fn send(&self, msg: Outgoing) -> io::Result<()> {
        let mut st = self.lock();
        if st.closed {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "connection closed",
            ));
        }
        // A peer that does not read gets no more than the limit (one message always
        // fits).
        let (waiting, limit) = (st.buf.len() + st.in_flight, st.limit);
        if waiting > limit {
            st.closed = true;
            drop(st);
            self.wakeup.notify_one();
            return Err(io::Error::other(format!(
                "the server is not reading: {waiting} bytes wait unsent, over the limit of {limit} (ConnectOptions::max_unsent)"
            )));
        }
        let State { buf, codec, .. } = &mut *st;
        codec
            .encode(msg, buf)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let st = &mut *st;
        if let Some(io) = st.io.as_mut() {
            match write_now(io, &mut st.buf, &mut st.needs_flush) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => {
                    st.closed = true;
                    return Err(e);
                }
            }
        }
        self.wakeup.notify_one();
        Ok(())
    }

    /// Refuses further messages and lets the task close the stream.
    pub(crate) fn shutdown(&self) {
        self.lock().closed = true;
        self.wakeup.notify_one();
    }

    /// The writer task: finishes writes that would have blocked a caller, until the
    /// connection ends; then closes the stream.
    pub(crate) async fn run(self: Arc<Self>, mut ended: watch::Receiver<bool>) -> io::Result<()> {
        let result = self.run_inner(&mut ended).await;
        let io = {
            let mut st = self.lock();
            st.closed = true;
            st.io.take()
        };
        if let Some(mut io) = io {
            let _ = io.shutdown().await;
        }
        result
    }

    async fn run_inner(&self, ended: &mut watch::Receiver<bool>) -> io::Result<()> {
        loop {
            tokio::select! {
                _ = self.wakeup.notified() => {}
                _ = ended.wait_for(|e| *e) => return Ok(()),
            }
            loop {
                let (mut io, data) = {
                    let mut st = self.lock();
                    if st.closed {
                        return Ok(());
                    }
                    if st.buf.is_empty() && !st.needs_flush {
                        break;
                    }
                    let Some(io) = st.io.take() else { break };
                    let data = st.buf.split().freeze();
                    st.in_flight = data.len();
                    (io, data)
                };
                let result = async {
                    io.write_all(&data).await?;
                    io.flush().await
                }
                .await;
                let mut st = self.lock();
                st.io = Some(io);
                st.in_flight = 0;
                st.needs_flush = false;
                if let Err(e) = result {
                    st.closed = true;
                    return Err(e);
                }
            }
        }
    }
}

/// Writes and flushes `buf` without waiting. True when all of it went out; false when
/// the stream would block (what is left stays in `buf`).
fn write_now(io: &mut Io, buf: &mut BytesMut, needs_flush: &mut bool) -> io::Result<bool> {
    let mut cx = Context::from_waker(Waker::noop());
    while !buf.is_empty() {
        match Pin::new(&mut *io).poll_write(&mut cx, buf) {
            Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Poll::Ready(Ok(n)) => {
                buf.advance(n);
                *needs_flush = true;
            }
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => return Ok(false),
        }
    }
    if *needs_flush {
        match Pin::new(&mut *io).poll_flush(&mut cx) {
            Poll::Ready(Ok(())) => *needs_flush = false,
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => return Ok(false),
        }
    }
    Ok(true)
}
