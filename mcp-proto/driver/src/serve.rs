//! [`Serve`]: the one server entry point of every adapter, a builder over the core's
//! configuration, the driver's, and TLS.

use std::sync::Arc;

use mcp_proto::server::ServerConfig;
use mcp_service::Server;

use crate::{AsyncAuthenticator, ClusterBackend, DriverConfig, Serving};

/// How an adapter serves: what [`Serve::start`] hands everything the builder gathered to.
/// Each adapter implements it once, for its runtime's marker type (`mcp_tokio::Tokio`,
/// `mcp_smol::Smol`), and names the listener it accepts connections on.
pub trait Adapter: Sized {
    /// What connections are accepted on (the runtime's TCP listener).
    type Listener;

    /// Whether this build of the adapter terminates TLS (its own `tls` feature: the driver's
    /// may be on through another crate of the build while the adapter's is off).
    const TLS: bool;

    /// Starts serving `serve`: the driver, then the accept loop. [`Serve::start`] has
    /// refused TLS already when [`TLS`](Self::TLS) is `false`.
    ///
    /// # Errors
    ///
    /// When the listener's local address cannot be read.
    fn start(serve: Serve<Self>) -> std::io::Result<Serving>;
}

/// A server about to be served: `server` on `listener`, with the core's [`ServerConfig`],
/// the driver's [`DriverConfig`] and, with the feature `tls`, the certificate to terminate
/// TLS with. Every adapter's `serve(listener, server)` returns one; [`start`](Self::start)
/// serves it.
///
/// Secure by default: session ids come from the OS's CSPRNG unless the configuration has a
/// generator, `Host` is validated for the bound address (loopback names only on a loopback
/// bind), and every queue and body is bounded.
#[must_use = "a server is served by `start`"]
pub struct Serve<A: Adapter> {
    /// The listener.
    pub listener: A::Listener,
    /// What is served.
    pub server: Server,
    /// The core's configuration (sessions, limits, security, eras).
    pub config: ServerConfig,
    /// The driver's configuration (queue bound, deadlines, the authentication step, the
    /// cluster store).
    pub driver: DriverConfig,
    /// The certificate and key to terminate TLS with (`None`: plain HTTP).
    #[cfg(feature = "tls")]
    pub tls: Option<crate::ServerTls>,
}

impl<A: Adapter> std::fmt::Debug for Serve<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serve")
            .field("server", &self.server)
            .field("config", &self.config)
            .field("driver", &self.driver)
            .field("tls", &self.wants_tls())
            .finish_non_exhaustive()
    }
}

impl<A: Adapter> Serve<A> {
    /// `server` on `listener`, with the default configurations and no TLS.
    pub fn new(listener: A::Listener, server: Server) -> Self {
        Serve {
            listener,
            server,
            config: ServerConfig::default(),
            driver: DriverConfig::default(),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// The core's configuration.
    pub fn config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// The driver's configuration.
    pub fn driver(mut self, driver: DriverConfig) -> Self {
        self.driver = driver;
        self
    }

    /// The authentication step that awaits ([`DriverConfig::authenticator`]).
    pub fn authenticator(mut self, auth: impl AsyncAuthenticator) -> Self {
        self.driver = self.driver.with_authenticator(auth);
        self
    }

    /// The cluster store ([`DriverConfig::cluster_backend`]); the configuration names the
    /// instance (`ServerConfig::cluster`).
    pub fn cluster_backend(mut self, backend: Arc<dyn ClusterBackend>) -> Self {
        self.driver = self.driver.with_cluster_backend(backend);
        self
    }

    /// Terminates TLS with `tls` ([`Serving::url`] is then `https://`).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: crate::ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Whether TLS was asked for (an adapter built without TLS refuses to start then).
    pub fn wants_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// Serves it: the driver starts, then the adapter's accept loop.
    ///
    /// # Errors
    ///
    /// When the listener's local address cannot be read, or TLS was asked of an adapter
    /// built without it.
    pub fn start(self) -> std::io::Result<Serving> {
        if self.wants_tls() && !A::TLS {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "TLS asked of an adapter built without its `tls` feature",
            ));
        }
        A::start(self)
    }
}
