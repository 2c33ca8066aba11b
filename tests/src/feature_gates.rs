//! The API server's feature gates, as its `kubernetes_feature_enabled` metric says: what
//! differs between Kubernetes minors (or an admin's `--feature-gates`) is read from the server
//! itself, by the e2e suite and by `make test-matrix`.

use anyhow::Result;

use crate::{LocalCluster, run};

/// The API server's `/metrics`, as the admin reads them.
pub fn api_server_metrics(cluster: &LocalCluster) -> Result<String> {
    run(cluster.kubectl().args(["get", "--raw", "/metrics"]))
}

/// Whether `gate` is on in `metrics` (the API server's); `None` where the server has no such
/// gate.
pub fn enabled(metrics: &str, gate: &str) -> Option<bool> {
    let series = format!("kubernetes_feature_enabled{{name=\"{gate}\",");
    metrics
        .lines()
        .find(|line| line.starts_with(&series))
        .and_then(|line| line.rsplit(' ').next())
        .map(|value| value == "1")
}

#[cfg(test)]
mod tests {
    use super::enabled;

    #[test]
    fn a_gate_is_read_from_the_api_servers_metric() {
        let metrics = "# TYPE kubernetes_feature_enabled gauge\n\
            kubernetes_feature_enabled{name=\"WatchList\",stage=\"BETA\"} 0\n\
            kubernetes_feature_enabled{name=\"WatchListClient\",stage=\"BETA\"} 1\n";
        assert_eq!(enabled(metrics, "WatchList"), Some(false));
        assert_eq!(enabled(metrics, "WatchListClient"), Some(true));
        assert_eq!(enabled(metrics, "MutatingAdmissionPolicy"), None);
    }
}
