//! What a script call is, in one place per command: the [`Command`] trait that each
//! command type implements (its name, how it encodes its arguments, whether it
//! writes or only deletes, its weight in a group, what it is about, what it counts,
//! and how its reply decodes), and [`Args`], the arguments in the form Redis reads
//! them.
//!
//! A command's argument layout is known only to its type: past [`Command::encode`]
//! the arguments are bytes on their way to Redis, which nothing reads back. Adding
//! an argument to a command is an edit to its type and to the Lua, nowhere else.

use redis::Value;

use super::Error;
use super::resp;

/// The script command that runs several calls in one invocation, each as it would
/// run alone (`lua/api.lua`): what group commit and `Qless::run_many` send. The
/// script does not nest it in another `batch`.
pub const BATCH: &str = "batch";

/// The script command that checks a part of a longer list of calls as [`BATCH`]
/// would, running none: sent before the first write of a request of more than one
/// `batch` invocation, so that the request is refused whole or not at all.
pub const BATCH_CHECK: &str = "batch.check";

/// Every script command the gateway sends, by name: each type's [`Command::name`] is
/// one of these (checked on every call in debug builds), and a test checks that the
/// script dispatches each of them (`tests/lua/commands.rs`). [`BATCH`] carries groups
/// of other calls, and `batch.check` checks them without running them.
pub const SENT: &[&str] = &[
    // lua/job.lua
    "get.ext",
    "multiget",
    "put",
    "put.ifabsent",
    "put.idem",
    "requeue",
    "pop",
    "pop.multi",
    "pop.after",
    "peek",
    "heartbeat",
    "complete",
    "fail",
    "retry",
    "cancel",
    "timeout",
    "depends",
    "priority",
    "log",
    "tag",
    "track",
    // lua/queue.lua
    "queues.ext",
    "queues.oldest",
    "length",
    "jobs",
    "jobs.waiting",
    "pause",
    "unpause",
    "queue.forget",
    "failed",
    "unfail",
    "stats",
    "sweep",
    "migrate",
    // lua/recurring.lua
    "recur",
    "recur.get.ext",
    "recur.update",
    "recur.cron.due",
    "recur.cron.extend",
    "recur.tag",
    "recur.untag",
    "unrecur",
    // lua/worker.lua
    "workers",
    "worker.deregister",
    // lua/throttle.lua
    "throttle.set",
    "throttle.list",
    "throttle.get",
    "throttle.delete",
    // lua/push.lua
    "push.set",
    "push.get",
    "push.list",
    "push.forget",
    "push.rotate",
    "push.pop",
    "push.finish",
    // lua/api.lua, lua/batches.lua, lua/workflow.lua
    "batch.open",
    "batch.add",
    "batch.get",
    "batch.cancel",
    "workflow.open",
    "workflow.get",
    "workflow.cancel",
    // lua/search.lua
    "search",
    "search.act",
    // lua/rates.lua, lua/failures.lua (the dashboard's)
    "rates",
    "failed.summary",
    // lua/partitions.lua
    "partitions.set",
    "partitions.get",
    // lua/config.lua
    "config.get",
    "config.set",
    "config.unset",
    // group commit and batches
    BATCH,
    BATCH_CHECK,
];

/// The arguments of one script call after `now`, already encoded as RESP bulk
/// strings, with their count (the invocation's array header needs it first).
#[derive(Debug, Default, Clone)]
pub struct Args {
    count: usize,
    bytes: Vec<u8>,
}

impl Args {
    pub fn new() -> Self {
        Args::default()
    }

    /// Appends one argument.
    pub fn push(&mut self, value: impl Arg) -> &mut Self {
        value.put(&mut self.bytes);
        self.count += 1;
        self
    }

    /// Appends every item.
    pub fn extend<T: Arg>(&mut self, values: impl IntoIterator<Item = T>) -> &mut Self {
        for value in values {
            self.push(value);
        }
        self
    }

    /// Appends `name value` when the option is set.
    pub fn option(&mut self, name: &str, value: Option<impl Arg>) -> &mut Self {
        if let Some(value) = value {
            self.push(name).push(value);
        }
        self
    }

    /// Appends a whole call as `batch` and `pop.after` take them: its command, its
    /// argument count, then its arguments.
    pub fn call(&mut self, name: &str, args: &Args) -> &mut Self {
        self.push(name).push(args.count);
        self.bytes.extend_from_slice(&args.bytes);
        self.count += args.count;
        self
    }

    /// How many arguments there are.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The encoded arguments, ready to follow an invocation's header.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// A value as the text of a script argument.
pub trait Arg {
    /// Appends the value as one RESP bulk string.
    fn put(self, out: &mut Vec<u8>);
}

impl Arg for &str {
    fn put(self, out: &mut Vec<u8>) {
        resp::put_bulk(out, self.as_bytes());
    }
}

impl Arg for &String {
    fn put(self, out: &mut Vec<u8>) {
        resp::put_bulk(out, self.as_bytes());
    }
}

impl Arg for String {
    fn put(self, out: &mut Vec<u8>) {
        resp::put_bulk(out, self.as_bytes());
    }
}

impl Arg for usize {
    fn put(self, out: &mut Vec<u8>) {
        resp::put_bulk_number(out, self);
    }
}

impl Arg for u64 {
    fn put(self, out: &mut Vec<u8>) {
        resp::put_bulk(out, self.to_string().as_bytes());
    }
}

impl Arg for u32 {
    fn put(self, out: &mut Vec<u8>) {
        resp::put_bulk_number(out, self as usize);
    }
}

/// Signed numbers and floats in their `Display` form (floats without a trailing
/// `.0`), as the script's `tonumber` reads them.
macro_rules! display_args {
    ($($number:ty),*) => {$(
        impl Arg for $number {
            fn put(self, out: &mut Vec<u8>) {
                resp::put_bulk(out, self.to_string().as_bytes());
            }
        }
    )*};
}

display_args!(f64, i64);

/// The JSON text of a list of strings, as the script's list arguments take them.
pub fn json_list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".to_owned())
}

/// What a call is about, where its arguments name it: the attributes of its span.
#[derive(Debug, Default, Clone, Copy)]
pub struct Subject<'a> {
    pub queue: Option<&'a str>,
    pub jid: Option<&'a str>,
}

impl<'a> Subject<'a> {
    pub fn queue(queue: &'a str) -> Self {
        Subject {
            queue: Some(queue),
            jid: None,
        }
    }

    pub fn jid(jid: &'a str) -> Self {
        Subject {
            queue: None,
            jid: Some(jid),
        }
    }

    pub fn job(queue: &'a str, jid: &'a str) -> Self {
        Subject {
            queue: Some(queue),
            jid: Some(jid),
        }
    }
}

/// Where a command that succeeded counts what it did to jobs: the process's job
/// metrics, labelled with the namespace the call ran in.
pub struct Recorder<'a> {
    pub namespace: &'a str,
    pub now: f64,
}

impl Recorder<'_> {
    /// A job of `queue` went through `event` (`put`, ...).
    pub fn job(&self, queue: &str, event: &'static str) {
        crate::metrics::METRICS.job(self.namespace, queue, event);
    }

    /// A job left its worker through `event` (`completed`, `failed`, ...); `queue`
    /// may be blank where the call does not name it.
    pub fn finished(&self, queue: &str, event: &'static str, jid: &str) {
        crate::metrics::METRICS.finished(self.namespace, queue, event, jid, self.now);
    }

    /// Jobs were leased.
    pub fn popped(&self, jobs: &[crate::model::Job]) {
        crate::metrics::METRICS.popped(self.namespace, jobs);
    }
}

/// One script command, as a type: everything the gateway needs to know of a command
/// besides the Lua that runs it.
pub trait Command {
    /// What a successful reply decodes into.
    type Output;

    /// The command's name in the script's dispatch table.
    fn name(&self) -> &'static str;

    /// Appends the arguments that follow `now`.
    fn encode(&self, args: &mut Args);

    /// Turns the script's reply into the output.
    fn decode(&self, reply: Value) -> Result<Self::Output, Error>;

    /// Whether it may write. Those that do not are sent again as the `no-writes`
    /// script when Redis is out of memory, and are never waited on by replicas.
    fn writes(&self) -> bool {
        true
    }

    /// Whether it only deletes (its writes free more memory than they take). Those
    /// that do are sent again as the `allow-oom` copy of the script when Redis is out
    /// of memory, so memory can be freed through the API; that copy runs only the
    /// commands of `script::ONLY_DELETING`.
    fn only_deletes(&self) -> bool {
        false
    }

    /// How much Redis time it takes, counted in jobs, for the bound on a group of
    /// calls: a pop weighs what it may lease, anything else one job.
    fn weight(&self) -> usize {
        1
    }

    /// Whether it must go to Redis by itself, never in a group of calls: a call that
    /// is a [`BATCH`] already, which the script does not nest in the group's.
    fn alone(&self) -> bool {
        false
    }

    /// The queue and jid it is about, for its span.
    fn subject(&self) -> Subject<'_> {
        Subject::default()
    }

    /// Counts what it did to jobs, once it succeeded with `output`.
    fn record(&self, _recorder: &Recorder<'_>, _output: &Self::Output) {}
}

/// Any command by name with arguments made elsewhere: for tests and tools that
/// drive the script directly. It counts as a write of weight one and counts no job
/// events; its reply is Redis's value as it came. Its name is all there is of it, so
/// its name alone says whether it must go alone (a [`BATCH`] of calls made
/// elsewhere).
pub struct Raw<'a> {
    pub name: &'static str,
    pub args: &'a [String],
}

impl Command for Raw<'_> {
    type Output = Value;

    fn name(&self) -> &'static str {
        self.name
    }

    fn encode(&self, args: &mut Args) {
        args.extend(self.args);
    }

    fn decode(&self, reply: Value) -> Result<Value, Error> {
        Ok(reply)
    }

    fn alone(&self) -> bool {
        self.name == BATCH
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_counted_and_encoded_as_bulk_strings() {
        let mut args = Args::new();
        args.push("q").push(10u32).push(2.5).push(-3i64);
        args.option("next", Some("b")).option("delay", None::<f64>);
        assert_eq!(args.count(), 6);
        assert_eq!(
            args.bytes(),
            b"$1\r\nq\r\n$2\r\n10\r\n$3\r\n2.5\r\n$2\r\n-3\r\n$4\r\nnext\r\n$1\r\nb\r\n"
        );
        let mut outer = Args::new();
        outer.push(1u32).call("complete", &args);
        assert_eq!(outer.count(), 3 + 6);
        assert!(outer.bytes().ends_with(args.bytes()));
        assert!(
            outer
                .bytes()
                .starts_with(b"$1\r\n1\r\n$8\r\ncomplete\r\n$1\r\n6\r\n")
        );
    }

    #[test]
    fn only_a_batch_made_elsewhere_must_go_alone() {
        let raw = |name| Raw { name, args: &[] };
        assert!(raw(BATCH).alone());
        assert!(!raw("put").alone());
        assert!(!raw("pop.after").alone());
    }

    #[test]
    fn floats_are_written_without_a_trailing_zero() {
        let mut args = Args::new();
        args.push(3.0).push(0.25);
        assert_eq!(args.bytes(), b"$1\r\n3\r\n$4\r\n0.25\r\n");
    }
}
