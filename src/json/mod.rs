//! JSON: the log's lines, the dry run's and the simulation's output, and the dead-letter and
//! history records, written by hand and read by `serde_json`'s parser. It sits below everything
//! that uses it (`report`, `store`) and imports nothing from the crate.
//!
//! Why the writer is not `serde_json`'s: the output is pinned byte for byte, and `serde_json`
//! writes it differently in three ways that matter. A float that is whole comes out as `2.0`
//! where the log has always written `2` (`"factor":2`); DEL, the C1 controls and the invisible
//! characters that reorder text (U+202E) are written raw, where the log escapes them so that a
//! JSON line shown on a terminal cannot act on it; and its `Value` and `json!` keep an object's
//! fields in the order written only with its `preserve_order` feature (and `indexmap`). Matching
//! the output would take a custom `Formatter`, a second escaping pass and a map type, which is
//! more code than the writer it would replace. The reader takes `serde_json`'s parser, linear in
//! the line whatever it holds, and builds its own [`Value`] with it, stricter than `serde_json`'s
//! where the record files must be: a key given twice is refused, nesting is bounded, and a line
//! cut short is told from one damaged.

mod read;
mod write;

pub use read::{Unparsed, Value, base64_decode, ends_too_soon, parse, parse_line};
pub use write::{Obj, base64};
