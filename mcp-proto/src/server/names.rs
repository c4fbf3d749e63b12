//! The names the router gives its things on the wire and in the store: stream names, event
//! ids, server→client request ids, and back. Alone they are numbers; in a cluster they carry
//! the instance's name (`"<instance>.<n>"`), so every instance can tell its own from
//! another's. Only the configuration is read here.

use super::ServerConfig;
use crate::jsonrpc::RequestId;

impl ServerConfig {
    /// This instance's name in a cluster (empty alone).
    pub(crate) fn instance(&self) -> &str {
        self.cluster
            .as_ref()
            .map(|c| &*c.instance)
            .unwrap_or_default()
    }

    /// The name of stream `lsid` in event ids and the store (`<instance>.<lsid>`).
    pub(crate) fn stream_name(&self, lsid: u64) -> String {
        self.stream_name_with(lsid, None)
    }

    /// `<stream name>` then `-<seq>` if `seq` is given, in one allocation of the exact size
    /// (written per event and per commit: `format!` grew its buffer, and a `Box<str>` made
    /// of it reallocated it again).
    fn stream_name_with(&self, lsid: u64, seq: Option<u64>) -> String {
        use std::fmt::Write as _;
        let width = |n: u64| n.checked_ilog10().map_or(1, |d| d as usize + 1);
        let instance = self.cluster.as_ref().map(|c| &*c.instance);
        let len =
            instance.map_or(0, |i| i.len() + 1) + width(lsid) + seq.map_or(0, |n| 1 + width(n));
        let mut name = String::with_capacity(len);
        if let Some(instance) = instance {
            name.push_str(instance);
            name.push('.');
        }
        // Writes into a `String`, which do not fail.
        let _ = write!(name, "{lsid}");
        if let Some(seq) = seq {
            let _ = write!(name, "-{seq}");
        }
        name
    }

    /// The JSON-RPC id of a server→client request: a number alone, `"<instance>.<n>"` in a
    /// cluster.
    pub(crate) fn outbound_wire_id(&self, n: u64) -> Option<RequestId> {
        match &self.cluster {
            Some(c) => Some(RequestId::String(format!("{}.{n}", c.instance).into())),
            None => i64::try_from(n).ok().map(RequestId::Number),
        }
    }

    /// The local number of a server→client request id, or the instance it belongs to.
    pub(crate) fn outbound_owner(&self, id: &RequestId) -> Owner {
        match (&self.cluster, id) {
            (None, RequestId::Number(n)) => u64::try_from(*n).map_or(Owner::Unknown, Owner::Here),
            (Some(c), RequestId::String(s)) => match s.split_once('.') {
                Some((inst, n)) if inst == &*c.instance => {
                    n.parse().map_or(Owner::Unknown, Owner::Here)
                }
                Some((inst, _)) if !inst.is_empty() => Owner::Elsewhere(inst.into()),
                _ => Owner::Unknown,
            },
            _ => Owner::Unknown,
        }
    }

    /// Whether a `Last-Event-ID` names this instance's stream number (`Some(lsid)`), a
    /// clustered session's listen log (`Listen(seq)`), or nothing resumable here.
    pub(crate) fn resolve_event_id(&self, id: &str) -> Option<EventRef> {
        let id = id.trim();
        match &self.cluster {
            None => super::stream::parse_event_id(id).map(|(l, s)| EventRef::Stream(l, s)),
            Some(c) => {
                let (name, seq) = id.rsplit_once('-')?;
                let seq: u64 = digits(seq)?;
                if name == "l" {
                    return Some(EventRef::Listen(seq));
                }
                let (inst, n) = name.split_once('.')?;
                let n = digits(n)?;
                let valid = !inst.is_empty()
                    && inst.len() <= 32
                    && inst.bytes().all(|b| b.is_ascii_alphanumeric());
                if !valid {
                    return None;
                }
                if inst == &*c.instance {
                    Some(EventRef::Stream(n, seq))
                } else {
                    Some(EventRef::Remote(name.into(), seq))
                }
            }
        }
    }

    /// The event id of `seq` on stream `lsid` (`"<instance>.<lsid>-<seq>"` in a cluster).
    pub(crate) fn stream_event_id(&self, lsid: u64, seq: u64) -> String {
        self.stream_name_with(lsid, Some(seq))
    }
}

/// Whom a server→client request id belongs to.
#[derive(Debug)]
pub(crate) enum Owner {
    Here(u64),
    Elsewhere(Box<str>),
    Unknown,
}

/// What a `Last-Event-ID` names.
#[derive(Debug, Clone)]
pub(crate) enum EventRef {
    /// Stream `lsid` of this instance, after `seq`.
    Stream(u64, u64),
    /// The session's listen log, after `seq`.
    Listen(u64),
    /// Another instance's request stream `name`, after `seq`.
    Remote(Box<str>, u64),
}

fn digits(s: &str) -> Option<u64> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::super::ClusterConfig;
    use super::*;

    #[test]
    fn stream_names_and_event_ids_are_written_at_their_exact_size() {
        let alone = ServerConfig::default();
        let cluster = ServerConfig::default()
            .with_cluster(ClusterConfig::new("east1").expect("a valid instance name"));
        for (lsid, seq) in [(0, 0), (9, 10), (10, 9), (123, 4567), (u64::MAX, u64::MAX)] {
            let name = cluster.stream_name(lsid);
            assert_eq!(name, format!("east1.{lsid}"));
            assert_eq!(name.capacity(), name.len(), "{name}");
            let id = cluster.stream_event_id(lsid, seq);
            assert_eq!(id, format!("east1.{lsid}-{seq}"));
            assert_eq!(id.capacity(), id.len(), "{id}");
            let name = alone.stream_name(lsid);
            assert_eq!(name, lsid.to_string());
            assert_eq!(name.capacity(), name.len(), "{name}");
            let id = alone.stream_event_id(lsid, seq);
            assert_eq!(id, format!("{lsid}-{seq}"));
            assert_eq!(id.capacity(), id.len(), "{id}");
        }
    }
}
