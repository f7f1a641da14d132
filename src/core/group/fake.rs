//! A scripted Redis for the driver's tests: every connection the driver opens is an
//! in-memory pipe ([`tokio::io::duplex`]) whose far end the test holds as a
//! [`Server`], reading the commands the driver sent and writing the replies it
//! chooses, when it chooses. Nothing runs on a timer: the test decides what the
//! driver hears and in which order, so a test that needs calls queued first queues
//! them, then answers.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use redis::{ConnectionInfo, Value};
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

use super::super::resp::{Connection, Reader};
use super::super::topology;
use super::Target;
use super::link::Connector;

/// The address the primary is reached at.
pub(super) const PRIMARY: &str = "redis://10.0.0.1:7000/0";

/// The test's side: the connections the driver opened, in order.
pub(super) struct FakeRedis {
    opened: mpsc::UnboundedReceiver<Server>,
    plan: Arc<Plan>,
}

/// What the driver's side of the fake does when asked for a connection.
struct Plan {
    /// How many bytes each pipe holds in each direction: 1 makes the driver read
    /// every reply a byte at a time.
    capacity: usize,
    opened: mpsc::UnboundedSender<Server>,
    /// Outcomes of the next openings, in order (then: open).
    refusals: Mutex<VecDeque<bool>>,
}

/// The far end of one connection the driver opened.
pub(super) struct Server {
    /// Where the driver thinks it is: the primary, or the node an `ASK` named.
    pub node: String,
    stream: DuplexStream,
    reader: Reader,
}

impl FakeRedis {
    /// A fake whose connections hold `capacity` bytes each way, and the connector
    /// that opens them.
    pub(super) fn new(capacity: usize) -> (Self, Arc<dyn Connector>) {
        let (opened, waiting) = mpsc::unbounded_channel();
        let plan = Arc::new(Plan {
            capacity,
            opened,
            refusals: Mutex::new(VecDeque::new()),
        });
        let fake = FakeRedis {
            opened: waiting,
            plan: plan.clone(),
        };
        (fake, plan)
    }

    /// The next connection the driver opens (waiting for it).
    pub(super) async fn accept(&mut self) -> Server {
        self.opened.recv().await.expect("the driver is running")
    }

    /// Whether the driver opened no connection that was not accepted yet.
    pub(super) fn none_opened(&mut self) -> bool {
        self.opened.try_recv().is_err()
    }

    /// The next attempt to open a connection fails.
    pub(super) fn refuse_next(&self) {
        self.plan.refusals.lock().push_back(true);
    }
}

impl Plan {
    fn open(&self, node: String) -> io::Result<Connection> {
        if self.refusals.lock().pop_front() == Some(true) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "Connection refused",
            ));
        }
        let (client, server) = tokio::io::duplex(self.capacity);
        let server = Server {
            node,
            stream: server,
            reader: Reader::new(),
        };
        self.opened
            .send(server)
            .map_err(|_| io::Error::other("the test is over"))?;
        Ok(Connection::over(Box::new(client)))
    }
}

impl Connector for Plan {
    fn primary<'a>(
        &'a self,
        _target: &'a Target,
    ) -> BoxFuture<'a, io::Result<(Connection, ConnectionInfo)>> {
        async move {
            let node = topology::direct(PRIMARY)?;
            Ok((self.open(PRIMARY.to_owned())?, node))
        }
        .boxed()
    }

    fn node<'a>(
        &'a self,
        _target: &'a Target,
        node: &'a ConnectionInfo,
    ) -> BoxFuture<'a, io::Result<Connection>> {
        async move { self.open(node.addr().to_string()) }.boxed()
    }
}

impl Server {
    /// The next command the driver sent, word by word (waiting for it).
    pub(super) async fn command(&mut self) -> Vec<String> {
        let value = self
            .reader
            .next_value(&mut self.stream)
            .await
            .expect("a command");
        let Value::Array(words) = value else {
            panic!("a command is an array, not {value:?}");
        };
        words
            .into_iter()
            .map(|word| match word {
                Value::BulkString(bytes) => String::from_utf8(bytes).expect("UTF-8"),
                other => panic!("a command's words are bulk strings, not {other:?}"),
            })
            .collect()
    }

    /// Reads the next command and checks that it starts with `words`; returns it all.
    pub(super) async fn expect(&mut self, words: &[&str]) -> Vec<String> {
        let command = self.command().await;
        assert!(
            command.len() >= words.len() && command.iter().zip(words).all(|(a, b)| a == b),
            "expected {words:?}, the driver sent {command:?}"
        );
        command
    }

    /// Answers with `reply` (RESP, as Redis writes it).
    pub(super) async fn reply(&mut self, reply: &[u8]) {
        self.stream
            .write_all(reply)
            .await
            .expect("the driver reads");
    }

    /// Whether the driver sent nothing more so far (it does not wait).
    pub(super) fn quiet(&mut self) -> bool {
        if !self.reader.pending().is_empty() {
            return false;
        }
        match self.reader.fill(&mut self.stream).now_or_never() {
            None => true,
            // Closed by the driver: nothing more will come.
            Some(Err(_)) => true,
            Some(Ok(())) => false,
        }
    }

    /// Waits until the driver closes the connection, failing on anything it sends.
    pub(super) async fn closed(mut self) {
        match self.reader.fill(&mut self.stream).await {
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => {}
            Err(err) => panic!("{err}"),
            Ok(()) => panic!("the driver sent {:?}", self.reader.pending()),
        }
    }
}
