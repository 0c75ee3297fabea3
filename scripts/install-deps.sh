#!/bin/sh
# Installs the Debian packages transcriber needs at run and test time.
# Idempotent: packages already present are skipped, so repeated runs are fast
# and do not need the network.
set -eu

# postgresql: the tests of the split topology run its initdb and pg_ctl for
# a throwaway server of their own; the cluster the package sets up is unused.
# chromium: the page's tests drive it headless.
packages="ffmpeg pocketsphinx pocketsphinx-en-us pocketsphinx-testdata espeak-ng postgresql chromium"

missing=""
for p in $packages; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "installing missing packages:$missing" >&2
sudo=""
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 || {
		echo "need root to install:$missing (run as root or install sudo)" >&2
		exit 1
	}
	sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing
