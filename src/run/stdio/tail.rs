//! The last bytes a try wrote, kept for the `--junit` report (docs/ci.md#junit-reports) and a
//! failure's `--ping` (docs/dashboards.md#pings): both of its streams in the order `retry` read
//! them, at most [`TAIL_MOST`] bytes whatever the try writes, in a ring that never grows past it.

use crate::report::event::OutputTail;

/// The most of a try's output kept: what the report shows of its last try.
pub const TAIL_MOST: usize = 64 * 1024;

/// The last [`TAIL_MOST`] bytes of a try's output, and whether more came before them.
#[derive(Debug, Default)]
pub struct Tail {
    ring: Vec<u8>,
    /// Where the next byte goes, once the ring is full.
    at: usize,
    cut: bool,
}

impl Tail {
    /// Adds `data`, the next bytes the try wrote, dropping the oldest past [`TAIL_MOST`].
    pub fn feed(&mut self, data: &[u8]) {
        let data = match data.len().checked_sub(TAIL_MOST) {
            Some(skip) if skip > 0 => {
                self.cut = true;
                self.ring.clear();
                self.at = 0;
                &data[skip..]
            }
            _ => data,
        };
        let room = TAIL_MOST - self.ring.len();
        let (fill, wrap) = data.split_at(room.min(data.len()));
        self.ring.extend_from_slice(fill);
        for &b in wrap {
            self.cut = true;
            self.ring[self.at] = b;
            self.at = (self.at + 1) % TAIL_MOST;
        }
    }

    /// What was kept, oldest first.
    pub fn finish(self) -> OutputTail {
        let mut bytes = self.ring;
        bytes.rotate_left(self.at);
        OutputTail {
            bytes,
            cut: self.cut,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_bytes_are_kept_in_order_and_no_more() {
        let mut tail = Tail::default();
        tail.feed(b"abc");
        tail.feed(b"def");
        let kept = tail.finish();
        assert_eq!((kept.bytes.as_slice(), kept.cut), (&b"abcdef"[..], false));
        let mut tail = Tail::default();
        let all: Vec<u8> = (0..3 * TAIL_MOST + 17).map(|i| (i % 251) as u8).collect();
        for chunk in all.chunks(1000) {
            tail.feed(chunk);
        }
        assert!(tail.ring.capacity() <= 2 * TAIL_MOST);
        let kept = tail.finish();
        assert!(kept.cut);
        assert_eq!(kept.bytes, all[all.len() - TAIL_MOST..]);
        // One write larger than the ring.
        let mut tail = Tail::default();
        tail.feed(b"x");
        tail.feed(&all);
        let kept = tail.finish();
        assert_eq!(kept.bytes, all[all.len() - TAIL_MOST..]);
    }
}
