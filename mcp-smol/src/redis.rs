//! The Redis cluster store on smol (feature `redis`): [`redis_backend`].

use std::sync::Arc;
use std::time::Instant;

use mcp_driver::{ClusterBackend, Runtime};
use mcp_redis::RedisIo;
pub use mcp_redis::{RedisConfig, RedisUrlError};
use mcp_service::server::BoxFuture;
use tokio_util::compat::FuturesAsyncReadCompatExt;

use crate::Smol;

/// A [`ClusterBackend`] on the Redis server at `url` (`redis://[user:password@]host[:port][/db]`)
/// with the limits `config` (`RedisConfig::default()` for the defaults). Give it to
/// `Serve::cluster_backend` (with the instance named in `ServerConfig::with_cluster`); every
/// server instance of the cluster uses the same URL. The connection is a smol `TcpStream`
/// seen through tokio-util's `compat` (the `redis` crate's codec reads tokio's I/O traits); no
/// tokio runtime runs.
///
/// The links' workers and their connections run on a thread of their own (an executor of
/// their own, named `mcp-redis-link`, ended with the backend and its last link): each round
/// trip to Redis then waits for that thread alone, not behind every connection task of the
/// server (measured in the benchmark docs). Where the thread cannot be started, they run on
/// smol's global executor.
///
/// # Errors
///
/// A URL that does not parse, or is not `redis://` over TCP.
pub fn redis_backend(
    url: &str,
    config: RedisConfig,
) -> Result<Arc<dyn ClusterBackend>, RedisUrlError> {
    let dial = |host: Arc<str>, port| async move {
        let tcp = smol::net::TcpStream::connect((&*host, port)).await?;
        tcp.set_nodelay(true)?;
        Ok(Box::new(tcp.compat()) as Box<dyn RedisIo>)
    };
    match LinkThread::start() {
        Ok(thread) => mcp_redis::backend(thread, url, config, dial),
        Err(e) => {
            tracing::warn!(error = %e, "no thread for the Redis links: they share smol's executor");
            mcp_redis::backend(Smol, url, config, dial)
        }
    }
}

/// The Redis links' [`Runtime`]: an executor on a thread of its own, until the last clone is
/// dropped (the backend's and its workers').
#[derive(Clone)]
struct LinkThread(Arc<Thread>);

struct Thread {
    executor: Arc<smol::Executor<'static>>,
    /// Dropped with the last clone: the thread then ends (its tasks with it).
    _stop: smol::channel::Sender<()>,
}

impl LinkThread {
    fn start() -> std::io::Result<LinkThread> {
        let executor = Arc::new(smol::Executor::new());
        let (stop, stopped) = smol::channel::bounded::<()>(1);
        let running = executor.clone();
        std::thread::Builder::new()
            .name("mcp-redis-link".into())
            .spawn(move || {
                // A block_on that only parks: this thread never drives async-io's (global)
                // reactor, which the server's thread and async-io's own thread do. Driving it
                // (`smol::block_on`), it took in the readiness of the server's connections and
                // woke the server's thread for each, and the server's thread woke it back for
                // Redis's: measured on bench-scale's sessions phase, the link thread's samples
                // fell by a quarter and async-io's by four fifths without it.
                smol::future::block_on(running.run(async {
                    let _ = stopped.recv().await;
                }));
            })?;
        Ok(LinkThread(Arc::new(Thread {
            executor,
            _stop: stop,
        })))
    }
}

impl Runtime for LinkThread {
    type Sleep = smol::Timer;

    fn sleep_until(&self, deadline: Instant) -> smol::Timer {
        smol::Timer::at(deadline)
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) {
        self.0.executor.spawn(task).detach();
    }
}
