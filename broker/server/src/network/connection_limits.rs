//! Connection caps on the Kafka listener: Kafka's `max.connections` and
//! `max.connections.per.ip`, checked when a connection is accepted; and the
//! same two caps for connections on SASL listeners that have not logged in
//! yet (`--max-unauthenticated-connections[-per-ip]`), whose place is given
//! back at login.
//!
//! Owns: the counts of open connections (in total and per peer IP) and the
//! `ConnectionSlot` guard that gives a connection's place back however its
//! task ends. Must not: read from or write to sockets.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `max.connections` reached.
    Total,
    /// `max.connections.per.ip` reached for this peer.
    PerIp,
    /// `--max-unauthenticated-connections` reached.
    UnauthenticatedTotal,
    /// `--max-unauthenticated-connections-per-ip` reached for this peer.
    UnauthenticatedPerIp,
}

impl Refused {
    pub fn reason(self) -> &'static str {
        match self {
            Refused::Total => "max_connections",
            Refused::PerIp => "max_connections_per_ip",
            Refused::UnauthenticatedTotal => "max_unauthenticated_connections",
            Refused::UnauthenticatedPerIp => "max_unauthenticated_connections_per_ip",
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

#[derive(Debug)]
pub struct ConnectionLimiter {
    max_total: usize,
    max_per_ip: usize,
    /// What a refusal by each cap is called.
    refusals: (Refused, Refused),
    counts: Mutex<Counts>,
}

/// One open connection's place; dropping it frees the place.
#[derive(Debug)]
pub struct ConnectionSlot {
    limiter: Arc<ConnectionLimiter>,
    ip: IpAddr,
}

impl ConnectionLimiter {
    /// `max.connections` and `max.connections.per.ip`.
    pub fn new(max_total: usize, max_per_ip: usize) -> Arc<ConnectionLimiter> {
        Self::with_refusals(max_total, max_per_ip, (Refused::Total, Refused::PerIp))
    }

    /// The caps on connections not yet authenticated.
    pub fn unauthenticated(max_total: usize, max_per_ip: usize) -> Arc<ConnectionLimiter> {
        Self::with_refusals(
            max_total,
            max_per_ip,
            (Refused::UnauthenticatedTotal, Refused::UnauthenticatedPerIp),
        )
    }

    fn with_refusals(
        max_total: usize,
        max_per_ip: usize,
        refusals: (Refused, Refused),
    ) -> Arc<ConnectionLimiter> {
        Arc::new(ConnectionLimiter {
            max_total,
            max_per_ip,
            refusals,
            counts: Mutex::new(Counts::default()),
        })
    }

    /// Takes a place for a connection from `ip`, or says which cap is full.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Refused> {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if counts.total >= self.max_total {
            return Err(self.refusals.0);
        }
        let per_ip = counts.per_ip.entry(ip).or_insert(0);
        if *per_ip >= self.max_per_ip {
            return Err(self.refusals.1);
        }
        *per_ip += 1;
        counts.total += 1;
        Ok(ConnectionSlot {
            limiter: self.clone(),
            ip,
        })
    }

    /// Open connections right now.
    pub fn open(&self) -> usize {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut counts = self
            .limiter
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.per_ip.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_total_and_per_ip_and_frees_on_drop() {
        let limiter = ConnectionLimiter::new(3, 2);
        let a: IpAddr = "127.0.0.1".parse().expect("ip");
        let b: IpAddr = "127.0.0.2".parse().expect("ip");
        let a1 = limiter.try_acquire(a).expect("first from a");
        let _a2 = limiter.try_acquire(a).expect("second from a");
        assert_eq!(limiter.try_acquire(a).err(), Some(Refused::PerIp));
        let _b1 = limiter.try_acquire(b).expect("first from b");
        assert_eq!(limiter.try_acquire(b).err(), Some(Refused::Total));
        drop(a1);
        assert_eq!(limiter.open(), 2);
        limiter.try_acquire(a).expect("a's place was given back");
    }

    #[test]
    fn unauthenticated_caps_name_their_own_refusals() {
        let limiter = ConnectionLimiter::unauthenticated(2, 1);
        let a: IpAddr = "127.0.0.1".parse().expect("ip");
        let b: IpAddr = "127.0.0.2".parse().expect("ip");
        let c: IpAddr = "127.0.0.3".parse().expect("ip");
        let _a = limiter.try_acquire(a).expect("first from a");
        assert_eq!(
            limiter.try_acquire(a).err(),
            Some(Refused::UnauthenticatedPerIp)
        );
        let _b = limiter.try_acquire(b).expect("first from b");
        let refused = limiter.try_acquire(c).err();
        assert_eq!(refused, Some(Refused::UnauthenticatedTotal));
        assert_eq!(
            refused.map(Refused::reason),
            Some("max_unauthenticated_connections")
        );
    }
}
