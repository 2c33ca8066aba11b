//! The Cleaners' loop's watches of their targets: discovery for the kinds they refer to (at most
//! [`DISCOVERIES`] lookups at once, the next started as one answers: a tenant's Cleaners may
//! name any number of kinds, each a request to the API server), and
//! one watch per scope the book plans ([`crate::book::Book::plan_watches`]),
//! restarted at most every [`RESTART_EVERY`], stopped when no Cleaner refers to it. Each is
//! a watch of the shared [`kube_retention_io::watch_set::WatchSet`]: its list takes a turn.

use std::collections::HashSet;

use futures::StreamExt;
use kube::api::{Api, ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use kube_retention_runtime::discovery::served;
use tokio::time::Instant;

use super::{Cleaners, RESTART_EVERY, TargetRead, Watched};
use crate::book::{KindState, Scope, ScopeWatch, Unavailable};
use kube_retention_io::lean::{LeanMetaText, LeanText};

/// Discovery lookups of Cleaners' kinds under way at once.
pub const DISCOVERIES: usize = 4;

impl Cleaners {
    /// Starts discovery for new kinds, and the watches the book plans; stops the others.
    pub(super) fn follow_kinds(&mut self) {
        let room = DISCOVERIES.saturating_sub(self.resolving.len());
        let resolve: Vec<GroupVersionKind> = self
            .book
            .kinds()
            .filter(|(kind, state)| {
                matches!(state, KindState::Resolving) && !self.resolving.contains(*kind)
            })
            .map(|(kind, _)| kind.clone())
            .take(room)
            .collect();
        for kind in resolve {
            self.resolving.insert(kind.clone());
            let (client, answers) = (self.client.clone(), self.resolutions.0.clone());
            tokio::spawn(async move {
                let answer = match served(&client, &kind.api_version(), &kind.kind).await {
                    Ok(Some(served)) => Ok(served.resource),
                    Ok(None) => Err(Unavailable::NotServed(format!(
                        "{} serves no {}",
                        kind.api_version(),
                        kind.kind
                    ))),
                    Err(error) => Err(Unavailable::NotServed(error.to_string())),
                };
                answers.send((kind, answer)).ok();
            });
        }
        let Some(plan) = self.book.plan_watches() else {
            return;
        };
        let mut planned = HashSet::new();
        let now = Instant::now();
        for (scope, resource, how) in plan {
            planned.insert(scope.clone());
            match self.watching.get(&scope) {
                Some((watching, _)) if watching == &how => continue,
                Some((_, started)) if now < *started + RESTART_EVERY => {
                    self.book.scope_waits(&scope);
                    let at = *started + RESTART_EVERY;
                    self.replan_at = Some(self.replan_at.map_or(at, |other| other.min(at)));
                    continue;
                }
                _ => {}
            }
            self.stop(&scope);
            self.watch(&scope, &resource, &how);
            self.book.watch_started(&scope, resource, &how);
        }
        let unplanned: Vec<Scope> = self
            .watching
            .keys()
            .filter(|scope| !planned.contains(*scope))
            .cloned()
            .collect();
        for scope in unplanned {
            self.stop(&scope);
        }
    }

    /// Starts the watch of `scope`, as narrow as `how`: in its namespace only, with the
    /// selectors every reference shares, and metadata only where no condition reads bodies.
    fn watch(&mut self, scope: &Scope, resource: &ApiResource, how: &ScopeWatch) {
        let mut config = watcher::Config::default();
        if let Some(labels) = &how.labels {
            config = config.labels(labels);
        }
        if let Some(fields) = &how.fields {
            config = config.fields(fields);
        }
        let what = format!("Cleaners' {} in {}", scope.kind.kind, scope.namespace);
        let (client, namespace) = (self.client.clone(), scope.namespace.as_str());
        let label = scope.clone();
        let events = match how.bodies {
            true => {
                let api: Api<LeanText> = Api::namespaced_with(client, namespace, resource);
                self.watches
                    .objects(api, config, what.clone())
                    .map(move |event| TargetRead::Objects(label.clone(), event))
                    .boxed()
            }
            false => {
                let api: Api<LeanMetaText> = Api::namespaced_with(client, namespace, resource);
                self.watches
                    .objects(api, config, what.clone())
                    .map(move |event| TargetRead::Metadata(label.clone(), event))
                    .boxed()
            }
        };
        self.watches
            .start(Watched::Targets(scope.clone()), what, events);
        self.watching
            .insert(scope.clone(), (how.clone(), Instant::now()));
    }

    pub(super) fn stop(&mut self, scope: &Scope) {
        self.watching.remove(scope);
        self.watches.stop(&Watched::Targets(scope.clone()));
    }
}
