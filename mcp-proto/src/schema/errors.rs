//! JSON-RPC error objects, the error codes MCP uses, and typed `data` for the errors that
//! define one.

use serde::{Deserialize, Serialize};

use super::{ClientCapabilities, ElicitRequestUrlParams, JsonObject, JsonRpcErrorResponse};

/// The error codes of JSON-RPC 2.0 and MCP: the transport core's one set.
pub use crate::jsonrpc::error_codes;

/// The JSON-RPC error object (`Error`): the transport core's one type, here with `data`
/// typed as `D`.
///
/// The spec's bare error shapes (`ParseError`, `InvalidRequestError`, `MethodNotFoundError`,
/// `InvalidParamsError`, `InternalError`) are `ErrorObject<serde_json::Value>` with the
/// matching [`error_codes`] constant; the constructors below build them.
pub use crate::jsonrpc::{ErrorData, ErrorObject};

impl ErrorObject<serde_json::Value> {
    /// `-32700`, parse error.
    pub fn parse_error(message: impl Into<String>) -> Self {
        Self::new(error_codes::PARSE_ERROR, message)
    }

    /// `-32600`, invalid request.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(error_codes::INVALID_REQUEST, message)
    }

    /// `-32601`, method not found.
    pub fn method_not_found(message: impl Into<String>) -> Self {
        Self::new(error_codes::METHOD_NOT_FOUND, message)
    }

    /// `-32602`, invalid params.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(error_codes::INVALID_PARAMS, message)
    }

    /// `-32603`, internal error.
    pub fn internal_error(message: impl Into<String>) -> Self {
        Self::new(error_codes::INTERNAL_ERROR, message)
    }

    /// `-32020`, header mismatch (2026-07-28).
    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(error_codes::HEADER_MISMATCH, message)
    }

    /// Reads `data` as `T`: the typed view of an error received with untyped data. `None`
    /// when there is no data; an error when it does not have `T`'s shape.
    pub fn data_as<T: serde::de::DeserializeOwned>(&self) -> Option<Result<T, serde_json::Error>> {
        self.data.clone().map(serde_json::from_value)
    }
}

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

impl ErrorObject<UnsupportedProtocolVersionData> {
    /// `-32022`: `requested` is not among `supported`.
    pub fn unsupported_protocol_version(
        requested: impl Into<String>,
        supported: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self::new(
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

impl ErrorObject<MissingRequiredClientCapabilityData> {
    /// `-32021`: the request needs `required`.
    pub fn missing_required_client_capability(
        message: impl Into<String>,
        required: ClientCapabilities,
    ) -> Self {
        Self::new(error_codes::MISSING_REQUIRED_CLIENT_CAPABILITY, message).with_data(
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
