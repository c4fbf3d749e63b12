//! The demo servers shared by the runtime adapters' examples (`cargo run -p mcp-tokio
//! --example users`, `--example protected`), the tests (`mcp_tests::users` re-exports
//! [`users`]; `tests/jwt_access_tokens.rs` runs [`protected`]), and the runtime-neutral half
//! of the example client ([`cli`]). A separate package so that an
//! adapter's examples can use them without depending on the tests.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
pub mod protected;
pub mod users;
