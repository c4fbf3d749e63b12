//! The Redis cluster store on tokio (feature `redis`): [`redis_backend`].

use std::sync::Arc;
use std::time::Instant;

use mcp_driver::{ClusterBackend, Runtime};
use mcp_redis::{RedisConfig, RedisIo, RedisUrlError};
use mcp_service::server::BoxFuture;

use crate::Tokio;

/// A [`ClusterBackend`] on the Redis server at `url` (`redis://[user:password@]host[:port][/db]`)
/// with the limits `config` (`RedisConfig::default()` for the defaults). Give it to
/// `Serve::cluster_backend` (with the instance named in `ServerConfig::with_cluster`); every
/// server instance of the cluster uses the same URL.
///
/// The links' workers and their connections run on a thread of their own (a current-thread
/// tokio runtime, named `mcp-redis-link`, ended with the backend and its last link): each
/// round trip to Redis then waits for that thread alone, not behind every connection task
/// of the server's runtime (measured in the benchmark docs). Where the thread cannot be
/// started, they run on the server's runtime.
///
/// # Errors
///
/// A URL that does not parse, or is not `redis://` over TCP.
pub fn redis_backend(
    url: &str,
    config: RedisConfig,
) -> Result<Arc<dyn ClusterBackend>, RedisUrlError> {
    let dial = |host: Arc<str>, port| async move {
        let tcp = tokio::net::TcpStream::connect((&*host, port)).await?;
        tcp.set_nodelay(true)?;
        Ok(Box::new(tcp) as Box<dyn RedisIo>)
    };
    match LinkThread::start() {
        Ok(thread) => mcp_redis::backend(thread, url, config, dial),
        Err(e) => {
            tracing::warn!(error = %e, "no thread for the Redis links: they share the server's runtime");
            mcp_redis::backend(Tokio, url, config, dial)
        }
    }
}

/// The Redis links' [`Runtime`]: a thread of their own running a current-thread runtime,
/// until the last clone is dropped (the backend's and its workers').
#[derive(Clone)]
struct LinkThread(Arc<Thread>);

struct Thread {
    handle: tokio::runtime::Handle,
    /// Dropped with the last clone: the thread then ends (its tasks with it).
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl LinkThread {
    fn start() -> std::io::Result<LinkThread> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("mcp-redis-link".into())
            .spawn(move || {
                rt.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        Ok(LinkThread(Arc::new(Thread {
            handle,
            _stop: stop,
        })))
    }
}

impl Runtime for LinkThread {
    type Sleep = tokio::time::Sleep;

    fn sleep_until(&self, deadline: Instant) -> tokio::time::Sleep {
        let _in = self.0.handle.enter();
        tokio::time::sleep_until(deadline.into())
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) {
        self.0.handle.spawn(task);
    }
}
