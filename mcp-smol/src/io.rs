//! A connection's byte stream, plain TCP or TLS over it, as async-h1 wants it: one handle
//! for each of its reader and writer (`Clone`), so a TLS session sits behind a lock that
//! each read or write holds for one poll.

use smol::io::{AsyncRead, AsyncWrite};

/// What a connection reads and writes: a TCP socket or a TLS stream over one.
pub(crate) trait Duplex: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Duplex for T {}

/// A connection's stream, shareable between async-h1's reader and writer.
pub(crate) type Io = async_dup::Arc<async_dup::Mutex<Box<dyn Duplex>>>;

pub(crate) fn shared(stream: impl Duplex + 'static) -> Io {
    async_dup::Arc::new(async_dup::Mutex::new(Box::new(stream)))
}
