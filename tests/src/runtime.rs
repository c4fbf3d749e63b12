//! The two runtime adapters behind one interface, so that an end-to-end scenario is written
//! once and run on every runtime and on the cross pairs (a smol client against a tokio
//! server and the reverse), and so that the binaries take `--runtime`.
//!
//! Both adapters share their API types ([`Serving`], [`ServerHandle`], [`ConnectError`],
//! the builder) through `mcp_driver`; what differs is only which engine a client runs
//! on, how to block on and time out a future, and the listener type.
//!
//! The TLS dimension is [`Security`]: [`Runtime::serve_over`] and [`Runtime::connect_over`]
//! serve and connect over plain HTTP or over HTTPS with a [`TestPki`] (the client trusting
//! that test CA alone), so that a scenario runs over either on every runtime pair.
//!
//! The tokio adapter must be called from inside a tokio runtime (it spawns there). The smol
//! adapter spawns its tasks on smol's global executor and its sockets use smol's reactor,
//! whoever awaits its futures: a test body run by `#[tokio::test]` drives a smol server and
//! client that run on smol.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub use mcp_driver::{ConnectError, DriverConfig, ServerHandle, Serving};
use mcp_proto::client::ClientConfig;
use mcp_proto::server::ServerConfig;
use mcp_service::Server;
use mcp_service::client::{Client as ServiceClient, ClientBuilder};

use crate::tls::TestPki;

/// A runtime adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// `mcp-tokio`.
    Tokio,
    /// `mcp-smol`.
    Smol,
}

impl Runtime {
    /// Both.
    pub const ALL: [Runtime; 2] = [Runtime::Tokio, Runtime::Smol];

    /// `tokio` or `smol`.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Tokio => "tokio",
            Runtime::Smol => "smol",
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Runtime {
    type Err = String;

    fn from_str(s: &str) -> Result<Runtime, String> {
        match s {
            "tokio" => Ok(Runtime::Tokio),
            "smol" => Ok(Runtime::Smol),
            other => Err(format!("unknown runtime {other:?} (tokio or smol)")),
        }
    }
}

/// Plain HTTP, or HTTPS with a test CA and a server certificate for the loopback names.
#[derive(Debug, Clone)]
pub enum Security {
    /// `http://`.
    Plain,
    /// `https://`: the server presents the PKI's certificate, clients trust its CA alone.
    Tls(Arc<TestPki>),
}

impl Security {
    /// HTTPS with a fresh [`TestPki::loopback`].
    pub fn tls() -> Security {
        Security::Tls(Arc::new(TestPki::loopback()))
    }
}

/// A client of either adapter (the same driver client on two engines).
#[derive(Debug)]
pub enum Client {
    /// On hyper.
    Tokio(mcp_tokio::Client),
    /// On async-h1.
    Smol(mcp_smol::Client),
}

impl std::ops::Deref for Client {
    type Target = ServiceClient;

    fn deref(&self) -> &ServiceClient {
        match self {
            Client::Tokio(c) => c,
            Client::Smol(c) => c,
        }
    }
}

impl Client {
    /// The service client.
    pub fn client(&self) -> &ServiceClient {
        self
    }

    /// Closes the session and waits for the driver.
    pub async fn close(self) {
        match self {
            Client::Tokio(c) => c.close().await,
            Client::Smol(c) => c.close().await,
        }
    }
}

/// A tokio runtime with one worker thread and every driver enabled (what the Redis tests
/// enter to build and drive the tokio adapter's backend).
pub fn one_worker_tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

impl Runtime {
    /// Runs `future` to completion on this runtime (a fresh multi-threaded tokio runtime, or
    /// `smol::block_on`).
    pub fn block_on<F: Future>(self, future: F) -> F::Output {
        match self {
            Runtime::Tokio => tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime")
                .block_on(future),
            Runtime::Smol => smol::block_on(future),
        }
    }

    /// `future`, or `None` after `limit`, on this runtime's timer.
    pub async fn timeout<F: Future>(self, limit: Duration, future: F) -> Option<F::Output> {
        match self {
            Runtime::Tokio => tokio::time::timeout(limit, future).await.ok(),
            Runtime::Smol => {
                use smol::future::FutureExt;
                async { Some(future.await) }
                    .or(async {
                        smol::Timer::after(limit).await;
                        None
                    })
                    .await
            }
        }
    }

    /// Resolves on Ctrl-C.
    ///
    /// # Errors
    ///
    /// When the signal handler cannot be installed.
    pub async fn ctrl_c(self) -> io::Result<()> {
        match self {
            Runtime::Tokio => tokio::signal::ctrl_c().await,
            Runtime::Smol => {
                use smol::stream::StreamExt;
                let mut signals = async_signal::Signals::new([async_signal::Signal::Int])?;
                signals.next().await;
                Ok(())
            }
        }
    }

    /// Serves `server` on `addr` with the driver's configuration `driver`.
    ///
    /// # Errors
    ///
    /// When the address cannot be bound.
    pub async fn serve_with(
        self,
        addr: SocketAddr,
        server: Server,
        config: ServerConfig,
        driver: DriverConfig,
    ) -> io::Result<Serving> {
        self.bind_and_serve(addr, server, config, driver, None)
            .await
    }

    /// Binds `addr` on this runtime and serves through its adapter's one entry point.
    async fn bind_and_serve(
        self,
        addr: SocketAddr,
        server: Server,
        config: ServerConfig,
        driver: DriverConfig,
        tls: Option<mcp_driver::ServerTls>,
    ) -> io::Result<Serving> {
        /// The same builder calls on either adapter's `Serve`.
        fn start<A: mcp_driver::Adapter>(
            serve: mcp_driver::Serve<A>,
            config: ServerConfig,
            driver: DriverConfig,
            tls: Option<mcp_driver::ServerTls>,
        ) -> io::Result<Serving> {
            let serve = serve.config(config).driver(driver);
            match tls {
                Some(tls) => serve.tls(tls).start(),
                None => serve.start(),
            }
        }
        match self {
            Runtime::Tokio => {
                let listener = tokio::net::TcpListener::bind(addr).await?;
                start(mcp_tokio::serve(listener, server), config, driver, tls)
            }
            Runtime::Smol => {
                let listener = smol::net::TcpListener::bind(addr).await?;
                start(mcp_smol::serve(listener, server), config, driver, tls)
            }
        }
    }

    /// Serves `server` on `addr`.
    ///
    /// # Errors
    ///
    /// When the address cannot be bound.
    pub async fn serve_on(
        self,
        addr: SocketAddr,
        server: Server,
        config: ServerConfig,
    ) -> io::Result<Serving> {
        self.serve_with(addr, server, config, DriverConfig::default())
            .await
    }

    /// Serves `server` on an ephemeral loopback port as an instance of the cluster
    /// `config` names, its store operations executed by `backend`.
    ///
    /// # Errors
    ///
    /// When no port can be bound.
    pub async fn serve_clustered(
        self,
        server: Server,
        config: ServerConfig,
        backend: std::sync::Arc<dyn mcp_driver::ClusterBackend>,
    ) -> io::Result<Serving> {
        let driver = DriverConfig::default().with_cluster_backend(backend);
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        self.serve_with(addr, server, config, driver).await
    }

    /// Serves `server` on an ephemeral loopback port.
    ///
    /// # Errors
    ///
    /// When no port can be bound.
    pub async fn serve(self, server: Server, config: ServerConfig) -> io::Result<Serving> {
        self.serve_on(SocketAddr::from(([127, 0, 0, 1], 0)), server, config)
            .await
    }

    /// Serves `server` on an ephemeral loopback port, over `security`.
    ///
    /// # Errors
    ///
    /// When no port can be bound.
    pub async fn serve_over(
        self,
        security: &Security,
        server: Server,
        config: ServerConfig,
    ) -> io::Result<Serving> {
        match security {
            Security::Plain => self.serve(server, config).await,
            Security::Tls(pki) => self.serve_tls(server, config, pki.server_tls()).await,
        }
    }

    /// Serves `server` over HTTPS with `tls` on an ephemeral loopback port.
    ///
    /// # Errors
    ///
    /// When no port can be bound.
    pub async fn serve_tls(
        self,
        server: Server,
        config: ServerConfig,
        tls: mcp_driver::ServerTls,
    ) -> io::Result<Serving> {
        self.serve_tls_with(server, config, DriverConfig::default(), tls)
            .await
    }

    /// [`serve_tls`](Runtime::serve_tls) with the driver's configuration `driver`.
    ///
    /// # Errors
    ///
    /// When no port can be bound.
    pub async fn serve_tls_with(
        self,
        server: Server,
        config: ServerConfig,
        driver: DriverConfig,
        tls: mcp_driver::ServerTls,
    ) -> io::Result<Serving> {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        self.bind_and_serve(loopback, server, config, driver, Some(tls))
            .await
    }

    /// Connects over `security` (over HTTPS, trusting the test CA alone) and initializes.
    ///
    /// # Errors
    ///
    /// As the adapters' `connect`.
    pub async fn connect_over(
        self,
        security: &Security,
        url: &str,
        builder: ClientBuilder,
        config: ClientConfig,
    ) -> Result<Client, ConnectError> {
        let Security::Tls(pki) = security else {
            return self.connect_with(url, builder, config).await;
        };
        self.connect_trusting(url, builder, config, pki.client_tls())
            .await
    }

    /// Connects trusting `tls` (and nothing else) on `https://`, and initializes.
    ///
    /// # Errors
    ///
    /// As the adapters' `connect`.
    pub async fn connect_trusting(
        self,
        url: &str,
        builder: ClientBuilder,
        config: ClientConfig,
        tls: mcp_driver::ClientTls,
    ) -> Result<Client, ConnectError> {
        Ok(match self {
            Runtime::Tokio => Client::Tokio(
                mcp_tokio::Client::builder(url)
                    .definition(builder)
                    .config(config)
                    .http(|h| h.tls(tls))
                    .connect()
                    .await?,
            ),
            Runtime::Smol => Client::Smol(
                mcp_smol::Client::builder(url)
                    .definition(builder)
                    .config(config)
                    .http(|h| h.tls(tls))
                    .connect()
                    .await?,
            ),
        })
    }

    /// Connects and initializes with a client definition and a transport configuration.
    ///
    /// # Errors
    ///
    /// As the adapters' `Client::connect_with`.
    pub async fn connect_with(
        self,
        url: &str,
        builder: ClientBuilder,
        config: ClientConfig,
    ) -> Result<Client, ConnectError> {
        Ok(match self {
            Runtime::Tokio => {
                Client::Tokio(mcp_tokio::Client::connect_with(url, builder, config).await?)
            }
            Runtime::Smol => {
                Client::Smol(mcp_smol::Client::connect_with(url, builder, config).await?)
            }
        })
    }

    /// Connects and initializes with the defaults.
    ///
    /// # Errors
    ///
    /// As the adapters' `Client::connect`.
    pub async fn connect(self, url: &str) -> Result<Client, ConnectError> {
        Ok(match self {
            Runtime::Tokio => Client::Tokio(mcp_tokio::Client::connect(url).await?),
            Runtime::Smol => Client::Smol(mcp_smol::Client::connect(url).await?),
        })
    }

    /// Starts a client without initializing.
    ///
    /// # Errors
    ///
    /// As the adapters' `Client::start`.
    pub fn start(
        self,
        url: &str,
        builder: ClientBuilder,
        config: ClientConfig,
    ) -> Result<Client, ConnectError> {
        Ok(match self {
            Runtime::Tokio => Client::Tokio(mcp_tokio::Client::start(url, builder, config)?),
            Runtime::Smol => Client::Smol(mcp_smol::Client::start(url, builder, config)?),
        })
    }
}

/// One `#[test]` per runtime for each `async fn scenario(rt: Runtime)` named: modules
/// `on_tokio` and `on_smol`, each test running its scenario on that runtime
/// ([`Runtime::block_on`]).
#[macro_export]
macro_rules! on_each_runtime {
    ($($scenario:ident),* $(,)?) => {
        mod on_tokio {
            $(
                #[test]
                fn $scenario() {
                    use $crate::runtime::Runtime;
                    Runtime::Tokio.block_on(super::$scenario(Runtime::Tokio));
                }
            )*
        }
        mod on_smol {
            $(
                #[test]
                fn $scenario() {
                    use $crate::runtime::Runtime;
                    Runtime::Smol.block_on(super::$scenario(Runtime::Smol));
                }
            )*
        }
    };
}
