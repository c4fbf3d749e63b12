//! Bodies of the cargo-fuzz targets, compiled with the normal build so plain tests replay the
//! committed seeds (`fuzz/seeds/<target>`). Not a stable API.

pub mod router;
