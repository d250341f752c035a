//! The shared helpers as `pinned.rs` names them: it declares a `mod common;` of its own, and
//! is kept byte for byte with its pinned output.

pub use crate::common::*;
