# Sourced by the build scripts that build from pinned Go modules (tests/cluster/build.sh,
# bench/peers/build.sh), from their own directory. Each output is stamped with what it was built
# from (a `built-from` file) and skipped while that stands, even when Go's caches are empty (CI's
# drop-go-caches empties them, and a Kubernetes minor rebuilt from nothing takes ten minutes).

# inputs FILE...: what an output depends on: Go's version, the sourcing build.sh and FILE...
# (the pinned modules' .mod and .sum).
inputs() { go version; sha256sum build.sh "$@"; }

# fresh STAMP FILE...: whether STAMP records the inputs FILE... as they are now.
fresh() { [[ -f $1 ]] && diff -q "$1" <(inputs "${@:2}") > /dev/null; }

# executables FILE...: whether every FILE is there and executable.
executables() {
	local file
	for file; do [[ -x ${file} ]] || return 1; done
}
