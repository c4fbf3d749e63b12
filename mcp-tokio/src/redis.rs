//! The Redis cluster store on tokio (feature `redis`): [`redis_backend`].

use std::sync::Arc;

use mcp_driver::ClusterBackend;
use mcp_redis::{RedisConfig, RedisIo, RedisUrlError};

use crate::Tokio;

/// A [`ClusterBackend`] on the Redis server at `url` (`redis://[user:password@]host[:port][/db]`)
/// with the limits `config` (`RedisConfig::default()` for the defaults). Give it to
/// `Serve::cluster_backend` (with the instance named in `ServerConfig::with_cluster`); every server instance of the cluster uses the same URL.
///
/// # Errors
///
/// A URL that does not parse, or is not `redis://` over TCP.
pub fn redis_backend(
    url: &str,
    config: RedisConfig,
) -> Result<Arc<dyn ClusterBackend>, RedisUrlError> {
    mcp_redis::backend(Tokio, url, config, |host, port| async move {
        let tcp = tokio::net::TcpStream::connect((&*host, port)).await?;
        tcp.set_nodelay(true)?;
        Ok(Box::new(tcp) as Box<dyn RedisIo>)
    })
}
