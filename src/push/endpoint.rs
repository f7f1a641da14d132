//! Which endpoints qlessd may call: `http` or `https` URLs without user
//! information, whose host is, and resolves only to, public addresses unless the
//! operator allowed private ones (`--push-allow-private`). The rule is checked when a
//! queue is subscribed and again when a delivery connects ([`PublicResolver`]), so a
//! name that resolved to a public address then cannot be pointed into the network
//! qlessd runs in later (DNS rebinding).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether endpoints on non-public addresses are allowed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// `--push-allow-private`: loopback, private and link-local addresses too.
    pub allow_private: bool,
}

/// Why an endpoint is refused; its text is the problem detail a client reads.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EndpointError {
    #[error("url is not a URL: {0}")]
    Malformed(String),
    #[error("url must be http or https, not {0}")]
    Scheme(String),
    #[error("url must not carry a user name or password")]
    UserInfo,
    #[error("url has no host")]
    NoHost,
    #[error(
        "url's host {0} is a loopback, private, link-local or otherwise non-public address; \
         start qlessd with --push-allow-private to allow it"
    )]
    NotPublic(String),
    #[error("url's host {0} does not resolve")]
    Unresolved(String),
}

/// Checks an endpoint's form and, unless private addresses are allowed, that its
/// host is and resolves only to public addresses. Returns the parsed URL.
pub async fn check(url: &str, policy: AddressPolicy) -> Result<Url, EndpointError> {
    let parsed = check_form(url)?;
    if policy.allow_private {
        return Ok(parsed);
    }
    let host = parsed.host_str().ok_or(EndpointError::NoHost)?.to_owned();
    match literal(&parsed) {
        Some(ip) if is_public(ip) => Ok(parsed),
        Some(_) => Err(EndpointError::NotPublic(host)),
        None => {
            let port = parsed.port_or_known_default().unwrap_or(443);
            let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
                .await
                .map_err(|_| EndpointError::Unresolved(host.clone()))?
                .collect();
            if addresses.is_empty() {
                return Err(EndpointError::Unresolved(host));
            }
            if addresses.iter().all(|a| is_public(a.ip())) {
                Ok(parsed)
            } else {
                Err(EndpointError::NotPublic(host))
            }
        }
    }
}

/// The checks that need no network: a URL, `http` or `https`, a host, no user
/// information.
pub fn check_form(url: &str) -> Result<Url, EndpointError> {
    let parsed = Url::parse(url).map_err(|err| EndpointError::Malformed(err.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(EndpointError::Scheme(parsed.scheme().to_owned()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(EndpointError::UserInfo);
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(EndpointError::NoHost);
    }
    Ok(parsed)
}

/// Whether a delivery may go to `url` as it stands: its form, and a host given as
/// an address is public (names are checked as they resolve, by [`PublicResolver`]).
pub fn may_connect(url: &Url, policy: AddressPolicy) -> bool {
    policy.allow_private || literal(url).is_none_or(is_public)
}

/// The host of `url` when it is an IP address.
fn literal(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        url::Host::Domain(_) => None,
    }
}

/// Whether `ip` is a public unicast address: not loopback, private, shared
/// (carrier-grade NAT), link-local, unspecified, broadcast, multicast,
/// documentation, benchmarking or reserved; IPv6 addresses that embed an IPv4 one
/// are judged by it.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let first = ip.segments()[0];
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first & 0xffc0) == 0xfec0
        || first == 0x2001 && ip.segments()[1] == 0x0db8
        // Translation and tunnels, which carry an IPv4 address of any kind inside:
        // NAT64 (64:ff9b::/96 and the local 64:ff9b:1::/48), Teredo (2001::/32) and
        // 6to4 (2002::/16).
        || first == 0x0064 && ip.segments()[1] == 0xff9b
        || first == 0x2001 && ip.segments()[1] == 0x0000
        || first == 0x2002
        // The discard-only prefix (100::/64).
        || ip.segments()[..4] == [0x0100, 0, 0, 0]
        || ip.segments()[..6] == [0; 6])
}

/// The resolver deliveries connect through: the system's, keeping only public
/// addresses unless private ones are allowed. A name that resolves to none left is
/// an error, which the delivery reports as a connection failure.
#[derive(Debug, Clone, Copy)]
pub struct PublicResolver {
    pub policy: AddressPolicy,
}

impl Resolve for PublicResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|address| policy.allow_private || is_public(address.ip()))
                .collect();
            if found.is_empty() {
                return Err(format!("{host} resolves to no address qlessd may call").into());
            }
            let addrs: Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}

impl PublicResolver {
    /// The resolver as reqwest takes it.
    pub fn shared(policy: AddressPolicy) -> Arc<Self> {
        Arc::new(PublicResolver { policy })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_unicast_addresses_are_public() {
        for (address, public) in [
            ("8.8.8.8", true),
            ("1.1.1.1", true),
            ("127.0.0.1", false),
            ("10.1.2.3", false),
            ("172.16.0.1", false),
            ("192.168.1.1", false),
            ("169.254.169.254", false),
            ("100.64.0.1", false),
            ("0.0.0.0", false),
            ("255.255.255.255", false),
            ("224.0.0.1", false),
            ("192.0.2.1", false),
            ("198.18.0.1", false),
            ("240.0.0.1", false),
            ("2606:4700::1111", true),
            ("::1", false),
            ("::", false),
            ("fd00::1", false),
            ("fe80::1", false),
            ("ff02::1", false),
            ("2001:db8::1", false),
            ("::ffff:127.0.0.1", false),
            ("::ffff:8.8.8.8", true),
            ("64:ff9b::a00:1", false),
            ("64:ff9b:1::a00:1", false),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", false),
            ("2002:c000:0204::1", false),
            ("100::1", false),
            ("2001:4860:4860::8888", true),
        ] {
            let ip: IpAddr = address.parse().unwrap();
            assert_eq!(is_public(ip), public, "{address}");
        }
    }

    #[test]
    fn the_form_of_a_url_is_checked_before_any_lookup() {
        for (url, expected) in [
            ("ftp://example.com/x", EndpointError::Scheme("ftp".into())),
            ("https://user:pw@example.com/", EndpointError::UserInfo),
            ("https://user@example.com/", EndpointError::UserInfo),
            ("file:///etc/passwd", EndpointError::Scheme("file".into())),
        ] {
            assert_eq!(check_form(url).unwrap_err(), expected, "{url}");
        }
        assert!(matches!(
            check_form("not a url"),
            Err(EndpointError::Malformed(_))
        ));
        assert!(check_form("https://example.com:8443/hook?x=1").is_ok());
    }

    #[tokio::test]
    async fn private_literals_and_names_are_refused_unless_allowed() {
        let strict = AddressPolicy::default();
        for url in [
            "http://127.0.0.1:9000/",
            "http://[::1]/",
            "http://10.0.0.5/",
            "http://169.254.169.254/latest/meta-data",
            "http://localhost:8080/",
        ] {
            assert!(
                matches!(check(url, strict).await, Err(EndpointError::NotPublic(_))),
                "{url}"
            );
        }
        let open = AddressPolicy {
            allow_private: true,
        };
        assert!(check("http://127.0.0.1:9000/", open).await.is_ok());
        assert!(check("http://93.184.215.14/", strict).await.is_ok());
    }

    /// The check made as a delivery connects: a name that resolves only to private
    /// addresses now (whatever it resolved to when the queue was subscribed) gives the
    /// connection nothing to connect to.
    #[tokio::test]
    async fn at_connection_a_name_resolving_to_private_addresses_is_refused() {
        let name = || -> Name { "localhost".parse().unwrap() };
        let strict = PublicResolver {
            policy: AddressPolicy::default(),
        };
        let refused = strict.resolve(name()).await.err().unwrap();
        assert!(refused.to_string().contains("no address qlessd may call"));
        let open = PublicResolver {
            policy: AddressPolicy {
                allow_private: true,
            },
        };
        let found: Vec<SocketAddr> = open.resolve(name()).await.ok().unwrap().collect();
        assert!(found.iter().all(|a| a.ip().is_loopback()) && !found.is_empty());
    }
}
