//! W3C Trace Context (https://www.w3.org/TR/trace-context/): the `TRACEPARENT` a run is handed
//! read as the specification says, the one each try is given, and the ids of one run's trace,
//! which the runner and the traces' sink share: the runner draws a try's span id as it starts
//! the try, and the sink exports the span under that id.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;

/// A trace's id: 16 bytes, never all zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceId(pub [u8; 16]);

/// A span's id: 8 bytes, never all zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

impl SpanId {
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

/// The `sampled` bit of the trace flags: the caller records the trace.
pub const SAMPLED: u8 = 1;

/// What a valid `TRACEPARENT` says: the trace, the caller's span, the flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parent {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub flags: u8,
}

/// Reads `TRACEPARENT` as the specification's version 00 says, and a later version as a
/// reader of version 00 must: its first four fields, when what follows them starts with `-`.
/// Anything else (a wrong length, version `ff`, upper-case hex, an id of zeros) is `None`:
/// the value is ignored, and the run starts a trace of its own.
pub fn read_traceparent(text: &[u8]) -> Option<Parent> {
    let version = byte_of(text.get(0..2)?)?;
    if version == 0xff || text.get(2) != Some(&b'-') {
        return None;
    }
    if version == 0 && text.len() != 55 {
        return None;
    }
    if text.len() < 55 || (text.len() > 55 && text[55] != b'-') {
        return None;
    }
    if text[35] != b'-' || text[52] != b'-' {
        return None;
    }
    let mut trace_id = [0u8; 16];
    for (i, b) in trace_id.iter_mut().enumerate() {
        *b = byte_of(&text[3 + 2 * i..5 + 2 * i])?;
    }
    let mut span_id = [0u8; 8];
    for (i, b) in span_id.iter_mut().enumerate() {
        *b = byte_of(&text[36 + 2 * i..38 + 2 * i])?;
    }
    let flags = byte_of(&text[53..55])?;
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some(Parent {
        trace_id: TraceId(trace_id),
        span_id: SpanId(span_id),
        flags,
    })
}

/// The `TRACEPARENT` of span `span_id` of trace `trace_id`, version 00.
pub fn traceparent(trace_id: TraceId, span_id: SpanId, flags: u8) -> String {
    format!("00-{}-{}-{flags:02x}", trace_id.hex(), span_id.hex())
}

/// Two lower-case hex digits, as a byte.
fn byte_of(two: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    match two {
        [a, b] => Some(digit(*a)? << 4 | digit(*b)?),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Where a run's ids are drawn from: 8 random bytes at a time (the system's source).
pub type Draw = Box<dyn FnMut() -> [u8; 8]>;

/// The trace of one run: its id, the span that called the run (from `TRACEPARENT`), the flags
/// passed on, the run's own span, and each try's span, drawn as the try starts.
pub struct RunTrace {
    pub trace_id: TraceId,
    /// The caller's span, when `TRACEPARENT` named one: the run span's parent.
    pub parent: Option<SpanId>,
    pub flags: u8,
    pub run_span: SpanId,
    /// Each try's span, by its number, in the order they started.
    tries: Vec<(u64, SpanId)>,
    draw: Draw,
}

/// A run's trace as the runner and the traces' sink share it.
pub type SharedTrace = Rc<RefCell<RunTrace>>;

impl RunTrace {
    /// The trace of a run that `parent` called, or of a new trace when none did (its flags
    /// then say `sampled`); every id drawn from `draw`.
    pub fn new(parent: Option<Parent>, mut draw: Draw) -> RunTrace {
        let (trace_id, parent_span, flags) = match parent {
            Some(p) => (p.trace_id, Some(p.span_id), p.flags),
            None => {
                let (a, b) = (span_id(&mut draw), span_id(&mut draw));
                let mut id = [0u8; 16];
                id[..8].copy_from_slice(&a.0);
                id[8..].copy_from_slice(&b.0);
                (TraceId(id), None, SAMPLED)
            }
        };
        let run_span = span_id(&mut draw);
        RunTrace {
            trace_id,
            parent: parent_span,
            flags,
            run_span,
            tries: Vec::new(),
            draw,
        }
    }

    /// Whether the caller records the trace (its `sampled` flag): a trace it does not record
    /// is passed on, never exported.
    pub fn sampled(&self) -> bool {
        self.flags & SAMPLED != 0
    }

    /// The span of try `attempt`, drawn when first asked for.
    pub fn try_span(&mut self, attempt: u64) -> SpanId {
        if let Some(&(_, span)) = self.tries.iter().rev().find(|(a, _)| *a == attempt) {
            return span;
        }
        let span = span_id(&mut self.draw);
        self.tries.push((attempt, span));
        span
    }

    /// The span of try `attempt`, if it was drawn: a try that never reached its start has none.
    pub fn span_of(&self, attempt: u64) -> Option<SpanId> {
        self.tries
            .iter()
            .rev()
            .find(|(a, _)| *a == attempt)
            .map(|&(_, span)| span)
    }

    /// The `TRACEPARENT` of try `attempt`.
    pub fn for_try(&mut self, attempt: u64) -> String {
        let span = self.try_span(attempt);
        traceparent(self.trace_id, span, self.flags)
    }

    /// The `TRACEPARENT` of the run's own span, for its hooks.
    pub fn for_run(&self) -> String {
        traceparent(self.trace_id, self.run_span, self.flags)
    }
}

/// A span id from `draw`: drawn again while it is all zero.
fn span_id(draw: &mut Draw) -> SpanId {
    loop {
        let bytes = draw();
        if bytes != [0; 8] {
            return SpanId(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIVEN: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_read_and_written_back_the_same() {
        let p = read_traceparent(GIVEN.as_bytes()).unwrap();
        assert_eq!(p.trace_id.hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(p.span_id.hex(), "00f067aa0ba902b7");
        assert_eq!(p.flags, 1);
        assert_eq!(traceparent(p.trace_id, p.span_id, p.flags), GIVEN);
    }

    #[test]
    fn a_traceparent_the_specification_refuses_is_ignored() {
        let bad = [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        ];
        for text in bad {
            assert_eq!(read_traceparent(text.as_bytes()), None, "{text}");
        }
        // A later version is read by its first four fields.
        let later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-follows";
        assert!(read_traceparent(later.as_bytes()).is_some());
    }

    #[test]
    fn each_try_has_its_own_span_in_the_callers_trace_and_ids_are_never_zero() {
        let mut n = 0u8;
        // Zeros first: they are drawn again.
        let draw: Draw = Box::new(move || {
            n += 1;
            if n <= 2 { [0; 8] } else { [n; 8] }
        });
        let parent = read_traceparent(GIVEN.as_bytes());
        let mut trace = RunTrace::new(parent, draw);
        assert_eq!(trace.parent, parent.map(|p| p.span_id));
        assert_eq!(trace.run_span, SpanId([3; 8]));
        let first = trace.for_try(1);
        assert_eq!(
            first,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0404040404040404-01"
        );
        assert_eq!(trace.for_try(1), first);
        assert_eq!(trace.span_of(2), None);
        assert_eq!(trace.try_span(2), SpanId([5; 8]));
        assert!(trace.sampled());
    }

    #[test]
    fn a_run_without_a_caller_starts_a_sampled_trace_of_its_own() {
        let mut n = 0u8;
        let draw: Draw = Box::new(move || {
            n += 1;
            [n; 8]
        });
        let trace = RunTrace::new(None, draw);
        assert_eq!(trace.trace_id.0[..8], [1; 8]);
        assert_eq!(trace.trace_id.0[8..], [2; 8]);
        assert_eq!(trace.parent, None);
        assert_eq!(trace.flags, SAMPLED);
    }
}
