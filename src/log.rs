//! The log output of nemesis's own programs: a small `tracing` subscriber that writes one plain
//! line per event to standard error, filtered by `NEMESIS_LOG`.
//!
//! The library never installs it: a process's logging belongs to its program. `nemesis-run`,
//! `nemesis-bench` and the C ABI's `MPI_Init` call [`init`], which installs it only where no
//! global subscriber is set; a Rust application embedding the [`Endpoint`](crate::Endpoint)
//! installs its own subscriber (or calls [`init`]) before or after `Endpoint::init`, as it likes.
//!
//! `NEMESIS_LOG` is a comma-separated list of `LEVEL`, `TARGET=LEVEL` or `TARGET` (all levels of
//! that target), with levels `off`, `error`, `warn`, `info`, `debug`, `trace`: e.g. `debug`, or
//! `warn,nemesis::launch=debug`. The longest matching target wins (a target matches itself and
//! the modules under it); without one, the bare level; without either, `warn`. Lines carry no
//! colour codes, so a log piped through the launcher or written to a file reads as it does on a
//! terminal. Spans are not followed (nemesis emits none): their fields are not printed.

use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// The variable [`init`] reads its filter from.
pub use crate::contract::ENV_LOG as ENV;

/// Writes one line (the formatted text and a newline) to standard error in a single `write`.
///
/// `eprintln!` goes to the unbuffered stderr piece by piece (`"nemesis-run: "`, the argument, the
/// newline are separate writes), so a rank writing to the same terminal or pipe at that moment
/// lands in the middle of the launcher's line (CI saw `nemesis-run: ` followed by a rank's panic
/// message). A line under `PIPE_BUF` (4 KiB) written at once is never split by another writer.
pub fn line(args: fmt::Arguments<'_>) {
    let mut text = String::with_capacity(128);
    // Formatting into a `String` cannot fail but for a `Display` impl that reports an error.
    let _ = text.write_fmt(args);
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Waits until the reader of standard error has taken everything written to it, at most
/// `limit`: a pipe's unread bytes (`FIONREAD`) or a socket's unsent and unacknowledged ones
/// (`TIOCOUTQ`) reach zero; a terminal or a file took them at `write` already.
///
/// Before a process asks its process manager to end the job: Hydra's proxy exits at an abort
/// request without reading the rank's stderr pipe again, so a reason written just before it was
/// lost (about one run in twenty under load); once the pipe is empty the proxy has read the
/// reason, and it forwards what it read before it looks at the next event.
pub fn drain_stderr(limit: std::time::Duration) {
    // SAFETY: an all-zero `stat` is a valid value to be overwritten.
    let mut sb: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd 2 (maybe closed: then `fstat` fails), `sb` writable.
    if unsafe { libc::fstat(2, &mut sb) } != 0 {
        return;
    }
    let request = match sb.st_mode & libc::S_IFMT {
        libc::S_IFIFO => libc::FIONREAD,
        libc::S_IFSOCK => libc::TIOCOUTQ,
        _ => return,
    };
    let start = std::time::Instant::now();
    loop {
        let mut unread: libc::c_int = 0;
        // SAFETY: both requests write one `int` at the pointer.
        if unsafe { libc::ioctl(2, request, &mut unread) } != 0 || unread <= 0 || start.elapsed() >= limit {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// [`line`] with `format!` arguments: `say!("nemesis-run: rank {r} died")`.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::log::line(::std::format_args!($($arg)*))
    };
}

/// Installs the stderr logger filtered by `NEMESIS_LOG` as the process's global subscriber,
/// unless one is already set (by the application, or by an earlier call). Returns whether it
/// installed it. Directives it cannot read are reported on standard error and left out.
pub fn init() -> bool {
    if tracing::dispatcher::has_been_set() {
        return false;
    }
    let spec = std::env::var(ENV).unwrap_or_default();
    let (filter, bad) = Filter::parse(&spec);
    for b in bad {
        crate::say!(
            "nemesis: {ENV}: `{b}` is neither a level (off, error, warn, info, debug, trace) nor TARGET=LEVEL; left out"
        );
    }
    tracing::subscriber::set_global_default(Logger { filter, sink: Sink::Stderr }).is_ok()
}

/// Which events pass: per-target levels and a default.
#[derive(Clone, Debug, PartialEq)]
struct Filter {
    /// The level for targets no directive names.
    default: LevelFilter,
    /// `(target, level)`, longest target first.
    targets: Vec<(String, LevelFilter)>,
}

impl Filter {
    /// The filter of `spec`, and the directives it could not read.
    fn parse(spec: &str) -> (Filter, Vec<String>) {
        let mut f = Filter { default: LevelFilter::WARN, targets: Vec::new() };
        let mut bad = Vec::new();
        for d in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            match d.split_once('=') {
                Some((t, l)) => match level(l) {
                    Some(l) if valid_target(t.trim()) => f.targets.push((t.trim().to_owned(), l)),
                    _ => bad.push(d.to_owned()),
                },
                None => match level(d) {
                    Some(l) => f.default = l,
                    None if valid_target(d) => f.targets.push((d.to_owned(), LevelFilter::TRACE)),
                    None => bad.push(d.to_owned()),
                },
            }
        }
        // Longest first, so the first match is the most specific; a later directive for the
        // same target replaces an earlier one (the sort is stable, hence the reverse first).
        f.targets.reverse();
        f.targets.sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
        f.targets.dedup_by(|a, b| a.0 == b.0);
        (f, bad)
    }

    /// The level that applies to `target`.
    fn level_of(&self, target: &str) -> LevelFilter {
        let under = |t: &str| target == t || target.strip_prefix(t).is_some_and(|rest| rest.starts_with("::"));
        self.targets.iter().find(|(t, _)| under(t)).map_or(self.default, |&(_, l)| l)
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        *meta.level() <= self.level_of(meta.target())
    }

    /// The most verbose level any target gets.
    fn max(&self) -> LevelFilter {
        self.targets.iter().map(|&(_, l)| l).fold(self.default, LevelFilter::max)
    }
}

fn level(s: &str) -> Option<LevelFilter> {
    Some(match s.trim().to_ascii_lowercase().as_str() {
        "off" => LevelFilter::OFF,
        "error" => LevelFilter::ERROR,
        "warn" => LevelFilter::WARN,
        "info" => LevelFilter::INFO,
        "debug" => LevelFilter::DEBUG,
        "trace" => LevelFilter::TRACE,
        _ => return None,
    })
}

/// A module path such as `nemesis::launch` (what `tracing` uses as the default target).
fn valid_target(t: &str) -> bool {
    !t.is_empty()
        && t.split("::").all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-'))
}

/// Where lines go.
enum Sink {
    Stderr,
    #[cfg(test)]
    Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>),
}

/// The subscriber [`init`] installs.
struct Logger {
    filter: Filter,
    sink: Sink,
}

/// Span ids handed out (spans are not followed, but each gets its own id).
static NEXT_SPAN: AtomicU64 = AtomicU64::new(1);

impl Subscriber for Logger {
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        self.filter.enabled(meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.filter.max())
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        // ORDERING: Relaxed: only uniqueness matters.
        Id::from_u64(NEXT_SPAN.fetch_add(1, Ordering::Relaxed))
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let line = format_line(event, std::time::SystemTime::now());
        match &self.sink {
            // One write per line: lines of several threads do not mix.
            Sink::Stderr => {
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            }
            #[cfg(test)]
            Sink::Buffer(b) => b.lock().unwrap().extend_from_slice(line.as_bytes()),
        }
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// `HH:MM:SS.uuuuuu LEVEL target: message field=value ...` (UTC time of day), newline ended.
fn format_line(event: &Event<'_>, now: std::time::SystemTime) -> String {
    let meta = event.metadata();
    let us = now.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() % 86_400_000_000);
    let (s, frac) = (us / 1_000_000, us % 1_000_000);
    let mut line =
        format!("{:02}:{:02}:{:02}.{frac:06} {:>5} {}:", s / 3600, s / 60 % 60, s % 60, meta.level(), meta.target());
    let mut fields = Fields { message: String::new(), rest: String::new() };
    event.record(&mut fields);
    if !fields.message.is_empty() {
        line.push(' ');
        line.push_str(&fields.message);
    }
    line.push_str(&fields.rest);
    line.push('\n');
    line
}

/// An event's message and its other fields as ` name=value`.
struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &value);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn directives_parse_and_the_longest_target_wins() {
        let (f, bad) = Filter::parse("");
        assert_eq!((f.default, f.targets.len(), bad.len()), (LevelFilter::WARN, 0, 0));
        let (f, bad) = Filter::parse(" info, nemesis::launch=debug ,nemesis=error,nemesis_lmt, x=loud, !!");
        assert_eq!(bad, ["x=loud", "!!"]);
        assert_eq!(f.default, LevelFilter::INFO);
        assert_eq!(f.level_of("nemesis::launch::supervise"), LevelFilter::DEBUG);
        assert_eq!(f.level_of("nemesis::launch"), LevelFilter::DEBUG);
        assert_eq!(f.level_of("nemesis::endpoint"), LevelFilter::ERROR);
        assert_eq!(f.level_of("nemesis_lmt::transfer"), LevelFilter::TRACE);
        // A prefix that is not a whole module does not match.
        assert_eq!(f.level_of("nemesis_shm"), LevelFilter::INFO);
        assert_eq!(f.max(), LevelFilter::TRACE);
        // The last directive for a target counts; levels are case-blind.
        let (f, _) = Filter::parse("nemesis=DEBUG,nemesis=off");
        assert_eq!(f.level_of("nemesis"), LevelFilter::OFF);
        assert_eq!(f.max(), LevelFilter::WARN);
    }

    #[test]
    fn one_plain_line_per_event() {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let (filter, _) = Filter::parse("info,noisy=off");
        let logger = Logger { filter, sink: Sink::Buffer(buf.clone()) };
        tracing::subscriber::with_default(logger, || {
            tracing::warn!(rank = 3, line = "a b", "peer ended");
            tracing::info!(target: "nemesis::launch", "job ended");
            tracing::debug!("not shown");
            tracing::error!(target: "noisy", "not shown either");
            tracing::info_span!("a span", x = 1).in_scope(|| tracing::info!("inside"));
        });
        let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        let tail = |l: &str| l.split_once(' ').unwrap().1.to_owned();
        assert_eq!(tail(lines[0]), format!(" WARN {}: peer ended rank=3 line=\"a b\"", module_path!()));
        assert_eq!(tail(lines[1]), " INFO nemesis::launch: job ended");
        assert!(lines[2].ends_with(": inside"), "{text}");
        // The time of day: HH:MM:SS.uuuuuu.
        let time = lines[0].split(' ').next().unwrap();
        assert_eq!(time.len(), 15, "{time}");
        assert!(!text.contains('\x1b'), "{text:?}");
    }

    /// The child of [`abort_waits_until_stderr_is_read`]: writes a line to its stderr (a pipe
    /// the parent reads late), waits with [`drain_stderr`], prints how long on stdout.
    #[test]
    fn drain_stderr_child() {
        let Ok(limit) = std::env::var("NEMESIS_TEST_DRAIN_LIMIT_MS") else { return };
        line(format_args!("a reason the process manager must forward"));
        let t = std::time::Instant::now();
        drain_stderr(std::time::Duration::from_millis(limit.parse().unwrap()));
        println!("drained after {} ms", t.elapsed().as_millis());
    }

    /// Runs [`drain_stderr_child`] with its stderr a pipe first read after `read_after` (never:
    /// `None`); the milliseconds it waited and what it wrote to stderr.
    fn drain_child(limit_ms: u64, read_after: Option<u64>) -> (u128, String) {
        use std::io::Read as _;
        use std::process::{Command, Stdio};
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "log::tests::drain_stderr_child", "--nocapture", "--test-threads", "1"])
            .env("NEMESIS_TEST_DRAIN_LIMIT_MS", limit_ms.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = child.stderr.take().unwrap();
        let mut text = String::new();
        if let Some(ms) = read_after {
            std::thread::sleep(std::time::Duration::from_millis(ms));
            err.read_to_string(&mut text).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let ms = stdout.lines().find_map(|l| l.split("drained after ").nth(1)?.split(' ').next()?.parse().ok());
        (ms.unwrap_or_else(|| panic!("no time in {stdout:?}")), text)
    }

    #[test]
    fn abort_waits_until_stderr_is_read() {
        // Read after 300 ms: the child waited for it, well within its limit.
        let (ms, text) = drain_child(5000, Some(300));
        assert!((250..4000).contains(&ms), "waited {ms} ms");
        assert!(text.contains("a reason the process manager must forward"), "{text:?}");
        // Never read: the limit ends the wait.
        let (ms, _) = drain_child(200, None);
        assert!((200..4000).contains(&ms), "waited {ms} ms");
    }
}
