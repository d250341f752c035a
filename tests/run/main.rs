//! The end-to-end tests of real runs: tries, their processes and signals, timeouts and grace
//! periods, stdin and output, hooks and CI annotations, the terminal's countdown, `Retry-After`,
//! the history of flaky commands, dead letters and their replay, the shared quota (against a
//! real `redis-server`) and the herd. One test program, a module a concern: most of these
//! tests wait on real processes and timers, for up to a few seconds, and the tests of one
//! program wait side by side, while `cargo test` runs its test programs one after another.
//!
//! A module's tests alone: `cargo test --test run stdio::` (a filter on the test's path).
//!
//! libtest starts the tests in the order of their names. The throttle's and the terminal's
//! tests wait longest on timers, so their modules are named to come first (`admission`,
//! `at_a_terminal`): their waits then overlap the work of the rest instead of ending the run.
//! The Redis Cluster's test (`cluster`), seconds of a cluster's nodes agreeing, comes early too.

#[path = "../common/mod.rs"]
mod common;

mod admission;
mod agree;
mod at_a_terminal;
mod ci_lines;
mod cluster;
mod consecutive;
mod cron;
mod cut;
mod deadletter;
mod edges;
mod env_file;
mod flaky;
mod fleet;
mod herd;
mod hooks_ci;
mod junit;
mod lock;
mod lock_redis;
mod metrics;
mod nemesis;
mod once;
mod once_redis;
mod one_file;
mod output;
mod output_on_failure;
mod ping;
mod process;
mod pushback;
mod pushgateway;
mod queue;
mod quota_redis;
mod records;
mod redis_socket;
mod redis_urls;
mod rediss;
mod run;
mod sentinel;
mod signals;
mod stdio;
mod traces;
mod twins;
mod until_output;
