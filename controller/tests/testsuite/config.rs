//! The configuration the flags make ([`Config::from_args`]): each part's group carries what its
//! flags say, with what they mean decided once (the propagation policy as the API takes it, the
//! stamping, the Lease's duration) and nothing left at a default the flags changed.

use std::time::Duration;

use clap::Parser;
use kube::api::PropagationPolicy;
use kube_retention_controller::Config;
use kube_retention_controller::args::Args;
use kube_retention_state::Stamping;

fn config(flags: &[&str]) -> Config {
    let args = Args::try_parse_from(
        std::iter::once("kube-retention-controller").chain(flags.iter().copied()),
    )
    .expect("the flags parse");
    Config::from_args(&args)
}

#[test]
fn every_group_carries_what_its_flags_say() {
    let config = config(&[
        "--qps=7",
        "--concurrency=3",
        "--propagation-policy=Foreground",
        "--stamp=finished",
        "--events=0s",
        "--circuit-breaker=9/2m",
        "--cluster-circuit-breaker=90/20m",
        "--max-immediate-deletions=11",
        "--kind=example.com/v1/Widget",
        "--disable-kind=Pod",
        "--discovery-interval=0s",
        "--initial-list=pages",
        "--list-concurrency=1",
        "--leader-election=false",
        "--lease-name=other",
        "--lease-namespace=ops",
        "--identity=replica-2",
        "--lease-duration=20",
        "--cleaners=false",
        "--ledger-sink=https://ledger.example.com/",
        "--ledger-queue=12",
        "--pod-ip=10.0.0.7",
    ]);
    assert_eq!(config.deletions.qps, 7);
    assert_eq!(config.deletions.concurrency, 3);
    assert_eq!(config.deletions.propagation, PropagationPolicy::Foreground);
    assert_eq!(config.deletions.stamping, Stamping::Finished);
    assert_eq!(config.deletions.event_window, Duration::ZERO);
    assert_eq!(config.breaker.per_namespace.deletions, 9);
    assert_eq!(
        config.breaker.per_namespace.window,
        Duration::from_secs(120)
    );
    assert_eq!(config.breaker.cluster.deletions, 90);
    assert_eq!(config.breaker.cluster.window, Duration::from_secs(1200));
    assert_eq!(config.max_immediate_deletions, 11);
    assert_eq!(config.kinds.selection.kinds, ["example.com/v1/Widget"]);
    assert_eq!(config.kinds.selection.disabled_kinds, ["Pod"]);
    assert_eq!(config.kinds.discovery_interval, Duration::ZERO);
    assert_eq!(config.lists.concurrency, 1);
    assert!(!config.lease.election);
    assert_eq!(config.lease.name, "other");
    assert_eq!(config.lease.namespace, "ops");
    assert_eq!(config.lease.identity, "replica-2");
    assert_eq!(config.lease.duration, Duration::from_secs(20));
    assert!(!config.cleaners);
    assert_eq!(
        config.ledger.sink.as_deref(),
        Some("https://ledger.example.com/")
    );
    assert_eq!(config.ledger.queue, 12);
    assert_eq!(config.pod_ip, Some("10.0.0.7".parse().expect("an address")));
    assert_eq!(
        config.api_server, None,
        "the client's configuration sets it, not a flag"
    );
}

#[test]
fn without_flags_the_defaults_decide_and_an_identity_is_found() {
    let config = config(&[]);
    assert_eq!(config.deletions.propagation, PropagationPolicy::Background);
    assert_eq!(config.deletions.stamping, Stamping::Never);
    assert!(config.lease.election && config.cleaners && config.deletions.events);
    assert_eq!(config.lease.name, kube_retention_controller::NAME);
    assert!(
        !config.lease.identity.is_empty(),
        "the host's name, else the controller's"
    );
    let breaker = config.breaker;
    assert_eq!(
        (
            breaker.per_namespace.deletions,
            breaker.per_namespace.window
        ),
        (1_000, Duration::from_secs(600)),
        "each namespace's circuit breaker is on unless the admin turns it off"
    );
    assert_eq!(
        (breaker.cluster.deletions, breaker.cluster.window),
        (10_000, Duration::from_secs(600)),
        "the cluster's circuit breaker is on unless the admin turns it off"
    );
}

#[test]
fn events_and_the_circuit_breaker_each_take_one_flag() {
    assert!(!config(&["--events=off"]).deletions.events);
    assert!(!config(&["--events=false"]).deletions.events, "as before");
    let on = config(&["--events=on"]).deletions;
    assert!(on.events);
    assert_eq!(on.event_window, Duration::from_secs(5));
    let each = config(&["--events=0s"]).deletions;
    assert!(each.events, "0s: an Event per deletion, not none");
    assert_eq!(each.event_window, Duration::ZERO);
    let off = config(&["--circuit-breaker=off"]).breaker;
    assert!(!off.per_namespace.is_on() && off.cluster.is_on() && off.is_on());
    let off = config(&["--circuit-breaker=0/1m", "--cluster-circuit-breaker=OFF"]).breaker;
    assert!(!off.per_namespace.is_on() && !off.cluster.is_on() && !off.is_on());
    for (flag, says) in [
        (
            "--circuit-breaker=10000",
            "expected DELETIONS/WINDOW such as 10000/10m, or off",
        ),
        ("--circuit-breaker=many/10m", "deletions \"many\""),
        ("--circuit-breaker=5/soon", "window \"soon\""),
        (
            "--cluster-circuit-breaker=5/0s",
            "a window of zero counts nothing",
        ),
        (
            "--events=sometimes",
            "expected off, on, or a window such as 5s",
        ),
    ] {
        let error = Args::try_parse_from(["kube-retention-controller", flag])
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(error.contains(says), "{flag}: {error}");
        assert!(
            error.contains(flag.split('=').next().unwrap_or(flag)),
            "{error}"
        );
    }
}
