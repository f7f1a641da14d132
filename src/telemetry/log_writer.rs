//! The log's way to standard output: lines are appended to a shared buffer, and a
//! thread of their own writes what has gathered, in one `write` per few milliseconds.
//!
//! Written straight to stdout, every access log line cost a `write` system call on the
//! thread serving the request: about a third of what logging a request costs (the rest
//! is formatting), and a stdout that stops draining (a full pipe, a stalled log
//! collector) stopped every request thread with it. Here a line is a copy into a
//! buffer under a lock that is only ever held for that copy or a swap; the writer
//! thread is woken when the buffer goes from empty to not, waits [`GATHER`] for more,
//! and writes the lot.
//!
//! Nothing is dropped: when [`MAX_BUFFERED`] bytes are waiting (stdout is not keeping
//! up), a line waits for room, as a direct write would have waited for the pipe.
//! [`flush`] writes out what is buffered; `main` calls it before the process exits.
//! (A process killed outright loses the last few milliseconds of lines, as it would
//! lose lines sitting in any pipe's buffer.)

use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use tracing_subscriber::fmt::MakeWriter;

/// How long the writer thread lets lines gather after the first one before writing.
const GATHER: Duration = Duration::from_millis(5);

/// Bytes buffered before a new line waits for the writer to catch up.
const MAX_BUFFERED: usize = 1 << 20;

/// The one writer of the process (stdout has one reader), for [`flush`].
static STDOUT: OnceLock<LogWriter> = OnceLock::new();

/// A [`MakeWriter`] for the log, writing to stdout through the buffer.
#[derive(Clone, Debug)]
pub(super) struct LogWriter {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when the buffer gets its first bytes, and on a flush request.
    ready: Condvar,
    /// Signalled when the writer has taken the buffer (room again, a flush done).
    taken: Condvar,
}

#[derive(Debug, Default)]
struct State {
    lines: Vec<u8>,
    /// The writer thread is writing lines it took from `lines`.
    writing: bool,
    /// A flush is waiting: write at once, without gathering.
    urgent: bool,
}

impl LogWriter {
    /// The process's stdout writer, its thread started on first use.
    pub(super) fn stdout() -> Self {
        STDOUT
            .get_or_init(|| Self::start(std::io::stdout()))
            .clone()
    }

    /// A writer whose thread writes to `out`.
    fn start(mut out: impl Write + Send + 'static) -> Self {
        let shared = Arc::new(Shared::default());
        let writer = shared.clone();
        std::thread::Builder::new()
            .name("qlessd-log".into())
            .spawn(move || {
                let mut spare = Vec::new();
                loop {
                    let mut state = writer.state.lock();
                    while state.lines.is_empty() {
                        writer.ready.wait(&mut state);
                    }
                    if !state.urgent {
                        // Let the lines of the next few milliseconds join these.
                        writer.ready.wait_for(&mut state, GATHER);
                    }
                    state.urgent = false;
                    state.writing = true;
                    std::mem::swap(&mut state.lines, &mut spare);
                    drop(state);
                    // A log that cannot be written has nowhere to report it.
                    let _ = out.write_all(&spare).and_then(|()| out.flush());
                    spare.clear();
                    writer.state.lock().writing = false;
                    writer.taken.notify_all();
                }
            })
            .expect("the log writer thread starts");
        LogWriter { shared }
    }

    /// Appends `bytes` (whole lines), waiting while the buffer is full.
    fn append(&self, bytes: &[u8]) {
        let mut state = self.shared.state.lock();
        while state.lines.len() >= MAX_BUFFERED {
            self.shared.taken.wait(&mut state);
        }
        let first = state.lines.is_empty();
        state.lines.extend_from_slice(bytes);
        drop(state);
        if first {
            self.shared.ready.notify_one();
        }
    }

    /// Returns once everything appended so far has been written (or after `timeout`).
    fn flush(&self, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        let mut state = self.shared.state.lock();
        while !state.lines.is_empty() || state.writing {
            state.urgent = true;
            self.shared.ready.notify_one();
            if self
                .shared
                .taken
                .wait_until(&mut state, deadline)
                .timed_out()
            {
                return;
            }
        }
    }
}

/// Writes out the buffered log lines (waiting up to a second): call before exiting.
pub fn flush() {
    if let Some(writer) = STDOUT.get() {
        writer.flush(Duration::from_secs(1));
    }
}

/// The writer the formatter gets per event: one `write_all` of the formatted line.
pub(super) struct Line<'a>(&'a LogWriter);

impl Write for Line<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.append(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        Line(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Write` into shared memory, to read what the writer thread wrote.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_is_written_in_order_once_flushed() {
        let sink = Sink::default();
        let writer = LogWriter::start(sink.clone());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let writer = writer.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        writer
                            .make_writer()
                            .write_all(format!("{t} {i}\n").as_bytes())
                            .unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        writer.flush(Duration::from_secs(10));
        let written = String::from_utf8(sink.0.lock().clone()).unwrap();
        let lines: Vec<&str> = written.lines().collect();
        assert_eq!(lines.len(), 8_000);
        // Each thread's lines arrive whole and in the order it wrote them.
        for t in 0..4 {
            let mine: Vec<usize> = lines
                .iter()
                .filter_map(|line| line.strip_prefix(&format!("{t} ")))
                .map(|i| i.parse().unwrap())
                .collect();
            assert_eq!(mine, (0..2_000).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_full_buffer_makes_lines_wait_rather_than_dropping_them() {
        // A sink that takes a while per write: the buffer fills and writers wait.
        #[derive(Clone, Default)]
        struct Slow(Sink);
        impl Write for Slow {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                std::thread::sleep(Duration::from_millis(20));
                self.0.write(bytes)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let slow = Slow::default();
        let writer = LogWriter::start(slow.clone());
        let line = vec![b'x'; 64 * 1024];
        for _ in 0..64 {
            let mut text = line.clone();
            text.push(b'\n');
            writer.make_writer().write_all(&text).unwrap();
            assert!(writer.shared.state.lock().lines.len() <= MAX_BUFFERED + text.len());
        }
        writer.flush(Duration::from_secs(30));
        assert_eq!(slow.0.0.lock().len(), 64 * (64 * 1024 + 1));
    }
}
