//! Lists in the API server's audit log, told apart by how they were sent: which recorded request
//! starts a list, paged, streamed or refused. The end-to-end suite and the benchmark count the
//! controller's lists with it, so both read the log alike. The local cluster's audit policies
//! (`tests/cluster/audit-policy.yaml`, `bench/audit-policy.yaml`) omit the `RequestReceived`
//! stage, so each request is seen at most once per stage this reads.

use serde_json::Value;

/// How a recorded request starts a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListStart {
    /// A LIST's first page (a list of many objects takes several).
    Paged,
    /// A watch with `sendInitialEvents`, once the API server starts answering it (a watch is
    /// complete only when it ends).
    Streamed,
    /// A watch with `sendInitialEvents` the API server refused (its WatchList gate off).
    Refused,
}

/// How `event`, one line of the audit log, starts a list, if it does.
pub fn list_start(event: &Value) -> Option<ListStart> {
    let uri = event["requestURI"].as_str().unwrap_or_default();
    let refusal = event["responseStatus"]["code"]
        .as_u64()
        .is_some_and(|code| code >= 400);
    let streamed = uri.contains("sendInitialEvents=true");
    match (event["verb"].as_str()?, event["stage"].as_str()?) {
        ("list", "ResponseComplete") if !uri.contains("continue=") => Some(ListStart::Paged),
        ("watch", "ResponseComplete") if streamed && refusal => Some(ListStart::Refused),
        ("watch", "ResponseStarted") if streamed && !refusal => Some(ListStart::Streamed),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(verb: &str, stage: &str, uri: &str, code: u64) -> Value {
        json!({"verb": verb, "stage": stage, "requestURI": uri, "responseStatus": {"code": code}})
    }

    #[test]
    fn a_list_starts_at_its_first_page_or_its_streamed_watch() {
        let page = "/apis/batch/v1/jobs?limit=500";
        let next_page = "/apis/batch/v1/jobs?continue=abc&limit=500";
        let streamed = "/apis/batch/v1/jobs?sendInitialEvents=true&watch=true";
        let resumed = "/apis/batch/v1/jobs?resourceVersion=9&watch=true";
        let read = |verb, stage, uri, code| list_start(&event(verb, stage, uri, code));
        assert_eq!(
            read("list", "ResponseComplete", page, 200),
            Some(ListStart::Paged)
        );
        assert_eq!(read("list", "ResponseComplete", next_page, 200), None);
        assert_eq!(
            read("watch", "ResponseStarted", streamed, 200),
            Some(ListStart::Streamed)
        );
        assert_eq!(read("watch", "ResponseComplete", streamed, 200), None);
        assert_eq!(
            read("watch", "ResponseComplete", streamed, 422),
            Some(ListStart::Refused)
        );
        assert_eq!(read("watch", "ResponseStarted", resumed, 200), None);
    }
}
