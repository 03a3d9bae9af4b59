//! Who gets a connection slot on the raft/controller port, decided at
//! accept from the peer's address alone (before any byte is read).
//!
//! Two pools, so that strangers cannot crowd out the voters: heartbeats and
//! forwarded controller requests open a connection per call, and if
//! unauthenticated connections could take every slot the controller would
//! stop hearing brokers and fence them all.
//! - connections from a member's address (what a voter's `--peers` host,
//!   or the host an observer joined with, resolves to, re-resolved every
//!   `RESOLVE_INTERVAL` so a rescheduled pod is recognised): at most `MAX_CONNECTIONS`, `MAX_CONNECTIONS_PER_IP` from
//!   one address;
//! - every other address shares `MAX_STRANGER_CONNECTIONS`. A voter that
//!   connects from an address its host does not resolve to (NAT) still
//!   gets in through this pool, but strangers can crowd it there.
//!
//! Owns: the pools, the per-address counts and the voter address set.
//! Must not: read from the connection or authenticate it (`auth` does).

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::config::host_port;

/// Connections open at once from the voters' addresses (a voter set needs
/// a few each: one per raft peer, heartbeats, forwarded requests), and
/// from any one address.
pub const MAX_CONNECTIONS: usize = 64;
pub const MAX_CONNECTIONS_PER_IP: usize = 16;
/// Connections open at once from every other address together.
pub const MAX_STRANGER_CONNECTIONS: usize = 16;
/// How often the voters' hosts are resolved again.
pub const RESOLVE_INTERVAL: Duration = Duration::from_secs(10);

/// Why a connection was closed at accept: which pool (or the address's own
/// share) was full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    VoterPool,
    StrangerPool,
    OneAddress,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::VoterPool => write!(
                f,
                "{MAX_CONNECTIONS} connections from voter addresses already open"
            ),
            Refusal::StrangerPool => write!(
                f,
                "{MAX_STRANGER_CONNECTIONS} connections from non-voter addresses already open"
            ),
            Refusal::OneAddress => write!(
                f,
                "{MAX_CONNECTIONS_PER_IP} connections from this address already open"
            ),
        }
    }
}

/// A connection's places; dropping it frees them.
pub struct Ticket {
    _pool: OwnedSemaphorePermit,
    _address: AddressSlot,
}

/// The members' hosts as of now (voters, and observers once they joined).
pub type MemberHosts = Box<dyn Fn() -> Vec<String> + Send + Sync>;

pub struct Admission {
    member_hosts: MemberHosts,
    voter_addresses: RwLock<HashSet<IpAddr>>,
    voters: Arc<Semaphore>,
    strangers: Arc<Semaphore>,
    per_ip: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Admission {
    /// `member_hosts`: every voter's `--peers` host, this node's included,
    /// and the hosts of the quorum's observers (asked again at every
    /// resolution).
    pub fn new(member_hosts: MemberHosts) -> Admission {
        Admission {
            member_hosts,
            voter_addresses: RwLock::default(),
            voters: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            strangers: Arc::new(Semaphore::new(MAX_STRANGER_CONNECTIONS)),
            per_ip: Arc::default(),
        }
    }

    /// Resolves the members' hosts now and every `RESOLVE_INTERVAL` after;
    /// aborting the task stops it. A host that does not resolve (a pod not
    /// scheduled yet) keeps its last addresses until it does.
    pub fn spawn_resolver(self: &Arc<Self>) -> JoinHandle<()> {
        let admission = self.clone();
        tokio::spawn(async move {
            let mut known: HashMap<String, Vec<IpAddr>> = HashMap::new();
            loop {
                let hosts = (admission.member_hosts)();
                known.retain(|host, _| hosts.contains(host));
                for host in &hosts {
                    match tokio::net::lookup_host(host_port(host, 0)).await {
                        Ok(addrs) => {
                            known.insert(host.clone(), addrs.map(|a| a.ip()).collect());
                        }
                        Err(e) => {
                            tracing::debug!(%host, error = %e, "member host does not resolve (yet)");
                            continue;
                        }
                    }
                    // Published host by host: a slow lookup delays no other member.
                    admission.publish(&known);
                }
                admission.publish(&known);
                tokio::time::sleep(RESOLVE_INTERVAL).await;
            }
        })
    }

    fn publish(&self, known: &HashMap<String, Vec<IpAddr>>) {
        let addresses = known.values().flatten().copied().collect();
        *self
            .voter_addresses
            .write()
            .unwrap_or_else(|e| e.into_inner()) = addresses;
    }

    /// Places for a connection from `ip`, or why there are none.
    pub fn admit(&self, ip: IpAddr) -> Result<Ticket, Refusal> {
        let from_voter = self
            .voter_addresses
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&ip);
        let pool = if from_voter {
            &self.voters
        } else {
            &self.strangers
        };
        let Ok(pool) = pool.clone().try_acquire_owned() else {
            return Err(if from_voter {
                Refusal::VoterPool
            } else {
                Refusal::StrangerPool
            });
        };
        let address = AddressSlot::take(&self.per_ip, ip).ok_or(Refusal::OneAddress)?;
        Ok(Ticket {
            _pool: pool,
            _address: address,
        })
    }
}

/// One connection's place in the per-address count.
struct AddressSlot {
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl AddressSlot {
    fn take(counts: &Arc<Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr) -> Option<AddressSlot> {
        let mut map = counts.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(ip).or_insert(0);
        if *n >= MAX_CONNECTIONS_PER_IP {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            counts: counts.clone(),
            ip,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut map = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn with_voters(voters: &[u8]) -> Admission {
        let admission = Admission::new(Box::new(Vec::new));
        *admission.voter_addresses.write().expect("lock") = voters.iter().map(|&v| ip(v)).collect();
        admission
    }

    #[test]
    fn strangers_fill_only_their_own_pool() {
        let admission = with_voters(&[1, 2, 3]);
        let mut held = Vec::new();
        for stranger in 10..20 {
            while let Ok(ticket) = admission.admit(ip(stranger)) {
                held.push(ticket);
            }
        }
        assert_eq!(held.len(), MAX_STRANGER_CONNECTIONS);
        assert_eq!(admission.admit(ip(99)).err(), Some(Refusal::StrangerPool));
        let voter = admission
            .admit(ip(2))
            .expect("a voter's address still gets in");
        drop(voter);
    }

    #[test]
    fn one_address_takes_at_most_its_share_and_gets_it_back() {
        let admission = with_voters(&[1]);
        let held: Vec<Ticket> = (0..MAX_CONNECTIONS_PER_IP)
            .map(|_| admission.admit(ip(1)).expect("admit"))
            .collect();
        assert_eq!(admission.admit(ip(1)).err(), Some(Refusal::OneAddress));
        drop(held);
        assert!(
            admission.admit(ip(1)).is_ok(),
            "closed connections' places were not returned"
        );
    }

    #[tokio::test]
    async fn the_resolver_learns_the_voters_addresses() {
        let admission = Arc::new(Admission::new(Box::new(|| {
            vec![
                "127.0.0.7".into(),
                "::1".into(),
                "no-such-host.invalid".into(),
            ]
        })));
        let resolver = admission.spawn_resolver();
        for _ in 0..100 {
            if admission
                .voter_addresses
                .read()
                .expect("lock")
                .contains(&ip(7))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        resolver.abort();
        let addresses = admission.voter_addresses.read().expect("lock").clone();
        assert!(
            addresses.contains(&ip(7))
                && addresses.contains(&IpAddr::from(std::net::Ipv6Addr::LOCALHOST)),
            "{addresses:?}"
        );
    }
}
