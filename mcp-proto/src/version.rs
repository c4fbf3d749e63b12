//! Protocol revisions, and every behaviour that a revision selects.
//!
//! Both eras live in one core: the negotiated (legacy) or probed (modern) revision is a value
//! of [`ProtocolVersion`], and the state machines ask it questions — "may this body be a
//! batch?", "are there sessions?", "may the server prime a stream?" — instead of branching on
//! version strings. Adding a revision means adding a variant and answering those questions.

use std::fmt;

/// A revision of the Model Context Protocol that this implementation speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ProtocolVersion {
    // S-POST-5.
    /// 2025-03-26: Streamable HTTP appears; JSON-RPC batches allowed.
    V2025_03_26,
    // S-POST-6, S-VER-1.
    /// 2025-06-18: batches removed; `MCP-Protocol-Version` header.
    V2025_06_18,
    // S-POST-19..23.
    /// 2025-11-25: priming events, server-closed connections, `retry`.
    V2025_11_25,
    /// 2026-07-28, the modern era: no sessions, no GET stream, per-request `_meta` (S-NEW-*).
    V2026_07_28,
}

/// The two families of revisions, which differ in transport shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// 2025-03-26 … 2025-11-25: `initialize`, sessions, the GET stream, resumability.
    Legacy,
    /// 2026-07-28 and later: stateless requests carrying their own metadata.
    Modern,
}

impl ProtocolVersion {
    /// Every revision we speak, newest first.
    pub const ALL: [ProtocolVersion; 4] = [
        ProtocolVersion::V2026_07_28,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_03_26,
    ];

    /// The legacy revisions, newest first: what `initialize` negotiates among.
    pub const LEGACY: [ProtocolVersion; 3] = [
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_03_26,
    ];

    /// The newest legacy revision, offered by a client in `initialize`.
    pub const LATEST_LEGACY: ProtocolVersion = ProtocolVersion::V2025_11_25;

    // S-VER-3.
    /// What a server assumes when a request carries no `MCP-Protocol-Version` and the version
    /// cannot be known otherwise.
    pub const ASSUMED_WITHOUT_HEADER: ProtocolVersion = ProtocolVersion::V2025_03_26;

    /// Parses the exact revision string (`"2025-06-18"`); anything else is `None`.
    pub fn parse(s: &str) -> Option<ProtocolVersion> {
        match s.trim() {
            "2025-03-26" => Some(ProtocolVersion::V2025_03_26),
            "2025-06-18" => Some(ProtocolVersion::V2025_06_18),
            "2025-11-25" => Some(ProtocolVersion::V2025_11_25),
            "2026-07-28" => Some(ProtocolVersion::V2026_07_28),
            _ => None,
        }
    }

    /// The revision string, as sent in `protocolVersion` and `MCP-Protocol-Version`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// Which era the revision belongs to.
    pub const fn era(self) -> Era {
        match self {
            ProtocolVersion::V2026_07_28 => Era::Modern,
            _ => Era::Legacy,
        }
    }

    // S-POST-5, S-RPC-11.
    /// Whether a POST body may be a JSON-RPC batch array (2025-03-26 only).
    pub const fn allows_batch(self) -> bool {
        matches!(self, ProtocolVersion::V2025_03_26)
    }

    /// Whether the transport has sessions, a GET stream and resumability (legacy era).
    pub const fn has_sessions(self) -> bool {
        matches!(self.era(), Era::Legacy)
    }

    // S-POST-19, S-POST-20, G-3.
    /// Whether a server may send a priming event (id + empty data) and close connections
    /// early for polling: only to clients of 2025-11-25 or later, since older clients
    /// JSON-parse empty data.
    pub const fn allows_priming(self) -> bool {
        matches!(
            self,
            ProtocolVersion::V2025_11_25 | ProtocolVersion::V2026_07_28
        ) && self.has_sessions()
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_round_trips_through_its_string() {
        for v in ProtocolVersion::ALL {
            assert_eq!(ProtocolVersion::parse(v.as_str()), Some(v));
        }
        assert_eq!(ProtocolVersion::parse("2024-11-05"), None);
        assert_eq!(ProtocolVersion::parse(""), None);
    }

    #[test]
    fn s_post_5_only_2025_03_26_allows_batches() {
        let with_batches: Vec<_> = ProtocolVersion::ALL
            .into_iter()
            .filter(|v| v.allows_batch())
            .collect();
        assert_eq!(with_batches, [ProtocolVersion::V2025_03_26]);
    }

    #[test]
    fn g_3_priming_only_for_2025_11_25_legacy_clients() {
        assert!(ProtocolVersion::V2025_11_25.allows_priming());
        assert!(!ProtocolVersion::V2025_06_18.allows_priming());
        assert!(!ProtocolVersion::V2025_03_26.allows_priming());
        assert!(!ProtocolVersion::V2026_07_28.allows_priming());
    }

    #[test]
    fn s_ver_3_assumed_version_and_order() {
        assert_eq!(
            ProtocolVersion::ASSUMED_WITHOUT_HEADER.as_str(),
            "2025-03-26"
        );
        assert!(ProtocolVersion::V2025_03_26 < ProtocolVersion::V2026_07_28);
        assert_eq!(ProtocolVersion::V2026_07_28.era(), Era::Modern);
        assert!(!ProtocolVersion::V2026_07_28.has_sessions());
    }
}
