//! Spans as OTLP/HTTP's JSON encoding writes them (the `ExportTraceServiceRequest` of
//! opentelemetry-proto, in the protobuf JSON mapping that OTLP/HTTP specifies): ids as hex,
//! 64-bit numbers and times as strings, enums as numbers, keys in lowerCamelCase.

use std::time::SystemTime;

use crate::report::json::Obj;
use crate::report::traces::context::{SpanId, TraceId};

/// `SPAN_KIND_INTERNAL`: an operation inside the program, neither a client nor a server.
const KIND_INTERNAL: u64 = 1;

/// `STATUS_CODE_ERROR`.
const STATUS_ERROR: u64 = 2;

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
}

/// One span, ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub parent: Option<SpanId>,
    /// The `tracestate` that came with the caller's `traceparent`, passed on as it was.
    pub trace_state: Option<String>,
    pub name: String,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<(&'static str, Value)>,
    /// The status: `Some(message)` is an error; `None` leaves it unset, as instrumentation
    /// does for an operation that did not fail.
    pub error: Option<String>,
}

/// The body of the request that exports `spans`, made by the scope `retry` of `version`, for
/// the resource of `resource`.
pub fn request(resource: &[(String, String)], version: &str, spans: &[Span]) -> String {
    let resource_attributes: Vec<String> = resource
        .iter()
        .map(|(k, v)| attribute(k, &Value::Str(v.clone())))
        .collect();
    let scope = Obj::new().str("name", "retry").str("version", version);
    let spans: Vec<String> = spans.iter().map(span).collect();
    let scope_spans = Obj::new().obj("scope", scope).raw("spans", &array(&spans));
    let resource_spans = Obj::new()
        .obj(
            "resource",
            Obj::new().raw("attributes", &array(&resource_attributes)),
        )
        .raw("scopeSpans", &array(&[scope_spans.finish()]));
    Obj::new()
        .raw("resourceSpans", &array(&[resource_spans.finish()]))
        .finish()
}

fn span(s: &Span) -> String {
    let mut obj = Obj::new()
        .str("traceId", &s.trace_id.hex())
        .str("spanId", &s.span_id.hex());
    if let Some(state) = &s.trace_state {
        obj = obj.str("traceState", state);
    }
    if let Some(parent) = s.parent {
        obj = obj.str("parentSpanId", &parent.hex());
    }
    let attributes: Vec<String> = s.attributes.iter().map(|(k, v)| attribute(k, v)).collect();
    obj = obj
        .str("name", &s.name)
        .num("kind", KIND_INTERNAL)
        .str("startTimeUnixNano", &nanos(s.start))
        .str("endTimeUnixNano", &nanos(s.end.max(s.start)))
        .raw("attributes", &array(&attributes));
    if let Some(message) = &s.error {
        obj = obj.obj(
            "status",
            Obj::new().num("code", STATUS_ERROR).str("message", message),
        );
    }
    obj.finish()
}

fn attribute(key: &str, value: &Value) -> String {
    let value = match value {
        Value::Str(s) => Obj::new().str("stringValue", s),
        Value::Int(n) => Obj::new().str("intValue", &n.to_string()),
    };
    Obj::new().str("key", key).obj("value", value).finish()
}

fn array(items: &[String]) -> String {
    format!("[{}]", items.join(","))
}

/// `at` in nanoseconds since the epoch, as a string; 0 before it.
fn nanos(at: SystemTime) -> String {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_span_is_written_as_otlp_json() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        let s = Span {
            trace_id: TraceId([0xab; 16]),
            span_id: SpanId([1; 8]),
            parent: Some(SpanId([2; 8])),
            trace_state: Some("k=v".into()),
            name: "try".into(),
            start,
            end: start + Duration::from_millis(5),
            attributes: vec![
                ("process.exit.code", Value::Int(3)),
                ("error.type", Value::Str("3".into())),
            ],
            error: Some("exit 3".into()),
        };
        let body = request(&[("service.name".into(), "retry".into())], "1.0", &[s]);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let rs = &v["resourceSpans"][0];
        assert_eq!(
            rs["resource"]["attributes"][0]["value"]["stringValue"],
            "retry"
        );
        let span = &rs["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "ab".repeat(16));
        assert_eq!(span["spanId"], "0101010101010101");
        assert_eq!(span["parentSpanId"], "0202020202020202");
        assert_eq!(span["traceState"], "k=v");
        assert_eq!(span["kind"], 1);
        assert_eq!(span["startTimeUnixNano"], "1700000000123456789");
        assert_eq!(span["endTimeUnixNano"], "1700000000128456789");
        assert_eq!(span["attributes"][0]["key"], "process.exit.code");
        assert_eq!(span["attributes"][0]["value"]["intValue"], "3");
        assert_eq!(span["status"]["code"], 2);
        assert_eq!(rs["scopeSpans"][0]["scope"]["name"], "retry");
    }
}
