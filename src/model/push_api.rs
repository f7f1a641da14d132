//! Push delivery (`/v1/queues/{queue}/push`): a queue worked by an HTTP endpoint
//! that qlessd calls, signed as the Standard Webhooks specification says.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ThrottleRate;

/// Body of `PUT /v1/queues/{queue}/push`. Only `url` is required; a later PUT
/// replaces every setting (one left out takes its default) and keeps the secrets.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"url": "https://hooks.example.com/qlessd", "timeout": 30,
    "concurrency": 10, "rate": {"jobs": 100, "seconds": 1}, "headers": {"x-team": "billing"}}))]
pub struct SetPushRequest {
    /// The endpoint: `http` or `https`, no user name or password, on a public address
    /// (unless qlessd runs with `--push-allow-private`). Redirects are not followed.
    #[schema(max_length = 2048)]
    pub url: String,
    /// Seconds a delivery may take before it counts as failed (1 to 900).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 900, default = 30)]
    pub timeout: Option<u32>,
    /// Deliveries in flight for this queue, across every qlessd on the namespace.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10000, default = 10)]
    pub concurrency: Option<u32>,
    /// At most `jobs` deliveries started per `seconds`, across every qlessd.
    #[serde(default)]
    pub rate: Option<ThrottleRate>,
    /// Static headers sent with every delivery (at most 20). Names that qlessd sets
    /// itself (`content-type`, `user-agent`, `webhook-*`, `qlessd-*`, `traceparent`,
    /// `host`, `content-length` and the like) are refused.
    #[serde(default)]
    pub headers: Option<BTreeMap<String, String>>,
}

/// A pushed queue's settings, its signing secrets by fingerprint, and its counts.
/// The secret itself is shown only by the answer that made it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"queue": "emails", "url": "https://hooks.example.com/qlessd",
    "timeout": 30, "concurrency": 10, "rate": null, "headers": {"x-team": "billing"},
    "secrets": [{"fingerprint": "sha256:3f2a9c0b7d1e4a55", "expires": null}],
    "delivered": 1200, "retried": 14, "failed": 2, "in_flight": 3}))]
pub struct PushSettings {
    pub queue: String,
    pub url: String,
    pub timeout: u32,
    pub concurrency: u32,
    pub rate: Option<ThrottleRate>,
    /// The static headers; values of those whose name suggests a credential
    /// (`authorization`, `cookie`, names with `token`, `secret`, `key`, `auth` or
    /// `password`) show as `***`.
    pub headers: BTreeMap<String, String>,
    /// The secrets deliveries are signed with: the current one, then a rotated-out
    /// one while its grace lasts.
    pub secrets: Vec<SecretInfo>,
    /// Jobs completed by a delivery.
    pub delivered: u64,
    /// Deliveries that ended in a retry.
    pub retried: u64,
    /// Deliveries that failed their job (at once, or with its retries used up).
    pub failed: u64,
    /// Deliveries in flight now, across every qlessd.
    pub in_flight: u64,
    /// The latest deliveries, newest first (at most 50).
    pub recent: Vec<PushDelivery>,
}

/// One delivery, as a pushed queue keeps its latest ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PushDelivery {
    pub jid: String,
    /// The answer's HTTP status; null when none came (a timeout, a refused
    /// connection, a TLS error).
    pub status: Option<u16>,
    /// How long it took, in milliseconds.
    pub ms: u64,
    /// Which delivery of the job it was (1 for the first).
    pub attempt: u64,
    /// `delivered`, `retried`, `failed`, or `gone` (the job was canceled or leased
    /// to another meanwhile).
    pub outcome: String,
    /// When it ended (seconds since the epoch).
    pub when: f64,
    /// The qlessd that made it (its worker name).
    pub worker: String,
}

/// A signing secret, as far as it may be shown.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SecretInfo {
    /// `sha256:` and 16 hex digits of the SHA-256 of the secret: tells secrets apart
    /// (compare with your copy) without revealing them.
    pub fingerprint: String,
    /// When it stops signing (seconds since the epoch), for a rotated-out secret.
    pub expires: Option<f64>,
}

/// The answer of a first `PUT` (201) or of a rotation: the settings and the new
/// secret, shown this once. Keep it: verify deliveries with it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PushSubscription {
    /// The new signing secret: `whsec_` and the base64 of 32 random bytes.
    pub secret: Option<String>,
    #[serde(flatten)]
    pub settings: PushSettings,
}

/// Body of `POST /v1/queues/{queue}/push/rotate`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotatePushRequest {
    /// Seconds during which the old secret still signs beside the new one (0 to 30
    /// days; default a day), so receivers can switch without missing a delivery.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 2592000, default = 86400)]
    pub grace: Option<u64>,
}
