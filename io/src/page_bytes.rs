//! Each page of a paged list held to a byte bound (`--list-page-bytes`), whatever its objects
//! weigh.
//!
//! A paged list asks for [`PAGE_SIZE`](crate::initial_list::PAGE_SIZE) objects a page, and
//! kube reads each page's response whole before decoding it: a namespace editor's 500 Jobs of
//! 1.4 MB made one page of 700 MB, on every Kubernetes that pages (1.33, whose WatchList gate is
//! off, or any after a streamed list is cut). The API server has no byte limit for a page, so the
//! bound is kept here, between kube and the API server ([`PageBytes`], a layer of the client
//! every watch and the Cleaners share): a page's body is read up to the bound and, past it,
//! dropped unread and asked for again with half as many objects, from the same continue token,
//! down to one object a page (one object is as large as the API server stores: etcd's 1.5 MiB
//! limit). The watcher above sees pages of fewer objects, which it follows as it follows any.
//!
//! What fit is remembered per collection, so the pages after the first are asked for at that
//! size at once, doubling again while a page comes back under a quarter of the bound. Lists take
//! turns (`--list-concurrency`), so the text of pages read at once is at most that many bounds.
//!
//! Hand-written: kube-runtime's watcher has a page size, not a page weight, and kube reads a
//! response whole, so no setting of either bounds a page's bytes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use http::{Method, Request, Response, Uri};
use http_body_util::{BodyExt, Either, Full};
use kube::api::DynamicObject;
use kube::client::Body;
use kube_retention_runtime::held::{Weighed, allocation, map_bytes, slots_bytes};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use tower::{BoxError, Layer, Service, ServiceExt};

use crate::initial_list::api_of;
use crate::lean::SKIPPED;

/// The most a page's body may weigh by default: 4 MiB, some 800 Jobs of a usual 5 KB.
pub const PAGE_BYTES: usize = 4 * 1024 * 1024;

/// What a page's objects may hold decoded, in bounds of its text: 16 MiB by default. A usual
/// Job of 3 KB holds some 18 KB decoded lean, so 500 of them (a page as the list asks for it)
/// fit; objects of small maps hold up to a hundred times their text, and their pages are cut.
const HELD_PER_TEXT: usize = 4;

/// Collections whose page size that fits is remembered; past it the memory starts afresh.
const REMEMBERED: usize = 4096;

/// The query parameter a paged list asks for its page size with.
const LIMIT: &str = "limit";

/// A page read again with fewer objects: the API (`/api`, `/apis/GROUP`) of its collection.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PageLabels {
    pub api: String,
}

/// The layer holding each page of a paged list to `bound` bytes (see the module); its clones
/// share what fit and the count of pages read again.
#[derive(Clone, Debug)]
pub struct PageBytes {
    bound: usize,
    fits: Fits,
    read_again: Family<PageLabels, Counter>,
}

impl PageBytes {
    /// Pages of at most `bound` bytes (one object's, where one object alone weighs more).
    pub fn new(bound: usize) -> Self {
        Self {
            bound,
            fits: Fits::default(),
            read_again: Family::default(),
        }
    }

    /// Counts each page read again with fewer objects in `read_again` (the metric), by API.
    pub fn counting(mut self, read_again: Family<PageLabels, Counter>) -> Self {
        self.read_again = read_again;
        self
    }

    /// `client`, with every page it reads held to the bound: a client of its own around it.
    pub fn client(&self, client: kube::Client) -> kube::Client {
        let namespace = client.default_namespace().to_owned();
        let sending = tower::service_fn(move |request: Request<Body>| {
            let client = client.clone();
            async move { client.send(request).await }
        });
        kube::client::ClientBuilder::new(self.layer(sending), namespace).build()
    }
}

impl<S> Layer<S> for PageBytes {
    type Service = Bounded<S>;

    fn layer(&self, inner: S) -> Bounded<S> {
        Bounded {
            inner,
            pages: self.clone(),
        }
    }
}

/// The page size that last fit, per collection (its path), where it is less than asked for.
#[derive(Clone, Debug, Default)]
struct Fits(Arc<Mutex<HashMap<String, u32>>>);

impl Fits {
    fn get(&self, path: &str) -> Option<u32> {
        self.sizes().get(path).copied()
    }

    /// Records that a page of `asked` objects came back in `weight` bytes, of `bound`, where
    /// the list asked for `wanted` a page.
    fn record(&self, path: &str, asked: u32, wanted: u32, weight: usize, bound: usize) {
        let next = if weight < bound / 4 {
            asked.saturating_mul(2)
        } else {
            asked
        };
        let mut sizes = self.sizes();
        if next >= wanted {
            sizes.remove(path);
            return;
        }
        if sizes.len() >= REMEMBERED && !sizes.contains_key(path) {
            sizes.clear();
        }
        sizes.insert(path.to_owned(), next);
    }

    fn sizes(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A service whose paged lists' pages are held to a byte bound.
#[derive(Clone, Debug)]
pub struct Bounded<S> {
    inner: S,
    pages: PageBytes,
}

/// A response's body: a page read whole within its bound, or any other response as it comes.
pub type BoundedBody<B> = Either<Full<Bytes>, B>;

impl<S, B> Service<Request<Body>> for Bounded<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<BoundedBody<B>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(context).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // The clone that was made ready serves this call; the next call readies its own.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let Some(page) = Page::asked_by(&request) else {
            return Box::pin(async move {
                let response = inner.call(request).await.map_err(Into::into)?;
                Ok(response.map(Either::Right))
            });
        };
        let pages = self.pages.clone();
        Box::pin(async move {
            let mut asked = pages
                .fits
                .get(&page.path)
                .unwrap_or(page.wanted)
                .min(page.wanted);
            let mut ready = Some(inner.call(page.request(&request, asked)?));
            loop {
                let sent = match ready.take() {
                    Some(sent) => sent,
                    None => inner
                        .ready()
                        .await
                        .map_err(Into::into)?
                        .call(page.request(&request, asked)?),
                };
                let (parts, body) = sent.await.map_err(Into::into)?.into_parts();
                // One object a page is as small as a page gets: read whole.
                let bound = if asked > 1 { pages.bound } else { usize::MAX };
                let held_bound = bound.saturating_mul(HELD_PER_TEXT);
                let read = read_within(body, bound)
                    .await?
                    .map(|read| {
                        let held = if asked > 1 { page_held(&read) } else { 0 };
                        (read, held)
                    })
                    .filter(|(_, held)| *held <= held_bound);
                match read {
                    Some((read, held)) => {
                        let weight = read.len().max(held / HELD_PER_TEXT);
                        pages
                            .fits
                            .record(&page.path, asked, page.wanted, weight, pages.bound);
                        return Ok(Response::from_parts(parts, Either::Left(Full::new(read))));
                    }
                    None => {
                        pages
                            .read_again
                            .get_or_create(&PageLabels {
                                api: api_of(&page.path),
                            })
                            .inc();
                        tracing::debug!(collection = %page.path, objects = asked, bound = pages.bound, "a page outweighed its bound: asking for half as many objects");
                        asked = (asked / 2).max(1);
                    }
                }
            }
        })
    }
}

/// A request for one page of a paged list: a GET with a `limit` and no `watch`.
struct Page {
    path: String,
    /// The page size the list asked for.
    wanted: u32,
}

impl Page {
    fn asked_by(request: &Request<Body>) -> Option<Self> {
        if request.method() != Method::GET {
            return None;
        }
        let query = request.uri().query()?;
        let mut wanted = None;
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            match &*key {
                "watch" => return None,
                LIMIT => wanted = value.parse::<u32>().ok().filter(|limit| *limit > 0),
                _ => {}
            }
        }
        Some(Self {
            path: request.uri().path().to_owned(),
            wanted: wanted?,
        })
    }

    /// `original` asking for `objects` a page instead, the rest of it as it was (a GET has no
    /// body).
    fn request(&self, original: &Request<Body>, objects: u32) -> Result<Request<Body>, BoxError> {
        let query = original.uri().query().unwrap_or_default();
        let mut rewritten = form_urlencoded::Serializer::new(String::new());
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            if key == LIMIT {
                rewritten.append_pair(LIMIT, &objects.to_string());
            } else {
                rewritten.append_pair(&key, &value);
            }
        }
        let mut uri = original.uri().clone().into_parts();
        uri.path_and_query = Some(format!("{}?{}", self.path, rewritten.finish()).parse()?);
        let mut request = Request::new(Body::from(Vec::new()));
        *request.method_mut() = original.method().clone();
        *request.uri_mut() = Uri::from_parts(uri)?;
        *request.version_mut() = original.version();
        *request.headers_mut() = original.headers().clone();
        *request.extensions_mut() = original.extensions().clone();
        Ok(request)
    }
}

/// What the objects of the page `text` hold decoded, as the watches decode them (`lean.rs`: an
/// object's metadata less `managedFields`, and its data), read from the text without decoding
/// any of it ([`Weighed`]); 0 for text that is not a list, which kube then reports as it is.
fn page_held(text: &[u8]) -> usize {
    PageHeld
        .deserialize(&mut serde_json::Deserializer::from_slice(text))
        .unwrap_or(0)
}

/// A page: the weight of its `items`, the rest read past.
struct PageHeld;

impl<'de> DeserializeSeed<'de> for PageHeld {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PageHeld {
    type Value = usize;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a page of a list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<usize, A::Error> {
        let mut held = 0usize;
        while let Some(key) = fields.next_key_seed(Key)? {
            if key == "items" {
                held = held.saturating_add(fields.next_value_seed(ItemsHeld)?);
            } else {
                fields.next_value::<IgnoredAny>()?;
            }
        }
        Ok(held)
    }
}

/// A page's objects: each as held ([`ObjectHeld`]), and the slots of the vector holding them.
struct ItemsHeld;

impl<'de> DeserializeSeed<'de> for ItemsHeld {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ItemsHeld {
    type Value = usize;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a list's items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<usize, A::Error> {
        let (mut count, mut held) = (0usize, 0usize);
        while let Some(item) = items.next_element_seed(ObjectHeld { skipping: None })? {
            count += 1;
            held = held.saturating_add(item);
        }
        Ok(held.saturating_add(slots_bytes(count, std::mem::size_of::<DynamicObject>())))
    }
}

/// An object (or its metadata, `skipping` [`SKIPPED`]) as a tree of its fields: never less than
/// its lean decoding holds, which keeps the metadata's fields in a struct of its own.
struct ObjectHeld {
    skipping: Option<&'static str>,
}

impl<'de> DeserializeSeed<'de> for ObjectHeld {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ObjectHeld {
    type Value = usize;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<usize, A::Error> {
        let (mut entries, mut held) = (0usize, 0usize);
        while let Some(key) = fields.next_key_seed(Key)? {
            let value = match &*key {
                skipped if Some(skipped) == self.skipping => {
                    fields.next_value::<IgnoredAny>()?;
                    continue;
                }
                "metadata" if self.skipping.is_none() => fields.next_value_seed(ObjectHeld {
                    skipping: Some(SKIPPED),
                })?,
                _ => fields.next_value_seed(Weighed::default())?,
            };
            entries += 1;
            held = held
                .saturating_add(allocation(key.len()))
                .saturating_add(value);
        }
        Ok(held.saturating_add(map_bytes(entries)))
    }
}

/// A map's key, borrowed from the text where it has no escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a map's key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key.to_owned()))
    }
}

/// `body` read whole if it weighs at most `bound` bytes; `None`, the rest left unread, if not.
async fn read_within<B>(body: B, bound: usize) -> Result<Option<Bytes>, BoxError>
where
    B: http_body::Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut read = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(Into::into)?.into_data() else {
            continue;
        };
        if data.len() > bound.saturating_sub(read.len()) {
            return Ok(None);
        }
        read.extend_from_slice(&data);
    }
    Ok(Some(read.freeze()))
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body::Frame;
    use http_body_util::StreamBody;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use kube::api::ListParams;
    use proptest::prelude::*;

    use super::*;

    /// What a page's body is sent in: the API server's writes.
    const CHUNK: usize = 16 * 1024;

    /// A body sent in chunks.
    type Chunked =
        StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

    /// A collection of ConfigMaps, of the sizes asked for, served in pages as the API server
    /// serves them (the continue token is the next object's index), each page's body in chunks;
    /// every page size it was asked for recorded.
    #[derive(Clone)]
    struct Collection {
        objects: Arc<Vec<String>>,
        asked: Arc<Mutex<Vec<u32>>>,
    }

    impl Collection {
        fn of_sizes(sizes: &[usize]) -> Self {
            let shapes: Vec<(usize, bool)> = sizes.iter().map(|size| (*size, false)).collect();
            Self::of_shapes(&shapes)
        }

        /// Objects of about the sizes given, each of one long string or, where dense, of a list
        /// of one-entry maps (in a field a ConfigMap's decoding reads past).
        fn of_shapes(shapes: &[(usize, bool)]) -> Self {
            let objects = shapes
                .iter()
                .enumerate()
                .map(|(index, (size, dense))| {
                    let body = match dense {
                        false => format!(r#""data":{{"x":"{}"}}"#, "a".repeat(*size)),
                        true => format!(
                            r#""spec":{{"env":[{}]}}"#,
                            vec![r#"{"name":"E"}"#; size / 13].join(",")
                        ),
                    };
                    format!(
                        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{index}","namespace":"tenant"}},{body}}}"#
                    )
                })
                .collect();
            Self {
                objects: Arc::new(objects),
                asked: Arc::default(),
            }
        }

        fn asked(&self) -> Vec<u32> {
            self.asked.lock().unwrap().clone()
        }

        fn serve(&self, request: &Request<Body>) -> Response<Chunked> {
            let query = request.uri().query().unwrap_or_default();
            let mut limit = usize::MAX;
            let mut from: usize = 0;
            for (key, value) in form_urlencoded::parse(query.as_bytes()) {
                match &*key {
                    "limit" => limit = value.parse().unwrap(),
                    "continue" => from = value.parse().unwrap(),
                    _ => {}
                }
            }
            self.asked
                .lock()
                .unwrap()
                .push(u32::try_from(limit).unwrap_or(u32::MAX));
            let to = from.saturating_add(limit).min(self.objects.len());
            let next = if to < self.objects.len() {
                format!(r#","continue":"{to}""#)
            } else {
                String::new()
            };
            let text = format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMapList","metadata":{{"resourceVersion":"7"{next}}},"items":[{}]}}"#,
                self.objects[from..to].join(",")
            );
            let frames: Vec<_> = Bytes::from(text)
                .chunks(CHUNK)
                .map(|chunk| Ok(Frame::data(Bytes::copy_from_slice(chunk))))
                .collect();
            Response::new(StreamBody::new(futures::stream::iter(frames)))
        }
    }

    /// A page handed to kube: its text's bytes, what its objects hold decoded, and the page
    /// size it was asked at.
    #[derive(Debug, Clone, Copy)]
    struct Handed {
        text: usize,
        held: usize,
        asked: u32,
    }

    /// Lists `collection` through kube's client behind the layer, `page_size` a page: the names
    /// listed, and each page handed to kube.
    async fn list(
        collection: &Collection,
        bound: usize,
        page_size: u32,
    ) -> (Vec<String>, Vec<Handed>) {
        let handed = Arc::new(Mutex::new(Vec::new()));
        let served = collection.clone();
        let api_server = tower::service_fn(move |request: Request<Body>| {
            let response = served.serve(&request);
            async move { Ok::<_, Infallible>(response) }
        });
        let recorded = handed.clone();
        let asked = collection.clone();
        let service = tower::ServiceBuilder::new()
            .map_response(move |response: Response<BoundedBody<Chunked>>| {
                let (parts, body) = response.into_parts();
                let Either::Left(page) = body else {
                    panic!("a page not read within its bound");
                };
                let text = futures::executor::block_on(page.collect())
                    .unwrap()
                    .to_bytes();
                recorded.lock().unwrap().push(Handed {
                    text: text.len(),
                    held: page_held(&text),
                    asked: *asked.asked().last().unwrap(),
                });
                Response::from_parts(parts, Either::<_, Chunked>::Left(Full::new(text)))
            })
            .layer(PageBytes::new(bound))
            .service(api_server);
        let client = kube::Client::new(service, "tenant");
        let api: Api<ConfigMap> = Api::namespaced(client, "tenant");
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(page_size);
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let page = api.list(&params).await.expect("a page");
            names.extend(page.items.into_iter().filter_map(|cm| cm.metadata.name));
            match page.metadata.continue_ {
                Some(next) if !next.is_empty() => token = Some(next),
                _ => break,
            }
        }
        let handed = handed.lock().unwrap().clone();
        (names, handed)
    }

    fn names(count: usize) -> Vec<String> {
        (0..count).map(|index| format!("cm-{index}")).collect()
    }

    #[tokio::test]
    async fn a_page_past_its_bound_is_asked_for_again_with_half_as_many_objects() {
        let collection = Collection::of_sizes(&[100 * 1024; 100]);
        let (listed, handed) = list(&collection, 1024 * 1024, 500).await;
        assert_eq!(listed, names(100));
        // 500 to 15 a page outweigh a MiB; 7 fit, and the next pages are asked for at 7.
        let mut expected = vec![500, 250, 125, 62, 31, 15];
        expected.extend([7; 15]);
        assert_eq!(collection.asked(), expected);
        assert!(handed.iter().all(|page| page.text <= 1024 * 1024));
        assert_eq!(handed.len(), 15);
    }

    #[tokio::test]
    async fn an_object_heavier_than_the_bound_comes_in_a_page_of_its_own() {
        let mut sizes = vec![1024; 20];
        sizes[10] = 3 * 1024 * 1024;
        let collection = Collection::of_sizes(&sizes);
        let (listed, handed) = list(&collection, 1024 * 1024, 500).await;
        assert_eq!(listed, names(20));
        let heavy: Vec<_> = handed
            .iter()
            .filter(|page| page.text > 1024 * 1024)
            .collect();
        assert_eq!(heavy.len(), 1, "{handed:?}");
        assert_eq!(heavy[0].asked, 1);
    }

    #[tokio::test]
    async fn a_page_whose_objects_hold_more_than_four_bounds_is_asked_for_again() {
        // 40 objects of 64 KB of one-entry maps: a page of them is 2.6 MB of text, within a
        // bound of 4 MiB, and some 170 MB decoded.
        let collection = Collection::of_shapes(&[(64 * 1024, true); 40]);
        let bound = 4 * 1024 * 1024;
        let (listed, handed) = list(&collection, bound, 500).await;
        assert_eq!(listed, names(40));
        assert!(handed.iter().all(|page| page.text <= bound), "{handed:?}");
        assert!(
            handed.iter().all(|page| page.held <= 4 * bound),
            "{handed:?}"
        );
        let first = handed.first().unwrap();
        assert!(first.asked < 40, "{handed:?}");
    }

    #[test]
    fn a_page_weighs_what_its_objects_hold_less_their_managed_fields() {
        let job =
            include_str!("../../controller/tests/testsuite/fixtures/job-with-managed-fields.json");
        let page = format!(r#"{{"kind":"JobList","metadata":{{}},"items":[{job},{job}]}}"#);
        let mut lean: serde_json::Value = serde_json::from_str(job).unwrap();
        lean["metadata"].as_object_mut().unwrap().remove(SKIPPED);
        let tree = kube_retention_runtime::held::held_bytes(&lean);
        let slots = slots_bytes(2, std::mem::size_of::<DynamicObject>());
        // The object as a tree of its fields, with its metadata's key.
        assert_eq!(page_held(page.as_bytes()), 2 * tree + slots);
        assert_eq!(page_held(b"not json"), 0);
        // An object nested past what is decoded weighs as far as it is read, and the page's
        // other objects as ever: a deep one does not make the page weigh nothing.
        let deep = format!(
            r#"{{"spec":{}1{}}}"#,
            r#"{"a":"#.repeat(5_000),
            "}".repeat(5_000)
        );
        let with_deep = format!(r#"{{"items":[{job},{deep}]}}"#);
        assert!(page_held(with_deep.as_bytes()) > tree);
    }

    #[tokio::test]
    async fn light_pages_are_asked_for_as_the_list_asks() {
        let collection = Collection::of_sizes(&[1024; 1200]);
        let (listed, _) = list(&collection, 4 * 1024 * 1024, 500).await;
        assert_eq!(listed, names(1200));
        assert_eq!(collection.asked(), vec![500, 500, 500]);
    }

    #[tokio::test]
    async fn what_fit_grows_again_once_the_objects_are_light() {
        // Ten heavy objects, then light ones: the pages grow back to what the list asks.
        let mut sizes = vec![512 * 1024; 10];
        sizes.extend([100; 2000]);
        let collection = Collection::of_sizes(&sizes);
        let (listed, _) = list(&collection, 1024 * 1024, 500).await;
        assert_eq!(listed, names(2010));
        let asked = collection.asked();
        assert_eq!(asked.last(), Some(&500), "{asked:?}");
    }

    #[tokio::test]
    async fn other_requests_pass_as_they_come() {
        let collection = Collection::of_sizes(&[8 * 1024 * 1024]);
        let served = collection.clone();
        let api_server = tower::service_fn(move |request: Request<Body>| {
            let response = served.serve(&request);
            async move { Ok::<_, Infallible>(response) }
        });
        let mut service = PageBytes::new(1024).layer(api_server);
        // A list with no page size, and a watch: not pages, so not held to the bound.
        for uri in [
            "/api/v1/namespaces/tenant/configmaps",
            "/api/v1/namespaces/tenant/configmaps?watch=true&limit=5",
        ] {
            let request = Request::get(uri).body(Body::from(Vec::new())).unwrap();
            let response = service.ready().await.unwrap().call(request).await.unwrap();
            assert!(matches!(response.body(), Either::Right(_)), "{uri}");
        }
        let page = Request::get("/api/v1/namespaces/tenant/configmaps?limit=5")
            .body(Body::from(Vec::new()))
            .unwrap();
        let response = service.ready().await.unwrap().call(page).await.unwrap();
        assert!(matches!(response.body(), Either::Left(_)));
    }

    #[test]
    fn a_page_request_keeps_all_it_asked_but_its_size() {
        let original = Request::get(
            "/apis/batch/v1/jobs?labelSelector=a%3Db%2Cc&limit=500&continue=eyJ2Ijo%3D",
        )
        .header("accept", "application/json")
        .body(Body::from(Vec::new()))
        .unwrap();
        let page = Page::asked_by(&original).unwrap();
        assert_eq!(
            (page.path.as_str(), page.wanted),
            ("/apis/batch/v1/jobs", 500)
        );
        let again = page.request(&original, 250).unwrap();
        let pairs: Vec<(String, String)> =
            form_urlencoded::parse(again.uri().query().unwrap().as_bytes())
                .into_owned()
                .collect();
        let expected: Vec<(String, String)> = [
            ("labelSelector", "a=b,c"),
            ("limit", "250"),
            ("continue", "eyJ2Ijo="),
        ]
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
        assert_eq!(pairs, expected);
        assert_eq!(again.headers()["accept"], "application/json");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Whatever the objects weigh, as text or decoded: every object listed once and in
        /// order, and every page handed to kube within the bound and its objects within four,
        /// unless it holds one object alone.
        #[test]
        fn every_page_is_within_its_bound_and_every_object_comes_once(
            sizes in prop::collection::vec(
                (
                    prop_oneof![
                        8 => 0usize..4 * 1024,
                        3 => 4 * 1024usize..256 * 1024,
                        1 => 256 * 1024usize..1536 * 1024,
                    ],
                    any::<bool>(),
                ),
                0..300,
            ),
            bound_kib in 64usize..4096,
            page_size in 1u32..600,
        ) {
            let bound = bound_kib * 1024;
            let collection = Collection::of_shapes(&sizes);
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let (listed, handed) = runtime.block_on(list(&collection, bound, page_size));
            prop_assert_eq!(listed, names(sizes.len()));
            for page in &handed {
                prop_assert!(
                    (page.text <= bound && page.held <= HELD_PER_TEXT * bound) || page.asked == 1,
                    "{:?}", page
                );
            }
            prop_assert!(collection.asked().iter().all(|asked| *asked <= page_size));
        }
    }
}
