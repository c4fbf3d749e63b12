//! The Redis cluster store on smol (feature `redis`): [`redis_backend`].

use std::sync::Arc;

use mcp_driver::ClusterBackend;
use mcp_redis::RedisIo;
pub use mcp_redis::{RedisConfig, RedisUrlError};
use tokio_util::compat::FuturesAsyncReadCompatExt;

use crate::Smol;

/// A [`ClusterBackend`] on the Redis server at `url` (`redis://[user:password@]host[:port][/db]`)
/// with the limits `config` (`RedisConfig::default()` for the defaults). Give it to
/// `Serve::cluster_backend` (with the instance named in `ServerConfig::with_cluster`); every server instance of the cluster uses the same URL. The
/// connection is a smol `TcpStream` seen through tokio-util's `compat` (the `redis` crate's
/// codec reads tokio's I/O traits); no tokio runtime runs.
///
/// # Errors
///
/// A URL that does not parse, or is not `redis://` over TCP.
pub fn redis_backend(
    url: &str,
    config: RedisConfig,
) -> Result<Arc<dyn ClusterBackend>, RedisUrlError> {
    mcp_redis::backend(Smol, url, config, |host, port| async move {
        let tcp = smol::net::TcpStream::connect((&*host, port)).await?;
        tcp.set_nodelay(true)?;
        Ok(Box::new(tcp.compat()) as Box<dyn RedisIo>)
    })
}
