//! `retry`: run a command again when it fails.
//!
//! The crate is a pure core (`policy`) inside a thin imperative shell: the command line is
//! parsed into a validated [`config::Config`], the policy decides, `report` writes what people
//! read, and [`exit::ExitStatus`] is the exit-status contract. At the bottom, [`text`] makes
//! text safe to print, in the character set it is given.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod argv;
pub mod cli;
pub mod config;
pub mod duration;
pub mod exit;
pub mod http;
pub mod json;
pub mod outcome;
pub mod policy;
pub mod redis_url;
pub mod report;
pub mod run;
pub mod sim;
pub mod store;
pub mod text;
