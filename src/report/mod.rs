//! What people read: the schedule log (human and JSON lines), the dry-run table, and the
//! summaries of `--simulate` and `--stats`.

pub mod charset;
pub mod ci;
pub mod conclude;
pub mod dryrun;
pub mod event;
pub mod facts;
pub mod history;
pub mod human;
pub mod json;
pub mod jsonlog;
pub mod junit;
pub mod layout;
pub mod log;
pub mod metrics;
pub mod out;
pub mod ping;
pub mod plan_words;
pub mod policy_text;
pub mod pushgateway;
pub mod replay;
pub mod simulate;
pub mod stats;
pub mod tally;
pub mod traces;
pub mod words;

pub use crate::text::{printable, unprintable};
