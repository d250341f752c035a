//! What Redis answers the fleet's store (`store/fleet.rs`), read: the entries of a stream, the
//! replies of its scripts, an entry id to go on reading from, a failed exchange in words, and the
//! error of the fleet's store with its kind.

use crate::store::redis::resp::{ExchangeError, Reply};

/// Why the fleet's store could not be used, on one line that never holds the password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetError {
    pub text: String,
    pub kind: FleetErrorKind,
}

/// What a caller may do about a [`FleetError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetErrorKind {
    /// A reply was longer than retry reads of one: a page of records too large, to ask for
    /// again in smaller pages.
    TooLarge,
    /// The server refused the user or the password (`WRONGPASS`, `NOAUTH`, `NOPERM` and the
    /// like): a misconfiguration, not an outage, never to be called unreachable.
    Refused,
    /// Anything else.
    Other,
}

impl FleetError {
    /// The server at `server` refused the user or the password, with the code word `code`.
    pub fn refused(server: &str, code: &str) -> FleetError {
        FleetError {
            text: format!(
                "Redis at {server} {}: a misconfiguration, not an outage",
                crate::store::redis::refusal_words(code)
            ),
            kind: FleetErrorKind::Refused,
        }
    }

    /// An error with nothing to do about it but say it.
    pub fn new(text: impl Into<String>) -> FleetError {
        FleetError {
            text: text.into(),
            kind: FleetErrorKind::Other,
        }
    }
}

impl std::fmt::Display for FleetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// The most bytes one reply may take: a page of records of the usual few hundred bytes each
/// takes under a megabyte; a server sending more than this is refused, not believed.
pub const MOST_REPLY: usize = 64 << 20;

/// The words of a script's array reply, each a text or a number.
pub fn texts(reply: &Reply) -> Option<Vec<String>> {
    let Reply::Array(Some(items)) = reply else {
        return None;
    };
    items
        .iter()
        .map(|i| match i {
            Reply::Bulk(Some(b)) => String::from_utf8(b.clone()).ok(),
            Reply::Int(n) => Some(n.to_string()),
            _ => None,
        })
        .collect()
}

/// A script's `{count, {ids...}}` reply.
pub fn count_and_ids(reply: &Reply) -> Option<(u64, Vec<String>)> {
    let Reply::Array(Some(items)) = reply else {
        return None;
    };
    let [Reply::Int(n), ids] = items.as_slice() else {
        return None;
    };
    let ids = match ids {
        Reply::Array(Some(ids)) => ids
            .iter()
            .map(|i| match i {
                Reply::Bulk(Some(b)) => String::from_utf8(b.clone()).ok(),
                _ => None,
            })
            .collect::<Option<Vec<String>>>()?,
        // An empty Lua table comes back as an empty array.
        _ => Vec::new(),
    };
    Some(((*n).max(0) as u64, ids))
}

/// One entry of an XRANGE reply as its id and its fields, each a pair of texts.
pub fn fields_of(item: Reply) -> Option<(String, Vec<(String, String)>)> {
    let Reply::Array(Some(mut parts)) = item else {
        return None;
    };
    let Some(Reply::Array(Some(fields))) = parts.pop() else {
        return None;
    };
    let Some(Reply::Bulk(Some(id))) = parts.pop() else {
        return None;
    };
    // The bytes are taken, not copied: a page holds thousands of records.
    let text = |r: Reply| match r {
        Reply::Bulk(Some(b)) => String::from_utf8(b).ok(),
        _ => None,
    };
    let mut pairs = Vec::with_capacity(fields.len() / 2);
    let mut items = fields.into_iter();
    while let Some(name) = items.next() {
        pairs.push((text(name)?, text(items.next()?)?));
    }
    Some((String::from_utf8(id).ok()?, pairs))
}

/// An exchange's failure in words, without the quota's wording of a reply too large.
pub fn exchange_words(e: &ExchangeError) -> String {
    match e {
        ExchangeError::TooLarge => format!(
            "its reply is longer than the {} MiB retry reads of one",
            MOST_REPLY >> 20
        ),
        other => other.to_string(),
    }
}

/// The entry id just after `id` (`MS-SEQ`), to go on reading a stream from.
pub fn after(id: &str) -> Option<String> {
    let (ms, seq) = id.split_once('-')?;
    let ms: u64 = ms.parse().ok()?;
    let seq: u64 = seq.parse().ok()?;
    Some(match seq.checked_add(1) {
        Some(seq) => format!("{ms}-{seq}"),
        None => format!("{}-0", ms.checked_add(1)?),
    })
}

/// One entry of an XRANGE reply: `[id, [field, value, ...]]`, read as its id, run id, host and
/// record line.
pub fn entry(item: Reply) -> Option<(String, String, String, String)> {
    let (id, fields) = fields_of(item)?;
    let (mut run, mut host, mut record) = (None, None, None);
    for (name, value) in fields {
        match name.as_str() {
            "id" => run = Some(value),
            "host" => host = Some(value),
            "record" => record = Some(value),
            _ => {}
        }
    }
    Some((id, run?, host.unwrap_or_default(), record?))
}
