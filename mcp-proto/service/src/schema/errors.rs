//! JSON-RPC error objects, the error codes MCP uses, and typed `data` for the errors that
//! define one.

use serde::{Deserialize, Serialize};

use super::{ClientCapabilities, ElicitRequestUrlParams, JsonObject, JsonRpcErrorResponse};

/// The error codes of JSON-RPC 2.0 and MCP: the transport core's one set.
pub use mcp_proto::jsonrpc::error_codes;

/// The JSON-RPC error object (`Error`): the transport core's one type, here with `data`
/// typed as `D`.
///
/// The spec's bare error shapes (`ParseError`, `InvalidRequestError`, `MethodNotFoundError`,
/// `InvalidParamsError`, `InternalError`) are `ErrorObject<serde_json::Value>` with the
/// matching [`error_codes`] constant; its constructors (`ErrorObject::invalid_params`, …)
/// build them.
pub use mcp_proto::jsonrpc::{ErrorData, ErrorObject};

/// The `data` of an [`UnsupportedProtocolVersionError`] (2026-07-28).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UnsupportedProtocolVersionData {
    /// The versions the server supports.
    pub supported: Vec<String>,
    /// The version the client asked for.
    pub requested: String,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl UnsupportedProtocolVersionData {
    /// The `-32022` error object: `requested` is not among `supported`.
    pub fn error(
        requested: impl Into<String>,
        supported: impl IntoIterator<Item = impl Into<String>>,
    ) -> ErrorObject<Self> {
        ErrorObject::new(
            error_codes::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
        )
        .with_data(UnsupportedProtocolVersionData {
            supported: supported.into_iter().map(Into::into).collect(),
            requested: requested.into(),
            extra: JsonObject::new(),
        })
    }
}

/// The `data` of a [`MissingRequiredClientCapabilityError`] (2026-07-28).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MissingRequiredClientCapabilityData {
    /// The capabilities the server needs from the client for this request.
    pub required_capabilities: ClientCapabilities,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl MissingRequiredClientCapabilityData {
    /// The `-32021` error object: the request needs `required`.
    pub fn error(message: impl Into<String>, required: ClientCapabilities) -> ErrorObject<Self> {
        ErrorObject::new(error_codes::MISSING_REQUIRED_CLIENT_CAPABILITY, message).with_data(
            MissingRequiredClientCapabilityData {
                required_capabilities: required,
                extra: JsonObject::new(),
            },
        )
    }
}

/// The `data` of a [`UrlElicitationRequiredError`] (2025-11-25).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UrlElicitationRequiredData {
    /// The URL-mode elicitations to complete before retrying.
    pub elicitations: Vec<ElicitRequestUrlParams>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ErrorData for UnsupportedProtocolVersionData {
    fn data_eq(&self, other: &Self) -> bool {
        self == other
    }
}

impl ErrorData for MissingRequiredClientCapabilityData {
    fn data_eq(&self, other: &Self) -> bool {
        self == other
    }
}

impl ErrorData for UrlElicitationRequiredData {
    fn data_eq(&self, other: &Self) -> bool {
        self == other
    }
}

/// A bare JSON-RPC error object with code `-32700` (`ParseError`).
pub type ParseError = ErrorObject<serde_json::Value>;
/// A bare JSON-RPC error object with code `-32600` (`InvalidRequestError`).
pub type InvalidRequestError = ErrorObject<serde_json::Value>;
/// A bare JSON-RPC error object with code `-32601` (`MethodNotFoundError`).
pub type MethodNotFoundError = ErrorObject<serde_json::Value>;
/// A bare JSON-RPC error object with code `-32602` (`InvalidParamsError`).
pub type InvalidParamsError = ErrorObject<serde_json::Value>;
/// A bare JSON-RPC error object with code `-32603` (`InternalError`).
pub type InternalError = ErrorObject<serde_json::Value>;
/// An error response with code `-32020` (`HeaderMismatchError`, 2026-07-28).
pub type HeaderMismatchError = JsonRpcErrorResponse;
/// An error response with code `-32021` (`MissingRequiredClientCapabilityError`, 2026-07-28).
pub type MissingRequiredClientCapabilityError =
    JsonRpcErrorResponse<MissingRequiredClientCapabilityData>;
/// An error response with code `-32022` (`UnsupportedProtocolVersionError`, 2026-07-28).
pub type UnsupportedProtocolVersionError = JsonRpcErrorResponse<UnsupportedProtocolVersionData>;
/// An error response with code `-32042` (`URLElicitationRequiredError`, 2025-11-25).
pub type UrlElicitationRequiredError = JsonRpcErrorResponse<UrlElicitationRequiredData>;
