//! A fleet's history on Redis (docs/flaky.md#a-fleets-history-on-redis): the end of every run
//! of NAME on any machine, on the stream `retry:history:{NAME}`, capped, read by `--stats`.

use std::time::SystemTime;

use crate::store::fleet::{Fleet, FleetError};
use crate::store::fleet_replies::fields_of;
use crate::store::redis::resp::Reply;

/// The most runs a fleet's history keeps: past it, Redis trims the oldest (`MAXLEN ~`, so a
/// little more are kept until a whole node of the stream can go).
pub const HISTORY_CAP: u64 = 1_000_000;

/// The runs read from a history stream at a time.
const HISTORY_PAGE: usize = 5000;

impl Fleet {
    fn history_key(&self) -> String {
        format!("retry:history:{{{}}}", self.name)
    }

    /// Adds the history line of a run that ended on `host`.
    pub fn add_run(&mut self, line: &str, host: &str) -> Result<(), FleetError> {
        let key = self.history_key();
        let cap = HISTORY_CAP.to_string();
        let words: [&[u8]; 10] = [
            b"XADD",
            key.as_bytes(),
            b"MAXLEN",
            b"~",
            cap.as_bytes(),
            b"*",
            b"host",
            host.as_bytes(),
            b"line",
            line.as_bytes(),
        ];
        // Sent once: a second XADD would add the run twice.
        let reply = self
            .requests_once_or_twice(&[words.to_vec()], false)?
            .pop()
            .ok_or_else(|| FleetError::new("Redis sent no reply"))?;
        match reply {
            Reply::Bulk(Some(_)) => Ok(()),
            other => Err(self.odd(&other)),
        }
    }

    /// Drops the runs of the history added before `cutoff` (an entry's id is the server's
    /// time when the run's end was added): how many went, and how many are left.
    pub fn prune_history(&mut self, cutoff: SystemTime) -> Result<(u64, u64), FleetError> {
        let key = self.history_key();
        let ms = cutoff
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
            .to_string();
        let dropped = match self.request(&[b"XTRIM", key.as_bytes(), b"MINID", ms.as_bytes()])? {
            Reply::Int(n) => n.max(0) as u64,
            other => return Err(self.odd(&other)),
        };
        match self.request(&[b"XLEN", key.as_bytes()])? {
            Reply::Int(n) => Ok((dropped, n.max(0) as u64)),
            other => Err(self.odd(&other)),
        }
    }

    /// Every run of the history, oldest first: its host and its line.
    pub fn runs(&mut self) -> Result<Vec<(String, String)>, FleetError> {
        let mut runs = Vec::new();
        let mut from = "-".to_string();
        loop {
            let key = self.history_key();
            let count = HISTORY_PAGE.to_string();
            let reply = self.request(&[
                b"XRANGE",
                key.as_bytes(),
                from.as_bytes(),
                b"+",
                b"COUNT",
                count.as_bytes(),
            ])?;
            let Reply::Array(Some(items)) = reply else {
                return Err(self.odd(&reply));
            };
            let more = items.len() == HISTORY_PAGE;
            let mut last = None;
            for item in items {
                let (id, fields) = fields_of(item)
                    .ok_or_else(|| FleetError::new("Redis sent a stream entry that is not one"))?;
                let host = fields
                    .iter()
                    .find(|(k, _)| k == "host")
                    .map(|(_, v)| v.clone());
                if let Some((_, line)) = fields.into_iter().find(|(k, _)| k == "line") {
                    runs.push((host.unwrap_or_default(), line));
                }
                last = Some(id);
            }
            match (more, last) {
                (true, Some(last)) => {
                    from = self.after(&last)?;
                }
                _ => break,
            }
        }
        Ok(runs)
    }
}
