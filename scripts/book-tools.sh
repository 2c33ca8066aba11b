#!/usr/bin/env bash
# The book's tools, from crates.io at pinned versions: mdbook builds docs/ (docs/book.toml) and
# mdbook-linkcheck2, its backend, checks every link between the pages and to the repository's
# files, offline. Each is installed with cargo into cargo's bin folder when missing or at another
# version; `make book` and `make book-check` run this first.
set -euo pipefail

MDBOOK=0.5.4
LINKCHECK=0.13.0

installed() {
	cargo install --list | grep -qx "$1 v$2:"
}

# mdbook without its `serve` and `watch` features: the book is built, never served, here.
installed mdbook "$MDBOOK" ||
	cargo install --locked mdbook --version "$MDBOOK" --no-default-features --features search
installed mdbook-linkcheck2 "$LINKCHECK" ||
	cargo install --locked mdbook-linkcheck2 --version "$LINKCHECK"
