//! Real network partitions between cluster nodes: each node in its own
//! Linux network namespace, joined by veth pairs to a bridge in the test's
//! namespace (which holds the bridge's address, so the test's clients reach
//! every node throughout). Cuts are routes inside the namespaces: a
//! `blackhole` route to a peer drops everything that node sends to it, so
//! `cut(a, b)` (both directions) severs a and b while each still reaches the
//! third node and the test — a partition that is not transitive —, and
//! `isolate(a)` cuts a from every peer.
//!
//! Everything is named after the test process's pid and a counter and
//! removed on drop (also after a panic). Needs root and `ip` (iproute2);
//! `Network::usable` tries it once, so tests skip cleanly elsewhere.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};

static NEXT: AtomicU32 = AtomicU32::new(0);

pub struct Network {
    bridge: String,
    namespaces: Vec<String>,
    hosts: Vec<String>,
    /// (from, to) pairs currently dropped (node indexes, 0-based).
    cuts: Vec<(usize, usize)>,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running ip")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Network {
    /// Whether this machine lets a test create namespaces, a bridge and
    /// veth pairs (root with CAP_NET_ADMIN, iproute2, the kernel's bridge
    /// and veth support): tried once, with a one-node network. When not,
    /// says why on stderr.
    pub fn usable() -> bool {
        static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *USABLE.get_or_init(|| match Network::new(1) {
            Ok(_) => true,
            Err(e) => {
                eprintln!("network namespaces unavailable here: {e:#}");
                false
            }
        })
    }

    /// `nodes` namespaces on a fresh /24 of 198.18.0.0/15 (RFC 2544's
    /// benchmarking range: no real network is there), picked from the pid.
    pub fn new(nodes: usize) -> Result<Network> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let tag = format!("{:x}{n}", pid % 0xffff);
        let (b, c) = (18 + n % 2, (pid.wrapping_mul(7) + n / 2) % 250 + 1);
        let mut net = Network {
            bridge: format!("chb{tag}"),
            namespaces: Vec::new(),
            hosts: Vec::new(),
            cuts: Vec::new(),
        };
        ip(&["link", "add", &net.bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("198.{b}.{c}.254/24"),
            "dev",
            &net.bridge,
        ])?;
        ip(&["link", "set", &net.bridge, "up"])?;
        for i in 1..=nodes {
            let ns = format!("chn{tag}-{i}");
            let veth = format!("chv{tag}{i}");
            ip(&["netns", "add", &ns])?;
            net.namespaces.push(ns.clone());
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            ip(&["link", "set", &veth, "master", &net.bridge, "up"])?;
            let host = format!("198.{b}.{c}.{i}");
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{host}/24"),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            net.hosts.push(host);
        }
        Ok(net)
    }

    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// Node `from` (1-based) can no longer send to node `to`.
    pub fn cut_one_way(&mut self, from: usize, to: usize) -> Result<()> {
        let (f, t) = (from - 1, to - 1);
        if self.cuts.contains(&(f, t)) {
            return Ok(());
        }
        self.blackhole_route("add", (f, t))?;
        self.cuts.push((f, t));
        Ok(())
    }

    /// Nodes `a` and `b` can no longer talk (each still reaches the rest).
    pub fn cut(&mut self, a: usize, b: usize) -> Result<()> {
        self.cut_one_way(a, b)?;
        self.cut_one_way(b, a)
    }

    /// Node `a` is cut from every other node; clients still reach it.
    pub fn isolate(&mut self, a: usize) -> Result<()> {
        for b in 1..=self.hosts.len() {
            if b != a {
                self.cut(a, b)?;
            }
        }
        Ok(())
    }

    /// Removes every cut.
    pub fn heal(&mut self) -> Result<()> {
        for cut in std::mem::take(&mut self.cuts) {
            self.blackhole_route("del", cut)?;
        }
        Ok(())
    }

    /// `ip route <action> blackhole` in node `from`'s namespace for node
    /// `to`'s address (0-based indexes): the route that makes one cut.
    fn blackhole_route(&self, action: &str, (from, to): (usize, usize)) -> Result<()> {
        ip(&[
            "-n",
            &self.namespaces[from],
            "route",
            action,
            "blackhole",
            &format!("{}/32", self.hosts[to]),
        ])
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}
