//! The Redis cluster store on tokio (feature `redis`): [`redis_backend`].

use std::sync::Arc;

use mcp_proto::driver::redis::{
    Dial, RedisBackend, RedisConfig, RedisIo, RedisTarget, RedisUrlError,
};
use mcp_proto::server::ClusterBackend;

use crate::Tokio;

/// A [`ClusterBackend`] on the Redis server at `url` (`redis://[user:password@]host[:port][/db]`),
/// with the default limits ([`RedisConfig::default`]). Give it to
/// `ClusterConfig::with_backend`; every server instance of the cluster uses the same URL.
///
/// # Errors
///
/// A URL that does not parse, or is not `redis://` over TCP.
pub fn redis_backend(url: &str) -> Result<Arc<dyn ClusterBackend>, RedisUrlError> {
    redis_backend_with(url, RedisConfig::default())
}

/// [`redis_backend`] with explicit limits.
///
/// # Errors
///
/// As [`redis_backend`].
pub fn redis_backend_with(
    url: &str,
    config: RedisConfig,
) -> Result<Arc<dyn ClusterBackend>, RedisUrlError> {
    let target = RedisTarget::parse(url)?;
    let host: Arc<str> = target.host.into();
    let port = target.port;
    let dial: Dial = Arc::new(move || {
        let host = host.clone();
        Box::pin(async move {
            let tcp = tokio::net::TcpStream::connect((&*host, port)).await?;
            tcp.set_nodelay(true)?;
            Ok(Box::new(tcp) as Box<dyn RedisIo>)
        })
    });
    Ok(Arc::new(RedisBackend::new(
        Tokio,
        target.info,
        dial,
        config,
    )))
}
