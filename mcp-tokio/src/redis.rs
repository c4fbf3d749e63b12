//! The Redis cluster store on tokio (feature `redis`): [`redis_backend`].

use std::sync::Arc;

use mcp_proto::driver::redis::{self, RedisConfig, RedisIo, RedisUrlError};
use mcp_proto::server::ClusterBackend;

use crate::Tokio;

/// A [`ClusterBackend`] on the Redis server at `url` (`redis://[user:password@]host[:port][/db]`)
/// with the limits `config` (`RedisConfig::default()` for the defaults). Give it to
/// `ClusterConfig::with_backend`; every server instance of the cluster uses the same URL.
///
/// # Errors
///
/// A URL that does not parse, or is not `redis://` over TCP.
pub fn redis_backend(
    url: &str,
    config: RedisConfig,
) -> Result<Arc<dyn ClusterBackend>, RedisUrlError> {
    redis::backend(Tokio, url, config, |host, port| async move {
        let tcp = tokio::net::TcpStream::connect((&*host, port)).await?;
        tcp.set_nodelay(true)?;
        Ok(Box::new(tcp) as Box<dyn RedisIo>)
    })
}
