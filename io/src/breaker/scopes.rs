//! Whose breaker holds a DELETE, pure and clock-injected: each namespace's own
//! (`--circuit-breaker`), and the cluster's over every namespace's total
//! (`--cluster-circuit-breaker`). A namespace's burst opens that namespace's breaker only:
//! the other namespaces' DELETEs go on, and each counts toward the cluster's total, which opens
//! the cluster's breaker — holding every DELETE — only past its own limit.
//!
//! Memory is bounded whatever the tenants do. A namespace is remembered only while its window
//! counts something, its breaker is open, or DELETEs of it wait: an idle one is forgotten. At
//! most [`MAX_COUNTED_NAMESPACES`] are remembered at once (a few hundred bytes each, whatever
//! the limit: [`DeletionWindow`] counts in buckets); the DELETEs of a namespace beyond them,
//! when every one remembered is busy, count toward the cluster's total only. At most
//! [`MAX_OPEN_NAMESPACES`] namespaces' breakers are open at once (what their ConfigMap holds):
//! one more past its limit opens the cluster's breaker instead.
//!
//! Objects outside any namespace (the empty namespace) count toward the cluster's total only.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube_retention_common::breaker::MAX_OPEN_NAMESPACES;

use super::window::{Cause, DeletionWindow, Position, Trip};

/// Namespaces counted at once.
pub const MAX_COUNTED_NAMESPACES: usize = 16_384;

/// A breaker's limit: more DELETEs than `deletions` within `window` open it (0: no breaker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub deletions: u32,
    pub window: Duration,
}

impl Limit {
    /// No breaker.
    pub const OFF: Self = Self {
        deletions: 0,
        window: Duration::ZERO,
    };

    pub fn is_on(&self) -> bool {
        self.deletions > 0
    }
}

/// Whose breaker a verdict is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    Cluster,
    Namespace(Arc<str>),
}

/// What a DELETE about to be sent is told, and by whose breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Send it; it is counted.
    Go,
    /// It would have gone past `scope`'s limit: that breaker opens now, and it waits.
    Trips(Scope, Trip),
    /// `scope`'s breaker is open, or the stored state is not known yet (the cluster's): it waits.
    Held(Scope),
}

/// A namespace remembered.
#[derive(Debug)]
struct Tenant {
    window: DeletionWindow,
    /// Its DELETEs waiting for a breaker to close (its own or the cluster's).
    waiting: usize,
}

#[derive(Debug)]
pub struct Breakers {
    cluster: DeletionWindow,
    per_namespace: Limit,
    namespaces: HashMap<Arc<str>, Tenant>,
    /// Namespaces whose breaker is open.
    open: usize,
    /// DELETEs waiting in all.
    waiting: usize,
}

impl Breakers {
    /// The cluster's breaker at `cluster`, each namespace's at `per_namespace`. Deletions wait
    /// until the stored state is known ([`Breakers::close`]), unless both are off.
    pub fn new(cluster: Limit, per_namespace: Limit) -> Self {
        let position = match cluster.is_on() || per_namespace.is_on() {
            true => Position::Unknown,
            false => Position::Closed,
        };
        Self {
            cluster: DeletionWindow::new(cluster.deletions, cluster.window, position),
            per_namespace,
            namespaces: HashMap::new(),
            open: 0,
            waiting: 0,
        }
    }

    /// The cluster's breaker.
    pub fn position(&self) -> &Position {
        self.cluster.position()
    }

    /// Namespaces whose breaker is open.
    pub fn open_namespaces(&self) -> usize {
        self.open
    }

    /// The namespaces whose breaker is open, and why.
    pub fn namespace_trips(&self) -> Vec<(Arc<str>, Trip)> {
        self.namespaces
            .iter()
            .filter_map(|(namespace, tenant)| match tenant.window.position() {
                Position::Open(trip) => Some((namespace.clone(), *trip)),
                _ => None,
            })
            .collect()
    }

    /// The namespace's breaker, if it is remembered.
    pub fn namespace_position(&self, namespace: &str) -> Option<&Position> {
        Some(self.namespaces.get(namespace)?.window.position())
    }

    /// Whether a DELETE in `namespace` would be held now (nothing is counted).
    pub fn holds(&self, namespace: &str) -> bool {
        self.cluster.holds()
            || self
                .namespaces
                .get(namespace)
                .is_some_and(|tenant| tenant.window.holds())
    }

    /// A DELETE in `namespace` is about to be sent at `now` (`wall` on the wall clock).
    pub fn admit(&mut self, namespace: &str, now: Instant, wall: Timestamp) -> Verdict {
        if self.cluster.holds() {
            return Verdict::Held(Scope::Cluster);
        }
        let counted = match self.tenant(namespace, now) {
            Some((name, tenant)) if tenant.window.holds() => {
                return Verdict::Held(Scope::Namespace(name));
            }
            Some((name, tenant)) => match tenant.window.has_room(now) {
                true => Some(name),
                false => return self.trip_namespace(name, wall),
            },
            None => None,
        };
        if !self.cluster.has_room(now) {
            let trip = self.cluster.trip(wall);
            return Verdict::Trips(Scope::Cluster, trip);
        }
        self.cluster.count(now);
        if let Some(tenant) = counted.and_then(|name| self.namespaces.get_mut(&name)) {
            tenant.window.count(now);
        }
        Verdict::Go
    }

    /// The namespace `name` went past its limit: its breaker opens, or, with
    /// [`MAX_OPEN_NAMESPACES`] open already, the cluster's.
    fn trip_namespace(&mut self, name: Arc<str>, wall: Timestamp) -> Verdict {
        if self.open >= MAX_OPEN_NAMESPACES {
            let limit = self.cluster.limit();
            let window = self.per_namespace.window;
            let trip = Trip {
                at: wall,
                limit,
                window,
                cause: Cause::NamespacesOpen,
            };
            self.cluster.open(trip);
            return Verdict::Trips(Scope::Cluster, trip);
        }
        let Some(tenant) = self.namespaces.get_mut(&name) else {
            return Verdict::Go;
        };
        let trip = tenant.window.trip(wall);
        self.open += 1;
        Verdict::Trips(Scope::Namespace(name), trip)
    }

    /// `namespace`'s window, remembered from now on if there is room; `None` for the empty
    /// namespace, with no per-namespace breaker, or when every place is taken by a busy one.
    fn tenant(&mut self, namespace: &str, now: Instant) -> Option<(Arc<str>, &mut Tenant)> {
        if namespace.is_empty() || !self.per_namespace.is_on() {
            return None;
        }
        if !self.namespaces.contains_key(namespace) {
            if self.namespaces.len() >= MAX_COUNTED_NAMESPACES {
                self.forget_idle(now);
            }
            if self.namespaces.len() >= MAX_COUNTED_NAMESPACES {
                tracing::debug!(
                    namespace,
                    "{MAX_COUNTED_NAMESPACES} namespaces counted already: this one's deletions count toward the cluster's total only"
                );
                return None;
            }
            let Limit { deletions, window } = self.per_namespace;
            let tenant = Tenant {
                window: DeletionWindow::new(deletions, window, Position::Closed),
                waiting: 0,
            };
            self.namespaces.insert(Arc::from(namespace), tenant);
        }
        let name = self.namespaces.get_key_value(namespace)?.0.clone();
        let tenant = self.namespaces.get_mut(namespace)?;
        Some((name, tenant))
    }

    /// Forgets the namespaces that remember nothing at `now`.
    pub fn forget_idle(&mut self, now: Instant) {
        self.namespaces
            .retain(|_, tenant| tenant.waiting > 0 || !tenant.window.is_idle(now));
    }

    /// `count` more DELETEs of `namespace` wait for a breaker to close.
    pub fn hold(&mut self, namespace: &str, count: usize) {
        self.waiting += count;
        if let Some(tenant) = self.namespaces.get_mut(namespace) {
            tenant.waiting += count;
        }
    }

    /// `count` DELETEs of `namespace` held no longer wait.
    pub fn held_went(&mut self, namespace: &str, count: usize) {
        self.waiting = self.waiting.saturating_sub(count);
        if let Some(tenant) = self.namespaces.get_mut(namespace) {
            tenant.waiting = tenant.waiting.saturating_sub(count);
        }
    }

    /// DELETEs waiting for a breaker to close.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// The stored state says the cluster's breaker is open.
    pub fn open(&mut self, trip: Trip) {
        self.cluster.open(trip);
    }

    /// The stored state says the cluster's breaker is closed, and every namespace's open one is
    /// known: deletions go where no namespace's breaker holds them. A release if it was open:
    /// what waited goes uncounted by the cluster's count.
    pub fn close(&mut self) {
        self.cluster.close(self.waiting);
    }

    /// The stored state says `namespace`'s breaker is open (a trip before a restart, or another
    /// replica's). Ignored without a per-namespace breaker, or with [`MAX_OPEN_NAMESPACES`]
    /// open already (the ConfigMap holds no more; written by hand, it could).
    pub fn open_namespace(&mut self, namespace: &str, trip: Trip) {
        if namespace.is_empty() || !self.per_namespace.is_on() {
            return;
        }
        if let Some(tenant) = self.namespaces.get_mut(namespace) {
            if !matches!(tenant.window.position(), Position::Open(_)) {
                tenant.window.open(trip);
                self.open += 1;
            }
            return;
        }
        if self.open >= MAX_OPEN_NAMESPACES {
            tracing::warn!(
                namespace,
                "the namespaces' breakers' ConfigMap names more than {MAX_OPEN_NAMESPACES} namespaces: this one is not held"
            );
            return;
        }
        let Limit { deletions, window } = self.per_namespace;
        let mut window = DeletionWindow::new(deletions, window, Position::Closed);
        window.open(trip);
        let tenant = Tenant { window, waiting: 0 };
        self.namespaces.insert(Arc::from(namespace), tenant);
        self.open += 1;
    }

    /// The stored state says `namespace`'s breaker is closed: a release if it was open, its
    /// count starting afresh and what it held going uncounted by it (the cluster's total still
    /// counts them).
    pub fn close_namespace(&mut self, namespace: &str) {
        if let Some(tenant) = self.namespaces.get_mut(namespace)
            && matches!(tenant.window.position(), Position::Open(_))
        {
            tenant.window.close(tenant.waiting);
            self.open -= 1;
        }
    }
}
