//! The quota's arithmetic has two twins: `store::quota::apply` in Rust (the bucket of
//! `policy::quota` and the throttle of `policy::throttle`, run by the file store under its lock)
//! and the Lua script that Redis runs alone (`store::redis::SCRIPT`). Both take the same
//! operations; this test drives them with the same random sequences (deposits, takes, peeks and
//! counts, accepted and refused tries, draws, throttles of several windows, floors above 0, the
//! clock stepping on, jumping windows ahead and going back) and compares every answer and every
//! state exactly: the tokens to the last bit, the throttle's counters, its figures and `p`.
//!
//! The script reads the server's clock; here it reads the sequence's clock from two more
//! arguments instead, the one line of it that this test changes. The server is the test's own
//! `redis-server`: without one the test says so loudly and passes, unless RETRY_REQUIRE_REDIS=1.

use crate::common::redis_server::Server;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use retry::policy::quota::{Bucket, QuotaParams};
use retry::policy::throttle::{Counted, ThrottleSpec, Window};
use retry::store::quota::{Applied, Exchange, Op, Throttled, apply};
use retry::store::redis::{SCRIPT, script_arguments};

/// The line of the script that reads the server's clock, and what the test puts in its place.
const CLOCK: &str = "local time = redis.call('TIME')";
const GIVEN_CLOCK: &str = "local time = {ARGV[7], ARGV[8]}";

const SEQUENCES: u64 = 60;
const STEPS: usize = 40;
const T0: u64 = 1_764_480_000_000;

#[test]
fn the_rust_and_lua_twins_of_the_quota_and_throttle_answer_alike() {
    assert_eq!(
        SCRIPT.matches(CLOCK).count(),
        1,
        "the script reads TIME once"
    );
    let Some(server) = Server::start("twins", &[]) else {
        return;
    };
    let script = SCRIPT.replace(CLOCK, GIVEN_CLOCK);
    let mut redis = Resp::connect(server.port);
    let mut seen = Seen::default();
    for seq in 0..SEQUENCES {
        run_sequence(&mut redis, &script, seq, &mut seen);
    }
    // The sequences reach every branch worth comparing.
    assert!(seen.held > 20 && seen.admitted > 100, "{seen:?}");
    assert!(seen.refused > 20 && seen.windows_moved > 20, "{seen:?}");
}

/// What the sequences came to, counted to show that they reach every branch.
#[derive(Debug, Default)]
struct Seen {
    /// Tries held back by the throttle, and admitted by it.
    held: usize,
    admitted: usize,
    /// Retries refused for want of a token.
    refused: usize,
    /// Steps after which the throttle's current slot had moved on.
    windows_moved: usize,
}

/// One sequence on a fresh key: each step through both twins, compared.
fn run_sequence(redis: &mut Resp, script: &str, seq: u64, seen: &mut Seen) {
    let mut rng = SplitMix(0x7715_0000 + seq);
    let params = QuotaParams {
        ratio: *rng.pick(&[0.0, 0.1, 0.2, 0.5, 1.0]),
        floor: *rng.pick(&[0.0, 0.25, 1.0, 3.0]),
        cap: *rng.pick(&[1.0, 2.0, 5.0, 10.0]),
    };
    let throttled = seq % 4 != 0;
    let key = format!("twin:{seq}");
    let (mut bucket, mut window): (Option<Bucket>, Window) = (None, Window::default());
    let mut now = T0 + rng.below(1000);
    for step in 0..STEPS {
        now = rng.step_clock(now);
        // Now and then exactly where the throttle's slot ends, or the one after it.
        if window.start_ms != 0 && rng.below(8) == 0 {
            now = window.start_ms + window.window_ms * (1 + rng.below(2));
        }
        let op = *rng.pick(&[Op::Deposit, Op::Take, Op::Take, Op::Peek, Op::Count]);
        let throttle = throttled.then(|| Throttled {
            spec: ThrottleSpec {
                k: *rng.pick(&[1.1, 1.5, 2.0, 3.0]),
                window: Duration::from_millis(*rng.pick(&[1000, 2000, 5000, 120_000])),
                max: *rng.pick(&[0.5, 0.95, 1.0]),
            },
            counted: *rng.pick(&[Some(Counted::Accepted), Some(Counted::Refused), None]),
            draw: rng.unit(),
        });
        let exchange = Exchange { op, throttle };
        let mut b = bucket.unwrap_or_else(|| Bucket::full(&params, now));
        let slot = window.start_ms;
        let rust = apply(&exchange, &params, &mut b, &mut window, now);
        match rust.admission {
            Some(a) if a.held => seen.held += 1,
            Some(_) => seen.admitted += 1,
            None => {}
        }
        seen.refused += usize::from(op == Op::Take && !rust.granted);
        seen.windows_moved += usize::from(slot != 0 && window.start_ms != slot);
        if op != Op::Peek {
            bucket = Some(b);
        }
        let lua = redis.eval(script, &key, &exchange, &params, now);
        let at = format!("sequence {seq}, step {step}: {exchange:?} at {now} with {params:?}");
        compare(&rust, &lua, &at);
        let stored = redis.hash(&key);
        if let Some(b) = bucket {
            assert_eq!(field(&stored, "tokens"), b.tokens, "{at}: stored tokens");
            assert_eq!(field(&stored, "at"), b.at_ms as f64, "{at}: stored time");
        }
        if throttled && stored.iter().any(|(k, _)| k == "ts") {
            let counters = [
                ("ts", window.start_ms),
                ("tr", window.requests),
                ("ta", window.accepts),
                ("tpr", window.prev_requests),
                ("tpa", window.prev_accepts),
                ("th", window.held),
                ("tph", window.prev_held),
                ("tw", window.window_ms),
            ];
            for (name, value) in counters {
                assert_eq!(field(&stored, name), value as f64, "{at}: stored {name}");
            }
        }
    }
}

/// The script's answer `{granted, tokens, held, requests, accepts, p, window, held requests}`
/// against the Rust twin's.
fn compare(rust: &Applied, lua: &[String], at: &str) {
    let num = |i: usize| -> f64 { lua[i].parse().unwrap_or_else(|_| panic!("{at}: {lua:?}")) };
    assert_eq!(num(0) == 1.0, rust.granted, "{at}: granted; lua {lua:?}");
    assert_eq!(num(1), rust.tokens, "{at}: tokens; lua {lua:?}");
    match rust.admission {
        None => assert_eq!(num(2), -1.0, "{at}: the script decided; lua {lua:?}"),
        Some(a) => {
            assert_eq!(num(2) == 1.0, a.held, "{at}: held; lua {lua:?}, rust {a:?}");
            assert_eq!(num(3), a.figures.requests, "{at}: requests; lua {lua:?}");
            assert_eq!(num(4), a.figures.accepts, "{at}: accepts; lua {lua:?}");
            assert_eq!(num(5), a.p, "{at}: p; lua {lua:?}, rust {a:?}");
            assert_eq!(
                num(6),
                a.window.as_millis() as f64,
                "{at}: window; lua {lua:?}"
            );
            assert_eq!(num(7), a.figures.held, "{at}: held requests; lua {lua:?}");
        }
    }
}

fn field(hash: &[(String, String)], name: &str) -> f64 {
    let (_, value) = hash
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no {name} in {hash:?}"));
    value.parse().unwrap()
}

/// splitmix64: the same sequences on every machine.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in [0, 1), 53 bits.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len() as u64) as usize]
    }

    /// The clock's next reading: mostly on by up to 3 s, sometimes by windows, sometimes back
    /// a little or by more than a window (a clock that was ahead, then set right).
    fn step_clock(&mut self, now: u64) -> u64 {
        match self.below(20) {
            0 => now.saturating_sub(self.below(800)),
            1 => now.saturating_sub(130_000 + self.below(10_000)),
            2 => now + 2 * 120_000 + self.below(5000),
            3 => now + 5000 + self.below(10_000),
            _ => now + self.below(3000),
        }
    }
}

/// A plain RESP connection to the test's server.
struct Resp {
    reader: BufReader<TcpStream>,
    stream: TcpStream,
}

impl Resp {
    fn connect(port: u16) -> Resp {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to redis-server");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Resp {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
        }
    }

    fn command(&mut self, words: &[&[u8]]) -> Reply {
        let mut out = format!("*{}\r\n", words.len()).into_bytes();
        for w in words {
            out.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
            out.extend_from_slice(w);
            out.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&out).unwrap();
        self.reply()
    }

    fn reply(&mut self) -> Reply {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" => Reply::Text(rest.to_string()),
            ":" => Reply::Text(rest.to_string()),
            "-" => panic!("redis: {rest}"),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Reply::Nil;
                }
                let mut buf = vec![0; n as usize + 2];
                std::io::Read::read_exact(&mut self.reader, &mut buf).unwrap();
                buf.truncate(n as usize);
                Reply::Text(String::from_utf8(buf).unwrap())
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                Reply::List((0..n.max(0)).map(|_| self.reply()).collect())
            }
            _ => panic!("unexpected reply {line:?}"),
        }
    }

    /// The script run on `exchange` at `now_ms`, as the Redis store calls it, with the clock
    /// given: its answer as text.
    fn eval(
        &mut self,
        script: &str,
        key: &str,
        exchange: &Exchange,
        params: &QuotaParams,
        now_ms: u64,
    ) -> Vec<String> {
        // The arguments as the Redis store sends them, then the clock.
        let mut args = script_arguments(params, 600_000, exchange);
        args.push((now_ms / 1000).to_string());
        args.push(((now_ms % 1000) * 1000).to_string());
        let mut words: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), b"1", key.as_bytes()];
        words.extend(args.iter().map(|a| a.as_bytes()));
        match self.command(&words) {
            Reply::List(items) => items.into_iter().map(Reply::text).collect(),
            other => panic!("the script answered {other:?}"),
        }
    }

    fn hash(&mut self, key: &str) -> Vec<(String, String)> {
        let Reply::List(items) = self.command(&[b"HGETALL", key.as_bytes()]) else {
            panic!("HGETALL answered no list");
        };
        let items: Vec<String> = items.into_iter().map(Reply::text).collect();
        items
            .chunks(2)
            .map(|kv| (kv[0].clone(), kv[1].clone()))
            .collect()
    }
}

#[derive(Debug)]
enum Reply {
    Text(String),
    Nil,
    List(Vec<Reply>),
}

impl Reply {
    fn text(self) -> String {
        match self {
            Reply::Text(t) => t,
            other => panic!("expected text, got {other:?}"),
        }
    }
}
