//! [`ChannelBody`]: an `AsyncBufRead` fed by a channel of chunks, the body of every response
//! the server streams. async-h1's chunked encoder turns each successful read into one chunk
//! and writes it straight to the socket, so each router chunk (one SSE frame, or a whole JSON
//! body) goes out as soon as it is produced.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use smol::channel::Receiver;
use smol::io::{AsyncBufRead, AsyncRead};
use smol::stream::Stream;

/// Runs a closure when dropped before being disarmed (when the body ends normally).
pub(crate) struct OnDrop<F: FnOnce() + Send + Sync + Unpin>(Option<F>);

impl<F: FnOnce() + Send + Sync + Unpin> OnDrop<F> {
    pub(crate) fn new(f: F) -> Self {
        OnDrop(Some(f))
    }

    /// The body ended normally: the closure never runs.
    pub(crate) fn disarm(&mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce() + Send + Sync + Unpin> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// How a body talks back to the driver: the bytes async-h1 took (the core paces by them,
/// `Router::handle_written`) and whether the core cut the exchange (the body then fails, so
/// async-h1 never writes the terminating chunk of a cut response).
pub(crate) struct Flow {
    /// Set by the driver on the core's `ResponseAbort`.
    pub(crate) aborted: Arc<AtomicBool>,
    /// Reports taken bytes.
    pub(crate) report: Box<dyn Fn(usize) + Send + Sync>,
    /// Report once this many bytes are unreported (`ServerConfig::write_report_threshold`).
    pub(crate) report_every: usize,
}

impl Flow {
    /// No reports and never aborted (tests).
    #[cfg(test)]
    pub(crate) fn none() -> Self {
        Flow {
            aborted: Arc::default(),
            report: Box::new(|_| {}),
            report_every: usize::MAX,
        }
    }
}

/// A response body that reads the chunks of a channel until every sender is gone.
///
/// `early_drop` runs when the body is dropped before its end (async-h1 drops it when a write
/// to the client fails: the client left). `keep` holds whatever must live exactly as long as
/// the body (the disconnect watcher).
pub(crate) struct ChannelBody<F: FnOnce() + Send + Sync + Unpin, K: Send + Sync + Unpin> {
    rx: Pin<Box<Receiver<Bytes>>>,
    buf: Bytes,
    early_drop: OnDrop<F>,
    keep: Option<K>,
    flow: Flow,
    /// Bytes consumed and not yet reported.
    taken: usize,
}

impl<F: FnOnce() + Send + Sync + Unpin, K: Send + Sync + Unpin> ChannelBody<F, K> {
    pub(crate) fn new(rx: Receiver<Bytes>, early_drop: OnDrop<F>, keep: K, flow: Flow) -> Self {
        ChannelBody {
            rx: Box::pin(rx),
            buf: Bytes::new(),
            early_drop,
            keep: Some(keep),
            flow,
            taken: 0,
        }
    }

    fn report(&mut self) {
        if self.taken > 0 {
            (self.flow.report)(std::mem::take(&mut self.taken));
        }
    }
}

impl<F: FnOnce() + Send + Sync + Unpin, K: Send + Sync + Unpin> AsyncBufRead for ChannelBody<F, K> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<&[u8]>> {
        let this = self.get_mut();
        while this.buf.is_empty() && this.keep.is_some() {
            match this.rx.as_mut().poll_next(cx) {
                Poll::Ready(Some(chunk)) => this.buf = chunk,
                Poll::Ready(None) => {
                    // Every sender is gone: the router ended (or cut) the response.
                    this.early_drop.disarm();
                    this.keep = None;
                    if this.flow.aborted.load(Ordering::Acquire) {
                        return Poll::Ready(Err(std::io::Error::new(
                            std::io::ErrorKind::ConnectionAborted,
                            "the response was cut: the client stopped reading it",
                        )));
                    }
                }
                Poll::Pending => {
                    // Everything given so far was taken: let the core send more.
                    this.report();
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(Ok(&this.buf))
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        let this = self.get_mut();
        let amt = amt.min(this.buf.len());
        this.buf.advance(amt);
        this.taken += amt;
        if this.taken >= this.flow.report_every {
            this.report();
        }
    }
}

impl<F: FnOnce() + Send + Sync + Unpin, K: Send + Sync + Unpin> AsyncRead for ChannelBody<F, K> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        let n = match self.as_mut().poll_fill_buf(cx) {
            Poll::Ready(Ok(buf)) => {
                let n = buf.len().min(out.len());
                out[..n].copy_from_slice(&buf[..n]);
                n
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        self.consume(n);
        Poll::Ready(Ok(n))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use smol::io::AsyncReadExt;

    use super::*;

    #[test]
    fn reads_each_chunk_then_ends_without_running_the_drop_hook() {
        smol::block_on(async {
            let (tx, rx) = smol::channel::unbounded();
            let dropped = Arc::new(AtomicBool::new(false));
            let d = dropped.clone();
            let mut body = ChannelBody::new(
                rx,
                OnDrop::new(move || d.store(true, Ordering::SeqCst)),
                (),
                Flow::none(),
            );
            tx.send(Bytes::from_static(b"data: a\n\n")).await.unwrap();
            tx.send(Bytes::from_static(b"data: b\n\n")).await.unwrap();
            let mut buf = [0u8; 64];
            assert_eq!(body.read(&mut buf).await.unwrap(), 9);
            assert_eq!(&buf[..9], b"data: a\n\n");
            drop(tx);
            let mut rest = Vec::new();
            body.read_to_end(&mut rest).await.unwrap();
            assert_eq!(rest, b"data: b\n\n");
            drop(body);
            assert!(!dropped.load(Ordering::SeqCst));
        });
    }

    #[test]
    fn dropping_before_the_end_runs_the_drop_hook() {
        let (tx, rx) = smol::channel::unbounded::<Bytes>();
        let dropped = Arc::new(AtomicBool::new(false));
        let d = dropped.clone();
        let body = ChannelBody::new(
            rx,
            OnDrop::new(move || d.store(true, Ordering::SeqCst)),
            (),
            Flow::none(),
        );
        drop(body);
        assert!(dropped.load(Ordering::SeqCst));
        drop(tx);
    }
}
