//! Behind a reverse proxy: the server's public URL, the proxies it trusts, and what their
//! `Forwarded` (RFC 7239) and `X-Forwarded-For`/`-Proto`/`-Host` headers say.
//!
//! A server behind a proxy sees the proxy's address and whatever `Host` the proxy sends. Two
//! settings of [`ProxyConfig`] (in [`SecurityConfig`](super::SecurityConfig)) fix that:
//!
//! - [`PublicUrl`]: the URL clients use for the MCP endpoint
//!   (`https://mcp.example.com/mcp`). It fills an empty RFC 9728 `resource` (so the metadata
//!   document and the `resource_metadata` of every `WWW-Authenticate` challenge name it), and
//!   `Host`/`Origin` validation admits its host and origin in addition to what the
//!   [`HostValidation`](super::HostValidation) policy allows. The URLs the server names come
//!   from configuration only, never from a request's headers (not even a trusted proxy's):
//!   a misconfigured proxy or a poisoned cache can never make it advertise another URL.
//! - Trusted proxies ([`ProxyNet`]: addresses and CIDR ranges). When the connection's peer
//!   ([`RequestHead::peer`]) is one of them, its forwarding headers are believed: the client
//!   address is found by walking the `Forwarded` elements (or, without `Forwarded`, the
//!   `X-Forwarded-For` list) from the right, skipping trusted proxies; the first address not
//!   trusted is the client's. An element naming no address (`unknown`, an obfuscated
//!   `_identifier`, garbage) stops the walk at the last address known. The forwarded host
//!   (the client's `Host`) is what `Host` validation then checks, so that a DNS-rebinding
//!   page cannot slip through a proxy that rewrites `Host`. From a peer that is not trusted
//!   the headers are ignored, never an error: the client address is the peer's.
//!
//! [`client_address`] is the one place the server learns who the client is (logs, rate
//! limits per address).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use http::HeaderMap;
use http::header::HeaderName;

use super::RequestHead;

/// An invalid [`ProxyNet`] or [`PublicUrl`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProxySettingError(String);

/// A trusted proxy: one address (`10.0.0.7`, `::1`) or a CIDR range (`10.0.0.0/8`,
/// `fd00::/8`). IPv4-mapped IPv6 addresses (`::ffff:10.0.0.7`) are compared as IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyNet {
    addr: IpAddr,
    prefix: u8,
}

impl ProxyNet {
    /// The range of `addr`'s first `prefix` bits (at most 32 for IPv4, 128 for IPv6).
    ///
    /// # Errors
    ///
    /// A prefix longer than the address.
    pub fn new(addr: IpAddr, prefix: u8) -> Result<Self, ProxySettingError> {
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(ProxySettingError(format!(
                "the prefix /{prefix} is longer than the address {addr}"
            )));
        }
        Ok(ProxyNet { addr, prefix })
    }

    /// Whether `ip` is in the range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
            let (whole, rest) = (usize::from(bits / 8), bits % 8);
            if a[..whole] != b[..whole] {
                return false;
            }
            rest == 0 || {
                let mask = 0xffu8 << (8 - rest);
                a[whole] & mask == b[whole] & mask
            }
        }
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(n), IpAddr::V4(ip)) => prefix_eq(&n.octets(), &ip.octets(), self.prefix),
            (IpAddr::V6(n), IpAddr::V6(ip)) => prefix_eq(&n.octets(), &ip.octets(), self.prefix),
            _ => false,
        }
    }
}

impl From<IpAddr> for ProxyNet {
    fn from(addr: IpAddr) -> Self {
        let addr = addr.to_canonical();
        let prefix = if addr.is_ipv4() { 32 } else { 128 };
        ProxyNet { addr, prefix }
    }
}

impl FromStr for ProxyNet {
    type Err = ProxySettingError;

    /// `10.0.0.7`, `10.0.0.0/8`, `::1`, `fd00::/8`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ProxySettingError(format!("{s:?} is not an IP address or CIDR range"));
        match s.trim().split_once('/') {
            None => s
                .trim()
                .parse::<IpAddr>()
                .map(Into::into)
                .map_err(|_| bad()),
            Some((addr, prefix)) => {
                let addr = addr.parse::<IpAddr>().map_err(|_| bad())?;
                let prefix = prefix.parse::<u8>().map_err(|_| bad())?;
                ProxyNet::new(addr, prefix)
            }
        }
    }
}

impl fmt::Display for ProxyNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// The URL clients use to reach the MCP endpoint, `http(s)://host[:port]/path`, without query
/// or fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    url: String,
    /// Where the authority starts and ends in `url`.
    authority: (usize, usize),
}

impl PublicUrl {
    /// The URL, as configured (without a trailing `/`, unless it is the root).
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// `host[:port]`.
    pub fn authority(&self) -> &str {
        &self.url[self.authority.0..self.authority.1]
    }

    /// `scheme://host[:port]`, as a browser sends it in `Origin`.
    pub fn origin(&self) -> &str {
        &self.url[..self.authority.1]
    }
}

impl FromStr for PublicUrl {
    type Err = ProxySettingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| ProxySettingError(format!("bad public URL {s:?}: {why}"));
        let uri = http::Uri::from_str(s.trim()).map_err(|e| bad(&e.to_string()))?;
        let scheme = uri.scheme_str().ok_or_else(|| bad("no scheme"))?;
        if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
            return Err(bad("the scheme is not http or https"));
        }
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad("user information is not allowed"));
        }
        if uri.query().is_some() || s.contains('#') {
            return Err(bad("a query or fragment is not allowed"));
        }
        let scheme = scheme.to_ascii_lowercase();
        let host = authority.as_str().to_ascii_lowercase();
        let path = uri.path().trim_end_matches('/');
        let url = format!("{scheme}://{host}{path}");
        let start = scheme.len() + 3;
        Ok(PublicUrl {
            authority: (start, start + host.len()),
            url,
        })
    }
}

impl fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

/// The reverse-proxy settings (part of [`SecurityConfig`](super::SecurityConfig)): see the
/// module documentation. Default: no public URL, no trusted proxy (forwarding headers are
/// ignored from everyone).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProxyConfig {
    /// The URL clients use for the endpoint.
    pub public_url: Option<PublicUrl>,
    /// The proxies whose forwarding headers are believed.
    pub trusted_proxies: Vec<ProxyNet>,
}

impl ProxyConfig {
    fn trusts(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|n| n.contains(ip))
    }
}

/// What a request says of its client, the forwarding headers of trusted proxies included.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientView {
    /// The client's address: the first untrusted hop, or the peer's when it is not a trusted
    /// proxy; `None` when the adapter does not know the peer.
    pub address: Option<IpAddr>,
    /// The scheme the client used (`http`/`https`), as a trusted proxy forwarded it.
    pub proto: Option<&'static str>,
    /// The `Host` the client sent (`host[:port]`), as a trusted proxy forwarded it.
    pub host: Option<String>,
}

/// The client's address for `head`: see [`ClientView::address`]. The one function the server
/// uses for it (logs, limits per address).
pub fn client_address(proxies: &ProxyConfig, head: &RequestHead<'_>) -> Option<IpAddr> {
    client_view(proxies, head).address
}

/// What `head` says of its client (see the module documentation).
pub fn client_view(proxies: &ProxyConfig, head: &RequestHead<'_>) -> ClientView {
    let Some(peer) = head.peer.map(|p| p.ip().to_canonical()) else {
        return ClientView::default();
    };
    if !proxies.trusts(peer) {
        return ClientView {
            address: Some(peer),
            ..ClientView::default()
        };
    }
    if head.headers.contains_key(http::header::FORWARDED) {
        let elements = forwarded_elements(head.headers);
        let (address, at) = walk(peer, elements.iter().map(|e| e.node), |ip| {
            proxies.trusts(ip)
        });
        let element = at.and_then(|i| elements.get(i));
        return ClientView {
            address: Some(address),
            proto: element.and_then(|e| e.proto),
            host: element.and_then(|e| e.host.clone()),
        };
    }
    let hops = list_items(head.headers, &X_FORWARDED_FOR)
        .into_iter()
        .map(parse_node)
        .collect::<Vec<_>>();
    let (address, _) = walk(peer, hops.into_iter(), |ip| proxies.trusts(ip));
    let last = |name| list_items(head.headers, name).into_iter().next_back();
    ClientView {
        address: Some(address),
        proto: last(&X_FORWARDED_PROTO).and_then(parse_proto),
        host: last(&X_FORWARDED_HOST).and_then(parse_host),
    }
}

impl super::SecurityConfig {
    /// The client's address for `head` ([`client_address`] under these settings).
    pub fn client_address(&self, head: &RequestHead<'_>) -> Option<IpAddr> {
        client_address(&self.proxies, head)
    }

    /// Who sent `head`, for observability: the client address, its port when that is the
    /// connection's own peer, the HTTP version.
    pub(crate) fn request_client(&self, head: &RequestHead<'_>) -> super::RequestClient {
        let address = self.client_address(head);
        let port = head
            .peer
            .filter(|p| Some(p.ip().to_canonical()) == address)
            .map(|p| p.port());
        super::RequestClient {
            address,
            port,
            http_version: head.http_version,
        }
    }

    /// `Host`/`Origin` validation of `head`: the host a trusted proxy forwarded, else the
    /// request's own, against the policy and the public URL.
    pub(crate) fn check_host(
        &self,
        head: &RequestHead<'_>,
    ) -> Result<(), super::error::ProtocolError> {
        let forwarded = client_view(&self.proxies, head).host;
        let authority = forwarded
            .as_deref()
            .or_else(|| super::security::request_authority(head));
        self.host_validation.check(
            authority,
            head.headers,
            self.cors.as_ref(),
            self.proxies.public_url.as_ref(),
        )
    }

    /// Fills an empty RFC 9728 `resource` with the public URL.
    pub(crate) fn apply_public_url(&mut self) {
        if let (Some(url), Some(prm)) = (&self.proxies.public_url, &mut self.protected_resource)
            && prm.resource.is_empty()
        {
            prm.resource = url.as_str().to_owned();
        }
    }
}

impl super::Router {
    /// The client's address for `head`: the peer's, or what the trusted proxies in front
    /// forwarded ([`client_address`]). For logs and limits per client.
    pub fn client_address(&self, head: &RequestHead<'_>) -> Option<IpAddr> {
        self.config().security.client_address(head)
    }
}

/// Walks `hops` (left to right as in the header) from the right, starting at the trusted
/// `peer`: each trusted address is passed; the first untrusted one is the client; a hop with
/// no address stops at the last address known. Returns the address and the index of the
/// hop it came from (`None`: the peer's own).
fn walk(
    peer: IpAddr,
    hops: impl DoubleEndedIterator<Item = Option<IpAddr>> + ExactSizeIterator,
    trusted: impl Fn(IpAddr) -> bool,
) -> (IpAddr, Option<usize>) {
    let mut address = (peer, None);
    for (i, hop) in hops.enumerate().rev() {
        let Some(ip) = hop else {
            // The hop that could not name its client is the last one known; its element
            // still describes the request it received.
            return (address.0, Some(i));
        };
        address = (ip, Some(i));
        if !trusted(ip) {
            break;
        }
    }
    address
}

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// The comma-separated items of every `name` field line, in order, trimmed, empty ones
/// dropped (RFC 9110 §5.6.1).
fn list_items<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Vec<&'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// One `Forwarded` element: its `for`, `proto` and `host`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Element {
    node: Option<IpAddr>,
    proto: Option<&'static str>,
    host: Option<String>,
}

/// The elements of every `Forwarded` field line, in order (RFC 7239 §4): pairs separated by
/// `;`, elements by `,`, values tokens or quoted strings (a `,` or `;` inside quotes is
/// part of the value). A malformed pair is skipped; a field line that is not text counts as
/// one element naming nobody.
fn forwarded_elements(headers: &HeaderMap) -> Vec<Element> {
    let mut out = Vec::new();
    for value in headers.get_all(http::header::FORWARDED) {
        let Ok(text) = value.to_str() else {
            out.push(Element::default());
            continue;
        };
        let mut element = Element::default();
        let mut pair = String::new();
        let mut quoted = false;
        let mut escaped = false;
        let mut chars = text.chars();
        loop {
            let c = chars.next();
            match c {
                Some(c) if quoted => {
                    if escaped {
                        escaped = false;
                        pair.push(c);
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        quoted = false;
                    } else {
                        pair.push(c);
                    }
                }
                Some('"') => quoted = true,
                Some(c @ (';' | ',')) => {
                    apply_pair(&mut element, &pair);
                    pair.clear();
                    if c == ',' {
                        out.push(std::mem::take(&mut element));
                    }
                }
                Some(c) => pair.push(c),
                None => {
                    apply_pair(&mut element, &pair);
                    out.push(element);
                    break;
                }
            }
        }
    }
    out
}

/// Applies one `name=value` pair (quotes already removed) to `element`.
fn apply_pair(element: &mut Element, pair: &str) {
    let Some((name, value)) = pair.split_once('=') else {
        return;
    };
    let value = value.trim();
    match name.trim().to_ascii_lowercase().as_str() {
        "for" => element.node = parse_node(value),
        "proto" => element.proto = parse_proto(value),
        "host" => element.host = parse_host(value),
        _ => {}
    }
}

/// A node (RFC 7239 §6): `192.0.2.43`, `192.0.2.43:47011`, `[2001:db8::17]`,
/// `[2001:db8::17]:4711`; a bare IPv6 address as `X-Forwarded-For` writes it. `unknown`, an
/// obfuscated `_identifier` and anything else name no address.
fn parse_node(node: &str) -> Option<IpAddr> {
    let node = node.trim();
    if let Some(rest) = node.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.starts_with(':')) {
            return None;
        }
        return ip.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6);
    }
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    let (ip, _port) = node.rsplit_once(':')?;
    ip.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

fn parse_proto(proto: &str) -> Option<&'static str> {
    let proto = proto.trim();
    if proto.eq_ignore_ascii_case("https") {
        Some("https")
    } else if proto.eq_ignore_ascii_case("http") {
        Some("http")
    } else {
        None
    }
}

/// A `host[:port]` that parses as a URI authority without user information.
fn parse_host(host: &str) -> Option<String> {
    let host = host.trim();
    let authority = http::uri::Authority::from_str(host).ok()?;
    (!authority.as_str().contains('@') && !host.is_empty()).then(|| host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderValue, Method, Uri};
    use proptest::prelude::*;
    use std::net::SocketAddr;

    fn proxies(nets: &[&str]) -> ProxyConfig {
        ProxyConfig {
            public_url: None,
            trusted_proxies: nets.iter().map(|n| n.parse().unwrap()).collect(),
        }
    }

    fn view(config: &ProxyConfig, peer: &str, headers: &[(&str, &str)]) -> ClientView {
        let mut map = HeaderMap::new();
        for (n, v) in headers {
            map.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        let (method, uri) = (Method::GET, Uri::from_static("/mcp"));
        let peer: SocketAddr = peer.parse().unwrap();
        client_view(
            config,
            &RequestHead::new(&method, &uri, &map).with_peer(Some(peer)),
        )
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn cidr_ranges() {
        let n: ProxyNet = "10.0.0.0/8".parse().unwrap();
        assert!(n.contains("10.255.0.1".parse().unwrap()));
        assert!(!n.contains("11.0.0.1".parse().unwrap()));
        assert!(n.contains("::ffff:10.1.2.3".parse().unwrap()));
        let n: ProxyNet = "fd00::/8".parse().unwrap();
        assert!(n.contains("fd12::1".parse().unwrap()));
        assert!(!n.contains("fe80::1".parse().unwrap()));
        let n: ProxyNet = "192.168.1.128/25".parse().unwrap();
        assert!(n.contains("192.168.1.200".parse().unwrap()));
        assert!(!n.contains("192.168.1.127".parse().unwrap()));
        let one: ProxyNet = "127.0.0.1".parse().unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        assert!(
            "0.0.0.0/0"
                .parse::<ProxyNet>()
                .unwrap()
                .contains(ip("8.8.8.8").unwrap())
        );
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "nonsense",
            "10.0.0.0/",
            "/8",
            "10.0.0/8",
        ] {
            assert!(bad.parse::<ProxyNet>().is_err(), "{bad}");
        }
    }

    #[test]
    fn public_urls() {
        let u: PublicUrl = "HTTPS://MCP.Example.com/mcp/".parse().unwrap();
        assert_eq!(u.as_str(), "https://mcp.example.com/mcp");
        assert_eq!(u.authority(), "mcp.example.com");
        assert_eq!(u.origin(), "https://mcp.example.com");
        let u: PublicUrl = "http://[::1]:8443/a/b".parse().unwrap();
        assert_eq!(u.authority(), "[::1]:8443");
        assert_eq!(u.origin(), "http://[::1]:8443");
        for bad in [
            "/mcp",
            "ftp://h/mcp",
            "https://u:p@h/mcp",
            "https://h/mcp?x=1",
            "https://h/mcp#f",
            "",
        ] {
            assert!(bad.parse::<PublicUrl>().is_err(), "{bad}");
        }
    }

    #[test]
    fn untrusted_peer_headers_are_ignored() {
        let c = proxies(&["10.0.0.0/8"]);
        let v = view(
            &c,
            "192.0.2.9:5000",
            &[
                ("x-forwarded-for", "203.0.113.1"),
                ("x-forwarded-host", "evil.example"),
                ("x-forwarded-proto", "https"),
                ("forwarded", "for=203.0.113.2;host=evil.example;proto=https"),
            ],
        );
        assert_eq!(
            v,
            ClientView {
                address: ip("192.0.2.9"),
                proto: None,
                host: None
            }
        );
        // No trusted proxy at all: the same.
        let v = view(
            &ProxyConfig::default(),
            "10.0.0.1:1",
            &[("x-forwarded-for", "1.2.3.4")],
        );
        assert_eq!(v.address, ip("10.0.0.1"));
    }

    #[test]
    fn x_forwarded_for_walks_from_the_right() {
        let c = proxies(&["10.0.0.0/8"]);
        // The client forged a first entry; the edge proxy appended the real address.
        let v = view(
            &c,
            "10.0.0.2:1",
            &[
                ("x-forwarded-for", "198.51.100.66, 203.0.113.7, 10.0.0.9"),
                ("x-forwarded-proto", "https"),
                ("x-forwarded-host", "mcp.example.com"),
            ],
        );
        assert_eq!(v.address, ip("203.0.113.7"));
        assert_eq!(v.proto, Some("https"));
        assert_eq!(v.host.as_deref(), Some("mcp.example.com"));
        // Several field lines are one list.
        let v = view(
            &c,
            "10.0.0.2:1",
            &[
                ("x-forwarded-for", "203.0.113.7"),
                ("x-forwarded-for", "10.1.1.1"),
            ],
        );
        assert_eq!(v.address, ip("203.0.113.7"));
        // All trusted: the leftmost.
        let v = view(
            &c,
            "10.0.0.2:1",
            &[("x-forwarded-for", "10.3.3.3, 10.1.1.1")],
        );
        assert_eq!(v.address, ip("10.3.3.3"));
        // Garbage stops the walk at the last address known.
        let v = view(
            &c,
            "10.0.0.2:1",
            &[("x-forwarded-for", "1.1.1.1, garbage, 10.1.1.1")],
        );
        assert_eq!(v.address, ip("10.1.1.1"));
        // Ports and brackets.
        let v = view(
            &c,
            "10.0.0.2:1",
            &[("x-forwarded-for", "[2001:db8::1]:443")],
        );
        assert_eq!(v.address, ip("2001:db8::1"));
        let v = view(&c, "10.0.0.2:1", &[("x-forwarded-for", "203.0.113.7:5555")]);
        assert_eq!(v.address, ip("203.0.113.7"));
        // No header: the proxy is the client.
        let v = view(&c, "10.0.0.2:1", &[]);
        assert_eq!(v.address, ip("10.0.0.2"));
        // A bad proto or host is dropped.
        let v = view(
            &c,
            "10.0.0.2:1",
            &[("x-forwarded-proto", "gopher"), ("x-forwarded-host", "a b")],
        );
        assert_eq!((v.proto, v.host), (None, None));
    }

    #[test]
    fn forwarded_elements_rfc_7239() {
        let c = proxies(&["10.0.0.0/8", "::1"]);
        let v = view(
            &c,
            "[::1]:9",
            &[(
                "forwarded",
                "for=198.51.100.1;host=forged, for=\"[2001:db8:cafe::17]:4711\";proto=https;host=\"mcp.example.com:8443\", for=10.0.0.5;proto=http",
            )],
        );
        assert_eq!(v.address, ip("2001:db8:cafe::17"));
        assert_eq!(v.proto, Some("https"));
        assert_eq!(v.host.as_deref(), Some("mcp.example.com:8443"));
        // Forwarded wins over X-Forwarded-For.
        let v = view(
            &c,
            "10.0.0.1:9",
            &[
                ("forwarded", "For=\"192.0.2.43:47011\""),
                ("x-forwarded-for", "1.1.1.1"),
            ],
        );
        assert_eq!(v.address, ip("192.0.2.43"));
        // unknown and obfuscated identifiers stop the walk.
        for node in ["unknown", "_hidden", "\"_SEVKISEK\""] {
            let v = view(
                &c,
                "10.0.0.1:9",
                &[(
                    "forwarded",
                    &format!("for=192.0.2.1, for={node};proto=https"),
                )],
            );
            assert_eq!(v.address, ip("10.0.0.1"), "{node}");
            assert_eq!(v.proto, Some("https"), "{node}");
        }
        // Quoted commas and semicolons belong to the value.
        let v = view(
            &c,
            "10.0.0.1:9",
            &[("forwarded", "host=\"a,b;c\";for=192.0.2.60")],
        );
        assert_eq!(v.address, ip("192.0.2.60"));
        assert_eq!(v.host.as_deref(), Some("a,b;c"));
    }

    fn any_header() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("for=".to_owned()),
            Just("proto=".to_owned()),
            Just("host=".to_owned()),
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            Just(",".to_owned()),
            Just(";".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just(":".to_owned()),
            Just("unknown".to_owned()),
            Just("10.0.0.1".to_owned()),
            Just("2001:db8::1".to_owned()),
            "[ -~]{0,6}",
        ];
        prop::collection::vec(piece, 0..24).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Any header values: no panic; a trusted peer's view names an address from the
        /// headers or the peer; an untrusted peer's view is the peer alone.
        #[test]
        fn forwarding_headers_never_panic(
            fwd in any_header(), xff in any_header(), host in any_header(),
            proto in any_header(), trusted in any::<bool>(),
        ) {
            let c = proxies(&["10.0.0.0/8"]);
            let peer = if trusted { "10.9.9.9:1" } else { "192.0.2.1:1" };
            let mut headers = vec![
                ("x-forwarded-for", xff.as_str()),
                ("x-forwarded-host", host.as_str()),
                ("x-forwarded-proto", proto.as_str()),
            ];
            if !fwd.is_empty() {
                headers.push(("forwarded", fwd.as_str()));
            }
            let headers: Vec<_> = headers
                .into_iter()
                .filter(|(_, v)| HeaderValue::from_str(v).is_ok())
                .collect();
            let v = view(&c, peer, &headers);
            prop_assert!(v.address.is_some());
            if !trusted {
                prop_assert_eq!(v, ClientView { address: ip("192.0.2.1"), proto: None, host: None });
            }
        }

        /// Whatever the client prepends, the address the trusted edge appended wins.
        #[test]
        fn forged_prefixes_do_not_move_the_client(
            forged in prop::collection::vec(any::<[u8; 4]>(), 0..6), client in any::<[u8; 4]>(),
        ) {
            prop_assume!(client[0] != 10);
            let c = proxies(&["10.0.0.0/8"]);
            let mut list: Vec<String> = forged
                .iter()
                .map(|o| std::net::Ipv4Addr::from(*o).to_string())
                .collect();
            let client = std::net::Ipv4Addr::from(client);
            list.push(client.to_string());
            list.push("10.0.0.3".to_owned());
            let xff = list.join(", ");
            let v = view(&c, "10.0.0.2:1", &[("x-forwarded-for", &xff)]);
            prop_assert_eq!(v.address, Some(IpAddr::V4(client)));
            let fwd: Vec<String> = list.iter().map(|a| format!("for={a}")).collect();
            let v = view(&c, "10.0.0.2:1", &[("forwarded", &fwd.join(","))]);
            prop_assert_eq!(v.address, Some(IpAddr::V4(client)));
        }
    }
}
