//! Each key's share of a service's time, on an injected clock: charged what its work took,
//! credited its share as time passes, waiting off its debt while other keys go.

use std::time::{Duration, Instant};

use kube_retention_runtime::time_shares::TimeShares;

const MS: Duration = Duration::from_millis(1);

#[test]
fn a_namespace_in_debt_waits_until_its_share_has_paid_for_what_it_took() {
    let start = Instant::now();
    let mut shares = TimeShares::new(0.05, Duration::ZERO);
    assert_eq!(shares.ready_at(&"a", start), None, "no account: may go");
    shares.charge(&"a", 100 * MS, start);
    assert_eq!(
        shares.ready_at(&"a", start),
        Some(start + Duration::from_secs(2)),
        "100 ms at a twentieth of a core is paid off in two seconds"
    );
    assert_eq!(
        shares.ready_at(&"a", start + Duration::from_secs(1)),
        Some(start + Duration::from_secs(2))
    );
    assert_eq!(shares.ready_at(&"a", start + Duration::from_secs(2)), None);
    assert_eq!(shares.ready_at(&"b", start), None, "b pays nothing for a");
}

#[test]
fn credit_builds_up_to_the_burst_and_no_further() {
    let start = Instant::now();
    let mut shares = TimeShares::new(0.5, 200 * MS);
    // A quiet namespace has its burst: 200 ms of work before it waits.
    shares.charge(&"a", 150 * MS, start);
    assert_eq!(shares.ready_at(&"a", start), None);
    shares.charge(&"a", 100 * MS, start);
    assert_eq!(shares.ready_at(&"a", start), Some(start + 100 * MS));
    // An hour of quiet earns the burst, not an hour's credit.
    let later = start + Duration::from_secs(3600);
    shares.charge(&"a", 250 * MS, later);
    assert_eq!(shares.ready_at(&"a", later), Some(later + 100 * MS));
}

#[test]
fn accounts_back_at_full_credit_are_forgotten_once_there_are_many() {
    let start = Instant::now();
    let mut shares = TimeShares::new(0.05, 250 * MS);
    for n in 0..300 {
        shares.charge(&n, MS, start);
    }
    assert!(shares.accounts() > 256);
    let later = start + Duration::from_secs(60);
    shares.charge(&-1, Duration::from_secs(1), later);
    assert_eq!(shares.accounts(), 1, "only the one in debt is kept");
    assert!(shares.ready_at(&-1, later).is_some());
}
