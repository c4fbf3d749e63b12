//! What the router writes into bodies it composes, and the one field it reads from bodies
//! it otherwise only forwards: a leaf every part of the router shares.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::ProtocolVersion;
use crate::jsonrpc::{ErrorObject, Response};

#[derive(Deserialize)]
struct VersionField<'a> {
    #[serde(rename = "protocolVersion", borrow)]
    protocol_version: Option<&'a str>,
}

/// `protocolVersion` of an `initialize` params or result object, without the schema.
pub(crate) fn read_protocol_version(raw: Option<&RawValue>) -> Option<ProtocolVersion> {
    let raw = raw?;
    let v: VersionField<'_> = serde_json::from_str(raw.get()).ok()?;
    ProtocolVersion::parse(v.protocol_version?)
}

/// A JSON-RPC error response body.
pub(crate) fn error_body(id: Option<crate::jsonrpc::RequestId>, code: i64, message: &str) -> Bytes {
    Response::error(id, ErrorObject::new(code, message)).to_bytes()
}

/// `[a,b,c]` from encoded messages.
pub(crate) fn join_array(parts: &[Bytes]) -> Bytes {
    let mut v = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
    v.push(b'[');
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            v.push(b',');
        }
        v.extend_from_slice(p);
    }
    v.push(b']');
    Bytes::from(v)
}
