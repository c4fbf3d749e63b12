//! Certificates made at run time for the HTTPS tests ([`TestPki`]): a CA of the test's own
//! and a server certificate it signed, as the adapters' [`ServerTls`] and [`ClientTls`]. The
//! clients trust that CA only (the custom-roots option), never the default roots.

use mcp_driver::tls::rustls;
use mcp_driver::{ClientTls, ServerTls};
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A test CA and a server certificate it signed.
#[derive(Debug)]
pub struct TestPki {
    ca: CertificateDer<'static>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl TestPki {
    /// A fresh CA and a server certificate for `names` (DNS names, or IP addresses such as
    /// `127.0.0.1`).
    ///
    /// # Panics
    ///
    /// If rcgen cannot make them.
    pub fn new(names: &[&str]) -> TestPki {
        // Each CA its own name: a client trusting another test CA must find no issuer at all
        // (with equal names it would find one and fail on its signature instead).
        static CAS: AtomicUsize = AtomicUsize::new(0);
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let n = CAS.fetch_add(1, Ordering::Relaxed);
        let name = format!("mcp test CA {} {n}", std::process::id());
        ca.distinguished_name.push(DnType::CommonName, name);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("CA key"))
            .expect("CA certificate");
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let key = KeyPair::generate().expect("server key");
        let cert = CertificateParams::new(names)
            .expect("server params")
            .signed_by(&key, &ca)
            .expect("server certificate");
        TestPki {
            ca: ca.der().clone(),
            chain: vec![cert.der().clone()],
            key: key.into(),
        }
    }

    /// A certificate for `localhost` and `127.0.0.1`, what the loopback tests dial.
    pub fn loopback() -> TestPki {
        TestPki::new(&["localhost", "127.0.0.1"])
    }

    /// The server's side: its certificate chain and key, the default handshake timeout.
    ///
    /// # Panics
    ///
    /// If rustls refuses the key.
    pub fn server_tls(&self) -> ServerTls {
        let key = PrivateKeyDer::Pkcs8(self.key.clone_key());
        ServerTls::single_cert(self.chain.clone(), key).expect("server TLS")
    }

    /// A client's side: trusts this CA alone.
    ///
    /// # Panics
    ///
    /// If rustls refuses the CA certificate.
    pub fn client_tls(&self) -> ClientTls {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.clone()).expect("CA root");
        ClientTls::roots(roots)
    }

    /// A client's rustls configuration trusting this CA and offering `alpn` (raw clients).
    pub fn client_config(&self, alpn: &[&[u8]]) -> rustls::ClientConfig {
        self.client_tls().client_config(alpn)
    }
}
