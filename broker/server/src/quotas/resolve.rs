//! Which client quota applies to a client, from the metadata image's
//! quota entities, in Kafka's order of precedence (its
//! DefaultQuotaCallback), per quota key:
//!
//! 1. user and client id            5. default user, default client id
//! 2. user, default client id       6. default user
//! 3. user                          7. client id
//! 4. default user, client id       8. default client id
//!
//! The match also names the sensor the client's traffic counts against:
//! (user, client id) where the matched entity names both kinds, the user
//! alone for a user entity, the client id alone for a client-id entity, so
//! clients that share a quota share its measure (Kafka's metric tags).
//! IP addresses take `connection_creation_rate` from their own entity,
//! else the default IP's.
//!
//! Owns: that resolution over a snapshot built once per image change.
//! Must not: measure or throttle (`sensors`).

use std::collections::HashMap;
use std::net::IpAddr;

use chronik_metadata::quotas::{
    ClientQuotas, QuotaEntity, CLIENT_ID, CONNECTION_CREATION_RATE, IP, USER,
};

/// One kind of an entity's name: absent, the default, or a name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Part {
    Absent,
    Default,
    Named(String),
}

impl Part {
    fn of(entity: &QuotaEntity, entity_type: &str) -> Part {
        match entity.component(entity_type) {
            None => Part::Absent,
            Some(None) => Part::Default,
            Some(Some(name)) => Part::Named(name.to_string()),
        }
    }
}

/// The sensor a client's traffic counts against: (user tag, client tag),
/// `""` where the quota does not name that kind.
pub type SensorKey = (String, String);

/// A resolved quota: its bound, and the sensor it is measured on.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub bound: f64,
    pub sensor: SensorKey,
}

/// The image's client quotas, indexed for resolution.
#[derive(Debug, Default)]
pub struct QuotaConfig {
    /// (user part, client part) → key → value.
    users_and_clients: HashMap<(Part, Part), HashMap<String, f64>>,
    /// Per quota key, whether any user/client entity sets it (else every
    /// lookup of that key is skipped at once).
    keys: std::collections::HashSet<String>,
    ip_rates: HashMap<IpAddr, f64>,
    default_ip_rate: Option<f64>,
}

impl QuotaConfig {
    pub fn from_image(quotas: &ClientQuotas) -> QuotaConfig {
        let mut config = QuotaConfig::default();
        for (entity, values) in quotas {
            if let Some(ip) = entity.component(IP) {
                let Some(rate) = values.get(CONNECTION_CREATION_RATE) else {
                    continue;
                };
                match ip.map(str::parse::<IpAddr>) {
                    None => config.default_ip_rate = Some(rate.0),
                    Some(Ok(address)) => {
                        config.ip_rates.insert(address, rate.0);
                    }
                    Some(Err(_)) => {} // refused when stored
                }
                continue;
            }
            let parts = (Part::of(entity, USER), Part::of(entity, CLIENT_ID));
            let entry = config.users_and_clients.entry(parts).or_default();
            for (key, value) in values {
                config.keys.insert(key.clone());
                entry.insert(key.clone(), value.0);
            }
        }
        config
    }

    /// Whether no user or client-id quota sets `key` (the common case: no
    /// lookup, no sensor, no cost).
    pub fn none_for(&self, key: &str) -> bool {
        !self.keys.contains(key)
    }

    /// The quota `key` for `user` and `client_id`, by Kafka's precedence.
    pub fn resolve(&self, key: &str, user: &str, client_id: &str) -> Option<Resolved> {
        if self.none_for(key) {
            return None;
        }
        let named_user = || Part::Named(user.to_string());
        let named_client = || Part::Named(client_id.to_string());
        let both = || (user.to_string(), client_id.to_string());
        let user_only = || (user.to_string(), String::new());
        let client_only = || (String::new(), client_id.to_string());
        // (user part, client part, sensor: 0 both, 1 user, 2 client id)
        let order: [(Part, Part, u8); 8] = [
            (named_user(), named_client(), 0),
            (named_user(), Part::Default, 0),
            (named_user(), Part::Absent, 1),
            (Part::Default, named_client(), 0),
            (Part::Default, Part::Default, 0),
            (Part::Default, Part::Absent, 1),
            (Part::Absent, named_client(), 2),
            (Part::Absent, Part::Default, 2),
        ];
        for (user_part, client_part, tags) in order {
            let Some(bound) = self
                .users_and_clients
                .get(&(user_part, client_part))
                .and_then(|values| values.get(key))
            else {
                continue;
            };
            let sensor = match tags {
                0 => both(),
                1 => user_only(),
                _ => client_only(),
            };
            return Some(Resolved {
                bound: *bound,
                sensor,
            });
        }
        None
    }

    /// `connection_creation_rate` for connections from `ip`.
    pub fn connection_rate(&self, ip: IpAddr) -> Option<f64> {
        self.ip_rates.get(&ip).copied().or(self.default_ip_rate)
    }

    /// Whether any IP has a connection rate (else the accept loop skips the
    /// check).
    pub fn has_connection_rates(&self) -> bool {
        self.default_ip_rate.is_some() || !self.ip_rates.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronik_metadata::quotas::{QuotaValue, PRODUCER_BYTE_RATE};

    /// An entity's components: (type, name; None for the default).
    type Parts<'a> = &'a [(&'a str, Option<&'a str>)];

    fn quotas(entries: &[(Parts<'_>, f64)]) -> QuotaConfig {
        let mut map = ClientQuotas::new();
        for (parts, value) in entries {
            let entity = QuotaEntity::new(
                parts
                    .iter()
                    .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                    .collect(),
            );
            let key = if entity.component(IP).is_some() {
                CONNECTION_CREATION_RATE
            } else {
                PRODUCER_BYTE_RATE
            };
            map.entry(entity)
                .or_default()
                .insert(key.to_string(), QuotaValue(*value));
        }
        QuotaConfig::from_image(&map)
    }

    fn bound(c: &QuotaConfig, user: &str, client: &str) -> Option<(f64, SensorKey)> {
        c.resolve(PRODUCER_BYTE_RATE, user, client)
            .map(|r| (r.bound, r.sensor))
    }

    #[test]
    fn kafkas_order_of_precedence() {
        let all = quotas(&[
            (&[(USER, Some("u")), (CLIENT_ID, Some("c"))], 1.0),
            (&[(USER, Some("u")), (CLIENT_ID, None)], 2.0),
            (&[(USER, Some("u"))], 3.0),
            (&[(USER, None), (CLIENT_ID, Some("c"))], 4.0),
            (&[(USER, None), (CLIENT_ID, None)], 5.0),
            (&[(USER, None)], 6.0),
            (&[(CLIENT_ID, Some("c"))], 7.0),
            (&[(CLIENT_ID, None)], 8.0),
        ]);
        let s = |u: &str, c: &str| (u.to_string(), c.to_string());
        assert_eq!(bound(&all, "u", "c"), Some((1.0, s("u", "c"))));
        assert_eq!(bound(&all, "u", "other"), Some((2.0, s("u", "other"))));
        assert_eq!(bound(&all, "v", "c"), Some((4.0, s("v", "c"))));
        assert_eq!(bound(&all, "v", "d"), Some((5.0, s("v", "d"))));
        let users = quotas(&[(&[(USER, Some("u"))], 3.0), (&[(USER, None)], 6.0)]);
        assert_eq!(bound(&users, "u", "c"), Some((3.0, s("u", ""))));
        assert_eq!(bound(&users, "v", "c"), Some((6.0, s("v", ""))));
        let clients = quotas(&[
            (&[(CLIENT_ID, Some("c"))], 7.0),
            (&[(CLIENT_ID, None)], 8.0),
        ]);
        assert_eq!(bound(&clients, "u", "c"), Some((7.0, s("", "c"))));
        assert_eq!(bound(&clients, "u", "d"), Some((8.0, s("", "d"))));
        assert_eq!(bound(&QuotaConfig::default(), "u", "c"), None);
    }

    #[test]
    fn ips_take_their_own_rate_else_the_default() {
        let c = quotas(&[(&[(IP, Some("10.0.0.1"))], 5.0), (&[(IP, None)], 50.0)]);
        assert_eq!(
            c.connection_rate("10.0.0.1".parse().expect("an address")),
            Some(5.0)
        );
        assert_eq!(
            c.connection_rate("10.0.0.2".parse().expect("an address")),
            Some(50.0)
        );
        assert!(c.none_for(PRODUCER_BYTE_RATE));
    }
}
