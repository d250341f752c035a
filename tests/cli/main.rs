//! The tests that wait on no timer: the options and their errors, the generated manual and
//! completions, the shape of the source, the pinned output, the dry run and the simulation,
//! the log's text, the paths `retry` refuses, the local quota store, the static build, and
//! properties over random options. One test program, a module a concern, since `cargo test`
//! runs its test programs one after another and each costs a link and a start; the tests of
//! one program run side by side.
//!
//! A module's tests alone: `cargo test --test cli docs::` (a filter on the test's path).

#[path = "../common/mod.rs"]
mod common;

mod at_scale;
mod cli;
mod docs;
mod dry_run;
mod events;
mod glossary;
mod json_reference;
mod layers;
mod log;
mod parser_props;
mod paths;
mod pinned;
mod policy_props;
mod quota_spec;
mod quota_store;
mod simulate;
mod static_build;
