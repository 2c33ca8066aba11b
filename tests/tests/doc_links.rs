//! Links the book's own check (mdbook-linkcheck2, `make book-check`) does not cover: every
//! relative link of README.md and ARCHITECTURE.md must name a file or folder of the checkout,
//! and every `page.md#heading` link there and in the book must name a heading of that page
//! (linkcheck2 checks that the page exists, not the heading). The pages are read with
//! pulldown-cmark, the CommonMark parser mdBook itself uses, so text in code is never a link.

use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The targets of `text`'s links that are not web addresses or anchors on the page itself.
fn relative_links(text: &str) -> Vec<String> {
    Parser::new(text)
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. }) => Some(dest_url.into_string()),
            _ => None,
        })
        .filter(|target| !target.contains("://") && !target.starts_with('#'))
        .collect()
}

/// The anchors of `text`'s headings, as mdBook and GitHub make them: the heading's text in
/// lower case, punctuation dropped, spaces turned into dashes.
fn anchors(text: &str) -> Vec<String> {
    let mut anchors = Vec::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(text) {
        match (event, heading.as_mut()) {
            (Event::Start(Tag::Heading { .. }), _) => heading = Some(String::new()),
            (Event::Text(text) | Event::Code(text), Some(words)) => words.push_str(&text),
            (Event::End(TagEnd::Heading(_)), Some(words)) => {
                anchors.push(
                    words
                        .trim()
                        .to_lowercase()
                        .chars()
                        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
                        .map(|c| if c == ' ' { '-' } else { c })
                        .collect(),
                );
                heading = None;
            }
            _ => {}
        }
    }
    anchors
}

/// What is wrong with `page`'s relative links: a target that does not exist, or a fragment
/// naming no heading of its target.
fn broken_links(page: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap_or_else(|error| panic!("{page:?}: {error}"));
    let folder = page.parent().expect("a page's folder");
    let mut broken = Vec::new();
    for target in relative_links(&text) {
        let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
        let file = folder.join(path);
        if !file.exists() {
            broken.push(format!("{target}: no such file"));
        } else if !fragment.is_empty() {
            let headings = anchors(&std::fs::read_to_string(&file).unwrap_or_default());
            if !headings.iter().any(|anchor| anchor == fragment) {
                broken.push(format!("{target}: no such heading"));
            }
        }
    }
    broken
}

fn book_pages(folder: &Path, pages: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).expect("reading docs/").flatten() {
        let path = entry.path();
        if path.is_dir() {
            book_pages(&path, pages);
        } else if path.extension().is_some_and(|extension| extension == "md") {
            pages.push(path);
        }
    }
}

#[test]
fn every_relative_link_names_a_file_and_every_fragment_a_heading() {
    let root = checkout();
    let mut pages = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    book_pages(&root.join("docs"), &mut pages);
    let broken: Vec<String> = pages
        .iter()
        .flat_map(|page| {
            let name = page
                .strip_prefix(&root)
                .unwrap_or(page)
                .display()
                .to_string();
            broken_links(page)
                .into_iter()
                .map(move |link| format!("{name}: {link}"))
        })
        .collect();
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

#[test]
fn a_missing_page_or_heading_is_broken_and_code_or_a_web_address_is_not_a_link() {
    let folder = tempfile::tempdir().unwrap();
    let a = "# A page\n\n## Any object, through `x`\n\n```sh\n# not-a-heading\n```\n";
    std::fs::write(folder.path().join("a.md"), a).unwrap();
    let page = folder.path().join("b.md");
    let b = "[ok](a.md#any-object-through-x) [no](a.md#elsewhere) [gone](c.md) \
             [code](a.md#not-a-heading) `[x](nowhere.md)` [web](https://x/y) [here](#top)";
    std::fs::write(&page, b).unwrap();
    assert_eq!(
        broken_links(&page),
        [
            "a.md#elsewhere: no such heading",
            "c.md: no such file",
            "a.md#not-a-heading: no such heading"
        ]
    );
}
