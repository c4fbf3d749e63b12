//! The reply path of one server exchange: the slot the driver writes ([`Exchange`]) and the
//! connection reads ([`Replies`]).
//!
//! # Theory of operation
//!
//! One allocation per exchange, shared by its two ends under a lock that each side holds
//! for a push or a pop: the response head, the body chunks not yet taken, how the body ended,
//! and the reader's waker. A JSON answer's head, body and end arrive in one driver turn, so
//! the connection finds them together: one wake-up, and the whole body's length known before
//! the head is written (the HTTP library can send `Content-Length` instead of chunks).
//!
//! | body | event | next |
//! |---|---|---|
//! | open | the driver drops its [`Exchange`] | ended (what is queued is still read) |
//! | open | [`Exchange::abort`] | aborted (what is queued is read, then the error) |
//! | any | the connection drops its [`Replies`] | the reader is gone: [`Exchange::send`] says false |

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use super::server::{ExchangeSink, Reply, ResponseAborted};
use crate::lock;

/// How the body stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Open,
    Ended,
    Aborted,
}

#[derive(Debug)]
struct Slot {
    head: Option<(StatusCode, HeaderMap)>,
    /// Whether a head came (a second one is dropped rather than corrupt the body).
    headed: bool,
    chunks: VecDeque<Bytes>,
    end: End,
    reader_gone: bool,
    waker: Option<Waker>,
}

/// The driver's end of an exchange: the standard [`ExchangeSink`].
#[derive(Debug)]
pub struct Exchange(Arc<Mutex<Slot>>);

/// The connection's end of an exchange.
#[derive(Debug)]
pub(crate) struct Replies(Arc<Mutex<Slot>>);

/// A new exchange's two ends.
pub(crate) fn exchange() -> (Exchange, Replies) {
    let slot = Arc::new(Mutex::new(Slot {
        head: None,
        headed: false,
        chunks: VecDeque::new(),
        end: End::Open,
        reader_gone: false,
        waker: None,
    }));
    (Exchange(slot.clone()), Replies(slot))
}

impl Exchange {
    /// Ends the body as `end` (once: an abort is not undone by the drop that follows).
    fn close(&self, end: End) {
        let waker = {
            let mut slot = lock(&self.0);
            if slot.end != End::Open {
                return;
            }
            slot.end = end;
            slot.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl ExchangeSink for Exchange {
    fn send(&mut self, reply: Reply) -> bool {
        let waker = {
            let mut slot = lock(&self.0);
            if slot.reader_gone {
                return false;
            }
            match reply {
                Reply::Head(status, headers) if !slot.headed => {
                    slot.headed = true;
                    slot.head = Some((status, headers));
                }
                Reply::Head(..) => return true,
                Reply::Body(chunk) => slot.chunks.push_back(chunk),
            }
            slot.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        true
    }

    fn abort(self) {
        self.close(End::Aborted);
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        self.close(End::Ended);
    }
}

impl Replies {
    /// The response head; `None` when the exchange ended without one (the driver is gone).
    pub(crate) fn poll_head(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<(StatusCode, HeaderMap)>> {
        let mut slot = lock(&self.0);
        if let Some(head) = slot.head.take() {
            return Poll::Ready(Some(head));
        }
        if slot.headed || slot.end != End::Open {
            return Poll::Ready(None);
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// The next body chunk; `None` at the end, an error when the response was cut.
    pub(crate) fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, ResponseAborted>>> {
        let mut slot = lock(&self.0);
        if let Some(chunk) = slot.chunks.pop_front() {
            if slot.chunks.is_empty() && slot.chunks.capacity() > 4 {
                // A burst grew it: a long-lived stream keeps no large buffer when idle.
                slot.chunks = VecDeque::new();
            }
            return Poll::Ready(Some(Ok(chunk)));
        }
        match slot.end {
            End::Ended => Poll::Ready(None),
            End::Aborted => Poll::Ready(Some(Err(ResponseAborted))),
            End::Open => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// The length of the rest of the body, when it is all here and ended.
    pub(crate) fn exact_rest(&self) -> Option<u64> {
        let slot = lock(&self.0);
        (slot.end == End::Ended).then(|| slot.chunks.iter().map(|c| c.len() as u64).sum())
    }
}

impl Drop for Replies {
    fn drop(&mut self) {
        let mut slot = lock(&self.0);
        slot.reader_gone = true;
        slot.chunks.clear();
        slot.waker = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx() -> Context<'static> {
        Context::from_waker(Waker::noop())
    }

    #[test]
    fn a_whole_answer_is_read_at_once_with_its_length() {
        let (mut sink, mut replies) = exchange();
        assert!(replies.poll_head(&mut cx()).is_pending());
        assert!(sink.send(Reply::Head(StatusCode::OK, HeaderMap::new())));
        assert!(sink.send(Reply::Body(Bytes::from_static(b"{}"))));
        assert_eq!(replies.exact_rest(), None, "not ended yet");
        drop(sink);
        assert!(matches!(
            replies.poll_head(&mut cx()),
            Poll::Ready(Some((StatusCode::OK, _)))
        ));
        assert_eq!(replies.exact_rest(), Some(2));
        assert!(matches!(replies.poll_chunk(&mut cx()), Poll::Ready(Some(Ok(c))) if c == "{}"));
        assert!(matches!(replies.poll_chunk(&mut cx()), Poll::Ready(None)));
    }

    #[test]
    fn an_abort_is_read_after_what_was_queued() {
        let (mut sink, mut replies) = exchange();
        assert!(sink.send(Reply::Head(StatusCode::OK, HeaderMap::new())));
        assert!(sink.send(Reply::Body(Bytes::from_static(b"data: 1\n\n"))));
        sink.abort();
        assert!(replies.poll_head(&mut cx()).is_ready());
        assert_eq!(replies.exact_rest(), None, "a cut body has no length");
        assert!(matches!(
            replies.poll_chunk(&mut cx()),
            Poll::Ready(Some(Ok(_)))
        ));
        assert!(matches!(
            replies.poll_chunk(&mut cx()),
            Poll::Ready(Some(Err(ResponseAborted)))
        ));
    }

    #[test]
    fn no_head_means_the_driver_is_gone_and_a_second_head_is_dropped() {
        let (sink, mut replies) = exchange();
        drop(sink);
        assert!(matches!(replies.poll_head(&mut cx()), Poll::Ready(None)));
        let (mut sink, mut replies) = exchange();
        assert!(sink.send(Reply::Head(StatusCode::OK, HeaderMap::new())));
        assert!(sink.send(Reply::Head(StatusCode::NOT_FOUND, HeaderMap::new())));
        assert!(matches!(
            replies.poll_head(&mut cx()),
            Poll::Ready(Some((StatusCode::OK, _)))
        ));
        assert!(replies.poll_chunk(&mut cx()).is_pending());
    }

    #[test]
    fn a_gone_reader_refuses_replies() {
        let (mut sink, replies) = exchange();
        drop(replies);
        assert!(!sink.send(Reply::Body(Bytes::from_static(b"x"))));
    }

    #[test]
    fn the_reader_is_woken_by_each_reply_and_by_the_end() {
        struct Count(std::sync::atomic::AtomicUsize);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let count = Arc::new(Count(std::sync::atomic::AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let (mut sink, mut replies) = exchange();
        assert!(replies.poll_head(&mut cx).is_pending());
        sink.send(Reply::Head(StatusCode::OK, HeaderMap::new()));
        assert!(replies.poll_head(&mut cx).is_ready());
        assert!(replies.poll_chunk(&mut cx).is_pending());
        sink.send(Reply::Body(Bytes::from_static(b"x")));
        assert!(replies.poll_chunk(&mut cx).is_ready());
        assert!(replies.poll_chunk(&mut cx).is_pending());
        drop(sink);
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 3);
        assert!(matches!(replies.poll_chunk(&mut cx), Poll::Ready(None)));
    }
}
