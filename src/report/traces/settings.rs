//! What the environment asks of a run's traces (docs/dashboards.md#traces), read as
//! OpenTelemetry's SDKs read it: `TRACEPARENT`, the OTLP exporter's `OTEL_EXPORTER_OTLP_*`
//! variables (the `_TRACES_` one of each over the general one), `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_EXPORTER` and `OTEL_SDK_DISABLED`. Read through the
//! reader handed in: nothing here reads the environment itself.
//!
//! A run with neither `TRACEPARENT` nor an endpoint reads four variables and nothing more.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::time::Duration;

/// How long the export at the run's end may take when `OTEL_EXPORTER_OTLP_TIMEOUT` does not
/// say: a run's end waits for it.
pub const DEFAULT_WITHIN: Duration = Duration::from_secs(2);

/// The longest export `OTEL_EXPORTER_OTLP_TIMEOUT` may ask for: OpenTelemetry's own default.
pub const MOST_WITHIN: Duration = Duration::from_secs(10);

/// The one encoding sent.
pub const PROTOCOL: &str = "http/json";

/// Where and how the spans are sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    /// The URL posted to: the traces endpoint as given, or the endpoint with `/v1/traces`.
    pub url: String,
    /// The headers asked for (`OTEL_EXPORTER_OTLP_HEADERS`): secrets, never printed.
    pub headers: Vec<(String, String)>,
    /// The whole export's deadline.
    pub within: Duration,
    /// The resource's attributes, `service.name` first.
    pub resource: Vec<(String, String)>,
}

/// What a run does with traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Nothing: no `TRACEPARENT`, no endpoint, or the SDK disabled. The tries inherit
    /// `retry`'s environment as it is.
    Nothing,
    /// Each try is a span of the run's trace, its `TRACEPARENT` set; the spans are sent with
    /// `export`, when there is one. `note` says why a configured export sends nothing or
    /// sends less than asked.
    Trace {
        export: Option<Export>,
        note: Option<Note>,
    },
}

/// A setting that is not followed, as a value: the variable, and why (never its value when
/// it may hold a secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub variable: &'static str,
    pub why: String,
}

/// The reader of one variable: `None` when unset.
pub type Var<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// Reads the plan of a run from `var`.
pub fn plan(var: Var<'_>) -> Plan {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Plan::Nothing;
    }
    let endpoint = match set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        Some(url) => Some(("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", lossy(url))),
        None => set("OTEL_EXPORTER_OTLP_ENDPOINT").map(|base| {
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                with_traces_path(&lossy(base)),
            )
        }),
    };
    let Some((variable, url)) = endpoint else {
        return match set("TRACEPARENT") {
            Some(_) => Plan::Trace {
                export: None,
                note: None,
            },
            None => Plan::Nothing,
        };
    };
    match export(variable, url, &set) {
        Ok((export, note)) => Plan::Trace { export, note },
        Err(note) => Plan::Trace {
            export: None,
            note: Some(note),
        },
    }
}

/// The export to `url` (named by `variable`), as the other variables shape it: `None` when
/// `OTEL_TRACES_EXPORTER` says `none`; an error when nothing may be sent.
fn export(
    variable: &'static str,
    url: String,
    set: &dyn Fn(&str) -> Option<OsString>,
) -> Result<(Option<Export>, Option<Note>), Note> {
    if let Some(exporters) = set("OTEL_TRACES_EXPORTER") {
        let exporters = lossy(exporters);
        let names: Vec<&str> = exporters.split(',').map(str::trim).collect();
        if !names.iter().any(|n| n.eq_ignore_ascii_case("otlp")) {
            if names.iter().all(|n| n.eq_ignore_ascii_case("none")) {
                return Ok((None, None));
            }
            return Err(Note {
                variable: "OTEL_TRACES_EXPORTER",
                why: format!(
                    "{} is not an exporter retry has (it has otlp): no spans are sent",
                    crate::text::printable(&exporters)
                ),
            });
        }
    }
    let (protocol_var, protocol) = first_of(
        set,
        [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ],
    );
    if let Some(protocol) = protocol.filter(|p| p.trim() != PROTOCOL) {
        return Err(Note {
            variable: protocol_var,
            why: format!(
                "retry sends spans as {PROTOCOL} only, not {}: no spans are sent",
                crate::text::printable(&protocol)
            ),
        });
    }
    match crate::http::check_url(&url) {
        Ok(()) => {}
        // Not seen in the process list here, but kept out of every URL `retry` sends to.
        Err(crate::http::BadUrl::Credentials) => {
            return Err(Note {
                variable,
                why: "the URL holds a user or password, which retry never sends in a URL: \
                      put them in OTEL_EXPORTER_OTLP_HEADERS (Authorization=Basic%20...); no \
                      spans are sent"
                    .into(),
            });
        }
        Err(bad) => {
            return Err(Note {
                variable,
                why: format!("{bad}: no spans are sent"),
            });
        }
    }
    let (headers, mut note) = headers(set);
    let (within, timeout_note) = within(set);
    note = note.or(timeout_note);
    let export = Export {
        url,
        headers,
        within,
        resource: resource(set),
    };
    Ok((Some(export), note))
}

/// The endpoint's URL for traces, as OTLP/HTTP makes it of a base URL: `/v1/traces` after
/// its path, with one `/` between.
pub fn with_traces_path(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

/// The first of `names` that is set, and its value.
fn first_of(
    set: &dyn Fn(&str) -> Option<OsString>,
    names: [&'static str; 2],
) -> (&'static str, Option<String>) {
    for name in names {
        if let Some(value) = set(name) {
            return (name, Some(lossy(value)));
        }
    }
    (names[1], None)
}

/// The headers of `OTEL_EXPORTER_OTLP_HEADERS`, those of `..._TRACES_HEADERS` over them by
/// name; an entry that is not `NAME=VALUE` with a name HTTP takes is left out, with a note
/// that names its place, never its value.
fn headers(set: &dyn Fn(&str) -> Option<OsString>) -> (Vec<(String, String)>, Option<Note>) {
    // By name, so that many entries cost no more than their count: a variable can hold
    // tens of thousands.
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    let mut note = None;
    for variable in [
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    ] {
        let Some(text) = set(variable) else { continue };
        for (i, (name, value)) in pairs(&lossy(text)).into_iter().enumerate() {
            let name = name.to_ascii_lowercase();
            let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            let valid = !name.is_empty()
                && name.chars().all(token)
                && !value.chars().any(|c| c.is_control() && c != '\t');
            if !valid {
                note = note.or(Some(Note {
                    variable,
                    why: format!("entry {} is not NAME=VALUE: it is left out", i + 1),
                }));
                continue;
            }
            headers.insert(name, value);
        }
    }
    (headers.into_iter().collect(), note)
}

/// The export's deadline: `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or `OTEL_EXPORTER_OTLP_TIMEOUT`,
/// in milliseconds, at most [`MOST_WITHIN`] (0, which some SDKs read as no limit, is that
/// most); else [`DEFAULT_WITHIN`].
fn within(set: &dyn Fn(&str) -> Option<OsString>) -> (Duration, Option<Note>) {
    let (variable, value) = first_of(
        set,
        [
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ],
    );
    let Some(value) = value else {
        return (DEFAULT_WITHIN, None);
    };
    match value.trim().parse::<u64>() {
        Ok(0) => (MOST_WITHIN, None),
        Ok(ms) => (Duration::from_millis(ms).min(MOST_WITHIN), None),
        Err(_) => (
            DEFAULT_WITHIN,
            Some(Note {
                variable,
                why: format!(
                    "{} is not a whole number of milliseconds: the export may take {}",
                    crate::text::printable(&value),
                    crate::duration::hms(DEFAULT_WITHIN)
                ),
            }),
        ),
    }
}

/// The resource's attributes: `service.name` (`OTEL_SERVICE_NAME`, else the one of
/// `OTEL_RESOURCE_ATTRIBUTES`, else `retry`), then the others of `OTEL_RESOURCE_ATTRIBUTES`,
/// then what names `retry` as the maker of the spans.
fn resource(set: &dyn Fn(&str) -> Option<OsString>) -> Vec<(String, String)> {
    let given = set("OTEL_RESOURCE_ATTRIBUTES")
        .map(|text| pairs(&lossy(text)))
        .unwrap_or_default();
    let service = set("OTEL_SERVICE_NAME")
        .map(lossy)
        .or_else(|| {
            given
                .iter()
                .find(|(k, _)| k == "service.name")
                .map(|(_, v)| v.clone())
        })
        .unwrap_or_else(|| "retry".to_string());
    let mut seen = BTreeSet::from(["service.name".to_string()]);
    let mut out = vec![("service.name".to_string(), service)];
    let ours = [
        ("telemetry.sdk.name", "retry"),
        ("telemetry.sdk.language", "rust"),
        ("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
    ];
    let ours = ours.map(|(k, v)| (k.to_string(), v.to_string()));
    // The first of a key given twice, as the `service.name` of the variable is taken.
    for (key, value) in given.into_iter().chain(ours) {
        if !key.is_empty() && seen.insert(key.clone()) {
            out.push((key, value));
        }
    }
    out
}

/// `key=value` pairs separated by commas, as the W3C Baggage format writes them and
/// OpenTelemetry's variables use it: spaces around each trimmed, each value percent-decoded.
/// An entry without `=` is a pair with an empty key.
fn pairs(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter(|entry| !entry.trim().is_empty())
        .map(|entry| match entry.split_once('=') {
            Some((k, v)) => (k.trim().to_string(), percent_decoded(v.trim())),
            None => (String::new(), String::new()),
        })
        .collect()
}

/// `text` with each `%XX` replaced by its byte; a `%` not followed by two hex digits stays.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn lossy(value: OsString) -> String {
    value.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(vars: &[(&str, &str)]) -> Plan {
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        plan(&move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    fn export_of(vars: &[(&str, &str)]) -> Export {
        match plan_of(vars) {
            Plan::Trace {
                export: Some(e),
                note: None,
            } => e,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nothing_is_traced_without_a_traceparent_or_an_endpoint() {
        assert_eq!(plan_of(&[]), Plan::Nothing);
        assert_eq!(plan_of(&[("TRACEPARENT", "")]), Plan::Nothing);
        assert_eq!(plan_of(&[("OTEL_SERVICE_NAME", "x")]), Plan::Nothing);
        let disabled = [
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("TRACEPARENT", "00-x"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
        ];
        assert_eq!(plan_of(&disabled), Plan::Nothing);
        let propagated = Plan::Trace {
            export: None,
            note: None,
        };
        assert_eq!(plan_of(&[("TRACEPARENT", "anything")]), propagated);
    }

    #[test]
    fn the_endpoint_gets_v1_traces_and_the_traces_endpoint_is_taken_as_given() {
        let e = export_of(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318/")]);
        assert_eq!(e.url, "http://h:4318/v1/traces");
        assert_eq!(e.within, DEFAULT_WITHIN);
        let e = export_of(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://h/otlp")]);
        assert_eq!(e.url, "https://h/otlp/v1/traces");
        let e = export_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/x"),
        ]);
        assert_eq!(e.url, "http://t:1/x");
    }

    #[test]
    fn another_protocol_or_exporter_sends_nothing_with_one_note() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318");
        for (variable, value) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            ("OTEL_TRACES_EXPORTER", "zipkin"),
        ] {
            let Plan::Trace {
                export: None,
                note: Some(note),
            } = plan_of(&[endpoint, (variable, value)])
            else {
                panic!("{variable}={value}");
            };
            assert_eq!(note.variable, variable);
            assert!(note.why.contains(value), "{}", note.why);
        }
        let none = Plan::Trace {
            export: None,
            note: None,
        };
        assert_eq!(plan_of(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]), none);
        let json = [endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")];
        assert_eq!(export_of(&json).url, "http://h:4318/v1/traces");
    }

    #[test]
    fn headers_timeout_and_resource_are_read_as_opentelemetry_reads_them() {
        let e = export_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "Api-Key=a%20b, x=1"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x=2"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=a,deployment.environment=prod",
            ),
            ("OTEL_SERVICE_NAME", "nightly"),
        ]);
        assert_eq!(
            e.headers,
            [("api-key".into(), "a b".into()), ("x".into(), "2".into())]
        );
        assert_eq!(e.within, Duration::from_millis(250));
        assert_eq!(e.resource[0], ("service.name".into(), "nightly".into()));
        assert_eq!(
            e.resource[1],
            ("deployment.environment".into(), "prod".into())
        );
        let long = export_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "600000"),
        ]);
        assert_eq!(long.within, MOST_WITHIN);
        let e = export_of(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h")]);
        assert_eq!(e.resource[0], ("service.name".into(), "retry".into()));
    }

    #[test]
    fn a_bad_header_or_timeout_is_a_note_that_never_holds_a_header_value() {
        let Plan::Trace {
            export: Some(e),
            note: Some(note),
        } = plan_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "ok=1,secretvalue123,bad name=x",
            ),
        ])
        else {
            panic!()
        };
        assert_eq!(e.headers, [("ok".into(), "1".into())]);
        assert_eq!(note.why, "entry 2 is not NAME=VALUE: it is left out");
        let Plan::Trace {
            export: Some(e),
            note: Some(note),
        } = plan_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2s"),
        ])
        else {
            panic!()
        };
        assert_eq!(e.within, DEFAULT_WITHIN);
        assert_eq!(note.variable, "OTEL_EXPORTER_OTLP_TIMEOUT");
    }

    #[test]
    fn many_headers_and_resource_attributes_are_read_in_linear_time() {
        let many: String = (0..30_000).map(|i| format!("k{i}=v,")).collect();
        let started = std::time::Instant::now();
        let e = export_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h"),
            ("OTEL_EXPORTER_OTLP_HEADERS", &many),
            ("OTEL_RESOURCE_ATTRIBUTES", &many),
        ]);
        assert_eq!(e.headers.len(), 30_000);
        assert_eq!(e.resource.len(), 30_004);
        let took = started.elapsed();
        assert!(took < Duration::from_millis(500), "{took:?}");
    }

    #[test]
    fn an_endpoint_with_credentials_or_another_scheme_sends_nothing() {
        for url in ["http://u:p@h:4318", "grpc://h:4317", "h:4318"] {
            let plan = plan_of(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)]);
            let Plan::Trace {
                export: None,
                note: Some(note),
            } = plan
            else {
                panic!("{url}: {plan:?}")
            };
            assert!(!note.why.contains("u:p"), "{}", note.why);
        }
    }
}
