//! What the controller learns of the cluster's insides, to deny as sinks: the service CIDRs,
//! the nodes' pod CIDRs and addresses, the API server's endpoints — ranges no flag can list
//! ahead of time, since they change as the cluster does. This is the index of those ranges by
//! the object that says them, fed apply, delete and reset (a fresh list of a kind) by its one
//! owner in the controller, which publishes the policy [`SinkPolicy::with_learned`] makes of it
//! after every change. Pure: the watches are the controller's.
//!
//! A range is denied while any object says it (two nodes behind one NAT share an ExternalIP),
//! and each change answers what entered and left the deny list, for the admin's log.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;

use super::SinkPolicy;

/// Which of the cluster's insides a learned range is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Inside {
    /// A ServiceCIDR's range: every Service's ClusterIP.
    ServiceCidr,
    /// A Node's `spec.podCIDRs`: its pods' addresses.
    PodCidr,
    /// A Node's InternalIP or ExternalIP: its kubelet, its host-network pods, its NodePorts.
    NodeAddress,
    /// An address of the `kubernetes` Service's EndpointSlices: an API server.
    ApiServerEndpoint,
}

impl Inside {
    pub const ALL: [Self; 4] = [
        Self::ServiceCidr,
        Self::PodCidr,
        Self::NodeAddress,
        Self::ApiServerEndpoint,
    ];

    /// Why a sink in it is refused, as the Cleaner's Event says it: what it is, never which
    /// object said so (the admin's log names that), so a refusal does not name nodes to a
    /// namespace editor.
    pub fn why(self) -> &'static str {
        match self {
            Self::ServiceCidr => "the cluster's service CIDR",
            Self::PodCidr => "a node's pod CIDR",
            Self::NodeAddress => "a node's address",
            Self::ApiServerEndpoint => "an API server endpoint",
        }
    }

    /// Its name in metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::ServiceCidr => "service_cidr",
            Self::PodCidr => "pod_cidr",
            Self::NodeAddress => "node_address",
            Self::ApiServerEndpoint => "api_server_endpoint",
        }
    }
}

/// A learned range and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Range {
    pub net: IpNet,
    pub inside: Inside,
}

impl Range {
    pub fn new(net: IpNet, inside: Inside) -> Self {
        Self {
            net: net.trunc(),
            inside,
        }
    }
}

/// The ranges an update added to and removed from the deny list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    pub added: Vec<Range>,
    pub removed: Vec<Range>,
}

impl Change {
    /// Whether the deny list is as it was.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }

    /// The change of `self` then `next`: a range removed by one and added by the other is as it
    /// was.
    fn then(mut self, next: Change) -> Change {
        for range in next.added {
            match self.removed.iter().position(|removed| *removed == range) {
                Some(index) => {
                    self.removed.swap_remove(index);
                }
                None => self.added.push(range),
            }
        }
        for range in next.removed {
            match self.added.iter().position(|added| *added == range) {
                Some(index) => {
                    self.added.swap_remove(index);
                }
                None => self.removed.push(range),
            }
        }
        self
    }
}

/// The learned ranges by the object that says them (its kind and name).
#[derive(Debug, Clone, Default)]
pub struct Learned {
    objects: BTreeMap<(&'static str, String), BTreeSet<Range>>,
    /// How many objects say each range.
    sayers: BTreeMap<Range, usize>,
}

impl Learned {
    /// `kind` `name` now says `ranges` (in place of what it said before).
    pub fn apply(
        &mut self,
        kind: &'static str,
        name: &str,
        ranges: impl IntoIterator<Item = Range>,
    ) -> Change {
        let ranges: BTreeSet<Range> = ranges.into_iter().collect();
        let key = (kind, name.to_owned());
        if self.objects.get(&key) == Some(&ranges) {
            return Change::default();
        }
        let before = match ranges.is_empty() {
            true => self.objects.remove(&key),
            false => self.objects.insert(key, ranges.clone()),
        }
        .unwrap_or_default();
        let mut change = Change::default();
        for range in before.difference(&ranges) {
            if let Some(sayers) = self.sayers.get_mut(range) {
                *sayers -= 1;
                if *sayers == 0 {
                    self.sayers.remove(range);
                    change.removed.push(*range);
                }
            }
        }
        for range in ranges.difference(&before) {
            let sayers = self.sayers.entry(*range).or_default();
            *sayers += 1;
            if *sayers == 1 {
                change.added.push(*range);
            }
        }
        change
    }

    /// `kind` `name` is gone.
    pub fn delete(&mut self, kind: &'static str, name: &str) -> Change {
        self.apply(kind, name, [])
    }

    /// A fresh list of `kind`: these objects and no others.
    pub fn reset(
        &mut self,
        kind: &'static str,
        objects: impl IntoIterator<Item = (String, Vec<Range>)>,
    ) -> Change {
        let mut change = Change::default();
        let mut listed = BTreeSet::new();
        for (name, ranges) in objects {
            change = change.then(self.apply(kind, &name, ranges));
            listed.insert(name);
        }
        let gone: Vec<String> = self
            .objects
            .keys()
            .filter(|(known, name)| *known == kind && !listed.contains(name))
            .map(|(_, name)| name.clone())
            .collect();
        for name in gone {
            change = change.then(self.delete(kind, &name));
        }
        change
    }

    /// Every learned range, once.
    pub fn ranges(&self) -> impl Iterator<Item = &Range> {
        self.sayers.keys()
    }

    /// How many distinct ranges of `inside` are learned.
    pub fn count(&self, inside: Inside) -> usize {
        self.ranges().filter(|range| range.inside == inside).count()
    }
}

impl SinkPolicy {
    /// This policy with every range of `learned` denied too, each saying what it is.
    pub fn with_learned(&self, learned: &Learned) -> Self {
        let mut policy = self.clone();
        for range in learned.ranges() {
            policy.deny(range.net, range.inside.why());
        }
        policy
    }
}
