//! Deciding what a webhook's certificate Secret should hold: keep what is valid, renew what is
//! about to expire, and keep the previous CA in the caBundle while certificates it signed may
//! still be served.
//!
//! The Secret holds `ca.crt`, `ca.key`, `tls.crt`, `tls.key` and, after a CA rotation,
//! `ca-previous.crt`. Pure: the caller reads and writes the Secret.

use std::collections::BTreeMap;

use ::time::{Duration, OffsetDateTime};
use x509_parser::prelude::*;

use crate::{CertificateAuthority, Result};

pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const CA_PREVIOUS: &str = "ca-previous.crt";
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";

/// How long certificates live and when they are renewed.
#[derive(Debug, Clone, Copy)]
pub struct Lifetimes {
    pub ca: Duration,
    pub serving: Duration,
    /// Renew a certificate once less than this much of its life is left.
    pub renew_before: Duration,
}

/// What a certificate PEM says about itself, if it parses.
struct Parsed {
    not_after: OffsetDateTime,
    names: Vec<String>,
    issuer: String,
    subject: String,
}

fn parse(pem_text: &str) -> Option<Parsed> {
    let (_, pem) = parse_x509_pem(pem_text.as_bytes()).ok()?;
    let (_, cert) = X509Certificate::from_der(&pem.contents).ok()?;
    let names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                    GeneralName::IPAddress(bytes) => ip_text(bytes),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Some(Parsed {
        not_after: cert.validity().not_after.to_datetime(),
        names,
        issuer: cert.issuer().to_string(),
        subject: cert.subject().to_string(),
    })
}

fn ip_text(bytes: &[u8]) -> Option<String> {
    let address: std::net::IpAddr = match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok()?.into(),
        16 => <[u8; 16]>::try_from(bytes).ok()?.into(),
        _ => return None,
    };
    Some(address.to_string())
}

/// The Secret data that should exist for serving `names`, given what exists now. Returns the
/// data unchanged (equal) when nothing needs renewing.
pub fn desired(
    current: &BTreeMap<String, String>,
    names: &[&str],
    lifetimes: Lifetimes,
    now: OffsetDateTime,
) -> Result<BTreeMap<String, String>> {
    // Fresh: more than renew_before left. Not "no longer than the configured lifetime": while a
    // rollout changes the lifetimes, old and new replicas would each find the other's
    // certificates wrong and rotate the CA back and forth, dropping one still served from the
    // caBundle. New lifetimes apply from the next renewal.
    let fresh = |pem: &str| {
        parse(pem).is_some_and(|parsed| parsed.not_after - now > lifetimes.renew_before)
    };
    let mut data = current.clone();

    let ca_usable = match (current.get(CA_CERT), current.get(CA_KEY)) {
        (Some(cert), Some(key)) if fresh(cert) => CertificateAuthority::from_pem(cert, key).ok(),
        _ => None,
    };
    let (ca, ca_rotated) = match ca_usable {
        Some(ca) => (ca, false),
        None => {
            let ca = CertificateAuthority::generate("kube-retention-webhook-ca", lifetimes.ca)?;
            match current.get(CA_CERT) {
                // Clients may still hold certificates from the old CA for a while: trust both.
                Some(old) if parse(old).is_some_and(|parsed| parsed.not_after > now) => {
                    data.insert(CA_PREVIOUS.into(), old.clone());
                }
                _ => {
                    data.remove(CA_PREVIOUS);
                }
            }
            data.insert(CA_CERT.into(), ca.certified().cert_pem.clone());
            data.insert(CA_KEY.into(), ca.certified().key_pem.clone());
            (ca, true)
        }
    };
    if data
        .get(CA_PREVIOUS)
        .is_some_and(|previous| parse(previous).is_none_or(|parsed| parsed.not_after <= now))
    {
        data.remove(CA_PREVIOUS);
    }

    let ca_subject = parse(&ca.certified().cert_pem).map(|parsed| parsed.subject);
    let serving_ok = !ca_rotated
        && current.contains_key(TLS_KEY)
        && current.get(TLS_CERT).is_some_and(|cert| {
            fresh(cert)
                && parse(cert).is_some_and(|parsed| {
                    Some(&parsed.issuer) == ca_subject.as_ref()
                        && names
                            .iter()
                            .all(|name| parsed.names.iter().any(|have| have == name))
                })
        });
    if !serving_ok {
        let serving = ca.issue_serving(names, lifetimes.serving)?;
        data.insert(TLS_CERT.into(), serving.cert_pem);
        data.insert(TLS_KEY.into(), serving.key_pem);
    }
    Ok(data)
}

/// The caBundle webhook configurations should carry: the CA, and the previous one while set.
pub fn ca_bundle(data: &BTreeMap<String, String>) -> String {
    [CA_CERT, CA_PREVIOUS]
        .iter()
        .filter_map(|key| data.get(*key))
        .map(|pem| pem.trim_end().to_owned() + "\n")
        .collect()
}

/// The Service DNS names a webhook Service answers to.
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIFETIMES: Lifetimes = Lifetimes {
        ca: Duration::days(3650),
        serving: Duration::days(90),
        renew_before: Duration::days(30),
    };

    fn now() -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    #[test]
    fn creates_everything_from_nothing_and_then_keeps_it() {
        let names = ["webhook.kube-retention.svc"];
        let first = desired(&BTreeMap::new(), &names, LIFETIMES, now()).unwrap();
        for key in [CA_CERT, CA_KEY, TLS_CERT, TLS_KEY] {
            assert!(first.contains_key(key), "{key}");
        }
        assert!(!first.contains_key(CA_PREVIOUS));
        let parsed = parse(&first[TLS_CERT]).unwrap();
        assert_eq!(parsed.names, names);
        let second = desired(&first, &names, LIFETIMES, now()).unwrap();
        assert_eq!(first, second, "nothing to renew: unchanged");
        assert_eq!(
            ca_bundle(&second),
            first[CA_CERT].trim_end().to_owned() + "\n"
        );
    }

    #[test]
    fn renews_the_serving_certificate_before_it_expires_keeping_the_ca() {
        let names = ["webhook.kube-retention.svc"];
        let first = desired(&BTreeMap::new(), &names, LIFETIMES, now()).unwrap();
        let later = now() + Duration::days(61);
        let renewed = desired(&first, &names, LIFETIMES, later).unwrap();
        assert_eq!(renewed[CA_CERT], first[CA_CERT]);
        assert_ne!(renewed[TLS_CERT], first[TLS_CERT]);
    }

    #[test]
    fn reissues_when_the_names_change() {
        let first = desired(&BTreeMap::new(), &["a.ns.svc"], LIFETIMES, now()).unwrap();
        let second = desired(&first, &["b.ns.svc"], LIFETIMES, now()).unwrap();
        assert_eq!(parse(&second[TLS_CERT]).unwrap().names, ["b.ns.svc"]);
        assert_eq!(second[CA_CERT], first[CA_CERT]);
    }

    #[test]
    fn rotating_the_ca_keeps_the_old_one_in_the_bundle_until_it_expires() {
        let short = Lifetimes {
            ca: Duration::days(40),
            ..LIFETIMES
        };
        let names = ["webhook.kube-retention.svc"];
        let first = desired(&BTreeMap::new(), &names, short, now()).unwrap();
        let later = now() + Duration::days(15);
        let rotated = desired(&first, &names, LIFETIMES, later).unwrap();
        assert_ne!(rotated[CA_CERT], first[CA_CERT]);
        assert_eq!(rotated[CA_PREVIOUS], first[CA_CERT]);
        assert_ne!(rotated[TLS_CERT], first[TLS_CERT], "reissued by the new CA");
        let bundle = ca_bundle(&rotated);
        assert!(bundle.contains(rotated[CA_CERT].trim()) && bundle.contains(first[CA_CERT].trim()));
        let after_old_expired = now() + Duration::days(41);
        let cleaned = desired(&rotated, &names, LIFETIMES, after_old_expired).unwrap();
        assert_eq!(cleaned[CA_CERT], rotated[CA_CERT]);
        assert!(!cleaned.contains_key(CA_PREVIOUS));
    }

    #[test]
    fn lifetimes_that_differ_agree_on_what_is_fresh() {
        // Replicas of two releases, one with shortened lifetimes, during a rollout: neither
        // renews what the other wrote while it is fresh for both, so they never take turns
        // rotating the CA.
        let names = ["webhook.kube-retention.svc"];
        let shorter = Lifetimes {
            ca: Duration::seconds(100),
            serving: Duration::seconds(40),
            renew_before: Duration::seconds(25),
        };
        let long = desired(&BTreeMap::new(), &names, LIFETIMES, now()).unwrap();
        assert_eq!(desired(&long, &names, shorter, now()).unwrap(), long);
        let short = desired(&BTreeMap::new(), &names, shorter, now()).unwrap();
        let left = parse(&short[TLS_CERT]).unwrap().not_after - now();
        assert!(left <= Duration::seconds(40), "{left}");
        // With 40 s left of its 100, the short CA is renewed by the release that wants 30 days
        // ahead, and the previous CA stays in the bundle.
        let renewed = desired(&short, &names, LIFETIMES, now()).unwrap();
        assert_eq!(renewed[CA_PREVIOUS], short[CA_CERT]);
    }

    #[test]
    fn garbage_in_the_secret_is_replaced() {
        let mut current = BTreeMap::new();
        current.insert(CA_CERT.to_owned(), "not a certificate".to_owned());
        current.insert(TLS_CERT.to_owned(), "nor this".to_owned());
        let data = desired(&current, &["x.ns.svc"], LIFETIMES, now()).unwrap();
        assert!(parse(&data[CA_CERT]).is_some() && parse(&data[TLS_CERT]).is_some());
        assert!(!data.contains_key(CA_PREVIOUS));
    }
}
