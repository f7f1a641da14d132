//! The gateway and the script agree on the commands: every command the gateway can
//! send is one the script dispatches, and every command the script dispatches is
//! either sent by the gateway or kept for other qless clients.

use qlessd::core::{Error, SENT_COMMANDS};

use super::jobs::start;

/// Commands the script keeps for stock qless clients (the spec's forms), which the
/// gateway replaces with richer extensions (`get.ext`, `queues.ext`, `recur.get.ext`).
const OTHER_CLIENTS_ONLY: &[&str] = &["get", "queues", "recur.get"];

/// The command names `lua/api.lua` dispatches on (`name == '<command>'`).
fn dispatched() -> Vec<String> {
    let source = include_str!("../../lua/api.lua");
    let mut names: Vec<String> = source
        .split("name == '")
        .skip(1)
        .filter_map(|rest| rest.split_once('\'').map(|(name, _)| name.to_owned()))
        .filter(|name| !name.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn every_command_the_script_dispatches_is_sent_or_kept_for_other_clients() {
    let names = dispatched();
    assert!(
        names.len() > 40,
        "the dispatch table was not found: {names:?}"
    );
    for name in &names {
        assert!(
            SENT_COMMANDS.contains(&name.as_str()) || OTHER_CLIENTS_ONLY.contains(&name.as_str()),
            "the script dispatches {name:?}, which the gateway neither sends nor lists as \
             kept for other qless clients"
        );
    }
    for name in OTHER_CLIENTS_ONLY {
        assert!(
            names.iter().any(|n| n == name),
            "{name} is not in the script"
        );
        assert!(!SENT_COMMANDS.contains(name), "{name} is listed twice");
    }
}

#[tokio::test]
async fn every_command_the_gateway_sends_is_one_the_script_runs() {
    let (_redis, qless) = start().await;
    for name in SENT_COMMANDS {
        assert!(
            dispatched().iter().any(|n| n == name),
            "{name} is not in lua/api.lua's dispatch table"
        );
        // Called with no arguments, a known command answers or refuses its
        // arguments; only an unknown one is refused by name.
        match qless.call(name, 1.0, Vec::new()).await {
            Err(Error::Script { message, .. }) => assert!(
                !message.contains("Unknown command"),
                "the script does not know {name}: {message}"
            ),
            Err(other) => panic!("{name}: {other:?}"),
            Ok(_) => {}
        }
    }
    // (The check above can fail: an unknown name is refused so.)
    let Err(Error::Script { message, .. }) = qless.call("no.such", 1.0, Vec::new()).await else {
        panic!("an unknown command was accepted");
    };
    assert!(message.contains("Unknown command"), "{message}");
}
