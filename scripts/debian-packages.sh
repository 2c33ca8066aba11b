#!/usr/bin/env bash
# Installs Debian packages that are missing: `debian-packages.sh <what needs them> <package>...`.
# Needs root only when something is missing, so a second run does nothing and needs nothing.
set -euo pipefail

needed_by=$1
shift
missing=()
for package in "$@"; do
	dpkg-query -W -f='${Status}' "${package}" 2>/dev/null | grep -q 'install ok installed' \
		|| missing+=("${package}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "${needed_by} needs ${missing[*]}: run $0 as root, or install them" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed ${missing[*]} for ${needed_by}"
