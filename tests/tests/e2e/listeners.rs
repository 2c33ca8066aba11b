//! A TCP listener that counts the connections it accepts, for tests that prove no connection
//! reached an address: on 127.0.0.1, or on an address added to the loopback interface for the
//! test (169.254.169.254), where a connection stays on this machine and the listener sees it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result, ensure};
use tokio::net::TcpListener;

/// A TCP listener on `host` that counts the connections it accepts. A host outside 127/8 is
/// added to the loopback interface for the test and removed after; one already there (left by a
/// run that was killed, or put there by the machine's owner) is used and left as it was found.
pub struct Listener {
    pub address: std::net::SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
    added: Option<String>,
}

impl Listener {
    pub async fn start(host: &str) -> Result<Self> {
        let added = match host.starts_with("127.") {
            true => None,
            false => add_to_loopback(host)?,
        };
        let listener = TcpListener::bind((host, 0))
            .await
            .with_context(|| format!("listening on {host}"))?;
        let address = listener.local_addr()?;
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::Relaxed);
                drop(stream);
            }
        });
        Ok(Self {
            address,
            accepted,
            task,
            added,
        })
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(address) = &self.added {
            let removed = std::process::Command::new("ip")
                .args(["address", "del", address, "dev", "lo"])
                .status();
            if !removed.is_ok_and(|status| status.success()) {
                eprintln!(
                    "could not remove {address} from lo: run `ip address del {address} dev lo`"
                );
            }
        }
    }
}

/// Adds `host`/32 to `lo`; answers the address to remove afterwards, none if `lo` had it
/// already.
fn add_to_loopback(host: &str) -> Result<Option<String>> {
    let address = format!("{host}/32");
    let shown = std::process::Command::new("ip")
        .args(["-o", "address", "show", "dev", "lo", "to", &address])
        .output()
        .context("running ip (iproute2)")?;
    if shown.status.success() && !shown.stdout.is_empty() {
        return Ok(None);
    }
    let output = std::process::Command::new("ip")
        .args(["address", "add", &address, "dev", "lo"])
        .output()
        .context("running ip (iproute2)")?;
    ensure!(
        output.status.success(),
        "could not add {address} to lo (listening there needs root, or CAP_NET_ADMIN): {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(Some(address))
}
