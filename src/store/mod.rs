//! Where state that outlives a run is kept: the dead-letter file of runs that gave up
//! (spec 17), and the small JSON reader it needs.

pub mod deadletter;
pub mod json;
