//! HTTPS, the half both adapters share (feature `tls`): the client's trust
//! ([`ClientTls`]), the server's certificate and handshake timeout ([`ServerTls`]), and
//! for the adapters the handshake under that timeout ([`handshake`]), the TLS server name
//! of a URL ([`server_name`]) and the classification of rustls' errors ([`failure`]).
//!
//! Every configuration built here uses rustls' `ring` provider. To use another provider,
//! client certificates, or any rustls setting not offered here, build the rustls
//! configuration yourself and pass it whole ([`ClientTls::config`], [`ServerTls::new`]).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use http::Uri;
pub use rustls;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{CertificateError, RootCertStore};

use super::{ConnectError, Runtime, ServerHandle};
use mcp_proto::client::TlsFailure;

/// The rustls builder of every configuration made here: the `ring` provider, rustls' safe
/// default protocol versions (TLS 1.3 and 1.2).
fn ring() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What a client trusts when it dials `https://`: Mozilla's root certificates by default
/// ([`webpki_roots`](ClientTls::webpki_roots), compiled in, the same on every machine),
/// the operating system's ([`native_roots`](ClientTls::native_roots), feature
/// `native-roots`), a root store of one's own ([`roots`](ClientTls::roots)), or a whole
/// rustls configuration ([`config`](ClientTls::config)).
#[derive(Debug, Clone, Default)]
pub struct ClientTls(Trust);

#[derive(Debug, Clone, Default)]
enum Trust {
    #[default]
    Webpki,
    Roots(Arc<RootCertStore>),
    Config(Arc<rustls::ClientConfig>),
}

impl ClientTls {
    /// Mozilla's root certificates (the `webpki-roots` crate): the default.
    pub fn webpki_roots() -> ClientTls {
        ClientTls(Trust::Webpki)
    }

    /// The operating system's root certificates, loaded now.
    ///
    /// # Errors
    ///
    /// When none could be loaded (those that fail to parse are skipped).
    #[cfg(feature = "native-roots")]
    pub fn native_roots() -> std::io::Result<ClientTls> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            let why = found.errors.first().map(ToString::to_string);
            return Err(std::io::Error::other(format!(
                "no root certificate found in the operating system's store ({})",
                why.as_deref().unwrap_or("it is empty")
            )));
        }
        Ok(ClientTls::roots(roots))
    }

    /// Exactly the certificates of `roots` (a private CA, a test CA).
    pub fn roots(roots: RootCertStore) -> ClientTls {
        ClientTls(Trust::Roots(Arc::new(roots)))
    }

    /// A whole rustls configuration, used as given except its ALPN protocols, which the
    /// adapter sets to the HTTP versions it speaks.
    pub fn config(config: impl Into<Arc<rustls::ClientConfig>>) -> ClientTls {
        ClientTls(Trust::Config(config.into()))
    }

    /// For adapters: the rustls configuration to dial with, offering the ALPN protocols
    /// `alpn` (none when empty).
    pub fn client_config(&self, alpn: &[&[u8]]) -> rustls::ClientConfig {
        let trusting = |roots: Arc<RootCertStore>| {
            rustls::ClientConfig::builder_with_provider(ring())
                .with_safe_default_protocol_versions()
                .expect("ring has cipher suites for every default protocol version")
                .with_root_certificates(roots)
                .with_no_client_auth()
        };
        let mut config = match &self.0 {
            Trust::Webpki => trusting(Arc::new(RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            })),
            Trust::Roots(roots) => trusting(roots.clone()),
            Trust::Config(config) => (**config).clone(),
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config
    }
}

/// A server's TLS: its rustls configuration (certificate chain and key, client
/// authentication...) and how long a client may take to complete its handshake.
#[derive(Debug, Clone)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
    handshake_timeout: Duration,
}

impl ServerTls {
    /// The default [`handshake_timeout`](ServerTls::handshake_timeout): 10 s.
    pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

    /// `config` with the default handshake timeout. Its ALPN protocols are narrowed to the
    /// HTTP versions the adapter speaks (all of them when it names none of those).
    pub fn new(config: impl Into<Arc<rustls::ServerConfig>>) -> ServerTls {
        ServerTls {
            config: config.into(),
            handshake_timeout: Self::DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }

    /// A configuration presenting `chain` (the server's certificate first) and its `key`,
    /// without client authentication (rustls' defaults otherwise, the `ring` provider).
    /// Read PEM files with [`rustls::pki_types::pem::PemObject`].
    ///
    /// # Errors
    ///
    /// A key that rustls cannot use, or that does not match the certificate.
    pub fn single_cert(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<ServerTls, rustls::Error> {
        let config = rustls::ServerConfig::builder_with_provider(ring())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        Ok(ServerTls::new(config))
    }

    /// How long a connection may take from its accept to the end of its TLS handshake; a
    /// client slower than that (or silent) is dropped. Default
    /// [`DEFAULT_HANDSHAKE_TIMEOUT`](ServerTls::DEFAULT_HANDSHAKE_TIMEOUT).
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> ServerTls {
        self.handshake_timeout = timeout;
        self
    }

    /// The handshake timeout in force.
    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }

    /// For adapters: the configuration whose ALPN protocols are those of the user's that the
    /// adapter `speaks`, or all it speaks when that leaves none.
    pub fn server_config(&self, speaks: &[&[u8]]) -> Arc<rustls::ServerConfig> {
        let mut config = (*self.config).clone();
        config
            .alpn_protocols
            .retain(|p| speaks.contains(&p.as_slice()));
        if config.alpn_protocols.is_empty() {
            config.alpn_protocols = speaks.iter().map(|p| p.to_vec()).collect();
        }
        Arc::new(config)
    }
}

/// For adapters: runs the server side of one TLS `handshake` with `peer` under the
/// [`ServerTls::handshake_timeout`], giving up when the driver of `handle` stops. A failed
/// or timed-out handshake is logged and gives `None`: it concerns that connection alone.
pub async fn handshake<R: Runtime, S, E: std::fmt::Display>(
    rt: &R,
    tls: &ServerTls,
    handle: &ServerHandle,
    peer: SocketAddr,
    handshake: impl Future<Output = Result<S, E>>,
) -> Option<S> {
    let mut handshake = std::pin::pin!(handshake);
    let mut late = std::pin::pin!(rt.sleep_until(rt.now() + tls.handshake_timeout));
    let mut stopped = std::pin::pin!(handle.stopped());
    let outcome = std::future::poll_fn(|cx| {
        if let Poll::Ready(done) = handshake.as_mut().poll(cx) {
            return Poll::Ready(Some(done));
        }
        if late.as_mut().poll(cx).is_ready() || stopped.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await;
    match outcome {
        Some(Ok(stream)) => Some(stream),
        Some(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
        None => {
            tracing::debug!(%peer, "TLS handshake not done in time (or the server stopped)");
            None
        }
    }
}

/// For adapters: the name a server's certificate must be valid for, from the host of `uri`
/// (a DNS name or an IP address).
///
/// # Errors
///
/// A host that is neither.
pub fn server_name(uri: &Uri) -> Result<ServerName<'static>, ConnectError> {
    let host = uri.host().unwrap_or_default();
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(bare.to_owned())
        .map_err(|e| ConnectError::InvalidUrl(format!("{uri}: {e} for TLS")))
}

/// For adapters: the TLS failure behind `error`, searched through its sources and the
/// errors that `io::Error`s wrap; `None` when it is not a rustls error.
pub fn failure(error: &(dyn std::error::Error + 'static)) -> Option<TlsFailure> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(e) = e.downcast_ref::<rustls::Error>() {
            return Some(classify(e));
        }
        // `io::Error::source` skips the error it wraps: look inside.
        if let Some(inner) = e.downcast_ref::<std::io::Error>().and_then(|e| e.get_ref())
            && let Some(found) = failure(inner)
        {
            return Some(found);
        }
        next = e.source();
    }
    None
}

fn classify(error: &rustls::Error) -> TlsFailure {
    let rustls::Error::InvalidCertificate(e) = error else {
        return TlsFailure::Handshake;
    };
    match e {
        CertificateError::UnknownIssuer => TlsFailure::UnknownIssuer,
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            TlsFailure::NameMismatch
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => TlsFailure::Expired,
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            TlsFailure::NotYetValid
        }
        CertificateError::Revoked => TlsFailure::Revoked,
        _ => TlsFailure::BadCertificate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustls_errors_are_found_through_io_errors_and_sources() {
        let wrapped = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        assert_eq!(failure(&wrapped), Some(TlsFailure::UnknownIssuer));
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("outer")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let name = rustls::Error::InvalidCertificate(CertificateError::NotValidForName);
        let outer = Outer(std::io::Error::other(name));
        assert_eq!(failure(&outer), Some(TlsFailure::NameMismatch));
        let plain = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(failure(&plain), None);
        let alert = rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure);
        assert_eq!(failure(&alert), Some(TlsFailure::Handshake));
        let expired = rustls::Error::InvalidCertificate(CertificateError::Expired);
        assert_eq!(failure(&expired), Some(TlsFailure::Expired));
        let bad = rustls::Error::InvalidCertificate(CertificateError::BadSignature);
        assert_eq!(failure(&bad), Some(TlsFailure::BadCertificate));
    }

    #[test]
    fn server_names_come_from_the_url_host() {
        let uri: Uri = "https://[::1]:8443/mcp".parse().unwrap();
        assert!(matches!(server_name(&uri), Ok(ServerName::IpAddress(_))));
        let uri: Uri = "https://mcp.example.com/mcp".parse().unwrap();
        assert!(matches!(server_name(&uri), Ok(ServerName::DnsName(_))));
    }

    #[test]
    fn alpn_is_narrowed_to_what_the_adapter_speaks() {
        let tls = ServerTls::new(no_cert_config());
        let both: &[&[u8]] = &[b"h2", b"http/1.1"];
        assert_eq!(
            tls.server_config(both).alpn_protocols,
            [b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        let mut config = (*tls.config).clone();
        config.alpn_protocols = vec![b"h2".to_vec(), b"x".to_vec()];
        let tls = ServerTls::new(config);
        assert_eq!(tls.server_config(both).alpn_protocols, [b"h2".to_vec()]);
        assert_eq!(
            tls.server_config(&[b"http/1.1"]).alpn_protocols,
            [b"http/1.1".to_vec()]
        );
        let client = ClientTls::default().client_config(&[b"http/1.1"]);
        assert_eq!(client.alpn_protocols, [b"http/1.1".to_vec()]);
    }

    /// A server configuration without a certificate (enough to look at its ALPN).
    fn no_cert_config() -> rustls::ServerConfig {
        #[derive(Debug)]
        struct NoCert;
        impl rustls::server::ResolvesServerCert for NoCert {
            fn resolve(
                &self,
                _: rustls::server::ClientHello<'_>,
            ) -> Option<Arc<rustls::sign::CertifiedKey>> {
                None
            }
        }
        rustls::ServerConfig::builder_with_provider(ring())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(NoCert))
    }
}
