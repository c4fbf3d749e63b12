//! [`EraCache`]: the era each origin was found to speak, shared by the clients given a clone.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::Uri;
use mcp_proto::client::KnownEra;

// S-NEW-10.
/// The era detected per origin (scheme, host and port of an endpoint), shared by every client
/// given a clone (the spec's versioning section: cache the era per origin, for the origin's
/// lifetime). A client built with [`Connect::era_cache`](crate::Connect::era_cache) skips the
/// probe of an origin known to be legacy, probes a known modern one at its version, and
/// records what its session learns (the core's `ClientEvent::KnownEraChanged`). Cheap to
/// clone; clones share the entries. Preload it (e.g. from disk) with [`insert`](Self::insert).
#[derive(Clone, Default)]
pub struct EraCache {
    entries: Arc<Mutex<BTreeMap<String, KnownEra>>>,
}

impl std::fmt::Debug for EraCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(crate::lock(&self.entries).iter())
            .finish()
    }
}

impl EraCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The era known for `origin`.
    pub fn get(&self, origin: &str) -> Option<KnownEra> {
        crate::lock(&self.entries).get(origin).copied()
    }

    /// Records the era of `origin`.
    pub fn insert(&self, origin: &str, era: KnownEra) {
        crate::lock(&self.entries).insert(origin.to_owned(), era);
    }

    /// Forgets `origin` (its next session probes again).
    pub fn forget(&self, origin: &str) {
        crate::lock(&self.entries).remove(origin);
    }

    /// Applies what a session reported: `Some` records, `None` forgets.
    pub fn set(&self, origin: &str, era: Option<KnownEra>) {
        match era {
            Some(era) => self.insert(origin, era),
            None => self.forget(origin),
        }
    }

    /// The origin of an endpoint URL: `scheme://authority` (`http://127.0.0.1:8080`).
    pub fn origin_of(uri: &Uri) -> String {
        match (uri.scheme_str(), uri.authority()) {
            (Some(scheme), Some(authority)) => format!("{scheme}://{authority}"),
            _ => uri.to_string(),
        }
    }
}
