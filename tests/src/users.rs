//! The user server of mcp-go's server guide: defined in the `mcp-demo` package (so that the
//! adapters' examples serve the same thing) and re-exported here for the tests.

pub use mcp_demo::users::*;
