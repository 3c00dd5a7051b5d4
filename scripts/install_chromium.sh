#!/usr/bin/env bash
# Debian's Chromium (/usr/bin/chromium), the browser that Playwright for Python drives in the docs site's test
# (tests/unit/project/test_docs_site.py) and in the deployment and smoke tests (deployment/browser.py): Playwright's own
# browser download is not used. Does nothing when it is installed; installs it with apt-get when we are root;
# otherwise says how, and exits 1 (the browser tests then fail, saying the same).
set -euo pipefail
CHROMIUM=/usr/bin/chromium
if [[ -x $CHROMIUM ]]; then
    exit 0
fi
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "$CHROMIUM is missing: install Debian's chromium package (as root: apt-get install -y chromium)" >&2
    exit 1
fi
echo "$CHROMIUM is missing: installing Debian's chromium package"
echo "+ apt-get update -qq"
apt-get update -qq
echo "+ apt-get install -y -qq --no-install-recommends chromium"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
